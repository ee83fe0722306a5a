//! A deterministic virtual-time simulation of one core's pacing thread.
//!
//! It drives the [`Dispatcher`] exactly as the real pacer does: pop the highest-priority released
//! job, send one packet of it (virtual time advances by the packet's cost), submit the rest of
//! the job with the same release and deadline, and pick again; when nothing is released, jump to
//! [`Dispatcher::next_release`]. A stream's next job is submitted when its current job completes
//! (one outstanding job per stream), with its own release time, so a late job delays nothing but
//! itself and what the scheduler puts after it.
//!
//! Releases are strictly periodic from a phase, or sporadic: each gap is the period plus a random
//! extra delay drawn from a `ChaCha8Rng` seeded from `seed` and the task index, so a run replays
//! exactly from its seed. The simulated core runs at full speed (no budget).

use crate::dispatch::{Dispatcher, Job};
use crate::task::{Policy, TaskParams};
use metronome_time::Timestamp;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::time::Duration;

/// How a simulated stream releases its jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Release {
    /// At `phase + k·period`.
    Periodic,
    /// Each release `period` plus a uniform random delay in `[0, max_extra]` after the last.
    Sporadic {
        /// Upper bound (inclusive) of the random delay added to each gap after the period.
        max_extra: Duration,
    },
}

/// A simulated stream: its releases and its jobs of `packets` packets of `packet_cost` each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SimTask {
    /// First release, after the start of the run.
    pub phase: Duration,
    /// Time between releases (the minimum, if sporadic). Zero releases a single job.
    pub period: Duration,
    /// Relative deadline.
    pub deadline: Duration,
    /// Packets per job (zero counts as one).
    pub packets: u32,
    /// Send cost of one packet.
    pub packet_cost: Duration,
    /// Periodic or sporadic.
    pub release: Release,
}

impl SimTask {
    /// Cost of one job: packets × packet cost.
    pub fn cost(&self) -> Duration {
        self.packet_cost.saturating_mul(self.packets.max(1))
    }

    /// The task as the analysis sees it.
    pub fn params(&self, bitrate_bps: u64) -> TaskParams {
        TaskParams {
            period: self.period,
            deadline: self.deadline,
            cost: self.cost(),
            bitrate_bps,
        }
    }
}

/// What happened to one stream's jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SimTaskOutcome {
    /// Jobs completed.
    pub jobs: u64,
    /// Jobs that completed after their absolute deadline.
    pub misses: u64,
    /// Worst completion − release.
    pub worst_response: Duration,
    /// Worst start of the first packet − release.
    pub worst_start_lateness: Duration,
}

/// The result of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SimOutcome {
    /// The seed the run replays from.
    pub seed: u64,
    /// Jobs completed, all streams.
    pub jobs_completed: u64,
    /// Jobs that completed late, all streams.
    pub deadline_misses: u64,
    /// When the last job completed, from the start of the run.
    pub end: Duration,
    /// Per stream, in input order.
    pub tasks: Vec<SimTaskOutcome>,
}

/// Runs `tasks` on one simulated core under `policy`: every job released before `horizon` runs
/// to completion. Deterministic for a given `seed`.
pub fn simulate(policy: Policy, tasks: &[SimTask], horizon: Duration, seed: u64) -> SimOutcome {
    let mut sim = Sim::new(policy, tasks, Timestamp::ZERO + horizon, seed);
    sim.run();
    let tasks_out = sim.out;
    SimOutcome {
        seed,
        jobs_completed: tasks_out.iter().map(|t| t.jobs).sum(),
        deadline_misses: tasks_out.iter().map(|t| t.misses).sum(),
        end: sim.now.saturating_since(Timestamp::ZERO),
        tasks: tasks_out,
    }
}

struct Sim<'a> {
    tasks: &'a [SimTask],
    horizon: Timestamp,
    dispatcher: Dispatcher,
    now: Timestamp,
    /// Packets left in each stream's current job.
    left: Vec<u32>,
    rngs: Vec<ChaCha8Rng>,
    out: Vec<SimTaskOutcome>,
}

impl<'a> Sim<'a> {
    fn new(policy: Policy, tasks: &'a [SimTask], horizon: Timestamp, seed: u64) -> Self {
        let mut dispatcher = Dispatcher::new(policy, tasks.len());
        for (i, t) in tasks.iter().enumerate() {
            dispatcher.set_priority(i, t.deadline);
            let release = Timestamp::ZERO + t.phase;
            if release < horizon {
                dispatcher.submit(job(i, t, release));
            }
        }
        let rngs = (0..tasks.len())
            .map(|i| {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(i as u64);
                rng
            })
            .collect();
        Sim {
            tasks,
            horizon,
            dispatcher,
            now: Timestamp::ZERO,
            left: tasks.iter().map(|t| t.packets.max(1)).collect(),
            rngs,
            out: vec![SimTaskOutcome::default(); tasks.len()],
        }
    }

    fn run(&mut self) {
        loop {
            if let Some(job) = self.dispatcher.pop(self.now) {
                self.send_packet(job);
                continue;
            }
            match self.dispatcher.next_release() {
                Some(t) if t > self.now => self.now = t, // idle until the next release
                _ => break,                              // nothing left
            }
        }
    }

    fn send_packet(&mut self, job: Job) {
        let i = job.stream;
        let task = self.tasks[i];
        if self.left[i] == task.packets.max(1) {
            let late = self.now.saturating_since(job.release);
            let out = &mut self.out[i];
            out.worst_start_lateness = out.worst_start_lateness.max(late);
        }
        self.now += task.packet_cost;
        self.left[i] -= 1;
        if self.left[i] > 0 {
            self.dispatcher.submit(job); // the rest of the job; the pacer re-picks
        } else {
            self.complete(job);
        }
    }

    fn complete(&mut self, job: Job) {
        let i = job.stream;
        let out = &mut self.out[i];
        out.jobs += 1;
        out.misses += u64::from(self.now > job.deadline);
        out.worst_response = out
            .worst_response
            .max(self.now.saturating_since(job.release));
        let task = self.tasks[i];
        self.left[i] = task.packets.max(1);
        if let Some(next) = self.next_release(i, job.release) {
            self.dispatcher.submit(self::job(i, &task, next));
        }
    }

    /// The release after `prev`, if before the horizon.
    fn next_release(&mut self, i: usize, prev: Timestamp) -> Option<Timestamp> {
        let task = self.tasks[i];
        if task.period.is_zero() {
            return None;
        }
        let extra = match task.release {
            Release::Periodic => 0,
            Release::Sporadic { max_extra } => {
                let max = u64::try_from(max_extra.as_nanos()).unwrap_or(u64::MAX);
                self.rngs[i].random_range(0..=max)
            }
        };
        let next = prev + task.period + Duration::from_nanos(extra);
        (next < self.horizon).then_some(next)
    }
}

fn job(stream: usize, task: &SimTask, release: Timestamp) -> Job {
    Job {
        stream,
        release,
        deadline: release + task.deadline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: u64) -> Duration {
        Duration::from_micros(v)
    }

    fn periodic(period: u64, deadline: u64, packets: u32) -> SimTask {
        SimTask {
            phase: Duration::ZERO,
            period: us(period),
            deadline: us(deadline),
            packets,
            packet_cost: us(1),
            release: Release::Periodic,
        }
    }

    /// Buttazzo (2005), Fig. 1, with 1 µs packets: EDF meets every deadline over many
    /// hyperperiods; fixed priorities make τ2 finish at 8 > 7 in the first one.
    #[test]
    fn edf_meets_what_dm_misses() {
        let set = [periodic(5, 5, 2), periodic(7, 7, 4)];
        let edf = simulate(Policy::Edf, &set, us(350), 1);
        assert_eq!(edf.deadline_misses, 0, "{edf:?}");
        assert_eq!(edf.jobs_completed, 70 + 50);
        let dm = simulate(Policy::Dm, &set, us(350), 1);
        assert!(dm.tasks[1].misses > 0, "{dm:?}");
        assert_eq!(dm.tasks[1].worst_response, us(8));
        assert_eq!(dm.tasks[0].misses, 0);
    }

    /// Limited preemption: an urgent job released mid-packet waits for that packet only.
    #[test]
    fn an_urgent_job_waits_for_one_packet_at_most() {
        let long = SimTask {
            packet_cost: us(10),
            ..periodic(1_000, 1_000, 20)
        };
        let urgent = SimTask {
            phase: us(15),
            ..periodic(1_000, 50, 2)
        };
        for policy in [Policy::Edf, Policy::Dm] {
            let r = simulate(policy, &[long, urgent], us(1_000), 0);
            assert_eq!(r.tasks[1].worst_start_lateness, us(5), "{policy:?}");
            assert_eq!(r.tasks[1].worst_response, us(7));
            assert_eq!(r.tasks[0].worst_response, us(202));
            assert_eq!((r.deadline_misses, r.end), (0, us(202)));
        }
    }

    #[test]
    fn overload_misses_deadlines_and_still_ends() {
        let set = [periodic(10, 10, 6), periodic(10, 10, 6)];
        let r = simulate(Policy::Edf, &set, us(1_000), 3);
        assert!(r.deadline_misses > 0);
        assert_eq!(r.jobs_completed, 200); // every released job runs, late
        assert_eq!(r.end, us(1_200)); // 200 jobs × 6 µs, back to back
    }

    #[test]
    fn sporadic_runs_replay_from_their_seed() {
        let t = SimTask {
            release: Release::Sporadic { max_extra: us(50) },
            ..periodic(100, 100, 3)
        };
        let set = [t, t];
        let a = simulate(Policy::Dm, &set, us(100_000), 42);
        assert_eq!(a, simulate(Policy::Dm, &set, us(100_000), 42));
        let b = simulate(Policy::Dm, &set, us(100_000), 43);
        assert_ne!(a.end, b.end);
        assert!(
            a.jobs_completed < 2 * 1000 && a.jobs_completed > 2 * 600,
            "{a:?}"
        );
    }

    #[test]
    fn degenerate_tasks_end() {
        let zero = SimTask {
            period: Duration::ZERO,
            packets: 0,
            ..periodic(0, 5, 0)
        };
        let r = simulate(Policy::Edf, &[zero], us(1_000), 0);
        assert_eq!((r.jobs_completed, r.deadline_misses), (1, 0));
        assert_eq!(simulate(Policy::Dm, &[], us(1_000), 0).jobs_completed, 0);
        let late_phase = SimTask {
            phase: us(2_000),
            ..periodic(10, 10, 1)
        };
        assert_eq!(
            simulate(Policy::Edf, &[late_phase], us(1_000), 0).jobs_completed,
            0
        );
    }
}
