//! Links that change over time, against their closed forms: a rate square wave carries its
//! mean rate; a rate step makes the packets already queued leave at the new spacing; a delay
//! step applies to packets sent after it; a Mahimahi trace carries its opportunities' bytes.

use metronome_link::{DeliveryTrace, Link, LinkConfig, LinkSchedule, SendOutcome};
use metronome_time::Timestamp;
use std::sync::Arc;
use std::time::Duration;

fn rate(bps: u64) -> LinkConfig {
    LinkConfig {
        rate_bps: Some(bps),
        ..LinkConfig::default()
    }
}

/// Offers `size`-byte packets every `gap` until `until`, and returns the bytes delivered by
/// each time in `checkpoints`.
fn saturate(
    link: &mut Link<()>,
    size: usize,
    gap: Duration,
    until: Timestamp,
    checkpoints: &[Timestamp],
) -> Vec<u64> {
    let mut t = Timestamp::ZERO;
    let mut arrivals = Vec::new();
    while t < until {
        link.send(t, size, ());
        while let Some((at, ())) = link.poll_deliver(t) {
            arrivals.push(at);
        }
        t += gap;
    }
    while let Some((at, ())) = link.poll_deliver(Timestamp::MAX) {
        arrivals.push(at);
    }
    checkpoints
        .iter()
        .map(|c| arrivals.iter().filter(|a| *a <= c).count() as u64 * size as u64)
        .collect()
}

#[test]
fn a_rate_square_wave_carries_its_mean_rate() {
    // 10 Mbit/s for 250 ms, 2 Mbit/s for 750 ms: a mean of 4 Mbit/s. Offered 12 Mbit/s.
    let s = LinkSchedule::square(
        rate(10_000_000),
        rate(2_000_000),
        Duration::from_secs(1),
        0.25,
    )
    .unwrap();
    let mut link = Link::with_schedule(s, 1);
    let got = saturate(
        &mut link,
        1500,
        Duration::from_micros(1000),
        Timestamp::from_secs(20),
        &[Timestamp::from_secs(10), Timestamp::from_millis(10_250)],
    );
    let mean = got[0] as f64 * 8.0 / 10.0;
    assert!((mean - 4_000_000.0).abs() / 4e6 < 0.01, "{mean}");
    // The high phase: 250 ms at 10 Mbit/s.
    let high = (got[1] - got[0]) as f64 * 8.0 / 0.25;
    assert!((high - 10_000_000.0).abs() / 1e7 < 0.01, "{high}");
}

#[test]
fn packets_queued_when_the_rate_drops_leave_at_the_new_rate() {
    // 10 Mbit/s until 10 ms, then 2 Mbit/s. Ten 1250-byte packets at t = 9 ms: the first
    // takes 1 ms at 10 Mbit/s (leaves at 10 ms); each next one 5 ms at 2 Mbit/s.
    let s = LinkSchedule::steps(vec![
        (Duration::ZERO, rate(10_000_000)),
        (Duration::from_millis(10), rate(2_000_000)),
    ])
    .unwrap();
    let mut link = Link::with_schedule(s, 2);
    let t0 = Timestamp::from_millis(9);
    for _ in 0..10 {
        assert_eq!(link.send(t0, 1250, ()), SendOutcome::Queued);
    }
    let got: Vec<u64> = std::iter::from_fn(|| link.poll_deliver(Timestamp::MAX))
        .map(|(t, ())| t.as_nanos() / 1_000_000)
        .collect();
    let want: Vec<u64> = (0..10).map(|i| 10 + 5 * i).collect();
    assert_eq!(got, want);
    // Half a packet before a step up: 1250 bytes from 9.5 ms at 2 Mbit/s → 10 Mbit/s at 10 ms.
    let s = LinkSchedule::steps(vec![
        (Duration::ZERO, rate(2_000_000)),
        (Duration::from_millis(10), rate(10_000_000)),
    ])
    .unwrap();
    let mut link = Link::with_schedule(s, 3);
    link.send(Timestamp::from_micros(9_500), 1250, ());
    // 0.5 ms at 2 Mbit/s is 1000 bits; the other 9000 take 0.9 ms at 10 Mbit/s.
    assert_eq!(link.poll_timeout(), Some(Timestamp::from_micros(10_900)));
}

#[test]
fn a_delay_step_applies_to_packets_sent_after_it() {
    let d = |ms| LinkConfig {
        delay: Duration::from_millis(ms),
        ..LinkConfig::default()
    };
    let s = LinkSchedule::steps(vec![
        (Duration::ZERO, d(20)),
        (Duration::from_secs(1), d(50)),
    ])
    .unwrap();
    let mut link = Link::with_schedule(s, 4);
    link.send(Timestamp::from_millis(999), 100, 1);
    link.send(Timestamp::from_millis(1000), 100, 2);
    assert_eq!(
        link.poll_deliver(Timestamp::MAX),
        Some((Timestamp::from_millis(1019), 1))
    );
    assert_eq!(
        link.poll_deliver(Timestamp::MAX),
        Some((Timestamp::from_millis(1050), 2))
    );
    assert_eq!(link.config().delay, Duration::from_millis(50));
}

#[test]
fn a_mahimahi_trace_carries_its_opportunities() {
    // 3 opportunities every 2 ms: 3 · 1504 · 8 bits per 2 ms = 18.048 Mbit/s.
    let trace = DeliveryTrace::parse("1\n1\n2\n").unwrap();
    let expect = trace.mean_rate_bps();
    assert!((expect - 18_048_000.0).abs() < 1e-6);
    let cfg = LinkConfig {
        delivery: Some(Arc::new(trace)),
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg.clone(), 5);
    let got = saturate(
        &mut link,
        1000,
        Duration::from_micros(300), // 26.7 Mbit/s offered
        Timestamp::from_secs(5),
        &[Timestamp::from_secs(4)],
    );
    let mean = got[0] as f64 * 8.0 / 4.0;
    assert!((mean - expect).abs() / expect < 0.01, "{mean} vs {expect}");
    // An idle link: a packet leaves at the next opportunity, the ones passed are wasted.
    let mut idle = Link::new(cfg, 6);
    idle.send(Timestamp::from_micros(2_500), 100, ());
    assert_eq!(idle.poll_timeout(), Some(Timestamp::from_millis(3)));
}

#[test]
fn a_trace_with_a_rate_is_refused() {
    let cfg = LinkConfig {
        rate_bps: Some(1_000_000),
        delivery: Some(Arc::new(DeliveryTrace::from_millis(&[1]).unwrap())),
        ..LinkConfig::default()
    };
    assert!(cfg.validate().is_err());
}
