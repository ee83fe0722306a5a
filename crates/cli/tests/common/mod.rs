//! What the CLI tests share: child processes with a time limit ([`Running`], [`run`]), a
//! `metronome serve --rtsp` in the background and a bare RTSP client for it (`rtsp_client`),
//! temporary files, and a small test media file.

#![allow(dead_code)]

pub(crate) mod rtsp_client;

use metronome_testkit::TempDir;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_metronome"))
}

/// The wall clock of the test harness: it bounds child processes, and nothing measured here is
/// timed with it (clippy.toml forbids `Instant::now` in the crates' code).
#[allow(clippy::disallowed_methods)]
pub(crate) fn now() -> Instant {
    Instant::now()
}

/// This test process's id, unique across runs: the pid, which the kernel reuses (pid_max is
/// 32768 here), plus the wall-clock time it started. A directory named by the pid alone can
/// hold a previous run's files: a stale `got.raw` of full length once made a test stop
/// GStreamer after its first frame.
#[allow(clippy::disallowed_methods)]
pub(crate) fn run_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{}-{t}", std::process::id())
    })
}

// ---------------------------------------------------------------------------------------------
// Child processes with a time limit

/// A program running in the background, stdin closed, its stdout and stderr collected (and
/// each line also passed on as it comes, for [`Running::wait_for`]). Killed if dropped while
/// still running, so a failing test leaves no child behind.
pub(crate) struct Running {
    what: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    /// The lines `wait_for` has read so far.
    seen: Vec<String>,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
    started: Instant,
}

/// What a program did.
pub(crate) struct Outcome {
    /// The command line.
    pub what: String,
    /// `None`: killed at its time limit.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

/// Reads `from` to its end on a thread: sends each line (without its line ending) to `lines`
/// and returns all of it (invalid UTF-8 replaced).
fn collect(from: impl Read + Send + 'static, lines: mpsc::Sender<String>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut from = BufReader::new(from);
        let (mut all, mut line) = (Vec::new(), Vec::new());
        loop {
            line.clear();
            match from.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    all.extend_from_slice(&line);
                    let l = line.strip_suffix(b"\n").unwrap_or(&line);
                    let l = l.strip_suffix(b"\r").unwrap_or(l);
                    // Nobody listening any more is fine: the output is still collected.
                    let _ = lines.send(String::from_utf8_lossy(l).into_owned());
                }
            }
        }
        String::from_utf8_lossy(&all).into_owned()
    })
}

impl Running {
    /// Starts `cmd` with stdin closed and stdout and stderr collected.
    pub(crate) fn spawn(cmd: &mut Command) -> Running {
        let what = format!("{cmd:?}");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().map(|o| collect(o, tx.clone()));
        let stderr = child.stderr.take().map(|e| collect(e, tx));
        Running {
            what,
            child,
            lines,
            seen: Vec::new(),
            stdout,
            stderr,
            started: now(),
        }
    }

    /// Waits for a line of output (stdout or stderr) containing `what`; panics with the output
    /// so far if none comes within `limit` or the program closes its output first.
    pub(crate) fn wait_for(&mut self, what: &str, limit: Duration) {
        let deadline = now() + limit;
        loop {
            let left = deadline.saturating_duration_since(now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let hit = l.contains(what);
                    self.seen.push(l);
                    if hit {
                        return;
                    }
                }
                Err(_) => panic!(
                    "{} did not say '{what}' within {limit:?}; it said:\n{}",
                    self.what,
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// The lines [`wait_for`](Self::wait_for) has read so far.
    pub(crate) fn seen(&self) -> &[String] {
        &self.seen
    }

    /// Whether it has exited.
    pub(crate) fn has_exited(&mut self) -> bool {
        self.child.try_wait().ok().flatten().is_some()
    }

    /// Interrupts it as Ctrl-C does.
    pub(crate) fn interrupt(&self) {
        self.signal(libc::SIGINT);
    }

    /// Sends it `signal` (SIGTERM, SIGSTOP, SIGCONT, ...). Its pid is still its own: only
    /// this `Running` reaps it.
    pub(crate) fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
        let r = unsafe { libc::kill(self.child.id() as i32, signal) };
        let e = std::io::Error::last_os_error();
        // Gone already (reaped by `has_exited`): nothing to signal, and what it said is in
        // its report, which the caller shows.
        assert!(r == 0 || e.raw_os_error() == Some(libc::ESRCH), "kill: {e}");
    }

    /// Its process id (for /proc).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets it end on its own for `grace`, then interrupts it as Ctrl-C does.
    pub(crate) fn interrupt_after(&mut self, grace: Duration) {
        let deadline = now() + grace;
        while now() < deadline {
            if self.has_exited() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.interrupt();
    }

    /// Waits until it exits or `deadline` passes (then kills it), and collects its output.
    pub(crate) fn finish(mut self, deadline: Instant) -> Outcome {
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break None;
                }
            }
        };
        let took = now() - self.started;
        let join =
            |h: Option<JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        Outcome {
            what: std::mem::take(&mut self.what),
            status,
            stdout: join(self.stdout.take()),
            stderr: join(self.stderr.take()),
            took,
        }
    }

    /// [`finish`](Self::finish) with a deadline `limit` from now.
    pub(crate) fn finish_within(self, limit: Duration) -> Outcome {
        self.finish(now() + limit)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `cmd` to its end, or kills it after `limit`.
pub(crate) fn run(cmd: &mut Command, limit: Duration) -> Outcome {
    Running::spawn(cmd).finish_within(limit)
}

/// The last `n` bytes of `s` (at a character boundary).
fn tail(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

impl Outcome {
    /// Exited by itself, with status 0.
    pub(crate) fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// The command, how it ended and the ends of its output, for assertion messages.
    pub(crate) fn report(&self) -> String {
        let ended = match self.status {
            Some(s) => format!("exited with {s} after {:.1} s", self.took.as_secs_f64()),
            None => format!(
                "KILLED: still running after {:.1} s",
                self.took.as_secs_f64()
            ),
        };
        format!(
            "{}\n  {ended}\n--- stderr (end) ---\n{}\n--- stdout (end) ---\n{}\n---",
            self.what,
            tail(&self.stderr, 6000),
            tail(&self.stdout, 2000)
        )
    }

    /// Itself if it [`succeeded`](Self::succeeded); otherwise panics with its report.
    #[track_caller]
    pub(crate) fn expect_success(self) -> Outcome {
        assert!(self.succeeded(), "a program failed: {}", self.report());
        self
    }
}

// ---------------------------------------------------------------------------------------------
// Ports, files and programs

/// An even port whose RTCP neighbour is free too.
pub(crate) fn port_pair() -> u16 {
    port_run(2)
}

/// An even port `p` with `p .. p + n` all free (SMPTE 2022-1 FEC takes `p + 2` and `p + 4`
/// beside the RTP and RTCP pair), outside the ephemeral range so that no socket bound to port 0
/// by a test running beside this one can take it before the test binds it.
pub(crate) fn port_run(n: u16) -> u16 {
    metronome_rt::ports::free_udp_run(n).expect("free UDP ports")
}

/// `metronome emu relay` from `from` to `to`: 5 % random loss, 10 ms, for 20 s.
pub(crate) fn lossy_relay(from: u16, to: u16) -> Running {
    Running::spawn(bin().args(["emu", "relay", "--listen"]).args([
        format!("127.0.0.1:{from}"),
        "--to".into(),
        format!("127.0.0.1:{to}"),
        "--loss".into(),
        "5%".into(),
        "--delay".into(),
        "10ms".into(),
        "--duration".into(),
        "20".into(),
        "--json".into(),
    ]))
}

/// MPEG-TS continuity-counter gaps in `ts`: one for each run of a PID's payload-carrying
/// packets that went missing (ISO/IEC 13818-1 §2.4.3.3).
pub(crate) fn continuity_gaps(ts: &[u8]) -> usize {
    let mut last = std::collections::HashMap::new();
    let mut gaps = 0;
    for p in ts.chunks_exact(188).filter(|p| p[0] == 0x47) {
        let pid = (u16::from(p[1] & 0x1f) << 8) | u16::from(p[2]);
        if pid == 0x1fff || p[3] & 0x10 == 0 {
            continue;
        }
        let cc = p[3] & 0x0f;
        if let Some(prev) = last.insert(pid, cc) {
            if cc != prev && cc != (prev + 1) & 0x0f {
                gaps += 1;
            }
        }
    }
    gaps
}

/// Waits until a socket is bound to UDP `port` on any address (as /proc/net/udp and udp6 list
/// them): a player started in the background is then ready to receive, and what is sent to it
/// waits in its socket's buffer. A fixed sleep instead loses the stream's first packets when the
/// machine is busy. Panics after `within`.
pub(crate) fn wait_udp_bound(port: u16, within: Duration) {
    let deadline = now() + within;
    while !metronome_rt::ports::udp_port_bound(port) {
        assert!(
            now() < deadline,
            "nothing bound UDP port {port} within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A fresh directory for one test's files, readable by everyone (VLC runs as nobody), removed
/// with its files when dropped.
pub(crate) fn tmp_dir(test: &str) -> TempDir {
    TempDir::open_to_all(test)
}

/// `metronome serve` with the control API on a free loopback port, its token in
/// `token_file` (made by the server), `--send-cost 5us` and `extra` arguments; the running
/// server and the API's address (`127.0.0.1:PORT`), once it serves.
pub(crate) fn serve_control(token_file: &std::path::Path, extra: &[&str]) -> (Running, String) {
    let token_file = token_file.to_str().expect("a UTF-8 path");
    let mut server = Running::spawn(
        bin()
            .args([
                "serve",
                "--control",
                "127.0.0.1:0",
                "--control-token-file",
                token_file,
                "--send-cost",
                "5us",
            ])
            .args(extra),
    );
    server.wait_for("control API on http://", Duration::from_secs(20));
    let line = server
        .seen()
        .iter()
        .find(|l| l.contains("control API on"))
        .expect("the line waited for")
        .clone();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .expect("an address after http://")
        .to_string();
    (server, addr)
}

/// Holds the machine's one real-time slot ([`metronome_testkit::realtime_slot`]): tests
/// whose programs each run live media (encoders, servers, relays, decoders in real time) take
/// turns, here and with other test binaries.
pub(crate) fn serial() -> metronome_testkit::RealtimeSlot {
    metronome_testkit::realtime_slot(env!("CARGO_TARGET_TMPDIR"))
}

/// Panics with a clear message if a program the tests need is missing (scripts/test.sh installs
/// them from Debian).
pub(crate) fn require(program: &str, package: &str) {
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

/// A 6-second MPEG-TS file (MPEG-2 video, 320x240 at 25 fps) made with ffmpeg, cached in the
/// target directory.
pub(crate) fn ts_file() -> PathBuf {
    ts_file_made("clip.ts", "320x240", 25, 6, "800k", "1200k")
}

/// An MPEG-TS file of ffmpeg's test pattern in MPEG-2 video (`size`, `fps`, `seconds` long,
/// GOPs of 12 frames, the video's `bitrate` in a mux of `muxrate`), cached under the target
/// directory's scratch space (`CARGO_TARGET_TMPDIR`) by `name` and those parameters: made once
/// per build tree, shared by every test process, never left in the system's temp dir.
pub(crate) fn ts_file_made(
    name: &str,
    size: &str,
    fps: u32,
    seconds: u32,
    bitrate: &str,
    muxrate: &str,
) -> PathBuf {
    // Tests run on several threads: one makes the file, the others wait for it.
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("media");
    std::fs::create_dir_all(&dir).unwrap();
    let stem = name.trim_end_matches(".ts");
    let path = dir.join(format!(
        "{stem}-{size}-{fps}fps-{seconds}s-{bitrate}-{muxrate}.ts"
    ));
    if !path.exists() {
        require("ffmpeg", "ffmpeg");
        // Made under a name of its own, then renamed: other test processes see the whole file
        // or none.
        let part = path.with_extension(format!("{}.part.ts", std::process::id()));
        let out = Command::new("ffmpeg")
            .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
            .arg(format!("testsrc=size={size}:rate={fps}:duration={seconds}"))
            .args(["-c:v", "mpeg2video", "-b:v", bitrate, "-g", "12"])
            .args(["-f", "mpegts", "-muxrate", muxrate])
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

// ---------------------------------------------------------------------------------------------
// The RTSP server

/// `metronome serve --rtsp 127.0.0.1:0 …` in the background, stopped (Ctrl-C) when dropped.
pub(crate) struct RtspServer {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: mpsc::Receiver<String>,
}

impl RtspServer {
    /// Starts it with `extra` arguments and waits until it serves its mounts. It stops by
    /// itself after 120 s at the latest.
    pub(crate) fn start(extra: &[&str]) -> RtspServer {
        RtspServer::start_for(extra, Duration::from_secs(120))
    }

    /// [`RtspServer::start`] for a server that stops by itself after `limit`.
    pub(crate) fn start_for(extra: &[&str], limit: Duration) -> RtspServer {
        let mut child = bin()
            .args(["serve", "--rtsp", "127.0.0.1:0", "--duration"])
            .arg(format!("{}s", limit.as_secs().max(1)))
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
            let url = line.split("serving rtsp://").nth(1);
            if let Some(rest) = url.or_else(|| line.split("serving rtsps://").nth(1)) {
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

    pub(crate) fn url(&self, mount: &str) -> String {
        format!("rtsp://{}/{mount}", self.addr)
    }

    /// Stops it as Ctrl-C would and returns its stdout (the summary) and the rest of its log.
    pub(crate) fn stop(mut self) -> (String, Vec<String>) {
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

/// The JSON a successful `metronome … --json` printed; its stderr and stdout if it failed.
pub(crate) fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "metronome failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// The JSON vocabulary every document the binary prints keeps: `schema_version` and a `run`
/// header (version, start, host, arguments) at the top; every key that names a unit of time
/// says µs (`*_us`), except points in time (ns since the Unix epoch, `*_unix_ns`) and rates
/// (`*_per_s`). Returns every key, for more checks.
pub(crate) fn assert_one_vocabulary(v: &serde_json::Value) -> Vec<String> {
    assert_eq!(v["schema_version"], 10, "schema_version: {v}");
    let run = &v["run"];
    assert_eq!(
        run["version"],
        env!("CARGO_PKG_VERSION"),
        "run header: {run}"
    );
    assert!(
        run["started_unix_ns"].as_u64().unwrap() > 1_700_000_000_000_000_000,
        "{run}"
    );
    assert!(run["host"].is_string() && run["args"].is_array(), "{run}");
    if let Some(name) = schema_name(v) {
        assert_valid(v, &name);
    }
    assert_floats_rounded(v);
    assert_durations_in_us(v)
}

/// Every float below a billion has at most six decimals (`metronome_time::json::FLOAT_DECIMALS`): no
/// binary noise such as `0.30000000000000004`.
pub(crate) fn assert_floats_rounded(v: &serde_json::Value) {
    match v {
        serde_json::Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap();
            assert!(
                x.abs() >= 1e9 || (x * 1e6).round() / 1e6 == x,
                "{x} has more than six decimals"
            );
        }
        serde_json::Value::Array(a) => a.iter().for_each(assert_floats_rounded),
        serde_json::Value::Object(o) => o.values().for_each(assert_floats_rounded),
        _ => {}
    }
}

/// The schema a document is written to, from the command line in its run header
/// (`metronome schema` lists them): `bench raw` is `bench-raw`, `serve` with many streams
/// `serve-streams`, uncompressed video's `serve-raw` and `recv-raw` (told by their fields, as
/// an SDP can make `recv` raw without `--raw`). `None` for a command without one.
fn schema_name(v: &serde_json::Value) -> Option<String> {
    let args: Vec<&str> = v["run"]["args"]
        .as_array()?
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let many = [
        "--config",
        "--stream",
        "--rtsp",
        "--control",
        "--sched",
        "--sdp-dir",
    ];
    Some(match args.get(1..3)? {
        ["bench", b] | ["emu", b] => format!("{}-{b}", args[1]),
        ["lab", c @ ("run" | "list" | "report" | "slurm" | "compare")] => format!("lab-{c}"),
        // Uncompressed video (`--raw`, or an SDP that declares it): its own document.
        ["recv", ..] if v.get("declared_model").is_some() => "recv-raw".into(),
        ["serve", ..] if v.get("packets_per_frame").is_some() => "serve-raw".into(),
        ["serve", ..] if args.iter().any(|a| many.contains(a)) => "serve-streams".into(),
        [c @ ("serve" | "recv" | "demo" | "quality" | "frames"), ..] => (*c).into(),
        _ => return None,
    })
}

/// Every key that names a unit of time says µs, but points in time (`*_unix_ns`) and rates
/// (`*_per_s`); returns every key. (The lab's `summary.json` keeps its own header.)
pub(crate) fn assert_durations_in_us(v: &serde_json::Value) -> Vec<String> {
    let mut keys = Vec::new();
    collect_keys(v, &mut keys);
    let wrong: Vec<&String> = keys
        .iter()
        .filter(|k| {
            (k.ends_with("_s") || k.ends_with("_ms") || k.ends_with("_ns") || *k == "secs")
                && !k.ends_with("_per_s")
                && !k.ends_with("_unix_ns")
        })
        .collect();
    assert!(wrong.is_empty(), "durations not in µs: {wrong:?}");
    keys
}

/// Every object key in `v`, at any depth.
pub(crate) fn collect_keys(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                out.push(k.clone());
                collect_keys(x, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_keys(x, out)),
        _ => {}
    }
}

/// Whether `gst-launch-1.0 rtspsrc …` ran to its EOS and ended well. After its EOS, shutting
/// down, rtspsrc may send PAUSE on a connection it has already torn down and closed itself
/// (the server logs the TEARDOWN and the client closing, then gst-launch fails with "Could
/// not send message" in gst_rtspsrc_pause; seen over TCP and TLS alike, 1 to 3 runs in 40).
/// That is GStreamer's race, after what the test checks: it counts as a good end; any other
/// error does not.
pub(crate) fn gst_ran_to_eos(out: &Outcome) -> bool {
    if !out.stdout.contains("Got EOS from element") {
        return false;
    }
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("ERROR"))
        .collect();
    let sites: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("gstrtspsrc.c"))
        .collect();
    let shutdown_race = !errors.is_empty()
        && errors.iter().all(|l| l.contains("GstRTSPSrc:rtspsrc0"))
        && !sites.is_empty()
        && sites
            .iter()
            .all(|l| l.contains("gst_rtspsrc_pause") || l.contains("gst_rtspsrc_try_send"));
    out.succeeded() || shutdown_race
}

/// A small sweep for the lab's tests: two controllers of one RTP flow over a dumbbell, each
/// point a few hundred ms of simulation in a debug build.
pub(crate) fn sweep_scenario(name: &str, seed: u64, replicates: u32, duration: &str) -> String {
    format!(
        r#"
name = "{name}"
seed = {seed}
replicates = {replicates}
duration = "{duration}"
interval = "1s"

[sweep]
cc = ["tfrc", "gcc"]

[links.access]
rate = "10mbit"
delay = "5ms"
queue_packets = 50

[links.bottleneck]
rate = "4mbit"
delay = "10ms"
queue_packets = 50

[topology]
shape = "dumbbell"
routers = ["router1", "router2"]
bottleneck = "bottleneck"
left = [{{ node = "server", link = "access" }}]
right = [{{ node = "viewer", link = "access" }}]

[[flow]]
name = "video"
kind = "rtp"
from = "server"
to = "viewer"
cc = "${{cc}}"
rate = "8mbit"
start_rate = "500kbit"
"#
    )
}

/// A lab run's points from its `summary.json`, without what describes the run rather than
/// the network (its wall-clock times).
pub(crate) fn lab_figures(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("summary.json"))
        .unwrap_or_else(|e| panic!("no summary in {}: {e}", dir.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut points = v["points"].as_array().unwrap().clone();
    for p in &mut points {
        let p = p.as_object_mut().unwrap();
        for k in ["wall_us", "video_us", "video_work"] {
            p.remove(k);
        }
    }
    points
}

/// Checks `doc` against the JSON Schema `metronome schema NAME` prints, as a user would: `jq`
/// reads it, and Python's `jsonschema` (Debian's python3-jsonschema, draft 2020-12) validates
/// it; the validator's own words on failure.
pub(crate) fn assert_valid(doc: &serde_json::Value, name: &str) {
    let schema = bin().args(["schema", name]).output().unwrap();
    assert!(
        schema.status.success(),
        "metronome schema {name}: {schema:?}"
    );
    let dir = tmp_dir(&format!("schema-{name}"));
    let (schema_file, doc_file) = (dir.0.join("schema.json"), dir.0.join("doc.json"));
    std::fs::write(&schema_file, &schema.stdout).unwrap();
    std::fs::write(&doc_file, doc.to_string()).unwrap();
    let jq = Command::new("jq")
        .args(["-e", ".schema_version // .schema"])
        .arg(&doc_file)
        .output()
        .expect("jq runs (Debian's jq)");
    assert!(jq.status.success(), "jq: {jq:?}");
    let check = "import json, sys, jsonschema\n\
                 schema = json.load(open(sys.argv[1]))\n\
                 jsonschema.Draft202012Validator.check_schema(schema)\n\
                 jsonschema.Draft202012Validator(schema).validate(json.load(open(sys.argv[2])))\n";
    let py = Command::new("/usr/bin/python3")
        .args(["-c", check])
        .arg(&schema_file)
        .arg(&doc_file)
        .output()
        .expect("python3 runs");
    assert!(
        py.status.success(),
        "{name} does not validate against its schema:\n{}",
        String::from_utf8_lossy(&py.stderr)
    );
}

/// Runs `metronome serve --json` to 127.0.0.1:`port` with `extra` arguments.
pub(crate) fn serve(port: u16, extra: &[&std::ffi::OsStr]) -> std::process::Output {
    bin()
        .args(["serve", &format!("rtp://127.0.0.1:{port}"), "--json"])
        .args(extra)
        .output()
        .unwrap()
}

/// `metronome passwd NAME` with the password on stdin: the user's TOML table.
pub(crate) fn passwd(name: &str, password: &str, mounts: &[&str]) -> String {
    use std::io::Write as _;
    let mut cmd = bin();
    cmd.arg("passwd").arg(name);
    for m in mounts {
        cmd.args(["--mount", m]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
