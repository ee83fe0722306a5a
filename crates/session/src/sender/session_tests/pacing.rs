//! When packets and frames leave: due times, stalls and late policies, the controller's rate.

use super::*;

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

/// A session that sends at its controller's rate, `rate` fixed until set.
pub(super) fn at_rate_session(rate: Bitrate) -> SenderSession {
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
