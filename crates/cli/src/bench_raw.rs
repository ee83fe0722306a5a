//! `metronome bench raw`: uncompressed video (RFC 4175) from Metronome and from GStreamer
//! (`videotestsrc ! rtpvrawpay ! udpsink` into `udpsrc ! rtpvrawdepay ! fakesink`) on the same
//! cases, in one run. Every sender and receiver is its own child process (`metronome serve
//! --raw`, `metronome recv --raw`, `gst-launch-1.0`); the CPU of each is its rusage from
//! `wait4`, divided by the frames sent. `serve --raw` is a stream server with the stream as its
//! one lane, so its CPU includes the server's start (the send-cost calibration is skipped: the
//! bench gives a nominal cost) and its idle RTCP and producer threads.
//!
//! Three configurations per case:
//! - `metronome`: `serve --raw` → `recv --raw`, pacing `burst` and `narrow-gapped`;
//! - `gstreamer`: GStreamer → GStreamer, for CPU per frame only (fakesink counts nothing);
//! - `gstreamer→metronome-recv`: GStreamer's sender observed by `metronome recv --raw`, for
//!   frames lost, packets per second and per-frame spread (GStreamer stamps no capture time, so
//!   its capture-to-complete latency cannot be measured).

use clap::Args;
use metronome_rt::ports::free_udp_run;
use metronome_time::Micros;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const ALL_CASES: &str = "720x576,176x144,1280x720,1920x1080";

#[derive(Args, Debug)]
pub(crate) struct RawArgs {
    /// How long each run streams
    #[arg(long, value_parser = crate::args::parse_run_length, default_value = "5s")]
    pub duration: Duration,
    /// Cases to run (of 720x576, 176x144, 1280x720, 1920x1080)
    #[arg(long, value_delimiter = ',', default_value = ALL_CASES)]
    pub cases: Vec<String>,
    /// Print JSON only
    #[arg(long)]
    pub json: bool,
}

/// One video format both systems are run on.
struct CaseDef {
    name: &'static str,
    width: u32,
    height: u32,
    fps: u32,
    /// `metronome --sampling`.
    sampling: &'static str,
    depth: u32,
    /// GStreamer's raw video format of the same sampling and depth.
    gst_format: &'static str,
    /// The SDP / RTP caps sampling name.
    sdp_sampling: &'static str,
}

const CASES: [CaseDef; 4] = [
    CaseDef {
        name: "720x576",
        width: 720,
        height: 576,
        fps: 25,
        sampling: "422",
        depth: 8,
        gst_format: "UYVY",
        sdp_sampling: "YCbCr-4:2:2",
    },
    CaseDef {
        name: "176x144",
        width: 176,
        height: 144,
        fps: 25,
        sampling: "420",
        depth: 8,
        gst_format: "I420",
        sdp_sampling: "YCbCr-4:2:0",
    },
    CaseDef {
        name: "1280x720",
        width: 1280,
        height: 720,
        fps: 30,
        sampling: "422",
        depth: 8,
        gst_format: "UYVY",
        sdp_sampling: "YCbCr-4:2:2",
    },
    CaseDef {
        name: "1920x1080",
        width: 1920,
        height: 1080,
        fps: 60,
        sampling: "422",
        depth: 10,
        gst_format: "UYVP",
        sdp_sampling: "YCbCr-4:2:2",
    },
];

impl CaseDef {
    fn label(&self) -> String {
        format!(
            "{}x{}@{} {} {}-bit",
            self.width, self.height, self.fps, self.sdp_sampling, self.depth
        )
    }
}

/// A latency-like distribution (its figures in µs in JSON, as the field holding it says).
#[derive(Serialize, Clone, Copy, Default, schemars::JsonSchema)]
struct Dist {
    count: u64,
    p50: Micros,
    p99: Micros,
    max: Micros,
}

/// CPU seconds `cpu_s` per frame of `frames` (none without frames).
fn per_frame(cpu_s: f64, frames: u64) -> Option<Micros> {
    (frames > 0).then(|| Micros::from_secs_f64(cpu_s / frames as f64))
}

impl Dist {
    fn of(v: Option<&Value>) -> Option<Dist> {
        let v = v?;
        let d = Dist {
            count: v.get("count")?.as_u64()?,
            p50: Micros::from_micros_f64(num(v, "p50")),
            p99: Micros::from_micros_f64(num(v, "p99")),
            max: Micros::from_micros_f64(num(v, "max")),
        };
        (d.count > 0).then_some(d)
    }
}

/// One case × system × pacing.
#[derive(Serialize, Default, schemars::JsonSchema)]
struct Run {
    case: String,
    format: String,
    /// `metronome`, `gstreamer` or `gstreamer→metronome-recv`.
    system: &'static str,
    /// `burst` or `narrow-gapped` (GStreamer's udpsink sends bursts).
    pacing: &'static str,
    /// Why this run has no figures (e.g. GStreamer cannot do the case).
    error: Option<String>,
    frames_sent: u64,
    /// Complete frames at the receiver (None: the receiver counts nothing).
    frames_received: Option<u64>,
    frames_partial: Option<u64>,
    frames_lost: Option<u64>,
    /// Capture time → frame complete at the receiver (Metronome's capture-time extension).
    /// None when the sender stamps no capture time (GStreamer).
    latency_us: Option<Dist>,
    /// Capture time → kernel arrival of the frame's last packet.
    arrival_latency_us: Option<Dist>,
    /// First → last packet arrival of each frame (kernel timestamps).
    spread_us: Option<Dist>,
    /// The sender model's spread of a frame (Metronome only).
    model_spread_us: Option<Micros>,
    /// Sender process CPU (user + system, from wait4) ÷ frames sent.
    sender_cpu_per_frame_us: Option<Micros>,
    /// Receiver process CPU (user + system, from wait4) ÷ frames sent.
    receiver_cpu_per_frame_us: Option<Micros>,
    /// What the Metronome processes report themselves (their own threads' accounting).
    sender_reported_cpu_per_frame_us: Option<Micros>,
    receiver_reported_cpu_per_frame_us: Option<Micros>,
    packets_per_frame: Option<f64>,
    /// Packets per second at the receiver (for `gstreamer`: the observer's packets per frame ×
    /// frames sent ÷ the sender process's run time, start-up included).
    pps: Option<f64>,
    late_frames: Option<u64>,
    send_lateness_p99_us: Option<Micros>,
    conformance: Option<String>,
    rx_overflow: Option<u64>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Ratio {
    case: String,
    pacing: &'static str,
    /// Metronome's CPU per frame ÷ GStreamer's (below 1: Metronome spends less).
    sender_cpu_ratio: Option<f64>,
    receiver_cpu_ratio: Option<f64>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Check {
    target: String,
    /// None: not measured in this run.
    pass: Option<bool>,
    detail: String,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct RawBench {
    benchmark: &'static str,
    duration_us: Micros,
    notes: Vec<&'static str>,
    runs: Vec<Run>,
    ratios: Vec<Ratio>,
    checks: Vec<Check>,
}

const NOTES: [&str; 4] = [
    "CPU per frame: the child process's user + system time (wait4 rusage) divided by the frames sent; both senders include their test-pattern source",
    "latency_us: capture time to frame complete (Metronome's capture-time extension); GStreamer carries no capture time, so its runs have none",
    "gstreamer→metronome-recv: GStreamer's sender observed by metronome recv --raw: frames lost, pps and spread_us (first to last packet of a frame) are GStreamer's sender's",
    "gstreamer (GStreamer to GStreamer): CPU per frame of both GStreamer processes; fakesink counts no frames; pps = packets per frame (from the observed run) x frames sent / sender run time",
];

pub(crate) fn run(a: RawArgs, stop: Arc<AtomicBool>) -> Result<(), Box<dyn std::error::Error>> {
    let mut cases = Vec::new();
    for name in &a.cases {
        let c = CASES
            .iter()
            .find(|c| c.name == name.trim())
            .ok_or_else(|| format!("unknown case {name:?} (known: {ALL_CASES})"))?;
        cases.push(c);
    }
    let exe = std::env::current_exe()?;
    let mut runs = Vec::new();
    // Four runs a case (Metronome burst and narrow-gapped, GStreamer observed and alone), each
    // its duration and about a second of start and settling.
    let steps = cases.len() * 4;
    let expected = steps as f64 * (a.duration.as_secs_f64() + 1.0);
    let mut progress = crate::progress::Progress::start("bench raw", steps, Some(expected));
    for c in cases {
        for pacing in ["burst", "narrow-gapped"] {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            runs.push(
                metronome_run(&exe, c, pacing, a.duration).unwrap_or_else(|e| Run {
                    error: Some(e.to_string()),
                    ..base(c, "metronome", pacing)
                }),
            );
            progress.step(&format!("{} metronome {pacing}", c.name));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let observed = gst_observed_run(&exe, c, a.duration).unwrap_or_else(|e| Run {
            error: Some(e.to_string()),
            ..base(c, "gstreamer→metronome-recv", "burst")
        });
        let ppf = observed.packets_per_frame;
        runs.push(observed);
        progress.step(&format!("{} gstreamer→metronome-recv", c.name));
        if stop.load(Ordering::Relaxed) {
            break;
        }
        runs.push(gst_run(c, a.duration, ppf).unwrap_or_else(|e| Run {
            error: Some(e.to_string()),
            ..base(c, "gstreamer", "burst")
        }));
        progress.step(&format!("{} gstreamer", c.name));
    }
    let ratios = ratios(&runs);
    let checks = checks(&runs, &ratios);
    let bench = RawBench {
        benchmark: "raw",
        duration_us: Micros::from(a.duration),
        notes: NOTES.to_vec(),
        runs,
        ratios,
        checks,
    };
    if a.json {
        println!("{}", crate::report::to_json(&bench)?);
    } else {
        print!("{}", human(&bench));
    }
    Ok(())
}

fn base(c: &CaseDef, system: &'static str, pacing: &'static str) -> Run {
    Run {
        case: c.name.to_string(),
        format: c.label(),
        system,
        pacing,
        ..Run::default()
    }
}

/// CLOCK_MONOTONIC (the time children are bounded by).
fn now() -> Duration {
    Duration::from_nanos(metronome_rt::clock::mono_ns())
}

fn num(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

fn int(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

/// A duration field (`*_us`) of a document, if it has one.
fn micros(v: &Value, k: &str) -> Option<Micros> {
    v.get(k)
        .and_then(Value::as_f64)
        .map(Micros::from_micros_f64)
}

/// A child process whose stdout and stderr are drained by threads.
struct Proc {
    child: Child,
    /// CLOCK_MONOTONIC at spawn.
    started: Duration,
    stdout: Option<JoinHandle<String>>,
    stderr: mpsc::Receiver<String>,
    stderr_tail: Vec<String>,
}

/// How a child ended.
struct Ended {
    ok: bool,
    status: String,
    stdout: String,
    stderr: String,
    cpu_s: f64,
    /// Spawn to reaped.
    wall_s: f64,
}

impl Proc {
    fn spawn(cmd: &mut Command) -> std::io::Result<Proc> {
        let mut child = metronome_rt::process::with_default_signals(cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut out = child.stdout.take();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(o) = out.as_mut() {
                let _ = o.read_to_string(&mut s);
            }
            s
        });
        let (tx, rx) = mpsc::channel();
        if let Some(err) = child.stderr.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(Proc {
            child,
            started: now(),
            stdout: Some(stdout),
            stderr: rx,
            stderr_tail: Vec::new(),
        })
    }

    fn keep(&mut self, line: String) {
        self.stderr_tail.push(line);
        if self.stderr_tail.len() > 8 {
            self.stderr_tail.remove(0);
        }
    }

    /// Waits up to `limit` for a stderr line containing `what`.
    fn wait_for(mut self, what: &str, limit: Duration) -> Result<Proc, String> {
        let end = now() + limit;
        loop {
            let left = end.saturating_sub(now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(what);
                    self.keep(line);
                    if found {
                        return Ok(self);
                    }
                }
                Err(_) => {
                    let e = self.finish(Duration::ZERO, true);
                    return Err(format!("never said {what:?}: {}", e.stderr));
                }
            }
        }
    }

    /// Interrupts the child (SIGINT) when `interrupt`, then waits until `limit` after its
    /// start at most (SIGKILL then). CPU time comes from `wait4`'s rusage.
    fn finish(mut self, limit: Duration, interrupt: bool) -> Ended {
        let pid = self.child.id() as libc::pid_t;
        if interrupt {
            // SAFETY: kill(2) on a child we spawned and have not reaped.
            unsafe { libc::kill(pid, libc::SIGINT) };
        }
        let deadline = self.started + limit;
        let mut status = 0;
        // SAFETY: rusage is plain data, all zeroes is a valid value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let mut killed = false;
        loop {
            // SAFETY: wait4 on our own child, with valid pointers.
            let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
            if r == pid || r < 0 {
                break;
            }
            if !killed && now() >= deadline {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                killed = true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let stdout = self
            .stdout
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_millis(50)) {
            self.keep(line);
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        let exited = libc::WIFEXITED(status);
        let code = libc::WEXITSTATUS(status);
        Ended {
            ok: !killed && exited && code == 0,
            status: if killed {
                format!("killed after {:.0} s", limit.as_secs_f64())
            } else if exited {
                format!("exit code {code}")
            } else {
                format!("signal {}", libc::WTERMSIG(status))
            },
            stdout,
            stderr: self.stderr_tail.join(" | "),
            cpu_s: tv(ru.ru_utime) + tv(ru.ru_stime),
            wall_s: now().saturating_sub(self.started).as_secs_f64(),
        }
    }
}

fn parse_json(e: &Ended, who: &str) -> Result<Value, String> {
    serde_json::from_str(&e.stdout)
        .map_err(|_| format!("{who} printed no JSON ({}): {}", e.status, e.stderr))
}

fn raw_args(c: &CaseDef, pacing: &str) -> Vec<String> {
    [
        "--raw",
        "--size",
        &format!("{}x{}", c.width, c.height),
        "--fps",
        &c.fps.to_string(),
        "--sampling",
        c.sampling,
        "--depth",
        &c.depth.to_string(),
        "--pacing",
        pacing,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn secs(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

/// `metronome recv --raw` on a fresh port, listening.
fn start_metronome_recv(
    exe: &std::path::Path,
    c: &CaseDef,
    pacing: &str,
    duration: Duration,
) -> Result<(Proc, u16), Box<dyn std::error::Error>> {
    let port = free_udp_run(2)?;
    let rx = Proc::spawn(
        Command::new(exe)
            .arg("recv")
            .arg(format!("rtp://127.0.0.1:{port}"))
            .args(raw_args(c, pacing))
            .args(["--json", "--duration", &secs(duration + LIMIT)]),
    )?;
    let rx = rx
        .wait_for("listening on", Duration::from_secs(5))
        .map_err(|e| format!("metronome recv: {e}"))?;
    Ok((rx, port))
}

/// Every child is killed this long after its run's duration.
const LIMIT: Duration = Duration::from_secs(10);
/// Lets the last packets arrive before the receiver is stopped.
const SETTLE: Duration = Duration::from_millis(300);

fn metronome_run(
    exe: &std::path::Path,
    c: &CaseDef,
    pacing: &'static str,
    duration: Duration,
) -> Result<Run, Box<dyn std::error::Error>> {
    let (rx, port) = start_metronome_recv(exe, c, pacing, duration)?;
    // `serve --raw` admits its stream; the bench measures how it is sent, so admission is
    // given a nominal send cost that no busy moment can turn into a refusal.
    let tx = Proc::spawn(
        Command::new(exe)
            .arg("serve")
            .args(raw_args(c, pacing))
            .arg(format!("rtp://127.0.0.1:{port}"))
            .args([
                "--json",
                "--duration",
                &secs(duration),
                "--send-cost",
                "1us",
            ]),
    )?;
    let sent = tx.finish(duration + LIMIT, false);
    std::thread::sleep(SETTLE);
    let got = rx.finish(duration + LIMIT, true);
    let s = parse_json(&sent, "metronome serve")?;
    let r = parse_json(&got, "metronome recv")?;
    let frames = int(&s, "frames_sent").unwrap_or(0);
    let packets = int(&r, "packets").unwrap_or(0);
    let complete = int(&r, "frames_complete").unwrap_or(0);
    Ok(Run {
        frames_sent: frames,
        frames_received: Some(complete),
        frames_partial: int(&r, "frames_partial"),
        frames_lost: int(&r, "frames_lost"),
        latency_us: Dist::of(r.get("latency_us")),
        arrival_latency_us: Dist::of(r.get("arrival_latency_us")),
        spread_us: Dist::of(r.get("spread_us")),
        model_spread_us: Some(Micros::from_micros_f64(num(&s, "spread_us"))),
        sender_cpu_per_frame_us: per_frame(sent.cpu_s, frames),
        receiver_cpu_per_frame_us: per_frame(got.cpu_s, frames),
        sender_reported_cpu_per_frame_us: micros(&s, "cpu_per_frame_us"),
        receiver_reported_cpu_per_frame_us: micros(&r, "cpu_per_frame_us"),
        packets_per_frame: int(&s, "packets_per_frame").map(|p| p as f64),
        pps: Some(num(&r, "pps")).filter(|_| packets > 0),
        late_frames: int(&s, "late_frames"),
        send_lateness_p99_us: s.get("send_lateness").and_then(|l| micros(l, "p99_us")),
        conformance: r
            .get("conformance")
            .and_then(|c| c.get("verdict"))
            .and_then(Value::as_str)
            .map(str::to_string),
        rx_overflow: int(&r, "rx_overflow"),
        ..base(c, "metronome", pacing)
    })
}

/// `gst-launch-1.0 videotestsrc ! rtpvrawpay ! udpsink` of `duration` worth of frames.
fn gst_sender(c: &CaseDef, port: u16, duration: Duration) -> std::io::Result<(Proc, u64)> {
    let frames = (duration.as_secs_f64() * c.fps as f64).round().max(1.0) as u64;
    let p = Proc::spawn(Command::new("gst-launch-1.0").args([
        "-q".to_string(),
        "videotestsrc".into(),
        "is-live=true".into(),
        format!("num-buffers={frames}"),
        "!".into(),
        format!(
            "video/x-raw,format={},width={},height={},framerate={}/1",
            c.gst_format, c.width, c.height, c.fps
        ),
        "!".into(),
        // Datagrams of Metronome's size (1428 bytes of payload + headers).
        "rtpvrawpay".into(),
        "mtu=1456".into(),
        "!".into(),
        "udpsink".into(),
        "host=127.0.0.1".into(),
        format!("port={port}"),
    ]))?;
    Ok((p, frames))
}

fn gst_error(what: &str, e: &Ended) -> String {
    if e.status.starts_with("killed") {
        format!(
            "GStreamer's {what} did not finish ({}): slower than real time on this host",
            e.status
        )
    } else {
        format!(
            "GStreamer cannot do this case ({what} {}): {}",
            e.status, e.stderr
        )
    }
}

fn gst_observed_run(
    exe: &std::path::Path,
    c: &CaseDef,
    duration: Duration,
) -> Result<Run, Box<dyn std::error::Error>> {
    let (rx, port) = start_metronome_recv(exe, c, "burst", duration)?;
    let (tx, frames) = gst_sender(c, port, duration)?;
    let sent = tx.finish(duration + LIMIT, false);
    std::thread::sleep(SETTLE);
    let got = rx.finish(duration + LIMIT, true);
    if !sent.ok {
        return Err(gst_error("sender", &sent).into());
    }
    let r = parse_json(&got, "metronome recv")?;
    let complete = int(&r, "frames_complete").unwrap_or(0);
    let packets = int(&r, "packets").unwrap_or(0);
    let ended = complete + int(&r, "frames_partial").unwrap_or(0);
    Ok(Run {
        frames_sent: frames,
        frames_received: Some(complete),
        frames_partial: int(&r, "frames_partial"),
        frames_lost: int(&r, "frames_lost"),
        spread_us: Dist::of(r.get("spread_us")),
        sender_cpu_per_frame_us: per_frame(sent.cpu_s, frames),
        receiver_cpu_per_frame_us: per_frame(got.cpu_s, frames),
        receiver_reported_cpu_per_frame_us: micros(&r, "cpu_per_frame_us"),
        packets_per_frame: (ended > 0).then(|| packets as f64 / ended as f64),
        pps: Some(num(&r, "pps")).filter(|_| packets > 0),
        conformance: r
            .get("conformance")
            .and_then(|c| c.get("verdict"))
            .and_then(Value::as_str)
            .map(str::to_string),
        rx_overflow: int(&r, "rx_overflow"),
        ..base(c, "gstreamer→metronome-recv", "burst")
    })
}

fn gst_run(
    c: &CaseDef,
    duration: Duration,
    packets_per_frame: Option<f64>,
) -> Result<Run, Box<dyn std::error::Error>> {
    let port = free_udp_run(2)?;
    let caps = format!(
        "application/x-rtp, media=(string)video, clock-rate=(int)90000, encoding-name=(string)RAW, \
         sampling=(string){}, depth=(string){}, width=(string){}, height=(string){}, payload=(int)96",
        c.sdp_sampling, c.depth, c.width, c.height
    );
    let rx = Proc::spawn(Command::new("gst-launch-1.0").args([
        "-q".to_string(),
        "udpsrc".into(),
        format!("port={port}"),
        format!("caps={caps}"),
        "!".into(),
        "rtpvrawdepay".into(),
        "!".into(),
        "fakesink".into(),
    ]))
    .map_err(|e| format!("gst-launch-1.0: {e}"))?;
    // udpsrc has bound the port once the kernel's table shows it (a probe by binding could take
    // the port from it); then give the pipeline a moment to play.
    let bound_by = now() + Duration::from_secs(5);
    while !metronome_rt::ports::udp_port_bound(port) && now() < bound_by {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let (tx, frames) = gst_sender(c, port, duration)?;
    let sent = tx.finish(duration + LIMIT, false);
    std::thread::sleep(SETTLE);
    let got = rx.finish(duration + LIMIT, true);
    if !sent.ok {
        return Err(gst_error("sender", &sent).into());
    }
    if got.status.starts_with("killed") || got.stderr.contains("ERROR") {
        return Err(gst_error("receiver", &got).into());
    }
    Ok(Run {
        frames_sent: frames,
        sender_cpu_per_frame_us: per_frame(sent.cpu_s, frames),
        receiver_cpu_per_frame_us: per_frame(got.cpu_s, frames),
        packets_per_frame,
        pps: packets_per_frame.map(|p| p * frames as f64 / sent.wall_s.max(1e-3)),
        ..base(c, "gstreamer", "burst")
    })
}

fn ratios(runs: &[Run]) -> Vec<Ratio> {
    let div = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let mut out = Vec::new();
    for m in runs
        .iter()
        .filter(|r| r.system == "metronome" && r.error.is_none())
    {
        let Some(g) = runs
            .iter()
            .find(|g| g.system == "gstreamer" && g.case == m.case && g.error.is_none())
        else {
            continue;
        };
        out.push(Ratio {
            case: m.case.clone(),
            pacing: m.pacing,
            sender_cpu_ratio: div(
                m.sender_cpu_per_frame_us.map(Micros::as_micros_f64),
                g.sender_cpu_per_frame_us.map(Micros::as_micros_f64),
            ),
            receiver_cpu_ratio: div(
                m.receiver_cpu_per_frame_us.map(Micros::as_micros_f64),
                g.receiver_cpu_per_frame_us.map(Micros::as_micros_f64),
            ),
        });
    }
    out
}

fn checks(runs: &[Run], ratios: &[Ratio]) -> Vec<Check> {
    let find = |case: &str, pacing: &str| {
        runs.iter().find(|r| {
            r.system == "metronome" && r.case == case && r.pacing == pacing && r.error.is_none()
        })
    };
    let mut out = Vec::new();
    let p99 = |r: &Run| r.latency_us.map(|l| l.p99.as_micros_f64());
    if let Some(r) = find("720x576", "burst") {
        out.push(Check {
            target: "720x576 burst: latency p99 < 5 ms".into(),
            pass: p99(r).map(|p| p < 5000.0),
            detail: format!("p99 {:.0} µs", p99(r).unwrap_or(f64::NAN)),
        });
    }
    for r in runs
        .iter()
        .filter(|r| r.system == "metronome" && r.pacing == "narrow-gapped" && r.error.is_none())
    {
        let spread = r.model_spread_us.map(Micros::as_micros_f64).unwrap_or(0.0);
        out.push(Check {
            target: format!(
                "{} narrow-gapped: latency p99 within 1.2× the spread",
                r.case
            ),
            pass: p99(r).map(|p| p <= 1.2 * spread),
            detail: format!(
                "p99 {:.0} µs, spread {:.0} µs (×{:.2})",
                p99(r).unwrap_or(f64::NAN),
                spread,
                p99(r).unwrap_or(f64::NAN) / spread
            ),
        });
    }
    for pacing in ["burst", "narrow-gapped"] {
        if let Some(r) = find("1920x1080", pacing) {
            let lost = r.frames_lost.unwrap_or(0) + r.frames_partial.unwrap_or(0);
            out.push(Check {
                target: format!("1920x1080p60 10-bit {pacing}: no frame lost"),
                pass: Some(lost == 0 && r.frames_received.unwrap_or(0) > 0),
                detail: format!(
                    "{} of {} complete, {} lost, {} partial",
                    r.frames_received.unwrap_or(0),
                    r.frames_sent,
                    r.frames_lost.unwrap_or(0),
                    r.frames_partial.unwrap_or(0)
                ),
            });
        }
    }
    for q in ratios {
        let f = |x: Option<f64>| x.map_or("n/a".to_string(), |x| format!("{x:.2}"));
        out.push(Check {
            target: format!(
                "{} {}: CPU per frame ≤ 0.5× GStreamer's (sender and receiver)",
                q.case, q.pacing
            ),
            pass: match (q.sender_cpu_ratio, q.receiver_cpu_ratio) {
                (Some(s), Some(r)) => Some(s <= 0.5 && r <= 0.5),
                _ => None,
            },
            detail: format!(
                "sender ×{}, receiver ×{}",
                f(q.sender_cpu_ratio),
                f(q.receiver_cpu_ratio)
            ),
        });
    }
    out
}

fn human(b: &RawBench) -> String {
    let o = |x: Option<f64>, w: usize| x.map_or(format!("{:>w$}", "-"), |x| format!("{x:>w$.0}"));
    let n = |x: Option<u64>, w: usize| x.map_or(format!("{:>w$}", "-"), |x| format!("{x:>w$}"));
    let mut s = format!(
        "bench raw: {:.0} s per run; CPU per frame = process user+system ÷ frames sent\n",
        b.duration_us.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "{:<10} {:<24} {:<13} {:>6} {:>6} {:>5} {:>5} {:>7} {:>7} {:>7} {:>8} {:>8} {:>9} {:>9} {:>8}  conformance",
        "case",
        "system",
        "pacing",
        "sent",
        "rx",
        "lost",
        "part",
        "lat p50",
        "lat p99",
        "lat max",
        "sprd p99",
        "sprd max",
        "tx µs/fr",
        "rx µs/fr",
        "pps"
    );
    for r in &b.runs {
        if let Some(e) = &r.error {
            let _ = writeln!(s, "{:<10} {:<24} {:<13} {}", r.case, r.system, r.pacing, e);
            continue;
        }
        let _ = writeln!(
            s,
            "{:<10} {:<24} {:<13} {:>6} {} {} {} {} {} {} {} {} {} {} {}  {}",
            r.case,
            r.system,
            r.pacing,
            r.frames_sent,
            n(r.frames_received, 6),
            n(r.frames_lost, 5),
            n(r.frames_partial, 5),
            o(r.latency_us.map(|l| l.p50.as_micros_f64()), 7),
            o(r.latency_us.map(|l| l.p99.as_micros_f64()), 7),
            o(r.latency_us.map(|l| l.max.as_micros_f64()), 7),
            o(r.spread_us.map(|l| l.p99.as_micros_f64()), 8),
            o(r.spread_us.map(|l| l.max.as_micros_f64()), 8),
            o(r.sender_cpu_per_frame_us.map(Micros::as_micros_f64), 9),
            o(r.receiver_cpu_per_frame_us.map(Micros::as_micros_f64), 9),
            o(r.pps, 8),
            r.conformance.as_deref().unwrap_or("-"),
        );
    }
    s.push_str(
        "lat: capture → frame complete, µs (GStreamer stamps no capture time: none); sprd: first → last packet of a frame at the receiver, µs\n",
    );
    s.push_str("gstreamer→metronome-recv: GStreamer's sender observed by metronome recv (its rx CPU is metronome recv's); gstreamer: GStreamer to GStreamer\n");
    for q in &b.ratios {
        let f = |x: Option<f64>| x.map_or("n/a".to_string(), |x| format!("×{x:.2}"));
        let _ = writeln!(
            s,
            "{} {}: Metronome/GStreamer CPU per frame: sender {}, receiver {}",
            q.case,
            q.pacing,
            f(q.sender_cpu_ratio),
            f(q.receiver_cpu_ratio)
        );
    }
    for c in &b.checks {
        let verdict = match c.pass {
            Some(true) => "PASS",
            Some(false) => "FAIL",
            None => "n/a ",
        };
        let _ = writeln!(s, "check {verdict} {}: {}", c.target, c.detail);
    }
    s
}
