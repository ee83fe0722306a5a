//! Queue limits against their closed forms: a drop-tail queue limited in packets, and netem's
//! own `limit`, which counts every packet the qdisc holds, those still serving their delay
//! included. The second is what decided seed 001's UDP loss table (three clients behind netem
//! with 20 ms of delay and limits of 2, 10 and 20 packets; iperf sending 1470-byte datagrams at
//! 2 to 10 Mbit/s): the link model reproduces that experiment as it ran.

use metronome_link::{Link, LinkConfig, SendOutcome};
use metronome_time::Timestamp;
use std::time::Duration;

#[test]
fn a_packet_limit_holds_that_many_packets_the_one_on_the_wire_included() {
    // 1000-byte packets at 1 Mbit/s take 8 ms each. A burst of ten at t = 0 into a queue of 3:
    // three accepted; once the first has left (8 ms), room for one more.
    let cfg = LinkConfig {
        rate_bps: Some(1_000_000),
        queue_limit_packets: Some(3),
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 1);
    let at_zero: Vec<_> = (0..10)
        .map(|_| link.send(Timestamp::ZERO, 1000, ()))
        .collect();
    let accepted = at_zero
        .iter()
        .filter(|o| **o == SendOutcome::Queued)
        .count();
    assert_eq!(accepted, 3, "{at_zero:?}");
    let t = Timestamp::ZERO + Duration::from_millis(8);
    assert_eq!(link.send(t, 1000, ()), SendOutcome::Queued);
    assert_eq!(link.send(t, 1000, ()), SendOutcome::DroppedQueueFull);
    assert_eq!(link.stats().dropped_queue, 8);
}

/// Seed 001's clients: link rate (bit/s) and netem limit (packets); 20 ms of delay for all.
const CLIENTS: [(&str, u64, usize); 3] = [
    ("poor", 10_000_000, 2),
    ("moderate", 50_000_000, 10),
    ("good", 200_000_000, 20),
];
/// The ladder's offered rates, Mbit/s of UDP payload (iperf -b, 1470-byte datagrams).
const LADDER: [u64; 5] = [2, 4, 6, 8, 10];
/// The seed's measured loss, %, per client and ladder rate.
const SEED: [[f64; 5]; 3] = [
    [55.0, 75.0, 85.0, 87.0, 91.0],
    [0.0, 0.0, 9.3, 33.0, 47.0],
    [0.0, 0.0, 0.0, 0.0, 0.0],
];
const PAYLOAD: u64 = 1470;
/// On the wire: the payload and the IPv4 and UDP headers.
const WIRE: usize = 1470 + 28;
const DELAY: Duration = Duration::from_millis(20);

/// The closed form for periodic arrivals: a packet is held for its serialisation and its delay,
/// `hold`; one accepted at slot `i` still counts at slots `i+1 … i+k−1`, `k = ⌈hold / interval⌉`.
/// So a limit of `L` packets accepts `L` of every `k` (all when `k ≤ L`). The fluid bound of the
/// same queue is `L / hold` packets a second.
fn closed_form_loss(rate: u64, limit: usize, interval: Duration) -> f64 {
    let hold = DELAY + Duration::from_nanos(WIRE as u64 * 8 * 1_000_000_000 / rate);
    let k = (hold.as_nanos()).div_ceil(interval.as_nanos()) as usize;
    if k <= limit {
        0.0
    } else {
        1.0 - limit as f64 / k as f64
    }
}

#[test]
fn netem_limit_reproduces_the_closed_form_of_seed_001s_udp_table() {
    let mut table = String::new();
    for (c, &(name, rate, limit)) in CLIENTS.iter().enumerate() {
        for (j, &mbps) in LADDER.iter().enumerate() {
            let cfg = LinkConfig {
                rate_bps: Some(rate),
                delay: DELAY,
                netem_limit: Some(limit),
                ..LinkConfig::default()
            };
            let mut link = Link::new(cfg, 7);
            let interval = Duration::from_nanos(PAYLOAD * 8 * 1_000_000_000 / (mbps * 1_000_000));
            // 10 s, as iperf ran.
            let n = (10_000_000_000 / interval.as_nanos()) as u64;
            let mut delivered = 0u64;
            for i in 0..n {
                let now = Timestamp::ZERO + interval * i as u32;
                while link.poll_deliver(now).is_some() {
                    delivered += 1;
                }
                link.send(now, WIRE, i);
            }
            while link.poll_deliver(Timestamp::MAX).is_some() {
                delivered += 1;
            }
            let measured = 100.0 * (1.0 - delivered as f64 / n as f64);
            let closed = 100.0 * closed_form_loss(rate, limit, interval);
            table.push_str(&format!(
                "{name:>8} {mbps:>2} Mbit/s: model {measured:5.1} %, closed form {closed:5.1} %, seed {:5.1} %\n",
                SEED[c][j]
            ));
            assert!(
                (measured - closed).abs() <= 1.0,
                "{name} at {mbps} Mbit/s: the link lost {measured:.1} %, the closed form says \
                 {closed:.1} %\n{table}"
            );
            // With nothing fitted, the seed's own measurement is within 5 points in every
            // cell: iperf paces its datagrams evenly, so the periodic form is the one that
            // applies (the fluid bound, `L / hold`, would say 44 % for the poor client at
            // 2 Mbit/s; the seed lost 55 %, the periodic form 50 %).
            assert!(
                (measured - SEED[c][j]).abs() <= 5.0 + 1e-9,
                "{name} at {mbps} Mbit/s: {measured:.1} % against the seed's {} %\n{table}",
                SEED[c][j]
            );
            // The fluid bound is never beaten.
            let hold = DELAY.as_secs_f64() + WIRE as f64 * 8.0 / rate as f64;
            let offered = 1.0 / interval.as_secs_f64();
            let passed = offered * (1.0 - measured / 100.0);
            assert!(
                passed <= limit as f64 / hold * 1.001,
                "{name} {mbps}: {passed} pkt/s"
            );
        }
    }
    eprintln!("{table}");
}

/// A token bucket (tc-tbf): after an idle spell `burst` bytes leave at once, and by any time
/// `t` no more than `burst + rate·t` bytes have left; under a load above its rate it passes its
/// rate (within 1 %), and `limit` bytes wait at most.
#[test]
fn a_token_bucket_passes_its_burst_at_once_and_its_rate_over_time() {
    let rate = 8_000_000; // 1 MB/s
    let cfg = LinkConfig {
        rate_bps: Some(rate),
        burst_bytes: Some(15_000),
        queue_limit_bytes: Some(30_000),
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 3);
    // Ten 1500-byte packets at t = 0: the full bucket lets all ten leave at once.
    for i in 0..10 {
        assert_eq!(link.send(Timestamp::ZERO, 1500, i), SendOutcome::Queued);
    }
    let at_once: Vec<_> = std::iter::from_fn(|| link.poll_deliver(Timestamp::ZERO)).collect();
    assert_eq!(at_once.len(), 10);
    // Then 12 Mbit/s offered for 10 s (1000 packets a second): the bucket passes 8 Mbit/s, the
    // rest waits up to the limit and is dropped beyond it.
    let mut delivered_bytes = 0u64;
    let mut bound_checked = 0;
    for i in 0..10_000u64 {
        let now = Timestamp::ZERO + Duration::from_micros(1000 * i);
        while let Some((at, _)) = link.poll_deliver(now) {
            delivered_bytes += 1500;
            // The first burst emptied the bucket at t = 0: since then no more than what
            // accrued has left.
            let allowed = at.as_nanos() * (rate / 8) / 1_000_000_000;
            assert!(delivered_bytes <= allowed, "{delivered_bytes} B by {at:?}");
            bound_checked += 1;
        }
        link.send(now, 1500, 10 + i);
    }
    assert!(bound_checked > 5000);
    let rate_seen = delivered_bytes as f64 * 8.0 / 10.0;
    assert!(
        (rate_seen - rate as f64).abs() < 0.01 * rate as f64,
        "{rate_seen} bit/s through an {rate} bit/s bucket"
    );
    assert!(link.stats().dropped_queue > 0);
    assert!(
        link.stats().max_queue_delay <= Duration::from_millis(31),
        "{:?}",
        link.stats()
    );
    // A packet larger than the bucket never fits: dropped, as tbf drops it.
    let t = Timestamp::ZERO + Duration::from_secs(20);
    assert_eq!(link.send(t, 20_000, 0), SendOutcome::DroppedQueueFull);
}

/// netem's `delay 20ms 5ms distribution normal`: the delays have the normal's mean and spread
/// (within 1 % over 100,000 packets, and 68 % within one σ); with reordering, packets sent
/// 1 ms apart overtake each other; without it, they never do.
#[test]
fn normal_jitter_has_its_distribution_and_reorders_only_when_asked() {
    use metronome_link::JitterModel;
    for reorder in [true, false] {
        let cfg = LinkConfig {
            delay: Duration::from_millis(20),
            jitter: Duration::from_millis(5),
            jitter_model: JitterModel::Normal { reorder },
            ..LinkConfig::default()
        };
        let mut link = Link::new(cfg, 11);
        let n = 100_000u64;
        let gap = Duration::from_millis(1);
        for i in 0..n {
            link.send(Timestamp::ZERO + gap * i as u32, 100, i);
        }
        let mut delays = Vec::new();
        let mut overtaken = 0;
        let mut last = 0u64;
        while let Some((at, i)) = link.poll_deliver(Timestamp::MAX) {
            let sent = Timestamp::ZERO + gap * i as u32;
            delays.push(at.saturating_since(sent).as_secs_f64() * 1e3);
            if i < last {
                overtaken += 1;
            }
            last = last.max(i);
        }
        assert_eq!(delays.len() as u64, n);
        if reorder {
            let mean = delays.iter().sum::<f64>() / n as f64;
            let sd = (delays.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
            assert!((mean - 20.0).abs() < 0.2, "mean {mean} ms");
            assert!((sd - 5.0).abs() < 0.05, "σ {sd} ms");
            let within = delays.iter().filter(|d| (**d - 20.0).abs() <= 5.0).count();
            let share = within as f64 / n as f64;
            assert!((share - 0.6827).abs() < 0.01, "{share} within one σ");
            assert!(overtaken > 10_000, "{overtaken} overtaken");
        } else {
            assert_eq!(overtaken, 0);
            // Waiting for the packets before only lengthens delays.
            let mean = delays.iter().sum::<f64>() / n as f64;
            assert!(mean > 20.0, "mean {mean} ms");
        }
    }
}

/// netem's `delay 50ms 10ms distribution pareto` and `paretonormal`: the delays' quantiles
/// are the tables' quantile functions (iproute2's `netem/pareto.c`: a Pareto of shape 3,
/// `(X − 1.5) · 4/3`; `paretonormal.c`: ¼ normal + ¾ that), within 0.1 ms at the 10th, 50th,
/// 90th and 99th percentiles over 200,000 packets; the least is 50 − ⅔·10 ms for Pareto.
#[test]
fn pareto_jitters_have_netems_quantiles() {
    use metronome_link::jitter::{normal_quantile, pareto_z};
    use metronome_link::JitterModel;
    let closed = |model: JitterModel, q: f64| {
        let z = match model {
            JitterModel::Pareto { .. } => pareto_z(q),
            _ => (0.25 * normal_quantile(q) + 0.75 * pareto_z(q)).clamp(-4.0, 32767.0 / 8192.0),
        };
        50.0 + 10.0 * z
    };
    for model in [
        JitterModel::Pareto { reorder: true },
        JitterModel::ParetoNormal { reorder: true },
    ] {
        let cfg = LinkConfig {
            delay: Duration::from_millis(50),
            jitter: Duration::from_millis(10),
            jitter_model: model,
            ..LinkConfig::default()
        };
        let mut link = Link::new(cfg, 13);
        let n = 200_000u64;
        let gap = Duration::from_micros(100);
        for i in 0..n {
            link.send(Timestamp::ZERO + gap * i as u32, 100, i);
        }
        let mut delays: Vec<f64> = std::iter::from_fn(|| link.poll_deliver(Timestamp::MAX))
            .map(|(at, i)| {
                at.saturating_since(Timestamp::ZERO + gap * i as u32)
                    .as_secs_f64()
                    * 1e3
            })
            .collect();
        assert_eq!(delays.len() as u64, n);
        delays.sort_by(f64::total_cmp);
        for q in [0.1, 0.5, 0.9, 0.99] {
            let got = delays[(q * n as f64) as usize];
            let want = closed(model, q);
            assert!(
                (got - want).abs() < 0.1,
                "{model:?} at {q}: {got} ms, closed form {want} ms"
            );
        }
        if let JitterModel::Pareto { .. } = model {
            assert!(delays[0] >= 50.0 - 20.0 / 3.0 - 1e-6, "{}", delays[0]);
            // The tail is capped where netem's table ends: 50 + 10 · 32767/8192 ms.
            assert!(delays[delays.len() - 1] <= 50.0 + 10.0 * 32767.0 / 8192.0 + 1e-6);
        }
    }
}
