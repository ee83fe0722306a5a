use super::*;
use metronome_media::uncompressed::{Depth, Sampling};

fn fmt(w: u32, h: u32, s: Sampling) -> VideoFormat {
    VideoFormat::new(w, h, s, Depth::Eight, 30, 1).unwrap()
}

#[test]
fn fourcc_choice_and_preference() {
    let c = |f: &[u8; 4]| capture_format(*f).map(|c| (c.sampling, c.depth, c.conversion));
    assert_eq!(
        c(b"UYVY"),
        Some((Sampling::Ycbcr422, Depth::Eight, Conversion::Uyvy))
    );
    assert_eq!(
        c(b"YUYV"),
        Some((Sampling::Ycbcr422, Depth::Eight, Conversion::Yuyv))
    );
    assert_eq!(
        c(b"NV12"),
        Some((Sampling::Ycbcr420, Depth::Eight, Conversion::Nv12))
    );
    assert_eq!(
        c(b"YU12"),
        Some((Sampling::Ycbcr420, Depth::Eight, Conversion::I420))
    );
    assert_eq!(
        c(b"RGB3"),
        Some((Sampling::Rgb, Depth::Eight, Conversion::Rgb24))
    );
    assert_eq!(c(b"MJPG"), None);
    assert_eq!(c(b"H264"), None);
    let pick = |l: &[&[u8; 4]]| {
        let v: Vec<[u8; 4]> = l.iter().map(|f| **f).collect();
        choose_format(&v).map(|c| c.fourcc)
    };
    assert_eq!(pick(&[b"MJPG", b"YUYV", b"UYVY"]), Some(*b"UYVY"));
    assert_eq!(pick(&[b"RGB3", b"YU12", b"NV12"]), Some(*b"NV12"));
    assert_eq!(pick(&[b"RGB3", b"MJPG"]), Some(*b"RGB3"));
    assert_eq!(pick(&[b"MJPG", b"H264"]), None);
    assert_eq!(fourcc_str(*b"MJPG"), "MJPG");
    assert_eq!(fourcc_str(*b"Y16 "), "Y16");
    assert_eq!(fourcc_str([b'A', 0, 0xff, b'B']), "A\\x00\\xffB");
}

#[test]
fn yuyv_row_becomes_uyvy() {
    // Y'0 C'b Y'1 C'r  →  C'b Y'0 C'r Y'1
    let src = [0x10, 0x80, 0x20, 0x90, 0x30, 0x81, 0x40, 0x91];
    let mut dst = [0u8; 8];
    yuyv_row_to_uyvy(&src, &mut dst);
    assert_eq!(dst, [0x80, 0x10, 0x90, 0x20, 0x81, 0x30, 0x91, 0x40]);
}

#[test]
fn packed_frames_with_padded_lines() {
    // 4x2 YUYV, 10 bytes per line (2 of padding, 0xEE).
    let f = fmt(4, 2, Sampling::Ycbcr422);
    let src = [
        1, 2, 3, 4, 5, 6, 7, 8, 0xee, 0xee, //
        11, 12, 13, 14, 15, 16, 17, 18, 0xee, 0xee,
    ];
    let mut dst = vec![0u8; f.frame_bytes()];
    to_payload(Conversion::Yuyv, &f, 10, &src, &mut [], &mut dst).unwrap();
    assert_eq!(
        dst,
        [2, 1, 4, 3, 6, 5, 8, 7, 12, 11, 14, 13, 16, 15, 18, 17]
    );
    // The same bytes as UYVY are copied as they are, padding dropped; the last line need
    // not be padded.
    to_payload(Conversion::Uyvy, &f, 10, &src[..18], &mut [], &mut dst).unwrap();
    assert_eq!(
        dst,
        [1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 16, 17, 18]
    );
    // RGB24 2x1.
    let f = fmt(2, 1, Sampling::Rgb);
    let mut dst = vec![0u8; 6];
    to_payload(
        Conversion::Rgb24,
        &f,
        6,
        &[9, 8, 7, 6, 5, 4],
        &mut [],
        &mut dst,
    )
    .unwrap();
    assert_eq!(dst, [9, 8, 7, 6, 5, 4]);
}

#[test]
fn nv12_to_payload_order() {
    // 4x2: one row of two 4:2:0 pgroups Y'00 Y'01 Y'10 Y'11 C'b C'r.
    let f = fmt(4, 2, Sampling::Ycbcr420);
    let tight = [1, 2, 3, 4, 5, 6, 7, 8, 10, 20, 11, 21];
    let mut i420 = [0u8; 12];
    nv12_to_i420(4, 2, 4, &tight, &mut i420).unwrap();
    assert_eq!(i420, [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 20, 21]);
    let want = [1, 2, 5, 6, 10, 20, 3, 4, 7, 8, 11, 21];
    let mut scratch = vec![0u8; Layout::I420.frame_len(&f)];
    let mut dst = vec![0u8; f.frame_bytes()];
    to_payload(Conversion::Nv12, &f, 4, &tight, &mut scratch, &mut dst).unwrap();
    assert_eq!(dst, want);
    // Lines padded to 6 bytes.
    let padded = [
        1, 2, 3, 4, 0xee, 0xee, 5, 6, 7, 8, 0xee, 0xee, 10, 20, 11, 21, 0xee, 0xee,
    ];
    dst.fill(0);
    to_payload(Conversion::Nv12, &f, 6, &padded, &mut scratch, &mut dst).unwrap();
    assert_eq!(dst, want);
    // I420 (YU12), tight and padded (luma 6, chroma 3 bytes per line).
    let i420_tight = [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 20, 21];
    dst.fill(0);
    to_payload(Conversion::I420, &f, 4, &i420_tight, &mut scratch, &mut dst).unwrap();
    assert_eq!(dst, want);
    let i420_padded = [
        1, 2, 3, 4, 0xee, 0xee, 5, 6, 7, 8, 0xee, 0xee, 10, 11, 0xee, 20, 21, 0xee,
    ];
    dst.fill(0);
    to_payload(
        Conversion::I420,
        &f,
        6,
        &i420_padded,
        &mut scratch,
        &mut dst,
    )
    .unwrap();
    assert_eq!(dst, want);
}

#[test]
fn short_and_wrong_sized_buffers_are_refused_not_read_past() {
    let f = fmt(4, 2, Sampling::Ycbcr420);
    let mut scratch = vec![0u8; Layout::I420.frame_len(&f)];
    let mut dst = vec![0u8; f.frame_bytes()];
    for conv in [Conversion::Nv12, Conversion::I420] {
        for n in [0, 1, 11] {
            assert_eq!(
                to_payload(conv, &f, 4, &vec![0; n], &mut scratch, &mut dst),
                Err(Skip::Short { got: n, need: 12 })
            );
        }
    }
    // A scratch frame too small, or a destination of the wrong size: refused too.
    assert!(to_payload(Conversion::Nv12, &f, 4, &[0; 12], &mut [0; 5], &mut dst).is_err());
    assert!(to_payload(Conversion::Nv12, &f, 4, &[0; 12], &mut scratch, &mut [0; 3]).is_err());
    let f = fmt(4, 2, Sampling::Ycbcr422);
    let mut dst = vec![0u8; f.frame_bytes()];
    assert_eq!(
        to_payload(Conversion::Yuyv, &f, 10, &[0; 17], &mut [], &mut dst),
        Err(Skip::Short { got: 17, need: 18 })
    );
    // Fewer bytes per line than a line holds.
    assert!(to_payload(Conversion::Uyvy, &f, 6, &[0; 64], &mut [], &mut dst).is_err());
    assert_eq!(
        needed_bytes(Conversion::I420, 640, 480, 640),
        640 * 480 * 3 / 2
    );
    assert_eq!(
        needed_bytes(Conversion::Nv12, 640, 480, 640),
        640 * 480 * 3 / 2
    );
    assert_eq!(
        needed_bytes(Conversion::Uyvy, 640, 480, 1280),
        640 * 480 * 2
    );
}

#[test]
fn monotonic_timestamps_move_onto_the_wall_clock() {
    let offset: i128 = 1_700_000_000_000_000_000 - 100_000_000_000;
    let now = 100_600_000_000u64; // CLOCK_MONOTONIC 100.6 s
    let mono = BUF_FLAG_TIMESTAMP_MONOTONIC;
    assert_eq!(
        capture_realtime_ns(mono, 100, 500_000, now, offset),
        Some(1_700_000_000_500_000_000)
    );
    // Start-of-exposure flag: still a monotonic timestamp.
    assert_eq!(
        capture_realtime_ns(mono | BUF_FLAG_TSTAMP_SRC_SOE, 100, 1, now, offset),
        Some(1_700_000_000_000_001_000)
    );
    // Copied or unknown timestamps, zero, malformed, future or stale: not used.
    assert_eq!(capture_realtime_ns(0x4000, 100, 0, now, offset), None);
    assert_eq!(capture_realtime_ns(0, 100, 0, now, offset), None);
    assert_eq!(capture_realtime_ns(mono, 0, 0, now, offset), None);
    assert_eq!(capture_realtime_ns(mono, 100, 1_000_000, now, offset), None);
    assert_eq!(capture_realtime_ns(mono, -1, 0, now, offset), None);
    assert_eq!(capture_realtime_ns(mono, 100, 601_001, now, offset), None);
    assert_eq!(
        capture_realtime_ns(mono, 100, 601_000, now, offset),
        Some(1_700_000_000_601_000_000)
    );
    assert_eq!(capture_realtime_ns(mono, 90, 599_999, now, offset), None);
    // A negative wall-clock result is refused, not wrapped.
    assert_eq!(
        capture_realtime_ns(mono, 100, 0, now, -200_000_000_000),
        None
    );
}

#[test]
fn frame_rate_of_time_per_frame() {
    assert_eq!(fps_of(1, 30), Some((30, 1)));
    assert_eq!(fps_of(1001, 30000), Some((30000, 1001)));
    assert_eq!(fps_of(2, 50), Some((25, 1)));
    assert_eq!(fps_of(0, 30), None);
    assert_eq!(fps_of(1, 0), None);
}

#[test]
fn opening_what_is_not_a_camera_says_so() {
    let e = V4l2Source::open(Path::new("/dev/video-metronome-none"), None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with("no V4L2 device at /dev/video-metronome-none (No such file or directory)")
            && e.contains("modprobe vivid"),
        "{e}"
    );
    let e = V4l2Source::open(Path::new("/dev/null"), Some((640, 480, 30)))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("/dev/null is not a V4L2 video device"), "{e}");
    assert!(e.contains("v4l2-ctl --list-devices"), "{e}");
    let file = std::env::temp_dir().join(format!("metronome-v4l2-{}", std::process::id()));
    std::fs::write(&file, b"not a camera").unwrap();
    let e = V4l2Source::open(&file, None).err().unwrap().to_string();
    std::fs::remove_file(&file).unwrap();
    assert!(
        e.contains("is not a V4L2 video device (a regular file)"),
        "{e}"
    );
    let e = V4l2Source::open(&std::env::temp_dir(), None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("is not a V4L2 video device (a directory)"),
        "{e}"
    );
}

/// A camera stand-in: a frame every 5 ms (the format says 25 fps), captured 3 ms before
/// `next_frame` returns it.
struct FakeCamera {
    format: VideoFormat,
    clock: Clock,
    n: u64,
}

impl RawSource for FakeCamera {
    fn format(&self) -> VideoFormat {
        self.format
    }
    fn next_frame(&mut self, into: &mut RawFrame) -> Result<bool, MediaError> {
        std::thread::sleep(Duration::from_millis(5));
        into.reshape(self.format);
        into.data.fill(self.n as u8);
        into.index = self.n;
        into.capture_ns = self.clock.realtime_ns() - 3_000_000;
        self.n += 1;
        Ok(true)
    }
    fn describe(&self) -> String {
        "fake camera".into()
    }
    fn self_timed(&self) -> bool {
        true
    }
}

/// The sender does not hold a self-timed source to the frame grid (on the grid, 10 frames at
/// 25 fps take 360 ms after its 200 ms preroll; these come every 5 ms), and keeps the capture
/// time the source set (the receiver's latency includes the 3 ms before `next_frame`
/// returned). Its run is timed to its last packet: it then waits a quarter second more
/// before its RTCP BYE (`streams/server/farewell.rs`).
#[test]
fn a_self_timed_source_is_sent_when_ready_with_its_capture_time() {
    use metronome_sched::SenderType;

    let f = fmt(64, 48, Sampling::Ycbcr422);
    let clock = Clock::new();
    let src = Box::new(FakeCamera {
        format: f,
        clock,
        n: 0,
    });
    let (s, r) = crate::uncompressed::tests::loopback(src, 10, |cfg| cfg.model = SenderType::Burst);
    let took = s.duration_us.to_duration();
    assert_eq!(
        (s.frames_sent, s.ended_by),
        (10, metronome_rt::run::EndedBy::Frames)
    );
    assert_eq!(s.frames_not_ready, 0);
    assert!(took < Duration::from_millis(200), "took {took:?}");
    assert_eq!(r.frames_complete, 10, "{r:?}");
    assert!(
        r.latency_us.min >= metronome_time::Micros::from_micros(3000),
        "{:?}",
        r.latency_us
    );
}

#[test]
fn ioctl_numbers_match_videodev2_h() {
    // The values of videodev2.h on 64-bit Linux.
    if cfg!(target_pointer_width = "64") {
        assert_eq!(sys::VIDIOC_QUERYCAP, 0x8068_5600);
        assert_eq!(sys::VIDIOC_REQBUFS, 0xc014_5608);
        assert_eq!(sys::VIDIOC_QUERYBUF, 0xc058_5609);
        assert_eq!(sys::VIDIOC_QBUF, 0xc058_560f);
        assert_eq!(sys::VIDIOC_DQBUF, 0xc058_5611);
        assert_eq!(sys::VIDIOC_STREAMON, 0x4004_5612);
        assert_eq!(sys::VIDIOC_STREAMOFF, 0x4004_5613);
        assert_eq!(sys::VIDIOC_G_PARM, 0xc0cc_5615);
    }
}
