//! Invariants of the link over random configurations and send schedules.

use metronome_link::{
    DeliveryTrace, JitterModel, Link, LinkConfig, LinkStats, LossModel, SendOutcome,
};
use metronome_time::Timestamp;
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

/// A packet's identity and send time, carried as the payload.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Pkt {
    id: usize,
    sent: Timestamp,
}

#[derive(Debug, PartialEq)]
struct Delivery {
    polled_at: Timestamp,
    arrival: Timestamp,
    pkt: Pkt,
}

#[derive(Debug, PartialEq)]
struct Trace {
    outcomes: Vec<SendOutcome>,
    /// `queue_delay(now)` just before each send.
    waits: Vec<Duration>,
    deliveries: Vec<Delivery>,
    stats: LinkStats,
}

/// Drives the link like a simulator: before each send, deliver what is due; at the end, run the
/// clock forward on `poll_timeout` until nothing is in flight.
fn run(cfg: &LinkConfig, seed: u64, schedule: &[(u64, usize)]) -> Trace {
    let mut link = Link::new(cfg.clone(), seed);
    let mut now = Timestamp::ZERO;
    let mut outcomes = Vec::new();
    let mut waits = Vec::new();
    let mut deliveries = Vec::new();
    let mut deliver = |link: &mut Link<Pkt>, now| {
        while let Some((arrival, pkt)) = link.poll_deliver(now) {
            deliveries.push(Delivery {
                polled_at: now,
                arrival,
                pkt,
            });
        }
    };
    for (id, &(gap_ns, size)) in schedule.iter().enumerate() {
        now += Duration::from_nanos(gap_ns);
        deliver(&mut link, now);
        waits.push(link.queue_delay(now));
        outcomes.push(link.send(now, size, Pkt { id, sent: now }));
    }
    while let Some(at) = link.poll_timeout() {
        assert!(at >= now, "poll_timeout went back in time");
        now = at;
        deliver(&mut link, now);
    }
    assert_eq!(link.in_flight(), 0);
    Trace {
        outcomes,
        waits,
        deliveries,
        stats: link.stats().clone(),
    }
}

fn prob() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), Just(1.0), 0.0..=1.0]
}

fn duration(max_ms: u64) -> impl Strategy<Value = Duration> {
    (0..=max_ms * 1_000_000).prop_map(Duration::from_nanos)
}

fn loss_model() -> impl Strategy<Value = LossModel> {
    prop_oneof![
        Just(LossModel::None),
        prob().prop_map(LossModel::Bernoulli),
        (prob(), prob(), prob(), prob()).prop_map(|(p, r, g, b)| LossModel::GilbertElliott {
            p_good_to_bad: p,
            p_bad_to_good: r,
            loss_in_good: g,
            loss_in_bad: b,
        }),
    ]
}

prop_compose! {
    fn link_config()(
        rate_bps in prop::option::of(100_000u64..1_000_000_000),
        burst_bytes in prop::option::of(1000usize..100_000),
        delay in duration(50),
        jitter in prop_oneof![Just(Duration::ZERO), duration(20)],
        jitter_model in prop_oneof![
            Just(JitterModel::Uniform),
            Just(JitterModel::Normal { reorder: true }),
            Just(JitterModel::Normal { reorder: false }),
            Just(JitterModel::Pareto { reorder: true }),
            Just(JitterModel::ParetoNormal { reorder: false }),
        ],
        loss in loss_model(),
        reorder in prop_oneof![Just(0.0), prob()],
        reorder_delay in duration(20),
        duplicate in prop_oneof![Just(0.0), prob()],
        queue_limit_bytes in prop::option::of(0usize..50_000),
        queue_limit_packets in prop::option::of(0usize..40),
        netem_limit in prop::option::of(0usize..40),
        trace in prop::option::of(prop::collection::vec(0u64..20, 1..30)),
    ) -> LinkConfig {
        // A Mahimahi trace (sorted ms, a positive period) as the capacity of rate-less links.
        let delivery = trace.filter(|_| rate_bps.is_none()).map(|mut ms| {
            ms.sort_unstable();
            let last = ms.len() - 1;
            ms[last] = ms[last].max(1);
            Arc::new(DeliveryTrace::from_millis(&ms).expect("a sorted trace with a period"))
        });
        LinkConfig {
            rate_bps, burst_bytes, delay, jitter, jitter_model, loss, reorder, reorder_delay, duplicate,
            queue_limit_bytes, queue_limit_packets, netem_limit, delivery,
        }
    }
}

fn schedule() -> impl Strategy<Value = Vec<(u64, usize)>> {
    // Gaps up to 5 ms, often zero (bursts); sizes from 1 byte to a jumbo-ish frame.
    let gap = prop_oneof![Just(0u64), 0u64..5_000_000];
    prop::collection::vec((gap, 1usize..2000), 0..300)
}

proptest! {
    #[test]
    fn nothing_arrives_early_or_out_of_arrival_order(
        cfg in link_config(), seed in any::<u64>(), sched in schedule()
    ) {
        let trace = run(&cfg, seed, &sched);
        // The delay is a floor for the uniform jitter; normal jitter goes below it, never
        // below zero.
        let floor = match cfg.jitter_model {
            JitterModel::Uniform => cfg.delay,
            _ => Duration::ZERO,
        };
        for d in &trace.deliveries {
            prop_assert!(d.arrival >= d.pkt.sent + floor, "{d:?} before send + delay");
            prop_assert!(d.arrival <= d.polled_at, "{d:?} handed out before its arrival");
        }
        prop_assert!(trace.deliveries.windows(2).all(|w| w[0].arrival <= w[1].arrival));
    }

    #[test]
    fn without_reorder_order_is_preserved(
        mut cfg in link_config(), seed in any::<u64>(), sched in schedule()
    ) {
        cfg.reorder = 0.0;
        cfg.jitter_model = match cfg.jitter_model {
            JitterModel::Normal { .. } => JitterModel::Normal { reorder: false },
            JitterModel::Pareto { .. } => JitterModel::Pareto { reorder: false },
            JitterModel::ParetoNormal { .. } => JitterModel::ParetoNormal { reorder: false },
            m => m,
        };
        let trace = run(&cfg, seed, &sched);
        let ids: Vec<_> = trace.deliveries.iter().map(|d| d.pkt.id).collect();
        prop_assert!(ids.windows(2).all(|w| w[0] <= w[1]), "reordered: {ids:?}");
    }

    #[test]
    fn every_packet_is_accounted_for(
        cfg in link_config(), seed in any::<u64>(), sched in schedule()
    ) {
        let trace = run(&cfg, seed, &sched);
        let s = &trace.stats;
        prop_assert_eq!(s.delivered + s.lost + s.dropped_queue, s.sent + s.duplicated);
        prop_assert_eq!(s.sent, sched.len() as u64);
        prop_assert_eq!(s.delivered, trace.deliveries.len() as u64);
        let mut copies = vec![0u64; sched.len()];
        for d in &trace.deliveries {
            copies[d.pkt.id] += 1;
        }
        let count = |o| trace.outcomes.iter().filter(|&&x| x == o).count() as u64;
        prop_assert_eq!(s.lost, count(SendOutcome::Lost));
        prop_assert_eq!(s.dropped_queue, count(SendOutcome::DroppedQueueFull));
        for (id, outcome) in trace.outcomes.iter().enumerate() {
            let expected = if *outcome == SendOutcome::Queued { 1..=2 } else { 0..=0 };
            prop_assert!(expected.contains(&copies[id]), "packet {id} {outcome:?} x{}", copies[id]);
        }
        prop_assert_eq!(s.duplicated, copies.iter().filter(|&&c| c == 2).count() as u64);
        let delivered_bytes: u64 = trace.deliveries.iter().map(|d| sched[d.pkt.id].1 as u64).sum();
        prop_assert_eq!(s.bytes_delivered, delivered_bytes);
    }

    #[test]
    fn the_queue_bounds_the_wait(
        cfg in link_config(), seed in any::<u64>(), sched in schedule()
    ) {
        // A packet is accepted only if the bytes not yet serialized, plus its own, fit the limit;
        // so the wait ahead of an accepted packet plus its own transmission time is at most
        // limit·8 / rate (give or take the nanosecond rounding of the carry).
        let trace = run(&cfg, seed, &sched);
        if let (Some(rate), Some(limit)) = (cfg.rate_bps, cfg.queue_limit_bytes) {
            let ns = |bytes: usize| bytes as u128 * 8_000_000_000 / rate as u128;
            for (id, outcome) in trace.outcomes.iter().enumerate() {
                if *outcome == SendOutcome::Queued {
                    let total = trace.waits[id].as_nanos() + ns(sched[id].1);
                    prop_assert!(total <= ns(limit) + 2, "packet {id}: {total} ns > {} ns", ns(limit));
                }
            }
            let bound = ns(limit) + 2;
            prop_assert!(trace.stats.max_queue_delay.as_nanos() <= bound);
        }
    }

    #[test]
    fn a_seed_replays_exactly(cfg in link_config(), seed in any::<u64>(), sched in schedule()) {
        prop_assert_eq!(run(&cfg, seed, &sched), run(&cfg, seed, &sched));
    }
}
