//! What the RTSP tests share: a `metronome serve --rtsp` in the background, temporary files, and
//! a small test media file.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_metronome"))
}

/// An even port whose RTCP neighbour is free too.
pub fn port_pair() -> u16 {
    for _ in 0..100 {
        let p = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
            & !1;
        if p > 1024
            && UdpSocket::bind((Ipv4Addr::LOCALHOST, p)).is_ok()
            && UdpSocket::bind((Ipv4Addr::LOCALHOST, p + 1)).is_ok()
        {
            return p;
        }
    }
    panic!("no free port pair");
}

/// A fresh directory for one test's files, readable by everyone (VLC runs as nobody).
pub fn tmp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("metronome-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _ = Command::new("chmod").arg("0777").arg(&dir).status();
    dir
}

/// Panics with a clear message if a program the tests need is missing (scripts/test.sh installs
/// them from Debian).
pub fn require(program: &str, package: &str) {
    let ok = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{program} is missing: apt-get install {package} (scripts/test.sh does)"
    );
}

/// A 6-second MPEG-TS file (MPEG-2 video, 320x240 at 25 fps) made with ffmpeg, cached per test
/// process.
pub fn ts_file() -> PathBuf {
    // Tests run on several threads: one makes the file, the others wait for it.
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let path = tmp_dir("media").join("clip.ts");
    if !path.exists() {
        require("ffmpeg", "ffmpeg");
        let part = path.with_extension("part.ts");
        let out = Command::new("ffmpeg")
            .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
            .arg("testsrc=size=320x240:rate=25:duration=6")
            .args([
                "-c:v",
                "mpeg2video",
                "-b:v",
                "800k",
                "-g",
                "12",
                "-f",
                "mpegts",
            ])
            .args(["-muxrate", "1200k"])
            .arg(&part)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ffmpeg: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::rename(&part, &path).unwrap();
    }
    path
}

/// `metronome serve --rtsp 127.0.0.1:0 …` in the background, stopped (Ctrl-C) when dropped.
pub struct RtspServer {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: mpsc::Receiver<String>,
}

impl RtspServer {
    /// Starts it with `extra` arguments and waits until it serves its mounts. It stops by
    /// itself after 120 s at the latest.
    pub fn start(extra: &[&str]) -> RtspServer {
        let mut child = bin()
            .args(["serve", "--rtsp", "127.0.0.1:0", "--duration", "120"])
            .args(["--send-cost", "5us"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Duration::from_secs(30);
        let addr = loop {
            let line = rx
                .recv_timeout(deadline)
                .expect("metronome serve --rtsp did not start serving");
            if let Some(rest) = line.split("serving rtsp://").nth(1) {
                let host = rest.split('/').next().unwrap();
                break host.parse().unwrap();
            }
        };
        RtspServer {
            child,
            addr,
            log: rx,
        }
    }

    pub fn url(&self, mount: &str) -> String {
        format!("rtsp://{}/{mount}", self.addr)
    }

    /// Stops it as Ctrl-C would and returns its stdout (the summary) and the rest of its log.
    pub fn stop(mut self) -> (String, Vec<String>) {
        // SAFETY: kill(2) with a valid pid and signal has no memory-safety preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let mut out = String::new();
        if let Some(mut s) = self.child.stdout.take() {
            use std::io::Read;
            let _ = s.read_to_string(&mut out);
        }
        let _ = self.child.wait();
        let log = self.log.try_iter().collect();
        (out, log)
    }
}

impl Drop for RtspServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
