//! The points of a run on `--jobs` threads, each written to the results directory as soon
//! as it finishes, with progress on stderr.

use super::out_dir::OutDir;
use super::{point_seed, Job, Mode, RunOptions};
use crate::results::PointResult;
use metronome_config::scenario::Point;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// How one job ended.
pub(super) enum Ended {
    Finished(Box<PointResult>),
    Failed(String),
    /// Stopped (Ctrl-C, SIGTERM) while it ran.
    Stopped,
    /// Never started: the run was stopped first.
    NotRun,
}

/// Runs the jobs on `opts.jobs` threads (emu mode: one at a time), writing each finished
/// point into `out`; how each ended, in job order.
pub(super) fn run_points(
    jobs: &[&Job],
    opts: &RunOptions,
    dir: Option<&Path>,
    out: &OutDir,
) -> Vec<Ended> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let started = crate::wall::Stopwatch::start();
    let slots: Vec<Mutex<Option<Ended>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    // Real time is measured: emulated points run one at a time, so that they do not take
    // each other's CPU.
    let jobs_at_once = if opts.mode == Mode::Emu { 1 } else { opts.jobs };
    let threads = jobs_at_once.clamp(1, jobs.len().max(1));
    let working = AtomicUsize::new(threads);
    std::thread::scope(|scope| {
        if opts.progress {
            scope.spawn(|| say_when_stopped(opts, &working));
        }
        for _ in 0..threads {
            scope.spawn(|| {
                // Counted off however the worker ends, a panic included: the watcher waits
                // for the count to reach 0.
                let _leaving = Leaving(&working);
                while !opts.stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let ended = run_and_write(job, opts, dir, out);
                    let finished = matches!(ended, Ended::Finished(_));
                    *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(ended);
                    if finished {
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if opts.progress {
                            progress(n, jobs.len(), &job.point, started.seconds());
                        }
                    }
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
                .unwrap_or(Ended::NotRun)
        })
        .collect()
}

/// A worker of [`run_points`]: takes itself off the count of those working when it ends.
struct Leaving<'a>(&'a AtomicUsize);

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Says at once that the run was stopped (Ctrl-C, SIGTERM) and what happens now, while the
/// points under way end or stop (a picture being judged finishes first); returns when the
/// workers are done.
fn say_when_stopped(opts: &RunOptions, working: &AtomicUsize) {
    loop {
        // The stop first: workers that end because of it still get it said.
        if opts.stop.load(Ordering::Relaxed) {
            eprintln!(
                "\nlab: stopping: the points under way end or stop now; the finished ones \
                 are kept, and --resume runs the rest"
            );
            return;
        }
        if working.load(Ordering::Relaxed) == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// One job, in its mode, written to `out` if it finished.
fn run_and_write(job: &Job, opts: &RunOptions, dir: Option<&Path>, out: &OutDir) -> Ended {
    let seed = point_seed(opts.seed.unwrap_or(job.scenario.seed), &job.point);
    let r = match opts.mode {
        Mode::Sim => super::sim_point::run_point(
            &job.point,
            &job.scenario,
            seed,
            (out.path(), dir),
            &opts.stop,
        ),
        Mode::Emu => crate::emu_mode::run_point(
            &job.point,
            &job.scenario,
            seed,
            crate::emu_mode::Where {
                scenario_dir: dir,
                out: out.path(),
                stop: &opts.stop,
            },
        ),
    };
    let interval_ns = job.scenario.interval.as_nanos() as u64;
    match r.and_then(|p| out.write_point(interval_ns, &p).map(|()| p)) {
        Ok(p) => Ended::Finished(Box::new(p)),
        // A point stopped by the run's stop flag is not broken: it runs again on --resume.
        Err(_) if opts.stop.load(Ordering::Relaxed) => Ended::Stopped,
        Err(e) => {
            if opts.progress {
                eprintln!("lab: point {} failed: {e}", job.point);
            }
            Ended::Failed(e)
        }
    }
}

/// A bar redrawn in place on a terminal; a line per point otherwise (a log, a CI job). The
/// time left assumes the points still to run take as long as those done.
fn progress(n: usize, total: usize, point: &Point, elapsed_s: f64) {
    use std::io::IsTerminal as _;
    let left_s = elapsed_s / n.max(1) as f64 * total.saturating_sub(n) as f64;
    let eta = if n < total {
        format!(", about {} left", clock(left_s))
    } else {
        String::new()
    };
    if !std::io::stderr().is_terminal() {
        eprintln!(
            "lab: {n}/{total} points done in {}{eta} (last: {point})",
            clock(elapsed_s)
        );
        return;
    }
    const WIDTH: usize = 30;
    let filled = WIDTH * n / total.max(1);
    let bar = format!("{}{}", "=".repeat(filled), " ".repeat(WIDTH - filled));
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r[{bar}] {n}/{total} points{eta} (last: {point})\x1b[K"
    );
    let _ = err.flush();
}

/// Seconds as `1h02m`, `4m05s` or `12s` (also the benches' progress lines).
pub fn clock(s: f64) -> String {
    let s = s.round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}
