use super::*;
use metronome_time::Micros;
use metronome_time::{MediaClock, NtpTime, RtpTime, Timestamp};
use metronome_wire::rtcp::{self, Block, ReportHead};
use metronome_wire::rtp::RtpView;
use metronome_wire::PayloadType;
use metronome_wire::Ssrc;
use std::time::Duration;

fn ts_packet(i: u8) -> [u8; 188] {
    let mut p = [i; 188];
    p[0] = 0x47;
    p
}

#[test]
fn seven_ts_packets_make_one_rtp_packet_released_with_the_last() {
    let epoch = Timestamp::from_secs(10);
    let mut p = Mp2tPacketizer::new(
        PacketizerConfig::mp2t(Ssrc(0xabc), metronome_wire::SeqNo(65_535), RtpTime(1000)),
        epoch,
    );
    let mut out = [0u8; 1500];
    // TS packets 300 µs apart.
    let mut emitted = Vec::new();
    for i in 0..15u8 {
        let due = Duration::from_micros(300 * i as u64);
        if let Some(o) = p.push(&ts_packet(i), due, &mut out).unwrap() {
            let v = RtpView::parse(&out[..o.len]).unwrap();
            assert_eq!(v.payload().len(), 1316);
            assert_eq!(v.payload_type(), PayloadType(33));
            assert_eq!(
                v.payload()[188 * 6 + 1],
                i,
                "last TS packet is the 7th pushed"
            );
            emitted.push(o);
        }
    }
    assert_eq!(emitted.len(), 2);
    assert_eq!(emitted[0].len, 1328, "the paper's 1328-byte packet");
    // Released with its 7th TS packet (1.8 ms), RTP timestamp = 90 kHz of release time.
    assert_eq!(emitted[0].release, epoch + Duration::from_micros(1800));
    assert_eq!(emitted[0].rtp_ts, RtpTime(1000 + 162));
    assert_eq!(emitted[1].release, epoch + Duration::from_micros(3900));
    assert_eq!(emitted[1].rtp_ts, RtpTime(1000 + 351));
    // Sequence numbers wrap.
    assert_eq!((emitted[0].seq.get(), emitted[1].seq.get()), (65_535, 0));
    // One TS packet left over: flushed as a short packet at the end.
    let last = p.flush(&mut out).unwrap().unwrap();
    assert_eq!(last.len, 12 + 188);
    assert_eq!(p.flush(&mut out).unwrap(), None);
}

fn reports() -> SenderReports {
    SenderReports::new(
        SenderReportsConfig {
            ssrc: Ssrc(0xabc),
            cname: "sender@test".into(),
            clock: MediaClock::VIDEO_90K,
            rtp_ts_base: RtpTime(1000),
            session_bw_bps: 5_000_000,
            rtcp_min_interval: Duration::from_secs(1),
            max_receivers: 4,
            seed: 3,
        },
        Timestamp::ZERO,
    )
}

#[test]
fn sender_report_counts_what_left_and_maps_rtp_time() {
    let mut s = reports();
    let mut buf = [0u8; 1500];
    s.record_sent(100, 131_600);
    let wall = NtpTime::from_unix_nanos(1_700_000_000_000_000_000);
    let n = s
        .poll_transmit(Timestamp::from_millis(500), wall, &mut buf)
        .unwrap();
    let mut info = None;
    rtcp::parse_compound(&buf[..n], |i| {
        if let metronome_wire::RtcpItem::SenderReport(x) = i {
            info = Some(x);
        }
    })
    .unwrap();
    let info = info.unwrap();
    assert_eq!(info.packet_count, 100);
    assert_eq!(info.octet_count, 131_600);
    assert_eq!(info.ntp, wall.0);
    // Not due again immediately; due within the randomized interval.
    assert!(s
        .poll_transmit(Timestamp::from_millis(501), wall, &mut buf)
        .is_none());
    let (next, _) = s.poll_timeout().unwrap();
    let gap = next
        .saturating_since(Timestamp::from_millis(500))
        .as_secs_f64();
    assert!(gap > 0.1 && gap < 3.0, "{gap}");
    assert_eq!(info.rtp_timestamp, RtpTime(1000 + 45_000));
    // The BYE's report maps the same instant to the same RTP time: the schedule never shifts.
    let n = s.bye(Timestamp::from_millis(500), wall, &mut buf).unwrap();
    let mut rtp_ts = None;
    rtcp::parse_compound(&buf[..n], |i| {
        if let metronome_wire::RtcpItem::SenderReport(x) = i {
            rtp_ts = Some(x.rtp_timestamp);
        }
    })
    .unwrap();
    assert_eq!(rtp_ts, Some(RtpTime(1000 + 45_000)));
}

#[test]
fn receiver_reports_give_loss_jitter_and_rtt() {
    let mut s = reports();
    let from: std::net::SocketAddr = "127.0.0.1:5007".parse().unwrap();
    // The receiver saw our SR sent at wall time W (LSR = W.compact()), held it 250 ms (DLSR),
    // and its RR arrives at W + 260 ms: RTT = 10 ms.
    let w = NtpTime::from_unix_nanos(1_700_000_000_000_000_000);
    let arrival = NtpTime::from_unix_nanos(1_700_000_000_260_000_000);
    let mut buf = [0u8; 1500];
    s.poll_transmit(Timestamp::ZERO, w, &mut buf).unwrap();
    let block = Block {
        ssrc: Ssrc(0xabc),
        fraction_lost: 64,
        cumulative_lost: 12,
        extended_highest_seq: 70_000,
        jitter: 450,
        lsr: w.compact(),
        dlsr: NtpTime::compact_from_duration(Duration::from_millis(250)),
    };
    let other = Block {
        ssrc: Ssrc(0xdef),
        ..block
    };
    let n = rtcp::write_compound(
        &mut buf,
        ReportHead::Receiver {
            ssrc: Ssrc(0x77),
            blocks: &[block, other],
        },
        "viewer",
        None,
    )
    .unwrap();
    s.handle_rtcp(
        Timestamp::from_millis(260),
        arrival,
        from,
        &buf[..n],
        &|_| None,
    );
    let r = &s.receivers()[0];
    assert_eq!(r.ssrc, Ssrc(0x77));
    assert_eq!(r.cname.as_deref(), Some("viewer"));
    assert_eq!(r.fraction_lost, 0.25);
    assert_eq!(r.cumulative_lost, 12);
    assert_eq!(r.jitter_us.as_millis_f64(), 5.0);
    let rtt = r.rtt_us.map(Micros::as_millis_f64).unwrap();
    assert!((rtt - 10.0).abs() < 0.05, "{rtt}");
    assert_eq!(s.counters().blocks_about_others, 1);
    assert!(matches!(
        s.poll_event(),
        Some(SenderEvent::NewReceiver {
            ssrc: Ssrc(0x77),
            ..
        })
    ));

    // Malformed RTCP is counted and changes nothing.
    s.handle_rtcp(
        Timestamp::from_millis(300),
        arrival,
        from,
        &buf[..n - 3],
        &|_| None,
    );
    assert_eq!(s.counters().rtcp_malformed, 1);
    assert_eq!(s.receivers()[0].reports, 1);
}

/// A receiver report from `reporter` about our stream whose block echoes `lsr`, 250 ms after
/// that report (DLSR), as a compound.
fn report_echoing(reporter: u32, lsr: u32) -> Vec<u8> {
    let block = Block {
        ssrc: Ssrc(0xabc),
        fraction_lost: 0,
        cumulative_lost: 0,
        extended_highest_seq: 0,
        jitter: 0,
        lsr,
        dlsr: NtpTime::compact_from_duration(Duration::from_millis(250)),
    };
    let mut buf = vec![0u8; 1500];
    let head = ReportHead::Receiver {
        ssrc: Ssrc(reporter),
        blocks: &[block],
    };
    let n = rtcp::write_compound(&mut buf, head, "viewer", None).unwrap();
    buf.truncate(n);
    buf
}

/// A report block whose LSR echoes no sender report we sent (forged: a third party that does
/// not receive the stream cannot know one) is counted and ignored: no receiver, no round trip.
/// Receivers that never echoed one (forged SSRCs, or real ones before their first sender
/// report) give way in a full table to one that did.
#[test]
fn forged_reports_neither_set_a_round_trip_nor_keep_receivers_out() {
    let mut s = reports();
    let from: std::net::SocketAddr = "127.0.0.1:5007".parse().unwrap();
    let w = NtpTime::from_unix_nanos(1_700_000_000_000_000_000);
    let arrival = NtpTime::from_unix_nanos(1_700_000_000_260_000_000);
    let at = Timestamp::from_millis(260);
    let mut buf = [0u8; 1500];
    s.poll_transmit(Timestamp::ZERO, w, &mut buf).unwrap();
    let forged = NtpTime::from_unix_nanos(1_700_000_000_010_000_000).compact();
    s.handle_rtcp(at, arrival, from, &report_echoing(0x66, forged), &|_| None);
    assert!(s.receivers().is_empty());
    assert_eq!(s.counters().unknown_lsr, 1);
    // Four strangers (no sender report heard: LSR 0) fill the table …
    for k in 0..4 {
        s.handle_rtcp(at, arrival, from, &report_echoing(0xf0 + k, 0), &|_| None);
    }
    assert_eq!(s.receivers().len(), 4);
    s.handle_rtcp(at, arrival, from, &report_echoing(0xf9, 0), &|_| None);
    assert_eq!(s.counters().too_many_receivers, 1);
    // … a receiver that echoes our report takes the place of the first stranger, and has its
    // round trip (260 − 250 ms).
    s.handle_rtcp(
        at,
        arrival,
        from,
        &report_echoing(0x77, w.compact()),
        &|_| None,
    );
    let ssrcs: Vec<u32> = s.receivers().iter().map(|r| r.ssrc.get()).collect();
    assert_eq!(ssrcs, [0xf1, 0xf2, 0xf3, 0x77]);
    assert_eq!(s.counters().strangers_dropped, 1);
    let rtt = s.receiver_rtt(Ssrc(0x77)).unwrap();
    assert!((rtt.as_secs_f64() - 0.010).abs() < 5e-5, "{rtt:?}");
    // LSR 0 under the SSRC of a receiver that echoed a report before: forged, not taken.
    s.handle_rtcp(at, arrival, from, &report_echoing(0x77, 0), &|_| None);
    assert_eq!(s.counters().unknown_lsr, 2);
    assert_eq!(s.receivers()[3].reports, 1);
    // The table's index still finds each one where it is.
    s.handle_rtcp(
        at,
        arrival,
        from,
        &report_echoing(0xf3, w.compact()),
        &|_| None,
    );
    assert_eq!(s.receivers()[2].reports, 2);
    assert!(s.receiver_rtt(Ssrc(0xf3)).is_some());
}

/// A stream that continues an earlier one with its SSRC (an RTSP session's, PAUSE then PLAY)
/// takes the earlier stream's sender reports as its own: a receiver's first report after the
/// restart echoes one of them, and is taken with its round trip. Without them it is dropped
/// as forged.
#[test]
fn a_continuing_stream_takes_reports_that_echo_the_earlier_streams() {
    let from: std::net::SocketAddr = "127.0.0.1:5007".parse().unwrap();
    let w = NtpTime::from_unix_nanos(1_700_000_000_000_000_000);
    let arrival = NtpTime::from_unix_nanos(1_700_000_000_260_000_000);
    let at = Timestamp::from_millis(260);
    let mut earlier = reports();
    let mut buf = [0u8; 1500];
    earlier.poll_transmit(Timestamp::ZERO, w, &mut buf).unwrap();
    let echo = report_echoing(0x77, w.compact());
    let mut fresh = reports();
    fresh.handle_rtcp(at, arrival, from, &echo, &|_| None);
    assert_eq!(
        (fresh.counters().unknown_lsr, fresh.receivers().len()),
        (1, 0)
    );
    let mut continuing = reports();
    continuing.continue_from(earlier.sent_reports());
    continuing.handle_rtcp(at, arrival, from, &echo, &|_| None);
    assert_eq!(continuing.counters().unknown_lsr, 0);
    let rtt = continuing.receiver_rtt(Ssrc(0x77)).unwrap();
    assert!((rtt.as_secs_f64() - 0.010).abs() < 5e-5, "{rtt:?}");
    // Its own reports are kept after earlier ones, and the oldest go first past the bound.
    let bound = report::SRS_ECHOED;
    continuing.continue_from((1..=bound as u32).map(|k| k << 8));
    let kept: Vec<u32> = continuing.sent_reports().collect();
    assert_eq!(
        (kept.len(), kept[0], kept[bound - 1]),
        (bound, 2 << 8, w.compact())
    );
}
