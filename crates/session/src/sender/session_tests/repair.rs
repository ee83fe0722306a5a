//! Answers to NACKs (RFC 4585/4588) and the TLLEIs told to a group (RFC 6642).

use super::*;

/// A 5 Mbit/s session that repairs up to 10 % of its rate (retransmissions as SSRC 0x5e5,
/// payload type 97), having sent packets 0..200 (each 1 250 bytes, due 2 ms apart), viewers
/// playing out 300 ms after the fastest packet.
fn repairing_session() -> SenderSession {
    repairing_session_to(false)
}

/// [`repairing_session`], to a group if `group` (losses being repaired told to it).
fn repairing_session_to(group: bool) -> SenderSession {
    let mut s = session(LatePolicy::CATCH_UP).with_repair(repair_config(group));
    keep_packets(&mut s, 0..200);
    s
}

/// Repairs up to 10 % of the rate as SSRC 0x5e5, payload type 97, for viewers playing out
/// 300 ms after the fastest packet.
fn repair_config(group: bool) -> SenderRepair {
    use crate::repair::RepairConfig;
    let rtx = metronome_wire::rtx::StreamIds {
        ssrc: Ssrc(0x5e5),
        payload_type: PayloadType(97),
    };
    SenderRepair {
        repairer: RepairConfig::new(rtx, SeqNo(0), 0.1),
        history_packets: 256,
        max_packet: 1500,
        playout_delay: Duration::from_millis(300),
        initial_rtt: Duration::from_millis(20),
        tell_group: group,
        everywhere: group,
    }
}

/// Packets `ks` of the stream (each 1 250 bytes, due 2 ms apart from packet 0) left.
fn keep_packets(s: &mut SenderSession, ks: std::ops::Range<u16>) {
    use metronome_wire::rtp::{write_packet, RtpHeader, SendTimeExt};
    let mut buf = [0u8; 1500];
    for k in ks {
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

#[test]
fn a_nack_is_answered_with_retransmissions_of_what_can_still_make_its_deadline() {
    let mut s = repairing_session();
    // At 400 ms, packets due before 100 ms are past their play-out time (300 ms later).
    rtcp_in(&mut s, ms(400), &nack_compound(0x77, 0xabc, 40, 30, 1));
    let mut buf = [0u8; 1500];
    let mut got = Vec::new();
    let mut take = |s: &mut SenderSession, got: &mut Vec<u16>| {
        while let Some(n) = s.poll_repair(ms(400), ms(400), &mut buf).map(|r| r.len) {
            let v = metronome_wire::rtp::RtpView::parse(&buf[..n]).unwrap();
            assert_eq!(
                (v.ssrc(), v.payload_type(), n),
                (Ssrc(0x5e5), PayloadType(97), 1252)
            );
            got.push(u16::from_be_bytes([v.payload()[0], v.payload()[1]]));
        }
    };
    // Eight leave at once (paid for ahead); the rest as the stream's packets pay for them,
    // one per ten at this stream's 10 % share.
    take(&mut s, &mut got);
    assert_eq!(got.len(), 8);
    keep_packets(&mut s, 200..209);
    take(&mut s, &mut got);
    assert_eq!(got.len(), 8);
    // The other twelve are made and wait, counted as waiting until they leave.
    let st = s.repair_stats().unwrap();
    assert_eq!((st.repairer.sent, st.packets, st.waiting), (20, 8, 12));
    for k in (209..329).step_by(10) {
        keep_packets(&mut s, k..k + 10);
        take(&mut s, &mut got);
    }
    assert_eq!(got, (50..70).collect::<Vec<u16>>());
    let st = s.repair_stats().unwrap();
    assert_eq!(st.waiting, 0);
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
    assert_eq!(
        s.poll_repair(ms(2000), ms(2000), &mut buf).map(|r| r.len),
        None
    );
    let st = s.repair_stats().unwrap();
    assert_eq!((st.repairer.sent, st.expired, st.packets), (20, 20, 0));
    // Judged when it would leave, not when it is taken: taken in time but to leave (a
    // spacing behind the packets before it) too late, it is dropped too.
    let mut s = repairing_session();
    rtcp_in(&mut s, ms(400), &nack_compound(0x77, 0xabc, 40, 30, 1));
    assert_eq!(
        s.poll_repair(ms(400), ms(2000), &mut buf).map(|r| r.len),
        None
    );
    let st = s.repair_stats().unwrap();
    assert_eq!((st.repairer.sent, st.expired, st.packets), (20, 20, 0));
}

/// A stream to several unicast destinations: a repair goes back only where its NACK came in,
/// each destination that asks gets its own, and one asking again within a round trip of its
/// repair gets none (it is on its way). To a group, one repair goes everywhere.
#[test]
fn a_repair_goes_only_to_the_destination_that_asked_for_it() {
    // Receiver `reporter`, behind destination `outlet`, asks for packet 60 at `t` ms.
    let ask = |s: &mut SenderSession, t, outlet, reporter| {
        rtcp_in_at(s, ms(t), outlet, &nack_compound(reporter, 0xabc, 60, 1, 1));
    };
    let mut buf = [0u8; 1500];
    let mut repairs = |s: &mut SenderSession, t| {
        std::iter::from_fn(|| s.poll_repair(ms(t), ms(t), &mut buf).map(|r| r.outlet))
            .collect::<Vec<_>>()
    };
    let mut s = repairing_session();
    ask(&mut s, 200, Outlet(2), 0x77);
    assert_eq!(repairs(&mut s, 200), [Some(Outlet(2))]);
    // The same packet, asked for from another destination, and from the first again.
    ask(&mut s, 215, Outlet(0), 0x78);
    ask(&mut s, 216, Outlet(2), 0x77);
    assert_eq!(repairs(&mut s, 216), [Some(Outlet(0))]);
    let st = s.repair_stats().unwrap().repairer;
    assert_eq!((st.asked, st.sent, st.duplicate), (3, 2, 1));
    // A round trip (the 20 ms assumed) after its repair, a destination still missing it gets
    // another, though another destination's came since.
    ask(&mut s, 221, Outlet(2), 0x77);
    assert_eq!(repairs(&mut s, 221), [Some(Outlet(2))]);
    // To a group: one repair, to every destination, and none again within its round trip.
    let mut s = repairing_session_to(true);
    ask(&mut s, 200, Outlet(1), 0x77);
    ask(&mut s, 201, Outlet(0), 0x78);
    assert_eq!(repairs(&mut s, 201), [None]);
}

#[test]
fn a_nack_storm_with_forged_ssrcs_costs_no_more_than_its_bounds() {
    let mut s = repairing_session();
    let mut buf = [0u8; 1500];
    let mut repair_bytes = 0;
    // 40 NACKs in a compound, of 1 000 numbers each (every packet, many times over), half
    // about streams that are not this one, from forged reporters; 100 compounds over 1 s.
    // The stream goes on meanwhile: 5 packets per 10 ms, each kept, a repair polled after it.
    for k in 0..100u64 {
        let now = ms(100 + 10 * k);
        rtcp_in(&mut s, now, &nack_compound(k as u32, 0xabc, 0, 1000, 20));
        rtcp_in(&mut s, now, &nack_compound(k as u32, 0xdead, 0, 1000, 20));
        for j in 0..5 {
            let seq = 200 + 5 * k as u16 + j;
            keep_packets(&mut s, seq..seq + 1);
            if let Some(n) = s.poll_repair(now, now, &mut buf).map(|r| r.len) {
                repair_bytes += n as u64;
            }
        }
    }
    let st = s.repair_stats().unwrap();
    // 16 NACKs read of each compound's 20; of each, 64 numbers answered, or fewer when 32
    // retransmissions asked by strangers (these forged reporters) already waited (the rest of
    // that NACK is not read).
    assert_eq!(st.nacks_unread, 200 * 4);
    assert_eq!(st.repairer.foreign_nacks, 100 * 16);
    assert_eq!(st.repairer.truncated_nacks + st.overflow, 100 * 16);
    assert!(st.repairer.asked <= 100 * 16 * 64);
    // What left is what the budget allows: a burst of 64 packets' worth and 10 % of 5 Mbit/s
    // over the second; and what the stream paid for: 8 ahead and one per 10 of its 500
    // packets. Every packet at most once a round trip.
    let budget = 64 * 1500 + 5_000_000 / 8 / 10;
    assert!(repair_bytes <= budget, "{repair_bytes} > {budget}");
    assert!(st.packets <= 8 + 50, "{}", st.packets);
    assert_eq!(repair_bytes, st.bytes);
    // The rest is refused cheaply: numbers no longer held (the history keeps 256), asked
    // again within a round trip, over budget or too late.
    let r = st.repairer;
    let refused = r.unknown + r.duplicate + r.over_budget + r.too_late;
    assert!(refused > 80_000, "{refused} refused of {st:?}");
}

/// [`nack_compound`]'s one NACK, from a receiver whose report echoes the session's sender
/// report, sent here 20 ms before `now` (the sender then knows its round trip: it is no
/// stranger).
fn reported_nack(
    s: &mut SenderSession,
    reporter: u32,
    now: Timestamp,
    first: u16,
    n: u16,
) -> Vec<u8> {
    let sr_at = now.checked_sub(Duration::from_millis(20)).unwrap();
    let mut sr = [0u8; 1500];
    assert!(
        s.poll_rtcp(sr_at, wall(sr_at), &mut sr).is_some(),
        "no sender report due"
    );
    let block = Block {
        ssrc: s.reports().config_ssrc(),
        fraction_lost: 0,
        cumulative_lost: 0,
        extended_highest_seq: 0,
        jitter: 0,
        lsr: wall(sr_at).compact(),
        dlsr: 0,
    };
    let mut buf = vec![0u8; 1500];
    let head = ReportHead::Receiver {
        ssrc: Ssrc(reporter),
        blocks: &[block],
    };
    let mut len = rtcp::write_compound(&mut buf, head, "viewer", None).unwrap();
    let seqs: Vec<SeqNo> = (0..n).map(|i| SeqNo(first).add(i)).collect();
    len += rtcp::write_nack(&mut buf[len..], Ssrc(reporter), Ssrc(0xabc), &seqs);
    buf.truncate(len);
    buf
}

/// NACKs from strangers (forged SSRCs: no report of theirs echoed a sender report) fill only
/// half the places where retransmissions wait: a receiver that reported is still answered.
#[test]
fn a_storm_from_strangers_leaves_room_for_the_receivers_that_reported() {
    let mut s = repairing_session();
    // Eight strangers ask for every packet kept (0..200, all still in time at 100 ms).
    for k in 0..8 {
        rtcp_in(
            &mut s,
            ms(100),
            &nack_compound(0xf000 + k, 0xabc, 0, 200, 1),
        );
    }
    let st = s.repair_stats().unwrap();
    assert_eq!(st.repairer.sent, MAX_WAITING_FOR_STRANGERS as u64);
    assert_eq!(st.overflow, 8);
    // Another stranger's NACK for packets no one asked for yet finds no place …
    rtcp_in(&mut s, ms(101), &nack_compound(0xf100, 0xabc, 100, 10, 1));
    assert_eq!(s.repair_stats().unwrap().repairer.sent, 32);
    // … a reporting receiver's is answered.
    let reported = reported_nack(&mut s, 0x77, ms(102), 100, 10);
    rtcp_in(&mut s, ms(102), &reported);
    let st = s.repair_stats().unwrap();
    assert_eq!((st.repairer.sent, st.overflow), (42, 9));
    // The reporting receiver's ten leave first, then the strangers', as the stream's packets
    // (2 ms apart) pay for them: eight ahead, one per ten packets. As they leave (or expire),
    // their places are free again, and a stranger is answered once more (for a packet still
    // kept).
    let mut buf = [0u8; 1500];
    let mut sent = Vec::new();
    for k in (200..550).step_by(10) {
        let now = ms(102 + 2 * u64::from(k - 200));
        while let Some(n) = s.poll_repair(now, now, &mut buf).map(|r| r.len) {
            let v = metronome_wire::rtp::RtpView::parse(&buf[..n]).unwrap();
            sent.push(u16::from_be_bytes([v.payload()[0], v.payload()[1]]));
        }
        keep_packets(&mut s, k..k + 10);
    }
    assert_eq!(sent[..10], (100..110).collect::<Vec<u16>>());
    // The strangers' 32 left, or expired while they waited (their packets' play-out passed).
    let st = s.repair_stats().unwrap();
    assert_eq!(sent.len() as u64 - 10 + st.expired, 32, "{sent:?} {st:?}");
    rtcp_in(&mut s, ms(802), &nack_compound(0xf100, 0xabc, 540, 1, 1));
    assert_eq!(s.repair_stats().unwrap().repairer.sent, 43);
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
    while s
        .poll_repair(ms(400), ms(400), &mut buf)
        .map(|r| r.len)
        .is_some()
    {}
    assert_eq!(s.poll_timeout().map(|(t, _)| t <= ms(400)), Some(true));
    let n = s.poll_rtcp(ms(400), wall(ms(400)), &mut buf).unwrap();
    let ssrc = s.reports().config_ssrc().get();
    assert_eq!(tlleis(&buf[..n]), vec![(ssrc, ssrc, (50..55).collect())]);
    // Another viewer asks for the same within the round trip: a duplicate, told again 10 ms
    // after the last TLLEI, not at once.
    rtcp_in(&mut s, ms(402), &nack_compound(0x78, 0xabc, 50, 2, 1));
    assert_eq!(
        s.poll_repair(ms(402), ms(402), &mut buf).map(|r| r.len),
        None
    );
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
    while one
        .poll_repair(ms(400), ms(400), &mut buf)
        .map(|r| r.len)
        .is_some()
    {}
    if let Some(n) = one.poll_rtcp(ms(400), wall(ms(400)), &mut buf) {
        assert!(tlleis(&buf[..n]).is_empty());
    }
    assert_eq!(one.repair_stats().unwrap().loss_notices, 0);
}

/// At a rate controller's rate, a retransmission takes its time at the rate as a packet of the
/// stream does: the packets behind it wait, and media and repairs together keep to the rate.
#[test]
fn at_the_controllers_rate_repairs_take_their_time_from_the_stream() {
    let mut s =
        super::pacing::at_rate_session(Bitrate::bps(1_000_000)).with_repair(repair_config(false));
    // Forty 1250-byte packets of one frame made at 0 ms: 10 ms each at 1 Mbit/s.
    for k in 0..40u32 {
        let q = Queued {
            due: ms(0),
            ..packet(k)
        };
        s.handle_input(ms(0), Input::Packet(q)).unwrap();
    }
    let mut buf = [0u8; 1500];
    let (mut now, mut bytes, mut repairs) = (ms(0), 0u64, 0);
    let mut sent_at = Vec::new();
    while let Some(t) = s.next_send() {
        now = now.max(t);
        if sent_at.len() == 10 && repairs == 0 {
            // Packets 2..6 were lost: asked for at 100 ms.
            rtcp_in(&mut s, now, &nack_compound(0x77, 0xabc, 2, 4, 1));
        }
        let Some(Transmit::Send { id, .. }) = s.poll_transmit(now) else {
            continue;
        };
        sent_at.push(now);
        bytes += 1250;
        keep_packets(&mut s, id as u16..id as u16 + 1);
        if let Some(n) = s.poll_repair(now, now, &mut buf).map(|r| r.len) {
            repairs += 1;
            bytes += n as u64;
        }
        // Never more than the rate allows since the first packet, and one packet ahead.
        let allowed = now.as_nanos() / 8_000 + 1250 + 1252;
        assert!(bytes <= allowed, "{bytes} bytes by {now:?}");
    }
    assert_eq!((sent_at.len(), repairs), (40, 4));
    // Four 1252-byte repairs delayed the stream by their time at the rate: 40 ms more.
    let last = sent_at[39].as_nanos() / 1_000_000;
    assert!((429..=431).contains(&last), "the last left at {last} ms");
}

/// Where packets do not leave at the controller's rate (GCC, constant-rate TS), a report hands
/// the media the target less what retransmissions took, headers included (RFC 4588 §7), over
/// half a second at least: media and repairs together keep to the target.
#[test]
fn off_the_controllers_rate_the_media_leaves_repairs_room_in_the_target() {
    let cc = super::feedback::Halving::steady(Bitrate::mbps(5));
    let mut s = SenderSession::new(config(LatePolicy::CATCH_UP), Timestamp::ZERO, Box::new(cc))
        .with_repair(repair_config(false));
    keep_packets(&mut s, 0..200);
    let report = super::feedback::viewer_report(Block {
        ssrc: Ssrc(0xabc),
        fraction_lost: 0,
        cumulative_lost: 0,
        extended_highest_seq: 100,
        jitter: 900,
        lsr: 0,
        dlsr: 0,
    });
    // No repair yet: the whole target.
    rtcp_in(&mut s, ms(500), &report);
    assert_eq!(s.reported_rate(), Some(Bitrate::mbps(5)));
    // Eight retransmissions (1 252 bytes, 1 280 on the wire) in the next second.
    rtcp_in(&mut s, ms(500), &nack_compound(0x77, 0xabc, 180, 8, 1));
    let mut buf = [0u8; 1500];
    let sent =
        std::iter::from_fn(|| s.poll_repair(ms(500), ms(500), &mut buf).map(|r| r.len)).count();
    assert_eq!(sent, 8);
    while s.poll_event().is_some() {}
    rtcp_in(&mut s, ms(1500), &report);
    let media = Bitrate::bps(5_000_000 - 8 * 1280 * 8);
    assert_eq!(s.reported_rate(), Some(media));
    let reported = std::iter::from_fn(|| s.poll_event()).find_map(|e| match e {
        SessionEvent::RateReported { rate, media, .. } => Some((rate, media)),
        _ => None,
    });
    assert_eq!(reported, Some((Bitrate::mbps(5), media)));
    // A report 10 ms later, a repair between: the rate measured over the second stands (10
    // ms would make 1 Mbit/s of the one repair).
    keep_packets(&mut s, 700..752);
    rtcp_in(&mut s, ms(1505), &nack_compound(0x77, 0xabc, 740, 1, 1));
    assert!(s
        .poll_repair(ms(1505), ms(1505), &mut buf)
        .map(|r| r.len)
        .is_some());
    rtcp_in(&mut s, ms(1510), &report);
    assert_eq!(s.reported_rate(), Some(media));
    // Over the next second, that one repair alone.
    rtcp_in(&mut s, ms(2500), &report);
    assert_eq!(s.reported_rate(), Some(Bitrate::bps(5_000_000 - 1280 * 8)));
}
