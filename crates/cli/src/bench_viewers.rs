//! `metronome bench viewers`: what viewers of one live test-source mount cost the server. A
//! `serve --rtsp` child serves the test mount; this process plays it with one viewer, then
//! with many (RTSP sessions over UDP, their packets counted), and reads the server's CPU time
//! from /proc over the same window. Run twice in the same run: sessions sharing one encoder
//! (the default) and an encoder per session (`--rtsp-encoder-per-session`, the baseline, with
//! fewer viewers: a few encoders already fill a small machine).

use clap::Args;
use metronome_apps::rtsp_client::{RtspClient, RtspClientConfig, TransportRequest};
use metronome_rt::host::HostWatch;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub(crate) struct ViewersArgs {
    /// Viewers of the shared encoder
    #[arg(long, default_value_t = 100)]
    pub viewers: usize,
    /// Viewers of the baseline, an encoder per session
    #[arg(long, default_value_t = 8)]
    pub baseline_viewers: usize,
    /// How long the server's CPU is measured at each point (after 2 s of settling)
    #[arg(long, value_parser = crate::args::parse_run_length, default_value = "5s")]
    pub duration: Duration,
    /// The test source's picture size
    #[arg(long, default_value = "640x360")]
    pub size: String,
    /// The test source's constant MPEG-TS mux rate, bit/s
    #[arg(long, default_value_t = 1_500_000)]
    pub mux_rate: u64,
    /// Print JSON only
    #[arg(long)]
    pub json: bool,
}

/// One measured point: `viewers` sessions playing.
#[derive(Serialize, Clone, schemars::JsonSchema)]
struct Point {
    viewers: usize,
    /// The server's CPU over the window, percent of one CPU.
    cpu_percent: f64,
    cpu_percent_per_viewer: f64,
    /// Packets each viewer received per second: the least and the mean (all served?).
    packets_per_s_min: f64,
    packets_per_s_mean: f64,
    /// The server's CPU by its threads' kind (pacer, producers, rtcp, rtsp, other), percent
    /// of one CPU: where a viewer's cost goes.
    threads: BTreeMap<String, f64>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Mode {
    name: &'static str,
    one: Point,
    many: Point,
    /// What each viewer past the first added, percent of one CPU.
    added_viewer_cpu_percent: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct ViewersBench {
    benchmark: &'static str,
    optimized: bool,
    size: String,
    mux_rate_bps: u64,
    shared: Mode,
    per_session: Mode,
    /// What a viewer past the first costs with an encoder each, over what it costs sharing one.
    added_viewer_ratio: f64,
    host: Option<metronome_rt::host::HostLoad>,
}

pub(crate) fn run(a: ViewersArgs, stop: Arc<AtomicBool>) -> Result<(), Box<dyn std::error::Error>> {
    let watch = HostWatch::start();
    let mut progress = crate::progress::Progress::start("bench viewers", 2, None);
    let shared = mode(&a, "shared encoder", false, a.viewers, &stop)?;
    progress.step("shared encoder: 1 viewer and many");
    let per_session = mode(&a, "encoder per session", true, a.baseline_viewers, &stop)?;
    progress.step("encoder per session: 1 viewer and many");
    let bench = ViewersBench {
        benchmark: "viewers",
        optimized: !cfg!(debug_assertions),
        size: a.size.clone(),
        mux_rate_bps: a.mux_rate,
        added_viewer_ratio: per_session.added_viewer_cpu_percent
            / shared.added_viewer_cpu_percent.max(1e-3),
        shared,
        per_session,
        host: watch.finish(0),
    };
    if a.json {
        println!("{}", crate::report::to_json(&bench)?);
        return Ok(());
    }
    print_human(&bench);
    Ok(())
}

fn print_human(b: &ViewersBench) {
    println!(
        "viewers of one live test-source mount ({} at {} bit/s), the server's CPU (same run)",
        b.size, b.mux_rate_bps
    );
    for m in [&b.shared, &b.per_session] {
        for p in [&m.one, &m.many] {
            println!(
                "  {:<20} {:>4} viewers: {:>6.1}% CPU, {:>5.2}% per viewer; each got {:.0}-{:.0} packets/s",
                m.name,
                p.viewers,
                p.cpu_percent,
                p.cpu_percent_per_viewer,
                p.packets_per_s_min,
                p.packets_per_s_mean
            );
            let by: Vec<String> = p
                .threads
                .iter()
                .map(|(k, v)| format!("{k} {v:.1}%"))
                .collect();
            println!("  {:<20}        by thread: {}", "", by.join(", "));
        }
        println!(
            "  {:<20} each viewer past the first: {:.2}% CPU",
            m.name, m.added_viewer_cpu_percent
        );
    }
    println!(
        "  a viewer past the first costs {:.1}x as much with an encoder each",
        b.added_viewer_ratio
    );
    if !b.optimized {
        println!("  (a debug build: run `cargo run --release -- bench viewers` to measure)");
    }
    if let Some(h) = &b.host {
        println!(
            "  {} (the viewers, run here, count as this process)",
            h.line()
        );
    }
}

/// One server (sharing or not), measured with one viewer and with `many`.
fn mode(
    a: &ViewersArgs,
    name: &'static str,
    per_session: bool,
    many: usize,
    stop: &AtomicBool,
) -> Result<Mode, String> {
    let mut server = Server::start(a, per_session, many)?;
    let result = (|| {
        let one = measure(a, &server, 1, stop)?;
        let lots = measure(a, &server, many.max(2), stop)?;
        Ok::<_, String>((one, lots))
    })();
    server.stop();
    let (one, many) = result?;
    let added =
        (many.cpu_percent - one.cpu_percent) / (many.viewers.saturating_sub(1).max(1) as f64);
    Ok(Mode {
        name,
        one,
        many,
        added_viewer_cpu_percent: added,
    })
}

/// `viewers` sessions playing for the window; the server's CPU and what each got.
fn measure(
    a: &ViewersArgs,
    server: &Server,
    viewers: usize,
    stop: &AtomicBool,
) -> Result<Point, String> {
    let url = format!("rtsp://{}/test", server.addr);
    let mut sessions = Vec::with_capacity(viewers);
    for _ in 0..viewers {
        sessions.push(Viewer::play(&url)?);
    }
    let counting = Counting::start(&sessions);
    std::thread::sleep(Duration::from_secs(2));
    let (cpu0, got0) = (server.cpu_ticks()?, counting.snapshot());
    let threads0 = server.thread_ticks();
    let t0 = metronome_rt::clock::mono_ns();
    let mut left = a.duration;
    while !left.is_zero() && !stop.load(Ordering::Relaxed) {
        let step = left.min(Duration::from_millis(100));
        std::thread::sleep(step);
        left -= step;
    }
    let secs = (metronome_rt::clock::mono_ns() - t0) as f64 / 1e9;
    let (cpu1, got1) = (server.cpu_ticks()?, counting.snapshot());
    let threads1 = server.thread_ticks();
    counting.stop();
    for s in &mut sessions {
        s.leave();
    }
    let rates: Vec<f64> = got0
        .iter()
        .zip(&got1)
        .map(|(b, e)| (e - b) as f64 / secs)
        .collect();
    let percent = |ticks: u64| ticks as f64 / clock_ticks() / secs * 100.0;
    let cpu_percent = percent(cpu1 - cpu0);
    let mut threads = BTreeMap::new();
    for (tid, (kind, t1)) in &threads1 {
        let t0 = threads0.get(tid).map_or(0, |(_, t)| *t);
        *threads.entry(kind.clone()).or_insert(0.0) += percent(t1.saturating_sub(t0));
    }
    // The server's sessions end with their connections; give it a moment before the next point.
    std::thread::sleep(Duration::from_secs(1));
    Ok(Point {
        viewers,
        cpu_percent,
        cpu_percent_per_viewer: cpu_percent / viewers as f64,
        packets_per_s_min: rates.iter().copied().fold(f64::INFINITY, f64::min),
        packets_per_s_mean: rates.iter().sum::<f64>() / rates.len().max(1) as f64,
        threads,
    })
}

/// utime + stime of a `/proc/…/stat` line: the 12th and 13th fields after the command's
/// closing parenthesis.
fn stat_ticks(stat: &str) -> u64 {
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
}

/// What a server thread named so does.
fn thread_kind(name: &str) -> &'static str {
    match name {
        n if n.starts_with("pacer-core") => "pacer",
        n if n.starts_with("producer") => "producers",
        "rtcp" => "rtcp",
        "rtsp-io" => "rtsp",
        _ => "other",
    }
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The `serve --rtsp` child.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(a: &ViewersArgs, per_session: bool, viewers: usize) -> Result<Server, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let room = (viewers + 8).to_string();
        let mut cmd = Command::new(exe);
        cmd.args(["serve", "--rtsp", "127.0.0.1:0", "--duration", "600s"])
            .args(["--size", &a.size, "--mux-rate", &a.mux_rate.to_string()])
            .args(["--send-cost", "5us"])
            .args([
                "--rtsp-max-sessions",
                &room,
                "--rtsp-max-sessions-per-address",
                &room,
            ])
            .args(["--rtsp-max-per-address", &room, "-q"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if per_session {
            cmd.arg("--rtsp-encoder-per-session");
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start serve: {e}"))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let mut said = Vec::new();
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                return Err(format!(
                    "metronome serve --rtsp ended before it served: {}",
                    said.join(" / ")
                ));
            };
            said.push(line.clone());
            if let Some(rest) = line.split("serving rtsp://").nth(1) {
                break rest.split('/').next().unwrap_or_default().to_string();
            }
        };
        // The rest of its log is read and dropped, so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Ok(Server { child, addr })
    }

    /// The child's CPU time so far (user + system), in clock ticks.
    fn cpu_ticks(&self) -> Result<u64, String> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .map_err(|e| format!("cannot read the server's CPU time: {e}"))?;
        Ok(stat_ticks(&stat))
    }

    /// Each of the child's threads: its kind (by its name) and CPU time so far, in clock
    /// ticks; empty where /proc cannot be read.
    fn thread_ticks(&self) -> BTreeMap<u64, (String, u64)> {
        let dir = format!("/proc/{}/task", self.child.id());
        let Ok(tasks) = std::fs::read_dir(&dir) else {
            return BTreeMap::new();
        };
        tasks
            .flatten()
            .filter_map(|t| {
                let tid = t.file_name().to_str()?.parse().ok()?;
                let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
                let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
                Some((
                    tid,
                    (thread_kind(comm.trim()).to_string(), stat_ticks(&stat)),
                ))
            })
            .collect()
    }

    fn stop(&mut self) {
        // SAFETY: kill(2) with a valid pid and signal.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One RTSP session playing over UDP.
struct Viewer {
    client: Option<RtspClient>,
    rtp: Arc<UdpSocket>,
    _rtcp: UdpSocket,
}

impl Viewer {
    fn play(url: &str) -> Result<Viewer, String> {
        let (rtp, rtcp) = port_pair()?;
        let port = rtp.local_addr().map_err(|e| e.to_string())?.port();
        let err = |e: metronome_apps::rtsp_client::RtspClientError| format!("{url}: {e}");
        let mut client = RtspClient::connect(url, &RtspClientConfig::default()).map_err(err)?;
        let d = client.describe().map_err(err)?;
        let media = d.media_url(0).map_err(err)?;
        client
            .setup(&media, TransportRequest::Udp { rtp_port: port })
            .map_err(err)?;
        client.play(&d.aggregate_url()).map_err(err)?;
        rtp.set_nonblocking(true).map_err(|e| e.to_string())?;
        Ok(Viewer {
            client: Some(client),
            rtp: Arc::new(rtp),
            _rtcp: rtcp,
        })
    }

    fn leave(&mut self) {
        if let Some(mut c) = self.client.take() {
            let _ = c.teardown();
        }
    }
}

/// An even UDP port and the one above it, on loopback.
fn port_pair() -> Result<(UdpSocket, UdpSocket), String> {
    for _ in 0..200 {
        let probe = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| e.to_string())?;
        let even = probe.local_addr().map_err(|e| e.to_string())?.port() & !1;
        drop(probe);
        if even < 1024 {
            continue;
        }
        if let (Ok(a), Ok(b)) = (
            UdpSocket::bind((Ipv4Addr::LOCALHOST, even)),
            UdpSocket::bind((Ipv4Addr::LOCALHOST, even + 1)),
        ) {
            return Ok((a, b));
        }
    }
    Err("no free UDP port pair on loopback".into())
}

/// A thread that drains every viewer's RTP socket and counts its packets.
struct Counting {
    counts: Arc<Vec<AtomicU64>>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Counting {
    fn start(viewers: &[Viewer]) -> Counting {
        let sockets: Vec<Arc<UdpSocket>> = viewers.iter().map(|v| v.rtp.clone()).collect();
        let counts: Arc<Vec<AtomicU64>> =
            Arc::new(sockets.iter().map(|_| AtomicU64::new(0)).collect());
        let done = Arc::new(AtomicBool::new(false));
        let (c, d) = (counts.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !d.load(Ordering::Relaxed) {
                for (s, n) in sockets.iter().zip(c.iter()) {
                    while s.recv(&mut buf).is_ok() {
                        n.fetch_add(1, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Counting {
            counts,
            done,
            thread: Some(thread),
        }
    }

    fn snapshot(&self) -> Vec<u64> {
        self.counts
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .collect()
    }

    fn stop(mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
