//! SRTP (RFC 3711, AES_CM_128_HMAC_SHA1_80) against the real peers: `serve` sends a stream
//! declared with an `srtp_key`, its SDP says `RTP/SAVP` with the key in `a=crypto` (RFC
//! 4568), and FFmpeg (`srtp://` with `-srtp_in_params`) and GStreamer (`srtpdec`) decode the
//! pictures; `recv` decrypts what FFmpeg sends (`-srtp_out_params`), and what `serve` sends
//! with its SRTCP reports, and drops what a wrong key cannot authenticate.

mod common;

use common::{
    bin, gst_ran_to_eos, port_pair, require, run, tmp_dir, ts_file, wait_udp_bound, Running,
};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// A fresh key: 30 random bytes in base64 (`head -c 30 /dev/urandom | base64`).
fn key() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 30];
    let mut f = std::fs::File::open("/dev/urandom").unwrap();
    std::io::Read::read_exact(&mut f, &mut bytes).unwrap();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn hex(key: &str) -> String {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(key)
        .unwrap();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `serve --config` with one SRTP stream of the test source to `ports`, its SDPs in `dir`.
fn serve(dir: &Path, key: &str, ports: &[u16], seconds: u32) -> Running {
    let dests: Vec<String> = ports
        .iter()
        .map(|p| format!("\"rtp://127.0.0.1:{p}\""))
        .collect();
    let text = format!(
        "[[stream]]\nname = \"sec\"\ndestination = [{}]\nsize = \"320x240\"\nfps = 25\n\
         bitrate = \"1mbit\"\nssrc = 4660\nsrtp_key = \"{key}\"\n",
        dests.join(", ")
    );
    let config = dir.join("srtp.toml");
    std::fs::write(&config, text).unwrap();
    Running::spawn(
        bin()
            .args(["serve", "--config"])
            .arg(&config)
            .arg("--sdp-dir")
            .arg(dir)
            .args(["--duration", &format!("{seconds}s"), "--send-cost", "5us"]),
    )
}

#[test]
fn ffmpeg_and_gstreamer_decode_the_srtp_that_serve_sends() {
    require("ffmpeg", "ffmpeg");
    require("gst-launch-1.0", "gstreamer1.0-tools");
    let dir = tmp_dir("srtp_players");
    let key = key();
    let (p1, p2) = (port_pair(), port_pair());
    let caps = format!(
        "application/x-srtp, media=(string)video, clock-rate=(int)90000, \
         encoding-name=(string)MP2T, payload=(int)33, ssrc=(uint)4660, srtp-key=(buffer){}, \
         srtp-cipher=(string)aes-128-icm, srtp-auth=(string)hmac-sha1-80, \
         srtcp-cipher=(string)aes-128-icm, srtcp-auth=(string)hmac-sha1-80",
        hex(&key)
    );
    let gst = Running::spawn(
        Command::new("gst-launch-1.0")
            .args(["udpsrc", &format!("port={p2}"), &format!("caps={caps}")])
            .args([
                "!",
                "srtpdec",
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
            ]),
    );
    wait_udp_bound(p2, LIMIT);
    let server = serve(&dir, &key, &[p1, p2], 12);
    let sdp = dir.join("sec.sdp");
    let ffmpeg = run(
        Command::new("ffmpeg")
            .args([
                "-nostdin",
                "-v",
                "error",
                "-protocol_whitelist",
                "file,udp,rtp,srtp",
            ])
            .args([
                "-srtp_in_suite",
                "AES_CM_128_HMAC_SHA1_80",
                "-srtp_in_params",
                &key,
            ])
            .args([
                "-i",
                &format!("srtp://127.0.0.1:{p1}"),
                "-an",
                "-frames:v",
                "25",
            ])
            .args(["-f", "framecrc", "-"]),
        LIMIT,
    );
    let frames = ffmpeg
        .stdout
        .lines()
        .filter(|l| l.starts_with("0,"))
        .count();
    assert!(
        ffmpeg.succeeded() && frames == 25,
        "FFmpeg should decode 25 pictures ({frames}): {}",
        ffmpeg.report()
    );
    let gst = gst.finish_within(LIMIT);
    assert!(
        gst_ran_to_eos(&gst),
        "GStreamer's srtpdec: {}",
        gst.report()
    );
    let text = std::fs::read_to_string(&sdp).unwrap();
    assert!(text.contains("RTP/SAVP 33"), "{text}");
    assert!(
        text.contains(&format!("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{key}")),
        "{text}"
    );
    server.interrupt();
    let out = server.finish_within(LIMIT);
    assert!(!out.stderr.contains("panicked"), "{}", out.report());
}

/// `recv SDP --json` for `seconds`, in the background.
fn recv(sdp: &Path, seconds: u32) -> Running {
    Running::spawn(bin().arg("recv").arg(sdp).args([
        "--duration",
        &format!("{seconds}s"),
        "--json",
    ]))
}

fn sdp_with_key(dir: &Path, name: &str, port: u16, key: &str) -> std::path::PathBuf {
    let text = format!(
        "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=x\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
         m=video {port} RTP/SAVP 33\r\na=rtpmap:33 MP2T/90000\r\n\
         a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{key}\r\n"
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// FFmpeg sending the test file as SRTP with `key` to `port`.
fn ffmpeg_sends(key: &str, port: u16) -> common::Outcome {
    run(
        Command::new("ffmpeg")
            .args(["-nostdin", "-v", "error", "-re", "-i"])
            .arg(ts_file())
            .args(["-t", "3", "-c", "copy", "-f", "rtp_mpegts"])
            .args([
                "-srtp_out_suite",
                "AES_CM_128_HMAC_SHA1_80",
                "-srtp_out_params",
                key,
            ])
            .arg(format!("srtp://127.0.0.1:{port}")),
        LIMIT,
    )
}

fn json(out: &common::Outcome) -> serde_json::Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.report()))
}

#[test]
fn recv_decrypts_ffmpegs_srtp_and_drops_what_a_wrong_key_cannot_authenticate() {
    require("ffmpeg", "ffmpeg");
    let dir = tmp_dir("srtp_recv");
    let key = key();
    let port = port_pair();
    let good = recv(&sdp_with_key(&dir, "good.sdp", port, &key), 6);
    wait_udp_bound(port, LIMIT);
    ffmpeg_sends(&key, port).expect_success();
    let good = good.finish_within(LIMIT);
    let v = json(&good);
    let packets = v["counters"]["rtp_packets"].as_u64().unwrap_or(0);
    assert!(
        good.succeeded() && packets > 100,
        "{packets}: {}",
        good.report()
    );
    assert_eq!(v["srtp_rejected_datagrams"], 0, "{}", good.report());

    let port = port_pair();
    let bad = recv(&sdp_with_key(&dir, "bad.sdp", port, &self::key()), 5);
    wait_udp_bound(port, LIMIT);
    ffmpeg_sends(&key, port).expect_success();
    let bad = bad.finish_within(LIMIT);
    let v = json(&bad);
    assert!(!bad.succeeded(), "nothing arrived: {}", bad.report());
    assert!(
        v["srtp_rejected_datagrams"].as_u64().unwrap_or(0) > 100,
        "{}",
        bad.report()
    );
    assert_eq!(v["counters"]["rtp_packets"], 0);
    assert!(
        bad.stderr.contains("did not authenticate as SRTP"),
        "{}",
        bad.report()
    );
}

#[test]
fn recv_takes_serves_srtp_and_its_srtcp_reports() {
    let dir = tmp_dir("srtp_loop");
    let key = key();
    let port = port_pair();
    // The SDP serve writes, read by recv: its a=crypto is the key.
    let server = serve(&dir, &key, &[port], 5);
    let sdp = dir.join("sec.sdp");
    let deadline = common::now() + LIMIT;
    while !sdp.exists() && common::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The SDP holds the key: its owner's alone, as the control token's file is.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&sdp).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{} is mode {mode:o}", sdp.display());
    let out = recv(&sdp, 4).finish_within(LIMIT);
    let v = json(&out);
    assert!(out.succeeded(), "{}", out.report());
    assert!(
        v["counters"]["rtp_packets"].as_u64().unwrap_or(0) > 100,
        "{}",
        out.report()
    );
    assert!(
        v["counters"]["rtcp_packets"].as_u64().unwrap_or(0) > 0,
        "sender reports came through SRTCP: {}",
        out.report()
    );
    assert_eq!(v["srtp_rejected_datagrams"], 0, "{}", out.report());
    let served = server.finish_within(LIMIT);
    assert!(!served.stderr.contains("panicked"), "{}", served.report());
}
