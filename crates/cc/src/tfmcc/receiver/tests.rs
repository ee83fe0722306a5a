//! The receiver against RFC 4654's rules: its RTT, timer, rates, loss history and leave.

use super::*;
use crate::tfmcc::Echo;

fn info(round: u16, x_supp: f64, clr: Option<u32>, echo: Option<Echo>) -> SenderInfo {
    SenderInfo {
        round,
        slow_start: false,
        x_supp,
        r_max: Duration::from_millis(200),
        feedback_delay: Duration::from_millis(1200),
        clr,
        echo,
        x_send: 100_000.0,
    }
}

fn ms(v: u64) -> Timestamp {
    Timestamp::from_millis(v)
}

/// Receiver 5's report stamped at 1000 ms (µs of its clock), held 5 ms by the sender,
/// echoed in a packet sent at 1020 ms (sender clock; the sender's clock is 500 ms behind
/// the receiver's), arriving at 1080 ms: RTT 75 ms.
fn measure_75_ms(r: &mut TfmccReceiver) {
    let echo = Echo {
        receiver: 5,
        ts_us: 1_000_000,
        delay: Duration::from_millis(5),
    };
    r.on_sender_info(ms(1080), &info(0, f64::INFINITY, None, Some(echo)), ms(520));
    assert_eq!(r.rtt(), Duration::from_millis(75));
}

#[test]
fn rtt_from_the_echo_then_kept_current_by_the_one_way_delay() {
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    // Before anything: 500 ms; then the sender's R_max.
    assert_eq!(r.rtt(), Duration::from_millis(500));
    r.on_sender_info(ms(20), &info(0, f64::INFINITY, None, None), ms(0));
    assert_eq!(r.rtt(), Duration::from_millis(200));
    measure_75_ms(&mut r);
    assert!(r.has_rtt());
    // The path gets 10 ms longer one way: a data packet sent at 600 (sender clock) that
    // arrives at 1170 took 10 ms more than the echo's packet: R' = 85 ms, no echo needed.
    r.on_packet(ms(1170), 1, ms(600), 1000);
    assert_eq!(r.rtt(), Duration::from_millis(85));
}

#[test]
fn the_timer_is_rfc_4654s_by_default() {
    // §4.5: t = max(T (1 + ln x / ln N), 0), x uniform in (0, 1]: P(t ≤ τT) = N^(τ − 1).
    // 4000 draws: the empirical distribution is within 0.035 of it everywhere with
    // probability above 99.9 % (Dvoretzky–Kiefer–Wolfowitz).
    let t = Duration::from_millis(1200).as_secs_f64();
    let draws: Vec<f64> = (0..4000)
        .map(|seed| {
            let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, seed));
            r.on_sender_info(ms(0), &info(3, f64::INFINITY, None, None), ms(0));
            r.poll_timeout().unwrap().as_secs_f64() / t
        })
        .collect();
    for tau in [0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0] {
        let empirical = draws.iter().filter(|d| **d <= tau + 1e-9).count() as f64 / 4000.0;
        let rfc = 10_000f64.powf(tau - 1.0);
        assert!(
            (empirical - rfc).abs() < 0.035,
            "P(t ≤ {tau} T) = {empirical:.3}, RFC 4654: {rfc:.3}"
        );
    }
}

#[test]
fn a_round_starts_a_timer_within_t_and_a_lower_suppression_rate_cancels_it() {
    let mut fired = Vec::new();
    for seed in 0..200 {
        let mut cfg = TfmccReceiverConfig::new(5, seed);
        cfg.bias = 0.0;
        let mut r = TfmccReceiver::new(cfg);
        r.on_sender_info(ms(0), &info(3, f64::INFINITY, None, None), ms(0));
        let t = r.poll_timeout().unwrap();
        assert!(t <= ms(1200));
        fired.push(t.as_secs_f64());
        // X_supp below our rate (and R_max covering our RTT): suppressed.
        for k in 0..50 {
            r.on_packet(ms(10 * k), k, ms(10 * k), 1000);
        }
        r.on_sender_info(ms(600), &info(3, 1.0, None, None), ms(600));
        assert_eq!(r.poll_timeout(), None);
        assert_eq!(r.poll_report(ms(5000)), None);
    }
    // RFC 4654's timer: P(t = 0) = 1/N; most timers late in the interval (t ≥ T/2 with
    // probability 1 − N^(−1/2) = 0.99).
    let late = fired.iter().filter(|t| **t >= 0.6).count();
    assert!(late >= 190, "{late} of 200");
}

/// A non-CLR receiver without bias, in round 3 from 0 ms with `x_supp`, whose timer
/// comes due after `after` ms.
fn waiting(x_supp: f64, after: u64) -> TfmccReceiver {
    (0..1000)
        .map(|seed| {
            let mut cfg = TfmccReceiverConfig::new(5, seed);
            cfg.bias = 0.0;
            let mut r = TfmccReceiver::new(cfg);
            r.on_sender_info(ms(0), &info(3, x_supp, None, None), ms(0));
            r
        })
        .find(|r| r.poll_timeout().is_some_and(|t| t > ms(after)))
        .expect("a seed with a late timer")
}

#[test]
fn a_data_packet_alone_can_suppress_the_rounds_feedback() {
    // X_supp 150 kB/s is above the rate at the round's start (nothing received yet);
    // packets of 1000 bytes every 10 ms take X_r = 2 X_recv to 200 kB/s, over X_supp,
    // with no new announcement: the timer goes at a data packet (§4.5).
    let mut r = waiting(150_000.0, 400);
    for k in 0..30 {
        r.on_packet(ms(10 * k), k, ms(10 * k), 1000);
    }
    assert!(r.rate(ms(290)) > 150_000.0);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn a_receiver_whose_rtt_is_above_r_max_is_not_suppressed() {
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    measure_75_ms(&mut r);
    // A new round whose R_max (50 ms) is below our RTT (75), X_supp below everything:
    // we answer all the same (§3.4: "or those with a higher RTT than R_max").
    let short = SenderInfo {
        r_max: Duration::from_millis(50),
        ..info(1, 0.01, None, None)
    };
    r.on_sender_info(ms(1100), &short, ms(540));
    assert!(r.poll_timeout().is_some());
    // With R_max covering it, the same X_supp suppresses.
    r.on_sender_info(ms(1110), &info(1, 0.01, None, None), ms(550));
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn a_change_of_r_max_rescales_the_timer_and_silence_puts_it_off() {
    let mut r = waiting(f64::INFINITY, 300);
    let due = r.poll_timeout().unwrap();
    // R_max 200 → 400 ms in the same round: t doubles, counted from the round's start.
    let longer = SenderInfo {
        r_max: Duration::from_millis(400),
        ..info(3, f64::INFINITY, None, None)
    };
    r.on_sender_info(ms(10), &longer, ms(10));
    let t = due.saturating_since(ms(0));
    assert_eq!(r.poll_timeout(), Some(ms(0) + t * 2));
    // The last data packet came at 20 ms: when the timer comes due, it waits
    // now − 20 ms − R_max more (§4.5), and fires once packets come again.
    r.on_packet(ms(20), 1, ms(20), 1000);
    let due = r.poll_timeout().unwrap();
    assert!(due > ms(420));
    assert_eq!(r.poll_report(due), None);
    let gap = due.saturating_since(ms(20)) - Duration::from_millis(400);
    assert_eq!(r.poll_timeout(), Some(due + gap));
    let later = due + gap;
    r.on_packet(later, 2, later, 1000);
    assert!(r.poll_report(later).is_some());
}

#[test]
fn ten_rtts_without_data_clear_have_loss_until_the_next_loss_event() {
    // No RTT measured: R_max (200 ms) is the RTT; a loss at packet 50.
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    r.on_sender_info(ms(0), &info(0, f64::INFINITY, None, None), ms(0));
    feed(&mut r, (0, 0), 100, &[50]);
    assert!(r.have_loss());
    let equation = r.rate(ms(1000));
    // 2 s without a packet, then packets again: X_r is 2 X_recv, have_loss clear.
    feed(&mut r, (3000, 0), 20, &[]);
    let now = ms(3190);
    assert!(!r.have_loss());
    assert_eq!(r.rate(now), 2.0 * r.x_recv(now));
    assert_ne!(r.rate(now), equation);
    // 1.9 s of silence is not 10 RTTs.
    let mut r2 = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    r2.on_sender_info(ms(0), &info(0, f64::INFINITY, None, None), ms(0));
    feed(&mut r2, (0, 0), 100, &[50]);
    r2.on_packet(ms(2890), 100, ms(2890), 1000);
    assert!(r2.have_loss());
    // A new loss event sets it again.
    for k in 20..40u64 {
        if k != 30 {
            r.on_packet(ms(3000 + 10 * k), 1000 + k, ms(3000 + 10 * k), 1000);
        }
    }
    assert!(r.have_loss());
}

#[test]
fn the_clr_reports_once_per_rtt_and_a_lower_rate_answers_earlier_with_the_bias() {
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    r.on_sender_info(ms(0), &info(0, f64::INFINITY, Some(5), None), ms(0));
    let mut at = Vec::new();
    for k in 0..100 {
        let now = ms(10 * k);
        r.on_packet(now, k, now, 1000);
        if r.poll_report(now).is_some() {
            at.push(k * 10);
        }
    }
    // Every R_max (no RTT measured: 200 ms).
    assert_eq!(at, vec![0, 200, 400, 600, 800]);
    // With a bias (not RFC 4654's, opted into), a receiver at a tenth of the sending rate
    // answers before one at it.
    let timer = |x_recv_pkts: u64| {
        let mut cfg = TfmccReceiverConfig::new(6, 9);
        cfg.bias = 0.25;
        let mut r = TfmccReceiver::new(cfg);
        for k in 0..x_recv_pkts {
            r.on_packet(ms(k * 1000 / x_recv_pkts), k, ms(0), 1000);
        }
        r.on_sender_info(ms(1000), &info(1, f64::INFINITY, None, None), ms(1000));
        r.poll_timeout().unwrap()
    };
    assert!(timer(5) < timer(50), "{:?} {:?}", timer(5), timer(50));
}

/// Packets of 1000 bytes every 10 ms from `start` ms (sequence k at `start` + 10 k ms),
/// each sent `lag` ms before it arrives by the sender's clock, `lost` missing.
fn feed(r: &mut TfmccReceiver, (start, lag): (u64, u64), until: u64, lost: &[u64]) {
    for k in 0..until {
        if !lost.contains(&k) {
            let at = start + 10 * k;
            r.on_packet(ms(at), k, ms(at - lag), 1000);
        }
    }
}

#[test]
fn the_first_loss_interval_inverts_the_simplified_equation_at_the_last_rtts_rate() {
    // RTT 75 ms from an echo (as above), then 100 kB/s: 100 packets a second.
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    measure_75_ms(&mut r);
    // The echo's packet took 560 ms by the mixed clocks: so do these, keeping R' = 75 ms.
    feed(&mut r, (1100, 560), 300, &[200]);
    assert_eq!(r.rtt(), Duration::from_millis(75));
    // Packet 200 is known lost when 203 arrives; X_recv over the last 75 ms then: packets
    // 196 to 203 but 200, 7 kB in 75 ms; l_0 = (X R / (sqrt(3/2) s))²
    // = (93 333 × 0.075 / (1.2247 × 1000))² = 32.7.
    assert_eq!(r.history().counts().0, 1);
    let l0 = r.history().first_interval().unwrap() as f64;
    let want = (7000.0 / 0.075 * 0.075 / (1.5f64.sqrt() * 1000.0)).powi(2);
    assert!((l0 - want).abs() <= 0.5, "l_0 {l0} against {want}");
}

#[test]
fn a_first_interval_made_with_r_max_is_scaled_at_the_first_rtt() {
    // No RTT yet: R_max (200 ms) stands in.
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    r.on_sender_info(ms(0), &info(0, f64::INFINITY, None, None), ms(0));
    feed(&mut r, (0, 0), 300, &[250]);
    // Packet 250 is known lost when 253 arrives (2530 ms); over the 200 ms before it,
    // (2330, 2530], packets 234 to 253 but 250 arrived: 19 kB, 95 kB/s.
    let made = r.history().first_interval().unwrap() as f64;
    let want = (95_000.0 * 0.2 / (1.5f64.sqrt() * 1000.0)).powi(2);
    assert!(
        (made - want).abs() <= 0.05 * want,
        "l_0 {made} against {want}"
    );
    // The first echo measures 50 ms: l_0 × (50 / 200)².
    let echo = Echo {
        receiver: 5,
        ts_us: 2_950_000,
        delay: Duration::ZERO,
    };
    r.on_sender_info(
        ms(3000),
        &info(0, f64::INFINITY, None, Some(echo)),
        ms(3000),
    );
    assert_eq!(r.rtt(), Duration::from_millis(50));
    let scaled = r.history().first_interval().unwrap() as f64;
    assert!(
        (scaled - made / 16.0).abs() <= 1.0,
        "{scaled} against {made} / 16"
    );
    // Only once: a later echo changes nothing.
    let echo = Echo {
        ts_us: 3_940_000,
        ..echo
    };
    r.on_sender_info(
        ms(4000),
        &info(0, f64::INFINITY, None, Some(echo)),
        ms(4000),
    );
    assert_eq!(r.history().first_interval().unwrap() as f64, scaled);
}

#[test]
fn a_receiver_below_one_packet_per_8_s_for_120_s_leaves_and_falls_silent() {
    // R_max 2 s, no RTT; a packet every 4 s, every other one lost: each loss its own
    // event, intervals of 2 packets, p near 1/2, and the equation well under s/8.
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    let slow = SenderInfo {
        r_max: Duration::from_secs(2),
        ..info(0, f64::INFINITY, None, None)
    };
    r.on_sender_info(ms(0), &slow, ms(0));
    let mut below_from = None;
    let mut left_at = None;
    for k in 0..200u64 {
        let now = ms(4000 * k);
        if (k % 2 == 0 || k < 10) && left_at.is_none() {
            r.on_packet(now, k, now, 1000);
            // As the receiver judges it: on each packet.
            if r.calculated_rate(now) >= r.floor() {
                below_from = None;
            } else if below_from.is_none() {
                below_from = Some(now);
            }
        }
        while let Some(t) = r.poll_timeout().filter(|t| *t <= now) {
            let Some(fb) = r.poll_report(t) else { break };
            if fb.leaving {
                assert_eq!(fb.x_r, r.floor(), "it reports the floor, not less");
                left_at = Some(now);
            }
        }
    }
    let (from, left) = (
        below_from.expect("the rate fell"),
        left_at.expect("it left"),
    );
    let after = left.saturating_since(from);
    assert!(
        after > LEAVE_AFTER && after <= LEAVE_AFTER + Duration::from_secs(8),
        "left {after:?} after the rate fell below the floor"
    );
    assert!(r.has_left());
    assert_eq!(
        (r.poll_timeout(), r.poll_report(ms(10_000_000))),
        (None, None)
    );
}

/// §4.2: the CLR that wishes to leave flags every report of the round, once per RTT,
/// and has left when the next round begins; nothing after.
#[test]
fn a_leaving_clr_flags_every_report_of_its_round_then_leaves() {
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    measure_75_ms(&mut r);
    r.on_packet(ms(1090), 0, ms(530), 1000);
    r.on_sender_info(ms(1100), &info(0, f64::INFINITY, Some(5), None), ms(540));
    assert!(r.poll_report(ms(1100)).is_some_and(|f| !f.leaving));
    r.leave(ms(1120));
    assert!(r.leave_pending() && !r.has_left());
    let mut flagged = 0;
    for k in 0..10u64 {
        // The sender's clock and the path as in `measure_75_ms`: 560 ms between them.
        let (now, sent) = (ms(1120 + 40 * k), ms(560 + 40 * k));
        r.on_packet(now, k + 1, sent, 1000);
        r.on_sender_info(now, &info(0, f64::INFINITY, Some(5), None), sent);
        while let Some(f) = r.poll_timeout().filter(|t| *t <= now) {
            let fb = r.poll_report(f).expect("the CLR's report");
            assert!(fb.leaving);
            flagged += 1;
        }
    }
    // 360 ms at one report per 75 ms RTT, the first at once.
    assert!((5..=6).contains(&flagged), "{flagged} flagged reports");
    assert!(r.leave_pending());
    r.on_sender_info(ms(1500), &info(1, f64::INFINITY, Some(5), None), ms(940));
    assert!(r.has_left() && !r.leave_pending());
    assert_eq!((r.poll_timeout(), r.poll_report(ms(9000))), (None, None));
}

/// A leaving CLR replaced before its round ends has left then; one that hears of no new
/// round has left after 2T, the longest a round lasts; one that is not the CLR leaves with
/// its one flagged report.
#[test]
fn a_leaving_clr_leaves_when_replaced_or_after_two_rounds_and_others_at_once() {
    let clr = || {
        let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        r.on_sender_info(ms(0), &info(0, f64::INFINITY, Some(5), None), ms(0));
        r.leave(ms(10));
        assert!(r.poll_report(ms(10)).is_some_and(|f| f.leaving));
        r
    };
    let mut replaced = clr();
    replaced.on_sender_info(ms(50), &info(0, f64::INFINITY, Some(6), None), ms(50));
    assert!(replaced.has_left());
    let mut unheard = clr();
    // Flagged reports once per R_max (no RTT measured), until 2T = 12 R_max = 2.4 s
    // after the wish.
    let mut last = None;
    while let Some(t) = unheard.poll_timeout() {
        match unheard.poll_report(t) {
            Some(fb) => assert!(fb.leaving),
            None => last = Some(t),
        }
    }
    assert_eq!(last, Some(ms(2410)));
    assert!(unheard.has_left());
    let mut other = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    other.on_sender_info(ms(0), &info(0, f64::INFINITY, Some(6), None), ms(0));
    other.leave(ms(10));
    assert!(!other.leave_pending());
    assert!(other.poll_report(ms(10)).is_some_and(|f| f.leaving));
    assert!(other.has_left());
}

/// A leaving CLR whose round ends before its first flagged report went still sends one
/// (the sender would otherwise take its silence for a crash and halve); so does one told
/// of a round of no length (a malformed announcement).
#[test]
fn a_leaving_clr_sends_one_flagged_report_however_soon_its_round_ends() {
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    r.on_sender_info(ms(0), &info(0, f64::INFINITY, Some(5), None), ms(0));
    let _ = r.poll_report(ms(0));
    r.leave(ms(100));
    r.on_sender_info(ms(101), &info(1, f64::INFINITY, Some(5), None), ms(101));
    assert!(!r.has_left() && r.leave_pending());
    assert!(r.poll_report(ms(101)).is_some_and(|f| f.leaving));
    assert!(r.has_left() && !r.leave_pending());
    let mut z = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    let zero = SenderInfo {
        r_max: Duration::ZERO,
        feedback_delay: Duration::ZERO,
        ..info(0, f64::INFINITY, Some(5), None)
    };
    z.on_sender_info(ms(0), &zero, ms(0));
    let _ = z.poll_report(ms(0));
    z.leave(ms(50));
    let mut flagged = 0;
    while let Some(t) = z.poll_timeout() {
        flagged += usize::from(z.poll_report(t).is_some_and(|f| f.leaving));
    }
    assert!(flagged >= 1 && z.has_left(), "{flagged}");
}

#[test]
fn a_receiver_below_the_floor_stays_while_the_sender_is_no_faster() {
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    let slow = SenderInfo {
        r_max: Duration::from_secs(2),
        x_send: 1.0,
        ..info(0, f64::INFINITY, None, None)
    };
    r.on_sender_info(ms(0), &slow, ms(0));
    for k in 0..200u64 {
        let now = ms(4000 * k);
        if k % 2 == 0 || k < 10 {
            r.on_packet(now, k, now, 1000);
        }
    }
    assert!(!r.leaving && !r.has_left());
}

/// §4.3.4: `X_recv` is the bytes that arrived over the last two RTTs, over two RTTs: evenly
/// spaced packets give their rate, at an arrival and between arrivals alike, and sparse ones
/// the rate they came at. (A window closed at both ends, trimmed only at arrivals, read one
/// packet in three too many at 2 packets a second and R = 500 ms, and up to 20 times the
/// rate between sparse packets.)
#[test]
fn x_recv_is_what_arrived_over_two_rtts_whenever_it_is_asked() {
    // No RTT: R_max stands in. 1000-byte packets every 100 ms: 10 kB/s.
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    r.on_sender_info(ms(0), &info(0, f64::INFINITY, None, None), ms(0));
    assert_eq!(r.rtt(), Duration::from_millis(200));
    // A lone packet is spread over the span (400 ms): one packet per 400 ms.
    r.on_packet(ms(1000), 0, ms(1000), 1000);
    assert_eq!(r.x_recv(ms(1000)), 2_500.0);
    // Listened less than the span: what came after the first packet, over the time to the
    // last.
    r.on_packet(ms(1100), 1, ms(1100), 1000);
    r.on_packet(ms(1200), 2, ms(1200), 1000);
    assert_eq!(r.x_recv(ms(1200)), 10_000.0);
    for k in 3..20 {
        r.on_packet(ms(1000 + 100 * k), k, ms(1000 + 100 * k), 1000);
        let x = r.x_recv(ms(1000 + 100 * k));
        assert!((x - 10_000.0).abs() < 1e-6, "packet {k}: {x}");
        // Between arrivals: the same, the window (last − 400 ms, last] (four packets once
        // it has listened for the span).
        let x = r.x_recv(ms(1050 + 100 * k));
        assert!(
            k < 4 || (x - 10_000.0).abs() < 1e-6,
            "after packet {k}: {x}"
        );
    }
    // The last arrived at 2900 ms: the rate it came at holds until more arrive (or silence
    // ends the CLR's reports).
    assert_eq!(r.x_recv(ms(3150)), 10_000.0);
    assert_eq!(r.x_recv(ms(3350)), 10_000.0);
    // Data back after the silence: a new spell, measured from its own first packet.
    r.on_packet(ms(5000), 20, ms(5000), 1000);
    r.on_packet(ms(5050), 21, ms(5050), 1000);
    r.on_packet(ms(5100), 22, ms(5100), 1000);
    assert_eq!(r.x_recv(ms(5200)), 2000.0 / 0.2);
    // Slow start's first step: at the sender's 2 packets a second and R = R_max = 500 ms,
    // a receiver reports 4 (twice what it gets), not 6.
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    let slow = SenderInfo {
        r_max: Duration::from_millis(500),
        ..info(0, f64::INFINITY, None, None)
    };
    r.on_sender_info(ms(0), &slow, ms(0));
    for k in 0..10 {
        r.on_packet(ms(500 * k), k, ms(500 * k), 1000);
    }
    assert_eq!(r.rate(ms(4500)), 4_000.0);
    // With an RTT of 100 ms the span (200 ms) is shorter than the gap: it reaches back to
    // the packet before the last, and holds between packets: reports between them (the
    // CLR's, once per RTT) tell the rate the packets come at.
    let echo = Echo {
        receiver: 5,
        ts_us: 4_400_000,
        delay: Duration::ZERO,
    };
    r.on_sender_info(
        ms(4500),
        &info(0, f64::INFINITY, None, Some(echo)),
        ms(4500),
    );
    assert_eq!(r.rtt(), Duration::from_millis(100));
    assert_eq!(r.x_recv(ms(4500)), 2_000.0);
    assert_eq!(r.x_recv(ms(4750)), 2_000.0);
    // Two packets at one instant are one arrival: the window reaches back to the one before.
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    r.on_sender_info(ms(0), &slow, ms(0));
    let echo = Echo {
        ts_us: 3_900_000,
        ..echo
    };
    r.on_sender_info(
        ms(4000),
        &info(0, f64::INFINITY, None, Some(echo)),
        ms(4000),
    );
    for k in 0..6 {
        r.on_packet(ms(4000 + 300 * k), 2 * k, ms(4000 + 300 * k), 1000);
        r.on_packet(ms(4000 + 300 * k), 2 * k + 1, ms(4000 + 300 * k), 1000);
    }
    assert_eq!(r.rtt(), Duration::from_millis(100));
    // Last pair at 5500 ms, the one before at 5200: the pair over 300 ms, then as later.
    assert_eq!(r.x_recv(ms(5500)), 2000.0 / 0.3);
    assert_eq!(r.x_recv(ms(5750)), 2000.0 / 0.3);
    // A burst just after joining reads at most twice what the window would give: 50
    // packets within 20 ms, over half the window (200 ms) at the least, not over 20 ms.
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    r.on_sender_info(ms(0), &info(0, f64::INFINITY, None, None), ms(0));
    for k in 0..50 {
        r.on_packet(ms(1000) + Duration::from_micros(400 * k), k, ms(1000), 1000);
    }
    assert_eq!(r.x_recv(ms(1020)), 49_000.0 / 0.2);
    // A lone packet whose span has passed: spread over the time since it came.
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    r.on_sender_info(ms(0), &info(0, f64::INFINITY, None, None), ms(0));
    r.on_packet(ms(0), 0, ms(0), 1000);
    assert_eq!(r.x_recv(ms(800)), 1000.0 / 0.8);
}

/// §3.3: "when receivers stop receiving data packets, they will stop sending feedback", the
/// CLR too, so that the sender's rules for a silent CLR lower the rate when the path to it
/// fails; its reports come back with the data.
#[test]
fn the_clr_stops_reporting_when_data_stops_and_goes_on_when_it_comes_back() {
    let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
    measure_75_ms(&mut r);
    let clr = info(0, f64::INFINITY, Some(5), None);
    // Reports in [from, to), polled every 5 ms; a data packet (and an announcement) at each
    // ms `t` that `sends`.
    let reports = |r: &mut TfmccReceiver, from: u64, to: u64, sends: &dyn Fn(u64) -> bool| {
        let mut n = 0;
        for t in (from..to).step_by(5) {
            if sends(t) {
                r.on_packet(ms(t), t / 20, ms(t - 560), 1000);
                r.on_sender_info(ms(t), &clr, ms(t - 560));
            }
            while r.poll_timeout().is_some_and(|d| d <= ms(t)) {
                n += usize::from(r.poll_report(ms(t)).is_some());
            }
        }
        n
    };
    // 600 ms of data: a report per 75 ms RTT.
    let every_20_ms = |t: u64| t % 20 == 0;
    let with = reports(&mut r, 1100, 1700, &every_20_ms);
    assert!((8..=9).contains(&with), "{with} reports with data");
    // No data for 2 s: silent once three times R_max (600 ms) has passed without a packet
    // (the last came at 1680 ms): seven or eight reports until then, not 26.
    let without = reports(&mut r, 1700, 3700, &|_| false);
    assert!(
        (6..=9).contains(&without),
        "{without} reports in 2 s without data"
    );
    let back = reports(&mut r, 3700, 4300, &every_20_ms);
    assert!((8..=9).contains(&back), "{back} reports with data back");
    // Sparse packets, one of them lost: a packet every 190 ms (R_max 200 ms), the one at
    // 4680 ms missing. A gap of two packets is not silence: a report every RTT throughout.
    let n = reports(&mut r, 4310, 5500, &|t| t % 190 == 0 && t != 4680);
    assert!(
        (15..=17).contains(&n),
        "{n} reports in 1.2 s of sparse data"
    );
}
