//! Running a scenario: every sweep point (or a shard's share), in parallel, into a results
//! directory; finishing an interrupted run.
//!
//! - `pool.rs`: the points on `--jobs` threads, each written as it finishes;
//! - `sim_point.rs`: one point in the simulator;
//! - `out_dir.rs`: the results directory as it is written, and reopened by `--resume`.
//!
//! A point in emu mode is [`crate::emu_mode::run_point`].

mod out_dir;
mod pool;
mod sim_point;

pub use pool::clock;
pub use sim_point::{run_point, INTERRUPTED};

use crate::results::{self, FailedPoint, PointResult, ScenarioInfo, Shard, Summary};
use crate::wall;
use metronome_config::scenario::{Point, Scenario, ScenarioFile};
use out_dir::OutDir;
use pool::Ended;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

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

    /// `sim` or `emu`, as [`Mode::as_str`] writes them.
    pub fn parse(s: &str) -> Result<Mode, String> {
        match s {
            "sim" => Ok(Mode::Sim),
            "emu" => Ok(Mode::Emu),
            _ => Err(format!(
                "'{s}' is not a mode: sim (virtual time) or emu (real sockets)"
            )),
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
    /// Set (by Ctrl-C, say) to end the run early: the points running stop and clean up, no
    /// other starts; what finished is written and the run returns an error.
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
/// each point as it finishes, then the summary and the report. When points failed or the
/// run was stopped, the summary and report of those that finished are still written, and
/// the error says what is missing and how to finish (`lab run --resume`).
pub fn run(file: &ScenarioFile, opts: &RunOptions) -> Result<Summary, String> {
    let jobs = jobs_of(file, opts.shard)?;
    refuse(jobs.iter(), opts.mode)?;
    let header = header(file, opts, &jobs);
    let out = OutDir::create(&opts.out, &header)?;
    finish(&jobs, header, BTreeMap::new(), opts, &out)
}

/// Finishes the run in `dir`, stopped or with failed points: runs the points it did not
/// finish with the settings it started with (scenario text, replicates, seed, mode, shard),
/// then writes the summary and report of all. `opts`' mode, shard, seed and out are
/// replaced by the run's; its jobs, progress and stop are used.
pub fn resume(dir: &Path, opts: &RunOptions) -> Result<Summary, String> {
    let (out, header, done) = OutDir::reopen(dir)?;
    let file = file_of(&header)?;
    let opts = RunOptions {
        mode: Mode::parse(&header.mode)?,
        shard: header.shard,
        seed: header.seed_override,
        out: dir.into(),
        ..opts.clone()
    };
    let jobs = jobs_of(&file, opts.shard)?;
    // Only the points still to run: a run begun before a check may finish its good points.
    let todo = jobs.iter().filter(|j| !done.contains_key(&j.point.index));
    refuse(todo, opts.mode)?;
    if header.total_points != file.points().len() {
        return Err(format!(
            "{}: its {RUN} does not match its own scenario ({} points, not {})",
            dir.display(),
            file.points().len(),
            header.total_points,
            RUN = results::RUN_FILE,
        ));
    }
    if header.commit != results::commit() {
        eprintln!(
            "metronome: warning: the run began with commit {} and goes on with {}: points \
             from the two may differ",
            header.commit,
            results::commit()
        );
    }
    finish(&jobs, header, done, &opts, &out)
}

/// What the mode cannot run, said before any point starts.
fn refuse<'a>(mut jobs: impl Iterator<Item = &'a Job>, mode: Mode) -> Result<(), String> {
    match mode {
        Mode::Emu => jobs.try_for_each(|j| {
            crate::emu_mode::refuse(&j.scenario).map_err(|e| format!("point {}: {e}", j.point))
        }),
        Mode::Sim => Ok(()),
    }
}

/// The scenario a run's header ran: its text as run, and its replicates.
fn file_of(header: &Summary) -> Result<ScenarioFile, String> {
    let info = &header.scenario;
    let file = ScenarioFile::parse(&info.text, &info.origin).map_err(|e| e.to_string())?;
    let replicates = info
        .sweep
        .iter()
        .find(|(k, _)| k == metronome_config::scenario::REPLICATE)
        .map_or(1, |(_, vs)| vs.len() as u32);
    file.with_replicates(replicates).map_err(|e| e.to_string())
}

/// The points of `shard`'s share of the sweep, resolved.
fn jobs_of(file: &ScenarioFile, shard: Shard) -> Result<Vec<Job>, String> {
    if shard.count == 0 || shard.index >= shard.count {
        return Err(format!(
            "shard {}/{} does not exist: use I/N with 0 ≤ I < N",
            shard.index, shard.count
        ));
    }
    let all = file.resolve_all().map_err(|e| e.to_string())?;
    Ok(all
        .into_iter()
        .filter(|(p, _)| p.index % shard.count == shard.index)
        .map(|(point, scenario)| Job { point, scenario })
        .collect())
}

/// The summary of a run before any point: what ran, where, with what settings.
fn header(file: &ScenarioFile, opts: &RunOptions, jobs: &[Job]) -> Summary {
    let first = jobs.first().map(|j| &j.scenario);
    Summary {
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
        started_unix_ns: wall::unix_ns(),
        shard: opts.shard,
        total_points: file.points().len(),
        seed_override: opts.seed,
        points: Vec::new(),
        failed: Vec::new(),
    }
}

/// Runs the jobs not in `done`, then writes the summary and report of every finished point.
fn finish(
    jobs: &[Job],
    mut summary: Summary,
    mut done: BTreeMap<usize, PointResult>,
    opts: &RunOptions,
    out: &OutDir,
) -> Result<Summary, String> {
    let todo: Vec<&Job> = jobs
        .iter()
        .filter(|j| !done.contains_key(&j.point.index))
        .collect();
    let dir = scenario_dir(&summary.scenario.origin);
    let ended = pool::run_points(&todo, opts, dir.as_deref(), out);
    let (mut stopped, mut not_run) = (0, 0);
    for (job, e) in todo.iter().zip(ended) {
        match e {
            Ended::Finished(p) => {
                done.insert(p.index, *p);
            }
            Ended::Failed(error) => summary.failed.push(FailedPoint {
                index: job.point.index,
                id: results::point_id(job.point.index),
                params: job.point.params.iter().cloned().collect(),
                error,
            }),
            Ended::Stopped => stopped += 1,
            Ended::NotRun => not_run += 1,
        }
    }
    summary.points = done.into_values().collect();
    out.finish(&summary)?;
    if summary.failed.is_empty() && stopped + not_run == 0 {
        return Ok(summary);
    }
    Err(unfinished(
        &summary,
        jobs.len(),
        (stopped, not_run),
        out.path(),
    ))
}

/// What a run that did not finish every point says; `(stopped, not_run)`: the points stopped
/// part-way and those never started.
fn unfinished(s: &Summary, share: usize, (stopped, not_run): (usize, usize), dir: &Path) -> String {
    let mut m = format!("{} of {share} points finished", s.points.len());
    let failed = s.failed.len();
    if failed > 0 {
        let which: Vec<String> = s
            .failed
            .iter()
            .map(|f| format!("{}: {}", f.id, f.error))
            .collect();
        m += &format!("; {failed} failed ({})", which.join("; "));
    }
    if stopped + not_run > 0 {
        m += &format!(
            "; {stopped} stopped part-way and {not_run} did not start: the run was \
             interrupted (Ctrl-C or SIGTERM)"
        );
    }
    let stopped = if s.points.is_empty() {
        ""
    } else {
        " (report drawn from those that finished)"
    };
    format!(
        "{m}. The results are in {0}{stopped}; `metronome lab run --resume {0}` runs the rest",
        dir.display()
    )
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
        sweep.push((metronome_config::scenario::REPLICATE.into(), rs));
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
