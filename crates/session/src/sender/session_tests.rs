//! The sender session on its own, driven by hand in virtual time.

use super::*;
use crate::sender::SenderRepair;
use metronome_cc::{ControllerTimer, Feedback, FixedRate, RateController};
use metronome_sched::{LatePolicy, PacingConfig};
use metronome_time::{Bitrate, MediaClock, NtpTime, RtpTime, Timestamp};
use metronome_wire::rtcp::{self, Block, ReportHead};
use metronome_wire::PayloadType;
use metronome_wire::{SeqNo, Ssrc};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn ms(v: u64) -> Timestamp {
    Timestamp::from_millis(v)
}

fn wall(t: Timestamp) -> NtpTime {
    NtpTime::from_unix_nanos(1_767_225_600_000_000_000 + t.as_nanos())
}

fn config(late: LatePolicy) -> SenderSessionConfig {
    SenderSessionConfig {
        reports: SenderReportsConfig {
            ssrc: Ssrc(0xabc),
            cname: "sender@test".into(),
            clock: MediaClock::VIDEO_90K,
            rtp_ts_base: RtpTime(0),
            session_bw_bps: 5_000_000,
            rtcp_min_interval: Duration::from_secs(1),
            max_receivers: 4,
            seed: 1,
        },
        pacing: PacingConfig {
            late,
            ..PacingConfig::default()
        },
        jobs: JobConfig {
            period: None,
            deadline: Duration::from_millis(2),
        },
        queue_capacity: 2048,
    }
}

/// 1250-byte packets every 2 ms: 5 Mbit/s.
fn packet(k: u32) -> Queued {
    Queued {
        id: k,
        packets: 1,
        due: ms(2 * k as u64),
        wire_len: 1250,
        payload_len: 1238,
        seq: SeqNo(k as u16),
    }
}

fn session(late: LatePolicy) -> SenderSession {
    let cc = Box::new(FixedRate::new(Bitrate::mbps(5)));
    SenderSession::new(config(late), Timestamp::ZERO, cc)
}

/// Feeds `n` packets and runs the session as an exact driver would, except that it cannot
/// run during `stall`. Returns every transmit with the time it happened, and every event.
fn run(
    s: &mut SenderSession,
    n: u32,
    stall: (Timestamp, Timestamp),
) -> (Vec<(Timestamp, Transmit)>, Vec<SessionEvent>) {
    for k in 0..n {
        s.handle_input(Timestamp::ZERO, Input::Packet(packet(k)))
            .unwrap();
    }
    s.handle_input(Timestamp::ZERO, Input::SourceEnded).unwrap();
    let (mut out, mut events) = (Vec::new(), Vec::new());
    let mut now = Timestamp::ZERO;
    while !s.is_finished() {
        while let Some(e) = s.poll_event() {
            events.push(e);
        }
        if now >= stall.0 && now < stall.1 {
            now = stall.1;
        }
        match s.poll_transmit(now) {
            Some(t) => out.push((now, t)),
            None => {
                if s.poll_rtcp(now, wall(now), &mut [0u8; 1500]).is_some() {
                    continue;
                }
                let (t, _) = s.poll_timeout().expect("a queued packet has a time");
                assert!(t > now);
                now = t;
            }
        }
    }
    events.extend(std::iter::from_fn(|| s.poll_event()));
    (out, events)
}

#[test]
fn packets_leave_at_their_due_time_and_reports_count_them() {
    let mut s = session(LatePolicy::CATCH_UP);
    let (out, _) = run(&mut s, 100, (ms(0), ms(0)));
    assert_eq!(out.len(), 100);
    for (at, t) in &out {
        let Transmit::Send { due, late, .. } = *t else {
            panic!("nothing is dropped on time")
        };
        assert_eq!((*at, late), (due, Duration::ZERO));
    }
    let st = s.stats();
    assert_eq!(
        (st.packets, st.bytes, st.payload_octets),
        (100, 125_000, 123_800)
    );
    assert_eq!((st.jobs, st.deadline_misses, st.pacing.stalls), (100, 0, 0));
    // The sender report carries the count and maps now to the RTP time of a packet due now.
    let mut buf = [0u8; 1500];
    let n = s.bye(ms(200), wall(ms(200)), &mut buf).unwrap();
    let mut info = None;
    rtcp::parse_compound(&buf[..n], |i| {
        if let metronome_wire::RtcpItem::SenderReport(x) = i {
            info = Some((x.packet_count, x.octet_count, x.rtp_timestamp));
        }
    })
    .unwrap();
    assert_eq!(info, Some((100, 123_800, RtpTime(18_000))));
}

#[test]
fn after_a_stall_late_packets_catch_up_at_the_bounded_rate_and_keep_their_due_times() {
    let mut s = session(LatePolicy::CATCH_UP);
    let (out, ev) = run(&mut s, 500, (ms(100), ms(400)));
    assert_eq!(out.len(), 500, "catch-up sends everything");
    let late: Vec<_> = out
        .iter()
        .filter_map(|(at, t)| match *t {
            Transmit::Send { late, .. } if late > Duration::from_millis(2) => Some(*at),
            _ => None,
        })
        .collect();
    // 2× 5 Mbit/s: one 1250-byte packet a millisecond, never faster.
    assert!(late.len() > 250, "{}", late.len());
    for w in late.windows(2) {
        assert!(w[1].saturating_since(w[0]) >= Duration::from_millis(1));
    }
    // Back on schedule about 300 ms after the stall ended, and exactly on time from then on.
    let (back, _) = out
        .iter()
        .find(|(at, t)| *at > ms(400) && matches!(t, Transmit::Send { late, .. } if late.is_zero()))
        .unwrap();
    assert!(*back >= ms(695) && *back <= ms(705), "{back}");
    assert!(
        matches!(ev[0], SessionEvent::StallBegan { at, .. } if at == ms(400)),
        "{:?}",
        &ev[..3]
    );
    assert!(ev
        .iter()
        .any(|e| matches!(e, SessionEvent::StallEnded { lasted, .. } if *lasted > Duration::from_millis(290))));
    let st = s.stats();
    assert_eq!(st.pacing.stalls, 1);
    assert!(
        st.deadline_misses > 100,
        "late packets miss their 2 ms deadlines"
    );
}

#[test]
fn drop_late_gives_back_the_slots_of_packets_past_their_deadline() {
    let mut s = session(LatePolicy::DropLate {
        after: Duration::from_millis(10),
    });
    let (out, _) = run(&mut s, 500, (ms(100), ms(400)));
    let dropped: Vec<_> = out
        .iter()
        .filter(|(_, t)| matches!(t, Transmit::Drop { .. }))
        .map(|(_, t)| t.id())
        .collect();
    // Packets due at 100..=388 ms (ids 50..=194) were more than 10 ms late at 400 ms.
    assert_eq!(dropped, (50..=194).collect::<Vec<_>>());
    assert_eq!(s.stats().packets, 500 - 145);
    assert_eq!(s.stats().pacing.dropped, 145);
}

#[test]
fn what_is_dropped_or_discarded_takes_no_sequence_number() {
    let mut s = session(LatePolicy::DropLate {
        after: Duration::from_millis(10),
    });
    let (out, _) = run(&mut s, 500, (ms(100), ms(400)));
    // Sent packets carry how many were dropped before them: none before the stall, all 145
    // after it.
    let renumber_of = |id: u32| {
        out.iter().find_map(|(_, t)| match *t {
            Transmit::Send {
                id: i, renumber, ..
            } if i == id => Some(renumber),
            _ => None,
        })
    };
    assert_eq!(renumber_of(49), Some(0));
    assert_eq!(renumber_of(195), Some(145));
    assert_eq!(renumber_of(499), Some(145));
    // Packets a driver discards without queueing them count the same way.
    let mut s = session(LatePolicy::CATCH_UP);
    s.handle_input(ms(0), Input::Discarded { packets: 7 })
        .unwrap();
    s.handle_input(ms(0), Input::Packet(packet(0))).unwrap();
    let Some(Transmit::Send { renumber, .. }) = s.poll_transmit(ms(0)) else {
        panic!("packet 0 is due at 0 ms");
    };
    assert_eq!(renumber, 7);
}

#[test]
fn the_queue_refuses_more_than_its_slots_and_packets_out_of_order() {
    let mut cfg = config(LatePolicy::CATCH_UP);
    cfg.queue_capacity = 2;
    let mut s = SenderSession::new(
        cfg,
        Timestamp::ZERO,
        Box::new(FixedRate::new(Bitrate::mbps(5))),
    );
    s.handle_input(ms(0), Input::Packet(packet(1))).unwrap();
    let e = s.handle_input(ms(0), Input::Packet(packet(0))).unwrap_err();
    assert!(matches!(e, InputError::OutOfOrder { .. }), "{e}");
    s.handle_input(ms(0), Input::Packet(packet(2))).unwrap();
    let e = s.handle_input(ms(0), Input::Packet(packet(3))).unwrap_err();
    assert_eq!(e, InputError::QueueFull { capacity: 2 });
    assert!(e.to_string().contains("2 packets"));
}

#[test]
fn an_empty_queue_while_running_is_one_underrun_per_episode() {
    let mut s = session(LatePolicy::CATCH_UP);
    assert!(s.poll_transmit(ms(0)).is_none(), "not started: no underrun");
    s.handle_input(ms(0), Input::Packet(packet(0))).unwrap();
    assert!(s.poll_transmit(ms(0)).is_some());
    assert!(s.poll_transmit(ms(1)).is_none());
    assert!(s.poll_transmit(ms(2)).is_none());
    assert_eq!(s.stats().underruns, 1);
    s.handle_input(ms(2), Input::Packet(packet(1))).unwrap();
    assert!(s.poll_transmit(ms(2)).is_some());
    assert!(s.poll_transmit(ms(3)).is_none());
    assert_eq!(s.stats().underruns, 2);
}

/// A controller that halves its rate on every report with loss and when its no-feedback timer
/// fires, and records what it heard.
struct Halving {
    rate: Bitrate,
    heard: Arc<Mutex<Vec<Feedback>>>,
    no_feedback: Option<Timestamp>,
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
    let mut buf = [0u8; 1500];
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
    rtcp_in(&mut s, ms(50), &buf[..n]);
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
                rate: Bitrate::mbps(4)
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
    let n = rtcp::write_compound(
        &mut buf,
        ReportHead::Receiver {
            ssrc: Ssrc(0x77),
            blocks: &[clean],
        },
        "viewer",
        None,
    )
    .unwrap();
    rtcp_in(&mut s, ms(70), &buf[..n]);
    assert_eq!(
        rate_events(&mut s),
        [SessionEvent::RateReported {
            at: ms(70),
            rate: Bitrate::mbps(6)
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
    // A controller that computes nothing from a receiver report (a fixed rate) hears it, but
    // the producer is told of no report.
    let mut fixed = SenderSession::new(
        config(LatePolicy::CATCH_UP),
        Timestamp::ZERO,
        Box::new(FixedRate::new(Bitrate::mbps(5))),
    );
    rtcp_in(&mut fixed, ms(70), &buf[..n]);
    assert_eq!(rate_events(&mut fixed), []);
    assert_eq!(fixed.rate_reports(), 0);
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

/// Frame `f` of four entries of three packets each (a raw frame's GSO batches), due 5 ms
/// apart from `40 f` ms. Ids are `10 f + i`.
fn frame(f: u32) -> [Queued; 4] {
    std::array::from_fn(|i| Queued {
        id: 10 * f + i as u32,
        packets: 3,
        due: ms(40 * f as u64 + 5 * i as u64),
        wire_len: 3750,
        payload_len: 3714,
        seq: SeqNo((12 * f + 3 * i as u32) as u16),
    })
}

/// Queues `frames` frames and runs the session as an exact driver would, except that it
/// cannot run during `stall`.
fn run_frames(
    s: &mut SenderSession,
    frames: u32,
    stall: (Timestamp, Timestamp),
) -> Vec<(Timestamp, Transmit)> {
    for f in 0..frames {
        s.handle_input(Timestamp::ZERO, Input::Frame(&frame(f)))
            .unwrap();
    }
    s.handle_input(Timestamp::ZERO, Input::SourceEnded).unwrap();
    let mut out = Vec::new();
    let mut now = Timestamp::ZERO;
    while !s.is_finished() {
        if now >= stall.0 && now < stall.1 {
            now = stall.1;
        }
        match s.poll_transmit(now) {
            Some(t) => out.push((now, t)),
            None => now = s.next_send().expect("a queued entry has a time").max(now),
        }
    }
    out
}

fn drop_late_10ms() -> SenderSession {
    session(LatePolicy::DropLate {
        after: Duration::from_millis(10),
    })
}

/// ST 2110 receivers want a frame whole or not at all. The driver stalls from 41 ms (frame
/// 1's first entry has left) to 95 ms: frame 1's other entries are 36–46 ms late, past the
/// 10 ms bound, and still leave; frame 2, whose first entry is 15 ms late when the driver
/// runs again, is dropped whole at once, its later entries before their own due times.
#[test]
fn a_frame_leaves_whole_or_not_at_all() {
    let mut s = drop_late_10ms();
    let out = run_frames(&mut s, 4, (ms(41), ms(95)));
    let fate = |id: u32| {
        out.iter()
            .find(|(_, t)| t.id() == id)
            .map(|(at, t)| (*at, matches!(t, Transmit::Send { .. })))
            .unwrap()
    };
    for i in 0..4 {
        assert!(fate(i).1 && fate(10 + i).1, "frames 0 and 1 leave whole");
        assert!(!fate(20 + i).1, "frame 2 is dropped whole");
        assert_eq!(fate(20 + i).0, ms(95), "at once");
        assert!(fate(30 + i).1, "frame 3 leaves whole");
    }
    assert_eq!(
        fate(11).0,
        ms(95),
        "frame 1's rest leaves when the driver can"
    );
    // Frame 2's twelve packets took no sequence number; frame 3 moves back by them.
    let renumber = out.iter().find_map(|(_, t)| match *t {
        Transmit::Send {
            id: 30, renumber, ..
        } => Some(renumber),
        _ => None,
    });
    assert_eq!(renumber, Some(12));
    let st = s.stats();
    assert_eq!(st.packets, 36);
    assert_eq!((st.pacing.dropped, st.pacing.late_packets), (4, 3));
}

/// The same stall with single packets drops every packet past the bound, as before: only
/// a frame's later entries are kept.
#[test]
fn packets_queued_one_by_one_are_judged_one_by_one() {
    let mut s = drop_late_10ms();
    for f in 0..4 {
        for q in frame(f) {
            s.handle_input(Timestamp::ZERO, Input::Packet(q)).unwrap();
        }
    }
    s.handle_input(Timestamp::ZERO, Input::SourceEnded).unwrap();
    let mut now = Timestamp::ZERO;
    let mut dropped = Vec::new();
    while !s.is_finished() {
        if now >= ms(41) && now < ms(95) {
            now = ms(95);
        }
        match s.poll_transmit(now) {
            Some(t @ Transmit::Drop { .. }) => dropped.push(t.id()),
            Some(_) => {}
            None => now = s.next_send().unwrap().max(now),
        }
    }
    // Due at 45..=80 ms: more than 10 ms late at 95 ms (85 and 90 are within the bound).
    assert_eq!(dropped, [11, 12, 13, 20]);
}

/// A frame is queued whole or refused whole: no room for all its entries, or out of due
/// order, and nothing of it is queued.
#[test]
fn a_frame_is_queued_whole_or_refused() {
    let mut cfg = config(LatePolicy::CATCH_UP);
    cfg.queue_capacity = 6;
    let cc = Box::new(FixedRate::new(Bitrate::mbps(5)));
    let mut s = SenderSession::new(cfg, Timestamp::ZERO, cc);
    s.handle_input(ms(0), Input::Frame(&frame(1))).unwrap();
    assert_eq!(s.room(), 2);
    let full = s.handle_input(ms(0), Input::Frame(&frame(2)));
    assert_eq!(full, Err(InputError::QueueFull { capacity: 6 }));
    assert_eq!(s.queue_len(), 4);
    let early = s.handle_input(ms(0), Input::Frame(&frame(0)[..2]));
    assert!(
        matches!(early, Err(InputError::OutOfOrder { .. })),
        "{early:?}"
    );
    assert_eq!(s.queue_len(), 4);
}

/// A 5 Mbit/s session that repairs up to 10 % of its rate (retransmissions as SSRC 0x5e5,
/// payload type 97), having sent packets 0..200 (each 1 250 bytes, due 2 ms apart), viewers
/// playing out 300 ms after the fastest packet.
fn repairing_session() -> SenderSession {
    repairing_session_to(false)
}

/// [`repairing_session`], to a group if `group` (losses being repaired told to it).
fn repairing_session_to(group: bool) -> SenderSession {
    use crate::repair::RepairConfig;
    use metronome_wire::rtp::{write_packet, RtpHeader, SendTimeExt};
    let rtx = metronome_wire::rtx::StreamIds {
        ssrc: Ssrc(0x5e5),
        payload_type: PayloadType(97),
    };
    let mut s = session(LatePolicy::CATCH_UP).with_repair(SenderRepair {
        repairer: RepairConfig::new(rtx, SeqNo(0), 0.1),
        history_packets: 256,
        max_packet: 1500,
        playout_delay: Duration::from_millis(300),
        initial_rtt: Duration::from_millis(20),
        tell_group: group,
    });
    let mut buf = [0u8; 1500];
    for k in 0..200u16 {
        let hdr = RtpHeader {
            payload_type: PayloadType(33),
            sequence: SeqNo(k),
            timestamp: RtpTime(180 * u32::from(k)),
            ssrc: Ssrc(0xabc),
            marker: false,
        };
        let n = write_packet(&mut buf, &hdr, SendTimeExt::None, &[7; 1238]).unwrap();
        s.keep_sent(&buf[..n], ms(2 * u64::from(k)));
    }
    s
}

/// An RTCP compound from receiver `reporter`: its receiver report and `nacks` NACKs, each
/// about `media` and asking for `per_nack` numbers from `first`.
fn nack_compound(reporter: u32, media: u32, first: u16, per_nack: u16, nacks: usize) -> Vec<u8> {
    let mut buf = vec![0u8; 65_000];
    let mut n = rtcp::write_compound(
        &mut buf,
        ReportHead::Receiver {
            ssrc: Ssrc(reporter),
            blocks: &[],
        },
        "viewer",
        None,
    )
    .unwrap();
    let seqs: Vec<SeqNo> = (0..per_nack).map(|i| SeqNo(first).add(i)).collect();
    for _ in 0..nacks {
        n += rtcp::write_nack(&mut buf[n..], Ssrc(reporter), Ssrc(media), &seqs);
    }
    buf.truncate(n);
    buf
}

fn rtcp_in(s: &mut SenderSession, now: Timestamp, data: &[u8]) {
    let from = "127.0.0.1:5005".parse().unwrap();
    let input = Input::Rtcp {
        wall: wall(now),
        from,
        data,
    };
    s.handle_input(now, input).unwrap();
}

#[test]
fn a_nack_is_answered_with_retransmissions_of_what_can_still_make_its_deadline() {
    let mut s = repairing_session();
    // At 400 ms, packets due before 100 ms are past their play-out time (300 ms later).
    rtcp_in(&mut s, ms(400), &nack_compound(0x77, 0xabc, 40, 30, 1));
    let mut buf = [0u8; 1500];
    let mut got = Vec::new();
    while let Some(n) = s.poll_repair(ms(400), &mut buf) {
        let v = metronome_wire::rtp::RtpView::parse(&buf[..n]).unwrap();
        assert_eq!(
            (v.ssrc(), v.payload_type(), n),
            (Ssrc(0x5e5), PayloadType(97), 1252)
        );
        got.push(u16::from_be_bytes([v.payload()[0], v.payload()[1]]));
    }
    assert_eq!(got, (50..70).collect::<Vec<u16>>());
    let st = s.repair_stats().unwrap();
    assert_eq!(
        (st.repairer.asked, st.repairer.sent, st.repairer.too_late),
        (30, 20, 10)
    );
    assert_eq!(st.bytes, 20 * 1252);
}

#[test]
fn a_retransmission_that_waited_past_its_time_is_dropped_not_sent() {
    let mut s = repairing_session();
    rtcp_in(&mut s, ms(400), &nack_compound(0x77, 0xabc, 40, 30, 1));
    // The driver comes for them only when the last could no longer reach the viewer.
    let mut buf = [0u8; 1500];
    assert_eq!(s.poll_repair(ms(2000), &mut buf), None);
    let st = s.repair_stats().unwrap();
    assert_eq!((st.repairer.sent, st.expired, st.packets), (20, 20, 0));
}

#[test]
fn a_nack_storm_with_forged_ssrcs_costs_no_more_than_its_bounds() {
    let mut s = repairing_session();
    let mut buf = [0u8; 1500];
    let mut repair_bytes = 0;
    // 40 NACKs in a compound, of 1 000 numbers each (every packet, many times over), half
    // about streams that are not this one, from forged reporters; 100 compounds over 1 s.
    for k in 0..100u64 {
        let now = ms(100 + 10 * k);
        rtcp_in(&mut s, now, &nack_compound(k as u32, 0xabc, 0, 1000, 20));
        rtcp_in(&mut s, now, &nack_compound(k as u32, 0xdead, 0, 1000, 20));
        while let Some(n) = s.poll_repair(now, &mut buf) {
            repair_bytes += n as u64;
        }
    }
    let st = s.repair_stats().unwrap();
    // 16 NACKs read of each compound's 20; 64 numbers answered of each.
    assert_eq!(st.nacks_unread, 200 * 4);
    assert_eq!(st.repairer.foreign_nacks, 100 * 16);
    assert_eq!(st.repairer.truncated_nacks, 100 * 16);
    assert_eq!(st.repairer.asked, 100 * 16 * 64);
    // What left is what the budget allows: a burst of 64 packets' worth and 10 % of 5 Mbit/s
    // over the second; every packet at most once a round trip.
    let budget = 64 * 1500 + 5_000_000 / 8 / 10;
    assert!(repair_bytes <= budget, "{repair_bytes} > {budget}");
    assert_eq!(repair_bytes, st.bytes);
    assert!(st.repairer.duplicate + st.repairer.over_budget + st.repairer.too_late > 90_000);
}

/// A session that sends at its controller's rate, `rate` fixed until set.
fn at_rate_session(rate: Bitrate) -> SenderSession {
    let cc = Box::new(FixedRate::new(rate));
    SenderSession::new(config(LatePolicy::CatchUp { factor: 2.0 }), ms(0), cc).sending_at_rate(true)
}

/// Sending at the controller's rate: a frame's packets, all due when it was made, leave one
/// packet's time at the rate apart; a rate set meanwhile reaches the packets already queued;
/// the queue the source is told counts what is due and has not left.
#[test]
fn at_the_controllers_rate_queued_packets_leave_at_the_rate_of_each_moment() {
    let mut s = at_rate_session(Bitrate::bps(1_000_000));
    // Ten 1250-byte packets of one frame made at 0 ms, five of the next at 100 ms.
    for k in 0..15u32 {
        let due = if k < 10 { ms(0) } else { ms(100) };
        let q = Queued { due, ..packet(k) };
        s.handle_input(ms(0), Input::Packet(q)).unwrap();
    }
    assert_eq!(s.queued_due(ms(0)), 10, "the next frame is not due yet");
    let mut sent = Vec::new();
    let mut now = ms(0);
    while let Some(t) = s.next_send() {
        now = now.max(t);
        if sent.len() == 5 && now >= ms(50) {
            // Ten times the rate after 50 ms: the queue drains at 1 ms a packet.
            s.handle_input(now, Input::SetRate(Bitrate::bps(10_000_000)))
                .unwrap();
        }
        if let Some(Transmit::Send { due, late, .. }) = s.poll_transmit(now) {
            assert_eq!(late, Duration::ZERO, "on time at the rate");
            sent.push(due);
        }
    }
    // 10 ms a packet at 1 Mbit/s, the first when made.
    let first: Vec<_> = sent[..6].iter().map(|t| t.as_nanos() / 1_000_000).collect();
    assert_eq!(first, [0, 10, 20, 30, 40, 50]);
    // Then 1 ms a packet: the rise reached the packets made before it.
    assert_eq!(sent[6].as_nanos() / 1_000_000, 51);
    assert_eq!(sent[9].as_nanos() / 1_000_000, 54);
    // The next frame leaves when it is made: the sender was free by then.
    assert_eq!(sent[10].as_nanos() / 1_000_000, 100);
    assert_eq!(sent[14].as_nanos() / 1_000_000, 104);
    assert_eq!(s.queued_due(ms(200)), 0);
}

/// A rate that rises while the head packet waits for its time at the old rate: the session's
/// next send moves up at once, so a driver that sleeps until `next_send` (the real-time
/// pacing core) is not held to the old rate's wait (up to 500 ms at TFMCC's start).
#[test]
fn a_rate_that_rises_moves_the_waiting_heads_send_time_up() {
    let mut s = at_rate_session(Bitrate::bps(1_000_000));
    for k in 0..3u32 {
        let q = Queued {
            due: ms(0),
            ..packet(k)
        };
        s.handle_input(ms(0), Input::Packet(q)).unwrap();
    }
    assert!(matches!(
        s.poll_transmit(ms(0)),
        Some(Transmit::Send { .. })
    ));
    // The next waits its 10 ms at 1 Mbit/s (1250 bytes).
    assert!(s.poll_transmit(ms(2)).is_none());
    assert_eq!(s.next_send(), Some(ms(10)));
    s.handle_input(ms(2), Input::SetRate(Bitrate::bps(10_000_000)))
        .unwrap();
    // 1 ms at 10 Mbit/s from the first's departure has passed: it may leave now.
    assert_eq!(s.next_send(), Some(ms(2)));
    assert!(matches!(
        s.poll_transmit(ms(2)),
        Some(Transmit::Send { .. })
    ));
    assert_eq!(s.next_send(), Some(ms(3)));
}

/// The TLLEIs (RFC 6642) in compound `data`: (packet sender, media, numbers).
fn tlleis(data: &[u8]) -> Vec<(u32, u32, Vec<u16>)> {
    let mut out = Vec::new();
    rtcp::parse_compound(data, |item| {
        if let rtcp::RtcpItem::Tllei(t) = item {
            let seqs = t.sequences().map(u16::from).collect();
            out.push((t.sender_ssrc.get(), t.media_ssrc.get(), seqs));
        }
    })
    .unwrap();
    out
}

/// To a group, the losses a repair is on its way for go to the group at once, after a sender
/// report; a second NACK for them (a repair still on its way) is told again only a gap later,
/// and a stream to one viewer tells nobody.
#[test]
fn to_a_group_the_losses_being_repaired_are_told_in_a_tllei() {
    let mut s = repairing_session_to(true);
    let mut buf = [0u8; 1500];
    // At 400 ms packets 40..50 are past their play-out time: no repair, nothing told.
    rtcp_in(&mut s, ms(400), &nack_compound(0x77, 0xabc, 45, 10, 1));
    while s.poll_repair(ms(400), &mut buf).is_some() {}
    assert_eq!(s.poll_timeout().map(|(t, _)| t <= ms(400)), Some(true));
    let n = s.poll_rtcp(ms(400), wall(ms(400)), &mut buf).unwrap();
    let ssrc = s.reports().config_ssrc().get();
    assert_eq!(tlleis(&buf[..n]), vec![(ssrc, ssrc, (50..55).collect())]);
    // Another viewer asks for the same within the round trip: a duplicate, told again 10 ms
    // after the last TLLEI, not at once.
    rtcp_in(&mut s, ms(402), &nack_compound(0x78, 0xabc, 50, 2, 1));
    assert_eq!(s.poll_repair(ms(402), &mut buf), None);
    let n = s.poll_rtcp(ms(402), wall(ms(402)), &mut buf);
    assert!(n.is_none_or(|n| tlleis(&buf[..n]).is_empty()));
    assert_eq!(s.poll_timeout().map(|(t, _)| t), Some(ms(410)));
    let n = s.poll_rtcp(ms(410), wall(ms(410)), &mut buf).unwrap();
    assert_eq!(tlleis(&buf[..n]), vec![(ssrc, ssrc, vec![50, 51])]);
    let st = s.repair_stats().unwrap();
    assert_eq!((st.loss_notices, st.noticed, st.notices_dropped), (2, 7, 0));
    // To one viewer: the repair goes, no TLLEI.
    let mut one = repairing_session_to(false);
    rtcp_in(&mut one, ms(400), &nack_compound(0x77, 0xabc, 50, 5, 1));
    while one.poll_repair(ms(400), &mut buf).is_some() {}
    if let Some(n) = one.poll_rtcp(ms(400), wall(ms(400)), &mut buf) {
        assert!(tlleis(&buf[..n]).is_empty());
    }
    assert_eq!(one.repair_stats().unwrap().loss_notices, 0);
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
