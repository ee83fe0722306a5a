//! The simulator's network: routing, multicast trees, UDP flows, the trace, replay by seed.

use metronome_link::topology::NodeId;
use metronome_link::traffic::RatePattern;
use metronome_link::{LinkConfig, LossModel};
use metronome_sim::flows::udp::{UdpFlow, UdpFlowConfig};
use metronome_sim::trace::TraceLevel;
use metronome_sim::{Sim, SimOutcome};
use metronome_time::Timestamp;
use std::time::Duration;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn link(rate_bps: u64, delay: Duration) -> LinkConfig {
    LinkConfig {
        rate_bps: Some(rate_bps),
        delay,
        ..LinkConfig::default()
    }
}

fn udp(name: &str, src: NodeId, receivers: Vec<NodeId>, bps: u64, secs: u64) -> Box<UdpFlow> {
    Box::new(UdpFlow::new(UdpFlowConfig {
        name: name.into(),
        src,
        receivers,
        payload_bytes: 1470,
        rate: RatePattern::Constant(bps),
        start: Duration::ZERO,
        duration: Duration::from_secs(secs),
        interval: Duration::from_secs(1),
        histograms: true,
    }))
}

/// A chain a — r1 — r2 — b: unicast crosses every hop; the delay adds up.
#[test]
fn unicast_follows_the_shortest_path_and_delays_add_up() {
    let mut sim = Sim::new(1, TraceLevel::Packets);
    let a = sim.add_node("a");
    let r1 = sim.add_node("r1");
    let r2 = sim.add_node("r2");
    let b = sim.add_node("b");
    // A longer detour a — x — y — z — b must not be taken.
    let x = sim.add_node("x");
    let y = sim.add_node("y");
    let z = sim.add_node("z");
    for (p, q) in [(a, x), (x, y), (y, z), (z, b)] {
        sim.add_link(p, q, link(1_000_000_000, ms(1)), link(1_000_000_000, ms(1)));
    }
    for (p, q) in [(a, r1), (r1, r2), (r2, b)] {
        sim.add_link(p, q, link(100_000_000, ms(5)), link(100_000_000, ms(5)));
    }
    sim.add_flow(udp("f", a, vec![b], 1_000_000, 1));
    sim.run_until(Timestamp::from_millis(2_000));
    let out = sim.finish();
    let r = &out.flows[0].receivers[0];
    assert_eq!(r.lost, 0);
    // Three hops of 5 ms, each serializing 1498 bytes at 100 Mbit/s (119.84 µs).
    let expected = 15_000_000 + 3 * 119_840;
    assert_eq!(r.min_delay_us.as_nanos_u64(), expected);
    assert_eq!(r.max_delay_us.as_nanos_u64(), expected);
    assert_eq!(out.counters.no_route, 0);
}

/// A tree: one source, two routers, six receivers. Each link carries one copy of each packet,
/// however many receivers are behind it.
#[test]
fn multicast_copies_once_per_branch() {
    let mut sim = Sim::new(2, TraceLevel::Packets);
    let s = sim.add_node("s");
    let core = sim.add_node("core");
    let e1 = sim.add_node("e1");
    let e2 = sim.add_node("e2");
    sim.add_link(s, core, link(100_000_000, ms(1)), LinkConfig::default());
    sim.add_link(core, e1, link(100_000_000, ms(1)), LinkConfig::default());
    sim.add_link(core, e2, link(100_000_000, ms(1)), LinkConfig::default());
    let mut receivers = Vec::new();
    for i in 0..6 {
        let h = sim.add_node(format!("h{i}"));
        let edge = if i < 3 { e1 } else { e2 };
        sim.add_link(edge, h, link(10_000_000, ms(2)), LinkConfig::default());
        receivers.push(h);
    }
    sim.add_flow(udp("m", s, receivers.clone(), 2_000_000, 2));
    sim.run_until(Timestamp::from_millis(3_000));
    let net_links: Vec<u64> = (0..sim.net().topology().link_count())
        .map(|i| {
            sim.net()
                .link_stats(metronome_link::topology::LinkId(i as u32))
                .sent
        })
        .collect();
    let out = sim.finish();
    let sent = out.flows[0].sent_packets;
    // 2 Mbit/s of 1470-byte payloads: one every 5.88 ms, from 0 while before 2 s.
    assert_eq!(sent, 341);
    // Forward links (even ids) each carried every packet once; back links nothing.
    for (i, n) in net_links.iter().enumerate() {
        let expect = if i % 2 == 0 { sent } else { 0 };
        assert_eq!(*n, expect, "link {i}");
    }
    for r in &out.flows[0].receivers {
        assert_eq!(r.packets, sent, "{}", r.node);
        assert_eq!(r.lost, 0);
    }
    assert_eq!(out.counters.delivered, 6 * sent);
}

/// Seed 001's UDP experiment on the simulator: a server, a switch, three clients whose links
/// have netem's limit; the loss per client is the link model's closed form (tested in
/// `netem_limit.rs`), here through routing and real flows.
#[test]
fn seed_001_star_loses_what_the_link_model_says() {
    let clients = [
        (10_000_000, 2, 50.0),
        (50_000_000, 10, 0.0),
        (200_000_000, 20, 0.0),
    ];
    let mut sim = Sim::new(3, TraceLevel::Off);
    let server = sim.add_node("server");
    let switch = sim.add_node("switch");
    sim.add_link(server, switch, LinkConfig::default(), LinkConfig::default());
    for (i, &(rate, limit, _)) in clients.iter().enumerate() {
        let c = sim.add_node(format!("client{i}"));
        let cfg = LinkConfig {
            rate_bps: Some(rate),
            delay: ms(20),
            netem_limit: Some(limit),
            ..LinkConfig::default()
        };
        sim.add_link(switch, c, cfg, LinkConfig::default());
        sim.add_flow(udp(&format!("udp{i}"), server, vec![c], 2_000_000, 10));
    }
    sim.run_until(Timestamp::from_millis(11_000));
    let out = sim.finish();
    for (f, &(_, _, loss)) in out.flows.iter().zip(&clients) {
        let r = &f.receivers[0];
        assert!(
            (r.loss_percent - loss).abs() <= 0.5,
            "{}: {} %",
            f.name,
            r.loss_percent
        );
        // iperf reports the received rate: what got through.
        let got = r.throughput_bps;
        let expect = 2_000_000.0 * 1498.0 / 1470.0 * (1.0 - loss / 100.0);
        assert!((got - expect).abs() / expect < 0.01, "{}: {got}", f.name);
        assert_eq!(r.intervals.len(), 11, "{:?}", r.intervals);
    }
}

fn lossy_run(seed: u64) -> SimOutcome {
    let mut sim = Sim::new(seed, TraceLevel::Packets);
    let a = sim.add_node("a");
    let b = sim.add_node("b");
    let c = sim.add_node("c");
    let lossy = LinkConfig {
        rate_bps: Some(5_000_000),
        delay: ms(10),
        jitter: ms(3),
        loss: LossModel::simple_gilbert(0.02, 0.3),
        queue_limit_packets: Some(8),
        duplicate: 0.01,
        ..LinkConfig::default()
    };
    sim.add_link(a, b, lossy.clone(), lossy.clone());
    sim.add_link(b, c, lossy.clone(), lossy);
    sim.add_flow(udp("x", a, vec![c], 6_000_000, 2));
    sim.add_flow(udp("y", c, vec![a], 1_000_000, 2));
    sim.run_until(Timestamp::from_millis(3_000));
    sim.finish()
}

#[test]
fn the_same_seed_replays_the_same_trace() {
    let seed = 0x5eed_0001;
    let one = lossy_run(seed).trace.to_csv();
    let two = lossy_run(seed).trace.to_csv();
    assert!(one == two, "seed {seed:#x}: two runs differ");
    let other = lossy_run(seed + 1).trace.to_csv();
    assert_ne!(
        one, other,
        "seed {seed:#x}: another seed gave the same trace"
    );
    // Every packet sent is accounted for: delivered, or dropped with a reason, or a copy.
    assert!(
        one.contains(",dropped,") && one.contains("queue-full"),
        "seed {seed:#x}"
    );
    assert!(
        one.contains(",dropped,") && one.contains(",loss"),
        "seed {seed:#x}"
    );
}

#[test]
fn the_trace_accounts_for_every_packet() {
    let out = lossy_run(9);
    let csv = out.trace.to_csv();
    let count = |ev: &str| {
        csv.lines()
            .filter(|l| l.split(',').nth(1) == Some(ev))
            .count() as u64
    };
    let sent: u64 = out.flows.iter().map(|f| f.sent_packets).sum();
    assert_eq!(count("sent"), sent);
    let delivered: u64 = out
        .flows
        .iter()
        .flat_map(|f| &f.receivers)
        .map(|r| r.packets + r.duplicates)
        .sum();
    assert_eq!(count("delivered"), delivered);
    assert_eq!(out.counters.delivered, delivered);
    // Each hop queues or drops: sent packets that were queued on the first hop and then
    // dropped on the second show up twice, never zero times.
    let queued = count("queued");
    let dropped = count("dropped");
    assert!(
        queued + dropped >= sent,
        "seed 9: {queued} + {dropped} < {sent}"
    );
}

#[test]
fn a_square_wave_sends_its_mean_rate() {
    let mut sim = Sim::new(4, TraceLevel::Off);
    let a = sim.add_node("a");
    let b = sim.add_node("b");
    sim.add_link(a, b, LinkConfig::default(), LinkConfig::default());
    sim.add_flow(Box::new(UdpFlow::new(UdpFlowConfig {
        name: "sq".into(),
        src: a,
        receivers: vec![b],
        payload_bytes: 1000,
        rate: RatePattern::Square {
            high_bps: 8_000_000,
            low_bps: 0,
            period: Duration::from_secs(1),
            duty: 0.25,
        },
        start: Duration::ZERO,
        duration: Duration::from_secs(4),
        interval: Duration::from_millis(250),
        histograms: false,
    })));
    sim.run_until(Timestamp::from_millis(5_000));
    let out = sim.finish();
    // 8 Mbit/s for 250 ms of every second: 250 packets of 1000 bytes per second.
    assert_eq!(out.flows[0].sent_packets, 1000);
    let iv = &out.flows[0].receivers[0].intervals;
    for (i, bin) in iv.iter().take(16).enumerate() {
        let expect = if i % 4 == 0 { 250 } else { 0 };
        assert_eq!(bin.packets, expect, "interval {i}: {iv:?}");
    }
}
