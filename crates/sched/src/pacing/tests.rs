use super::*;
use proptest::prelude::*;

fn ms(v: u64) -> Timestamp {
    Timestamp::from_millis(v)
}

/// 1250-byte packets at 5 Mbit/s: one every 2 ms.
const PKT: u64 = 1250;
const RATE: Bitrate = Bitrate::mbps(5);

/// Drives `model` like a driver that wakes exactly when told, over packets due every 2 ms, the
/// driver being unable to run during `[stall_from, stall_to)`. Returns (due, sent) of every
/// packet sent and the due times of those dropped.
fn drive(
    model: &mut PacingModel,
    packets: u64,
    stall: (Timestamp, Timestamp),
) -> (Vec<(Timestamp, Timestamp)>, Vec<Timestamp>) {
    let mut now = Timestamp::ZERO;
    let (mut sent, mut dropped) = (Vec::new(), Vec::new());
    for k in 0..packets {
        let due = ms(2 * k);
        loop {
            if now >= stall.0 && now < stall.1 {
                now = stall.1;
            }
            match model.decide(now, due, PKT) {
                Decision::Wait(t) => {
                    assert!(t > now, "a wait must move time forward");
                    now = t;
                }
                Decision::Send { late } => {
                    assert_eq!(late, now.saturating_since(due));
                    sent.push((due, now));
                    break;
                }
                Decision::Drop { .. } => {
                    dropped.push(due);
                    break;
                }
            }
        }
    }
    (sent, dropped)
}

#[test]
fn on_time_packets_wait_for_their_due_time_and_are_never_shifted() {
    let mut p = PacingModel::new(PacingConfig::default(), RATE);
    assert_eq!(p.decide(ms(9), ms(10), PKT), Decision::Wait(ms(10)));
    let d = p.decide(ms(10) + Duration::from_micros(5), ms(10), PKT);
    assert_eq!(
        d,
        Decision::Send {
            late: Duration::from_micros(5)
        }
    );
    // A 30 ms stall, then the schedule is what it was: the next packet is still due at 44 ms.
    p.decide(ms(42), ms(12), PKT);
    assert_eq!(p.decide(ms(43), ms(44), PKT), Decision::Wait(ms(44)));
    let s = p.stats();
    assert_eq!((s.packets, s.stalls, s.late_packets), (2, 1, 1));
}

#[test]
fn catch_up_drains_a_stall_at_the_bounded_rate_and_returns_to_the_schedule() {
    // A 300 ms stall at 5 Mbit/s with catch-up at 2×: the backlog drains in another 300 ms.
    let mut p = PacingModel::new(PacingConfig::default(), RATE);
    let (sent, dropped) = drive(&mut p, 1000, (ms(100), ms(400)));
    assert!(dropped.is_empty());
    assert_eq!(sent.len(), 1000);
    // The catch-up spacing is 1 ms (2 ms at 2×), never less.
    let late: Vec<_> = sent
        .iter()
        .filter(|(d, s)| *s > *d + Duration::from_millis(2))
        .collect();
    for w in late.windows(2) {
        assert!(w[1].1.saturating_since(w[0].1) >= Duration::from_millis(1));
    }
    // Back on schedule after about 300 ms of catching up; every packet after that is on time.
    let back = sent
        .iter()
        .position(|(d, s)| *s > ms(400) && s == d)
        .unwrap();
    let (due, at) = sent[back];
    assert!(at <= ms(705) && at >= ms(695), "back on time at {at}");
    assert!(sent[back..].iter().all(|(d, s)| d == s));
    assert_eq!(p.stats().stalls, 1);
    assert_eq!(due, at);
}

#[test]
fn catch_up_is_capped_by_the_link() {
    // 4× the stream's rate would be 20 Mbit/s; the link only has 7.5.
    let cfg = PacingConfig {
        late: LatePolicy::CatchUp { factor: 4.0 },
        link_capacity: Some(Bitrate::bps(7_500_000)),
        ..PacingConfig::default()
    };
    let p = PacingModel::new(cfg, RATE);
    assert_eq!(p.catch_up_rate(), Some(Bitrate::bps(7_500_000)));
}

#[test]
fn a_burst_allowance_lets_a_late_job_leave_as_the_burst_it_is_and_no_more() {
    // Jobs of three packets every 6 ms (5 Mbit/s): with a bucket one job deep, the first late
    // job leaves at once; after that, late packets keep to 2× the rate.
    let cfg = PacingConfig {
        catch_up_burst_bytes: 3 * PKT,
        ..PacingConfig::default()
    };
    let mut p = PacingModel::new(cfg, RATE);
    let late_at = ms(100);
    for k in 0..3 {
        assert!(
            matches!(p.decide(late_at, ms(50), PKT), Decision::Send { .. }),
            "{k}"
        );
    }
    // The fourth waits for one packet's worth of tokens at 10 Mbit/s: 1 ms.
    assert_eq!(p.decide(late_at, ms(56), PKT), Decision::Wait(ms(101)));
    assert!(matches!(
        p.decide(ms(101), ms(56), PKT),
        Decision::Send { .. }
    ));
}

#[test]
fn drop_late_drops_what_is_past_its_deadline_and_sends_the_rest_on_time() {
    let cfg = PacingConfig {
        late: LatePolicy::DropLate {
            after: Duration::from_millis(10),
        },
        ..PacingConfig::default()
    };
    let mut p = PacingModel::new(cfg, RATE);
    let (sent, dropped) = drive(&mut p, 500, (ms(100), ms(400)));
    // Packets due in [100, 390) are more than 10 ms late at 400 ms; [390, 400] are not.
    assert_eq!(
        dropped.len(),
        145,
        "{:?}",
        (dropped.first(), dropped.last())
    );
    assert!(dropped.iter().all(|d| *d >= ms(100) && *d < ms(390)));
    assert_eq!(sent.len() + dropped.len(), 500);
    let s = p.stats();
    assert_eq!((s.dropped, s.stalls), (145, 1));
    // After the stall everything is on time again.
    assert!(sent
        .iter()
        .filter(|(d, _)| *d > ms(400))
        .all(|(d, s)| d == s));
}

proptest! {
    /// Whatever the stalls, the late packets of a catch-up never leave faster than the bound,
    /// no packet leaves before it is due, and every packet leaves.
    #[test]
    fn catch_up_never_exceeds_its_rate(
        stalls in proptest::collection::vec((0u64..2000, 0u64..300), 0..6),
        factor in 1.2f64..5.0,
    ) {
        let cfg = PacingConfig { late: LatePolicy::CatchUp { factor }, ..PacingConfig::default() };
        let mut p = PacingModel::new(cfg, RATE);
        let gap = RATE.scaled(factor).transmit_time(PKT).unwrap();
        let mut stalls = stalls;
        stalls.sort();
        let mut now = Timestamp::ZERO;
        let mut last_late: Option<Timestamp> = None;
        let mut i = 0;
        for k in 0..1000u64 {
            let due = ms(2 * k);
            loop {
                while i < stalls.len() && ms(stalls[i].0) <= now {
                    now = now.max(ms(stalls[i].0 + stalls[i].1));
                    i += 1;
                }
                match p.decide(now, due, PKT) {
                    Decision::Wait(t) => now = t,
                    Decision::Send { late } => {
                        prop_assert!(now >= due);
                        if late > p.config().stall_threshold {
                            if let Some(prev) = last_late {
                                prop_assert!(now.saturating_since(prev) >= gap);
                            }
                            last_late = Some(now);
                        }
                        break;
                    }
                    Decision::Drop { .. } => prop_assert!(false, "catch-up never drops"),
                }
            }
        }
        prop_assert_eq!(p.stats().packets, 1000);
    }
}
