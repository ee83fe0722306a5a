//! Running a scenario: every sweep point (or a shard's share), in parallel, into a results
//! directory.

use crate::closed_form;
use crate::model;
use crate::results::{self, LinkResult, PointResult, ScenarioInfo, Shard, Summary, VideoWork};
use crate::wall;
use metronome_link::report::FlowReport;
use metronome_link::topology::LinkId;
use metronome_netsim::sim::flows::rtp::RtpFlow;
use metronome_spec::scenario::{Point, Scenario, ScenarioFile};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// In virtual time, or on real sockets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// The simulator: virtual time, deterministic for a seed, as fast as it goes.
    #[default]
    Sim,
    /// The emulator: the same link models between real sockets, in real time.
    Emu,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sim => "sim",
            Mode::Emu => "emu",
        }
    }
}

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub mode: Mode,
    /// Points run at once (each on its own thread).
    pub jobs: usize,
    pub shard: Shard,
    /// Replaces the scenario's seed.
    pub seed: Option<u64>,
    /// Where the results go (created; must be empty or absent).
    pub out: PathBuf,
    /// Show progress on stderr.
    pub progress: bool,
    /// Set (by Ctrl-C, say) to end the run early: the point running stops and cleans up, no
    /// other starts, and the run returns an error.
    pub stop: Arc<AtomicBool>,
}

impl RunOptions {
    /// Every point in the simulator, two at a time, quietly, into `out`.
    pub fn new(out: PathBuf) -> RunOptions {
        RunOptions {
            mode: Mode::default(),
            jobs: 2,
            shard: Shard { index: 0, count: 1 },
            seed: None,
            out,
            progress: false,
            stop: Arc::default(),
        }
    }
}

/// A point resolved and ready to run.
struct Job {
    point: Point,
    scenario: Scenario,
}

/// Runs `file` (all its points, or `opts.shard`'s share) and writes the results directory:
/// the summary, the CSVs per point and the report.
pub fn run(file: &ScenarioFile, opts: &RunOptions) -> Result<Summary, String> {
    let all = file.resolve_all().map_err(|e| e.to_string())?;
    let total = all.len();
    if opts.shard.count == 0 || opts.shard.index >= opts.shard.count {
        return Err(format!(
            "shard {}/{} does not exist: use I/N with 0 ≤ I < N",
            opts.shard.index, opts.shard.count
        ));
    }
    let jobs: Vec<Job> = all
        .into_iter()
        .filter(|(p, _)| p.index % opts.shard.count == opts.shard.index)
        .map(|(point, scenario)| Job { point, scenario })
        .collect();
    prepare_dir(&opts.out)?;
    let first = jobs.first().map(|j| &j.scenario);
    let started_unix_ns = wall::unix_ns();
    let dir = scenario_dir(&file.origin);
    let results = run_points(&jobs, opts, dir.as_deref())?;
    for (job, p) in jobs.iter().zip(&results) {
        write_point(&opts.out, job, p)?;
    }
    let summary = Summary {
        schema: results::SCHEMA.into(),
        scenario: ScenarioInfo {
            name: first.map_or_else(String::new, |s| s.name.clone()),
            description: first.map_or_else(String::new, |s| s.description.clone()),
            origin: file.origin.clone(),
            text: file.text.clone(),
            seed: opts.seed.or(first.map(|s| s.seed)).unwrap_or(0),
            sweep: sweep_of(file),
        },
        mode: opts.mode.as_str().into(),
        host: results::host(),
        commit: results::commit(),
        version: env!("CARGO_PKG_VERSION").into(),
        args: std::env::args().collect(),
        started_unix_ns,
        shard: opts.shard,
        total_points: total,
        points: results,
    };
    summary
        .write(&opts.out)
        .map_err(|e| format!("cannot write {}: {e}", opts.out.display()))?;
    crate::estimates::write(&opts.out, &summary)?;
    crate::report::write(&opts.out, &summary)?;
    Ok(summary)
}

/// A point's seed: the run's, plus the point's replicate less one (replicate 1 runs with the
/// scenario's own seed).
pub fn point_seed(seed: u64, point: &Point) -> u64 {
    seed.wrapping_add(u64::from(point.replicate.max(1) - 1))
}

/// The sweep parameters and their values as the summary lists them, `replicate` last when
/// each point runs more than once.
fn sweep_of(file: &ScenarioFile) -> Vec<(String, Vec<String>)> {
    let mut sweep: Vec<(String, Vec<String>)> = file
        .sweep
        .iter()
        .map(|(k, vs)| {
            let vs = vs
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect();
            (k.clone(), vs)
        })
        .collect();
    if file.replicates > 1 {
        let rs = (1..=file.replicates).map(|r| r.to_string()).collect();
        sweep.push((metronome_spec::scenario::REPLICATE.into(), rs));
    }
    sweep
}

/// The directory of a scenario file, `None` for a built-in (`builtin:NAME`).
pub fn scenario_dir(origin: &str) -> Option<PathBuf> {
    if origin.starts_with("builtin:") {
        return None;
    }
    Some(
        Path::new(origin)
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
    )
}

fn prepare_dir(dir: &Path) -> Result<(), String> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .next()
            .is_none();
        if !empty {
            return Err(format!(
                "{} is not empty; choose a new directory with --out, or remove it",
                dir.display()
            ));
        }
    }
    std::fs::create_dir_all(dir.join("points"))
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// Runs the jobs on `opts.jobs` threads; results in job order.
fn run_points(
    jobs: &[Job],
    opts: &RunOptions,
    dir: Option<&Path>,
) -> Result<Vec<PointResult>, String> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<PointResult, String>>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    // Real time is measured: emulated points run one at a time, so that they do not take
    // each other's CPU.
    let jobs_at_once = if opts.mode == Mode::Emu { 1 } else { opts.jobs };
    let threads = jobs_at_once.clamp(1, jobs.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                if opts.stop.load(Ordering::Relaxed) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let seed = point_seed(opts.seed.unwrap_or(job.scenario.seed), &job.point);
                let r = match opts.mode {
                    Mode::Sim => run_point(&job.point, &job.scenario, seed, &opts.out, dir),
                    Mode::Emu => crate::emu_mode::run_point(
                        &job.point,
                        &job.scenario,
                        seed,
                        crate::emu_mode::Where {
                            scenario_dir: dir,
                            out: &opts.out,
                            stop: &opts.stop,
                        },
                    ),
                };
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if opts.progress {
                    progress(n, jobs.len(), &job.point);
                }
            });
        }
    });
    if opts.progress && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!();
    }
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| {
                    Err(if opts.stop.load(Ordering::Relaxed) {
                        "the run was interrupted (Ctrl-C or SIGTERM) before every point had run"
                            .into()
                    } else {
                        "a point did not run".into()
                    })
                })
        })
        .collect()
}

/// A bar redrawn in place on a terminal; a line per point otherwise (a log, a CI job).
fn progress(n: usize, total: usize, point: &Point) {
    use std::io::IsTerminal as _;
    if !std::io::stderr().is_terminal() {
        eprintln!("lab: {n}/{total} points done (last: {point})");
        return;
    }
    const WIDTH: usize = 30;
    let filled = WIDTH * n / total.max(1);
    let bar = format!("{}{}", "=".repeat(filled), " ".repeat(WIDTH - filled));
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r[{bar}] {n}/{total} points (last: {point})\x1b[K");
    let _ = err.flush();
}

/// Runs one point in the simulator. The per-packet trace, if asked for, goes straight to
/// `points/pNNN/packets.csv`.
/// `dir`: the scenario file's directory (for relative trace files), `None` for a built-in.
pub fn run_point(
    point: &Point,
    s: &Scenario,
    seed: u64,
    out: &Path,
    dir: Option<&Path>,
) -> Result<PointResult, String> {
    let started = wall::Stopwatch::start();
    let model::Built { mut sim, videos } =
        model::build(s, seed, dir).map_err(|e| format!("point {point}: {e}"))?;
    let closed = closed_form::for_scenario(s, sim.net().topology());
    let tcp_expected = closed_form::tcp_for_scenario(s, sim.net().topology());
    sim.run_until(model::end_time(s));
    let net = sim.net();
    let links = (0..net.topology().link_count())
        .map(|i| LinkResult::of(s, net.topology(), i, net.link_stats(LinkId(i as u32))))
        .collect();
    let (events, sim_ns) = (sim.net().counters().events, sim.now().as_nanos());
    let (mut outcome, flows) = sim.finish_with_flows();
    let (making, ladder) = videos.iter().fold((0.0, 0.0), |(m, l), (_, v)| {
        let v = crate::video::lock_frames(v);
        (m + v.making_s, l + v.ladder_s)
    });
    let judging = wall::Stopwatch::start();
    let video_work = (!videos.is_empty()).then_some(VideoWork {
        ladder_s: ladder,
        sending_s: making - ladder,
        judging_s: 0.0,
    });
    let videos = add_frames(s, &mut outcome.flows, flows, &videos);
    let video_work = video_work.map(|w| VideoWork {
        judging_s: judging.seconds(),
        ..w
    });
    let video_s = video_work.map_or(0.0, |w| w.ladder_s + w.sending_s + w.judging_s);
    let id = crate::results::point_id(point.index);
    if s.trace {
        let dir = out.join("points").join(&id);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        std::fs::write(dir.join("packets.csv"), outcome.trace.to_csv())
            .map_err(|e| format!("cannot write the packet trace: {e}"))?;
    }
    let mut result = PointResult::new(point, seed, (sim_ns, events), outcome.flows, links);
    result.wall_s = started.seconds();
    result.closed_form = closed;
    result.tcp_expected = tcp_expected;
    result.video_s = video_s;
    result.video_work = video_work;
    result.add_videos(videos);
    Ok(result)
}

/// Each video flow's frames, per receiver, from its packets' arrivals: figures into the
/// reports, series and files for the point.
fn add_frames(
    s: &Scenario,
    reports: &mut [FlowReport],
    flows: Vec<Box<dyn metronome_netsim::sim::flows::Flow>>,
    videos: &[(usize, crate::video::SharedFrames)],
) -> Vec<crate::video::FlowVideo> {
    let mut flows: Vec<Option<Box<dyn metronome_netsim::sim::flows::Flow>>> =
        flows.into_iter().map(Some).collect();
    let mut out = Vec::new();
    for (i, map) in videos {
        let Some(flow) = flows.get_mut(*i).and_then(Option::take) else {
            continue;
        };
        let Ok(rtp) = flow.into_any().downcast::<RtpFlow>() else {
            continue;
        };
        let mut map = crate::video::lock_frames(map);
        map.absorb_notes();
        let arrivals: Vec<&[metronome_time::Timestamp]> = (0..reports[*i].receivers.len())
            .map(|r| rtp.arrivals(r))
            .collect();
        out.push(crate::video::view_flow(
            &s.flows[*i],
            &mut reports[*i],
            &map,
            &arrivals,
        ));
    }
    out
}

fn write_point(out: &Path, job: &Job, p: &PointResult) -> Result<(), String> {
    let dir = out.join("points").join(&p.id);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let interval = job.scenario.interval.as_nanos() as u64;
    for (name, text) in [
        ("flows.csv", results::flows_csv(p)),
        ("intervals.csv", results::intervals_csv(p, interval)),
    ] {
        std::fs::write(dir.join(name), text)
            .map_err(|e| format!("cannot write {}: {e}", dir.join(name).display()))?;
    }
    for (name, bytes) in &p.files {
        std::fs::write(dir.join(name), bytes)
            .map_err(|e| format!("cannot write {}: {e}", dir.join(name).display()))?;
    }
    Ok(())
}
