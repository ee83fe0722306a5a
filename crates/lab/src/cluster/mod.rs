//! One sweep on many machines: each machine runs a shard (the points whose index is I
//! modulo N, `lab run --shard I/N`), and `lab report` merges the shards' directories.
//!
//! - here: which shard this process is, from a batch scheduler's environment (a Slurm job
//!   array's task, a Kubernetes indexed Job's pod), when `--shards N` asks for it;
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

/// This process's shard from the scheduler's environment (`var` reads a variable), when
/// `--shards N` asks for it (`shards`; `None`: no shard from the environment, whatever it
/// holds: an array's tasks may as well run separate sweeps). Slurm's array must be even
/// (its tasks `MIN`, `MIN + STEP`, … up to `MAX`, `COUNT` of them, `COUNT` = N); Kubernetes
/// gives only the index.
pub fn shard_from_env(
    var: impl Fn(&str) -> Option<String>,
    shards: Option<usize>,
) -> Result<Option<(Shard, ShardSource)>, String> {
    let Some(count) = shards else {
        return Ok(None);
    };
    let number = |name: &str| -> Result<Option<usize>, String> {
        var(name)
            .map(|v| {
                v.trim().parse::<usize>().map_err(|_| {
                    format!("{name} is '{v}', not a whole number: is this a job array's task?")
                })
            })
            .transpose()
    };
    let (index, source) = if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
        (slurm_index(id, count, &number)?, ShardSource::Slurm)
    } else if let Some(index) = number("JOB_COMPLETION_INDEX")? {
        (index, ShardSource::Kubernetes)
    } else {
        return Err("--shards N takes this task's index from a job array \
                    (SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX), and there is none: on one \
                    machine give --shard I/N"
            .into());
    };
    if count == 0 || index >= count {
        return Err(format!(
            "{} makes this shard {index} of {count}, which does not exist: the indices must \
             run 0 to N − 1",
            source.variable()
        ));
    }
    Ok(Some((Shard { index, count }, source)))
}

/// Slurm task `id`'s place in an even array of `count` tasks (`number` reads a variable).
fn slurm_index(
    id: usize,
    count: usize,
    number: &dyn Fn(&str) -> Result<Option<usize>, String>,
) -> Result<usize, String> {
    let tasks = number("SLURM_ARRAY_TASK_COUNT")?;
    let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
    let step = number("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
    let max = number("SLURM_ARRAY_TASK_MAX")?;
    let uneven = || {
        format!(
            "Slurm task {id} is not the task of an even array of {count} (SLURM_ARRAY_TASK_COUNT \
             {tasks:?}, MIN {min}, STEP {step}, MAX {max:?}): give its shard with --shard I/{count} \
             (a task run again alone: --shard $SLURM_ARRAY_TASK_ID/{count})"
        )
    };
    if tasks != Some(count)
        || id < min
        || (id - min) % step != 0
        || max.is_some_and(|m| Some(m) != min.checked_add((count - 1).saturating_mul(step)))
    {
        return Err(uneven());
    }
    Ok((id - min) / step)
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
    fn a_slurm_array_task_is_its_shard_when_shards_asks() {
        let e = env(&[
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        assert_eq!(
            shard_from_env(&e, Some(4)).unwrap(),
            Some((shard(2, 4), ShardSource::Slurm))
        );
        // Without --shards the environment is not read: the task runs the whole sweep.
        assert_eq!(shard_from_env(&e, None).unwrap(), None);
        let err = shard_from_env(&e, Some(3)).unwrap_err();
        assert!(err.contains("not the task of an even array of 3"), "{err}");
    }

    #[test]
    fn an_array_from_one_or_by_steps_counts_from_its_first_task() {
        let e = env(&[
            ("SLURM_ARRAY_TASK_ID", "7"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
            ("SLURM_ARRAY_TASK_MAX", "7"),
        ]);
        assert_eq!(shard_from_env(&e, Some(4)).unwrap().unwrap().0, shard(3, 4));
        // --array=0,2,3: three tasks, not evenly spaced.
        let e = env(&[
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
            ("SLURM_ARRAY_TASK_MAX", "3"),
        ]);
        assert!(shard_from_env(&e, Some(3)).is_err());
        // One task run again alone (--array=2): its own shard must be given.
        let e = env(&[
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "1"),
            ("SLURM_ARRAY_TASK_MIN", "2"),
            ("SLURM_ARRAY_TASK_MAX", "2"),
        ]);
        let err = shard_from_env(&e, Some(3)).unwrap_err();
        assert!(err.contains("--shard $SLURM_ARRAY_TASK_ID/3"), "{err}");
    }

    #[test]
    fn a_kubernetes_index_takes_the_count_from_shards() {
        let e = env(&[("JOB_COMPLETION_INDEX", "1")]);
        assert_eq!(
            shard_from_env(&e, Some(3)).unwrap(),
            Some((shard(1, 3), ShardSource::Kubernetes))
        );
        assert_eq!(shard_from_env(&e, None).unwrap(), None);
        assert!(shard_from_env(&e, Some(1)).is_err());
    }

    #[test]
    fn shards_without_a_scheduler_is_refused() {
        assert!(shard_from_env(env(&[]), Some(2))
            .unwrap_err()
            .contains("--shard I/N"));
        let e = env(&[
            ("SLURM_ARRAY_TASK_ID", "x"),
            ("SLURM_ARRAY_TASK_COUNT", "2"),
        ]);
        assert!(shard_from_env(e, Some(2)).unwrap_err().contains("'x'"));
    }
}
