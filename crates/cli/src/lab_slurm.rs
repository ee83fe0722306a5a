//! `metronome lab slurm`: a scenario's sweep as a Slurm job array and its merge (the scripts
//! are `metronome_lab::cluster::slurm`'s); written into the results directory, and submitted
//! with `--submit`.

use crate::lab_scenario::{default_out, load, SweepArgs};
use clap::Args;
use metronome_lab::cluster::slurm::SlurmPlan;
use metronome_lab::run::Mode;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub(crate) struct SlurmArgs {
    /// A scenario file (.toml) or a built-in scenario's name
    pub scenario: String,
    /// Tasks in the array: each runs one shard of the sweep
    #[arg(long, value_name = "N")]
    pub shards: usize,
    /// The results directory on the cluster's shared file system (must be empty or absent)
    /// [default: lab-results/NAME, numbered if taken]
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// CPUs a task asks for; its points run that many at a time
    #[arg(long, value_name = "C", default_value_t = 1)]
    pub cpus_per_task: usize,
    /// Slurm partition for the jobs [default: the cluster's]
    #[arg(long)]
    pub partition: Option<String>,
    /// Time limit of each task, in Slurm's syntax (e.g. 30:00) [default: the partition's]
    #[arg(long)]
    pub time: Option<String>,
    /// Passed to every task (emu needs root on the nodes)
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// The metronome program the nodes run [default: this one]
    #[arg(long, value_name = "PATH")]
    pub metronome: Option<PathBuf>,
    /// Submit the array and the merge with sbatch, rather than only writing them
    #[arg(long)]
    pub submit: bool,
    /// Print JSON (`lab-slurm`: the scripts, and the jobs submitted) instead of lines
    #[arg(long)]
    pub json: bool,
}

/// `lab slurm --json`: the scripts written, and the jobs submitted (with `--submit`).
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct LabSlurm {
    /// The results directory the tasks and the merge write to.
    pub results: String,
    /// The job array's script, the merge job's, and `submit.sh`, which submits both.
    pub scripts: Vec<String>,
    /// Tasks in the array (one shard each).
    pub tasks: usize,
    /// The jobs submitted; null without `--submit`.
    pub submitted: Option<SlurmJobs>,
    /// The report page, once the merge job has ended.
    pub report: String,
}

/// The Slurm jobs a `--submit` made.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct SlurmJobs {
    /// The job array's id, as sbatch printed it.
    pub array_job: String,
    /// The merge job's id (it runs once the array has ended).
    pub merge_job: String,
}

pub(crate) fn write(a: SlurmArgs) -> Result<(), String> {
    let mut file = load(&a.scenario)?;
    if let Some(n) = a.sweep.replicates {
        file = file.with_replicates(n).map_err(|e| e.to_string())?;
    }
    let points = file.points();
    let name = file.resolve(&points[0]).map_err(|e| e.to_string())?.name;
    if a.shards > points.len() {
        eprintln!(
            "metronome: warning: {} shards for {} points: {} tasks will have nothing to run",
            a.shards,
            points.len(),
            a.shards - points.len()
        );
    }
    let out = a.out.clone().unwrap_or_else(|| default_out(&name));
    let dir =
        std::path::absolute(&out).map_err(|e| format!("cannot find {}: {e}", out.display()))?;
    let plan = SlurmPlan {
        name,
        scenario: scenario_for_tasks(&a.scenario)?,
        metronome: absolute(a.metronome.clone(), "the metronome program")?,
        dir: dir.clone(),
        shards: a.shards,
        cpus_per_task: a.cpus_per_task,
        partition: a.partition.clone(),
        time: a.time.clone(),
        run_args: run_args(&a),
    };
    // Refused before anything is made.
    plan.check()?;
    metronome_lab::results::empty_dir(&dir, ", or remove it")?;
    plan.write()?;
    let slurm = dir.join("slurm");
    if a.json {
        let submitted = match a.submit {
            true => plan.submit().map(|(array_job, merge_job)| SlurmJobs {
                array_job,
                merge_job,
            }),
            false => return print_slurm(&dir, a.shards, None),
        }?;
        return print_slurm(&dir, a.shards, Some(submitted));
    }
    println!(
        "wrote {}/{{array.sbatch,merge.sbatch,submit.sh}}",
        slurm.display()
    );
    if !a.submit {
        println!("submit with: sh {}", slurm.join("submit.sh").display());
        return Ok(());
    }
    let (array, merge) = plan.submit()?;
    println!(
        "submitted job array {array} ({} tasks) and merge job {merge}",
        a.shards
    );
    println!("watch with:  squeue -j {array},{merge}");
    println!(
        "report:      {} (when job {merge} has ended)",
        dir.join("report.html").display()
    );
    Ok(())
}

/// `--json`'s document for the plan written into `dir`.
fn print_slurm(dir: &Path, tasks: usize, submitted: Option<SlurmJobs>) -> Result<(), String> {
    let slurm = dir.join("slurm");
    let doc = LabSlurm {
        results: dir.display().to_string(),
        scripts: ["array.sbatch", "merge.sbatch", "submit.sh"]
            .map(|f| slurm.join(f).display().to_string())
            .to_vec(),
        tasks,
        submitted,
        report: dir.join("report.html").display().to_string(),
    };
    crate::lab_scenario::print_json(&doc)
}

/// What every task passes on to `lab run`.
fn run_args(a: &SlurmArgs) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(n) = a.sweep.replicates {
        v.extend(["--replicates".into(), n.to_string()]);
    }
    if let Some(s) = a.sweep.seed {
        v.extend(["--seed".into(), s.to_string()]);
    }
    if a.sweep.mode != Mode::Sim {
        v.extend(["--mode".into(), a.sweep.mode.as_str().into()]);
    }
    v
}

/// The scenario as the nodes find it: a file by its absolute path, a built-in by name.
fn scenario_for_tasks(what: &str) -> Result<String, String> {
    let path = Path::new(what);
    if !path.exists() {
        return Ok(what.into());
    }
    std::fs::canonicalize(path)
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|e| format!("cannot find {what}: {e}"))
}

/// `given`, else this program, as an absolute path.
fn absolute(given: Option<PathBuf>, what: &str) -> Result<PathBuf, String> {
    let p = match given {
        Some(p) => p,
        None => std::env::current_exe().map_err(|e| format!("cannot find {what}: {e}"))?,
    };
    std::fs::canonicalize(&p).map_err(|e| format!("cannot find {what} at {}: {e}", p.display()))
}
