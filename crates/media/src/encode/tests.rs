use super::*;
use crate::decode::VideoDecoder;
use crate::pattern::{Frame, TestPattern};
use metronome_quality::playout::{reconstruct, Playout, SentFrame};
use metronome_quality::viewer::{display_order, play, Decode};
use metronome_quality::{psnr, Chroma};

/// `n` pictures of the pattern's high-motion scene at `w`×`h`.
fn pictures(w: u32, h: u32, n: u64) -> Vec<Picture> {
    let pattern = TestPattern::new(25, 1).unwrap();
    let mut f = Frame::new(w, h).unwrap();
    (0..n)
        .map(|i| {
            pattern.render(50 + i, &mut f);
            let mut p = Picture::black(w as usize, h as usize, Chroma::C420);
            f.copy_to(&mut p);
            p
        })
        .collect()
}

fn encode(cfg: EncoderConfig, pics: &[Picture]) -> Vec<CodedFrame> {
    let mut enc = FixedQuantizer::new(cfg).unwrap();
    let mut out = Vec::new();
    for p in pics {
        enc.push(p).unwrap();
        out.extend(std::iter::from_fn(|| enc.pop()));
    }
    enc.finish().unwrap();
    out.extend(std::iter::from_fn(|| enc.pop()));
    out
}

/// Every frame decoded and shown in its slot; the mean PSNR of Y against `pics`.
fn decoded_psnr(codec: VideoCodec, coded: &[CodedFrame], pics: &[Picture]) -> f64 {
    let n = pics.len();
    let mut by_frame: Vec<&[u8]> = vec![&[]; n];
    for c in coded {
        by_frame[c.frame as usize] = &c.data;
    }
    let order: Vec<u32> = coded.iter().map(|c| c.frame).collect();
    let sent: Vec<SentFrame> = (0..n)
        .map(|k| SentFrame {
            kind: FrameType::Other,
            size_bytes: 1,
            packets: vec![k as u64],
            send_ns: k as u64 * 40_000_000,
        })
        .collect();
    let all: Vec<(u64, u64)> = (0..n as u64).map(|k| (k, k * 40_000_000)).collect();
    let rec = reconstruct(&sent, &all, Playout::default());
    let mut dec = VideoDecoder::new(codec, None).unwrap();
    let blank = Picture::black(pics[0].width, pics[0].height, Chroma::C420);
    let mut sum = 0.0;
    let stats = play(
        &sent,
        &rec,
        Playout::default(),
        &by_frame,
        &order,
        &mut dec,
        &blank,
        |j, shown| sum += psnr::frame(&pics[j], shown).y_db,
    );
    assert_eq!((stats.undecodable, stats.blank_slots), (0, 0), "{stats:?}");
    sum / n as f64
}

#[test]
fn the_mpeg4_ladder_falls_in_bytes_and_quality_with_the_quantizer() {
    let pics = pictures(176, 144, 24);
    let mut last = (usize::MAX, f64::INFINITY);
    for q in [2, 8, 31] {
        let cfg = EncoderConfig {
            width: 176,
            height: 144,
            ..EncoderConfig::seed002(q)
        };
        let coded = encode(cfg, &pics);
        assert_eq!(coded.len(), 24);
        let kinds: String = coded.iter().map(|c| c.kind.letter()).collect();
        assert_eq!(kinds, "IPPPPPPPPPPPIPPPPPPPPPPP", "GOP 12, no B-frames");
        assert!(coded.iter().enumerate().all(|(i, c)| c.frame == i as u32));
        let bytes: usize = coded.iter().map(|c| c.data.len()).sum();
        let p = decoded_psnr(VideoCodec::Mpeg4Part2, &coded, &pics);
        assert!(
            bytes < last.0 && p < last.1,
            "q {q}: {bytes} B, {p:.2} dB after {last:?}"
        );
        last = (bytes, p);
    }
    assert!(last.1 > 20.0, "{last:?}");
}

/// H.264 and MPEG-4 Part 2 with B-frames (seed 002's play-out clip has them): sent in decode
/// order, shown in display order, every picture its own.
#[test]
fn b_frames_come_back_in_display_order() {
    for codec in [VideoCodec::H264, VideoCodec::Mpeg4Part2] {
        b_frames_of(codec);
    }
}

fn b_frames_of(codec: VideoCodec) {
    let pics = pictures(160, 96, 30);
    let cfg = EncoderConfig {
        codec,
        width: 160,
        height: 96,
        fps: 25,
        gop: 12,
        b_frames: 2,
        quantizer: if codec == VideoCodec::H264 { 20 } else { 4 },
    };
    let coded = encode(cfg, &pics);
    assert_eq!(coded.len(), 30, "{codec:?}");
    assert!(coded.iter().any(|c| c.kind == FrameType::B), "{codec:?}");
    let order: Vec<u32> = coded.iter().map(|c| c.frame).collect();
    assert_ne!(
        order,
        display_order(30),
        "B-frames are sent out of display order"
    );
    assert_eq!(coded[0].kind, FrameType::I);
    let p = decoded_psnr(codec, &coded, &pics);
    assert!(p > 35.0, "{codec:?}: {p}");
}

#[test]
fn garbage_is_refused_or_concealed_never_a_crash() {
    for codec in [VideoCodec::Mpeg4Part2, VideoCodec::H264] {
        let mut dec = VideoDecoder::new(codec, None).unwrap();
        let mut out = Picture::black(2, 2, Chroma::C420);
        for (k, junk) in [&[][..], &[0, 0, 1, 0xb6, 0xff][..], &[0xff; 300][..]]
            .iter()
            .enumerate()
        {
            let _ = dec.send(k as u32, junk);
            while dec.receive(&mut out).is_some() {}
        }
        dec.drain();
        while dec.receive(&mut out).is_some() {}
    }
}

#[test]
fn settings_out_of_range_are_refused_with_why() {
    let e = FixedQuantizer::new(EncoderConfig::seed002(1))
        .err()
        .unwrap();
    assert!(e.to_string().contains("2–31"), "{e}");
    let odd = EncoderConfig {
        width: 351,
        ..EncoderConfig::seed002(5)
    };
    assert!(FixedQuantizer::new(odd).is_err());
}

/// The generated high-motion content codes as seed 002's *highway* does (Table 2: 2.6 Mbit/s at
/// quantizer 2 to 66 kbit/s at 31): each rung within a factor of two of the table's, the
/// picture from excellent (> 37 dB) at quantizer 2 to fair or worse (< 31 dB) at 31, rate and
/// quality falling all the way. Two seconds of CIF.
#[test]
fn motion_content_spans_the_ladder_and_the_mos_scale() {
    use crate::motion::Motion;
    use crate::pattern::Pictures;
    let mut m = Motion::new(25, 1).unwrap();
    let mut f = Frame::new(352, 288).unwrap();
    let pics: Vec<Picture> = (0..50)
        .map(|i| {
            m.picture(i, &mut f).unwrap();
            let mut p = Picture::black(352, 288, Chroma::C420);
            f.copy_to(&mut p);
            p
        })
        .collect();
    let mut seen = Vec::new();
    for q in [2, 4, 8, 16, 31] {
        let coded = encode(EncoderConfig::seed002(q), &pics);
        let bytes: usize = coded.iter().map(|c| c.data.len()).sum();
        let kbps = bytes as f64 * 8.0 / 2.0 / 1000.0;
        let p = decoded_psnr(VideoCodec::Mpeg4Part2, &coded, &pics);
        eprintln!("q {q:2}: {kbps:7.1} kbit/s, PSNR-Y {p:.2} dB");
        seen.push((kbps, p));
    }
    for w in seen.windows(2) {
        assert!(w[1].0 < w[0].0 && w[1].1 < w[0].1, "{seen:?}");
    }
    assert!(seen[0].1 > 37.0 && seen[4].1 < 31.0, "{seen:?}");
    for ((kbps, _), q) in seen.iter().zip([2, 4, 8, 16, 31]) {
        let table = crate::ladder::SEED002_TABLE2_KBPS[q as usize - 2].1;
        assert!((0.5..2.0).contains(&(kbps / table)), "q {q}: {seen:?}");
    }
}
