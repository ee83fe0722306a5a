//! Asking for lost packets and taking their repairs: NACK and RTX, FEC, and in a group.

use super::*;

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
