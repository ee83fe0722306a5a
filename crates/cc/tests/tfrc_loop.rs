//! TFRC's sender and receiver together, across a bottleneck modelled here in virtual time (a
//! drop-tail queue in front of a fixed-rate link): the sender slows down as the receiver
//! reports losses, and its long-run rate settles near the bottleneck's, as TCP's would.

use metronome_cc::tfrc::TfrcReceiver;
use metronome_cc::{RateController, TfrcConfig, TfrcReport, TfrcSender};
use metronome_time::{Bitrate, Timestamp};
use std::collections::VecDeque;
use std::time::Duration;

const S: usize = 1000;

/// Runs `secs` of a TFRC flow over a link of `link_bps` with `queue` packets of buffer and
/// `one_way` delay each way; returns the bytes delivered in each second, and the loss events
/// the receiver counted.
fn run(link_bps: u64, queue: usize, one_way: Duration, secs: u64) -> (Vec<f64>, u64) {
    let mut sender = TfrcSender::new(
        TfrcConfig::new(S as u32, Bitrate::mbps(100)),
        Timestamp::ZERO,
    );
    let mut receiver = TfrcReceiver::new(Duration::from_millis(500));
    let serialize = Duration::from_nanos(S as u64 * 8 * 1_000_000_000 / link_bps);
    // The bottleneck's queue: (seq, sent); the link is busy until `busy`.
    let mut queued: VecDeque<(u64, Timestamp)> = VecDeque::new();
    let mut busy = Timestamp::ZERO;
    // Packets on their way to the receiver, reports on their way back.
    let mut arriving: VecDeque<(Timestamp, u64, Timestamp)> = VecDeque::new();
    let mut reports: VecDeque<(Timestamp, TfrcReport)> = VecDeque::new();
    let mut delivered = vec![0.0; secs as usize];
    let (mut last_send, mut seq) = (None::<Timestamp>, 0u64);
    // When each sequence number left: the sender's own record, for the reports' echoes.
    let mut sent_at: Vec<Timestamp> = Vec::new();
    let step = Duration::from_micros(100);
    let mut now = Timestamp::ZERO;
    let end = Timestamp::from_secs(secs);
    while now < end {
        // The sender paces at its allowed rate, as it is now; a full queue drops the packet.
        let rate = sender.target_rate().as_bps().max(8) as f64 / 8.0;
        let due = last_send.map_or(Timestamp::ZERO, |t| {
            t + Duration::from_secs_f64(S as f64 / rate)
        });
        if due <= now {
            if queued.len() < queue {
                queued.push_back((seq, now));
            }
            seq += 1;
            sent_at.push(now);
            last_send = Some(now);
            sender.on_sent(now, S as u64);
        }
        if busy <= now {
            if let Some((k, sent)) = queued.pop_front() {
                busy = now + serialize;
                arriving.push_back((busy + one_way, k, sent));
            }
        }
        while let Some(&(at, k, sent)) = arriving.front().filter(|a| a.0 <= now) {
            arriving.pop_front();
            receiver.on_packet(at, k, sent, S);
            delivered[(at.as_nanos() / 1_000_000_000).min(secs - 1) as usize] += S as f64;
        }
        if let Some(rep) = receiver.poll_report(now) {
            // What the sender works out: the echoed packet's send time, less the delay.
            let sent = sent_at[rep.echo_seq as usize];
            let back = now + one_way;
            let rtt = back.saturating_since(sent).saturating_sub(rep.t_delay);
            let report = TfrcReport {
                p: rep.p,
                x_recv_bps: rep.x_recv_bytes_per_s * 8.0,
                rtt_sample: rtt,
            };
            reports.push_back((back, report));
        }
        while let Some(&(at, r)) = reports.front().filter(|r| r.0 <= now) {
            reports.pop_front();
            sender.on_report(at, &r);
            if let Some(rtt) = sender.rtt() {
                receiver.set_rtt(rtt);
            }
        }
        if sender.poll_timeout().is_some_and(|(t, _)| t <= now) {
            sender.handle_timeout(now);
        }
        now += step;
    }
    (delivered, receiver.history().counts().0)
}

#[test]
fn tfrc_settles_near_the_bottleneck_rate() {
    // 2 Mbit/s (250 kB/s), 40 ms round trip, 20 packets of queue.
    let (per_s, loss_events) = run(2_000_000, 20, Duration::from_millis(20), 40);
    let kb: Vec<f64> = per_s.iter().map(|b| (b / 1000.0).round()).collect();
    eprintln!("kB delivered per second: {kb:?}; {loss_events} loss events");
    // It probed past the link (the queue overflowed) and backed off.
    assert!(loss_events > 0);
    let late: f64 = per_s[20..].iter().sum::<f64>() / 20.0;
    // It fills most of the link, and cannot exceed it.
    assert!(
        late > 0.7 * 250_000.0 && late <= 250_000.0 * 1.001,
        "{late}"
    );
    // It started slowly (one packet a second, then slow start).
    assert!(per_s[0] < 250_000.0, "{kb:?}");
}
