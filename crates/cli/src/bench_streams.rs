//! `metronome bench streams`: many concurrent streams under EDF, DM and the naive
//! thread-per-stream baseline, in one run. Every case streams a looping MPEG-TS file to one
//! `metronome recv` process (its own process, kernel timestamps, one source per stream) and
//! reports send lateness, deadline misses, receiver inter-arrival jitter, CPU, and how many
//! streams admission control admitted.

use crate::args::parse_rate;
use clap::Args;
use metronome_apps::streams::{SchedKind, ServerConfig, SourceSpec, StreamServer, StreamSpec};
use metronome_media::{TestSource, TestSourceConfig, TsSource};
use metronome_rt::clock::process_cpu_s;
use metronome_rt::ports::free_udp_run;
use metronome_time::Micros;
use metronome_time::Summary;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub(crate) struct StreamsArgs {
    /// Stream counts to run
    #[arg(long, value_delimiter = ',', default_value = "1,15,100,1000")]
    pub streams: Vec<usize>,
    /// Scheduling policies to compare
    #[arg(long, value_delimiter = ',', default_value = "edf,dm,naive")]
    pub sched: Vec<SchedKind>,
    /// How long each case streams
    #[arg(long, value_parser = crate::args::parse_run_length, default_value = "5s")]
    pub duration: Duration,
    /// Rate of every stream (constant-rate MPEG-TS)
    #[arg(long, value_parser = parse_rate, default_value = "4M")]
    pub rate: u64,
    /// Declared link capacity for admission control
    #[arg(long, value_parser = parse_rate, default_value = "1gbit")]
    pub link_capacity: u64,
    /// Real-time cores (pacing threads) for edf and dm
    #[arg(long, default_value_t = 1)]
    pub rt_cores: usize,
    /// Ring slots per stream
    #[arg(long, default_value_t = 256)]
    pub ring: usize,
    /// Leave out the source paper's cases (1 and 15 streams, one packet per 15 ms period)
    #[arg(long)]
    pub no_paper: bool,
    /// Print JSON only
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Case {
    name: String,
    sched: String,
    streams_requested: usize,
    admitted: usize,
    refused: u64,
    /// Why the first refused stream was refused.
    first_refusal: Option<String>,
    stream_rate_bps: u64,
    period_us: Micros,
    packets: u64,
    lateness: Summary,
    deadline_misses: u64,
    underruns: u64,
    /// Pacing threads' CPU (edf/dm), as a share of one core.
    pacer_cpu_percent: f64,
    /// The whole sending process (pacers, producers, RTCP), as a share of one core.
    process_cpu_percent: f64,
    receiver: RxView,
    /// How busy the host was during this case.
    host: Option<metronome_rt::host::HostLoad>,
}

#[derive(Serialize, Default, schemars::JsonSchema)]
struct RxView {
    sources: usize,
    packets: u64,
    lost: u64,
    socket_overflows: u64,
    /// RFC 3550 interarrival jitter, mean and worst over the streams.
    jitter_mean_us: Micros,
    jitter_max_us: Micros,
    /// Inter-arrival p99.9 minus the nominal interval: median and worst over the streams, µs.
    interarrival_p999_excess_us_median: Micros,
    interarrival_p999_excess_us_max: Micros,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Comparison {
    case: String,
    sched: String,
    /// naive ÷ this policy: how many times lower this policy's lateness is.
    lateness_p99_ratio: f64,
    lateness_p999_ratio: f64,
    rx_interarrival_p999_excess_ratio: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct StreamsBench {
    benchmark: &'static str,
    duration_us: Micros,
    send_cost_us: Micros,
    cases: Vec<Case>,
    versus_naive: Vec<Comparison>,
}

pub(crate) fn run(a: StreamsArgs, stop: Arc<AtomicBool>) -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("metronome-bench-streams-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = run_in(&a, &stop, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let bench = result?;
    if a.json {
        println!("{}", crate::report::to_json(&bench)?);
    } else {
        print!("{}", human(&bench));
    }
    Ok(())
}

/// The paper's period, and the rate at which it carries one 1316-byte payload per period.
const PAPER_PERIOD: Duration = Duration::from_millis(15);
const PAPER_RATE: u64 = 1316 * 8 * 1000 / 15;

fn run_in(
    a: &StreamsArgs,
    stop: &AtomicBool,
    dir: &Path,
) -> Result<StreamsBench, Box<dyn std::error::Error>> {
    let main_file = dir.join("main.ts");
    write_ts(&main_file, a.rate)?;
    let cal = metronome_rt::pacing::calibrate(1328)?;
    let mut plan: Vec<(String, usize, Option<Duration>, u64, PathBuf)> = Vec::new();
    if !a.no_paper {
        let paper_file = dir.join("paper.ts");
        write_ts(&paper_file, PAPER_RATE)?;
        for n in [1, 15] {
            plan.push((
                format!("paper-{n}x15ms"),
                n,
                Some(PAPER_PERIOD),
                PAPER_RATE,
                paper_file.clone(),
            ));
        }
    }
    for &n in &a.streams {
        plan.push((
            format!("{n}x{}M", a.rate / 1_000_000),
            n,
            None,
            a.rate,
            main_file.clone(),
        ));
    }
    let mut cases = Vec::new();
    let steps = plan.len() * a.sched.len();
    let expected = steps as f64 * a.duration.as_secs_f64();
    let mut progress = crate::progress::Progress::start("bench streams", steps, Some(expected));
    for (name, n, period, rate, file) in &plan {
        for &sched in &a.sched {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let case = one_case(
                a,
                sched,
                name,
                *n,
                *period,
                *rate,
                file,
                cal.per_packet_us.to_duration(),
                stop,
            )?;
            cases.push(case);
            progress.step(&format!("{name} under {sched}"));
        }
    }
    let versus_naive = compare(&cases);
    Ok(StreamsBench {
        benchmark: "streams",
        duration_us: Micros::from(a.duration),
        send_cost_us: cal.per_packet_us,
        cases,
        versus_naive,
    })
}

/// Encodes the test pattern into an MPEG-TS file at `rate` (small picture: encoding speed, not
/// picture quality, matters here); streams loop it.
fn write_ts(path: &Path, rate: u64) -> Result<(), Box<dyn std::error::Error>> {
    let mut src = TestSource::new(TestSourceConfig {
        width: 320,
        height: 180,
        fps: 25,
        mux_rate: rate,
        video_bitrate: u32::try_from(rate * 6 / 10).unwrap_or(u32::MAX),
        duration: Some(Duration::from_secs(6)),
        ..TestSourceConfig::default()
    })?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut pkt = [0u8; 188];
    while src.next_packet(&mut pkt)?.is_some() {
        out.write_all(&pkt)?;
    }
    out.flush()?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn one_case(
    a: &StreamsArgs,
    sched: SchedKind,
    name: &str,
    n: usize,
    period: Option<Duration>,
    rate: u64,
    file: &Path,
    send_cost: Duration,
    stop: &AtomicBool,
) -> Result<Case, Box<dyn std::error::Error>> {
    let port = free_udp_run(2)?;
    let cfg = ServerConfig {
        sched,
        rt_cores: a.rt_cores,
        link_capacity_bps: Some(a.link_capacity),
        default_ring: a.ring,
        send_cost: Some(send_cost),
        seed: 0x6265_6e63 ^ n as u64,
        ..ServerConfig::default()
    };
    let rx = start_receiver(port, n, a.duration + Duration::from_secs(20))?;
    // The receiver shares the CPUs of the server's producers, never the pacers' (the same
    // placement under every policy, so that the cases compare).
    if let Some(cpus) = cfg.housekeeping_cpus() {
        let _ = metronome_rt::thread::set_affinity(rx.id() as libc::pid_t, &cpus);
    }
    let server = StreamServer::start(cfg)?;
    let cpu0 = process_cpu_s();
    let mut first_refusal = None;
    for i in 0..n {
        let mut spec = StreamSpec::new(format!("s{i}"), vec![format!("rtp://127.0.0.1:{port}")]);
        spec.source = SourceSpec::File(file.to_path_buf());
        spec.looping = true;
        spec.bitrate = Some(rate);
        spec.period = period;
        if let Err(e) = server.add(spec) {
            first_refusal.get_or_insert_with(|| e.to_string());
        }
    }
    let mut waited = Duration::ZERO;
    while waited < a.duration && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        waited += Duration::from_millis(100);
    }
    let outcome = server.shutdown();
    let cpu = process_cpu_s() - cpu0;
    let rx = finish_receiver(rx)?;
    let nominal = period.unwrap_or(Duration::from_secs_f64(1316.0 * 8.0 / rate as f64));
    let s = &outcome.server;
    Ok(Case {
        name: name.to_string(),
        sched: sched.to_string(),
        streams_requested: n,
        admitted: outcome.streams.len(),
        refused: s.refused,
        first_refusal,
        stream_rate_bps: rate,
        period_us: Micros::from(nominal),
        packets: outcome.streams.iter().map(|s| s.packets).sum(),
        lateness: s.lateness,
        deadline_misses: outcome.streams.iter().map(|s| s.deadline_misses).sum(),
        underruns: outcome.streams.iter().map(|s| s.underruns).sum(),
        pacer_cpu_percent: outcome.core_cpu_percent.iter().sum(),
        process_cpu_percent: cpu * 100.0 / outcome.duration_us.as_secs_f64().max(1e-9),
        receiver: rx_view(&rx, nominal),
        host: outcome.host.clone(),
    })
}

/// `metronome recv` in its own process, so that its CPU is not the sender's.
fn start_receiver(port: u16, sources: usize, limit: Duration) -> std::io::Result<Child> {
    let mut child =
        metronome_rt::process::with_default_signals(&mut Command::new(std::env::current_exe()?))
            .args([
                "recv",
                &format!("rtp://127.0.0.1:{port}"),
                "--json",
                "--max-sources",
                &sources.clamp(1, 4096).to_string(),
                "--duration",
                &format!("{}", limit.as_secs()),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| std::io::Error::other("no stderr"))?;
    let mut lines = BufReader::new(stderr).lines();
    for line in lines.by_ref() {
        if line?.contains("listening on") {
            // Keep draining stderr so that the receiver never blocks on it.
            std::thread::spawn(move || for _ in lines {});
            return Ok(child);
        }
    }
    let _ = child.kill();
    Err(std::io::Error::other(
        "metronome recv ended before it was listening",
    ))
}

fn finish_receiver(mut child: Child) -> Result<Value, Box<dyn std::error::Error>> {
    // Let the last packets and the BYEs arrive, then stop it the way a person would (Ctrl-C).
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) with a pid we spawned and still own (not yet waited for).
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        s.read_to_string(&mut out)?;
    }
    child.wait()?;
    Ok(serde_json::from_str(&out).map_err(|e| format!("receiver output is not JSON ({e})"))?)
}

fn rx_view(rx: &Value, nominal: Duration) -> RxView {
    let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let sources = rx
        .get("sources")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let us = Micros::from_micros_f64;
    let jitter: Vec<Micros> = sources.iter().map(|s| us(f(s, "jitter_us"))).collect();
    let mut excess: Vec<Micros> = sources
        .iter()
        .map(|s| us(s.get("interarrival").map_or(0.0, |d| f(d, "p999_us"))) - Micros::from(nominal))
        .collect();
    excess.sort();
    RxView {
        sources: sources.len(),
        packets: sources.iter().map(|s| f(s, "received") as u64).sum(),
        lost: sources.iter().map(|s| f(s, "lost").max(0.0) as u64).sum(),
        socket_overflows: f(rx, "socket_overflows") as u64,
        jitter_mean_us: Micros::from_nanos(
            jitter.iter().copied().sum::<Micros>().as_nanos() / jitter.len().max(1) as i64,
        ),
        jitter_max_us: jitter.iter().copied().max().unwrap_or_default(),
        interarrival_p999_excess_us_median: excess
            .get(excess.len() / 2)
            .copied()
            .unwrap_or_default(),
        interarrival_p999_excess_us_max: excess.last().copied().unwrap_or_default(),
    }
}

fn compare(cases: &[Case]) -> Vec<Comparison> {
    let ratio = |base: f64, ours: f64| {
        if ours > 0.0 {
            base / ours
        } else {
            f64::INFINITY
        }
    };
    let mut out = Vec::new();
    for c in cases.iter().filter(|c| c.sched != "naive") {
        let Some(b) = cases
            .iter()
            .find(|b| b.sched == "naive" && b.name == c.name)
        else {
            continue;
        };
        let lateness = |q: fn(&Summary) -> Micros| {
            ratio(
                q(&b.lateness).as_micros_f64(),
                q(&c.lateness).as_micros_f64(),
            )
        };
        out.push(Comparison {
            case: c.name.clone(),
            sched: c.sched.clone(),
            lateness_p99_ratio: lateness(|s| s.p99_us),
            lateness_p999_ratio: lateness(|s| s.p999_us),
            rx_interarrival_p999_excess_ratio: ratio(
                b.receiver
                    .interarrival_p999_excess_us_median
                    .as_micros_f64(),
                c.receiver
                    .interarrival_p999_excess_us_median
                    .as_micros_f64(),
            ),
        });
    }
    out
}

fn human(b: &StreamsBench) -> String {
    let mut s = format!(
        "bench streams: {:.0} s per case, send cost budgeted {:.1} µs per packet\n",
        b.duration_us.as_secs_f64(),
        b.send_cost_us.as_micros_f64()
    );
    let _ = writeln!(
        s,
        "{:<14} {:>6} {:>5} {:>5} {:>9} {:>8} {:>8} {:>9} {:>8} {:>6} {:>7} {:>8} {:>6} {:>6}",
        "case",
        "sched",
        "asked",
        "adm",
        "packets",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "misses",
        "rx lost",
        "rx ia+ µs",
        "pacer%",
        "proc%"
    );
    for c in &b.cases {
        let _ = writeln!(
            s,
            "{:<14} {:>6} {:>5} {:>5} {:>9} {:>8.1} {:>8.1} {:>9.1} {:>8.0} {:>6} {:>7} {:>8.0} {:>6.0} {:>6.0}",
            c.name,
            c.sched,
            c.streams_requested,
            c.admitted,
            c.packets,
            c.lateness.p50_us.as_micros_f64(),
            c.lateness.p99_us.as_micros_f64(),
            c.lateness.p999_us.as_micros_f64(),
            c.lateness.max_us.as_micros_f64(),
            c.deadline_misses,
            c.receiver.lost,
            c.receiver.interarrival_p999_excess_us_median.as_micros_f64(),
            c.pacer_cpu_percent,
            c.process_cpu_percent,
        );
    }
    for c in &b.versus_naive {
        let _ = writeln!(
            s,
            "{} {}: naive/{} lateness p99 ×{:.1}, p99.9 ×{:.1}; receiver inter-arrival p99.9 excess ×{:.1}",
            c.case, c.sched, c.sched, c.lateness_p99_ratio, c.lateness_p999_ratio,
            c.rx_interarrival_p999_excess_ratio
        );
    }
    for c in &b.cases {
        if let Some(h) = &c.host {
            let _ = writeln!(s, "{} {}: {}", c.name, c.sched, h.line());
        }
    }
    s
}
