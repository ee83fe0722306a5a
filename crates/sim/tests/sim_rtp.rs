//! The engine's sessions in the simulator: one RTP stream to a multicast group behind a
//! bottleneck, with sender reports down the tree and receiver reports back by unicast.

use metronome_cc::receiver::AgentKind;
use metronome_cc::FixedRate;
use metronome_link::topology::NodeId;
use metronome_link::{LinkConfig, LossModel};
use metronome_sched::PacingConfig;
use metronome_session::receiver::ReceiverConfig;
use metronome_session::sender::CbrTs;
use metronome_session::sender::{
    JobConfig, PacketizerConfig, SenderReportsConfig, SenderSessionConfig,
};
use metronome_sim::flows::rtp::{RtpFlow, RtpFlowConfig};
use metronome_sim::trace::TraceLevel;
use metronome_sim::{Sim, SimOutcome};
use metronome_time::Micros;
use metronome_time::{Bitrate, MediaClock, RtpTime, Timestamp};
use metronome_wire::PayloadType;
use metronome_wire::{SeqNo, Ssrc};
use std::time::Duration;

fn session(seed: u64) -> SenderSessionConfig {
    SenderSessionConfig {
        reports: SenderReportsConfig {
            ssrc: Ssrc(0xfeed),
            cname: "sim".into(),
            clock: MediaClock::VIDEO_90K,
            rtp_ts_base: RtpTime(1),
            session_bw_bps: 1_000_000,
            rtcp_min_interval: Duration::from_secs(1),
            max_receivers: 64,
            seed,
        },
        pacing: PacingConfig::default(),
        jobs: JobConfig {
            period: None,
            deadline: Duration::from_millis(2),
        },
        queue_capacity: 256,
    }
}

/// A flow's settings as these tests run it: `seed`'s sessions, a receiver per node in
/// `receivers` (with `cc`'s receiver end), from `epoch`.
fn flow_config(
    name: &str,
    src: NodeId,
    receivers: Vec<NodeId>,
    seed: u64,
    cc: AgentKind,
    epoch: Timestamp,
) -> RtpFlowConfig {
    RtpFlowConfig {
        name: name.into(),
        src,
        receivers,
        session: session(seed),
        receiver: ReceiverConfig {
            seed,
            cc,
            ..ReceiverConfig::default()
        },
        epoch,
        send_time_ext: true,
        slot_size: 1500,
        stalls: Vec::new(),
        ip_overhead: 28,
        interval: Duration::from_secs(1),
        histograms: false,
        log: false,
        track_arrivals: false,
        lookahead: None,
        membership: Vec::new(),
        repair: None,
        fec: None,
    }
}

/// Runs `sim` until `end`: its report and the one RTP flow it ran.
fn run_one(mut sim: Sim, end: Timestamp) -> (SimOutcome, Box<RtpFlow>) {
    sim.run_until(end);
    let (out, flows) = sim.finish_with_flows();
    let flow = flows
        .into_iter()
        .next()
        .unwrap()
        .into_any()
        .downcast::<RtpFlow>()
        .unwrap();
    (out, flow)
}

#[test]
fn forty_five_receivers_behind_a_bottleneck_each_report_what_their_link_lost() {
    let seed = 45;
    let mut sim = Sim::new(seed, TraceLevel::Off);
    let src = sim.add_node("server");
    let r = sim.add_node("router");
    let bottleneck = LinkConfig {
        rate_bps: Some(10_000_000),
        delay: Duration::from_millis(10),
        queue_limit_packets: Some(50),
        ..LinkConfig::default()
    };
    sim.add_link(src, r, bottleneck.clone(), bottleneck);
    let mut receivers = Vec::new();
    for i in 0..45 {
        let h = sim.add_node(format!("viewer{i}"));
        // Every third viewer has a lossy access link.
        let access = LinkConfig {
            delay: Duration::from_millis(5),
            loss: if i % 3 == 0 {
                LossModel::Bernoulli(0.02)
            } else {
                LossModel::None
            },
            ..LinkConfig::default()
        };
        sim.add_link(r, h, access, LinkConfig::default());
        receivers.push(h);
    }
    // 1 Mbit/s of TS: one TS packet every 1.504 ms, seven per RTP packet; 20 s.
    let epoch = Timestamp::from_millis(10);
    let pcfg = PacketizerConfig {
        send_time_ext: true,
        ..PacketizerConfig::mp2t(Ssrc(0xfeed), SeqNo(1), RtpTime(1))
    };
    let packets = 20_000_000_000 / (1_504_000 * 7);
    let source = CbrTs::new(
        pcfg,
        epoch,
        Duration::from_nanos(1_504_000),
        packets as usize,
    );
    let flow = RtpFlow::new(
        flow_config("tv", src, receivers.clone(), seed, AgentKind::None, epoch),
        Box::new(source),
        Box::new(FixedRate::new(Bitrate::mbps(1))),
    );
    sim.add_flow(Box::new(flow));
    let (out, flow) = run_one(sim, Timestamp::from_secs(21));
    let report = &out.flows[0];
    assert_eq!(report.sent_packets, packets);
    assert_eq!(report.receivers.len(), 45);
    for (i, rx) in report.receivers.iter().enumerate() {
        if i % 3 == 0 {
            assert!(
                (0.5..5.0).contains(&rx.loss_percent),
                "seed {seed}: {} lost {} %",
                rx.node,
                rx.loss_percent
            );
        } else {
            assert_eq!(rx.lost, 0, "seed {seed}: {}", rx.node);
        }
        // 10 ms + 5 ms + serialization of ~1344 bytes at 10 Mbit/s.
        assert!(
            rx.min_delay_us.as_nanos_u64() >= 15_000_000
                && rx.max_delay_us.as_nanos_u64() < 17_000_000
        );
    }
    // Every receiver's reports reached the sender, and their loss is what the viewer saw.
    let views = flow.sender.reports().receivers();
    assert_eq!(views.len(), 45, "seed {seed}");
    let lossy_views = views.iter().filter(|v| v.cumulative_lost > 0).count();
    assert_eq!(lossy_views, 15, "seed {seed}");
    for v in views {
        let rtt = v
            .rtt_us
            .map(Micros::as_millis_f64)
            .expect("an RTT from LSR/DLSR");
        // 10 + 5 ms out, 0 + 10 ms back, and serialization.
        assert!((25.0..26.0).contains(&rtt), "seed {seed}: {rtt} ms");
    }
}

/// A constant-rate source that follows TFRC (RFC 5348 §4.2: one packet a second until the first
/// feedback, then `W_init / R`): its producer makes a packet only when it is due within the
/// lookahead, so the packet made at one a second does not hold back the rate the first
/// feedback allows, and slow start doubles from there. (When the producer went by the last
/// packet made, the next one was made a second ahead at the old rate, TFRC saw its sender
/// data-limited, its no-feedback timer halved the rate, and slow start began only after 4 s.)
#[test]
fn tfrc_slow_start_follows_its_first_feedback_at_once() {
    use metronome_cc::{ControllerKind, ControllerParams};

    let seed = 7;
    let mut sim = Sim::new(seed, TraceLevel::Off);
    let src = sim.add_node("server");
    let dst = sim.add_node("viewer");
    let link = LinkConfig {
        rate_bps: Some(4_000_000),
        delay: Duration::from_millis(20),
        queue_limit_packets: Some(50),
        ..LinkConfig::default()
    };
    sim.add_link(src, dst, link.clone(), link);
    let epoch = Timestamp::from_millis(10);
    let pcfg = PacketizerConfig {
        send_time_ext: true,
        ts_per_packet: 5,
        ..PacketizerConfig::mp2t(Ssrc(0xfeed), SeqNo(1), RtpTime(1))
    };
    // Starts at 500 kbit/s of TS; follows the controller from its first rate on.
    let source = CbrTs::new(pcfg, epoch, Duration::from_nanos(3_008_000), usize::MAX)
        .until(epoch + Duration::from_secs(4));
    let segment = 5 * 188 + 12 + 12 + 28;
    let params = ControllerParams {
        segment_bytes: segment,
        start: Bitrate::kbps(500),
        min: Bitrate::kbps(8),
        max: Bitrate::mbps(8),
    };
    let flow = RtpFlow::new(
        RtpFlowConfig {
            lookahead: Some(Duration::from_millis(200)),
            membership: Vec::new(),
            repair: None,
            fec: None,
            ..flow_config("tfrc", src, vec![dst], seed, AgentKind::Tfrc, epoch)
        },
        Box::new(source),
        ControllerKind::Tfrc.build(params, epoch),
    );
    sim.add_flow(Box::new(flow));
    let (_, flow) = run_one(sim, Timestamp::from_secs(5));
    let trace = flow.rate_trace();
    // W_init / R: 4 segments per RTT of 40 ms and a little, about 0.8 Mbit/s.
    let w_init = |&(_, r): &(Timestamp, u64)| r > 600_000;
    let first = trace.iter().find(|p| w_init(p)).expect("a first feedback");
    let doubled = trace
        .iter()
        .find(|&&(_, r)| r > 2 * first.1 - 50_000)
        .expect("slow start doubles");
    assert!(
        first.0 < Timestamp::from_millis(1000),
        "the first feedback at {:?}: {trace:?}",
        first.0
    );
    let below = trace
        .iter()
        .filter(|&&(t, r)| t > first.0 && t < doubled.0 && r < first.1 / 2)
        .count();
    assert!(
        doubled.0.saturating_since(first.0) < Duration::from_millis(400) && below == 0,
        "doubled {:?} after the first feedback, {below} times below half on the way: {trace:?}",
        doubled.0.saturating_since(first.0)
    );
}

/// One viewer behind a link that loses `loss` of the packets towards it (and `loss / 3` of
/// its reports), 20 ms each way: a 2 Mbit/s TS stream for 20 s, with NACK and retransmission
/// or without. The viewer plays out `playout` after the fastest packet.
fn lossy_unicast(seed: u64, loss: f64, repair: bool, playout: Duration) -> Box<RtpFlow> {
    use metronome_session::receiver::ReceiverRepair;
    use metronome_session::repair::RepairConfig;
    use metronome_session::sender::SenderRepair;
    use metronome_wire::rtx::StreamIds;
    let mut sim = Sim::new(seed, TraceLevel::Off);
    let src = sim.add_node("server");
    let viewer = sim.add_node("viewer");
    let down = LinkConfig {
        rate_bps: Some(10_000_000),
        delay: Duration::from_millis(20),
        loss: LossModel::Bernoulli(loss),
        ..LinkConfig::default()
    };
    let up = LinkConfig {
        loss: LossModel::Bernoulli(loss / 3.0),
        ..down.clone()
    };
    sim.add_link(src, viewer, down, up);
    let epoch = Timestamp::from_millis(10);
    let pcfg = PacketizerConfig {
        send_time_ext: true,
        ..PacketizerConfig::mp2t(Ssrc(0xfeed), SeqNo(1), RtpTime(1))
    };
    // One 7-TS packet every 5.264 ms: 2 Mbit/s of TS.
    let period = Duration::from_nanos(752_000);
    let packets = 20_000_000_000u64 / (752_000 * 7);
    let source = CbrTs::new(pcfg, epoch, period, packets as usize);
    let mut cfg = flow_config("tv", src, vec![viewer], seed, AgentKind::None, epoch);
    cfg.track_arrivals = true;
    if repair {
        let rtx = StreamIds {
            ssrc: Ssrc(0x0bad_cafe),
            payload_type: PayloadType(97),
        };
        cfg.repair = Some(SenderRepair {
            repairer: RepairConfig::new(rtx, SeqNo(4321), 0.25),
            history_packets: 1024,
            max_packet: 1500,
            playout_delay: playout,
            initial_rtt: Duration::from_millis(100),
            tell_group: false,
            everywhere: false,
        });
        cfg.receiver.repair = Some(ReceiverRepair::new(PayloadType(97), playout));
    }
    let flow = RtpFlow::new(
        cfg,
        Box::new(source),
        Box::new(FixedRate::new(Bitrate::mbps(2))),
    );
    sim.add_flow(Box::new(flow));
    run_one(sim, Timestamp::from_secs(21)).1
}

/// Packets the viewer never had (by the end of the run), of those sent.
fn never_had(flow: &RtpFlow) -> usize {
    never_had_at(flow, 0)
}

#[test]
fn nack_and_retransmission_repair_random_loss_before_the_play_out_deadline() {
    for seed in [1, 2, 3] {
        let playout = Duration::from_millis(200);
        let plain = lossy_unicast(seed, 0.03, false, playout);
        let repaired = lossy_unicast(seed, 0.03, true, playout);
        let sent = plain.sent() as usize;
        let (before, after) = (never_had(&plain), never_had(&repaired));
        assert!(
            before > sent / 50,
            "seed {seed}: {before} of {sent} lost without repair"
        );
        // Each loss is asked for up to three times within the 200 ms: what stays lost is a
        // packet whose every ask or repair was lost too (3 % of 3 % of ...).
        assert!(
            after * 20 < before,
            "seed {seed}: {after} lost with repair, {before} without"
        );
        let rx = repaired.receivers[0].repair_stats().unwrap();
        let tx = repaired.sender.repair_stats().unwrap();
        // No repair came after its packet's play-out time, and none was sent too late.
        assert_eq!(rx.nack.recovered_late, 0, "seed {seed}: {rx:?}");
        assert!(
            rx.nack.recovered as usize >= before - after - 2,
            "seed {seed}: {rx:?}"
        );
        assert_eq!(
            rx.rtx_useful + rx.rtx_redundant,
            rx.rtx_packets,
            "seed {seed}"
        );
        assert_eq!(rx.rtx_malformed, 0);
        let bytes = tx.bytes;
        assert_eq!(tx.packets, tx.repairer.sent, "seed {seed}: {tx:?}");
        // Repairs are a few per cent of the stream, within the quarter the budget allows.
        let stream_bytes = repaired.sent() * 1400;
        assert!(
            bytes * 10 < stream_bytes,
            "seed {seed}: {bytes} repair bytes"
        );
        assert_eq!(
            (tx.repairer.over_budget, tx.overflow),
            (0, 0),
            "seed {seed}: {tx:?}"
        );
        // The round trip the viewer measured, ask to repair: 40 ms and a little.
        assert!(
            (40_000..60_000).contains(&rx.rtt_us.as_micros()),
            "seed {seed}: {rx:?}"
        );
        // The network's loss stays what the receiver reports to the sender (RFC 4588).
        let view = &repaired.sender.reports().receivers()[0];
        assert!(
            view.cumulative_lost as usize >= before / 2,
            "seed {seed}: {view:?}"
        );
    }
}

/// When a repair cannot arrive in time (a 40 ms round trip, 35 ms of play-out delay), the
/// viewer does not ask and the sender sends nothing: every loss is given up at once.
#[test]
fn no_repair_is_asked_for_or_sent_that_cannot_make_the_deadline() {
    let playout = Duration::from_millis(35);
    let plain = lossy_unicast(7, 0.03, false, playout);
    let flow = lossy_unicast(7, 0.03, true, playout);
    assert_eq!(never_had(&flow), never_had(&plain));
    let rx = flow.receivers[0].repair_stats().unwrap();
    assert!(rx.nack.missing > 50, "{rx:?}");
    assert_eq!(
        (rx.nack.asked, rx.nack_packets, rx.rtx_packets),
        (0, 0, 0),
        "{rx:?}"
    );
    assert_eq!(rx.nack.given_up, rx.nack.missing, "{rx:?}");
    assert_eq!(flow.sender.repair_stats().map(|s| s.packets), Some(0));
}

/// 45 viewers behind one link that loses 2 % of the packets towards them (and 1 % of their
/// reports), 20 ms each way, then 5 ms of access: a 2 Mbit/s TS stream for 10 s, played out
/// 600 ms after the fastest packet, with NACK and retransmission. With `group`, the viewers
/// dither their NACKs and the sender tells the group which losses it is repairing (RFC 6642
/// TLLEI); without, each viewer asks at once as a unicast one would.
fn lossy_group(seed: u64, group: bool) -> Box<RtpFlow> {
    use metronome_session::receiver::ReceiverRepair;
    use metronome_session::repair::NackConfig;
    use metronome_session::sender::SenderRepair;
    use metronome_wire::rtx::StreamIds;
    let mut sim = Sim::new(seed, TraceLevel::Off);
    let src = sim.add_node("server");
    let r = sim.add_node("router");
    let down = LinkConfig {
        rate_bps: Some(20_000_000),
        delay: Duration::from_millis(20),
        loss: LossModel::Bernoulli(0.02),
        ..LinkConfig::default()
    };
    let up = LinkConfig {
        loss: LossModel::Bernoulli(0.01),
        ..down.clone()
    };
    sim.add_link(src, r, down, up);
    let viewers: Vec<NodeId> = (0..45)
        .map(|i| {
            let h = sim.add_node(format!("viewer{i}"));
            let access = LinkConfig {
                delay: Duration::from_millis(5),
                ..LinkConfig::default()
            };
            sim.add_link(r, h, access.clone(), access);
            h
        })
        .collect();
    let epoch = Timestamp::from_millis(10);
    let pcfg = PacketizerConfig {
        send_time_ext: true,
        ..PacketizerConfig::mp2t(Ssrc(0xfeed), SeqNo(1), RtpTime(1))
    };
    let packets = 10_000_000_000u64 / (752_000 * 7);
    let source = CbrTs::new(pcfg, epoch, Duration::from_nanos(752_000), packets as usize);
    let mut cfg = flow_config("tv", src, viewers, seed, AgentKind::None, epoch);
    cfg.track_arrivals = true;
    let playout = Duration::from_millis(600);
    let rtx = StreamIds {
        ssrc: Ssrc(0x0bad_cafe),
        payload_type: PayloadType(97),
    };
    let tx = SenderRepair::rtx(rtx, SeqNo(4321), playout, 1024, 1500);
    let mut rx = ReceiverRepair::new(PayloadType(97), playout);
    if group {
        rx.nack = NackConfig::group(45, 0);
    }
    cfg.repair = Some(if group { tx.to_group() } else { tx });
    cfg.receiver.repair = Some(rx);
    let flow = RtpFlow::new(
        cfg,
        Box::new(source),
        Box::new(FixedRate::new(Bitrate::mbps(2))),
    );
    sim.add_flow(Box::new(flow));
    run_one(sim, Timestamp::from_secs(11)).1
}

/// Packets viewer `r` never had (by the end of the run), of those sent.
fn never_had_at(flow: &RtpFlow, r: usize) -> usize {
    let a = flow.arrivals(r);
    let missing_tail = flow.sent() as usize - a.len();
    a.iter().filter(|t| **t == Timestamp::MAX).count() + missing_tail
}

/// One loss upstream of 45 viewers: with RFC 4585's dither and the sender's TLLEI, a few
/// NACKs ask for it where each viewer asked before, and the viewers keep what the repairs
/// bring (none late).
#[test]
fn a_group_asks_for_a_shared_loss_a_few_times_not_once_per_viewer() {
    for seed in [5, 6, 7] {
        group_suppresses(seed);
    }
}

fn group_suppresses(seed: u64) {
    let alone = lossy_group(seed, false);
    let group = lossy_group(seed, true);
    let nacks = |f: &RtpFlow| -> u64 {
        f.receivers
            .iter()
            .map(|r| r.repair_stats().unwrap().nack_packets)
            .sum()
    };
    let lost = |f: &RtpFlow| -> usize { (0..45).map(|r| never_had_at(f, r)).sum() };
    let (tx_alone, tx_group) = (
        alone.sender.repair_stats().unwrap(),
        group.sender.repair_stats().unwrap(),
    );
    let missing: u64 = group
        .receivers
        .iter()
        .map(|r| r.repair_stats().unwrap().nack.missing)
        .sum();
    // About 2 % of 1 660 packets lost on the shared link, each missing at all 45 viewers.
    assert!(missing > 45 * 20, "missing {missing}");
    // What docs/repair.md quotes (`-- --nocapture` shows it).
    eprintln!(
        "seed {seed}: {} NACK packets in the group, {} asking as unicast viewers, {} repairs",
        nacks(&group),
        nacks(&alone),
        tx_group.packets
    );
    // Each viewer asked for each loss; the group, a few times per loss.
    assert!(
        nacks(&group) * 8 < nacks(&alone),
        "seed {seed}: NACK packets: {} in the group, {} each alone; sender {tx_group:?}",
        nacks(&group),
        nacks(&alone)
    );
    assert!(
        tx_group.loss_notices > 0 && tx_group.noticed > 0,
        "{tx_group:?}"
    );
    assert_eq!(tx_alone.loss_notices, 0);
    // The repairs still came in time: as few packets stay lost as without the dither, and
    // none came late.
    assert!(
        lost(&group) <= lost(&alone) + 45,
        "never had: {} in the group, {} alone",
        lost(&group),
        lost(&alone)
    );
    for r in &group.receivers {
        let s = r.repair_stats().unwrap();
        assert_eq!(s.nack.recovered_late, 0, "{s:?}");
        // Each viewer's round trip, from the sender's DLRR answers (RFC 3611): 2 × 25 ms and
        // the serialization of the report and the media packet ahead of the answer.
        let rtt = s.rtt_us.as_millis_f64();
        assert!((49.0..56.0).contains(&rtt), "seed {seed}: {rtt} ms");
    }
    assert_eq!(tx_group.repairer.too_late, 0, "{tx_group:?}");
}
