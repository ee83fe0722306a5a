use super::*;
use metronome_wire::rtp::{write_packet, RtpHeader};
use proptest::prelude::*;

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
        payload_type: 33,
        sequence: seq,
        timestamp: ts,
        ssrc,
        marker: false,
    };
    let n = write_packet(&mut buf, &hdr, false, &ts_payload()).unwrap();
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
    assert!((ia.max_us - 11_000.0).abs() < 11.0, "{ia:?}");
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
        Some(ReceiverEvent::NewSource { ssrc: 1, .. })
    ));
    assert!(matches!(
        r.poll_event(),
        Some(ReceiverEvent::SequenceJump { to_seq: 20_001, .. })
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
        Err(Dropped::WrongPayloadType(96))
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
        ssrc: 77,
        ntp: 0xb705_2000u64 << 16,
        rtp_timestamp: 0,
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
    assert_eq!(b.ssrc, 77);
    assert_eq!(b.lsr, 0xb705_2000);
    // DLSR = 4.9 s in 1/65536 s.
    assert_eq!(b.dlsr, (4.9f64 * 65_536.0) as u32);
    assert!(r.poll_timeout().unwrap().0 > Timestamp::from_secs(5));
}

proptest! {
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
