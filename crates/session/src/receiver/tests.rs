use super::*;
use metronome_time::RtpTime;
use metronome_wire::rtcp::RtcpItem;
use metronome_wire::rtp::{write_packet, RtpHeader, SendTimeExt};
use proptest::prelude::*;
use std::time::Duration;

fn ts_payload() -> [u8; 1316] {
    let mut p = [0u8; 1316];
    for c in p.chunks_exact_mut(188) {
        c[0] = 0x47;
    }
    p
}

fn rtp(seq: u16, ts: u32, ssrc: u32) -> Vec<u8> {
    let mut buf = vec![0u8; 1500];
    let hdr = RtpHeader {
        payload_type: PayloadType(33),
        sequence: SeqNo(seq),
        timestamp: RtpTime(ts),
        ssrc: Ssrc(ssrc),
        marker: false,
    };
    let n = write_packet(&mut buf, &hdr, SendTimeExt::None, &ts_payload()).unwrap();
    buf.truncate(n);
    buf
}

fn session() -> ReceiverSession {
    ReceiverSession::new(ReceiverConfig::default())
}

#[test]
fn jitter_matches_rfc3550_worked_by_hand() {
    // Packets every 10 ms (900 ticks at 90 kHz); the third arrives 1 ms late.
    // Transit: 0, 0, 90, 0 ticks; |D|: 0, 90, 90.
    // J = 0 → 0 + (0 − 0)/16 = 0 → 0 + (90 − 0)/16 = 5.625 → 5.625 + (90 − 5.625)/16 = 10.8984375.
    let mut r = session();
    let arrivals_ms = [0u64, 10, 21, 30];
    let mut last = None;
    for (i, ms) in arrivals_ms.iter().enumerate() {
        let rec = r
            .handle_rtp(
                Timestamp::from_millis(*ms),
                None,
                &rtp(i as u16, 900 * i as u32, 7),
            )
            .unwrap();
        last = Some(rec);
    }
    let rec = last.unwrap();
    assert!(
        (rec.jitter_ticks - 10.898_437_5).abs() < 1e-9,
        "{}",
        rec.jitter_ticks
    );
    let src = r.main_source().unwrap();
    assert_eq!(src.received(), 4);
    assert_eq!(src.lost(), 0);
    // Inter-arrival: 10, 11, 9 ms.
    let ia = src.interarrival.summary();
    assert_eq!(ia.count, 3);
    assert!(
        (ia.max_us.as_micros_f64() - 11_000.0).abs() < 11.0,
        "{ia:?}"
    );
}

#[test]
fn sequence_wrap_loss_duplicates_and_reordering() {
    let mut r = session();
    let t = |i: u64| Timestamp::from_millis(i);
    // 65533, 65534, (65535 lost), 0, 0 again (duplicate), 2, 1 (late), 3.
    for (i, seq) in [65_533u16, 65_534, 0, 0, 2, 1, 3].iter().enumerate() {
        let _ = r.handle_rtp(t(i as u64), None, &rtp(*seq, 90 * i as u32, 9));
    }
    let s = r.main_source().unwrap();
    assert_eq!(s.expected(), 7); // 65533 ..= 3 across the wrap
    assert_eq!(s.received(), 6);
    assert_eq!(s.lost(), 1);
    assert_eq!(s.duplicates, 1);
    assert_eq!(s.reordered, 1);
    assert_eq!(s.extended_max(), 65_536 + 3);
    let block = r.sources[0].report_block(t(10));
    assert_eq!(block.cumulative_lost, 1);
    assert_eq!(block.extended_highest_seq, 65_536 + 3);
    // 1 lost of 7 expected: 256 / 7 = 36.
    assert_eq!(block.fraction_lost, 36);
}

#[test]
fn large_jump_needs_confirmation_then_resyncs() {
    let mut r = session();
    for seq in 0..10u16 {
        r.handle_rtp(Timestamp::from_millis(seq as u64), None, &rtp(seq, 0, 1))
            .unwrap();
    }
    // A jump of 20 000: the first packet is suspect, the second confirms it.
    assert_eq!(
        r.handle_rtp(Timestamp::from_millis(11), None, &rtp(20_000, 0, 1)),
        Err(Dropped::JumpSuspect)
    );
    let rec = r
        .handle_rtp(Timestamp::from_millis(12), None, &rtp(20_001, 0, 1))
        .unwrap();
    assert_eq!(rec.verdict, SeqVerdict::Resync);
    r.handle_rtp(Timestamp::from_millis(13), None, &rtp(20_002, 0, 1))
        .unwrap();
    let s = r.main_source().unwrap();
    assert_eq!(s.seq_jumps, 1);
    assert_eq!(s.received(), 12);
    assert_eq!(s.lost(), 0, "a confirmed restart is not loss");
    assert!(matches!(
        r.poll_event(),
        Some(ReceiverEvent::NewSource { ssrc: Ssrc(1), .. })
    ));
    assert!(matches!(
        r.poll_event(),
        Some(ReceiverEvent::SequenceJump {
            to_seq: SeqNo(20_001),
            ..
        })
    ));
}

#[test]
fn timestamp_jump_is_counted_not_taken_as_jitter() {
    let mut r = session();
    r.handle_rtp(Timestamp::from_millis(0), None, &rtp(0, 0, 1))
        .unwrap();
    r.handle_rtp(Timestamp::from_millis(10), None, &rtp(1, 900, 1))
        .unwrap();
    // The sender's clock jumps by an hour.
    let rec = r
        .handle_rtp(
            Timestamp::from_millis(20),
            None,
            &rtp(2, 900 * 2 + 324_000_000, 1),
        )
        .unwrap();
    assert_eq!(rec.jitter_ticks, 0.0);
    assert_eq!(r.main_source().unwrap().ts_jumps, 1);
}

#[test]
fn bad_input_is_counted_by_kind() {
    let mut r = session();
    assert_eq!(
        r.handle_rtp(Timestamp::ZERO, None, &[]),
        Err(Dropped::NotRtp)
    );
    assert_eq!(
        r.handle_rtp(Timestamp::ZERO, None, &[0x80, 33, 0]),
        Err(Dropped::NotRtp)
    );
    assert_eq!(
        r.handle_rtp(Timestamp::ZERO, None, &[0u8; 40]),
        Err(Dropped::NotRtp)
    );
    // Payload type 96 on an MP2T receiver.
    let mut p = rtp(1, 0, 1);
    p[1] = 96;
    assert_eq!(
        r.handle_rtp(Timestamp::ZERO, None, &p),
        Err(Dropped::WrongPayloadType(PayloadType(96)))
    );
    // Truncated TS payload, and a payload that lost sync.
    let p = rtp(1, 0, 1);
    assert!(matches!(
        r.handle_rtp(Timestamp::ZERO, None, &p[..100]),
        Err(Dropped::BadPayload(_))
    ));
    let mut p = rtp(1, 0, 1);
    p[12 + 188] = 0;
    assert!(matches!(
        r.handle_rtp(Timestamp::ZERO, None, &p),
        Err(Dropped::BadPayload(_))
    ));
    // Too many SSRCs.
    for ssrc in 0..20 {
        let _ = r.handle_rtp(Timestamp::ZERO, None, &rtp(1, 0, ssrc));
    }
    let c = *r.counters();
    assert_eq!(c.not_rtp, 3);
    assert_eq!(c.wrong_payload_type, 1);
    assert_eq!(c.bad_payload, 2);
    assert_eq!(c.too_many_sources, 12);
    assert_eq!(c.ssrc_changes, 7);
    // Garbage RTCP is counted as malformed.
    r.handle_rtcp(Timestamp::ZERO, &[0x80, 200, 0, 50, 1, 2]);
    assert_eq!(r.counters().rtcp_malformed, 1);
}

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

fn rtcp_sr(ssrc: u32, cname: &str) -> Vec<u8> {
    let mut buf = [0u8; 1500];
    let info = metronome_wire::rtcp::SenderInfo {
        ssrc: Ssrc(ssrc),
        ntp: 0x1234_5678u64 << 16,
        rtp_timestamp: RtpTime(0),
        packet_count: 1,
        octet_count: 1316,
    };
    let n =
        metronome_wire::rtcp::write_compound(&mut buf, ReportHead::Sender(info, &[]), cname, None)
            .unwrap();
    buf[..n].to_vec()
}

fn rtcp_rr_bye(ssrc: u32, bye: bool) -> Vec<u8> {
    let mut buf = [0u8; 1500];
    let head = ReportHead::Receiver {
        ssrc: Ssrc(ssrc),
        blocks: &[],
    };
    let n = metronome_wire::rtcp::write_compound(&mut buf, head, "other", bye.then_some("bye"))
        .unwrap();
    buf[..n].to_vec()
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
fn a_jump_suspect_is_counted_once() {
    let mut r = session();
    r.handle_rtp(Timestamp::ZERO, None, &rtp(0, 0, 1)).unwrap();
    assert_eq!(
        r.handle_rtp(Timestamp::ZERO, None, &rtp(30_000, 0, 1)),
        Err(Dropped::JumpSuspect)
    );
    let c = r.counters();
    assert_eq!((c.datagrams, c.rtp_packets, c.jump_suspects), (2, 1, 1));
}

proptest! {
    /// Well-formed RTP with arbitrary header fields and sizes, interleaved with well-formed RTCP
    /// from arbitrary SSRCs: every path of the receiver runs, nothing panics, every datagram is
    /// accounted for exactly once, and the source table stays within its bound.
    #[test]
    fn arbitrary_valid_packets_exercise_every_path(
        packets in proptest::collection::vec(
            (any::<u16>(), any::<u32>(), 0u32..12, 0usize..1400, any::<bool>(), 0u64..5_000_000),
            1..300,
        ),
    ) {
        let mut r = ReceiverSession::new(ReceiverConfig {
            payload: PayloadKind::Any,
            max_sources: 4,
            ..ReceiverConfig::default()
        });
        let mut now = Timestamp::ZERO;
        let mut buf = vec![0u8; 1500];
        let payload = vec![0x47u8; 1400];
        for (seq, ts, ssrc, len, rtcp, gap_us) in packets {
            now += Duration::from_micros(gap_us);
            if rtcp {
                let data = if seq % 2 == 0 { rtcp_sr(ssrc, "s") } else { rtcp_rr_bye(ssrc, seq % 3 == 0) };
                r.handle_rtcp(now, &data);
            } else {
                let hdr = RtpHeader { payload_type: PayloadType(96), sequence: SeqNo(seq), timestamp: RtpTime(ts), ssrc: Ssrc(ssrc), marker: false };
                let n = write_packet(&mut buf, &hdr, SendTimeExt::ntp64_if(seq % 5 == 0), &payload[..len]).unwrap();
                let _ = r.handle_rtp(now, None, &buf[..n]);
            }
            let _ = r.poll_transmit(now, &mut buf);
        }
        let c = r.counters();
        prop_assert_eq!(
            c.datagrams,
            c.rtp_packets + c.not_rtp + c.wrong_payload_type + c.bad_payload + c.too_many_sources
                + c.jump_suspects
        );
        prop_assert!(r.sources().len() <= 4);
        for s in r.sources() {
            prop_assert!(s.received() <= s.packets);
            prop_assert!(s.lost() <= s.expected());
        }
    }

    /// Any bytes as RTP or RTCP: never a panic, and every datagram is accounted for.
    #[test]
    fn arbitrary_datagrams_never_panic(data in proptest::collection::vec(any::<u8>(), 0..1600)) {
        let mut r = session();
        let _ = r.handle_rtp(Timestamp::ZERO, None, &data);
        r.handle_rtcp(Timestamp::ZERO, &data);
        let c = r.counters();
        prop_assert_eq!(c.datagrams, 1);
        prop_assert_eq!(
            c.rtp_packets + c.not_rtp + c.wrong_payload_type + c.bad_payload + c.too_many_sources
                + c.jump_suspects,
            1
        );
    }

    /// Whatever a network does to a sequence (drop, duplicate, reorder within the RFC 3550
    /// misorder window), the receiver's counts agree with what was actually delivered.
    #[test]
    fn statistics_agree_with_what_was_delivered(
        start in any::<u16>(),
        n in 1usize..400,
        drops in proptest::collection::vec(any::<bool>(), 400),
        dups in proptest::collection::vec(0u8..10, 400),
        swaps in proptest::collection::vec(0usize..400, 0..40),
    ) {
        // Offsets from the first packet, which always arrives first.
        let mut delivered: Vec<usize> = (0..n).filter(|&i| i == 0 || !drops[i]).collect();
        for &s in &swaps {
            let i = 1 + s % delivered.len().max(1);
            if i + 1 < delivered.len() {
                delivered.swap(i, i + 1);
            }
        }
        let mut arrivals = Vec::new();
        for &i in &delivered {
            arrivals.push(i);
            if dups[i] == 0 {
                arrivals.push(i);
            }
        }
        let mut r = session();
        for (k, &i) in arrivals.iter().enumerate() {
            let seq = start.wrapping_add(i as u16);
            r.handle_rtp(Timestamp::from_micros(k as u64), None, &rtp(seq, i as u32 * 90, 5)).unwrap();
        }
        let s = r.main_source().unwrap();
        let unique: std::collections::BTreeSet<usize> = delivered.iter().copied().collect();
        let highest = *unique.iter().max().unwrap();
        prop_assert_eq!(s.received(), unique.len() as u64);
        prop_assert_eq!(s.expected(), highest as u64 + 1);
        prop_assert_eq!(s.lost(), highest as u64 + 1 - unique.len() as u64);
        prop_assert_eq!(s.duplicates, (arrivals.len() - delivered.len()) as u64);
        prop_assert_eq!(s.packets, arrivals.len() as u64);
    }
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

/// A receiver that asks for repairs (retransmissions with payload type 97), playing out
/// 200 ms after the fastest packet, assuming a 20 ms round trip.
fn repairing() -> ReceiverSession {
    let mut repair = ReceiverRepair::new(PayloadType(97), Duration::from_millis(200));
    repair.initial_rtt = Duration::from_millis(20);
    ReceiverSession::new(ReceiverConfig {
        repair: Some(repair),
        ..ReceiverConfig::default()
    })
}

/// [`repairing`], with packet 10 of source 7 (timestamp 0) at 0 ms.
fn started() -> ReceiverSession {
    let mut r = repairing();
    r.handle_rtp(Timestamp::ZERO, None, &rtp(10, 0, 7)).unwrap();
    r
}

/// The retransmission of `original` in stream 0x77 with sequence number `seq`.
fn rtx_of(original: &[u8], seq: u16) -> Vec<u8> {
    let ids = metronome_wire::rtx::StreamIds {
        ssrc: Ssrc(0x77),
        payload_type: PayloadType(97),
    };
    let mut out = vec![0u8; original.len() + 2];
    let n = metronome_wire::rtx::wrap(original, ids, SeqNo(seq), &mut out).unwrap();
    out.truncate(n);
    out
}

/// The sequence numbers of the NACKs in an RTCP compound, and the SSRC they are about.
fn nacked(compound: &[u8]) -> Vec<(Ssrc, u16)> {
    let mut out = Vec::new();
    rtcp::parse_compound(compound, |item| {
        if let RtcpItem::Nack(n) = item {
            out.extend(n.sequences().map(|s| (n.media_ssrc, s.get())));
        }
    })
    .unwrap();
    out
}

#[test]
fn a_gap_is_asked_for_at_once_and_its_retransmission_is_the_packet_it_repairs() {
    let (mut r, at) = (started(), Timestamp::from_millis);
    r.handle_rtp(at(10), None, &rtp(13, 1800, 7)).unwrap();
    // 11 and 12 are missing: a NACK is due now, out of the regular schedule.
    let (due, why) = r.poll_timeout().unwrap();
    assert_eq!((due, why), (at(10), ReceiverTimer::Nack));
    let mut buf = [0u8; 1500];
    let n = r.poll_transmit(at(10), &mut buf).unwrap();
    assert_eq!(nacked(&buf[..n]), vec![(Ssrc(7), 11), (Ssrc(7), 12)]);
    // The repair of 12 comes back 22 ms later: it is packet 12 of source 7, counted in none
    // of the source's statistics (the network lost it).
    let original = rtp(12, 900, 7);
    let rec = r.handle_rtp(at(32), None, &rtx_of(&original, 500)).unwrap();
    assert!(rec.repaired);
    assert_eq!(
        (rec.ssrc, rec.seq.get(), rec.ext_seq, rec.rtp_ts.get()),
        (Ssrc(7), 12, 12, 900)
    );
    assert_eq!(r.repaired_packet(), &original[..]);
    assert_eq!(&r.repaired_packet()[rec.payload.clone()], &ts_payload()[..]);
    let src = r.main_source().unwrap();
    assert_eq!((src.received(), src.lost()), (2, 2));
    assert_eq!(r.sources().len(), 1, "a retransmission is not a source");
    // Twice, or once the original came after all: nothing more.
    assert_eq!(
        r.handle_rtp(at(33), None, &rtx_of(&original, 501)),
        Err(Dropped::Retransmission)
    );
    let stats = r.repair_stats().unwrap();
    assert_eq!(
        (stats.rtx_packets, stats.rtx_useful, stats.rtx_redundant),
        (2, 1, 1)
    );
    assert_eq!(stats.nack.recovered, 1);
    assert_eq!(stats.rtt_us.as_micros(), 22_000, "ask to repair");
    // 11 is asked again 1.5 round trips (of the 22 ms measured) after the first ask.
    assert_eq!(r.poll_transmit(at(30), &mut buf), None);
    let n = r.poll_transmit(at(43), &mut buf).unwrap();
    assert_eq!(nacked(&buf[..n]), vec![(Ssrc(7), 11)]);
}

#[test]
fn retransmissions_that_repair_nothing_are_counted_and_dropped() {
    let mut r = repairing();
    let at = Timestamp::from_millis;
    // Before the stream's first packet, there is nothing to repair.
    let early = rtx_of(&rtp(1, 0, 7), 1);
    assert_eq!(
        r.handle_rtp(at(0), None, &early),
        Err(Dropped::Retransmission)
    );
    // Too short for its original sequence number; a repair of a packet ahead of the highest.
    r.handle_rtp(at(1), None, &rtp(5, 0, 7)).unwrap();
    let mut short = rtp(0, 0, 0x77);
    short.truncate(12);
    short[1] = 97;
    assert_eq!(
        r.handle_rtp(at(2), None, &short),
        Err(Dropped::Retransmission)
    );
    let ahead = rtx_of(&rtp(9, 0, 7), 2);
    assert_eq!(
        r.handle_rtp(at(3), None, &ahead),
        Err(Dropped::Retransmission)
    );
    let s = r.repair_stats().unwrap();
    assert_eq!((s.rtx_packets, s.rtx_malformed, s.rtx_redundant), (3, 2, 1));
    assert_eq!(r.main_source().unwrap().received(), 1);
}

#[test]
fn with_the_sdps_pairing_only_the_paired_ssrcs_retransmissions_repair() {
    let mut repair = ReceiverRepair::new(PayloadType(97), Duration::from_millis(200));
    repair.rtx_ssrc = Some(Ssrc(0x77));
    let mut r = ReceiverSession::new(ReceiverConfig {
        repair: Some(repair),
        ..ReceiverConfig::default()
    });
    let at = Timestamp::from_millis;
    r.handle_rtp(at(0), None, &rtp(10, 0, 7)).unwrap();
    r.handle_rtp(at(10), None, &rtp(13, 2700, 7)).unwrap();
    // A retransmission of 11 from an SSRC the SDP did not pair with the media: dropped.
    let mut forged = rtx_of(&rtp(11, 900, 7), 1);
    forged[8..12].copy_from_slice(&0x66u32.to_be_bytes());
    assert_eq!(
        r.handle_rtp(at(20), None, &forged),
        Err(Dropped::Retransmission)
    );
    // The paired stream's repairs it.
    let rec = r
        .handle_rtp(at(21), None, &rtx_of(&rtp(11, 900, 7), 2))
        .unwrap();
    assert!(rec.repaired && rec.seq == SeqNo(11));
    let s = r.repair_stats().unwrap();
    assert_eq!((s.rtx_packets, s.rtx_malformed, s.rtx_useful), (2, 1, 1));
}

#[test]
fn another_receivers_nack_on_the_group_is_not_asked_again() {
    let (mut r, at) = (started(), Timestamp::from_millis);
    // A peer asked for 11 already; then this receiver sees it missing too.
    let mut peer = [0u8; 64];
    let n = rtcp::write_nack(&mut peer, Ssrc(0x99), Ssrc(7), &[SeqNo(11)]);
    assert!(!r.handle_rtcp(at(1), &peer[..n]));
    r.handle_rtp(at(2), None, &rtp(12, 1800, 7)).unwrap();
    let mut buf = [0u8; 1500];
    assert_eq!(r.poll_transmit(at(2), &mut buf), None);
    assert_eq!(r.repair_stats().unwrap().nack.suppressed, 1);
    // It asks itself once the peer's repair is a retry late (1.5 round trips of 20 ms).
    let n = r.poll_transmit(at(31), &mut buf).unwrap();
    assert_eq!(nacked(&buf[..n]), vec![(Ssrc(7), 11)]);
}

#[test]
fn the_senders_tllei_on_the_group_is_not_asked_again() {
    let (mut r, at) = (started(), Timestamp::from_millis);
    // The sender says it is repairing 11 (RFC 6642); then this receiver sees it missing.
    let mut tllei = [0u8; 64];
    let n = rtcp::write_tllei(&mut tllei, Ssrc(7), Ssrc(7), &[SeqNo(11)]);
    assert!(!r.handle_rtcp(at(1), &tllei[..n]));
    r.handle_rtp(at(2), None, &rtp(12, 1800, 7)).unwrap();
    let mut buf = [0u8; 1500];
    assert_eq!(r.poll_transmit(at(2), &mut buf), None);
    assert_eq!(r.repair_stats().unwrap().nack.suppressed, 1);
    // A TLLEI about another stream is not for this one.
    let n = rtcp::write_tllei(&mut tllei, Ssrc(8), Ssrc(8), &[SeqNo(13)]);
    r.handle_rtcp(at(3), &tllei[..n]);
    r.handle_rtp(at(4), None, &rtp(14, 2700, 7)).unwrap();
    let n = r.poll_transmit(at(4), &mut buf).unwrap();
    assert_eq!(nacked(&buf[..n]), vec![(Ssrc(7), 13)]);
}

#[test]
fn an_original_after_its_repair_counts_as_received_and_is_not_handed_over_twice() {
    let (mut r, at) = (started(), Timestamp::from_millis);
    r.handle_rtp(at(10), None, &rtp(13, 1800, 7)).unwrap();
    let mut buf = [0u8; 1500];
    r.poll_transmit(at(10), &mut buf).unwrap();
    // 11 comes back as a retransmission, then late as itself; 12 comes late as itself: an
    // original gives no round-trip sample (it was not asked for, it was slow).
    assert!(
        r.handle_rtp(at(32), None, &rtx_of(&rtp(11, 900, 7), 1))
            .unwrap()
            .repaired
    );
    let late = r.handle_rtp(at(33), None, &rtp(11, 900, 7)).unwrap();
    assert_eq!(late.verdict, SeqVerdict::Duplicate);
    let slow = r.handle_rtp(at(34), None, &rtp(12, 900, 7)).unwrap();
    assert_eq!(slow.verdict, SeqVerdict::Reordered);
    let src = r.main_source().unwrap();
    assert_eq!(
        (src.received(), src.lost()),
        (4, 0),
        "the network delivered all four"
    );
    assert_eq!(r.repair_stats().unwrap().rtt_us.as_micros(), 22_000);
}

#[test]
fn a_repair_after_the_play_out_time_is_late_and_one_asked_twice_gives_no_round_trip() {
    let (mut r, at) = (started(), Timestamp::from_millis);
    r.handle_rtp(at(10), None, &rtp(12, 1800, 7)).unwrap();
    let mut buf = [0u8; 1500];
    r.poll_transmit(at(10), &mut buf).unwrap();
    // Asked again 30 ms later (1.5 round trips of the assumed 20 ms), answered after that:
    // which ask it answers is unknown, so no sample (Karn's rule).
    let n = r.poll_transmit(at(40), &mut buf).unwrap();
    assert_eq!(nacked(&buf[..n]), vec![(Ssrc(7), 11)]);
    r.handle_rtp(at(45), None, &rtx_of(&rtp(11, 900, 7), 1))
        .unwrap();
    assert_eq!(
        r.repair_stats().unwrap().rtt_us.as_micros(),
        20_000,
        "still the assumed one"
    );
    // A repair that comes after the packet's play-out time (200 ms after the fastest).
    r.handle_rtp(at(50), None, &rtp(14, 3600, 7)).unwrap();
    r.poll_transmit(at(50), &mut buf).unwrap();
    let rec = r
        .handle_rtp(at(400), None, &rtx_of(&rtp(13, 2700, 7), 2))
        .unwrap();
    assert!(
        rec.repaired,
        "the application may still want it (a file, say)"
    );
    let s = r.repair_stats().unwrap();
    assert_eq!((s.rtx_useful, s.rtx_late), (1, 1), "{s:?}");
}

#[test]
fn a_repair_is_judged_by_its_own_play_out_time_not_its_gaps() {
    let (mut r, at) = (started(), Timestamp::from_millis);
    r.handle_rtp(at(20), None, &rtp(12, 1800, 7)).unwrap();
    let mut buf = [0u8; 1500];
    r.poll_transmit(at(20), &mut buf).unwrap();
    // 11 (10 ms of media after 10) plays out at 210 ms: its gap's time, 10's, is 200 ms.
    r.handle_rtp(at(205), None, &rtx_of(&rtp(11, 900, 7), 1))
        .unwrap();
    let s = r.repair_stats().unwrap();
    assert_eq!((s.rtx_useful, s.rtx_late), (1, 0), "{s:?}");
    // 13, given up long ago (no repair could come in time), is answered after its time.
    r.handle_rtp(at(215), None, &rtp(14, 3600, 7)).unwrap();
    r.handle_rtp(at(400), None, &rtx_of(&rtp(13, 2700, 7), 2))
        .unwrap();
    let s = r.repair_stats().unwrap();
    assert_eq!((s.rtx_useful, s.rtx_late), (1, 1), "{s:?}");
}

#[test]
fn a_nack_alone_goes_out_without_report_blocks() {
    let (mut r, at) = (started(), Timestamp::from_millis);
    r.handle_rtp(at(10), None, &rtp(12, 1800, 7)).unwrap();
    let mut buf = [0u8; 1500];
    let n = r.poll_transmit(at(10), &mut buf).unwrap();
    let mut blocks = 0;
    rtcp::parse_compound(&buf[..n], |item| {
        blocks += matches!(item, RtcpItem::ReportBlock { .. }) as u32;
    })
    .unwrap();
    assert_eq!((blocks, nacked(&buf[..n])), (0, vec![(Ssrc(7), 11)]));
}

/// A receiver that rebuilds from FEC alone, playing out 200 ms after the fastest packet.
fn fec_receiver() -> ReceiverSession {
    ReceiverSession::new(ReceiverConfig {
        repair: Some(ReceiverRepair::fec(Duration::from_millis(200))),
        ..ReceiverConfig::default()
    })
}

#[test]
fn fec_rebuilds_a_row_s_lost_packets_and_asks_for_nothing() {
    use crate::repair::{FecConfig, FecEncoder};
    use metronome_config::repair::FecShape;
    let shape = FecShape {
        columns: 4,
        rows: 4,
    };
    let mut enc = FecEncoder::new(FecConfig::new(shape), SeqNo(0));
    let mut r = fec_receiver();
    let at = Timestamp::from_millis;
    let mut buf = [0u8; 2000];
    let mut rebuilt = Vec::new();
    // Packets 10..26, 3 ms apart: 12 (inside the first row) and 17 (the last of the second
    // row: ahead of every packet received when its row's FEC comes) are lost.
    for seq in 10..26u16 {
        let p = rtp(seq, u32::from(seq) * 270, 7);
        let now = at(u64::from(seq) * 3);
        enc.push(&p);
        if seq != 12 && seq != 17 {
            r.handle_rtp(now, None, &p).unwrap();
        }
        while let Some((_, n)) = enc.poll(&mut buf) {
            r.handle_fec(&buf[..n]);
        }
        while let Some(rec) = r.poll_rebuilt(now) {
            let rec = rec.unwrap();
            assert!(rec.repaired);
            assert_eq!(
                r.repaired_packet(),
                &rtp(rec.seq.get(), u32::from(rec.seq.get()) * 270, 7)[..]
            );
            rebuilt.push((rec.seq.get(), now));
        }
    }
    // 12 when its row's FEC came (after 13); 17 once 18, a later packet, had come.
    assert_eq!(rebuilt, vec![(12, at(13 * 3)), (17, at(18 * 3))]);
    let src = r.main_source().unwrap();
    assert_eq!(src.lost(), 2, "receiver reports keep what the network lost");
    let s = r.repair_stats().unwrap();
    assert_eq!((s.fec_useful, s.fec_late, s.fec_redundant), (2, 0, 0));
    assert_eq!(s.fec.unwrap().recovered, 2);
    // Nothing is asked for: no NACK is ever due.
    assert!(r
        .poll_timeout()
        .is_none_or(|(_, why)| why != ReceiverTimer::Nack));
    assert_eq!(s.nack_packets, 0);
}

#[test]
fn fec_starts_afresh_when_the_stream_s_numbers_restart() {
    use crate::repair::{FecConfig, FecEncoder};
    use metronome_config::repair::FecShape;
    let shape = FecShape {
        columns: 4,
        rows: 4,
    };
    let mut r = fec_receiver();
    let at = Timestamp::from_millis;
    let mut buf = [0u8; 2000];
    for seq in 10..30u16 {
        r.handle_rtp(at(u64::from(seq)), None, &rtp(seq, u32::from(seq) * 270, 7))
            .unwrap();
    }
    // The sender restarts 40 000 numbers on (RFC 3550 A.1: two in a row confirm the jump,
    // the first is not taken), with an encoder of its own; 40 006 is lost.
    let mut enc = FecEncoder::new(FecConfig::new(shape), SeqNo(0));
    let mut rebuilt = Vec::new();
    for seq in 40_000..40_012u16 {
        let p = rtp(seq, u32::from(seq) * 270, 7);
        enc.push(&p);
        let now = at(u64::from(seq) - 39_900);
        if seq != 40_006 {
            let _ = r.handle_rtp(now, None, &p);
        }
        while let Some((_, n)) = enc.poll(&mut buf) {
            r.handle_fec(&buf[..n]);
        }
        // (40 000, the jump's first, not taken, is rebuilt too: from before the stream's
        // new start, it is of no use.)
        while let Some(rec) = r.poll_rebuilt(now) {
            rebuilt.extend(rec.ok().map(|rec| rec.seq.get()));
        }
    }
    assert_eq!(rebuilt, vec![40_006]);
}

/// A group member's RRTRs (RFC 3611) in its reports, and its round trip from the sender's
/// DLRR answer: `A - LRR - DLRR`. A DLRR that answers no RRTR of its own, a replay, or one
/// from another stream's SSRC changes nothing.
#[test]
fn a_group_member_takes_its_round_trip_from_the_senders_answer_to_its_rrtr() {
    use metronome_wire::rtcp::XrItem;
    let mut repair = ReceiverRepair::new(PayloadType(97), Duration::from_millis(200));
    repair.nack = crate::repair::NackConfig::group(45, 0);
    let mut r = ReceiverSession::new(ReceiverConfig {
        repair: Some(repair),
        ..ReceiverConfig::default()
    });
    let at = Timestamp::from_millis;
    r.handle_rtp(at(0), None, &rtp(10, 0, 7)).unwrap();
    let mut buf = [0u8; 1500];
    let (sent_at, ntp) = (0..100u64)
        .find_map(|k| {
            let n = r.poll_transmit(at(10 * k), &mut buf)?;
            let mut ntp = None;
            rtcp::parse_compound(&buf[..n], |item| {
                if let RtcpItem::Xr(XrItem::Rrtr { ntp: t, .. }) = item {
                    ntp = Some(t);
                }
            })
            .unwrap();
            Some((at(10 * k), ntp.expect("an RRTR in a group member's report")))
        })
        .expect("a report");
    let lrr = metronome_time::NtpTime(ntp).compact();
    let me = ReceiverConfig::default().ssrc;
    // The sender held it 10 ms (655 in 1/65 536 s); the answer comes 60 ms after the RRTR.
    let dlrr_from = |sender: u32, lrr: u32, dlrr: u32| {
        let mut b = [0u8; 64];
        let n = rtcp::write_dlrr(&mut b, Ssrc(sender), &[(me, lrr, dlrr)]).0;
        b[..n].to_vec()
    };
    let rtt = |r: &ReceiverSession| r.repair_stats().unwrap().rtt_us.as_millis_f64();
    r.handle_rtcp(sent_at + Duration::from_millis(60), &dlrr_from(8, lrr, 655));
    r.handle_rtcp(
        sent_at + Duration::from_millis(60),
        &dlrr_from(7, lrr ^ 1, 655),
    );
    assert_eq!(rtt(&r), 100.0, "before any answer: the assumed 100 ms");
    r.handle_rtcp(sent_at + Duration::from_millis(60), &dlrr_from(7, lrr, 655));
    assert!((49.0..51.0).contains(&rtt(&r)), "{} ms", rtt(&r));
    // Replayed with a small DLRR (a long round trip): not taken again.
    r.handle_rtcp(sent_at + Duration::from_secs(3000), &dlrr_from(7, lrr, 0));
    assert!((49.0..51.0).contains(&rtt(&r)), "{} ms", rtt(&r));
}
