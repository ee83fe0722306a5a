//! GCC's sender fed by a receiver's per-packet reports (every 50 ms, as RFC 8888 feedback
//! would be), across a bottleneck modelled here in virtual time: a drop-tail queue of 50
//! packets in front of a fixed-rate link. GCC is delay-based: it should fill the link while
//! keeping the queue short, where a loss-based controller fills the buffer.

use metronome_cc::{GccConfig, GccSender, PacketResult, RateController};
use metronome_time::{Bitrate, Timestamp};
use std::collections::VecDeque;
use std::time::Duration;

const S: u32 = 1200;

struct Outcome {
    /// Bytes delivered in each second.
    delivered: Vec<f64>,
    /// Queueing delay of each packet the link sent, with the second it left the queue.
    queue_ms: Vec<(usize, f64)>,
    dropped: u64,
    sender: GccSender,
}

fn run(link_bps: u64, queue: usize, one_way: Duration, secs: u64) -> Outcome {
    let mut sender = GccSender::new(GccConfig::new(Bitrate::kbps(300), Bitrate::mbps(20)));
    let serialize = Duration::from_nanos(u64::from(S) * 8 * 1_000_000_000 / link_bps);
    let mut queued: VecDeque<(u64, Timestamp)> = VecDeque::new();
    let mut busy = Timestamp::ZERO;
    // Packets on their way (arrival, seq, sent), the receiver's unreported results, and
    // reports on their way back (due, results).
    let mut arriving: VecDeque<(Timestamp, u64, Timestamp)> = VecDeque::new();
    let mut unreported: Vec<PacketResult> = Vec::new();
    let mut reports: VecDeque<(Timestamp, Vec<PacketResult>)> = VecDeque::new();
    let mut sent_log: VecDeque<(u64, Timestamp)> = VecDeque::new();
    let mut next_report = Timestamp::from_millis(50);
    let mut out = Outcome {
        delivered: vec![0.0; secs as usize],
        queue_ms: Vec::new(),
        dropped: 0,
        sender: sender.clone(),
    };
    let (mut next_send, mut seq, mut highest_reported) = (Timestamp::ZERO, 0u64, 0u64);
    let step = Duration::from_micros(100);
    let mut now = Timestamp::ZERO;
    let end = Timestamp::from_secs(secs);
    while now < end {
        if now >= next_send {
            let rate = sender.target_rate().as_bps().max(8_000) as f64;
            next_send = now + Duration::from_secs_f64(f64::from(S) * 8.0 / rate);
            sent_log.push_back((seq, now));
            sender.on_sent(now, u64::from(S));
            if queued.len() < queue {
                queued.push_back((seq, now));
            } else {
                out.dropped += 1;
            }
            seq += 1;
        }
        // The link serializes the head of the queue.
        if busy <= now {
            if let Some((n, sent)) = queued.pop_front() {
                let start = busy.max(now);
                out.queue_ms.push((
                    (start.as_nanos() / 1_000_000_000) as usize,
                    start.saturating_since(sent).as_secs_f64() * 1e3,
                ));
                busy = start + serialize;
                arriving.push_back((busy + one_way, n, sent));
            }
        }
        while arriving.front().is_some_and(|a| a.0 <= now) {
            let (at, n, _) = arriving.pop_front().unwrap();
            let sec = (at.as_nanos() / 1_000_000_000) as usize;
            if sec < out.delivered.len() {
                out.delivered[sec] += f64::from(S);
            }
            unreported.push(PacketResult {
                seq: n,
                sent: Timestamp::ZERO,
                size: S,
                received: true,
                // The receiver's clock runs 7 s ahead: only differences may count.
                arrived: Some(at + Duration::from_secs(7)),
            });
        }
        // Every 50 ms the receiver reports what arrived and, for the gaps below the highest
        // sequence number it saw, what did not.
        if now >= next_report {
            next_report = now + Duration::from_millis(50);
            if let Some(top) = unreported.iter().map(|r| r.seq).max() {
                let mut block = Vec::new();
                for s in highest_reported..=top {
                    let arrived = unreported
                        .iter()
                        .find(|r| r.seq == s)
                        .and_then(|r| r.arrived);
                    block.push((s, arrived));
                }
                highest_reported = top + 1;
                unreported.clear();
                reports.push_back((
                    now + one_way,
                    block
                        .into_iter()
                        .map(|(s, arrived)| PacketResult {
                            seq: s,
                            sent: Timestamp::ZERO,
                            size: S,
                            received: arrived.is_some(),
                            arrived,
                        })
                        .collect(),
                ));
            }
        }
        while reports.front().is_some_and(|r| r.0 <= now) {
            let (_, mut results) = reports.pop_front().unwrap();
            // The sender fills in its send times.
            for r in &mut results {
                while sent_log.front().is_some_and(|s| s.0 < r.seq) {
                    sent_log.pop_front();
                }
                if let Some(&(s, t)) = sent_log.front() {
                    if s == r.seq {
                        r.sent = t;
                    }
                }
            }
            sender.on_packet_results(now, &results);
        }
        now += step;
    }
    out.sender = sender;
    out
}

#[test]
fn gcc_fills_the_link_and_keeps_the_queue_short() {
    // 2 Mbit/s, 40 ms each way, 50 packets of buffer (240 ms at the link's rate).
    let o = run(2_000_000, 50, Duration::from_millis(40), 90);
    let kbps: Vec<f64> = o.delivered.iter().map(|b| b * 8.0 / 1e3).collect();
    let late: Vec<f64> = o
        .queue_ms
        .iter()
        .filter(|q| q.0 >= 45)
        .map(|q| q.1)
        .collect();
    let mean_queue = late.iter().sum::<f64>() / late.len().max(1) as f64;
    let mut sorted = late.clone();
    sorted.sort_by(f64::total_cmp);
    let p95 = sorted.get(sorted.len() * 95 / 100).copied().unwrap_or(0.0);
    let util = kbps[45..].iter().sum::<f64>() / (kbps.len() - 45) as f64 / 2000.0;
    eprintln!(
        "kbit/s per second: {kbps:?}\nqueue after 45 s: mean {mean_queue:.1} ms, p95 {p95:.1} ms; \
         link used {:.0} %; {} dropped; {:?}",
        util * 100.0,
        o.dropped,
        o.sender.counters()
    );
    // It ramps up (8 % a second from 300 kbit/s) and then uses most of the link...
    assert!(util > 0.7, "utilization {util}");
    // ...while the queue stays far below the 240 ms a full buffer holds.
    assert!(mean_queue < 60.0, "mean queueing delay {mean_queue} ms");
    assert!(o.sender.counters().decreases >= 1);
}
