//! Receiver reports, sender reports and BYEs: who is in the session and where reports go.

use super::*;

#[test]
fn receiver_reports_carry_lsr_and_dlsr() {
    let mut r = session();
    r.handle_rtp(Timestamp::from_millis(0), None, &rtp(0, 0, 77))
        .unwrap();
    // An SR from source 77 at t = 100 ms.
    let mut buf = [0u8; 1500];
    let info = metronome_wire::rtcp::SenderInfo {
        ssrc: Ssrc(77),
        ntp: 0xb705_2000u64 << 16,
        rtp_timestamp: RtpTime(0),
        packet_count: 1,
        octet_count: 1316,
    };
    let n = metronome_wire::rtcp::write_compound(
        &mut buf,
        ReportHead::Sender(info, &[]),
        "sender",
        None,
    )
    .unwrap();
    r.handle_rtcp(Timestamp::from_millis(100), &buf[..n]);
    assert_eq!(r.main_source().unwrap().cname.as_deref(), Some("sender"));
    // The first report is due within the initial interval; at 5 s it certainly is.
    let n = r.poll_transmit(Timestamp::from_secs(5), &mut buf).unwrap();
    let mut block = None;
    metronome_wire::rtcp::parse_compound(&buf[..n], |i| {
        if let RtcpItem::ReportBlock { block: b, .. } = i {
            block = Some(b);
        }
    })
    .unwrap();
    let b = block.unwrap();
    assert_eq!(b.ssrc, Ssrc(77));
    assert_eq!(b.lsr, 0xb705_2000);
    // DLSR = 4.9 s in 1/65536 s.
    assert_eq!(b.dlsr, (4.9f64 * 65_536.0) as u32);
    assert!(r.poll_timeout().unwrap().0 > Timestamp::from_secs(5));
}

#[test]
fn only_a_sender_report_of_a_received_source_says_where_reports_go() {
    let mut r = session();
    r.handle_rtp(Timestamp::ZERO, None, &rtp(0, 0, 7)).unwrap();
    assert!(
        !r.handle_rtcp(Timestamp::ZERO, &[0x80, 200, 0, 1]),
        "garbage"
    );
    assert!(
        !r.handle_rtcp(Timestamp::ZERO, &rtcp_sr(8, "stranger")),
        "unknown SSRC"
    );
    assert!(
        !r.handle_rtcp(Timestamp::ZERO, &rtcp_rr_bye(9, false)),
        "a receiver"
    );
    assert!(r.handle_rtcp(Timestamp::ZERO, &rtcp_sr(7, "sender")));
}

#[test]
fn other_receivers_are_members_until_they_leave_or_time_out() {
    let mut r = session();
    r.handle_rtp(Timestamp::ZERO, None, &rtp(0, 0, 7)).unwrap();
    for ssrc in 100..110 {
        r.handle_rtcp(Timestamp::ZERO, &rtcp_rr_bye(ssrc, false));
    }
    assert_eq!(r.other_members(), 10);
    r.handle_rtcp(Timestamp::ZERO, &rtcp_rr_bye(100, true));
    assert_eq!(r.other_members(), 9, "a BYE removes the member");
    // More members make the report interval longer (RFC 3550 §6.3): with 9 others at a
    // 5 Mbit/s session it is still the minimum, so check only that they expire, after five
    // intervals without a word.
    let mut buf = [0u8; 1500];
    let mut t = Timestamp::ZERO;
    for _ in 0..20 {
        t = r.poll_timeout().unwrap().0;
        r.poll_transmit(t, &mut buf).unwrap();
    }
    assert!(t > Timestamp::from_secs(5));
    assert_eq!(r.other_members(), 0);
}

#[test]
fn a_source_that_left_or_fell_silent_gives_its_place_to_a_new_one() {
    let mut r = ReceiverSession::new(ReceiverConfig {
        max_sources: 2,
        source_timeout: Duration::from_secs(10),
        ..ReceiverConfig::default()
    });
    assert!(!r.every_source_said_bye(), "no source yet");
    r.handle_rtp(Timestamp::ZERO, None, &rtp(0, 0, 1)).unwrap();
    r.handle_rtp(Timestamp::ZERO, None, &rtp(0, 0, 2)).unwrap();
    // Full, and nobody has left: the third is refused.
    assert_eq!(
        r.handle_rtp(Timestamp::from_secs(1), None, &rtp(0, 0, 3)),
        Err(Dropped::TooManySources(Ssrc(3)))
    );
    // Source 1 says BYE: 3 takes its place.
    r.handle_rtcp(Timestamp::from_secs(2), &{
        let mut buf = [0u8; 1500];
        let head = ReportHead::Receiver {
            ssrc: Ssrc(1),
            blocks: &[],
        };
        let n = metronome_wire::rtcp::write_compound(&mut buf, head, "s1", Some("bye")).unwrap();
        buf[..n].to_vec()
    });
    assert!(!r.every_source_said_bye(), "source 2 has not");
    r.handle_rtp(Timestamp::from_secs(3), None, &rtp(0, 0, 3))
        .unwrap();
    // Source 2 has been silent for 10 s: 4 takes its place; 3 is now the main source.
    r.handle_rtp(Timestamp::from_secs(10), None, &rtp(1, 90, 3))
        .unwrap();
    r.handle_rtp(Timestamp::from_secs(11), None, &rtp(0, 0, 4))
        .unwrap();
    let mut ssrcs: Vec<Ssrc> = r.sources().iter().map(|s| s.ssrc).collect();
    ssrcs.sort();
    assert_eq!(ssrcs, vec![Ssrc(3), Ssrc(4)]);
    assert_eq!(r.counters().sources_evicted, 2);
    assert_eq!(
        r.main_source().unwrap().ssrc,
        Ssrc(4),
        "the most recently heard"
    );
}

/// An RTSP session's one sender says BYE: the stream is over (`recv rtsp://` ends then).
#[test]
fn the_only_sources_bye_ends_the_stream() {
    let mut r = session();
    r.handle_rtp(Timestamp::ZERO, None, &rtp(0, 0, 7)).unwrap();
    assert!(!r.every_source_said_bye());
    let mut buf = [0u8; 1500];
    let head = ReportHead::Receiver {
        ssrc: Ssrc(7),
        blocks: &[],
    };
    let n = metronome_wire::rtcp::write_compound(&mut buf, head, "s7", Some("end")).unwrap();
    r.handle_rtcp(Timestamp::from_secs(1), &buf[..n]);
    assert!(r.every_source_said_bye());
}

#[test]
fn a_receiver_that_leaves_says_goodbye_once_and_then_nothing() {
    let mut r = session();
    r.handle_rtp(Timestamp::from_millis(0), None, &rtp(0, 0, 77))
        .unwrap();
    assert!(r.poll_timeout().is_some());
    let mut buf = [0u8; 1500];
    let n = r.leave(Timestamp::from_millis(40), &mut buf).unwrap();
    let (mut blocks, mut byes) = (0, Vec::new());
    metronome_wire::rtcp::parse_compound(&buf[..n], |i| match i {
        RtcpItem::ReportBlock { block, .. } => blocks += usize::from(block.ssrc == Ssrc(77)),
        RtcpItem::Bye { ssrc } => byes.push(ssrc),
        _ => {}
    })
    .unwrap();
    assert_eq!(blocks, 1, "its last report on what it got");
    assert_eq!(byes, [r.config().ssrc]);
    assert!(r.has_left());
    assert_eq!(r.poll_timeout(), None);
    assert_eq!(r.poll_transmit(Timestamp::from_secs(10), &mut buf), None);
    assert_eq!(r.leave(Timestamp::from_secs(10), &mut buf), None);
    // A packet still on its way changes nothing.
    let _ = r.handle_rtp(Timestamp::from_secs(11), None, &rtp(1, 3000, 77));
    assert_eq!(r.poll_transmit(Timestamp::from_secs(20), &mut buf), None);
}
