//! The sender and receiver sessions, unchanged, through simulated links in virtual time.
//! Every figure the receiver reports is checked against a value worked out from the link's
//! configuration or from what the link actually did. These tests take milliseconds.

use metronome_netsim::{Link, LinkConfig, LossModel};
use metronome_session::receiver::{ReceiverConfig, ReceiverSession};
use metronome_session::sender::{
    Mp2tPacketizer, PacketizerConfig, SenderReports, SenderReportsConfig,
};
use metronome_time::{MediaClock, NtpTime, Timestamp};
use std::net::SocketAddr;
use std::time::Duration;

/// A 5 Mbit/s constant-rate TS stream: one TS packet every 300.8 µs, so an RTP packet of 7
/// every 2.1056 ms.
const TS_INTERVAL_NS: u64 = 300_800;

/// Runs `packets` RTP packets from sender to receiver over `fwd`, with RTCP back over `back`.
/// `wire_size` gives each packet's size on the link (defaults to its real length).
struct Run {
    receiver: ReceiverSession,
    reports: SenderReports,
    fwd: Link<Vec<u8>>,
    /// (arrival, extended position in send order) of every delivered packet, in arrival order.
    delivered: Vec<(Timestamp, u64)>,
}

fn wall(t: Timestamp) -> NtpTime {
    // On one host both sides share a wall clock: 2026-01-01 + virtual time.
    NtpTime::from_unix_nanos(1_767_225_600_000_000_000 + t.as_nanos())
}

fn run(
    packets: usize,
    fwd_cfg: LinkConfig,
    seed: u64,
    wire_size: impl Fn(usize, usize) -> usize,
) -> Run {
    let epoch = Timestamp::from_millis(100);
    let mut packetizer = Mp2tPacketizer::new(
        PacketizerConfig {
            send_time_ext: true,
            ..PacketizerConfig::mp2t(0xfeed, 65_000, 12_345)
        },
        epoch,
    );
    let mut reports = SenderReports::new(
        SenderReportsConfig {
            ssrc: 0xfeed,
            cname: "sim-sender".into(),
            clock: MediaClock::VIDEO_90K,
            rtp_ts_base: 12_345,
            session_bw_bps: 5_000_000,
            rtcp_min_interval: Duration::from_millis(500),
            max_receivers: 4,
            seed,
        },
        epoch,
    );
    let mut receiver = ReceiverSession::new(ReceiverConfig {
        rtcp_min_interval: Duration::from_millis(500),
        seed,
        ..ReceiverConfig::default()
    });
    let mut fwd: Link<Vec<u8>> = Link::new(fwd_cfg, seed);
    let mut back: Link<Vec<u8>> = Link::new(
        LinkConfig {
            delay: Duration::from_millis(5),
            ..LinkConfig::default()
        },
        seed + 1,
    );
    let from: SocketAddr = "127.0.0.1:5005".parse().unwrap();

    // Pre-packetize the whole stream (the producer runs ahead; release times order the sends).
    let mut queue = Vec::new();
    let mut ts = [0u8; 188];
    ts[0] = 0x47;
    let mut buf = [0u8; 1500];
    let mut i = 0u64;
    while queue.len() < packets {
        let due = Duration::from_nanos(i * TS_INTERVAL_NS);
        if let Some(out) = packetizer.push(&ts, due, &mut buf).unwrap() {
            queue.push((out.release, buf[..out.len].to_vec()));
        }
        i += 1;
    }

    let mut delivered = Vec::new();
    let mut sent = 0usize;
    let (mut sent_packets, mut sent_octets) = (0u64, 0u64);
    let mut now = Timestamp::ZERO;
    let mut rtcp = [0u8; 1500];
    loop {
        // The next thing to happen, in virtual time.
        let mut next = Timestamp::MAX;
        if let Some((t, _)) = queue.get(sent) {
            next = next.min(*t);
        }
        for t in [fwd.poll_timeout(), back.poll_timeout()]
            .into_iter()
            .flatten()
        {
            next = next.min(t);
        }
        if sent < queue.len() || fwd.in_flight() > 0 {
            for t in [
                reports.poll_timeout().map(|x| x.0),
                receiver.poll_timeout().map(|x| x.0),
            ]
            .into_iter()
            .flatten()
            {
                next = next.min(t);
            }
        }
        if next == Timestamp::MAX {
            break;
        }
        now = now.max(next);
        // Sender: packets due now leave (the pacer is exact in virtual time).
        while let Some((t, pkt)) = queue.get_mut(sent) {
            if *t > now {
                break;
            }
            metronome_wire::rtp::patch_send_time(pkt, wall(now));
            let size = wire_size(sent, pkt.len());
            fwd.send(now, size, pkt.clone());
            sent_packets += 1;
            sent_octets += 1316;
            sent += 1;
        }
        reports.record_sent(sent_packets, sent_octets);
        if let Some(n) = reports.poll_transmit(now, wall(now), &mut rtcp) {
            fwd.send(now, n, rtcp[..n].to_vec());
        }
        // Receiver.
        while let Some((at, pkt)) = fwd.poll_deliver(now) {
            if pkt[1] >= 200 && pkt[1] <= 204 {
                receiver.handle_rtcp(at, &pkt);
                continue;
            }
            let rec = receiver.handle_rtp(at, Some(wall(at)), &pkt).unwrap();
            delivered.push((at, rec.ext_seq));
        }
        if let Some(n) = receiver.poll_transmit(now, &mut rtcp) {
            back.send(now, n, rtcp[..n].to_vec());
        }
        while let Some((at, pkt)) = back.poll_deliver(now) {
            reports.handle_rtcp(at, wall(at), from, &pkt);
        }
    }
    Run {
        receiver,
        reports,
        fwd,
        delivered,
    }
}

fn link(delay_ms: u64) -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(delay_ms),
        ..LinkConfig::default()
    }
}

#[test]
fn clean_link_no_loss_no_jitter_exact_delay_and_spacing() {
    let r = run(2000, link(10), 1, |_, len| len);
    let src = r.receiver.main_source().unwrap();
    assert_eq!(src.received(), 2000);
    assert_eq!((src.lost(), src.duplicates, src.reordered), (0, 0, 0));
    // Constant transit: RFC 3550 jitter is exactly zero... up to the 90 kHz truncation of
    // release times (2.1056 ms is 189.504 ticks), which makes |D| 0 or 1 tick.
    assert!(src.jitter_ticks() < 1.0, "{}", src.jitter_ticks());
    // Every packet 2.1056 ms after the previous one, and 10 ms on the way.
    let ia = src.interarrival.summary();
    assert!(
        (ia.min_us - 2105.6).abs() < 2.0 && (ia.max_us - 2105.6).abs() < 2.0,
        "{ia:?}"
    );
    let owd = src.one_way_delay.summary();
    assert!((owd.min_us - 10_000.0).abs() < 10.0 && (owd.max_us - 10_000.0).abs() < 10.0);
    // The sender heard the receiver: no loss, RTT = 10 ms forward + 5 ms back.
    let view = &r.reports.receivers()[0];
    assert_eq!(view.cumulative_lost, 0);
    let rtt = view.rtt_ms.unwrap();
    assert!((rtt - 15.0).abs() < 0.1, "{rtt}");
}

#[test]
fn loss_reported_equals_what_the_link_dropped() {
    let cfg = LinkConfig {
        loss: LossModel::Bernoulli(0.05),
        ..link(20)
    };
    let r = run(5000, cfg, 7, |_, len| len);
    let src = r.receiver.main_source().unwrap();
    let dropped_rtp = 5000 - src.received();
    // The receiver's loss is exactly the RTP packets the link lost (unless the very last ones
    // were lost, which the receiver cannot know about).
    let last_delivered = r.delivered.iter().map(|d| d.1).max().unwrap();
    let first = r.delivered.iter().map(|d| d.1).min().unwrap();
    let tail_lost = 5000 - 1 - (last_delivered - first);
    assert_eq!(src.lost() + tail_lost, dropped_rtp);
    assert!(r.fwd.stats().lost >= dropped_rtp, "link lost RTCP too");
    let loss = dropped_rtp as f64 / 5000.0;
    assert!((loss - 0.05).abs() < 0.01, "{loss}");
    // The sender's view through RTCP agrees with the receiver's last report.
    let view = &r.reports.receivers()[0];
    assert!(view.cumulative_lost as u64 <= src.lost());
    assert!(view.cumulative_lost as u64 + 20 >= src.lost(), "{view:?}");
}

#[test]
fn reordering_is_counted_once_per_overtaken_packet() {
    let cfg = LinkConfig {
        reorder: 0.03,
        reorder_delay: Duration::from_millis(5),
        ..link(10)
    };
    let r = run(4000, cfg, 11, |_, len| len);
    let src = r.receiver.main_source().unwrap();
    // Worked from the delivery order: a packet is reordered when one with a higher sequence
    // number arrived before it.
    let mut highest = 0;
    let mut expected_reordered = 0;
    for (_, seq) in &r.delivered {
        if *seq < highest {
            expected_reordered += 1;
        }
        highest = highest.max(*seq);
    }
    assert!(
        expected_reordered > 50,
        "the link reordered too little to test"
    );
    assert_eq!(src.reordered, expected_reordered);
    assert_eq!(src.lost(), 0, "reordering is not loss");
    assert_eq!(src.received(), 4000);
}

#[test]
fn jitter_from_alternating_serialization_matches_the_closed_form() {
    // 8 Mbit/s: a 1000-byte packet takes 1 ms, a 2000-byte one 2 ms. Sent 2.1056 ms apart, they
    // never queue, so transit alternates by 1 ms = 90 ticks and |D| = 90 for every packet after
    // the first. RFC 3550 A.8 then gives J_n = 90 (1 − (15/16)^n) after n differences.
    let cfg = LinkConfig {
        rate_bps: Some(8_000_000),
        ..link(10)
    };
    let n = 60;
    let r = run(n + 1, cfg, 3, |i, _| if i % 2 == 0 { 1000 } else { 2000 });
    let src = r.receiver.main_source().unwrap();
    let expect = 90.0 * (1.0 - (15.0f64 / 16.0).powi(n as i32));
    // Release times are truncated to whole ticks, which moves |D| by at most one tick.
    assert!(
        (src.jitter_ticks() - expect).abs() < 1.5,
        "jitter {} vs {}",
        src.jitter_ticks(),
        expect
    );
}

#[test]
fn same_seed_same_run_different_seed_different_run() {
    let cfg = LinkConfig {
        loss: LossModel::Bernoulli(0.02),
        reorder: 0.02,
        reorder_delay: Duration::from_millis(3),
        ..link(10)
    };
    let a = run(1500, cfg.clone(), 42, |_, len| len);
    let b = run(1500, cfg.clone(), 42, |_, len| len);
    let c = run(1500, cfg, 43, |_, len| len);
    assert_eq!(a.delivered, b.delivered);
    assert_ne!(a.delivered, c.delivered);
}
