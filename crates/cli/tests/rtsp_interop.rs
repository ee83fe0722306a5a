//! `metronome serve --rtsp` against the real RTSP clients from Debian: FFmpeg 5.1 (ffprobe,
//! ffmpeg), GStreamer 1.22 (rtspsrc) and VLC 3.0. Each test starts its own server, runs the
//! clients with a hard time limit (a child still running at its limit is killed and the test
//! fails with its output), and stops the server, whose log must show no panic.
//!
//! Quirks of the clients that the tests account for:
//! - FFmpeg's `-ss T` before `-i rtsp://…` becomes `PLAY` with `Range: npt=R-` where R is not T:
//!   for MPEG-TS over RTP it adds the stream's first PTS (1.4 s in files FFmpeg muxed) and takes
//!   0.13 s off for decoder delay. The tests read R from FFmpeg's own trace log.
//! - Debian builds VLC without live555, so VLC's only RTSP client is its SAT>IP access module:
//!   no DESCRIBE, `SETUP` on the URL itself, then `PLAY` on `<Content-Base>stream=<com.ses.streamID>`
//!   (`rtsp://HOST:PORT/stream=0` when the SETUP response names neither). It has no TCP mode
//!   (`--rtsp-tcp` is a live555 option, unknown to this VLC); `--satip-multicast` asks for
//!   `RTP/AVP;multicast`. VLC refuses to run as root, so it runs as nobody.

mod common;

use common::{gst_ran_to_eos, now, require, run, tmp_dir, ts_file, Outcome, RtspServer, Running};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The built-in test source, small enough to decode quickly on a busy two-core machine.
const TEST_SOURCE: &[&str] = &["--size", "320x240", "--fps", "25", "--mux-rate", "1500000"];
/// One decoded 320x240 YUV 4:2:0 picture.
const FRAME_BYTES: u64 = 320 * 240 * 3 / 2;
/// How long one client may take before it is killed and the test fails.
const CLIENT_LIMIT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// The server

/// What the server logged so far (for failure messages).
fn server_log(server: &RtspServer) -> String {
    server.log.try_iter().collect::<Vec<_>>().join("\n")
}

/// Fails the test with `why`, the client's report and the server's log.
#[track_caller]
fn fail(server: &RtspServer, why: &str, out: &Outcome) -> ! {
    panic!(
        "{why}\n{}\n--- server log ---\n{}",
        out.report(),
        server_log(server)
    )
}

/// Stops the server and checks that it neither panicked nor lost track of the sessions:
/// each PLAY ran a stream named `MOUNT.SESSION`, listed in the summary.
fn stop(server: RtspServer, mount: &str) -> String {
    let (summary, log) = server.stop();
    let log = log.join("\n");
    assert!(
        !log.contains("panicked") && !summary.contains("panicked"),
        "the server panicked:\n{log}\n{summary}"
    );
    assert!(
        summary.contains(&format!("{mount}.")),
        "the summary lists no session stream of /{mount}:\n{summary}\n--- log ---\n{log}"
    );
    summary
}

fn test_server() -> RtspServer {
    RtspServer::start(TEST_SOURCE)
}

fn file_server() -> RtspServer {
    let clip = ts_file();
    RtspServer::start(&["--stream", &format!("name=clip,source={}", clip.display())])
}

// ---------------------------------------------------------------------------------------------
// FFmpeg

fn ffprobe_streams(url: &str, transport: &str) -> Command {
    let mut c = Command::new("ffprobe");
    c.args(["-v", "error", "-rtsp_transport", transport]).args([
        "-show_streams",
        "-of",
        "json",
        url,
    ]);
    c
}

/// Checks that ffprobe found one video stream of `codec`, 320x240.
fn check_probe(server: &RtspServer, out: &Outcome, codec: &str) {
    if !out.succeeded() {
        fail(server, "ffprobe failed", out);
    }
    let json: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| fail(server, &format!("ffprobe printed no JSON ({e})"), out));
    let streams = json["streams"].as_array().cloned().unwrap_or_default();
    let video: Vec<&Value> = streams
        .iter()
        .filter(|s| s["codec_type"] == "video")
        .collect();
    if video.len() != 1
        || video[0]["codec_name"] != codec
        || video[0]["width"] != 320
        || video[0]["height"] != 240
    {
        fail(
            server,
            &format!("ffprobe should see one {codec} 320x240 video stream"),
            out,
        );
    }
}

/// `ffmpeg … -i URL -frames:v N -f framecrc -`: one line per decoded frame.
fn ffmpeg_frames(url: &str, transport: &str, frames: u32) -> Command {
    let mut c = Command::new("ffmpeg");
    c.args(["-nostdin", "-v", "error", "-rtsp_transport", transport])
        .args(["-i", url, "-an", "-frames:v", &frames.to_string()])
        .args(["-f", "framecrc", "-"]);
    c
}

/// The sizes of the decoded frames in framecrc output (`0, dts, pts, duration, size, crc`).
fn framecrc_sizes(stdout: &str) -> Vec<u64> {
    stdout
        .lines()
        .filter(|l| l.starts_with("0,"))
        .filter_map(|l| l.split(',').nth(4)?.trim().parse().ok())
        .collect()
}

/// Checks that ffmpeg decoded at least `min` whole 320x240 frames.
fn check_decoded(server: &RtspServer, out: &Outcome, min: usize) {
    if !out.succeeded() {
        fail(server, "ffmpeg failed", out);
    }
    let sizes = framecrc_sizes(&out.stdout);
    if sizes.len() < min || sizes.iter().any(|&s| s != FRAME_BYTES) {
        fail(
            server,
            &format!(
                "ffmpeg should decode at least {min} frames of {FRAME_BYTES} bytes; got {}",
                sizes.len()
            ),
            out,
        );
    }
}

fn probe_and_decode(mount: &str, codec: &str, transport: &str) {
    require("ffprobe", "ffmpeg");
    require("ffmpeg", "ffmpeg");
    let server = if mount == "test" {
        test_server()
    } else {
        file_server()
    };
    let url = server.url(mount);
    let probe = run(&mut ffprobe_streams(&url, transport), CLIENT_LIMIT);
    check_probe(&server, &probe, codec);
    let decode = run(&mut ffmpeg_frames(&url, transport, 25), CLIENT_LIMIT);
    check_decoded(&server, &decode, 20);
    stop(server, mount);
}

#[test]
fn ffmpeg_test_mount_udp() {
    probe_and_decode("test", "h264", "udp");
}

#[test]
fn ffmpeg_test_mount_tcp() {
    probe_and_decode("test", "h264", "tcp");
}

/// Three FFmpeg viewers at once of the test mount, each decoding 25 pictures; the server's
/// JSON summary: the sources of their session streams.
fn three_viewers(extra: &[&str]) -> Vec<String> {
    require("ffmpeg", "ffmpeg");
    let mut args = TEST_SOURCE.to_vec();
    args.extend_from_slice(&["--json"]);
    args.extend_from_slice(extra);
    let server = RtspServer::start(&args);
    let url = server.url("test");
    let viewers: Vec<_> = ["udp", "tcp", "udp"]
        .iter()
        .map(|t| {
            let url = url.clone();
            std::thread::spawn(move || run(&mut ffmpeg_frames(&url, t, 25), CLIENT_LIMIT))
        })
        .collect();
    for v in viewers {
        let out = v.join().unwrap();
        check_decoded(&server, &out, 20);
    }
    let (summary, _) = server.stop();
    let json: Value = serde_json::from_str(&summary).unwrap_or(Value::Null);
    let sources: Vec<String> = json["streams"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("test.")))
        .map(|s| s["source"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(sources.len(), 3, "three sessions: {summary}");
    sources
}

#[test]
fn viewers_of_a_live_mount_share_one_encoder() {
    let sources = three_viewers(&[]);
    assert!(
        sources.iter().all(|s| s.starts_with("shared ")),
        "{sources:?}"
    );
    let own = three_viewers(&["--rtsp-encoder-per-session"]);
    assert!(own.iter().all(|s| !s.starts_with("shared ")), "{own:?}");
}

#[test]
fn ffmpeg_file_mount_udp() {
    probe_and_decode("clip", "mpeg2video", "udp");
}

#[test]
fn ffmpeg_file_mount_tcp() {
    probe_and_decode("clip", "mpeg2video", "tcp");
}

/// The npt of the last `Range: npt=R-` that FFmpeg sent (its `-v trace` log shows each request
/// after `Sending:`, and each response line as `line='…'`).
fn last_requested_npt(log: &str) -> Option<f64> {
    log.lines()
        .rev()
        .filter_map(|l| l.trim().strip_prefix("Range: npt="))
        .find_map(|r| r.split('-').next()?.parse().ok())
}

/// The first MPEG-2 GOP timecode (`HH:MM:SS:FF` at 25 fps) that showinfo printed, in seconds.
/// ts_file()'s encoder starts it at 0 with the file, so it is the position in the file.
fn first_gop_timecode(log: &str) -> Option<f64> {
    let tc = log
        .lines()
        .find_map(|l| l.split("GOP timecode - ").nth(1))?;
    let f: Vec<f64> = tc
        .trim()
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    (f.len() == 4).then(|| f[0] * 3600.0 + f[1] * 60.0 + f[2] + f[3] / 25.0)
}

/// The RTSP exchange in FFmpeg's `-v trace` log: its requests, the server's response lines, and
/// what it said about RTCP BYE and sequence numbers.
fn ffmpeg_exchange(log: &str) -> String {
    let mut out = String::new();
    let mut sending = false;
    for l in log.lines() {
        if sending {
            if l.trim() == "--" {
                sending = false;
            } else if !l.trim().is_empty() {
                out += &format!("C->S {}\n", l.trim());
            }
        } else if l.ends_with("Sending:") {
            sending = true;
        } else if let Some(line) = l.split("line='").nth(1) {
            out += &format!("S->C {}\n", line.trim_end_matches('\''));
        } else if l.contains("BYE") || l.contains("bad cseq") {
            out += &format!("     {l}\n");
        }
    }
    out
}

/// ffmpeg `-ss 2` on the file mount: FFmpeg PLAYs from 0 to probe, then PAUSEs and PLAYs again
/// with a Range. The first picture it decodes must be near that Range's start (the clip has an
/// I-frame every 0.48 s), and it must get about the rest of the 6 s clip, then the end of the
/// stream (RTCP BYE), rather than the whole clip or nothing.
fn play_range(transport: &str) {
    require("ffmpeg", "ffmpeg");
    let server = file_server();
    let url = server.url("clip");
    let out = run(
        Command::new("ffmpeg")
            .args(["-nostdin", "-v", "trace", "-ss", "2"])
            .args(["-rtsp_transport", transport, "-i", &url, "-an"])
            .args(["-vf", "showinfo", "-f", "framecrc", "-"]),
        Duration::from_secs(25),
    );
    let why = |what: &str| {
        format!(
            "{what}\n--- the RTSP exchange, from ffmpeg's log ---\n{}",
            ffmpeg_exchange(&out.stderr)
        )
    };
    if !out.succeeded() {
        fail(
            &server,
            &why("ffmpeg -ss 2 failed (or did not see the end)"),
            &out,
        );
    }
    let Some(npt) = last_requested_npt(&out.stderr) else {
        fail(&server, &why("ffmpeg sent no PLAY with a Range"), &out);
    };
    if !(1.0..=4.0).contains(&npt) {
        fail(
            &server,
            &why(&format!(
                "ffmpeg asked for npt={npt}, not where -ss 2 should go"
            )),
            &out,
        );
    }
    let frames = framecrc_sizes(&out.stdout).len();
    // From an I-frame within half a second of npt to the end of the 6 s clip at 25 fps, with
    // room for a lost packet or two on UDP; the whole clip would be 150.
    let most = ((6.0 - npt + 0.6) * 25.0) as usize;
    let least = ((6.0 - npt - 0.6) * 25.0 * 0.8) as usize;
    if !(least..=most).contains(&frames) {
        fail(
            &server,
            &why(&format!(
                "PLAY Range npt={npt:.3}-: expected {least}..={most} frames to the end of the \
                 clip, decoded {frames}"
            )),
            &out,
        );
    }
    let Some(first) = first_gop_timecode(&out.stderr) else {
        fail(&server, &why("showinfo printed no GOP timecode"), &out);
    };
    if (first - npt).abs() > 0.6 {
        fail(
            &server,
            &why(&format!(
                "PLAY Range npt={npt:.3}-: the first picture is from {first:.2} s of the clip"
            )),
            &out,
        );
    }
    stop(server, "clip");
}

#[test]
fn ffmpeg_file_mount_play_range_tcp() {
    play_range("tcp");
}

#[test]
fn ffmpeg_file_mount_play_range_udp() {
    play_range("udp");
}

// ---------------------------------------------------------------------------------------------
// GStreamer

/// `rtspsrc ! rtpmp2tdepay ! tsdemux ! h264parse ! avdec_h264 ! identity eos-after=N !
/// fakesink`: stops by itself after N decoded pictures; `-v` prints one `last-message = chain`
/// line per picture that reaches the sink.
fn gst_decode(url: &str, protocols: &str, frames: u32) -> Command {
    let mut c = Command::new("gst-launch-1.0");
    c.arg("-v")
        .args(["rtspsrc", &format!("location={url}")])
        .args([&format!("protocols={protocols}"), "latency=200"])
        .args(["!", "rtpmp2tdepay", "!", "tsdemux", "!", "h264parse"])
        .args(["!", "avdec_h264", "!", "identity"])
        .arg(format!("eos-after={frames}"))
        .args(["!", "fakesink", "silent=false"]);
    c
}

fn check_gst(server: &RtspServer, out: &Outcome, min: usize) {
    if !out.stdout.contains("Got EOS from element") {
        fail(server, "gst-launch-1.0 did not run to its EOS", out);
    }
    if !gst_ran_to_eos(out) {
        fail(server, "gst-launch-1.0 failed", out);
    }
    let frames = out
        .stdout
        .lines()
        .filter(|l| l.contains("fakesink0: last-message = chain"))
        .filter(|l| l.contains(&format!("({FRAME_BYTES} bytes")))
        .count();
    if frames < min {
        fail(
            server,
            &format!("GStreamer should decode at least {min} 320x240 pictures; got {frames}"),
            out,
        );
    }
}

fn gst_test_mount(protocols: &str) {
    require("gst-launch-1.0", "gstreamer1.0-tools");
    let server = test_server();
    let url = server.url("test");
    let out = run(&mut gst_decode(&url, protocols, 25), CLIENT_LIMIT);
    check_gst(&server, &out, 20);
    stop(server, "test");
}

#[test]
fn gstreamer_test_mount_tcp() {
    gst_test_mount("tcp");
}

#[test]
fn gstreamer_test_mount_udp() {
    gst_test_mount("udp");
}

// ---------------------------------------------------------------------------------------------
// VLC

/// A TCP relay in front of the server that keeps the RTSP text going both ways, to show the
/// exchange of a client that logs none of it (VLC). Interleaved data is relayed, not kept.
struct RtspTap {
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl RtspTap {
    fn start(server: SocketAddr) -> RtspTap {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let keep = log.clone();
        // Lives until the test process ends, as its connections do.
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { break };
                let Ok(upstream) = TcpStream::connect(server) else {
                    continue;
                };
                let (Ok(c2), Ok(u2)) = (client.try_clone(), upstream.try_clone()) else {
                    continue;
                };
                relay(client, upstream, "C->S", keep.clone());
                relay(u2, c2, "S->C", keep.clone());
            }
        });
        RtspTap { addr, log }
    }

    fn url(&self, mount: &str) -> String {
        format!("rtsp://{}/{mount}", self.addr)
    }

    fn exchange(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

fn relay(mut from: TcpStream, mut to: TcpStream, dir: &'static str, log: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            // RTSP messages start with a letter; interleaved frames with '$'.
            if buf[0].is_ascii_alphabetic() {
                if let Ok(mut l) = log.lock() {
                    if l.len() < 64 * 1024 {
                        let text = String::from_utf8_lossy(&buf[..n.min(2048)]);
                        *l += &format!("{dir}\n{}\n", text.replace("\r\n", "\n").trim_end());
                    }
                }
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

/// `cvlc` as nobody, recording what it receives from `url` for 4 s into `dir/vlc.ts`.
fn vlc_record(dir: &Path, url: &str, extra: &[&str]) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "env"])
        .arg(format!("HOME={}", dir.display()))
        .args(["cvlc", "-I", "dummy", "-vv", "--no-audio"])
        .args(extra)
        .arg(url)
        .args(["--run-time", "4", "--sout"])
        .arg(format!(
            "#std{{access=file,mux=ts,dst={}}}",
            dir.join("vlc.ts").display()
        ))
        .arg("vlc://quit");
    c
}

/// VLC's error lines that are about the stream (not about the missing desktop: D-Bus, audio).
fn vlc_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(" error: "))
        .filter(|l| {
            !["interface", "dbus", "audio output", "PulseAudio"]
                .iter()
                .any(|noise| l.contains(noise))
        })
        .collect()
}

/// `ffprobe -count_frames` on what VLC wrote: the codec and number of video frames.
fn probe_recording(path: &Path) -> Outcome {
    run(
        Command::new("ffprobe")
            .args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
            .args([
                "-show_entries",
                "stream=codec_name,nb_read_frames",
                "-of",
                "json",
            ])
            .arg(path),
        CLIENT_LIMIT,
    )
}

fn vlc_test_mount(test: &str, extra: &[&str], server_args: &[&str], mount: &str) {
    require("cvlc", "vlc-bin");
    require("setpriv", "util-linux");
    require("ffprobe", "ffmpeg");
    let server = RtspServer::start(server_args);
    let dir = tmp_dir(test);
    let file = dir.join("vlc.ts");
    let _ = std::fs::remove_file(&file);
    // VLC logs none of its RTSP requests: a relay keeps them.
    let tap = RtspTap::start(server.addr);
    let url = tap.url(mount);
    let out = run(&mut vlc_record(&dir, &url, extra), CLIENT_LIMIT);
    // VLC's own interesting lines: its RTSP client's and every error.
    let relevant: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("satip") || l.contains(" error: ") || l.contains(" warning: "))
        .collect();
    let why = |what: &str| {
        format!(
            "{what}\n--- the RTSP exchange (relayed) ---\n{}\n--- VLC's RTSP and error lines ---\n{}",
            tap.exchange(),
            relevant.join("\n")
        )
    };
    if !out.succeeded() {
        fail(&server, &why("cvlc failed"), &out);
    }
    let errors = vlc_errors(&out.stderr);
    if !errors.is_empty() {
        fail(&server, &why("VLC reported errors"), &out);
    }
    let probe = probe_recording(&file);
    let json: Value = serde_json::from_str(&probe.stdout).unwrap_or(Value::Null);
    let stream = &json["streams"][0];
    let frames: u64 = stream["nb_read_frames"]
        .as_str()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    if !probe.succeeded() || stream["codec_name"] != "h264" || frames < 25 {
        fail(
            &server,
            &why(&format!(
                "VLC's recording {} should hold an h264 stream of at least 25 frames (4 s at 25 \
                 fps); ffprobe says:\n{}",
                file.display(),
                probe.report()
            )),
            &out,
        );
    }
    stop(server, mount);
}

/// VLC's default RTSP transport: RTP over UDP unicast.
#[test]
fn vlc_test_mount_udp() {
    vlc_test_mount("vlc-udp", &[], TEST_SOURCE, "test");
}

/// VLC asking for multicast (`Transport: RTP/AVP;multicast`) on a mount with a group; both ends
/// name 127.0.0.1/lo as the interface, which works on this host's loopback.
#[test]
fn vlc_multicast_mount() {
    let stream = "name=cam,source=test,size=320x240,fps=25,bitrate=1500000,\
                  multicast=rtp://239.255.0.1:5004?ttl=1&iface=127.0.0.1";
    vlc_test_mount(
        "vlc-multicast",
        &["--satip-multicast", "--miface=lo"],
        &["--stream", stream],
        "cam",
    );
}

// ---------------------------------------------------------------------------------------------
// Many clients at once

/// Three ffmpeg (UDP, TCP, TCP), one GStreamer (TCP) and one ffprobe (UDP) on `/test` at the
/// same time: every one of them gets its pictures.
#[test]
fn many_clients_on_one_mount() {
    require("ffprobe", "ffmpeg");
    require("ffmpeg", "ffmpeg");
    require("gst-launch-1.0", "gstreamer1.0-tools");
    let server = test_server();
    let url = server.url("test");
    let deadline = now() + Duration::from_secs(25);
    let ffmpegs: Vec<Running> = ["udp", "tcp", "tcp"]
        .iter()
        .map(|t| Running::spawn(&mut ffmpeg_frames(&url, t, 50)))
        .collect();
    let gst = Running::spawn(&mut gst_decode(&url, "tcp", 50));
    let probe = Running::spawn(&mut ffprobe_streams(&url, "udp"));
    let ffmpegs: Vec<Outcome> = ffmpegs.into_iter().map(|r| r.finish(deadline)).collect();
    let gst = gst.finish(deadline);
    let probe = probe.finish(deadline);
    for out in &ffmpegs {
        check_decoded(&server, out, 40);
    }
    check_gst(&server, &gst, 40);
    check_probe(&server, &probe, "h264");
    let summary = stop(server, "test");
    let sessions = summary.lines().filter(|l| l.starts_with("test.")).count();
    assert!(
        sessions >= 5,
        "five clients played, the summary lists {sessions} session streams:\n{summary}"
    );
}

// ---------------------------------------------------------------------------------------------
// A mount that repairs

/// The SDP a DESCRIBE of `mount` answers with (read until the connection has sent it all).
fn describe_sdp(server: &RtspServer, mount: &str) -> String {
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let url = server.url(mount);
    write!(
        s,
        "DESCRIBE {url} RTSP/1.0\r\nCSeq: 1\r\nAccept: application/sdp\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length:"))
            .and_then(|v| v.trim().parse::<usize>().ok());
        if length.is_some_and(|n| body.len() >= n) {
            break;
        }
    }
    text
}

/// A mount declared with `repair=rtx` announces its retransmissions in its DESCRIBE (RFC 4585's
/// `RTP/AVPF` and `a=rtcp-fb:33 nack`, RFC 4588's `rtx` with `apt=33`), and FFmpeg and
/// GStreamer, which read that SDP, still set it up and decode it, over UDP and TCP.
#[test]
fn a_mount_that_repairs_announces_rtx_and_ffmpeg_and_gstreamer_play_it() {
    require("ffprobe", "ffmpeg");
    require("ffmpeg", "ffmpeg");
    require("gst-launch-1.0", "gstreamer1.0-tools");
    let server = RtspServer::start(&[
        "--stream",
        "name=cam,repair=rtx,playout_delay=300ms,size=320x240,fps=25,bitrate=1500kbit",
    ]);
    let sdp = describe_sdp(&server, "cam");
    for line in [
        "m=video 0 RTP/AVPF 33 97\r\n",
        "a=rtcp-fb:33 nack\r\n",
        "a=rtpmap:97 rtx/90000\r\n",
        "a=fmtp:97 apt=33;rtx-time=300\r\n",
    ] {
        assert!(
            sdp.contains(line),
            "{line:?} not in the DESCRIBE answer:\n{sdp}"
        );
    }
    let url = server.url("cam");
    let probe = run(&mut ffprobe_streams(&url, "udp"), CLIENT_LIMIT);
    check_probe(&server, &probe, "h264");
    let decode = run(&mut ffmpeg_frames(&url, "tcp", 25), CLIENT_LIMIT);
    check_decoded(&server, &decode, 20);
    let out = run(&mut gst_decode(&url, "udp", 25), CLIENT_LIMIT);
    check_gst(&server, &out, 20);
    stop(server, "cam");
}
