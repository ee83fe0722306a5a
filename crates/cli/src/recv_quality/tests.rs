//! The live viewer judged against a reference: a clean stream, a lossy one, a reference of
//! another size.
use super::*;
use metronome_media::testsrc::{TestSource, TestSourceConfig};
use metronome_media::{Frame, TestPattern, TsSource};
use metronome_quality::y4m::{Format, Writer};
use metronome_wire::Ssrc;
use std::time::Duration;

/// 1 s of the test source at 160x96, 25 fps, as RTP payloads of seven TS packets, with
/// the reference pictures as a Y4M file in memory.
fn stream() -> (Vec<Vec<u8>>, Vec<u8>) {
    let cfg = TestSourceConfig {
        width: 160,
        height: 96,
        fps: 25,
        video_bitrate: 400_000,
        mux_rate: 1_000_000,
        scene_secs: 1,
        duration: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    let mut src = TestSource::new(cfg).unwrap();
    let mut payloads = Vec::new();
    let mut cur = Vec::new();
    let mut ts = [0u8; 188];
    while src.next_packet(&mut ts).unwrap().is_some() {
        cur.extend_from_slice(&ts);
        if cur.len() == 7 * 188 {
            payloads.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        payloads.push(cur);
    }
    let pattern = TestPattern::new(25, 1).unwrap();
    let mut frame = Frame::new(160, 96).unwrap();
    let mut pic = Picture::black(160, 96, Chroma::C420);
    let mut w = Writer::new(
        Vec::new(),
        Format {
            width: 160,
            height: 96,
            chroma: Chroma::C420,
            fps: (25, 1),
        },
    )
    .unwrap();
    for i in 0..25 {
        pattern.render(i, &mut frame);
        frame.copy_to(&mut pic);
        w.write(&pic).unwrap();
    }
    (payloads, w.into_inner())
}

fn judge_with(viewer: &mut LiveViewer, y4m: &[u8]) -> LiveQuality {
    let reader = Reader::y4m(std::io::Cursor::new(y4m.to_vec())).unwrap();
    let mut csv = Vec::new();
    let mut shown = Vec::new();
    let q = judge(
        viewer,
        reader,
        "ref.y4m",
        JudgeOptions::default(),
        Some(&mut csv),
        Some(ShownVideo {
            out: &mut shown,
            y4m: true,
        }),
    )
    .unwrap();
    // The video as shown: a Y4M of every slot, comparable with the reference again.
    let mut r = Reader::y4m(std::io::Cursor::new(shown)).unwrap();
    let mut pic = Picture::black(2, 2, Chroma::C420);
    let mut n = 0;
    while r.next_into(&mut pic).unwrap() {
        n += 1;
    }
    assert_eq!(n, q.frames);
    assert_eq!(
        String::from_utf8(csv).unwrap().lines().count() as u64,
        q.frames
    );
    q
}

#[test]
fn a_reference_of_another_size_is_refused_with_how_to_make_one() {
    let (payloads, _) = stream();
    let mut viewer = LiveViewer::default();
    for (k, p) in payloads.iter().enumerate() {
        viewer.payload(&record(7, k), p);
    }
    // A reference at 80x48: the stream's 160x96 pictures cannot be compared with it.
    let mut w = Writer::new(
        Vec::new(),
        Format {
            width: 80,
            height: 48,
            chroma: Chroma::C420,
            fps: (25, 1),
        },
    )
    .unwrap();
    for _ in 0..25 {
        w.write(&Picture::black(80, 48, Chroma::C420)).unwrap();
    }
    let reader = Reader::y4m(std::io::Cursor::new(w.into_inner())).unwrap();
    let e = judge(
        &mut viewer,
        reader,
        "small.y4m",
        JudgeOptions::default(),
        None,
        None,
    )
    .unwrap_err();
    assert!(
        e.starts_with(
            "small.y4m: the reference is 80x48 420jpeg, the stream's pictures are 160x96"
        ) && e.contains("-vf scale=160:96"),
        "{e}"
    );
}

/// What the session makes of the `k`th packet of `ssrc`, arrived at `k` ms.
fn record(ssrc: u32, k: usize) -> PacketRecord {
    PacketRecord {
        ssrc: Ssrc(ssrc),
        seq: metronome_wire::SeqNo(k as u16),
        ext_seq: k as u64,
        rtp_ts: RtpTime(0),
        marker: false,
        arrival: Timestamp::from_millis(k as u64),
        size: 0,
        payload: 0..0,
        verdict: metronome_session::receiver::SeqVerdict::InOrder,
        transit_ticks: 0,
        jitter_ticks: 0.0,
        interarrival_ns: None,
        one_way_delay_ns: None,
        repaired: false,
    }
}

#[test]
fn a_clean_stream_is_what_the_encoder_made_and_a_lost_packet_costs_its_frames() {
    let (payloads, y4m) = stream();
    let mut clean = LiveViewer::default();
    for (k, p) in payloads.iter().enumerate() {
        clean.payload(&record(7, k), p);
    }
    let q = judge_with(&mut clean, &y4m);
    assert!(q.video_found);
    assert_eq!((q.frames, q.frames_lost, q.undecodable), (25, 0, 0));
    assert!(q.psnr_mean.y_db > 35.0 && q.mos_mean > 4.0, "{q:?}");

    // The same stream with packets in a different order (within the window), a
    // duplicate-free copy from another source, and one packet of the IDR picture lost.
    let mut lossy = LiveViewer::default();
    let mut order: Vec<usize> = (0..payloads.len()).collect();
    order.swap(5, 9);
    for k in order {
        if k == 1 {
            continue; // inside the first (IDR) picture
        }
        lossy.payload(&record(7, k), &payloads[k]);
        lossy.payload(&record(8, k), &payloads[k]);
    }
    let l = judge_with(&mut lossy, &y4m);
    assert_eq!(l.counts.gaps, 1);
    assert_eq!(l.counts.other_source_packets, payloads.len() as u64 - 1);
    assert!(l.frames_lost_i >= 1, "{l:?}");
    assert!(l.psnr_mean.y_db < q.psnr_mean.y_db, "{l:?}");
    // Nothing decodes before the next IDR (a second away): the screen stays black.
    assert_eq!(l.frames, 25);
    assert_eq!(l.mos_frames[0], 25, "{l:?}");
}
