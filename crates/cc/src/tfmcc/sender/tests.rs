//! The sender against RFC 4654's rules, one report at a time.

use super::*;

const S: u32 = 1000;

fn fb(round: u16, x_r: f64, rtt_ms: Option<u64>, loss: bool) -> ReceiverFeedback {
    ReceiverFeedback {
        ts_us: 0,
        rtt: rtt_ms.map(Duration::from_millis),
        x_r,
        x_recv: x_r / 2.0,
        p: if loss { 0.01 } else { 0.0 },
        echo: None,
        round,
        have_loss: loss,
        leaving: false,
    }
}

fn sender() -> TfmccSender {
    TfmccSender::new(TfmccConfig::new(S, Bitrate::mbps(100)), Timestamp::ZERO)
}

#[test]
fn starts_at_one_packet_per_r_max_and_announces_at_once() {
    let mut t = sender();
    assert_eq!(t.rate_bytes_per_s(), 2000.0);
    assert_eq!(t.feedback_delay(), Duration::from_secs(3));
    let info = t.poll_info(Timestamp::ZERO).unwrap();
    assert_eq!((info.round, info.slow_start, info.clr), (0, true, None));
    assert_eq!(info.x_supp, f64::INFINITY);
    // Nothing new: the next one an R_max later.
    assert!(t.poll_info(Timestamp::from_millis(100)).is_none());
    assert!(t.poll_info(Timestamp::from_millis(500)).is_some());
}

#[test]
fn a_lower_report_makes_a_new_clr_and_the_rate_drops_at_once_but_rises_slowly() {
    let mut t = sender();
    let ms = Timestamp::from_millis;
    // Out of slow start with a loss report: the receiver becomes CLR at its rate.
    t.on_report(ms(100), 1, &fb(0, 1500.0, Some(100), true));
    assert_eq!((t.clr(), t.rate_bytes_per_s()), (Some(1), 1500.0));
    assert!(!t.in_slow_start());
    // The CLR reports a much higher rate: each report raises the rate by one packet per
    // R_max at most (§3.3 case 4), also one 100 ms (its RTT) after the last.
    let r_max = t.r_max().as_secs_f64();
    let mut want = 1500.0;
    for at in [600, 700] {
        t.on_report(ms(at), 1, &fb(0, 50_000.0, Some(100), true));
        want += 1000.0 / r_max;
        assert!(
            (t.rate_bytes_per_s() - want).abs() < 1e-6,
            "{} at {at} ms",
            t.rate_bytes_per_s()
        );
    }
    // Another receiver reports less than the rate: it takes over, the rate drops to it.
    t.on_report(ms(700), 2, &fb(0, 1200.0, Some(50), true));
    assert_eq!((t.clr(), t.rate_bytes_per_s()), (Some(2), 1200.0));
    // A higher non-CLR report changes nothing.
    t.on_report(ms(800), 3, &fb(0, 9000.0, Some(50), true));
    assert_eq!((t.clr(), t.rate_bytes_per_s()), (Some(2), 1200.0));
    assert_eq!(t.counters().clr_changes, 2);
}

#[test]
fn suppression_rate_and_round_ends() {
    let mut t = sender();
    let ms = Timestamp::from_millis;
    t.on_report(ms(100), 1, &fb(0, 5000.0, Some(100), true));
    // Non-CLR reports: X_supp = 0.9 of the lowest.
    t.on_report(ms(200), 2, &fb(0, 8000.0, Some(100), true));
    t.on_report(ms(300), 3, &fb(0, 7000.0, Some(100), true));
    t.on_report(ms(400), 4, &fb(0, 9000.0, Some(100), true));
    // Receiver 1's report counts too: it was not the CLR when it sent it (RFC 4654 §3.4).
    let info = t.poll_info(ms(400)).unwrap();
    assert!((info.x_supp - 4500.0).abs() < 1e-9, "{}", info.x_supp);
    // A report about an old round counts as stale and does not lower X_supp.
    t.on_report(ms(500), 5, &fb(7, 100_000.0, Some(100), false));
    assert_eq!(t.counters().stale_reports, 1);
    // The round ends T = 6 R_max after it began (non-CLR feedback came).
    let t_end = Timestamp::ZERO + t.feedback_delay();
    t.handle_timeout(t_end);
    assert_eq!(t.round(), 1);
    let info = t.poll_info(t_end).unwrap();
    assert_eq!((info.round, info.x_supp), (1, f64::INFINITY));
    // R_max decays towards the round's peak RTT (100 ms): 0.9 × 500 ms.
    assert_eq!(t.r_max(), Duration::from_millis(450));
}

#[test]
fn r_max_follows_the_senders_own_samples_not_the_receivers_figure() {
    let ms = Timestamp::from_millis;
    let mut t = sender();
    // The receiver says 100 ms, but its echo says 800: the data packet it last got was
    // sent at 1000 ms and held 200 ms, the report came at 2000 ms.
    let mut report = fb(0, 50_000.0, Some(100), false);
    report.echo = Some((ms(1000), Duration::from_millis(200)));
    t.on_report(ms(2000), 1, &report);
    assert_eq!(t.r_max(), Duration::from_millis(800));
    // Without an echo, the receiver's own figure counts.
    t.on_report(ms(2100), 2, &fb(0, 60_000.0, Some(900), false));
    assert_eq!(t.r_max(), Duration::from_millis(900));
}

#[test]
fn the_rate_halves_when_the_clr_falls_silent_and_it_is_dropped_after_ten_rtts() {
    let mut t = sender();
    let ms = Timestamp::from_millis;
    t.on_report(ms(100), 1, &fb(0, 40_000.0, Some(100), true));
    let x = t.rate_bytes_per_s();
    // Silent from 100 ms; but CLR for less than 10 RTTs (1 s) until 1.1 s: no halving
    // at 500 ms (4 RTTs).
    t.handle_timeout(ms(500));
    assert_eq!(t.rate_bytes_per_s(), x);
    // It reports at 1 s, then falls silent: halved after 4 of its RTTs, at 1.4 s...
    t.on_report(ms(1000), 1, &fb(0, 40_000.0, Some(100), true));
    let x = t.rate_bytes_per_s();
    let (at, _) = t.poll_timeout().unwrap();
    assert!(at <= ms(1400));
    t.handle_timeout(ms(1300));
    assert_eq!(t.rate_bytes_per_s(), x);
    t.handle_timeout(ms(1400));
    assert_eq!(t.rate_bytes_per_s(), x / 2.0);
    // ...once: still the CLR, still half, until 10 of its RTTs;
    assert!(t.poll_timeout().unwrap().0 <= ms(2000));
    t.handle_timeout(ms(1900));
    assert_eq!((t.rate_bytes_per_s(), t.clr()), (x / 2.0, Some(1)));
    // silent for 10 RTTs: taken to have left, the rate left as it was.
    t.handle_timeout(ms(2000));
    assert_eq!((t.rate_bytes_per_s(), t.clr()), (x / 2.0, None));
    assert_eq!(t.counters().clr_silence_halvings, 1);
}

#[test]
fn with_no_feedback_at_all_the_rate_halves_every_ten_r_max_to_a_floor() {
    let mut t = sender();
    for k in 1..40 {
        t.handle_timeout(Timestamp::from_secs(5 * k));
    }
    assert_eq!(t.rate_bytes_per_s(), 1000.0 / 8.0);
    assert!(t.counters().no_feedback_halvings >= 4);
}

#[test]
fn a_source_that_cannot_send_less_keeps_the_rate_at_its_least() {
    // 40 kbit/s (5000 B/s) that a constant-rate mux sends whatever the rate: the start and
    // the floor are raised to it, where RFC 4654's alone are 2000 B/s and 125 B/s.
    let cfg = TfmccConfig {
        min_rate: Bitrate::kbps(40),
        ..TfmccConfig::new(S, Bitrate::mbps(100))
    };
    let mut t = TfmccSender::new(cfg, Timestamp::ZERO);
    assert_eq!(t.rate_bytes_per_s(), 5000.0);
    for k in 1..40 {
        t.handle_timeout(Timestamp::from_secs(5 * k));
    }
    assert_eq!(t.rate_bytes_per_s(), 5000.0);
}

/// Runs `t`'s timers up to `until` as a driver does: each due timer, then the
/// announcement it may have made due.
fn run_timers(t: &mut TfmccSender, until: Timestamp) {
    for _ in 0..10_000 {
        match t.poll_timeout().filter(|(at, _)| *at <= until) {
            Some((at, _)) => {
                t.handle_timeout(at);
                let _ = t.poll_info(at);
            }
            None => return,
        }
    }
    panic!("the timers do not move on");
}

#[test]
fn slow_start_follows_the_smallest_reporter_and_ends_at_the_first_loss() {
    let mut t = sender();
    let ms = Timestamp::from_millis;
    t.on_report(ms(100), 1, &fb(0, 8_000.0, Some(100), false));
    assert_eq!(t.clr(), Some(1));
    // A lower report while the rate is on its way to 8000 becomes the CLR, and the way's
    // end: the rate gets to 6000, no further.
    t.on_report(ms(150), 2, &fb(0, 6_000.0, Some(100), false));
    assert_eq!(t.clr(), Some(2));
    run_timers(&mut t, ms(400));
    assert_eq!(t.rate_bytes_per_s(), 6_000.0);
    assert!(t.in_slow_start());
    // A higher report from another receiver does not raise the rate.
    t.on_report(ms(400), 1, &fb(0, 12_000.0, Some(100), false));
    run_timers(&mut t, ms(600));
    assert_eq!(t.rate_bytes_per_s(), 6_000.0);
    t.on_report(ms(600), 3, &fb(0, 90_000.0, Some(100), true));
    assert!(!t.in_slow_start());
    assert!(t.poll_info(ms(600)).is_some_and(|i| !i.slow_start));
}

/// RFC 4654 §3.6: the CLR reports twice what it receives once per its RTT, and each report
/// sets the target: the rate doubles every RTT, many times within one feedback round (T =
/// 3 s here), not once a round; and it gets there "gradually ... over the course of an
/// RTT", not at once.
#[test]
fn slow_start_doubles_the_rate_every_rtt_of_the_clr_gradually() {
    let mut t = sender();
    let ms = Timestamp::from_millis;
    let start = t.rate_bytes_per_s();
    let mut x = start;
    for k in 1..=8u64 {
        // The CLR received at the rate sent during its last RTT (100 ms).
        t.on_report(ms(100 * k), 1, &fb(0, 2.0 * x, Some(100), false));
        assert_eq!(t.rate_bytes_per_s(), x, "no jump at the report");
        run_timers(&mut t, ms(100 * k + 50));
        let half = t.rate_bytes_per_s();
        assert!(
            (half - 1.5 * x).abs() < 1e-6 * x,
            "{half} half way from {x}"
        );
        run_timers(&mut t, ms(100 * k + 100));
        x = t.rate_bytes_per_s();
    }
    assert_eq!(t.round(), 0);
    assert!(t.in_slow_start());
    assert_eq!(x, start * 256.0);
}

/// §3.3 case 3: the receiver that takes over from a CLR taken to have left (silent for
/// 10 of its RTTs) does not raise the rate for a feedback round; a lower rate it takes.
#[test]
fn after_the_clr_left_the_next_reporter_raises_nothing_for_a_round() {
    let mut t = sender();
    let ms = Timestamp::from_millis;
    t.on_report(ms(100), 1, &fb(0, 40_000.0, Some(100), true));
    for at in [1100, 1500, 1900, 2300] {
        t.handle_timeout(ms(at));
    }
    assert_eq!(t.clr(), None);
    let x = t.rate_bytes_per_s();
    t.on_report(ms(2400), 2, &fb(0, 10.0 * x, Some(100), true));
    assert_eq!((t.clr(), t.rate_bytes_per_s()), (Some(2), x));
    t.on_report(ms(2500), 2, &fb(0, 10.0 * x, Some(100), true));
    assert_eq!(t.rate_bytes_per_s(), x, "no increase within the round");
    let later = ms(2400) + t.feedback_delay() + Duration::from_millis(100);
    t.on_report(later, 2, &fb(0, 10.0 * x, Some(100), true));
    assert!(t.rate_bytes_per_s() > x);
    // The one that left, back, is a new CLR only if it reports less.
    t.on_report(later, 1, &fb(0, 20.0 * x, Some(100), true));
    assert_eq!(t.clr(), Some(2));
}

/// A CLR that says it is leaving is still heard: its reports stop the silence halvings,
/// it stays the CLR (announced, §4.2) until the next reporter takes its place (case 3), its
/// flagged reports lower the rate but raise it no more, and another leaving receiver's report
/// makes no CLR (case 2) but lowers `X_supp` as any non-CLR report (§3.4).
#[test]
fn a_leaving_clr_stays_until_replaced_without_halving() {
    let mut t = sender();
    let ms = Timestamp::from_millis;
    t.on_report(ms(100), 1, &fb(0, 40_000.0, Some(100), true));
    let x = t.rate_bytes_per_s();
    let mut leaving = fb(0, x + 10_000.0, Some(100), true);
    leaving.leaving = true;
    for k in 1..=20u64 {
        t.on_report(ms(100 + 100 * k), 1, &leaving);
        t.handle_timeout(ms(100 + 100 * k));
        assert_eq!(t.clr(), Some(1));
    }
    let info = t.poll_info(ms(2150)).unwrap();
    assert_eq!(info.clr, Some(1));
    assert_eq!(t.counters().clr_silence_halvings, 0);
    assert_eq!(t.rate_bytes_per_s(), x);
    // Lower: taken (case 4 still holds while it stays).
    leaving.x_r = x - 1_000.0;
    t.on_report(ms(2155), 1, &leaving);
    let x = t.rate_bytes_per_s();
    assert_eq!(x, leaving.x_r);
    // A late report of its own without the flag does not make it the CLR again.
    t.on_report(ms(2158), 1, &fb(0, x + 5_000.0, Some(100), true));
    assert_eq!(t.rate_bytes_per_s(), x);
    let mut other_leaving = fb(0, 10_000.0, Some(100), true);
    other_leaving.leaving = true;
    t.on_report(ms(2160), 3, &other_leaving);
    assert_eq!((t.clr(), t.rate_bytes_per_s()), (Some(1), x));
    assert_eq!(t.poll_info(ms(2170)).map(|i| i.x_supp), Some(9_000.0));
    // The next report takes its place, with no increase for a round although it asks more.
    t.on_report(ms(2200), 2, &fb(0, 50_000.0, Some(100), true));
    assert_eq!((t.clr(), t.rate_bytes_per_s()), (Some(2), x));
    t.on_report(ms(2300), 2, &fb(0, 50_000.0, Some(100), true));
    assert_eq!(t.rate_bytes_per_s(), x);
}

/// A leaving CLR has left when its round ends (§4.2), or at its BYE: the CLR is no longer
/// announced, and the next report takes its place.
#[test]
fn a_leaving_clr_is_gone_at_the_rounds_end_or_its_bye() {
    let ms = Timestamp::from_millis;
    let mut t = sender();
    t.on_report(ms(100), 1, &fb(0, 40_000.0, Some(100), true));
    let mut leaving = fb(0, 40_000.0, Some(100), true);
    leaving.leaving = true;
    t.on_report(ms(200), 1, &leaving);
    let round = t.round();
    let mut now = 200;
    while t.round() == round {
        now += 10;
        t.handle_timeout(ms(now));
    }
    assert_eq!(t.clr(), None);
    let mut bye = sender();
    bye.on_report(ms(100), 1, &fb(0, 40_000.0, Some(100), true));
    bye.on_receiver_left(ms(150), 1);
    assert_eq!(bye.clr(), None);
    bye.on_report(ms(200), 2, &fb(0, 50_000.0, Some(100), true));
    assert_eq!(bye.clr(), Some(2));
}

#[test]
fn echoes_go_to_receivers_without_an_rtt_first_and_the_queue_is_bounded() {
    let mut t = sender();
    let ms = Timestamp::from_millis;
    let _ = t.poll_info(ms(0));
    let mut with = fb(0, 9_000.0, Some(100), true);
    with.ts_us = 11;
    let mut without = fb(0, 9_500.0, None, true);
    without.ts_us = 22;
    t.on_report(ms(100), 7, &with);
    t.on_report(ms(100), 8, &without);
    // Receiver 7 became CLR (first report); 8 has no RTT: 7 is a new CLR, priority 0;
    // the CLR is also echoed once per round first.
    let first = t.poll_info(ms(110)).unwrap().echo.unwrap();
    assert_eq!((first.receiver, first.ts_us), (7, 11));
    assert_eq!(first.delay, Duration::from_millis(10));
    let second = t.poll_info(ms(120)).unwrap().echo.unwrap();
    assert_eq!(second.receiver, 8);
    for id in 100..400 {
        t.on_report(ms(200), id, &fb(0, 99_000.0, Some(100), true));
    }
    assert!(t.echoes.len() <= crate::tfmcc::echo::MAX_ECHOES);
}

#[test]
fn within_a_class_the_older_rounds_report_is_echoed_first_then_the_lower_rate() {
    let mut t = sender();
    let ms = Timestamp::from_millis;
    // Receiver 1 becomes the CLR and is echoed (once per round).
    t.on_report(ms(100), 1, &fb(0, 5_000.0, Some(100), true));
    assert_eq!(t.poll_info(ms(100)).unwrap().echo.unwrap().receiver, 1);
    t.handle_timeout(Timestamp::ZERO + 2 * t.feedback_delay());
    assert_eq!(t.round(), 1);
    let _ = t.poll_info(ms(6000));
    t.on_report(ms(6050), 1, &fb(1, 5_000.0, Some(100), true));
    // Three reports without an RTT, above the CLR's rate: one of this round at the
    // lowest rate, two of the round before.
    let at = ms(6100);
    t.on_report(at, 2, &fb(1, 6_000.0, None, true));
    t.on_report(at, 3, &fb(0, 9_000.0, None, true));
    t.on_report(at, 4, &fb(0, 8_000.0, None, true));
    let order: Vec<u32> = (0..4)
        .filter_map(|k| t.poll_info(ms(6110 + 10 * k)).and_then(|i| i.echo))
        .map(|e| e.receiver)
        .collect();
    // The CLR first (once a round), then round 0's by rate, then round 1's.
    assert_eq!(order, vec![1, 4, 3, 2]);
}

/// §3.3: a receiver with loss and no RTT computed its rate with `R_max`; the sender scales
/// it by `R_max / R_r` for the choice of CLR, down as well as up: one whose RTT (1 s, by the
/// sender's own sample) is twice `R_max` asks for half what it says.
#[test]
fn a_report_made_with_r_max_is_scaled_down_for_a_longer_rtt() {
    let mut t = sender();
    let ms = Timestamp::from_millis;
    t.on_report(ms(100), 1, &fb(0, 7_000.0, Some(100), true));
    assert_eq!(t.clr(), Some(1));
    let mut far = fb(0, 10_000.0, None, true);
    far.echo = Some((ms(200), Duration::ZERO));
    t.on_report(ms(1200), 2, &far);
    assert_eq!(t.clr(), Some(2));
    assert!(t.rate_bytes_per_s() <= 5_000.0 + 1e-9);
}
