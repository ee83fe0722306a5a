//! `metronome recv` of what other programs send, described by SDP files (ffmpeg, GStreamer) and
//! by RTSP (`metronome serve --rtsp`): real programs on loopback, bounded durations.
//!
//! The programs are installed by scripts/test.sh; a test that cannot find one says so and
//! skips.

mod common;

use common::{bin, port_pair, require};
use metronome_wire::sdp::{Connection, MediaDescription, SessionDescription};
use serde_json::Value;
use std::io::BufRead;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A `metronome recv` in the background; returned once it says it is listening.
struct Recv {
    child: Child,
    stderr: mpsc::Receiver<String>,
}

impl Recv {
    fn start(target: &str, extra: &[&str]) -> Recv {
        let mut child = bin()
            .args(["recv", target, "--json", "--duration", "18"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut seen = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(l) if l.contains("listening on") => break,
                Ok(l) => seen.push(l),
                Err(_) => {
                    let _ = child.kill();
                    let out = child.wait_with_output().unwrap();
                    panic!(
                        "metronome recv {target} did not start listening: {seen:?} {}",
                        String::from_utf8_lossy(&out.stdout)
                    );
                }
            }
        }
        Recv { child, stderr: rx }
    }

    /// Ends it as Ctrl-C would, after what was sent has had time to arrive; its JSON summary.
    fn stop(self) -> Value {
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: kill(2) with a valid pid and signal has no memory-safety preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let out = self.child.wait_with_output().unwrap();
        let err: Vec<String> = self.stderr.try_iter().collect();
        assert!(
            out.status.success(),
            "metronome recv failed: {err:?} {}",
            String::from_utf8_lossy(&out.stdout)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "recv printed no JSON ({e}): {} {err:?}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

/// Packets received and lost, after checking that every datagram was an accepted RTP packet.
fn received(v: &Value) -> (u64, u64) {
    let c = &v["counters"];
    for k in ["not_rtp", "wrong_payload_type", "bad_payload"] {
        assert_eq!(c[k], 0, "{k}: {v:#}");
    }
    let packets = c["rtp_packets"].as_u64().unwrap();
    let lost = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["lost"].as_i64().unwrap().max(0) as u64)
        .sum();
    (packets, lost)
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// A free loopback port and an SDP file (Metronome's own) describing RTP/MPEG-TS sent to it.
fn mp2t_sdp_file(dir: &Path, name: &str) -> (u16, PathBuf) {
    let port = port_pair();
    let sdp = SessionDescription::rtp_mp2t(
        Ipv4Addr::LOCALHOST.into(),
        1,
        name,
        SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port),
        None,
    );
    let file = dir.join("mp2t.sdp");
    write(&file, &sdp.to_sdp());
    (port, file)
}

/// ffmpeg 5.1 writes no SDP for `-f rtp_mpegts` ("No output streams in the SDP"), so the file
/// is Metronome's own description of the session (`SessionDescription::rtp_mp2t`), which ffmpeg,
/// GStreamer and VLC read too.
#[test]
fn ffmpeg_rtp_mpegts_described_by_sdp_file() {
    require("ffmpeg", "ffmpeg");
    let dir = common::tmp_dir("sdp-ffmpeg-mp2t");
    let (port, file) = mp2t_sdp_file(&dir, "ffmpeg rtp_mpegts");
    let recv = Recv::start(file.to_str().unwrap(), &[]);
    succeed(
        Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi"])
            .args(["-i", "testsrc=size=320x240:rate=25", "-t", "3"])
            .args(["-c:v", "mpeg2video", "-f", "rtp_mpegts"])
            .arg(format!("rtp://127.0.0.1:{port}")),
    );
    let v = recv.stop();
    let (packets, lost) = received(&v);
    assert!(packets > 50, "{v:#}");
    assert_eq!(lost, 0, "{v:#}");
    assert_eq!(v["sources"].as_array().unwrap().len(), 1, "{v:#}");
}

/// The SDP ffmpeg writes itself (`-f rtp -sdp_file`), H.264 in payload type 96: received in
/// any-payload mode on the SDP's address and port.
#[test]
fn ffmpeg_written_sdp_h264() {
    let dir = common::tmp_dir("sdp-ffmpeg-h264");
    require("ffmpeg", "ffmpeg");
    let port = port_pair();
    let file = dir.join("h264.sdp");
    let _ = std::fs::remove_file(&file);
    // ffmpeg writes the SDP as it starts; it sends for 5 s, and recv listens from then on.
    let ff = Command::new("ffmpeg")
        .args([
            "-hide_banner",
            "-loglevel",
            "error",
            "-y",
            "-re",
            "-f",
            "lavfi",
        ])
        .args(["-i", "testsrc=size=320x240:rate=25", "-t", "5"])
        .args(["-c:v", "libx264", "-preset", "veryfast", "-f", "rtp"])
        .arg(format!("rtp://127.0.0.1:{port}"))
        .arg("-sdp_file")
        .arg(&file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut text = String::new();
    for _ in 0..100 {
        text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.contains("a=rtpmap") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let parsed = SessionDescription::parse(&text).expect("ffmpeg's SDP parses");
    assert_eq!(parsed.media[0].port, port);
    assert_eq!(parsed.media[0].encoding, "H264");
    let recv = Recv::start(file.to_str().unwrap(), &[]);
    let out = ff.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = recv.stop();
    let (packets, lost) = received(&v);
    assert!(packets > 20, "{v:#}");
    assert_eq!(lost, 0, "{v:#}");
}

/// A multicast session (c= with /TTL): recv joins the group on the interface given.
#[test]
fn ffmpeg_multicast_described_by_sdp_file() {
    let dir = common::tmp_dir("sdp-ffmpeg-multicast");
    require("ffmpeg", "ffmpeg");
    let port = port_pair();
    let group: IpAddr = Ipv4Addr::new(239, 255, 77, (port % 200) as u8 + 1).into();
    let mut sdp = SessionDescription::new(Ipv4Addr::LOCALHOST.into(), 2, "multicast");
    sdp.connection = Some(Connection::new(group, Some(1)));
    sdp.media.push(MediaDescription::mp2t(port));
    let text = sdp.to_sdp();
    assert!(text.contains(&format!("c=IN IP4 {group}/1\r\n")), "{text}");
    let file = dir.join("multicast.sdp");
    write(&file, &text);
    let recv = Recv::start(file.to_str().unwrap(), &["--iface", "127.0.0.1"]);
    succeed(
        Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi"])
            .args(["-i", "testsrc=size=320x240:rate=25", "-t", "2"])
            .args(["-c:v", "mpeg2video", "-f", "rtp_mpegts"])
            .arg(format!("rtp://{group}:{port}?ttl=1&localaddr=127.0.0.1")),
    );
    let v = recv.stop();
    let (packets, lost) = received(&v);
    assert!(packets > 30, "{v:#}");
    assert_eq!(lost, 0, "{v:#}");
}

/// GStreamer's RTP/MP2T payloader, described by an SDP file the test writes by hand.
#[test]
fn gstreamer_rtpmp2tpay_described_by_sdp_file() {
    let dir = common::tmp_dir("sdp-gst-mp2t");
    require("gst-launch-1.0", "gstreamer1.0-tools");
    // x264enc (plugins-ugly) as asked; openh264enc or libav's MPEG-2 encoder where it is
    // missing: what is measured is the RTP stream, not the codec.
    let encoder = [
        "x264enc speed-preset=veryfast tune=zerolatency",
        "openh264enc",
        "avenc_mpeg2video",
    ]
    .into_iter()
    .find(|e| {
        let element = e.split(' ').next().unwrap();
        Command::new("gst-inspect-1.0")
            .arg(element)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    let encoder = encoder.expect(
        "no GStreamer video encoder (x264enc, openh264enc, avenc_mpeg2video): \
         apt-get install gstreamer1.0-plugins-ugly (scripts/test.sh does)",
    );
    let port = port_pair();
    let file = dir.join("gst.sdp");
    write(
        &file,
        &format!(
            "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=GStreamer rtpmp2tpay\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=video {port} RTP/AVP 33\r\na=rtpmap:33 MP2T/90000\r\n"
        ),
    );
    let recv = Recv::start(file.to_str().unwrap(), &[]);
    let pipeline = format!(
        "videotestsrc num-buffers=100 ! video/x-raw,width=320,height=240,framerate=30/1 ! {encoder} ! mpegtsmux ! rtpmp2tpay ! udpsink host=127.0.0.1 port={port}"
    );
    let gst = Command::new("gst-launch-1.0")
        .arg("-q")
        .args(pipeline.split(' '))
        .output()
        .unwrap();
    assert!(
        gst.status.success(),
        "{pipeline}: {}{}",
        String::from_utf8_lossy(&gst.stdout),
        String::from_utf8_lossy(&gst.stderr)
    );
    let v = recv.stop();
    let (packets, lost) = received(&v);
    assert!(packets > 10, "{encoder}: {v:#}");
    assert_eq!(lost, 0, "{encoder}: {v:#}");
}

/// `recv rtsp://` with each transport against Metronome's own RTSP server.
#[test]
fn recv_rtsp_udp_tcp_multicast() {
    let group_port = port_pair();
    let group: IpAddr = Ipv4Addr::new(239, 255, 78, (group_port % 200) as u8 + 1).into();
    let stream = format!(
        "name=m,multicast=rtp://{group}:{group_port}?ttl=1&iface=127.0.0.1,size=160x120,fps=10,\
         bitrate=600kbit"
    );
    let server = common::RtspServer::start(&["--stream", &stream]);
    for transport in ["udp", "tcp", "multicast"] {
        let out = bin()
            .args(["recv", &server.url("m"), "--rtsp-transport", transport])
            .args(["--json", "--duration", "2"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{transport}: {err}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let (packets, lost) = received(&v);
        assert!(packets > 10, "{transport}: {v:#} {err}");
        assert_eq!(lost, 0, "{transport}: {v:#}");
        assert!(err.contains("listening on"), "{err}");
        assert!(!err.contains("warning"), "{transport}: {err}");
        // With --interval: a JSON line each interval, then the summary, over every transport.
        let out = bin()
            .args(["recv", &server.url("m"), "--rtsp-transport", transport])
            .args(["--json", "--duration", "2", "--interval", "500ms"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{transport}: {out:?}");
        let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let intervals = &lines[..lines.len() - 1];
        assert!(intervals.len() >= 2, "{transport}: {lines:?}");
        assert!(
            intervals.iter().all(|l| l.get("interval").is_some()),
            "{lines:?}"
        );
        common::assert_valid(&intervals[0], "recv-interval");
        common::assert_valid(lines.last().unwrap(), "recv");
    }
}

/// When the server ends the session (a file mount played to its end: BYE, then the
/// connection closed), `recv rtsp://` ends too, over UDP and multicast as over TCP, well
/// before its own duration; it keeps what it received.
#[test]
fn recv_rtsp_ends_when_the_server_ends_the_session() {
    let file = common::ts_file_made("two-seconds.ts", "320x240", 25, 2, "800k", "1200k");
    let spec = format!("name=clip,source={}", file.display());
    let server = common::RtspServer::start(&["--stream", &spec]);
    for transport in ["udp", "tcp"] {
        let out = common::run(
            bin()
                .args(["recv", &server.url("clip"), "--rtsp-transport", transport])
                .args(["--json", "--duration", "60"]),
            Duration::from_secs(30),
        );
        assert!(out.succeeded(), "{transport}: {}", out.report());
        assert!(
            out.took < Duration::from_secs(15),
            "{transport}: still receiving {:?} after a 2 s clip ended: {}",
            out.took,
            out.report()
        );
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        let (packets, _) = received(&v);
        assert!(packets > 50, "{transport}: {v:#}");
    }
}

/// What recv says about SDP files it cannot use.
#[test]
fn unusable_sdp_files_are_explained() {
    let dir = common::tmp_dir("sdp-unusable");
    let cases: &[(&str, &str)] = &[
        (
            "v=0\r\ns=x\r\nm=video 5004 RTP/AVP 96\r\na=rtpmap:96 H264\r\n",
            "no clock rate after 'H264'",
        ),
        (
            "v=0\r\ns=x\r\nc=IN IP4 0.0.0.0\r\nm=video 0 RTP/AVP 33\r\n",
            "receive it with metronome recv rtsp://",
        ),
        ("v=0\r\ns=x\r\nm=video 5004 RTP/AVP 33\r\n", "no c= line"),
        ("v=0\r\ns=x\r\nc=IN IP4 127.0.0.1\r\n", "no m= line"),
        (
            "v=0\r\ns=x\r\nc=IN IP4 203.0.113.123\r\nm=video 5004 RTP/AVP 33\r\n",
            "neither a multicast group nor an address of this machine",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let file = dir.join(format!("bad{i}.sdp"));
        write(&file, text);
        let out = bin()
            .args(["recv", file.to_str().unwrap(), "--duration", "1"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text:?}");
        assert!(err.contains(want), "{text:?}: {err}");
        assert!(err.contains(file.to_str().unwrap()), "{err}");
    }
}

/// `recv --quality`: FFmpeg streams H.264 (x264, Constrained Baseline) in RTP/MPEG-TS; the
/// receiver decodes what arrived with openh264 and judges every frame against the source
/// FFmpeg encoded (the same lavfi pattern, as Y4M). On loopback nothing is lost: every frame
/// is shown, and the pictures are x264's at its rate (the last frame aside: see below).
#[test]
fn ffmpeg_h264_is_judged_frame_by_frame_against_its_source() {
    let dir = common::tmp_dir("sdp-h264-judged");
    require("ffmpeg", "ffmpeg");
    let source = "testsrc2=size=320x180:rate=25";
    let reference = dir.join("ref.y4m");
    succeed(
        Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi"])
            .args(["-i", source, "-t", "3", "-pix_fmt", "yuv420p"])
            .arg(&reference),
    );
    let (port, file) = mp2t_sdp_file(&dir, "ffmpeg h264");
    let frames = dir.join("frames.csv");
    let shown = dir.join("shown.y4m");
    let recv = Recv::start(
        file.to_str().unwrap(),
        &[
            "--quality",
            reference.to_str().unwrap(),
            "--quality-frames",
            frames.to_str().unwrap(),
            "--shown",
            shown.to_str().unwrap(),
        ],
    );
    succeed(
        Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi"])
            .args(["-i", source, "-t", "3"])
            .args(["-c:v", "libx264", "-profile:v", "baseline", "-g", "25"])
            .args(["-b:v", "600k", "-pix_fmt", "yuv420p", "-f", "rtp_mpegts"])
            .arg(format!("rtp://127.0.0.1:{port}")),
    );
    let v = recv.stop();
    let q = &v["quality"];
    assert_eq!(q["video_found"], true, "{q:#}");
    assert_eq!(q["frames"], 75, "{q:#}");
    assert_eq!(q["frames_lost"], 0, "{q:#}");
    // FFmpeg 5.1's rtp_mpegts muxer never sends its last, partial RTP packet (every datagram
    // carries seven TS packets): the last frame arrives cut short, and FFmpeg's own decoder
    // fails on it too ("error while decoding MB"). Nothing else may fail.
    assert!(q["undecodable"].as_u64().unwrap() <= 1, "{q:#}");
    let psnr = q["psnr_mean"]["y_db"].as_f64().unwrap();
    assert!((30.0..60.0).contains(&psnr), "{q:#}");
    assert!(q["mos_mean"].as_f64().unwrap() >= 3.5, "{q:#}");
    let rows = std::fs::read_to_string(&frames).unwrap();
    assert_eq!(rows.lines().count(), 1 + 75);
    // The video as the viewer saw it, judged again from the file: the same figures.
    let again = common::json(
        &bin()
            .args([
                "quality",
                reference.to_str().unwrap(),
                shown.to_str().unwrap(),
            ])
            .arg("--json")
            .output()
            .unwrap(),
    );
    assert_eq!(again["frames"], 75);
    let psnr_again = again["psnr_mean"]["y_db"].as_f64().unwrap();
    assert!((psnr_again - psnr).abs() < 1e-9, "{psnr_again} {psnr}");
    let _ = std::fs::remove_dir_all(reference.parent().unwrap());
}

/// Runs `cmd` to its end; says what it printed if it failed.
fn succeed(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The PSNR of Y that FFmpeg's `psnr` filter gives `received` against `reference` (its mean
/// MSE over all frames), and how many frames it compared.
fn ffmpeg_psnr_y(received: &Path, reference: &Path) -> (f64, u64) {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-nostats", "-i"])
        .arg(received)
        .arg("-i")
        .arg(reference)
        .args([
            "-lavfi",
            "[0:v]setpts=PTS-STARTPTS[a];[1:v]setpts=PTS-STARTPTS[b];[a][b]psnr",
            "-f",
            "null",
            "-",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("PSNR y:"))
        .unwrap_or_else(|| panic!("no PSNR line: {err}"));
    let y = line.split("PSNR y:").nth(1).unwrap();
    let y: f64 = y.split_whitespace().next().unwrap().parse().unwrap();
    let frames = err
        .lines()
        .filter_map(|l| l.strip_prefix("frame="))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .next_back()
        .unwrap_or(0);
    (y, frames)
}

/// `recv --quality` on an ordinary x264 stream: High profile with B-frames (sent in decode
/// order, shown in display order), served from a TS file by Metronome over loopback. Nothing
/// is lost: every frame is judged, and the PSNR is FFmpeg's own, decoding the same received
/// stream, within 0.05 dB.
#[test]
fn x264_high_with_b_frames_is_judged_as_ffmpeg_judges_it() {
    let dir = common::tmp_dir("sdp-x264-high");
    require("ffmpeg", "ffmpeg");
    let (reference, ts) = (dir.join("ref.y4m"), dir.join("x264.ts"));
    let source = "testsrc2=size=320x240:rate=25";
    succeed(
        Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi"])
            .args(["-i", source, "-t", "6", "-pix_fmt", "yuv420p"])
            .arg(&reference),
    );
    succeed(
        Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-y", "-i"])
            .arg(&reference)
            .args([
                "-c:v",
                "libx264",
                "-profile:v",
                "high",
                "-bf",
                "3",
                "-g",
                "50",
            ])
            .args(["-b:v", "400k", "-muxrate", "1000k", "-f", "mpegts"])
            .arg(&ts),
    );
    let (port, file) = mp2t_sdp_file(&dir, "x264 high");
    let got = dir.join("got.ts");
    let recv = Recv::start(
        file.to_str().unwrap(),
        &[
            "--quality",
            reference.to_str().unwrap(),
            "--output",
            got.to_str().unwrap(),
        ],
    );
    let served = bin()
        .args(["serve", "-i", ts.to_str().unwrap()])
        .arg(format!("rtp://127.0.0.1:{port}"))
        .output()
        .unwrap();
    assert!(
        served.status.success(),
        "{}",
        String::from_utf8_lossy(&served.stderr)
    );
    let v = recv.stop();
    let q = &v["quality"];
    assert_eq!(q["video_found"], true, "{q:#}");
    assert_eq!(q["counts"]["gaps"], 0, "nothing lost on loopback: {q:#}");
    assert_eq!(q["frames"], 150, "{q:#}");
    assert_eq!(
        (q["frames_lost"].as_u64(), q["undecodable"].as_u64()),
        (Some(0), Some(0)),
        "{q:#}"
    );
    let ours = q["psnr_global"]["y_db"].as_f64().unwrap();
    let (theirs, frames) = ffmpeg_psnr_y(&got, &reference);
    eprintln!("PSNR of Y: recv --quality {ours:.3} dB, FFmpeg {theirs:.3} dB ({frames} frames)");
    assert_eq!(frames, 150);
    assert!(
        (ours - theirs).abs() < 0.05,
        "{ours} against FFmpeg's {theirs}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
