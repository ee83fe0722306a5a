//! `serve --codec`: video as Evalvid-RA sends it (a quantizer ladder, frames as coded over RTP
//! without MPEG-TS), played by the real programs from the SDP `serve --sdp` writes: FFmpeg and
//! GStreamer decode every frame sent (MPEG-4 Part 2 as RFC 6416, H.264 with B-frames as RFC
//! 6184), and VLC (Debian's, whose SDP files go through its avformat demuxer) records it.
//!
//! Each player starts first, from the SDP of an earlier run of the same stream (the ladder is
//! then in the cache, and the description the same), so that it waits for the first packet.

mod common;

use common::{bin, port_pair, require, run, tmp_dir, Outcome, Running};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Frames a stream of [`SECS`] at 25 fps has.
const FRAMES: usize = 125;
const SECS: &str = "5s";

/// `serve --codec CODEC` of QCIF motion at 25 fps, GOP 12, to 127.0.0.1:`port`, its SDP
/// written to `sdp`, for `secs`.
fn serve(codec: &str, extra: &[&str], port: u16, sdp: &Path, secs: &str) -> Command {
    let mut c = bin();
    c.args([
        "serve", "--codec", codec, "--size", "176x144", "--fps", "25",
    ])
    .args(["--gop", "12", "--bitrate", "400k", "--rt", "off"])
    .args(["--duration", secs, "--sdp"])
    .arg(sdp)
    .args(extra)
    .arg(format!("rtp://127.0.0.1:{port}"));
    c
}

/// The SDP of the stream (the ladder encoded now, if the cache lacks it): a short run to a
/// port nobody listens on yet.
fn describe(codec: &str, extra: &[&str], port: u16, dir: &Path) -> PathBuf {
    let sdp = dir.join(format!("{codec}.sdp"));
    run(
        &mut serve(codec, extra, port, &sdp, "200ms"),
        Duration::from_secs(240),
    )
    .expect_success();
    let _ = Command::new("chmod").arg("0644").arg(&sdp).status();
    sdp
}

/// Starts `player`, gives it a second to open its sockets, sends the stream, and waits for
/// the player to end (at most 30 s).
fn play(player: &mut Command, codec: &str, extra: &[&str], port: u16, sdp: &Path) -> Outcome {
    let p = Running::spawn(player);
    std::thread::sleep(Duration::from_secs(1));
    let sent = run(
        &mut serve(codec, extra, port, sdp, SECS),
        Duration::from_secs(60),
    );
    assert!(sent.succeeded(), "the server: {}", sent.report());
    p.finish_within(Duration::from_secs(30))
}

/// FFmpeg decodes the stream: the frames it decoded (one framemd5 line each) and its error
/// lines. It stops after [`FRAMES`] frames.
fn ffmpeg(codec: &str, extra: &[&str], port: u16, sdp: &Path) -> (usize, Vec<String>, Outcome) {
    let mut c = Command::new("ffmpeg");
    c.args([
        "-nostdin",
        "-v",
        "error",
        "-protocol_whitelist",
        "file,udp,rtp",
    ])
    .arg("-i")
    .arg(sdp)
    .args(["-fps_mode", "passthrough", "-frames:v"])
    .arg(FRAMES.to_string())
    .args(["-f", "framemd5", "-"]);
    let out = play(&mut c, codec, extra, port, sdp);
    let frames = out
        .stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .count();
    let errors = out.stderr.lines().map(str::to_string).collect();
    (frames, errors, out)
}

/// GStreamer decodes [`FRAMES`] frames through `depay ! decoder`, then stops by itself.
fn gstreamer(codec: &str, extra: &[&str], port: u16, sdp: &Path, chain: &[&str]) -> Outcome {
    let mut c = Command::new("gst-launch-1.0");
    c.args(["-q", "filesrc"])
        .arg(format!("location={}", sdp.display()))
        .args(["!", "sdpdemux", "!"])
        .args(chain)
        .args(["!", "identity"])
        .arg(format!("eos-after={FRAMES}"))
        .args(["!", "fakesink"]);
    play(&mut c, codec, extra, port, sdp)
}

#[test]
fn an_mpeg4_ladder_plays_in_ffmpeg_gstreamer_and_vlc_from_its_sdp() {
    require("ffmpeg", "ffmpeg");
    require("gst-launch-1.0", "gstreamer1.0-tools");
    require("cvlc", "vlc-bin");
    require("setpriv", "util-linux");
    let dir = tmp_dir("coded-mpeg4");
    let port = port_pair();
    let extra = ["--quantizers", "4-8"];
    let sdp = describe("mpeg4", &extra, port, &dir);
    let text = std::fs::read_to_string(&sdp).unwrap();
    for line in [
        &format!("m=video {port} RTP/AVP 96"),
        "a=rtpmap:96 MP4V-ES/90000",
        "a=fmtp:96 profile-level-id=",
        ";config=000001B0",
    ] {
        assert!(text.contains(line), "'{line}' missing from:\n{text}");
    }

    let (frames, errors, out) = ffmpeg("mpeg4", &extra, port, &sdp);
    assert!(
        frames == FRAMES && errors.is_empty(),
        "FFmpeg decoded {frames} of {FRAMES} frames; {}",
        out.report()
    );

    let out = gstreamer(
        "mpeg4",
        &extra,
        port,
        &sdp,
        &["rtpmp4vdepay", "!", "avdec_mpeg4"],
    );
    assert!(
        out.succeeded(),
        "GStreamer did not decode {FRAMES} frames: {}",
        out.report()
    );

    // VLC records what it receives for 6 s; the recording is decoded by ffprobe.
    let rec = dir.join("vlc.ts");
    let _ = std::fs::remove_file(&rec);
    let mut vlc = Command::new("setpriv");
    vlc.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "env"])
        .arg(format!("HOME={}", dir.display()))
        .args(["cvlc", "-I", "dummy", "--no-audio"])
        .args(["--demux", "avformat", "--avformat-format", "sdp"])
        .arg(&sdp)
        .args(["--run-time", "6", "--sout"])
        .arg(format!("#std{{access=file,mux=ts,dst={}}}", rec.display()))
        .arg("vlc://quit");
    let out = play(&mut vlc, "mpeg4", &extra, port, &sdp);
    assert!(out.succeeded(), "cvlc: {}", out.report());
    let probe = run(
        Command::new("ffprobe")
            .args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
            .args(["-show_entries", "stream=codec_name,nb_read_frames"])
            .args(["-of", "csv=p=0"])
            .arg(&rec),
        Duration::from_secs(30),
    );
    // (ffprobe prints the stream once for its program and once on its own.)
    let line = probe.stdout.lines().next().unwrap_or("").trim().to_string();
    let recorded: usize = line
        .strip_prefix("mpeg4,")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    // VLC starts its recording at the first key frame it sees, so up to a GOP may be missing.
    assert!(
        recorded >= FRAMES - 12,
        "VLC's recording should hold the MPEG-4 stream's {FRAMES} frames but for at most a \
         GOP; ffprobe says '{line}': {}\n--- VLC ---\n{}",
        probe.report(),
        out.report()
    );
}

#[test]
fn an_h264_ladder_with_b_frames_plays_in_ffmpeg_and_gstreamer_from_its_sdp() {
    require("ffmpeg", "ffmpeg");
    require("gst-launch-1.0", "gstreamer1.0-tools");
    let dir = tmp_dir("coded-h264");
    let port = port_pair();
    let extra = ["--quantizers", "24-28", "--b-frames", "2"];
    let sdp = describe("h264", &extra, port, &dir);
    let text = std::fs::read_to_string(&sdp).unwrap();
    for line in [
        "a=rtpmap:96 H264/90000",
        "a=fmtp:96 packetization-mode=1;profile-level-id=",
        ";sprop-parameter-sets=Z",
    ] {
        assert!(text.contains(line), "'{line}' missing from:\n{text}");
    }

    let (frames, errors, out) = ffmpeg("h264", &extra, port, &sdp);
    assert!(
        frames == FRAMES && errors.is_empty(),
        "FFmpeg decoded {frames} of {FRAMES} frames; {}",
        out.report()
    );

    let out = gstreamer(
        "h264",
        &extra,
        port,
        &sdp,
        &["rtph264depay", "!", "avdec_h264"],
    );
    assert!(
        out.succeeded(),
        "GStreamer did not decode {FRAMES} frames: {}",
        out.report()
    );
}
