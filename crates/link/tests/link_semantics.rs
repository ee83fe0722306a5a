//! Link semantics worked out by hand.

use metronome_link::{JitterModel, Link, LinkConfig, LossModel, SendOutcome};
use metronome_time::Timestamp;
use std::time::Duration;

fn ms(v: u64) -> Timestamp {
    Timestamp::from_millis(v)
}

fn us(v: u64) -> Timestamp {
    Timestamp::from_micros(v)
}

/// Everything still in flight, in delivery order, driven by `poll_timeout` like a simulator would.
fn drain<T>(link: &mut Link<T>) -> Vec<(Timestamp, T)> {
    let mut out = Vec::new();
    while let Some(at) = link.poll_timeout() {
        while let Some(d) = link.poll_deliver(at) {
            out.push(d);
        }
    }
    out
}

fn eight_mbit(delay_ms: u64, limit: Option<usize>) -> LinkConfig {
    LinkConfig {
        rate_bps: Some(8_000_000),
        delay: Duration::from_millis(delay_ms),
        queue_limit_bytes: limit,
        ..LinkConfig::default()
    }
}

#[test]
fn packets_serialize_back_to_back() {
    // 1000 bytes = 8000 bits at 8 Mbit/s = 1 ms each. Three sent at t=0 leave at 1, 2, 3 ms and,
    // after 10 ms of propagation, arrive at 11, 12, 13 ms. The third waited 2 ms for the wire.
    let mut link = Link::new(eight_mbit(10, None), 7);
    for i in 0..3 {
        assert_eq!(link.send(ms(0), 1000, i), SendOutcome::Queued);
    }
    assert_eq!(link.queue_delay(ms(0)), Duration::from_millis(3));
    assert_eq!(link.poll_timeout(), Some(ms(11)));
    assert_eq!(link.poll_deliver(us(10_999)), None);
    assert_eq!(drain(&mut link), [(ms(11), 0), (ms(12), 1), (ms(13), 2)]);
    assert_eq!(link.stats().max_queue_delay, Duration::from_millis(2));
    assert_eq!(link.poll_timeout(), None);
}

#[test]
fn an_idle_link_starts_at_now() {
    // 500 bytes take 0.5 ms. A packet sent after the link went idle does not wait.
    let mut link = Link::new(eight_mbit(0, None), 7);
    link.send(ms(0), 500, 'a');
    link.send(ms(5), 500, 'b');
    link.send(ms(5), 500, 'c');
    assert_eq!(
        drain(&mut link),
        [(us(500), 'a'), (us(5500), 'b'), (us(6000), 'c')]
    );
    assert_eq!(link.stats().max_queue_delay, Duration::from_micros(500));
}

#[test]
fn drop_tail_counts_bytes_until_their_last_bit_leaves() {
    // Limit 3000 bytes: at t=0 three 1000-byte packets fit (the first on the wire, two waiting);
    // the fourth would make 4000 and is dropped. At 0.5 ms the first is still on the wire: still
    // full. At 1 ms it has left, so one more fits; it departs after the third, at 4 ms.
    let mut link = Link::new(eight_mbit(10, Some(3000)), 7);
    let outcomes: Vec<_> = (0..4).map(|i| link.send(ms(0), 1000, i)).collect();
    use SendOutcome::*;
    assert_eq!(outcomes, [Queued, Queued, Queued, DroppedQueueFull]);
    assert_eq!(link.send(us(500), 1000, 4), DroppedQueueFull);
    assert_eq!(link.send(ms(1), 1000, 5), Queued);
    assert_eq!(link.send(ms(1), 1000, 6), DroppedQueueFull);
    // Even one byte does not fit: 3000 + 1 > 3000.
    assert_eq!(link.send(ms(1), 1, 7), DroppedQueueFull);
    let arrivals = drain(&mut link);
    assert_eq!(
        arrivals,
        [(ms(11), 0), (ms(12), 1), (ms(13), 2), (ms(14), 5)]
    );
    let s = link.stats();
    assert_eq!((s.sent, s.dropped_queue, s.delivered), (8, 4, 4));
    assert_eq!(s.bytes_sent, 7001);
    assert_eq!(s.bytes_delivered, 4000);
    assert_eq!(s.max_queue_delay, Duration::from_millis(2));
}

#[test]
fn a_packet_larger_than_the_queue_never_fits() {
    let mut link = Link::new(eight_mbit(0, Some(1500)), 7);
    assert_eq!(link.send(ms(0), 1501, ()), SendOutcome::DroppedQueueFull);
    assert_eq!(link.send(ms(0), 1500, ()), SendOutcome::Queued);
}

#[test]
fn without_a_rate_there_is_no_queue() {
    let cfg = LinkConfig {
        delay: Duration::from_millis(20),
        queue_limit_bytes: Some(100),
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 7);
    for i in 0..5 {
        assert_eq!(link.send(ms(1), 1000, i), SendOutcome::Queued);
    }
    let arrivals = drain(&mut link);
    assert_eq!(arrivals.len(), 5);
    assert!(arrivals
        .iter()
        .enumerate()
        .all(|(i, &(t, v))| t == ms(21) && v == i));
}

#[test]
fn loss_of_zero_and_one() {
    let mut link = Link::new(
        LinkConfig {
            loss: LossModel::Bernoulli(1.0),
            ..LinkConfig::default()
        },
        7,
    );
    assert!((0..100).all(|i| link.send(ms(0), 100, i) == SendOutcome::Lost));
    assert_eq!(link.poll_timeout(), None);
    assert_eq!(link.stats().lost, 100);

    let mut link = Link::new(
        LinkConfig {
            loss: LossModel::Bernoulli(0.0),
            ..LinkConfig::default()
        },
        7,
    );
    assert!((0..100).all(|i| link.send(ms(0), 100, i) == SendOutcome::Queued));
}

#[test]
fn lost_packets_take_no_queue_room() {
    // Everything lost: nothing ever occupies the 1000-byte queue, then the loss is switched off.
    let mut cfg = eight_mbit(0, Some(1000));
    cfg.loss = LossModel::Bernoulli(1.0);
    let mut link = Link::new(cfg.clone(), 7);
    for i in 0..10 {
        assert_eq!(link.send(ms(0), 1000, i), SendOutcome::Lost);
    }
    cfg.loss = LossModel::None;
    link.set_config(cfg);
    assert_eq!(link.send(ms(0), 1000, 10), SendOutcome::Queued);
    assert_eq!(drain(&mut link), [(ms(1), 10)]);
}

#[test]
fn duplicates_arrive_right_after_the_original() {
    let cfg = LinkConfig {
        delay: Duration::from_millis(5),
        duplicate: 1.0,
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 7);
    link.send(ms(0), 100, 'a');
    link.send(ms(1), 100, 'b');
    assert_eq!(
        drain(&mut link),
        [(ms(5), 'a'), (ms(5), 'a'), (ms(6), 'b'), (ms(6), 'b')]
    );
    let s = link.stats();
    assert_eq!((s.sent, s.duplicated, s.delivered), (2, 2, 4));
}

#[test]
fn reordered_packets_are_held_back_and_overtaken() {
    // One packet a millisecond, 10 ms delay; picked packets get 2.5 ms more, so the next two
    // overtake each of them.
    let cfg = LinkConfig {
        delay: Duration::from_millis(10),
        reorder: 0.3,
        reorder_delay: Duration::from_micros(2500),
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 11);
    for i in 0..1000u64 {
        link.send(ms(i), 100, i);
    }
    let arrivals = drain(&mut link);
    let mut late = 0;
    for &(t, i) in &arrivals {
        let on_time = ms(i + 10);
        assert!(t == on_time || t == on_time + Duration::from_micros(2500));
        late += usize::from(t != on_time);
    }
    assert_eq!(late as u64, link.stats().reordered);
    assert!((250..350).contains(&late), "{late} of 1000 held back");
    let ids: Vec<_> = arrivals.iter().map(|&(_, i)| i).collect();
    assert!(ids.windows(2).any(|w| w[0] > w[1]), "something overtaken");
    assert!(arrivals.windows(2).all(|w| w[0].0 <= w[1].0));
}

#[test]
fn jitter_never_reorders() {
    // Jitter (5 ms) much larger than the spacing (0.1 ms): without the order-preserving floor,
    // packets would overtake each other constantly.
    let cfg = LinkConfig {
        delay: Duration::from_millis(10),
        jitter: Duration::from_millis(5),
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 3);
    for i in 0..2000u64 {
        link.send(us(100 * i), 100, i);
    }
    let arrivals = drain(&mut link);
    for (i, &(t, id)) in arrivals.iter().enumerate() {
        assert_eq!(id, i as u64);
        assert!(t >= us(100 * id) + Duration::from_millis(10));
    }
}

#[test]
fn same_seed_same_run_and_other_seeds_differ() {
    let cfg = LinkConfig {
        rate_bps: Some(10_000_000),
        burst_bytes: None,
        delay: Duration::from_millis(10),
        jitter: Duration::from_millis(3),
        jitter_model: JitterModel::Uniform,
        loss: LossModel::GilbertElliott {
            p_good_to_bad: 0.05,
            p_bad_to_good: 0.3,
            loss_in_good: 0.01,
            loss_in_bad: 0.6,
        },
        reorder: 0.05,
        reorder_delay: Duration::from_millis(2),
        duplicate: 0.02,
        queue_limit_bytes: Some(20_000),
        queue_limit_packets: Some(12),
        netem_limit: Some(40),
        delivery: None,
    };
    let run = |seed| {
        let mut link = Link::new(cfg.clone(), seed);
        let outcomes: Vec<_> = (0..3000u64)
            .map(|i| link.send(us(900 * i), 1200, i))
            .collect();
        (outcomes, drain(&mut link), link.stats().clone())
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
    assert_ne!(run(2).1, run(3).1);
}

#[test]
fn duplication_does_not_reshuffle_loss() {
    // Common random numbers: every packet draws the same variates whatever the configuration.
    let lost_ids = |duplicate| {
        let cfg = LinkConfig {
            loss: LossModel::Bernoulli(0.2),
            duplicate,
            ..LinkConfig::default()
        };
        let mut link = Link::new(cfg, 99);
        (0..1000u64)
            .filter(|&i| link.send(ms(i), 100, i) == SendOutcome::Lost)
            .collect::<Vec<_>>()
    };
    assert_eq!(lost_ids(0.0), lost_ids(0.5));
}
