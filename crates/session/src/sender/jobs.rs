//! A stream as a real-time task, at run time: which job each packet belongs to, and whether the
//! job met its deadline.
//!
//! With no period set, every packet is its own job, released at its due time. With a period `T`
//! (the paper's 15 ms), the packets due in `(q − T, q]` form the job released at `q`, a point of
//! the stream's grid `epoch + k·T`, and must all leave by `q + deadline`.

use metronome_time::Timestamp;
use std::time::Duration;

/// The job a packet belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobTimes {
    /// When the job is released: the packet's due time, or the grid point that ends its period.
    pub release: Timestamp,
    /// When all the job's packets must have left: `release` plus the relative deadline.
    pub deadline: Timestamp,
}

/// How a stream's packets group into jobs and how long each job has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobConfig {
    /// `Some(T)`: jobs are quantised to the grid `epoch + k·T`.
    pub period: Option<Duration>,
    /// Relative deadline of every job.
    pub deadline: Duration,
}

/// Counts jobs and deadline misses as packets leave.
#[derive(Clone, Debug)]
pub struct JobClock {
    cfg: JobConfig,
    epoch: Timestamp,
    current: Option<JobTimes>,
    current_missed: bool,
    jobs: u64,
    misses: u64,
}

impl JobClock {
    /// A clock whose grid starts at `epoch`, no job seen yet.
    pub fn new(cfg: JobConfig, epoch: Timestamp) -> Self {
        JobClock {
            cfg,
            epoch,
            current: None,
            current_missed: false,
            jobs: 0,
            misses: 0,
        }
    }

    /// The job of a packet due at `due`.
    pub fn job_of(&self, due: Timestamp) -> JobTimes {
        let release = match self.cfg.period {
            None => due,
            Some(period) => {
                let period_ns = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX).max(1);
                let since =
                    u64::try_from(due.saturating_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
                let k = since.div_ceil(period_ns);
                self.epoch + Duration::from_nanos(k.saturating_mul(period_ns))
            }
        };
        JobTimes {
            release,
            deadline: release + self.cfg.deadline,
        }
    }

    /// A packet of `job` left (or was given up) at `now`. Returns true when this made the job
    /// miss its deadline (once per job).
    pub fn on_done(&mut self, job: JobTimes, now: Timestamp) -> bool {
        if self.current != Some(job) {
            self.current = Some(job);
            self.current_missed = false;
            self.jobs += 1;
        }
        if now > job.deadline && !self.current_missed {
            self.current_missed = true;
            self.misses += 1;
            return true;
        }
        false
    }

    /// Jobs seen so far (a job counts when its first packet is done).
    pub fn jobs(&self) -> u64 {
        self.jobs
    }
    /// Jobs that missed their deadline (each counted once).
    pub fn misses(&self) -> u64 {
        self.misses
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Timestamp {
        Timestamp::from_millis(v)
    }

    #[test]
    fn a_period_groups_packets_into_grid_jobs_and_a_miss_counts_once() {
        let cfg = JobConfig {
            period: Some(Duration::from_millis(15)),
            deadline: Duration::from_millis(10),
        };
        let mut j = JobClock::new(cfg, ms(100));
        // Due in (100, 115] → the job released at 115, deadline 125.
        let a = j.job_of(ms(101));
        assert_eq!(a, j.job_of(ms(115)));
        assert_eq!((a.release, a.deadline), (ms(115), ms(125)));
        assert_eq!(j.job_of(ms(116)).release, ms(130));
        assert!(!j.on_done(a, ms(120)));
        assert!(j.on_done(a, ms(126)));
        assert!(!j.on_done(a, ms(127)), "one miss per job");
        assert_eq!((j.jobs(), j.misses()), (1, 1));
    }

    #[test]
    fn without_a_period_each_packet_is_its_own_job() {
        let cfg = JobConfig {
            period: None,
            deadline: Duration::from_millis(2),
        };
        let mut j = JobClock::new(cfg, ms(0));
        let a = j.job_of(ms(7));
        assert_eq!((a.release, a.deadline), (ms(7), ms(9)));
        j.on_done(a, ms(7));
        j.on_done(j.job_of(ms(9)), ms(12));
        assert_eq!((j.jobs(), j.misses()), (2, 1));
    }
}
