//! `metronome lab`: run scenario files in the simulator, list the built-in ones, redraw
//! reports, compare runs. The work is `metronome-lab`'s; this parses arguments and prints.

use crate::lab_scenario::{default_out, load, print_json, SweepArgs};
use crate::lab_slurm::{self, SlurmArgs};
use clap::{Args, Subcommand};
use metronome_lab::results::{Shard, Summary};
use metronome_lab::run::RunOptions;
use metronome_lab::{builtin, compare, report};
use metronome_time::Micros;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Subcommand, Debug)]
pub(crate) enum LabCommand {
    /// Run a scenario (a TOML file, or a built-in name from `lab list`) in the simulator and
    /// write a results directory: summary.json, CSV traces, report.html
    #[command(after_help = crate::examples::LAB_RUN)]
    Run(RunArgs),
    /// The built-in scenarios
    #[command(after_help = crate::examples::LAB_LIST)]
    List {
        /// Print JSON (`lab-list`) instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Print a built-in scenario's file, to start one of your own from:
    /// `metronome lab show seed002-tcp > mine.toml`
    #[command(after_help = crate::examples::LAB_SHOW)]
    Show {
        /// A built-in scenario's name (`lab list`)
        name: String,
    },
    /// Redraw the report of a results directory; several directories (the shards of one
    /// sweep, from --shard) are merged into --out first
    #[command(after_help = crate::examples::LAB_REPORT)]
    Report(ReportArgs),
    /// Two results directories side by side: the same points and receivers, each figure from
    /// both and the difference
    #[command(after_help = crate::examples::LAB_COMPARE)]
    Compare(CompareArgs),
    /// Run a sweep on a Slurm cluster: write (and with --submit, submit) a job array, one
    /// shard a task, and the job that merges the shards into DIR's summary and report
    #[command(after_help = crate::examples::LAB_SLURM)]
    Slurm(SlurmArgs),
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// A scenario file (.toml) or a built-in scenario's name
    #[arg(required_unless_present = "resume")]
    pub scenario: Option<String>,
    /// Finish the run in results directory DIR (stopped, killed, or with failed points): run
    /// the points it has not finished, with the settings it began with, then write its
    /// summary and report
    #[arg(long, value_name = "DIR", conflicts_with_all = ["scenario", "out", "shard", "shards", "seed", "replicates", "mode"])]
    pub resume: Option<PathBuf>,
    /// The results directory (must be empty or absent) [default: lab-results/NAME, numbered
    /// if taken]
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Points run in parallel [default: the number of CPUs]
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Run only share I of N of the sweep (points whose index is I modulo N), for N machines;
    /// merge with `lab report` [default: 0/1, the whole sweep]
    #[arg(long, value_parser = parse_shard)]
    pub shard: Option<Shard>,
    /// Run share I of N, I from the scheduler: a Slurm array task's index
    /// (SLURM_ARRAY_TASK_ID, of an even array of N tasks) or a Kubernetes indexed Job's
    /// (JOB_COMPLETION_INDEX; N is the Job's completions)
    #[arg(long, value_name = "N", conflicts_with = "shard")]
    pub shards: Option<usize>,
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Print JSON (`lab-run`: where the results are, and the summary) instead of the table;
    /// progress stays on stderr
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// Results directories (one run, or the shards of one sweep)
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Where the merged summary and report go [default: the directory, if only one]
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print JSON (`lab-report`) instead of a line
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
    pub a: PathBuf,
    pub b: PathBuf,
    /// Also write the comparison as an HTML page
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

fn parse_shard(s: &str) -> Result<Shard, String> {
    let bad = || format!("'{s}' is not a shard: write I/N, e.g. 0/4 for the first of four");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (index, count) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if count == 0 || index >= count {
        return Err(format!("shard {s}: I must be below N, and N at least 1"));
    }
    Ok(Shard { index, count })
}

/// `quiet` (the global -q): no progress bar and no summary table either.
pub(crate) fn run(cmd: LabCommand, stop: Arc<AtomicBool>, quiet: bool) -> Result<(), String> {
    match cmd {
        LabCommand::Run(a) => run_scenario(a, stop, quiet),
        LabCommand::List { json: true } => {
            let list = LabList {
                scenarios: builtin::BUILTINS
                    .iter()
                    .map(|b| BuiltinView {
                        name: b.name,
                        summary: b.summary,
                    })
                    .collect(),
            };
            print_json(&list)
        }
        LabCommand::List { json: false } => {
            for b in builtin::BUILTINS {
                println!("{:<16} {}", b.name, b.summary);
            }
            println!("\nRun one with: metronome lab run NAME; start your own from one with: metronome lab show NAME > mine.toml");
            Ok(())
        }
        LabCommand::Show { name } => {
            let b = builtin::find(&name).ok_or_else(|| {
                let names: Vec<&str> = builtin::BUILTINS.iter().map(|b| b.name).collect();
                format!(
                    "'{name}' is not a built-in scenario (built in: {})",
                    names.join(", ")
                )
            })?;
            print!("{}", b.text);
            Ok(())
        }
        LabCommand::Report(a) => redraw(a),
        LabCommand::Compare(a) => compare_runs(a),
        LabCommand::Slurm(a) => lab_slurm::write(a),
    }
}

fn run_scenario(a: RunArgs, stop: Arc<AtomicBool>, quiet: bool) -> Result<(), String> {
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let (summary, out) = match (&a.resume, &a.scenario) {
        (Some(dir), _) => {
            let opts = RunOptions {
                jobs,
                progress: !quiet,
                stop,
                ..RunOptions::new(dir.clone())
            };
            (metronome_lab::run::resume(dir, &opts)?, dir.clone())
        }
        (None, Some(scenario)) => start(scenario, &a, jobs, stop, quiet)?,
        (None, None) => return Err("give a scenario to run, or --resume DIR".into()),
    };
    if a.json {
        let report = out.join("report.html");
        return print_json(&LabRun {
            results: out.display().to_string(),
            report: report.display().to_string(),
            summary: &summary,
        });
    }
    if !quiet {
        print_table(&summary);
    }
    println!("results: {}", out.display());
    println!("report:  {}", out.join("report.html").display());
    Ok(())
}

/// `lab list --json`: the built-in scenarios.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct LabList {
    /// Each built-in scenario, in `lab list`'s order.
    pub scenarios: Vec<BuiltinView>,
}

/// A built-in scenario.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct BuiltinView {
    /// Its name, for `lab run NAME` and `lab show NAME`.
    pub name: &'static str,
    /// What it shows, in a line.
    pub summary: &'static str,
}

/// `lab run --json`: where the run's results are, and its summary.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct LabRun<'a> {
    /// The results directory.
    pub results: String,
    /// Its report page.
    pub report: String,
    /// The run's summary, as `summary.json` in the results directory holds it (its own
    /// header: `schema`; docs/lab.md), its floats rounded as in every document.
    pub summary: &'a Summary,
}

/// `lab report --json`: what was drawn, and where.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct LabReport {
    /// The directory the (merged) summary and the report were written to.
    pub results: String,
    /// The report page.
    pub report: String,
    /// Results directories read (one run, or the shards of one sweep).
    pub merged: usize,
    /// Points the report shows.
    pub points: usize,
    /// Points of the whole sweep (more than `points` while shards are missing).
    pub total_points: usize,
}

/// A new run of `scenario`.
fn start(
    scenario: &str,
    a: &RunArgs,
    jobs: usize,
    stop: Arc<AtomicBool>,
    quiet: bool,
) -> Result<(Summary, PathBuf), String> {
    let mut file = load(scenario)?;
    if let Some(n) = a.sweep.replicates {
        file = file.with_replicates(n).map_err(|e| e.to_string())?;
    }
    let name = file
        .resolve(&file.points()[0])
        .map_err(|e| e.to_string())?
        .name;
    let out = a.out.clone().unwrap_or_else(|| default_out(&name));
    let opts = RunOptions {
        mode: a.sweep.mode,
        jobs,
        shard: shard_of(a, quiet)?,
        seed: a.sweep.seed,
        out: out.clone(),
        progress: !quiet,
        stop,
    };
    Ok((metronome_lab::run::run(&file, &opts)?, out))
}

/// `--shard`, else the scheduler's task (said on stderr), else the whole sweep.
fn shard_of(a: &RunArgs, quiet: bool) -> Result<Shard, String> {
    if let Some(s) = a.shard {
        return Ok(s);
    }
    Ok(
        match metronome_lab::cluster::shard_from_env(|k| std::env::var(k).ok(), a.shards)? {
            Some((s, source)) => {
                if !quiet {
                    eprintln!(
                        "lab: shard {}/{} (from {})",
                        s.index,
                        s.count,
                        source.variable()
                    );
                }
                s
            }
            None => {
                if let (false, Ok(task)) = (quiet, std::env::var("SLURM_ARRAY_TASK_ID")) {
                    eprintln!(
                        "lab: the whole sweep, in Slurm array task {task} (give --shards N to \
                         run this task's share of N)"
                    );
                }
                Shard { index: 0, count: 1 }
            }
        },
    )
}

fn print_table(s: &Summary) {
    for p in &s.points {
        let params: Vec<String> = p.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("{} {}", p.id, params.join(" "));
        for f in &p.flows {
            // Receivers that saw the same, on one line (a group's 45 viewers behind one link).
            let tcp = f.kind == "tcp";
            let rows = f
                .receivers
                .iter()
                .map(|r| (r.node.as_str(), receiver_lines(r, tcp)));
            for (who, (line, frames)) in metronome_lab::report::collapse_receivers(rows.collect()) {
                println!("    {:<14} → {who}", f.name);
                println!("    {:<14}   {line}", "");
                if let Some(frames) = frames {
                    println!("    {:<14}   {frames}", "");
                }
            }
        }
        for w in &p.warnings {
            eprintln!("metronome: warning: {} {w}", p.id);
        }
    }
}

/// A receiver's figures, and its frames' if it decoded video. A TCP flow's bytes are counted
/// as the application reads them: no packet's jitter or delay (n/a, as in the report).
fn receiver_lines(
    r: &metronome_link::report::ReceiverReport,
    tcp: bool,
) -> (String, Option<String>) {
    let ms = |d: Micros| {
        if tcp {
            format!("{:>11}", "n/a")
        } else {
            format!("{:8.3} ms", d.as_millis_f64())
        }
    };
    let line = format!(
        "loss {:6.2} %  {:8.3} Mbit/s  jitter {}  delay {}",
        r.loss_percent,
        r.throughput_bps / 1e6,
        ms(r.jitter_us),
        ms(r.mean_delay_us)
    );
    let frames = r.frames.and_then(|f| Some((f, f.pictures?))).map(|(f, q)| {
        format!(
            "frames lost {} of {}  PSNR {:.2} dB  SSIM {:.4}  MOS {:.2}",
            f.lost, f.frames, q.psnr_y_db, q.ssim, q.mos
        )
    });
    (line, frames)
}

fn redraw(a: ReportArgs) -> Result<(), String> {
    let parts = a
        .dirs
        .iter()
        .map(|d| Summary::read(d))
        .collect::<Result<Vec<_>, _>>()?;
    let out = match (&a.out, a.dirs.as_slice()) {
        (Some(o), _) => o.clone(),
        (None, [one]) => one.clone(),
        (None, _) => {
            return Err(
                "several directories are merged into a new one: give it with --out DIR".into(),
            )
        }
    };
    let merged = Summary::merge(parts)?;
    if merged.points.len() < merged.total_points {
        eprintln!(
            "metronome: warning: {} of the sweep's {} points are here; the report shows those",
            merged.points.len(),
            merged.total_points
        );
    }
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    merged.write(&out)?;
    metronome_lab::estimates::write(&out, &merged)?;
    report::write(&out, &merged)?;
    let page = out.join("report.html");
    if a.json {
        return print_json(&LabReport {
            results: out.display().to_string(),
            report: page.display().to_string(),
            merged: a.dirs.len(),
            points: merged.points.len(),
            total_points: merged.total_points,
        });
    }
    println!("report: {}", page.display());
    Ok(())
}

fn compare_runs(a: CompareArgs) -> Result<(), String> {
    let x = Summary::read(&a.a)?;
    let y = Summary::read(&a.b)?;
    let (rows, only_a, only_b) = compare::rows(&x, &y);
    if rows.is_empty() {
        return Err(
            "the two runs have no point and receiver in common (compare runs of one scenario)"
                .into(),
        );
    }
    if a.json {
        let v = Compared {
            rows: &rows,
            only_a,
            only_b,
        };
        println!("{}", crate::report::to_json(&v).map_err(|e| e.to_string())?);
    } else {
        print!("{}", compare::text(&x, &y, &rows));
        if only_a + only_b > 0 {
            println!("({only_a} receivers only in A, {only_b} only in B)");
        }
    }
    if let Some(path) = a.html {
        std::fs::write(&path, compare::html(&x, &y, &rows))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// `lab compare --json`: the rows both runs have, and how many of each run's had no partner.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct Compared<'a> {
    pub rows: &'a [metronome_lab::compare::Row],
    /// Receivers at points of run A that run B does not have.
    pub only_a: usize,
    /// Receivers at points of run B that run A does not have.
    pub only_b: usize,
}
