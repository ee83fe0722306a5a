//! RFC 4175 payloader → depayloader properties: the identity on frames of any size, sampling
//! and packet size, sequence numbers and markers as RFC 4175 §4.1 wants them, and malformed
//! input that is always dropped, counted, and never written outside the frame.

use metronome_media::uncompressed::{
    Depth, RawFileSource, RawFrame, RawSource, RawTestPattern, Sampling, VideoFormat, Y4mWriter,
};
use metronome_session::rfc4175::{
    packets_for, RawDepayloader, RawEvent, RawPayloader, RawPayloaderConfig,
};
use metronome_time::{RtpTime, Timestamp};
use metronome_wire::rfc4175::{
    write_headers, write_rtp_header, RawHeaderExt, Rfc4175View, SegmentHeader,
};
use metronome_wire::rtp::{RtpHeader, RtpView};
use metronome_wire::PayloadType;
use metronome_wire::Ssrc;
use proptest::prelude::*;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[global_allocator]
static GLOBAL: metronome_testkit::CountingAlloc = metronome_testkit::CountingAlloc;

fn allocs() -> u64 {
    metronome_testkit::allocations()
}

const KINDS: [(Sampling, Depth); 4] = [
    (Sampling::Ycbcr422, Depth::Eight),
    (Sampling::Ycbcr422, Depth::Ten),
    (Sampling::Ycbcr420, Depth::Eight),
    (Sampling::Rgb, Depth::Eight),
];

fn format(kind: usize, pw: u32, ph: u32) -> VideoFormat {
    let (s, d) = KINDS[kind % 4];
    let probe = VideoFormat::new(2, 2, s, d, 30000, 1001).unwrap().pgroup();
    VideoFormat::new(pw * probe.xinc, ph * probe.yinc, s, d, 30000, 1001).unwrap()
}

fn random_frame(f: VideoFormat, seed: u64, index: u64) -> RawFrame {
    let mut fr = RawFrame::new(f);
    ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut fr.data);
    fr.index = index;
    fr
}

/// All packets of `frame`, checking what the payloader promises on the way.
fn packetize(p: &mut RawPayloader, frame: &RawFrame) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; p.packet_capacity()];
    let mut out = Vec::new();
    let first_seq = p.next_seq();
    let n = p.packets_per_frame();
    let max_payload = p.config().max_payload;
    let mut pk = p.begin_frame(frame).unwrap();
    let ts = pk.rtp_ts();
    while let Some(info) = pk.next_packet(&mut buf).unwrap() {
        let pkt = &buf[..info.len];
        let v = RtpView::parse(pkt).unwrap();
        let seq = first_seq.wrapping_add(out.len() as u32);
        assert_eq!(info.seq, seq);
        assert_eq!(v.sequence(), metronome_wire::SeqNo(seq as u16));
        let pl = Rfc4175View::parse(v.payload()).unwrap();
        assert_eq!(
            pl.extended_sequence(v.sequence()),
            seq,
            "extended sequence number"
        );
        assert_eq!(v.timestamp(), ts);
        assert_eq!(
            v.marker(),
            out.len() + 1 == n,
            "marker on the last packet only"
        );
        assert!(v.payload().len() <= max_payload);
        out.push(pkt.to_vec());
    }
    assert_eq!(out.len(), n);
    assert_eq!(
        n,
        packets_for(&frame.format, p.config().max_payload).unwrap()
    );
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The oracle: every unmutated frame comes out byte for byte as it went in, as exactly one
    /// complete frame (no partial, no lost), whatever the sampling, size, packet size, sequence
    /// numbers and timestamps.
    #[test]
    fn payload_then_depayload_is_the_identity(
        kind in 0usize..4,
        pw in 1u32..160,
        ph in 1u32..40,
        max_payload in prop_oneof![200usize..1500, 1500usize..65_000],
        initial_seq in prop_oneof![any::<u32>(), 0xfff0u32..0x1_0000, 0xffff_fff0u32..=u32::MAX],
        seed in any::<u64>(),
    ) {
        let f = format(kind, pw, ph);
        let mut cfg = RawPayloaderConfig::new(Ssrc(0x5eed), &f);
        cfg.max_payload = max_payload;
        cfg.initial_seq = initial_seq;
        cfg.rtp_ts_base = RtpTime(seed as u32);
        cfg.capture_time_ext = seed % 2 == 0;
        cfg.send_time_ext = seed % 3 == 0;
        let mut p = RawPayloader::new(cfg, f).unwrap();
        let mut d = RawDepayloader::new(f, Some(PayloadType(96))).unwrap();
        for i in 0..3u64 {
            // Random octets: RFC 4175 sample data is opaque packed pgroups (any bit pattern is a
            // valid 8- or 10-bit sample), and a RawFrame holds exactly `frame_bytes()` of them.
            let mut frame = random_frame(f, seed.wrapping_add(i), i);
            frame.capture_ns = seed.wrapping_mul(i + 1);
            prop_assert_eq!(frame.data.len(), f.frame_bytes());
            let pkts = packetize(&mut p, &frame);
            let before = *d.counters();
            let (mut complete, mut partial, mut lost) = (0u64, 0u64, 0u64);
            for (k, pkt) in pkts.iter().enumerate() {
                for e in d.push(Timestamp::from_micros(i * 40_000 + k as u64), pkt) {
                    match e {
                        RawEvent::Complete(c) => {
                            complete += 1;
                            prop_assert_eq!(k + 1, pkts.len(), "complete before the last packet");
                            prop_assert_eq!(c.bytes as usize, f.frame_bytes());
                            prop_assert_eq!(c.packets as usize, pkts.len());
                            prop_assert_eq!(c.rtp_ts, p.rtp_timestamp(i));
                            prop_assert_eq!(
                                c.capture_ns,
                                cfg.capture_time_ext.then_some(frame.capture_ns)
                            );
                        }
                        RawEvent::Partial(_) => partial += 1,
                        RawEvent::Lost(l) => lost += l.count,
                    }
                }
            }
            prop_assert_eq!((complete, partial, lost), (1, 0, 0), "events of frame {}", i);
            let c = d.counters();
            prop_assert_eq!(
                (
                    c.frames_complete - before.frames_complete,
                    c.frames_partial - before.frames_partial,
                    c.frames_lost - before.frames_lost,
                ),
                (1, 0, 0),
                "counters of frame {}", i
            );
            prop_assert!(d.frame_is_complete());
            let out = d.frame().unwrap();
            prop_assert_eq!(out.index, i);
            prop_assert_eq!(out.data.len(), frame.data.len());
            // Byte for byte; name the first difference rather than print two whole frames.
            let first_diff = out.data.iter().zip(&frame.data).position(|(a, b)| a != b);
            prop_assert_eq!(first_diff, None, "frame {} differs from the source", i);
        }
        let c = *d.counters();
        prop_assert_eq!(c.accounted(), c.packets_in);
        prop_assert_eq!(c.used, c.packets_in, "every packet used");
        prop_assert_eq!(
            (c.frames_complete, c.frames_partial, c.frames_lost),
            (3, 0, 0)
        );
        prop_assert_eq!(
            (c.dropped.total(), c.duplicates, c.late, c.frames_without_marker, c.discontinuities),
            (0, 0, 0, 0, 0)
        );
    }

    #[test]
    fn garbage_never_panics_and_is_counted(
        pkts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..400), 1..40),
        kind in 0usize..4,
    ) {
        let f = format(kind, 8, 4);
        let mut d = RawDepayloader::new(f, None).unwrap();
        for (i, pkt) in pkts.iter().enumerate() {
            d.push(Timestamp::from_micros(i as u64), pkt);
        }
        d.flush(Timestamp::ZERO);
        let c = d.counters();
        prop_assert_eq!(c.packets_in, pkts.len() as u64);
        prop_assert_eq!(c.accounted(), c.packets_in);
        prop_assert_eq!(d.frame().map_or(f.frame_bytes(), |fr| fr.data.len()), f.frame_bytes());
    }

    #[test]
    fn mutated_packets_never_panic_and_never_resize_the_frame(
        kind in 0usize..4,
        pw in 1u32..40,
        ph in 1u32..20,
        max_payload in 100usize..2000,
        mutations in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..40, any::<u8>()), 1..60),
        drop_some in any::<u64>(),
    ) {
        let f = format(kind, pw, ph);
        let mut cfg = RawPayloaderConfig::new(Ssrc(1), &f);
        cfg.max_payload = max_payload;
        let mut p = RawPayloader::new(cfg, f).unwrap();
        let mut d = RawDepayloader::new(f, None).unwrap();
        let mut all = Vec::new();
        for i in 0..3 {
            all.extend(packetize(&mut p, &random_frame(f, i, i)));
        }
        // Mutate bytes in the RTP and RFC 4175 headers (offset < 40) of chosen packets.
        for (which, at, val) in &mutations {
            let k = which.index(all.len());
            let pkt = &mut all[k];
            if let Some(b) = pkt.get_mut(*at) {
                *b ^= val | 1;
            }
        }
        for (i, pkt) in all.iter().enumerate() {
            if (drop_some >> (i % 64)) & 1 == 1 && i % 5 == 0 {
                continue;
            }
            d.push(Timestamp::from_micros(i as u64), pkt);
            prop_assert!(d.frame().is_none_or(|fr| fr.data.len() == f.frame_bytes()));
        }
        let c = d.counters();
        prop_assert_eq!(c.accounted(), c.packets_in);
    }

    /// Hand-made segments: a packet is used exactly when every segment lies inside the frame on
    /// pgroup boundaries (checked here independently of the depayloader).
    #[test]
    fn a_packet_is_used_exactly_when_its_segments_are_valid(
        kind in 0usize..4,
        segs in proptest::collection::vec((0u16..80, 0u16..40, 0u16..80, any::<bool>()), 1..5),
        extra in 0usize..12,
    ) {
        let f = format(kind, 16, 8);
        let pg = f.pgroup();
        let (pgb, xinc, yinc) = (pg.bytes as u16, pg.xinc as u16, pg.yinc as u16);
        let headers: Vec<SegmentHeader> = segs.iter().map(|&(len, line, off, field)| SegmentHeader {
            length: len, line, offset: off, field, cont: false,
        }).collect();
        let valid = headers.iter().all(|h| {
            !h.field && h.length > 0 && h.length % pgb == 0
                && u32::from(h.line) < f.height && h.line % yinc == 0
                && u32::from(h.offset) < f.width && h.offset % xinc == 0
                && u32::from(h.offset / xinc + h.length / pgb) <= f.width / u32::from(xinc)
        });
        let declared: usize = headers.iter().map(|h| usize::from(h.length)).sum();
        let mut buf = vec![0x5au8; 2000];
        let hdr = RtpHeader { payload_type: PayloadType(96), sequence: metronome_wire::SeqNo(9), timestamp: RtpTime(7), ssrc: Ssrc(1), marker: false };
        let at = write_rtp_header(&mut buf, &hdr, RawHeaderExt::default()).unwrap();
        let n = write_headers(&mut buf[at..], 0, &headers).unwrap();
        let short = extra % 3 == 0 && declared > 0;
        let len = at + n + if short { declared - 1 } else { declared + extra };
        let mut d = RawDepayloader::new(f, Some(PayloadType(96))).unwrap();
        d.push(Timestamp::ZERO, &buf[..len]);
        let c = d.counters();
        prop_assert_eq!(c.used + c.duplicates == 1, valid && !short, "{:?}", c.dropped);
        prop_assert_eq!(c.accounted(), 1);
    }
}

#[test]
fn hd_ten_bit_frames_in_jumbo_and_mtu_packets() {
    let f = VideoFormat::new(1920, 1080, Sampling::Ycbcr422, Depth::Ten, 50, 1).unwrap();
    for max_payload in [1428, 8972, 65_000] {
        let mut cfg = RawPayloaderConfig::new(Ssrc(3), &f);
        cfg.max_payload = max_payload;
        let mut p = RawPayloader::new(cfg, f).unwrap();
        let mut d = RawDepayloader::new(f, None).unwrap();
        let frame = random_frame(f, max_payload as u64, 0);
        let pkts = packetize(&mut p, &frame);
        let mut done = false;
        for pkt in &pkts {
            done |= d
                .push(Timestamp::ZERO, pkt)
                .iter()
                .any(|e| matches!(e, RawEvent::Complete(_)));
        }
        assert!(done, "max payload {max_payload}");
        assert!(d.frame().unwrap().data == frame.data);
        // 5 184 000 bytes of data: each packet as full as the payload allows.
        let data_per_packet = max_payload - 2 - 6 * (max_payload / 4800 + 2);
        assert!(
            pkts.len() <= 5_184_000 / data_per_packet + 1,
            "{}",
            pkts.len()
        );
    }
}

#[test]
fn source_payloader_and_depayloader_allocate_nothing_per_frame() {
    for (s, d) in KINDS {
        let f = VideoFormat::new(320, 240, s, d, 25, 1).unwrap();
        let mut src = RawTestPattern::new(f).unwrap();
        let mut cfg = RawPayloaderConfig::new(Ssrc(1), &f);
        cfg.capture_time_ext = true;
        cfg.send_time_ext = true;
        let mut p = RawPayloader::new(cfg, f).unwrap();
        let mut dep = RawDepayloader::new(f, Some(PayloadType(96))).unwrap();
        let mut frame = RawFrame::new(f);
        let mut buf = vec![0u8; p.packet_capacity()];
        let mut complete = 0;
        let mut before = 0;
        for i in 0..4 {
            if i == 1 {
                before = allocs(); // after the first frame warmed everything up
            }
            assert!(src.next_frame(&mut frame).unwrap());
            let mut pk = p.begin_frame(&frame).unwrap();
            while let Some(info) = pk.next_packet(&mut buf).unwrap() {
                for e in dep.push(Timestamp::ZERO, &buf[..info.len]) {
                    complete += usize::from(matches!(e, RawEvent::Complete(_)));
                }
            }
        }
        assert_eq!(
            allocs() - before,
            0,
            "{f}: allocations after the first frame"
        );
        assert_eq!(complete, 4);
        assert!(dep.frame().unwrap().data == frame.data);
    }
}

#[test]
fn file_sources_allocate_nothing_per_frame_even_when_looping() {
    let f = VideoFormat::new(64, 48, Sampling::Ycbcr422, Depth::Ten, 25, 1).unwrap();
    let dir = metronome_testkit::TempDir::new("raw-rt");
    let path = dir.join("loop.y4m");
    let mut w = Y4mWriter::new(std::fs::File::create(&path).unwrap(), f).unwrap();
    let pat = RawTestPattern::new(f).unwrap();
    let mut frame = RawFrame::new(f);
    for i in 0..3 {
        pat.render(i, &mut frame);
        w.write_frame(&frame).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let mut src = RawFileSource::open_y4m(&path).unwrap().looping(true);
    assert!(src.next_frame(&mut frame).unwrap());
    let before = allocs();
    for i in 1..10u64 {
        assert!(src.next_frame(&mut frame).unwrap());
        assert_eq!(RawTestPattern::decode_index(&frame), Some(i % 3));
    }
    assert_eq!(allocs() - before, 0, "allocations per frame");
}
