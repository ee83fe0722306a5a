//! `metronome lab slurm`: a sweep as a Slurm job array, one shard a task, and the job that
//! merges the shards once the array has ended.
//!
//! The results directory `DIR` holds `slurm/array.sbatch`, `slurm/merge.sbatch`,
//! `slurm/submit.sh` (the two `sbatch` calls, the merge depending on the array) and
//! `slurm/logs/`; task `I` writes `shards/I` (`lab run --shard` read from the task's
//! environment, see [`super::shard_from_env`]); the merge writes `DIR/summary.json` and the
//! report. A task that Slurm starts again (requeued after its node failed, or preempted) finds
//! its shard's `run.json` and resumes it. The merge runs whether the tasks succeeded or not
//! (`afterany`): a shard that failed or never ran shows in the report as missing points.
//!
//! The machines share `DIR`, the scenario file and the `metronome` program at the same paths
//! (a cluster's shared file system).

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the array runs.
#[derive(Clone, Debug)]
pub struct SlurmPlan {
    /// The job's name (`metronome-NAME`).
    pub name: String,
    /// The results directory, absolute.
    pub dir: PathBuf,
    /// The `metronome` program the tasks run, absolute.
    pub metronome: PathBuf,
    /// The scenario as `lab run` takes it: an absolute file path or a built-in's name.
    pub scenario: String,
    /// Tasks in the array, one shard each.
    pub shards: usize,
    /// CPUs each task asks for; its points run that many at a time.
    pub cpus_per_task: usize,
    /// `--partition`, `--time` (Slurm's syntax), when given.
    pub partition: Option<String>,
    pub time: Option<String>,
    /// More `lab run` arguments (`--replicates`, `--seed`, `--mode`), the same for each task.
    pub run_args: Vec<String>,
}

/// Quotes `s` for sh: in single quotes, a single quote written as `'\''`.
fn sh(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn path_sh(p: &Path) -> String {
    sh(&p.to_string_lossy())
}

impl SlurmPlan {
    /// Refuses what Slurm's `#SBATCH` lines cannot carry: they are not shell lines (no
    /// quoting), and `--output` expands `%`.
    pub fn check(&self) -> Result<(), String> {
        let dir = self.dir.to_string_lossy();
        if dir
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "'\"%\\".contains(c))
        {
            return Err(format!(
                "{dir}: Slurm's #SBATCH --output line cannot hold a path with spaces, quotes, \
                 % or \\; choose another --out"
            ));
        }
        for (what, value) in [("--partition", &self.partition), ("--time", &self.time)] {
            if let Some(v) = value.as_deref().filter(|v| v.is_empty() || !is_plain(v)) {
                return Err(format!(
                    "{what} '{v}': Slurm takes letters, digits and . _ - : + , here"
                ));
            }
        }
        if self.shards == 0 || self.cpus_per_task == 0 {
            return Err("--shards and --cpus-per-task must be at least 1".into());
        }
        Ok(())
    }

    /// The job's name, as `#SBATCH --job-name` may carry it: the scenario's name with anything
    /// but letters, digits and `. _ -` made `-` (a scenario file names itself).
    fn job_name(&self, suffix: &str) -> String {
        let name: String = self
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        format!("metronome-{name}{suffix}")
    }

    fn header(&self, job: &str, log: &str) -> String {
        let mut h = format!(
            "#!/bin/sh\n# Written by `metronome lab slurm` (Metronome {}).\n\
             #SBATCH --job-name={job}\n#SBATCH --output={}/slurm/logs/{log}\n",
            env!("CARGO_PKG_VERSION"),
            self.dir.display()
        );
        for (key, value) in [("partition", &self.partition), ("time", &self.time)] {
            if let Some(v) = value {
                h.push_str(&format!("#SBATCH --{key}={v}\n"));
            }
        }
        h
    }

    /// The array: task I runs shard I of N into `shards/I`, or resumes it.
    pub fn array_script(&self) -> String {
        let mut s = self.header(&self.job_name(""), "shard-%a.out");
        s.push_str(&format!(
            "#SBATCH --array=0-{}\n#SBATCH --cpus-per-task={}\nset -eu\n",
            self.shards - 1,
            self.cpus_per_task
        ));
        let m = path_sh(&self.metronome);
        let out = format!("{}/shards/\"$SLURM_ARRAY_TASK_ID\"", path_sh(&self.dir));
        let jobs = "--jobs \"${SLURM_CPUS_PER_TASK:-1}\"";
        s.push_str(&format!(
            "out={out}\n\
             # Started again (requeued after its node failed, or preempted): finish the shard.\n\
             if [ -f \"$out/run.json\" ]; then\n  exec {m} lab run --resume \"$out\" {jobs}\nfi\n\
             # The shard is this task's index; one task run again alone (sbatch --array=I) runs\n\
             # its own.\n\
             exec {m} lab run {} --out \"$out\" --shard \"$SLURM_ARRAY_TASK_ID/{}\" {jobs}",
            sh(&self.scenario),
            self.shards,
        ));
        for a in &self.run_args {
            s.push(' ');
            s.push_str(&sh(a));
        }
        s.push('\n');
        s
    }

    /// The merge: every shard's directory into `DIR`'s summary and report.
    pub fn merge_script(&self) -> String {
        let mut s = self.header(&self.job_name("-merge"), "merge.out");
        s.push_str(&format!(
            "set -eu\nexec {} lab report {}/shards/* --out {}\n",
            path_sh(&self.metronome),
            path_sh(&self.dir),
            path_sh(&self.dir)
        ));
        s
    }

    /// The two submissions, the merge after the array however it ended.
    pub fn submit_script(&self) -> String {
        let slurm = self.dir.join("slurm");
        format!(
            "#!/bin/sh\nset -eu\narray=$(sbatch --parsable {})\n\
             sbatch --parsable --dependency=afterany:\"${{array%%;*}}\" {}\n",
            path_sh(&slurm.join("array.sbatch")),
            path_sh(&slurm.join("merge.sbatch"))
        )
    }

    /// Writes `slurm/` (the three scripts, `logs/`) and `shards/` into the directory.
    pub fn write(&self) -> Result<(), String> {
        self.check()?;
        let slurm = self.dir.join("slurm");
        for d in [slurm.join("logs"), self.dir.join("shards")] {
            std::fs::create_dir_all(&d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        for (name, text) in [
            ("array.sbatch", self.array_script()),
            ("merge.sbatch", self.merge_script()),
            ("submit.sh", self.submit_script()),
        ] {
            let path = slurm.join(name);
            std::fs::write(&path, text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// Submits the array, then the merge depending on it: their job ids.
    pub fn submit(&self) -> Result<(String, String), String> {
        let slurm = self.dir.join("slurm");
        let array = sbatch(&[], &slurm.join("array.sbatch"))?;
        let after = format!("--dependency=afterany:{array}");
        let merge_script = slurm.join("merge.sbatch");
        let merge = sbatch(&[&after], &merge_script).map_err(|e| {
            format!(
                "the array is job {array}, but its merge was not submitted ({e}); submit it \
                 with: sbatch {after} {}",
                merge_script.display()
            )
        })?;
        Ok((array, merge))
    }
}

/// Letters, digits and `. _ - : + ,`: what a partition or time limit is written with.
fn is_plain(v: &str) -> bool {
    v.chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-:+,".contains(c))
}

/// `sbatch --parsable ARGS SCRIPT`: the job id.
fn sbatch(args: &[&str], script: &Path) -> Result<String, String> {
    let out = Command::new("sbatch")
        .arg("--parsable")
        .args(args)
        .arg(script)
        .output()
        .map_err(|e| {
            format!("cannot run sbatch ({e}): is this a Slurm login node? Submit later with sh {}/submit.sh", script.parent().unwrap_or(Path::new(".")).display())
        })?;
    if !out.status.success() {
        return Err(format!(
            "sbatch {} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    // `--parsable` prints "ID" or "ID;CLUSTER".
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text
        .trim()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("sbatch printed '{}', not a job id", text.trim()));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> SlurmPlan {
        SlurmPlan {
            name: "sweep".into(),
            dir: "/shared/runs/a".into(),
            metronome: "/opt/metronome/bin/metronome".into(),
            scenario: "/shared/it's.toml".into(),
            shards: 4,
            cpus_per_task: 2,
            partition: Some("batch".into()),
            time: None,
            run_args: vec!["--replicates".into(), "10".into()],
        }
    }

    #[test]
    fn the_array_runs_one_shard_a_task_and_resumes_a_requeued_one() {
        let s = plan().array_script();
        for line in [
            "#SBATCH --array=0-3",
            "#SBATCH --cpus-per-task=2",
            "#SBATCH --partition=batch",
            "#SBATCH --output=/shared/runs/a/slurm/logs/shard-%a.out",
            "out='/shared/runs/a'/shards/\"$SLURM_ARRAY_TASK_ID\"",
            "exec '/opt/metronome/bin/metronome' lab run --resume \"$out\" --jobs \"${SLURM_CPUS_PER_TASK:-1}\"",
            "exec '/opt/metronome/bin/metronome' lab run '/shared/it'\\''s.toml' --out \"$out\" --shard \"$SLURM_ARRAY_TASK_ID/4\" --jobs \"${SLURM_CPUS_PER_TASK:-1}\" '--replicates' '10'",
        ] {
            assert!(s.lines().any(|l| l.trim() == line), "no line {line} in\n{s}");
        }
        assert!(!s.contains("--time"));
    }

    #[test]
    fn the_merge_reads_every_shard_after_the_array() {
        let p = plan();
        assert!(p
            .merge_script()
            .contains("lab report '/shared/runs/a'/shards/* --out '/shared/runs/a'"));
        assert!(p
            .submit_script()
            .contains("--dependency=afterany:\"${array%%;*}\""));
    }

    #[test]
    fn what_sbatch_lines_cannot_carry_is_refused_or_made_plain() {
        for dir in ["/shared/my runs", "/shared/100%", "/shared/a\nb"] {
            let mut p = plan();
            p.dir = dir.into();
            assert!(p.check().unwrap_err().contains("spaces"), "{dir}");
        }
        let mut p = plan();
        p.time = Some("1:00\nrm -rf ~".into());
        assert!(p.check().unwrap_err().contains("--time"));
        // A scenario names itself: its name becomes a plain job name.
        p.time = None;
        p.name = "x\nrm -rf ~".into();
        assert!(p.check().is_ok());
        let s = p.array_script();
        assert!(
            s.contains("#SBATCH --job-name=metronome-x-rm--rf--\n"),
            "{s}"
        );
        assert!(!s.contains("\nrm -rf"));
    }
}
