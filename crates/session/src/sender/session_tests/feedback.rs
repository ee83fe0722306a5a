//! What receivers' RTCP does to the session: reports to its rate controller, RRTRs answered.

use super::*;

/// A controller that halves its rate on every report with loss and when its no-feedback timer
/// fires, and records what it heard.
pub(super) struct Halving {
    rate: Bitrate,
    heard: Arc<Mutex<Vec<Feedback>>>,
    no_feedback: Option<Timestamp>,
}

impl Halving {
    /// At `rate`, which reports without loss keep, with no timer.
    pub(super) fn steady(rate: Bitrate) -> Self {
        Halving {
            rate,
            heard: Arc::default(),
            no_feedback: None,
        }
    }
}

impl RateController for Halving {
    fn name(&self) -> &'static str {
        "halving"
    }
    fn target_rate(&self) -> Bitrate {
        self.rate
    }
    fn on_feedback(&mut self, _now: Timestamp, fb: &Feedback) {
        self.heard.lock().unwrap().push(*fb);
        if fb.fraction_lost > 0.0 {
            self.rate = self.rate.scaled(0.5);
        }
    }
    fn set_rate(&mut self, rate: Bitrate) {
        self.rate = rate;
    }
    fn poll_timeout(&self) -> Option<(Timestamp, ControllerTimer)> {
        self.no_feedback.map(|t| (t, ControllerTimer::NoFeedback))
    }
    fn handle_timeout(&mut self, _now: Timestamp) {
        self.no_feedback = None;
        self.rate = self.rate.scaled(0.5);
    }
}

/// The session's rate events waiting (changes and reports), the others dropped.
fn rate_events(s: &mut SenderSession) -> Vec<SessionEvent> {
    std::iter::from_fn(|| s.poll_event())
        .filter(|e| {
            matches!(
                e,
                SessionEvent::RateChanged { .. } | SessionEvent::RateReported { .. }
            )
        })
        .collect()
}

#[test]
fn receiver_reports_reach_the_rate_controller_and_the_session_follows_its_rate() {
    let heard = Arc::new(Mutex::new(Vec::new()));
    let cc = Halving {
        rate: Bitrate::mbps(8),
        heard: heard.clone(),
        no_feedback: Some(ms(80)),
    };
    let mut s = SenderSession::new(config(LatePolicy::CATCH_UP), Timestamp::ZERO, Box::new(cc));
    let block = Block {
        ssrc: Ssrc(0xabc),
        fraction_lost: 32,
        cumulative_lost: 5,
        extended_highest_seq: 100,
        jitter: 900,
        lsr: 0,
        dlsr: 0,
    };
    rtcp_in(&mut s, ms(50), &viewer_report(block));
    let fb = heard.lock().unwrap()[0];
    assert_eq!(
        (fb.receiver, fb.fraction_lost, fb.cumulative_lost),
        (0x77, 0.125, 5)
    );
    assert_eq!(fb.jitter, Duration::from_millis(10));
    assert_eq!(s.target_rate(), Bitrate::mbps(4));
    // A change, then the report it came from.
    assert_eq!(
        rate_events(&mut s),
        [
            SessionEvent::RateChanged {
                at: ms(50),
                rate: Bitrate::mbps(4)
            },
            SessionEvent::RateReported {
                at: ms(50),
                rate: Bitrate::mbps(4),
                media: Bitrate::mbps(4)
            }
        ]
    );
    // Asked for a rate, the controller takes it: a change, and no report.
    s.handle_input(ms(60), Input::SetRate(Bitrate::mbps(6)))
        .unwrap();
    assert_eq!(s.target_rate(), Bitrate::mbps(6));
    assert_eq!(s.stats().rate_changes, 2);
    assert_eq!(
        rate_events(&mut s),
        [SessionEvent::RateChanged {
            at: ms(60),
            rate: Bitrate::mbps(6)
        }]
    );
    // A report without loss keeps the rate: the session says it heard one (a VBR controller
    // averages every report's rate), without counting a change.
    let clean = Block {
        fraction_lost: 0,
        ..block
    };
    rtcp_in(&mut s, ms(70), &viewer_report(clean));
    assert_eq!(
        rate_events(&mut s),
        [SessionEvent::RateReported {
            at: ms(70),
            rate: Bitrate::mbps(6),
            media: Bitrate::mbps(6)
        }]
    );
    assert_eq!((s.stats().rate_changes, s.rate_reports()), (2, 2));
    // A change on the controller's own clock is a change, and no report (Evalvid-RA's agents
    // tell the VBR controller only at feedback).
    s.handle_timeout(ms(80));
    assert_eq!(
        rate_events(&mut s),
        [SessionEvent::RateChanged {
            at: ms(80),
            rate: Bitrate::mbps(3)
        }]
    );
    assert_eq!((s.stats().rate_changes, s.rate_reports()), (3, 2));
    // A driver that reads after the timer still hears the rate the report left.
    assert_eq!(
        (s.target_rate(), s.reported_rate()),
        (Bitrate::mbps(3), Some(Bitrate::mbps(6)))
    );
}

/// A controller that computes nothing from a receiver report (a fixed rate) hears it, but the
/// producer is told of no report.
#[test]
fn a_fixed_rate_hears_reports_and_tells_the_producer_of_none() {
    let mut fixed = SenderSession::new(
        config(LatePolicy::CATCH_UP),
        Timestamp::ZERO,
        Box::new(FixedRate::new(Bitrate::mbps(5))),
    );
    let clean = Block {
        ssrc: Ssrc(0xabc),
        fraction_lost: 0,
        cumulative_lost: 5,
        extended_highest_seq: 100,
        jitter: 900,
        lsr: 0,
        dlsr: 0,
    };
    rtcp_in(&mut fixed, ms(70), &viewer_report(clean));
    assert_eq!(rate_events(&mut fixed), []);
    assert_eq!(fixed.rate_reports(), 0);
}

/// A receiver report from viewer 0x77 with `block`, as an RTCP compound.
pub(super) fn viewer_report(block: Block) -> Vec<u8> {
    let mut buf = vec![0u8; 1500];
    let n = rtcp::write_compound(
        &mut buf,
        ReportHead::Receiver {
            ssrc: Ssrc(0x77),
            blocks: &[block],
        },
        "viewer",
        None,
    )
    .unwrap();
    buf.truncate(n);
    buf
}

/// A TFRC receiver's report (RTCP APP "TFRC") reaches a TFRC controller with the round-trip
/// sample its echo gives (from when the echoed packet left), and the session follows the rate
/// TFRC allows.
#[test]
fn a_tfrc_report_drives_a_tfrc_controller_through_the_session() {
    use metronome_cc::{TfrcConfig, TfrcSender};
    use metronome_wire::TfrcFeedback;
    let cc = TfrcSender::new(TfrcConfig::new(1250, Bitrate::mbps(50)), Timestamp::ZERO);
    let mut s = SenderSession::new(config(LatePolicy::CATCH_UP), Timestamp::ZERO, Box::new(cc));
    // The receiver answers about packet 7, 20 ms after it arrived. It was due at 860 ms and
    // left at 880 ms: round-trip samples count from when it left.
    let late = Queued {
        due: ms(860),
        ..packet(7)
    };
    s.handle_input(ms(0), Input::Packet(late)).unwrap();
    assert!(matches!(
        s.poll_transmit(ms(880)),
        Some(Transmit::Send { .. })
    ));
    let report = |p: f64| TfrcFeedback {
        media_ssrc: Ssrc(0xabc),
        echo_seq: 7,
        t_delay_us: 20_000,
        x_recv_bytes_per_s: 125_000,
        p_fraction: TfrcFeedback::fraction_of(p),
    };
    let deliver = |s: &mut SenderSession, at: u64, fb: &TfrcFeedback| {
        let mut buf = [0u8; 1500];
        let head = ReportHead::Receiver {
            ssrc: Ssrc(0x77),
            blocks: &[],
        };
        let apps = [rtcp::CcApp::TfrcFeedback(*fb)];
        let n = rtcp::write_compound_with(&mut buf, head, "viewer", &apps, None, None).unwrap();
        let input = Input::Rtcp {
            wall: wall(ms(at)),
            from: "127.0.0.1:5005".parse().unwrap(),
            outlet: Outlet(0),
            data: &buf[..n],
        };
        s.handle_input(ms(at), input).unwrap();
    };
    // At 1 s: a round trip of 100 ms, no loss yet, 1 Mbit/s received.
    // W_init / R = min(4·1250, max(2·1250, 4380)) / 0.1 s = 43 800 B/s.
    deliver(&mut s, 1000, &report(0.0));
    assert_eq!(s.target_rate(), Bitrate::bps(350_400));
    // A report about another stream changes nothing.
    let mut other = report(0.01);
    other.media_ssrc = Ssrc(0xdef);
    deliver(&mut s, 1100, &other);
    assert_eq!(s.target_rate(), Bitrate::bps(350_400));
    // With losses (p = 1 %), at 1.2 s the echo is 320 ms old: R = 0.9·100 + 0.1·300 ms.
    deliver(&mut s, 1200, &report(0.01));
    let want = metronome_cc::tfrc::equation::throughput_bytes_per_s(
        1250.0,
        Duration::from_millis(120),
        report(0.01).p(),
    );
    let got = s.target_rate().as_bps() as f64 / 8.0;
    assert!((got - want).abs() < 1.0, "{got} {want}");
}

/// A receiver's RFC 3611 RRTR is answered in the next compound's DLRR block with the delay
/// since it came; one from an SSRC that never reported is not.
#[test]
fn a_receivers_rrtr_is_answered_in_a_dlrr_and_a_strangers_is_not() {
    let mut s = session(LatePolicy::CATCH_UP);
    let block = Block {
        ssrc: Ssrc(0xabc),
        fraction_lost: 0,
        cumulative_lost: 0,
        extended_highest_seq: 100,
        jitter: 0,
        lsr: 0,
        dlsr: 0,
    };
    let mut buf = [0u8; 1500];
    let from = |ssrc: u32, buf: &mut [u8]| {
        let head = ReportHead::Receiver {
            ssrc: Ssrc(ssrc),
            blocks: std::slice::from_ref(&block),
        };
        let n = rtcp::write_compound(buf, head, "viewer", None).unwrap();
        n + rtcp::write_rrtr(&mut buf[n..], Ssrc(ssrc), 0x0000_1234_5678_0000)
    };
    let n = from(0x77, &mut buf);
    rtcp_in(&mut s, ms(100), &buf[..n]);
    // A stranger's RRTR alone, without a report: not kept.
    let n = rtcp::write_rrtr(&mut buf, Ssrc(0x66), 1 << 32);
    rtcp_in(&mut s, ms(100), &buf[..n]);
    let n = s.poll_rtcp(ms(350), wall(ms(350)), &mut buf).unwrap();
    let mut answers = Vec::new();
    rtcp::parse_compound(&buf[..n], |item| {
        if let rtcp::RtcpItem::Xr(rtcp::XrItem::Dlrr {
            ssrc, lrr, dlrr, ..
        }) = item
        {
            answers.push((ssrc, lrr, dlrr));
        }
    })
    .unwrap();
    // 250 ms in 1/65 536 s: 16 384.
    assert_eq!(answers, vec![(Ssrc(0x77), 0x1234_5678, 16_384)]);
    // Answered once.
    let n = s.poll_rtcp(ms(5000), wall(ms(5000)), &mut buf).unwrap();
    let mut again = 0;
    rtcp::parse_compound(&buf[..n], |item| {
        again += usize::from(matches!(item, rtcp::RtcpItem::Xr(_)))
    })
    .unwrap();
    assert_eq!(again, 0);
}
