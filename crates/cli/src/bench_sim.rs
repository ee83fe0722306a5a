//! `metronome bench sim`: how fast the simulator runs the lab's reference loads, against the
//! wall clock of the same run: one 1 Mbit/s stream to 45 receivers behind one bottleneck with
//! one TCP flow (73 s of media; target under 1 s), one to 10,000 receivers (60 s of media;
//! target under 60 s), and the built-in seed002-tcp at each of its points (TFMCC and ASMP with
//! 45 receivers and TCP, 73 s; target under 1 s for the network and the sessions: the video's
//! encoding, decoding and picture comparison are timed apart); then seed002-tcp whole as
//! `lab run` runs it, `--replicates` (10) of each controller on every core (target under
//! 120 s once the ladder is in the cache), its work split into the ladder, sending, judging
//! the pictures, and the network. Build with `--release` to measure.

use clap::Args;
use metronome_config::scenario::{FlowKind, ScenarioFile};
use metronome_lab::run::run_point;
use metronome_rt::host::HostWatch;
use metronome_time::Micros;
use serde::Serialize;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Args, Debug)]
pub(crate) struct SimArgs {
    /// Media time of the 45-receiver cases (the reference load and seed002-tcp)
    #[arg(long, value_parser = crate::args::parse_run_length, default_value = "73s")]
    pub small_media: Duration,
    /// Receivers of the large case (a two-level tree under one bottleneck)
    #[arg(long, default_value_t = 10_000)]
    pub large_receivers: usize,
    /// Media time of the large case
    #[arg(long, value_parser = crate::args::parse_run_length, default_value = "60s")]
    pub large_media: Duration,
    /// Replicates of each of seed002-tcp's points in its whole-run case, as `lab run` runs
    /// them, all cores busy (0: leave the case out)
    #[arg(long, default_value_t = 10)]
    pub replicates: u32,
    /// Leave out the comparison with ns-3 (seed 002's dumbbell in both simulators)
    #[arg(long)]
    pub without_ns3: bool,
    /// Print JSON only
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Case {
    name: String,
    /// Receivers of the media stream.
    receivers: usize,
    /// TCP transfers beside it.
    tcp_flows: usize,
    /// Virtual time simulated.
    media_us: Micros,
    /// Wall-clock time it took.
    wall_us: Micros,
    /// Of which the video (making, decoding, comparing pictures); the rest is the network
    /// and the sessions (`network_us`), what the target is for.
    video_us: Micros,
    network_us: Micros,
    events: u64,
    events_per_s: f64,
    /// Simulated seconds per wall-clock second.
    sim_to_wall: f64,
    /// The issue's target for this case, wall-clock time, and whether this run met it.
    target_wall_us: Micros,
    met_target: bool,
    /// Packets handed to receivers (every copy).
    delivered_packets: u64,
}

/// seed002-tcp run whole, as `lab run` runs it: every replicate of both controllers, a point
/// per core at a time. The parts are summed over the points (CPU time: points run at once).
#[derive(Serialize, schemars::JsonSchema)]
struct WholeRun {
    name: String,
    points: usize,
    jobs: usize,
    wall_us: Micros,
    target_wall_us: Micros,
    met_target: bool,
    /// Encoding the ladder's renditions, or reading them from the cache.
    ladder_us: Micros,
    /// Making the packets as the runs went.
    sending_us: Micros,
    /// Decoding what the viewers got and comparing pictures.
    judging_us: Micros,
    /// The network and the sessions.
    network_us: Micros,
}

/// The issue's target for seed002-tcp's 10 replicates of both controllers.
const WHOLE_RUN_TARGET_S: f64 = 120.0;

fn run_whole(text: &str, replicates: u32, scratch: &std::path::Path) -> Result<WholeRun, String> {
    let file = ScenarioFile::parse(text, "builtin:seed002-tcp")
        .and_then(|f| f.with_replicates(replicates))
        .map_err(|e| e.to_string())?;
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut opts = metronome_lab::run::RunOptions::new(scratch.join("whole"));
    opts.jobs = jobs;
    let watch = metronome_lab::wall::Stopwatch::start();
    let s = metronome_lab::run::run(&file, &opts)?;
    let wall_s = watch.seconds();
    let sum = |f: &dyn Fn(&metronome_lab::results::PointResult) -> Micros| -> Micros {
        s.points.iter().map(f).sum()
    };
    let work = |f: fn(&metronome_lab::results::VideoWork) -> Micros| {
        sum(&|p| p.video_work.as_ref().map_or(Micros::ZERO, f))
    };
    Ok(WholeRun {
        name: format!("seed002-tcp, {replicates} replicates of each controller"),
        points: s.points.len(),
        jobs,
        wall_us: Micros::from_secs_f64(wall_s),
        target_wall_us: Micros::from_secs_f64(WHOLE_RUN_TARGET_S),
        met_target: wall_s < WHOLE_RUN_TARGET_S,
        ladder_us: work(|w| w.ladder_us),
        sending_us: work(|w| w.sending_us),
        judging_us: work(|w| w.judging_us),
        network_us: sum(&|p| p.wall_us - p.video_us),
    })
}

#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct SimBench {
    benchmark: &'static str,
    /// Whether this binary was built with optimizations (debug builds are ~3x slower).
    optimized: bool,
    cases: Vec<Case>,
    /// seed002-tcp whole (absent with `--replicates 0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    whole_run: Option<WholeRun>,
    /// Seed 002's dumbbell in this simulator and in ns-3, as `bench ns3` runs it (absent with
    /// `--without-ns3`).
    #[serde(skip_serializing_if = "Option::is_none")]
    ns3: Option<crate::bench_ns3::Ns3Comparison>,
    /// Why the comparison with ns-3 could not run (ns-3 not installed, say).
    #[serde(skip_serializing_if = "Option::is_none")]
    ns3_error: Option<String>,
    /// How busy the host was during the benchmark.
    host: Option<metronome_rt::host::HostLoad>,
}

/// 45 viewers and a TCP transfer share a 20 Mbit/s bottleneck.
fn small(media: Duration) -> String {
    format!(
        r#"name = "bench-sim-45"
duration = "{}ms"
drain = "500ms"
histograms = false
[links.bottleneck]
rate = "20mbit"
delay = "10ms"
queue_packets = 100
[links.access]
rate = "100mbit"
delay = "2ms"
[topology]
shape = "tree"
root = "server"
levels = [{{ count = 1, link = "bottleneck", prefix = "router" }}, {{ count = 45, link = "access", prefix = "viewer" }}]
[[link]]
between = ["router1", "tcp-sink"]
link = "access"
[[flow]]
name = "tv"
kind = "rtp"
from = "server"
to = "viewer*"
rate = "1mbit"
[[flow]]
name = "bulk"
kind = "tcp"
from = "server"
to = "tcp-sink"
"#,
        media.as_millis()
    )
}

/// A 1 Mbit/s stream down a tree: a 100 Mbit/s bottleneck, 100 edge routers, and the
/// receivers spread evenly under them behind 10 Mbit/s access links with 0.1 % loss.
fn large(receivers: usize, media: Duration) -> String {
    let edges = 100.min(receivers.max(1));
    let per_edge = receivers.div_ceil(edges);
    format!(
        r#"name = "bench-sim-large"
duration = "{}ms"
drain = "500ms"
histograms = false
[links.bottleneck]
rate = "100mbit"
delay = "10ms"
queue_packets = 100
[links.edge]
rate = "1gbit"
delay = "1ms"
[links.access]
rate = "10mbit"
delay = "5ms"
loss = 0.001
[topology]
shape = "tree"
root = "server"
levels = [{{ count = 1, link = "bottleneck", prefix = "core" }}, {{ count = {edges}, link = "edge", prefix = "edge" }}, {{ count = {per_edge}, link = "access", prefix = "viewer" }}]
[[flow]]
name = "tv"
kind = "rtp"
from = "server"
to = "viewer*"
rate = "1mbit"
"#,
        media.as_millis()
    )
}

fn run_case(
    text: &str,
    index: usize,
    target_wall_s: f64,
    scratch: &std::path::Path,
    stop: &AtomicBool,
) -> Result<Case, String> {
    // One replicate: a case is one run of a point.
    let file = ScenarioFile::parse(text, "bench")
        .and_then(|f| f.with_replicates(1))
        .map_err(|e| e.to_string())?;
    let point = file.points().remove(index);
    let s = file.resolve(&point).map_err(|e| e.to_string())?;
    let receivers: usize = s
        .flows
        .iter()
        .filter(|f| !matches!(f.kind, FlowKind::Tcp { .. }))
        .map(|f| f.to.len())
        .sum();
    let tcp_flows = s.flows.len()
        - s.flows
            .iter()
            .filter(|f| !matches!(f.kind, FlowKind::Tcp { .. }))
            .count();
    let r = run_point(&point, &s, s.seed, (scratch, None), stop)?;
    let delivered = r
        .flows
        .iter()
        .flat_map(|f| &f.receivers)
        .map(|x| x.packets + x.duplicates)
        .sum();
    let media_s = r.sim_us.as_secs_f64();
    let network = (r.wall_us - r.video_us).max(Micros::from_nanos(1));
    let network_s = network.as_secs_f64();
    let params: Vec<String> = point
        .params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    Ok(Case {
        name: if params.is_empty() {
            s.name
        } else {
            format!("{} {}", s.name, params.join(","))
        },
        receivers,
        tcp_flows,
        media_us: r.sim_us,
        wall_us: r.wall_us,
        video_us: r.video_us,
        network_us: network,
        events: r.events,
        events_per_s: r.events as f64 / network_s,
        sim_to_wall: media_s / network_s,
        target_wall_us: Micros::from_secs_f64(target_wall_s),
        met_target: network_s < target_wall_s,
        delivered_packets: delivered,
    })
}

/// The four cases in turn, each step said.
fn run_cases(
    a: &SimArgs,
    seed002: &str,
    scratch: &std::path::Path,
    stop: &AtomicBool,
    progress: &mut crate::progress::Progress,
) -> Result<Vec<Case>, String> {
    [
        (small(a.small_media), 0, 1.0, "small"),
        (large(a.large_receivers, a.large_media), 0, 60.0, "large"),
        (seed002.to_string(), 0, 1.0, "seed002-tcp, TFMCC"),
        (seed002.to_string(), 1, 1.0, "seed002-tcp, ASMP"),
    ]
    .iter()
    .map(|(text, i, target, label)| {
        let r = run_case(text, *i, *target, scratch, stop);
        progress.step(label);
        r
    })
    .collect()
}

pub(crate) fn run(a: SimArgs, stop: &AtomicBool) -> Result<(), Box<dyn std::error::Error>> {
    let scratch = std::env::temp_dir().join(format!("metronome-bench-sim-{}", std::process::id()));
    let watch = HostWatch::start();
    // seed002-tcp as built in, for the small case's media time (73 s by default).
    let seed002 = metronome_lab::builtin::find("seed002-tcp").map_or(String::new(), |b| {
        b.text.replace(
            "duration = \"73s\"",
            &format!("duration = \"{}ms\"", a.small_media.as_millis()),
        )
    });
    let steps = 4 + usize::from(a.replicates > 0) + usize::from(!a.without_ns3);
    let mut progress = crate::progress::Progress::start("bench sim", steps, None);
    let cases = run_cases(&a, &seed002, &scratch, stop, &mut progress);
    let whole = match (&cases, a.replicates) {
        (Ok(_), 1..) => {
            let r = run_whole(&seed002, a.replicates, &scratch);
            progress.step("the whole run with replicates");
            Some(r)
        }
        _ => None,
    };
    let _ = std::fs::remove_dir_all(&scratch);
    let ns3 = (!a.without_ns3).then(|| {
        let r = crate::bench_ns3::compare(a.small_media, stop);
        progress.step("beside ns-3");
        r
    });
    let bench = SimBench {
        benchmark: "sim",
        optimized: !cfg!(debug_assertions),
        cases: cases?,
        whole_run: whole.transpose()?,
        ns3_error: ns3.as_ref().and_then(|r| r.as_ref().err().cloned()),
        ns3: ns3.and_then(Result::ok),
        host: watch.finish(0),
    };
    if a.json {
        println!("{}", crate::report::to_json(&bench)?);
        return Ok(());
    }
    println!("simulator speed (virtual time against the wall clock of this run)");
    for c in &bench.cases {
        println!(
            "  {:<24} {:>6} receivers + {} TCP  {:>5.1} s of media in {:>7.3} s{}  ({:>7.1}x real time, {:>5.2} M events/s)  target < {} s: {}",
            c.name,
            c.receivers,
            c.tcp_flows,
            c.media_us.as_secs_f64(),
            c.network_us.as_secs_f64(),
            if c.video_us > Micros::ZERO {
                format!(" (+ {:.3} s of video work)", c.video_us.as_secs_f64())
            } else {
                String::new()
            },
            c.sim_to_wall,
            c.events_per_s / 1e6,
            c.target_wall_us.as_secs_f64(),
            if c.met_target { "met" } else { "missed" }
        );
    }
    if let Some(w) = &bench.whole_run {
        println!(
            "  {}: {} points, {} at a time, in {:.1} s  target < {} s: {}",
            w.name,
            w.points,
            w.jobs,
            w.wall_us.as_secs_f64(),
            w.target_wall_us.as_secs_f64(),
            if w.met_target { "met" } else { "missed" }
        );
        let total = (w.ladder_us.as_secs_f64()
            + w.sending_us.as_secs_f64()
            + w.judging_us.as_secs_f64()
            + w.network_us.as_secs_f64())
        .max(1e-9);
        let share = |x: f64| 100.0 * x / total;
        println!(
            "    of its {:.1} s of work: the ladder {:.1} s ({:.0} %), sending {:.1} s ({:.0} %), decoding and comparing pictures {:.1} s ({:.0} %), the network and sessions {:.1} s ({:.0} %)",
            total,
            w.ladder_us.as_secs_f64(),
            share(w.ladder_us.as_secs_f64()),
            w.sending_us.as_secs_f64(),
            share(w.sending_us.as_secs_f64()),
            w.judging_us.as_secs_f64(),
            share(w.judging_us.as_secs_f64()),
            w.network_us.as_secs_f64(),
            share(w.network_us.as_secs_f64())
        );
    }
    print_ns3(&bench);
    if !bench.optimized {
        println!("  (a debug build: run `cargo run --release -- bench sim` to measure)");
    }
    if let Some(h) = &bench.host {
        println!("  {}", h.line());
    }
    Ok(())
}

/// Beside ns-3: each simulator's speed on the same work, and whether they agree.
fn print_ns3(bench: &SimBench) {
    if let Some(e) = &bench.ns3_error {
        println!("  beside ns-3: not run: {e}");
    }
    let Some(c) = &bench.ns3 else {
        return;
    };
    for case in &c.cases {
        let verdict = match case.agrees {
            Some(true) => "the figures agree",
            Some(false) => "the figures DIFFER (see `bench ns3`)",
            None => "TCP compared, not judged",
        };
        println!(
            "  beside ns-3 {}, seed 002's dumbbell, {}: {:.2} M events/s against {:.2} M; ns-3 takes {:.1}x as long ({verdict})",
            c.ns3_version,
            case.name,
            case.metronome.events_per_s / 1e6,
            case.ns3.events_per_s / 1e6,
            case.wall_ratio
        );
    }
}
