//! One sweep on many machines: each machine runs a shard (the points whose index is I
//! modulo N, `lab run --shard I/N`), and `lab report` merges the shards' directories.
//!
//! - here: which shard this process is, from a batch scheduler's environment (a Slurm job
//!   array's task, a Kubernetes indexed Job's pod), when `--shard` is not given;
//! - [`slurm`]: the `sbatch` scripts of `metronome lab slurm`: the array that runs the shards
//!   and the step that merges them.

pub mod slurm;

use crate::results::Shard;

/// Where a shard read from the environment came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardSource {
    /// `SLURM_ARRAY_TASK_ID` (less `SLURM_ARRAY_TASK_MIN`, over `SLURM_ARRAY_TASK_STEP`) of
    /// `SLURM_ARRAY_TASK_COUNT`.
    Slurm,
    /// `JOB_COMPLETION_INDEX` of the Job's completions (given as `--shards`: Kubernetes does
    /// not put the count in the pod's environment).
    Kubernetes,
}

impl ShardSource {
    /// The variable that gave the index, for messages.
    pub fn variable(self) -> &'static str {
        match self {
            ShardSource::Slurm => "SLURM_ARRAY_TASK_ID",
            ShardSource::Kubernetes => "JOB_COMPLETION_INDEX",
        }
    }
}

/// This process's shard from the scheduler's environment (`var` reads a variable), `None`
/// when no scheduler set one. `shards` is `--shards N`: required with Kubernetes, checked
/// against the array's size with Slurm.
pub fn shard_from_env(
    var: impl Fn(&str) -> Option<String>,
    shards: Option<usize>,
) -> Result<Option<(Shard, ShardSource)>, String> {
    let number = |name: &str| -> Result<Option<usize>, String> {
        var(name)
            .map(|v| {
                v.trim().parse::<usize>().map_err(|_| {
                    format!("{name} is '{v}', not a whole number: is this a job array's task?")
                })
            })
            .transpose()
    };
    let (shard, source) = if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
        let count = number("SLURM_ARRAY_TASK_COUNT")?.ok_or(
            "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not: give --shard I/N",
        )?;
        let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
        let step = number("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
        let index = id.saturating_sub(min) / step;
        (Shard { index, count }, ShardSource::Slurm)
    } else if let Some(index) = number("JOB_COMPLETION_INDEX")? {
        let count = shards.ok_or(
            "JOB_COMPLETION_INDEX is set (a Kubernetes indexed Job): give the Job's \
             completions with --shards N",
        )?;
        (Shard { index, count }, ShardSource::Kubernetes)
    } else {
        return match shards {
            Some(_) => Err(
                "--shards N needs a job array's task index (SLURM_ARRAY_TASK_ID \
                            or JOB_COMPLETION_INDEX); on one machine give --shard I/N"
                    .into(),
            ),
            None => Ok(None),
        };
    };
    if let Some(n) = shards.filter(|&n| n != shard.count) {
        return Err(format!(
            "--shards {n}, but the job array has {} tasks (SLURM_ARRAY_TASK_COUNT)",
            shard.count
        ));
    }
    if shard.count == 0 || shard.index >= shard.count {
        return Err(format!(
            "{} makes this shard {} of {}, which does not exist: the array's indices must \
             run 0 to N − 1 (or evenly from SLURM_ARRAY_TASK_MIN by its step)",
            source.variable(),
            shard.index,
            shard.count
        ));
    }
    Ok(Some((shard, source)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn shard(index: usize, count: usize) -> Shard {
        Shard { index, count }
    }

    #[test]
    fn a_slurm_array_task_is_its_shard() {
        let e = env(&[
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        assert_eq!(
            shard_from_env(&e, None).unwrap(),
            Some((shard(2, 4), ShardSource::Slurm))
        );
        assert_eq!(
            shard_from_env(&e, Some(4)).unwrap(),
            Some((shard(2, 4), ShardSource::Slurm))
        );
        let e = shard_from_env(&e, Some(3)).unwrap_err();
        assert!(e.contains("4 tasks"), "{e}");
    }

    #[test]
    fn an_array_from_one_or_by_steps_counts_from_its_first_task() {
        let e = env(&[
            ("SLURM_ARRAY_TASK_ID", "7"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
        ]);
        assert_eq!(shard_from_env(&e, None).unwrap().unwrap().0, shard(3, 4));
        // --array=0,5: two tasks, the second not where a regular range puts it.
        let e = env(&[
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("SLURM_ARRAY_TASK_COUNT", "2"),
        ]);
        let err = shard_from_env(&e, None).unwrap_err();
        assert!(err.contains("shard 5 of 2, which does not exist"), "{err}");
    }

    #[test]
    fn a_kubernetes_index_needs_the_count() {
        let e = env(&[("JOB_COMPLETION_INDEX", "1")]);
        assert_eq!(
            shard_from_env(&e, Some(3)).unwrap(),
            Some((shard(1, 3), ShardSource::Kubernetes))
        );
        assert!(shard_from_env(&e, None).unwrap_err().contains("--shards N"));
        assert!(shard_from_env(&e, Some(1)).is_err());
    }

    #[test]
    fn without_a_scheduler_there_is_no_shard_and_shards_alone_is_refused() {
        assert_eq!(shard_from_env(env(&[]), None).unwrap(), None);
        assert!(shard_from_env(env(&[]), Some(2))
            .unwrap_err()
            .contains("--shard I/N"));
        let e = env(&[
            ("SLURM_ARRAY_TASK_ID", "x"),
            ("SLURM_ARRAY_TASK_COUNT", "2"),
        ]);
        assert!(shard_from_env(e, None).unwrap_err().contains("'x'"));
    }
}
