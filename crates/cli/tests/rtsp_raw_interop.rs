//! Uncompressed video served over RTSP (`metronome serve --raw --rtsp`), played by the real
//! programs a user would point at it:
//!
//! - GStreamer `rtspsrc ! rtpvrawdepay ! filesink`, over UDP and over TCP interleaved: the first
//!   frames it writes equal the served (looping) Y4M's, pixel for pixel (4:2:2; 720x576 over
//!   UDP, 352x288 over TCP);
//! - ffprobe (FFmpeg's RTSP client and RFC 4175 depayloader) decodes the mount over UDP and TCP.
//!
//! Every child is bounded in time and killed when a test fails.

mod common;

use common::{require, run, serial, tmp_dir, RtspServer, Running};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn tools() {
    require(
        "gst-launch-1.0",
        "gstreamer1.0-tools gstreamer1.0-plugins-good",
    );
    require("ffmpeg", "ffmpeg");
}

/// `frames` frames of ffmpeg's test picture at `size` 4:2:2 as Y4M (`ref.y4m`) and as the UYVY
/// bytes GStreamer should write (`want.raw`).
fn reference(dir: &Path, size: &str, frames: u32) {
    run(
        Command::new("ffmpeg")
            .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
            .arg(format!("testsrc2=size={size}:rate=25"))
            .args(["-frames:v", &frames.to_string(), "-pix_fmt", "yuv422p"])
            .args(["-f", "yuv4mpegpipe"])
            .arg(dir.join("ref.y4m")),
        Duration::from_secs(20),
    )
    .expect_success();
    run(
        Command::new("ffmpeg")
            .args(["-v", "error", "-y", "-i"])
            .arg(dir.join("ref.y4m"))
            .args(["-f", "rawvideo", "-pix_fmt", "uyvy422"])
            .arg(dir.join("want.raw")),
        Duration::from_secs(20),
    )
    .expect_success();
}

fn gst_rtsp_pixel_exact(protocols: &str, size: &str) {
    tools();
    let _one = serial();
    let dir = tmp_dir(&format!("rtsp-raw-gst-{protocols}"));
    let frames = 12;
    reference(&dir, size, frames);
    let (want, got) = (dir.join("want.raw"), dir.join("got.raw"));
    let ref_y4m = dir.join("ref.y4m");
    let server = RtspServer::start(&[
        "--raw",
        "-i",
        ref_y4m.to_str().unwrap(),
        "--pacing",
        "narrow-gapped",
        // Looping, so the stream does not end (with an RTCP BYE, which rtspsrc turns into an
        // EOS that may overtake the frames still in its jitter buffer) before GStreamer has
        // written the first 12 frames.
        "--loop",
    ]);
    let pipeline = format!(
        "rtspsrc location={} protocols={protocols} latency=300 udp-buffer-size=8388608 ! rtpvrawdepay \
         ! video/x-raw,format=UYVY ! filesink location={}",
        server.url("ref"),
        got.display()
    );
    let mut gst = Running::spawn(
        Command::new("gst-launch-1.0")
            .arg("-e")
            .args(pipeline.split_whitespace()),
    );
    let want_len = std::fs::metadata(&want).unwrap().len();
    let deadline = common::now() + Duration::from_secs(20);
    while std::fs::metadata(&got).map_or(0, |m| m.len()) < want_len
        && common::now() < deadline
        && !gst.has_exited()
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    gst.interrupt();
    let out = gst.finish_within(Duration::from_secs(10));
    let (mut g, w) = (
        std::fs::read(&got).unwrap_or_default(),
        std::fs::read(&want).unwrap(),
    );
    let frame_len = w.len() / frames as usize;
    g.truncate(w.len());
    assert_eq!(
        g.len(),
        w.len(),
        "GStreamer over {protocols} wrote {} frames of the {frames} served\n{}",
        g.len() / frame_len,
        out.report()
    );
    for (i, (a, b)) in g.chunks(frame_len).zip(w.chunks(frame_len)).enumerate() {
        let px = a.iter().zip(b).position(|(x, y)| x != y);
        assert!(
            px.is_none(),
            "{protocols}: frame {i} differs from byte {px:?} on"
        );
    }
    server.stop();
}

#[test]
fn gstreamer_rtspsrc_plays_a_raw_mount_pixel_exact_over_udp() {
    gst_rtsp_pixel_exact("udp", "720x576");
}

#[test]
fn gstreamer_rtspsrc_plays_a_raw_mount_pixel_exact_over_tcp() {
    // Smaller than over UDP: interleaved frames a client reads too slowly are dropped (the pacer
    // never blocks on TCP), and a loaded 2-CPU machine can stall GStreamer long enough to fill
    // the connection's 4 MB queue at 166 Mbit/s; at 352x288 it holds a second of video.
    gst_rtsp_pixel_exact("tcp", "352x288");
}

#[test]
fn ffprobe_decodes_a_raw_mount_over_udp_and_tcp() {
    tools();
    let _one = serial();
    let server = RtspServer::start(&["--raw", "--size", "320x240", "--fps", "25"]);
    for transport in ["udp", "tcp"] {
        let out = run(
            Command::new("ffprobe")
                .args(["-v", "error", "-rtsp_transport", transport])
                .args(["-count_frames", "-read_intervals", "%+2"])
                .args([
                    "-show_entries",
                    "stream=codec_name,pix_fmt,width,height,nb_read_frames",
                ])
                .args(["-of", "default=noprint_wrappers=1"])
                .arg(server.url("raw")),
            Duration::from_secs(30),
        )
        .expect_success();
        let s = &out.stdout;
        for want in [
            "codec_name=rawvideo",
            "pix_fmt=uyvy422",
            "width=320",
            "height=240",
        ] {
            assert!(s.contains(want), "{transport}: {want} in\n{s}");
        }
        let frames: u32 = s
            .lines()
            .find_map(|l| l.strip_prefix("nb_read_frames="))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        assert!(frames >= 25, "{transport}: {frames} frames in 2 s\n{s}");
    }
    server.stop();
}
