//! The sender and receiver sessions, unchanged, through simulated links in virtual time.
//! Every figure the receiver reports is checked against a value worked out from the link's
//! configuration or from what the link actually did. These tests take milliseconds.

use metronome_cc::FixedRate;
use metronome_link::{LinkConfig, LossModel};
use metronome_sched::{LatePolicy, PacingConfig};
use metronome_session::receiver::ReceiverConfig;
use metronome_session::sender::{
    JobConfig, PacketizerConfig, SenderReportsConfig, SenderSessionConfig,
};
use metronome_sim::{run_pair, CbrTs, PairConfig, PairOutcome, TraceRow};
use metronome_time::Micros;
use metronome_time::{Bitrate, MediaClock, RtpTime, Timestamp};
use metronome_wire::Ssrc;
use std::time::Duration;

/// A 5 Mbit/s constant-rate TS stream: one TS packet every 300.8 µs, so an RTP packet of 7
/// every 2.1056 ms.
const TS_INTERVAL: Duration = Duration::from_nanos(300_800);

fn config(fwd: LinkConfig, seed: u64) -> PairConfig {
    PairConfig {
        session: SenderSessionConfig {
            reports: SenderReportsConfig {
                ssrc: Ssrc(0xfeed),
                cname: "sim-sender".into(),
                clock: MediaClock::VIDEO_90K,
                rtp_ts_base: RtpTime(12_345),
                session_bw_bps: 5_000_000,
                rtcp_min_interval: Duration::from_millis(500),
                max_receivers: 4,
                seed,
            },
            pacing: PacingConfig::default(),
            jobs: JobConfig {
                period: None,
                deadline: Duration::from_millis(2),
            },
            queue_capacity: 1024,
        },
        receiver: ReceiverConfig {
            rtcp_min_interval: Duration::from_millis(500),
            seed,
            ..ReceiverConfig::default()
        },
        forward: fwd,
        back: LinkConfig {
            delay: Duration::from_millis(5),
            ..LinkConfig::default()
        },
        seed,
        stalls: Vec::new(),
        epoch: Timestamp::from_millis(100),
        send_time_ext: true,
        slot_size: 1500,
    }
}

fn source(cfg: &PairConfig, packets: usize) -> CbrTs {
    let pcfg = PacketizerConfig {
        send_time_ext: true,
        ..PacketizerConfig::mp2t(Ssrc(0xfeed), metronome_wire::SeqNo(65_000), RtpTime(12_345))
    };
    CbrTs::new(pcfg, cfg.epoch, TS_INTERVAL, packets)
}

/// Runs `packets` RTP packets from sender to receiver over `fwd`, with RTCP back over a 5 ms
/// link. `wire_size` gives each packet's size on the link (by index).
fn run(
    packets: usize,
    fwd: LinkConfig,
    seed: u64,
    wire_size: Option<fn(usize) -> usize>,
) -> PairOutcome {
    let cfg = config(fwd, seed);
    let mut src = source(&cfg, packets);
    if let Some(f) = wire_size {
        src = src.with_wire_size(f);
    }
    run_pair(cfg, src, Box::new(FixedRate::new(Bitrate::mbps(5))))
}

fn link(delay_ms: u64) -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(delay_ms),
        ..LinkConfig::default()
    }
}

#[test]
fn clean_link_no_loss_no_jitter_exact_delay_and_spacing() {
    let r = run(2000, link(10), 1, None);
    let src = r.receiver.main_source().unwrap();
    assert_eq!(src.received(), 2000);
    assert_eq!((src.lost(), src.duplicates, src.reordered), (0, 0, 0));
    // Constant transit: RFC 3550 jitter is exactly zero... up to the 90 kHz truncation of
    // release times (2.1056 ms is 189.504 ticks), which makes |D| 0 or 1 tick.
    assert!(src.jitter_ticks() < 1.0, "{}", src.jitter_ticks());
    // Every packet 2.1056 ms after the previous one, and 10 ms on the way.
    let ia = src.interarrival.summary();
    assert!(
        (ia.min_us.as_micros_f64() - 2105.6).abs() < 2.0
            && (ia.max_us.as_micros_f64() - 2105.6).abs() < 2.0,
        "{ia:?}"
    );
    let owd = src.one_way_delay.summary();
    assert!(
        (owd.min_us.as_micros_f64() - 10_000.0).abs() < 10.0
            && (owd.max_us.as_micros_f64() - 10_000.0).abs() < 10.0
    );
    // The sender heard the receiver: no loss, RTT = 10 ms forward + 5 ms back.
    let view = &r.sender.reports().receivers()[0];
    assert_eq!(view.cumulative_lost, 0);
    let rtt = view.rtt_us.map(Micros::as_millis_f64).unwrap();
    assert!((rtt - 15.0).abs() < 0.1, "{rtt}");
}

#[test]
fn loss_reported_equals_what_the_link_dropped() {
    let cfg = LinkConfig {
        loss: LossModel::Bernoulli(0.05),
        ..link(20)
    };
    let r = run(5000, cfg, 7, None);
    let src = r.receiver.main_source().unwrap();
    let dropped_rtp = 5000 - src.received();
    // The receiver's loss is exactly the RTP packets the link lost (unless the very last ones
    // were lost, which the receiver cannot know about).
    let delivered = r.trace.delivered();
    let last_delivered = delivered.iter().map(|d| d.1).max().unwrap();
    let first = delivered.iter().map(|d| d.1).min().unwrap();
    let tail_lost = 5000 - 1 - (last_delivered - first);
    assert_eq!(src.lost() + tail_lost, dropped_rtp);
    assert!(r.forward.lost >= dropped_rtp, "link lost RTCP too");
    let loss = dropped_rtp as f64 / 5000.0;
    assert!((loss - 0.05).abs() < 0.01, "{loss}");
    // The sender's view through RTCP agrees with the receiver's last report.
    let view = &r.sender.reports().receivers()[0];
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
    let r = run(4000, cfg, 11, None);
    let src = r.receiver.main_source().unwrap();
    // Worked from the delivery order: a packet is reordered when one with a higher sequence
    // number arrived before it.
    let mut highest = 0;
    let mut expected_reordered = 0;
    for (_, seq) in &r.trace.delivered() {
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
    let r = run(
        n + 1,
        cfg,
        3,
        Some(|i| if i % 2 == 0 { 1000 } else { 2000 }),
    );
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
    let a = run(1500, cfg.clone(), 42, None);
    let b = run(1500, cfg.clone(), 42, None);
    let c = run(1500, cfg, 43, None);
    // The whole trace, byte for byte: every send, loss, delivery and report at its nanosecond.
    assert_eq!(a.trace.to_csv(), b.trace.to_csv());
    assert_ne!(a.trace.delivered(), c.trace.delivered());
}

/// Transit (arrival minus the time the RTP timestamp names) of every delivered packet, with
/// its arrival, from the trace.
fn transits(r: &PairOutcome, epoch: Timestamp) -> Vec<(Timestamp, i64)> {
    r.trace
        .rows
        .iter()
        .filter_map(|row| match *row {
            TraceRow::Delivered { at, rtp_ts, .. } => {
                let ticks = u64::from(rtp_ts.since(RtpTime(12_345)));
                let due = epoch + MediaClock::VIDEO_90K.duration(ticks);
                Some((at, at.signed_nanos_since(due)))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn after_a_300ms_stall_the_sender_catches_up_at_its_bound_and_transit_returns() {
    let mut cfg = config(link(10), 5);
    cfg.stalls = vec![(Timestamp::from_secs(1), Duration::from_millis(300))];
    let epoch = cfg.epoch;
    let src = source(&cfg, 2000);
    let r = run_pair(cfg, src, Box::new(FixedRate::new(Bitrate::mbps(5))));
    // Every packet was sent and arrived: catching up drops nothing.
    assert_eq!(r.sender.stats().packets, 2000);
    assert_eq!(r.receiver.main_source().unwrap().received(), 2000);
    // Late sends leave at most at 2 × 5 Mbit/s: 1344 bytes every 1.0752 ms or slower.
    let late: Vec<Timestamp> = r
        .trace
        .rows
        .iter()
        .filter_map(|row| match *row {
            TraceRow::Sent { at, due, .. }
                if at.saturating_since(due) > Duration::from_millis(2) =>
            {
                Some(at)
            }
            _ => None,
        })
        .collect();
    assert!(late.len() > 100, "{}", late.len());
    for w in late.windows(2) {
        assert!(w[1].saturating_since(w[0]) >= Duration::from_nanos(1_075_200));
    }
    // Transit before the stall and after the catch-up agree within 1 ms (the 10 ms link).
    let t = transits(&r, epoch);
    let before = t
        .iter()
        .find(|(at, _)| *at > Timestamp::from_millis(900))
        .unwrap()
        .1;
    let after = t.last().unwrap().1;
    assert!((after - before).abs() < 1_000_000, "{before} → {after}");
    // The stall shows at the receiver as transit up to ~300 ms, not as a shifted schedule.
    let worst = t.iter().map(|x| x.1).max().unwrap();
    assert!(worst > 290_000_000 && worst < 320_000_000, "{worst}");
    // The last packet left on its due time: the stream kept real time.
    let Some(TraceRow::Sent { at, due, .. }) = r
        .trace
        .rows
        .iter()
        .rev()
        .find(|row| matches!(row, TraceRow::Sent { .. }))
    else {
        panic!("something was sent")
    };
    assert_eq!(at, due);
    assert_eq!(r.sender.stats().pacing.stalls, 1);
}

#[test]
fn drop_late_drops_without_a_sequence_gap_and_keeps_the_rest_on_time() {
    let mut cfg = config(link(10), 9);
    cfg.session.pacing = PacingConfig {
        late: LatePolicy::DropLate {
            after: Duration::from_millis(20),
        },
        ..PacingConfig::default()
    };
    cfg.stalls = vec![(Timestamp::from_secs(1), Duration::from_millis(300))];
    let src = source(&cfg, 2000);
    let r = run_pair(cfg, src, Box::new(FixedRate::new(Bitrate::mbps(5))));
    let st = r.sender.stats();
    let dropped = st.pacing.dropped;
    // 300 ms of 2.1056 ms packets, less the last 20 ms that were still worth sending.
    assert!((130..=135).contains(&dropped), "{dropped}");
    assert_eq!(st.packets + dropped, 2000);
    let src = r.receiver.main_source().unwrap();
    // A dropped packet never left, so it took no sequence number: the receiver sees no loss
    // (which a congestion controller would take for the network's), only fewer packets.
    assert_eq!(src.lost(), 0, "sender drops are not network loss");
    assert_eq!(src.received(), 2000 - dropped);
    // Nothing after the stall is late.
    let after_stall = Timestamp::from_millis(1300);
    assert!(r.trace.rows.iter().all(|row| match *row {
        TraceRow::Sent { at, due, .. } if at > after_stall => at == due,
        _ => true,
    }));
}
