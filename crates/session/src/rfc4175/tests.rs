//! Depayloader behaviour: events, counters and every drop reason.

use super::*;
use metronome_media::uncompressed::{
    Depth, RawFrame, RawSource, RawTestPattern, Sampling, VideoFormat,
};
use metronome_time::Timestamp;
use metronome_wire::rfc4175::{write_headers, write_rtp_header, RawHeaderExt, SegmentHeader};
use metronome_wire::rtp::RtpHeader;
use metronome_wire::PayloadType;
use metronome_wire::Ssrc;

fn fmt(s: Sampling, d: Depth) -> VideoFormat {
    VideoFormat::new(64, 48, s, d, 25, 1).unwrap()
}

fn packets(p: &mut RawPayloader, f: &RawFrame) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; p.packet_capacity()];
    let mut out = Vec::new();
    let mut pk = p.begin_frame(f).unwrap();
    while let Some(i) = pk.next_packet(&mut buf).unwrap() {
        out.push(buf[..i.len].to_vec());
    }
    out
}

fn setup(f: VideoFormat, max_payload: usize) -> (RawPayloader, RawDepayloader, RawTestPattern) {
    let mut cfg = RawPayloaderConfig::new(Ssrc(5), &f);
    cfg.max_payload = max_payload;
    cfg.capture_time_ext = true;
    (
        RawPayloader::new(cfg, f).unwrap(),
        RawDepayloader::new(f, Some(PayloadType(96))).unwrap(),
        RawTestPattern::new(f).unwrap(),
    )
}

fn frame(p: &RawTestPattern, i: u64) -> RawFrame {
    let mut f = RawFrame::new(p.format());
    p.render(i, &mut f);
    f.capture_ns = 1_000 + i;
    f
}

fn push_all(d: &mut RawDepayloader, pkts: &[Vec<u8>], t: u64) -> Vec<RawEvent> {
    pkts.iter()
        .enumerate()
        .flat_map(|(i, p)| d.push(Timestamp::from_micros(t + i as u64), p))
        .collect()
}

#[test]
fn every_sampling_round_trips_with_its_capture_time() {
    for (s, dp) in [
        (Sampling::Ycbcr422, Depth::Eight),
        (Sampling::Ycbcr422, Depth::Ten),
        (Sampling::Ycbcr420, Depth::Eight),
        (Sampling::Rgb, Depth::Eight),
    ] {
        let (mut p, mut d, pat) = setup(fmt(s, dp), 500);
        for i in 0..3 {
            let f = frame(&pat, i);
            let pk = packets(&mut p, &f);
            let ev = push_all(&mut d, &pk, 100 * i);
            let [RawEvent::Complete(c)] = ev[..] else {
                panic!("{ev:?}")
            };
            assert_eq!(c.capture_ns, Some(1_000 + i));
            assert_eq!(c.packets as usize, pk.len());
            assert_eq!(c.bytes as usize, f.data.len());
            assert_eq!(c.first_arrival, Timestamp::from_micros(100 * i));
            assert_eq!(d.frame().unwrap().data, f.data);
            assert!(d.frame_is_complete());
        }
        let c = d.counters();
        assert_eq!(
            (c.frames_complete, c.frames_partial, c.frames_lost),
            (3, 0, 0)
        );
        assert_eq!(c.accounted(), c.packets_in);
    }
}

#[test]
fn loss_inside_a_frame_and_of_a_whole_frame() {
    let (mut p, mut d, pat) = setup(fmt(Sampling::Ycbcr422, Depth::Eight), 1000);
    let f0 = packets(&mut p, &frame(&pat, 0));
    let _f1 = packets(&mut p, &frame(&pat, 1));
    let f2 = packets(&mut p, &frame(&pat, 2));
    let mut lossy = f0.clone();
    lossy.remove(3);
    let ev = push_all(&mut d, &lossy, 0);
    let [RawEvent::Partial(pa)] = ev[..] else {
        panic!("{ev:?}")
    };
    assert!(pa.marker);
    assert_eq!(pa.missing_packets, 1);
    assert_eq!(pa.missing_bytes + pa.received_bytes, 64 * 48 * 2);
    assert!(pa.missing_bytes > 0 && !d.frame_is_complete());
    let ev = push_all(&mut d, &f2, 1000);
    assert!(matches!(
        ev[..],
        [
            RawEvent::Lost(FrameLost { count: 1, .. }),
            RawEvent::Complete(_)
        ]
    ));
    assert_eq!(d.counters().frames_lost, 1);
}

#[test]
fn a_frame_without_its_marker_ends_at_the_next_timestamp() {
    let (mut p, mut d, pat) = setup(fmt(Sampling::Rgb, Depth::Eight), 1400);
    let mut f0 = packets(&mut p, &frame(&pat, 0));
    let f1 = packets(&mut p, &frame(&pat, 1));
    f0.last_mut().unwrap()[1] &= 0x7f; // clear M
    assert!(push_all(&mut d, &f0, 0).is_empty());
    let ev = push_all(&mut d, &f1, 0);
    let [RawEvent::Partial(pa), RawEvent::Complete(_)] = ev[..] else {
        panic!("{ev:?}")
    };
    assert!(!pa.marker && pa.missing_bytes == 0);
    assert_eq!(d.counters().frames_without_marker, 1);
    // The end of the stream: flush reports the frame in progress.
    let f2 = packets(&mut p, &frame(&pat, 2));
    push_all(&mut d, &f2[..2], 0);
    assert!(matches!(
        d.flush(Timestamp::ZERO).iter().next(),
        Some(RawEvent::Partial(_))
    ));
}

#[test]
fn duplicates_late_and_reordered_packets() {
    let (mut p, mut d, pat) = setup(fmt(Sampling::Ycbcr420, Depth::Eight), 600);
    let f0 = packets(&mut p, &frame(&pat, 0));
    let f1 = packets(&mut p, &frame(&pat, 1));
    let mut order = f0.clone();
    order.swap(1, 4);
    order.insert(2, f0[0].clone()); // a duplicate
    let ev = push_all(&mut d, &order, 0);
    assert!(matches!(ev[..], [RawEvent::Complete(_)]));
    assert_eq!(d.counters().duplicates, 1);
    push_all(&mut d, &f1[..2], 0);
    push_all(&mut d, &f0[2..3], 0); // frame 0 is over
    assert_eq!(d.counters().late, 1);
    let ev = push_all(&mut d, &f1[2..], 0);
    assert!(matches!(ev[..], [RawEvent::Complete(_)]));
    let c = d.counters();
    assert_eq!(c.accounted(), c.packets_in);
}

fn hand_packet(segs: &[SegmentHeader], data: usize, marker: bool) -> Vec<u8> {
    let mut buf = vec![0u8; 2000];
    let hdr = RtpHeader {
        payload_type: PayloadType(96),
        sequence: metronome_wire::SeqNo(1),
        timestamp: metronome_time::RtpTime(0),
        ssrc: Ssrc(5),
        marker,
    };
    let at = write_rtp_header(&mut buf, &hdr, RawHeaderExt::default()).unwrap();
    let n = write_headers(&mut buf[at..], 0, segs).unwrap();
    buf.truncate(at + n + data);
    buf
}

fn seg(length: u16, line: u16, offset: u16) -> SegmentHeader {
    SegmentHeader {
        length,
        line,
        offset,
        ..Default::default()
    }
}

#[test]
fn each_malformed_segment_is_dropped_with_its_reason() {
    let f = fmt(Sampling::Ycbcr420, Depth::Eight); // 6-byte pgroups of 2x2 pixels
    let mut d = RawDepayloader::new(f, Some(PayloadType(96))).unwrap();
    type Case = (Vec<u8>, fn(&RawDrops) -> u64);
    let cases: Vec<Case> = vec![
        (b"garbage".to_vec(), |r| r.not_rtp),
        (hand_packet(&[seg(6, 0, 0)], 6, false)[..14].to_vec(), |r| {
            r.too_short
        }),
        (hand_packet(&[seg(12, 0, 0)], 6, false), |r| {
            r.data_too_short
        }),
        (hand_packet(&[seg(0, 0, 0)], 0, false), |r| r.zero_length),
        (hand_packet(&[seg(7, 0, 0)], 7, false), |r| {
            r.length_not_pgroup_multiple
        }),
        (hand_packet(&[seg(6, 48, 0)], 6, false), |r| {
            r.line_out_of_range
        }),
        (hand_packet(&[seg(6, 3, 0)], 6, false), |r| {
            r.line_misaligned
        }),
        (hand_packet(&[seg(6, 0, 64)], 6, false), |r| {
            r.offset_out_of_range
        }),
        (hand_packet(&[seg(6, 0, 1)], 6, false), |r| {
            r.offset_misaligned
        }),
        (hand_packet(&[seg(12, 0, 62)], 12, false), |r| {
            r.past_line_end
        }),
        (
            hand_packet(&[seg(6, 0, 0), seg(198, 2, 0)], 204, false),
            |r| r.past_line_end,
        ),
    ];
    for (i, (pkt, counter)) in cases.iter().enumerate() {
        let before = counter(&d.counters().dropped);
        assert!(d.push(Timestamp::ZERO, pkt).is_empty(), "case {i}");
        assert_eq!(counter(&d.counters().dropped), before + 1, "case {i}");
    }
    // C set on the last header that fits.
    let mut p = hand_packet(&[seg(6, 0, 0)], 0, false);
    let n = p.len();
    p[n - 2] |= 0x80;
    d.push(Timestamp::ZERO, &p);
    assert_eq!(d.counters().dropped.unterminated_headers, 1);
    // F set, and a payload type other than the one configured.
    let mut p = hand_packet(&[seg(6, 0, 0)], 6, false);
    p[12 + 4] |= 0x80;
    d.push(Timestamp::ZERO, &p);
    assert_eq!(d.counters().dropped.field_bit, 1);
    let mut p = hand_packet(&[seg(6, 0, 0)], 6, false);
    p[1] = 97;
    d.push(Timestamp::ZERO, &p);
    assert_eq!(d.counters().dropped.wrong_payload_type, 1);
    let c = d.counters();
    assert_eq!(c.dropped.total(), c.packets_in);
    assert_eq!(c.used, 0);
    // A well-formed one is used.
    d.push(Timestamp::ZERO, &hand_packet(&[seg(6, 46, 62)], 6, false));
    assert_eq!(d.counters().used, 1);
}

#[test]
fn a_restarted_sender_is_followed_after_a_run_of_late_packets() {
    let (mut p, mut d, pat) = setup(fmt(Sampling::Rgb, Depth::Eight), 12 + 3);
    let f = frame(&pat, 5_000);
    push_all(&mut d, &packets(&mut p, &f), 0);
    assert_eq!(d.counters().frames_complete, 1);
    // Frame 0 has an older timestamp: its first packets are late, then the depayloader resyncs.
    let (mut p2, _, _) = setup(fmt(Sampling::Rgb, Depth::Eight), 12 + 3);
    let pk = packets(&mut p2, &frame(&pat, 0));
    push_all(&mut d, &pk, 0);
    let c = d.counters();
    assert_eq!(c.discontinuities, 1);
    assert!(c.late > 0 && c.frames_partial == 1);
    assert_eq!(c.accounted(), c.packets_in);
}

#[test]
fn lost_frames_follow_the_observed_rate_when_the_configured_one_is_wrong() {
    // Sent at 10 fps, received by a depayloader that assumes 25 (an SDP without a rate).
    let f10 = VideoFormat::new(64, 48, Sampling::Rgb, Depth::Eight, 10, 1).unwrap();
    let (mut p, _, pat) = setup(f10, 1400);
    let mut d =
        RawDepayloader::new(fmt(Sampling::Rgb, Depth::Eight), Some(PayloadType(96))).unwrap();
    let pk: Vec<_> = (0..5).map(|i| packets(&mut p, &frame(&pat, i))).collect();
    push_all(&mut d, &pk[0], 0);
    push_all(&mut d, &pk[1], 0);
    assert_eq!(d.counters().frames_lost, 0);
    let ev = push_all(&mut d, &pk[4], 0);
    assert!(
        matches!(ev[0], RawEvent::Lost(FrameLost { count: 2, .. })),
        "{ev:?}"
    );
}
