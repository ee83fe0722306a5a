//! A source's RFC 3550 statistics: sequence numbers, loss, jitter, jumps, bad input.

use super::*;

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
