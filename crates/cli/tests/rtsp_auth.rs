//! RTSP authentication and RTSPS from outside: `metronome passwd` makes the users, `serve
//! --config` with an `[rtsp_auth]` table serves them, and FFmpeg 5.1 and GStreamer 1.22
//! (`rtspsrc`) play an authenticated mount with the right password, over RTSP and over RTSPS
//! (a certificate made by `openssl`), and get 401 with a wrong one; a raw client checks what
//! the answers hold and that wrong answers set nothing up; `openssl s_client` checks that
//! Basic credentials work over TLS.
//!
//! Debian's VLC cannot take part: built without live555, its only RTSP client (SAT>IP) sends
//! no credentials, so an authenticated mount answers its SETUP 401 (public mounts play).
//! No client on this machine answers a SHA-256 challenge (FFmpeg's and GStreamer's Digest are
//! MD5 only); SHA-256 is checked against RFC 7616's own example in the unit tests.

mod common;

use common::{bin, gst_ran_to_eos, passwd, require, run, tmp_dir, Outcome, RtspServer};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);
/// A small test source, quick to decode on a busy two-core machine.
const STREAM: &str = "bitrate = \"1mbit\"\nsize = \"320x240\"\nfps = 25\n";

/// Mounts `cam1` (alice only) and `lobby` (public); bob may play only the lobby.
fn config(dir: &Path) -> String {
    let text = format!(
        "[[stream]]\nname = \"cam1\"\n{STREAM}[[stream]]\nname = \"lobby\"\n{STREAM}\
         [rtsp_auth]\npublic = [\"lobby\"]\n{}{}",
        passwd("alice", "open sesame", &[]),
        passwd("bob", "hunter2", &["lobby"]),
    );
    let path = dir.join("auth.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn with_user(url: &str, user: &str) -> String {
    url.replacen("://", &format!("://{user}@"), 1)
}

/// `ffmpeg -i URL -frames:v 10 -f null -` over interleaved TCP.
fn ffmpeg_plays(url: &str) -> Outcome {
    run(
        Command::new("ffmpeg")
            .args([
                "-nostdin",
                "-v",
                "error",
                "-rtsp_transport",
                "tcp",
                "-i",
                url,
            ])
            .args(["-an", "-frames:v", "10", "-f", "null", "-"]),
        LIMIT,
    )
}

/// `gst-launch-1.0 rtspsrc … ! identity eos-after=50 ! fakesink`: 50 RTP packets, then EOS
/// (over rtsps://, taking the test's self-signed certificate).
fn gstreamer_plays(url: &str, user: &str, password: &str) -> Outcome {
    run(
        Command::new("gst-launch-1.0")
            .arg("rtspsrc")
            .arg(format!("location={url}"))
            .arg(format!("user-id={user}"))
            .arg(format!("user-pw={password}"))
            .arg("tls-validation-flags=0")
            .args(["!", "identity", "eos-after=50", "!", "fakesink"]),
        LIMIT,
    )
}

#[test]
fn ffmpeg_and_gstreamer_play_an_authenticated_mount_and_a_wrong_password_gets_401() {
    require("ffmpeg", "ffmpeg");
    require("gst-launch-1.0", "gstreamer1.0-tools");
    let dir = tmp_dir("rtsp_auth_players");
    let server = RtspServer::start(&["--config", &config(&dir)]);
    let cam1 = server.url("cam1");
    let right = ffmpeg_plays(&with_user(&cam1, "alice:open%20sesame"));
    assert!(right.succeeded(), "FFmpeg as alice: {}", right.report());
    let wrong = ffmpeg_plays(&with_user(&cam1, "alice:open"));
    assert!(
        !wrong.succeeded() && wrong.stderr.contains("401"),
        "FFmpeg with a wrong password: {}",
        wrong.report()
    );
    let nobody = ffmpeg_plays(&cam1);
    assert!(
        !nobody.succeeded() && nobody.stderr.contains("401"),
        "{}",
        nobody.report()
    );
    let bob = ffmpeg_plays(&with_user(&cam1, "bob:hunter2"));
    assert!(
        !bob.succeeded() && bob.stderr.contains("403"),
        "{}",
        bob.report()
    );
    let lobby = ffmpeg_plays(&server.url("lobby"));
    assert!(lobby.succeeded(), "a public mount: {}", lobby.report());

    let gst = gstreamer_plays(&cam1, "alice", "open sesame");
    assert!(gst_ran_to_eos(&gst), "GStreamer as alice: {}", gst.report());
    let gst_wrong = gstreamer_plays(&cam1, "alice", "open");
    assert!(
        !gst_wrong.stdout.contains("Got EOS"),
        "GStreamer with a wrong password: {}",
        gst_wrong.report()
    );
    let (summary, log) = server.stop();
    let log = log.join("\n");
    assert!(!log.contains("panicked"), "{log}");
    assert!(
        log.contains("credentials refused for") && log.contains("wrong user name or password"),
        "each refusal is logged for the operator:\n{log}"
    );
    assert!(
        summary.contains("cam1.") && summary.contains("lobby."),
        "{summary}"
    );
}

/// `metronome recv URL` over interleaved TCP for 2 s, as JSON.
fn metronome_recv(url: &str) -> Outcome {
    let mut cmd = bin();
    cmd.args([
        "recv",
        url,
        "--rtsp-transport",
        "tcp",
        "--json",
        "--duration",
        "2",
    ]);
    run(&mut cmd, LIMIT)
}

/// Metronome's own client answers the server's Digest challenge with the URL's credentials
/// (SHA-256, the first offered); a wrong password and none are one-line errors with exit 1.
#[test]
fn recv_answers_the_digest_challenge_with_the_urls_credentials() {
    let dir = tmp_dir("rtsp_auth_recv");
    let server = RtspServer::start(&["--config", &config(&dir)]);
    let cam1 = server.url("cam1");
    let right = metronome_recv(&with_user(&cam1, "alice:open%20sesame"));
    assert!(right.succeeded(), "recv as alice: {}", right.report());
    let v: serde_json::Value = serde_json::from_str(&right.stdout).unwrap();
    let packets = v["counters"]["rtp_packets"].as_u64().unwrap_or(0);
    assert!(packets > 50, "{v:#}");
    for (url, says) in [
        (with_user(&cam1, "alice:open"), "401"),
        (cam1.clone(), "give them in the URL"),
        (with_user(&cam1, "bob:hunter2"), "403"),
    ] {
        let out = metronome_recv(&url);
        assert!(!out.succeeded(), "{url}: {}", out.report());
        let err = out.stderr.trim();
        assert!(err.contains(says), "{url}: {err}");
        assert!(
            !err.contains("open sesame") && !err.contains("hunter2"),
            "{err}"
        );
    }
    server.stop();
}

/// One request on `s`; the response head.
fn exchange(s: &mut TcpStream, request: &str) -> String {
    s.write_all(request.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// A Digest answer (RFC 7616, qop=auth) for `method url` to the nonce in `challenge`.
fn digest(challenge: &str, method: &str, url: &str, password: &str) -> String {
    let nonce = challenge.split("nonce=\"").nth(1).unwrap();
    let nonce = nonce.split('"').next().unwrap();
    let a1 = md5_hex(&format!("alice:metronome:{password}"));
    let a2 = md5_hex(&format!("{method}:{url}"));
    let response = md5_hex(&format!("{a1}:{nonce}:00000001:c0ffee:auth:{a2}"));
    format!(
        "Authorization: Digest username=\"alice\", realm=\"metronome\", nonce=\"{nonce}\", \
         uri=\"{url}\", response=\"{response}\", qop=auth, nc=00000001, cnonce=\"c0ffee\"\r\n"
    )
}

fn md5_hex(text: &str) -> String {
    use md5::{Digest, Md5};
    Md5::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn wrong_credentials_set_nothing_up_and_the_third_closes_the_connection() {
    let dir = tmp_dir("rtsp_auth_raw");
    let server = RtspServer::start(&["--config", &config(&dir)]);
    let url = server.url("cam1");
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let options = exchange(
        &mut s,
        &format!("OPTIONS {url} RTSP/1.0\r\nCSeq: 1\r\n\r\n"),
    );
    assert!(
        options.starts_with("RTSP/1.0 200"),
        "OPTIONS needs no credentials: {options}"
    );
    let first = exchange(
        &mut s,
        &format!("DESCRIBE {url} RTSP/1.0\r\nCSeq: 2\r\n\r\n"),
    );
    assert!(first.starts_with("RTSP/1.0 401"), "{first}");
    let challenge = first
        .lines()
        .find(|l| l.starts_with("WWW-Authenticate: "))
        .unwrap_or_else(|| panic!("no challenge: {first}"));
    assert!(
        challenge.contains("algorithm=SHA-256") && challenge.contains("algorithm=MD5"),
        "{challenge}"
    );
    assert!(
        !challenge.contains("Basic"),
        "no Basic without TLS: {challenge}"
    );
    let transport = "Transport: RTP/AVP;unicast;client_port=40000-40001\r\n";
    let right = digest(challenge, "SETUP", &url, "open sesame");
    let ok = exchange(
        &mut s,
        &format!("SETUP {url} RTSP/1.0\r\nCSeq: 3\r\n{transport}{right}\r\n"),
    );
    assert!(
        ok.starts_with("RTSP/1.0 200") && ok.contains("Session: "),
        "{ok}"
    );
    let session = ok
        .lines()
        .find_map(|l| l.strip_prefix("Session: "))
        .unwrap();
    let session = session.split(';').next().unwrap();
    let teardown = digest(challenge, "TEARDOWN", &url, "open sesame");
    let gone = exchange(
        &mut s,
        &format!("TEARDOWN {url} RTSP/1.0\r\nCSeq: 4\r\nSession: {session}\r\n{teardown}\r\n"),
    );
    assert!(gone.starts_with("RTSP/1.0 200"), "{gone}");
    for cseq in 5..8 {
        let wrong = digest(challenge, "SETUP", &url, "open sesamE");
        let reply = exchange(
            &mut s,
            &format!("SETUP {url} RTSP/1.0\r\nCSeq: {cseq}\r\n{transport}{wrong}\r\n"),
        );
        assert!(reply.starts_with("RTSP/1.0 401"), "{reply}");
        assert!(
            !reply.contains("Session:") && !reply.contains("Transport:"),
            "{reply}"
        );
        assert_eq!(reply.contains("Connection: close"), cseq == 7, "{reply}");
    }
    let mut rest = Vec::new();
    let closed = s.read_to_end(&mut rest);
    assert!(
        matches!(closed, Ok(0)),
        "the server closes after the third: {closed:?}"
    );
    let (summary, _) = server.stop();
    assert!(!summary.contains("cam1."), "nothing was played: {summary}");
}

#[test]
fn rtsp_beyond_loopback_needs_users_and_their_mounts_must_exist() {
    let dir = tmp_dir("rtsp_auth_open");
    let plain = dir.join("plain.toml");
    std::fs::write(&plain, format!("[[stream]]\nname = \"cam1\"\n{STREAM}")).unwrap();
    let open = run(
        bin()
            .args(["serve", "--rtsp", "0.0.0.0:0", "--duration", "5s"])
            .args(["--config", &plain.display().to_string()]),
        LIMIT,
    );
    assert!(!open.succeeded(), "{}", open.report());
    assert!(
        open.stderr.contains("[rtsp_auth]") && open.stderr.contains("127.0.0.1"),
        "{}",
        open.report()
    );
    let typo = dir.join("typo.toml");
    let text = format!("[[stream]]\nname = \"cam1\"\n{STREAM}[rtsp_auth]\npublic = [\"cam2\"]\n");
    std::fs::write(&typo, text).unwrap();
    let out = run(
        bin()
            .args(["serve", "--rtsp", "127.0.0.1:0", "--duration", "5s"])
            .args(["--config", &typo.display().to_string()]),
        LIMIT,
    );
    assert!(
        !out.succeeded() && out.stderr.contains("'cam2'"),
        "{}",
        out.report()
    );
}

/// A self-signed certificate and its key for `localhost` and 127.0.0.1, made by openssl.
fn certificate(dir: &Path) -> (String, String) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = run(
        Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
            ])
            .args(["-nodes", "-days", "2", "-subj", "/CN=localhost"])
            // A server's own certificate (not a CA's), for its names: what a client that
            // checks it (rustls, in recv) takes as a trust anchor for itself.
            .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
            .args(["-addext", "basicConstraints=critical,CA:FALSE", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert),
        LIMIT,
    );
    assert!(out.succeeded(), "openssl req: {}", out.report());
    (cert.display().to_string(), key.display().to_string())
}

/// An RTSPS server of [`config`]'s mounts and users, with a certificate made for it; its path,
/// in the directory returned (kept while it is).
fn tls_server(name: &str) -> (RtspServer, String, metronome_testkit::TempDir) {
    let dir = tmp_dir(name);
    let (cert, key) = certificate(&dir);
    let server = start_tls(&config(&dir), &cert, &key);
    (server, cert, dir)
}

/// An RTSPS server of the config file `config`.
fn start_tls(config: &str, cert: &str, key: &str) -> RtspServer {
    RtspServer::start(&[
        "--config",
        config,
        "--rtsp-tls-cert",
        cert,
        "--rtsp-tls-key",
        key,
    ])
}

/// `request` sent over TLS by `openssl s_client`; the answer's head.
fn over_tls(addr: std::net::SocketAddr, request: &str) -> String {
    TlsSession::open(addr).ask(request).0
}

#[test]
fn ffmpeg_and_gstreamer_play_rtsps_and_basic_works_over_tls_only() {
    require("ffmpeg", "ffmpeg");
    require("gst-launch-1.0", "gstreamer1.0-tools");
    require("openssl", "openssl");
    let (server, _, _dir) = tls_server("rtsp_auth_tls");
    let cam1 = server.url("cam1").replacen("rtsp://", "rtsps://", 1);
    let right = ffmpeg_plays(&with_user(&cam1, "alice:open%20sesame"));
    assert!(right.succeeded(), "FFmpeg over RTSPS: {}", right.report());
    let wrong = ffmpeg_plays(&with_user(&cam1, "alice:open"));
    assert!(
        !wrong.succeeded() && wrong.stderr.contains("401"),
        "{}",
        wrong.report()
    );
    let gst = gstreamer_plays(&cam1, "alice", "open sesame");
    assert!(
        gst_ran_to_eos(&gst),
        "GStreamer over RTSPS: {}",
        gst.report()
    );
    use base64::Engine;
    let basic = |cred: &str| base64::engine::general_purpose::STANDARD.encode(cred);
    let describe = |cred: &str| {
        format!(
            "DESCRIBE {cam1} RTSP/1.0\r\nCSeq: 1\r\nAuthorization: Basic {}\r\n\r\n",
            basic(cred)
        )
    };
    let ok = over_tls(server.addr, &describe("alice:open sesame"));
    assert!(
        ok.starts_with("RTSP/1.0 200") && ok.contains("application/sdp"),
        "{ok}"
    );
    let no = over_tls(server.addr, &describe("alice:open"));
    assert!(
        no.starts_with("RTSP/1.0 401") && no.contains("Basic realm="),
        "{no}"
    );
    // A client that does not speak TLS gets nothing it could take for an answer.
    let mut plain = TcpStream::connect(server.addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let answer = exchange(&mut plain, "OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n");
    assert!(!answer.contains("RTSP/1.0"), "{answer:?}");
    let (_, log) = server.stop();
    let log = log.join("\n");
    assert!(log.contains("its TLS failed"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// `metronome recv rtsps://` plays over TLS, trusting the server's self-signed certificate by
/// `--rtsp-tls-ca`, interleaved and over UDP, and answers Digest (Basic would be allowed
/// here); without the certificate it refuses the server with a one-line error, exit 1.
#[test]
fn recv_plays_rtsps_trusting_the_servers_certificate() {
    require("openssl", "openssl");
    let (server, cert, _dir) = tls_server("rtsp_auth_recv_tls");
    let cam1 = with_user(
        &server.url("cam1").replacen("rtsp://", "rtsps://", 1),
        "alice:open%20sesame",
    );
    for transport in ["tcp", "udp"] {
        let mut cmd = bin();
        cmd.args(["recv", &cam1, "--rtsp-transport", transport])
            .args(["--rtsp-tls-ca", &cert, "--json", "--duration", "2"]);
        let out = run(&mut cmd, LIMIT);
        assert!(out.succeeded(), "{transport}: {}", out.report());
        let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        let packets = v["counters"]["rtp_packets"].as_u64().unwrap_or(0);
        assert!(packets > 50, "{transport}: {v:#}");
    }
    // By name too (the certificate names localhost), and refused without the certificate.
    let by_name = cam1.replacen("127.0.0.1", "localhost", 1);
    let mut cmd = bin();
    cmd.args([
        "recv",
        &by_name,
        "--rtsp-transport",
        "tcp",
        "--duration",
        "1",
    ])
    .args(["--rtsp-tls-ca", &cert]);
    let out = run(&mut cmd, LIMIT);
    assert!(out.succeeded(), "by name: {}", out.report());
    let out = metronome_recv(&cam1);
    assert!(!out.succeeded(), "{}", out.report());
    assert!(
        out.stderr.contains("TLS handshake failed") && out.stderr.contains("--rtsp-tls-ca"),
        "{}",
        out.report()
    );
    server.stop();
}

/// An RTSP exchange over one TLS connection (`openssl s_client`): requests one at a time,
/// each answer read before the next is sent.
struct TlsSession {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl TlsSession {
    /// Connects; the client is killed after [`LIMIT`] (a read then sees the end), so that
    /// a server that does not answer fails the test instead of hanging it.
    fn open(addr: std::net::SocketAddr) -> TlsSession {
        let mut child = Command::new("timeout")
            .arg(LIMIT.as_secs().to_string())
            .args([
                "openssl",
                "s_client",
                "-quiet",
                "-connect",
                &addr.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        TlsSession {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends `request`; the answer's head and body (by its Content-Length).
    fn ask(&mut self, request: &str) -> (String, String) {
        use std::io::BufRead;
        self.stdin.write_all(request.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        self.stdout.read_exact(&mut body).unwrap();
        (head, String::from_utf8_lossy(&body).into_owned())
    }
}

impl Drop for TlsSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An SRTP mount (`srtp_key`) over RTSPS: DESCRIBE's SDP carries the key (`a=crypto`), SETUP
/// answers `RTP/SAVP`, and what arrives at the client's port authenticates and decrypts with
/// the key from that SDP (the cipher itself is checked against FFmpeg and GStreamer in
/// srtp_interop.rs; FFmpeg 5.1 decodes no SDES-keyed MP2T from an SDP or RTSP, even from its
/// own sender, so it cannot play this). Without TLS the server refuses to start: the key
/// would cross in clear.
#[test]
fn an_srtp_mount_over_rtsps_gives_its_key_in_describe_and_plain_rtsp_refuses_one() {
    use metronome_session::srtp::{ReceiverSrtp, SrtpKey};
    require("openssl", "openssl");
    let dir = tmp_dir("rtsp_auth_srtp");
    let (cert, key) = certificate(&dir);
    let config = dir.join("srtp.toml");
    std::fs::write(
        &config,
        format!(
            "[[stream]]\nname = \"sec\"\n{STREAM}\
             srtp_key = \"MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1ub3BxcnN0\"\n\
             [rtsp_auth]\npublic = [\"sec\"]\n"
        ),
    )
    .unwrap();
    let config = config.display().to_string();
    let plain = run(
        bin()
            .args(["serve", "--rtsp", "127.0.0.1:0", "--duration", "5s"])
            .args(["--config", &config]),
        LIMIT,
    );
    assert!(
        !plain.succeeded() && plain.stderr.contains("--rtsp-tls-cert"),
        "{}",
        plain.report()
    );
    let server = start_tls(&config, &cert, &key);
    let url = server.url("sec").replacen("rtsp://", "rtsps://", 1);
    let mut tls = TlsSession::open(server.addr);
    let (head, sdp) = tls.ask(&format!("DESCRIBE {url} RTSP/1.0\r\nCSeq: 1\r\n\r\n"));
    assert!(head.starts_with("RTSP/1.0 200"), "{head}");
    assert!(sdp.contains("RTP/SAVP 33"), "{sdp}");
    let crypto = sdp
        .lines()
        .find_map(|l| l.strip_prefix("a=crypto:"))
        .unwrap_or_else(|| panic!("no a=crypto: {sdp}"));
    let key = SrtpKey::from_crypto_attribute(crypto.trim()).unwrap();
    let rtp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rtp.local_addr().unwrap().port();
    let (head, _) = tls.ask(&format!(
        "SETUP {url}/trackID=0 RTSP/1.0\r\nCSeq: 2\r\n\
         Transport: RTP/SAVP;unicast;client_port={port}-{}\r\n\r\n",
        port + 1
    ));
    assert!(head.contains("Transport: RTP/SAVP;unicast"), "{head}");
    let session = head
        .lines()
        .find_map(|l| l.strip_prefix("Session: "))
        .and_then(|v| v.split(';').next())
        .unwrap()
        .to_string();
    let (head, _) = tls.ask(&format!(
        "PLAY {url} RTSP/1.0\r\nCSeq: 3\r\nSession: {session}\r\n\r\n"
    ));
    assert!(head.starts_with("RTSP/1.0 200"), "{head}");
    rtp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut srtp = ReceiverSrtp::new(&key).unwrap();
    let mut buf = [0u8; 2048];
    for _ in 0..50 {
        let n = rtp.recv(&mut buf).expect("SRTP packets arrive");
        let plain = srtp
            .rtp(&buf[..n])
            .expect("each authenticates with the SDP's key");
        assert_eq!(plain[1] & 0x7f, 33, "MP2T inside");
        assert_eq!(plain[12], 0x47, "a TS packet first");
    }
    drop(tls);
    let (_, log) = server.stop();
    assert!(!log.join("\n").contains("panicked"));
}
