//! SDP files for plain RTP sessions, as `serve --sdp-dir` writes them and `metronome sdp` prints
//! them, opened by the real programs: ffprobe and GStreamer's sdpdemux decode the stream they
//! describe.

mod common;

use common::{bin, port_pair, require, run, tmp_dir};
use std::process::{Command, Stdio};
use std::time::Duration;

/// What `metronome sdp cam --stream SPEC` prints; it must succeed.
fn sdp_of(spec: &str) -> String {
    let out = bin()
        .args(["sdp", "cam", "--stream", spec])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn sdp_command_prints_the_session_of_a_declared_stream() {
    let sdp = sdp_of("name=cam,destination=rtp://239.255.1.2:5004?ttl=3,bitrate=2mbit");
    for line in [
        "v=0",
        "c=IN IP4 239.255.1.2/3",
        "m=video 5004 RTP/AVP 33",
        "a=rtpmap:33 MP2T/90000",
        "b=AS:2000",
    ] {
        assert!(sdp.contains(line), "{line} missing from:\n{sdp}");
    }
    assert!(sdp.contains("\r\n"), "CRLF line ends (RFC 8866 §5)");
    // A declared SSRC names the sources (RFC 5576), the retransmission's paired with the
    // media's as WebRTC pairs them: 0x12345678 ^ "RTX\0" is 1080036984.
    let sdp = sdp_of("name=cam,destination=rtp://127.0.0.1:5004,repair=rtx,ssrc=305419896");
    for line in [
        "m=video 5004 RTP/AVPF 33 97",
        "a=ssrc-group:FID 305419896 1080036984",
        "a=ssrc:305419896 cname:metronome-12345678-cam",
        "a=ssrc:1080036984 cname:metronome-12345678-cam",
    ] {
        assert!(sdp.contains(line), "{line} missing from:\n{sdp}");
    }
    // Only to a group does the server tell which losses it repairs (RFC 6642's TLLEI).
    assert!(!sdp.contains("tllei"), "{sdp}");
    let sdp = sdp_of("name=cam,destination=rtp://239.255.1.2:5004,repair=rtx");
    assert!(
        sdp.contains("a=rtcp-fb:33 nack\r\na=rtcp-fb:33 nack tllei\r\n"),
        "{sdp}"
    );
    let out = bin().args(["sdp", "nope"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no stream named 'nope'") && err.contains("--stream"),
        "{err}"
    );
}

/// `sdp --output` replaces a regular file whole, and writes through a symbolic link (as
/// `/dev/stdout` is one) without replacing it.
#[test]
fn sdp_output_replaces_files_and_writes_through_links() {
    let dir = tmp_dir("sdp-output");
    let file = dir.join("cam.sdp");
    let link = dir.join("link.sdp");
    let target = dir.join("target.sdp");
    std::fs::write(&file, "old").unwrap();
    std::fs::write(&target, "old").unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    for out in [&file, &link] {
        let mut sdp = bin();
        sdp.args([
            "sdp",
            "cam",
            "--stream",
            "name=cam,destination=rtp://127.0.0.1:5004",
        ])
        .arg("--output")
        .arg(out);
        run(&mut sdp, Duration::from_secs(30)).expect_success();
    }
    let sdp = |p: &std::path::Path| std::fs::read_to_string(p).unwrap();
    assert!(sdp(&file).starts_with("v=0\r\n"));
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert!(
        sdp(&target).starts_with("v=0\r\n"),
        "written through the link"
    );
    // Nothing is left beside them.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn ffprobe_and_gstreamer_open_the_sdp_that_serve_writes() {
    require("ffprobe", "ffmpeg");
    require("gst-launch-1.0", "gstreamer1.0-tools");
    let dir = tmp_dir("sdp-out");
    let port = port_pair();
    let mut serve = bin()
        .args([
            "serve",
            "--duration",
            "12",
            "--send-cost",
            "5us",
            "--sdp-dir",
        ])
        .arg(&dir)
        .arg("--stream")
        .arg(format!(
            "name=s1,destination=rtp://127.0.0.1:{port},size=320x240,fps=25,bitrate=1mbit,\
             ssrc=305419896,repair=rtx"
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sdp = dir.join("s1.sdp");
    // Written whole once its last line (the sources') is there.
    let written = || std::fs::read_to_string(&sdp).unwrap_or_default();
    for _ in 0..200 {
        if written().contains("a=ssrc:") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(sdp.exists(), "serve --sdp-dir wrote no {}", sdp.display());
    // The declared SSRC is named, as GStreamer's rtsp-server names its own, and the
    // retransmissions' paired with it; both peers below read past them (RTP/AVPF, 33 97).
    let text = written();
    for line in [
        "m=video ",
        " RTP/AVPF 33 97\r\n",
        "a=ssrc-group:FID 305419896 1080036984\r\n",
        "a=ssrc:305419896 cname:metronome-12345678-s1\r\n",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    let probe = Command::new("timeout")
        .args([
            "10",
            "ffprobe",
            "-v",
            "error",
            "-protocol_whitelist",
            "file,udp,rtp",
        ])
        .args([
            "-show_entries",
            "stream=codec_name,width,height",
            "-of",
            "csv=p=0",
        ])
        .arg(&sdp)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&probe.stdout);
    assert!(
        shown.contains("h264,320,240"),
        "ffprobe on the SDP: {shown}\n{}",
        String::from_utf8_lossy(&probe.stderr)
    );
    // GStreamer decodes 25 frames from the same description, then stops by itself.
    let gst = Command::new("timeout")
        .args(["10", "gst-launch-1.0", "-q", "filesrc"])
        .arg(format!("location={}", sdp.display()))
        .args([
            "!",
            "sdpdemux",
            "!",
            "rtpmp2tdepay",
            "!",
            "tsdemux",
            "!",
            "h264parse",
        ])
        .args([
            "!",
            "avdec_h264",
            "!",
            "identity",
            "eos-after=25",
            "!",
            "fakesink",
        ])
        .output()
        .unwrap();
    assert!(
        gst.status.success(),
        "GStreamer did not decode 25 frames from the SDP: {}{}",
        String::from_utf8_lossy(&gst.stdout),
        String::from_utf8_lossy(&gst.stderr)
    );
    // What the SDP names is what the stream carries: `recv` of the same file hears SSRC
    // 0x12345678 (and, with nothing lost, no retransmission from any SSRC).
    let recv = bin()
        .arg("recv")
        .arg(&sdp)
        .args(["--duration", "2", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&recv.stdout).unwrap_or_default();
    let said = format!("{v}\n{}", String::from_utf8_lossy(&recv.stderr));
    assert_eq!(v["sources"][0]["ssrc"].as_str(), Some("12345678"), "{said}");
    assert_eq!(v["repair"]["rtx_malformed"].as_u64(), Some(0), "{said}");
    // SAFETY: kill(2) with a valid pid and signal has no memory-safety preconditions.
    unsafe { libc::kill(serve.id() as i32, libc::SIGINT) };
    let _ = serve.wait();
}
