//! Admission control: partitioned scheduling over the pacing cores, and the link's capacity.
//!
//! Each admitted stream is pinned to one core (partitioned scheduling: the tests of
//! [`crate::analysis`] then apply per core). A new stream goes to the least utilised core whose
//! set stays feasible under the policy's exact test — worst fit, which keeps headroom on every
//! core for the streams that come later (Lopez, Diaz & Garcia 2004 discuss fit heuristics for
//! partitioned EDF). Ties go to the lowest core index. When a link capacity is declared, the sum
//! of admitted bit rates may not exceed it.
//!
//! Every decision is made in integers by [`edf_test`]/[`dm_test`] and [`cmp_utilisation`]; the
//! `f64` utilisations returned are for people.
//!
//! Under DM, streams of equal deadline on a core are analysed in admission order (earlier
//! admitted = higher priority), which is what [`crate::Dispatcher`] does if the driver gives
//! a core's streams slot indices in admission order. A driver that reuses slots must keep that
//! order or give equal-deadline streams distinct deadlines.

mod refusal;

pub use refusal::{CpuCause, Refusal};

use crate::analysis::{cmp_utilisation, dm_test, edf_test, Budget, DmViolation, EdfViolation};
use crate::task::{Policy, TaskParams};
use serde::Serialize;
use std::time::Duration;

/// What admission may use: how many pacing cores, what share of each, the link, and the
/// blocking a job may suffer from one packet of a lower-priority job in flight.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Platform {
    /// Number of pacing cores (one pacing thread each).
    pub cores: usize,
    /// Share of each core the pacer may use.
    pub budget: Budget,
    /// Declared link capacity in bit/s, if any.
    pub link_capacity_bps: Option<u64>,
    /// The longest send cost of one packet (the non-preemptive unit of the pacer).
    pub blocking: Duration,
}

/// Where an admitted stream goes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Placement {
    /// The core whose pacing thread sends it.
    pub core: usize,
    /// That core's utilisation with the stream (for display).
    pub core_utilisation_after: f64,
}

/// One admitted stream, as reported in a snapshot.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamSnapshot {
    /// The caller's stream id, as given to [`Admission::try_admit`]; unique among admitted streams.
    pub id: u64,
    /// The human-readable name the stream was admitted under (used in refusal messages).
    pub name: String,
    /// The stream's period, deadline, cost per job and bit rate as admitted.
    pub task: TaskParams,
}

/// One core, as reported in a snapshot: streams in admission order (the DM tie order).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CoreSnapshot {
    /// Index of the pacing core, `0..Platform::cores`.
    pub core: usize,
    /// Σ cost/period of the core's streams as a fraction of one whole core (1.0 = 100%),
    /// for display; decisions use exact integers.
    pub utilisation: f64,
    /// The streams pinned to this core, in admission order (earliest first).
    pub streams: Vec<StreamSnapshot>,
}

/// The state of admission, for reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AdmissionSnapshot {
    /// The scheduling policy every core runs, and so the test admission applied.
    pub policy: Policy,
    /// The cores, budget, link capacity and blocking admission works with.
    pub platform: Platform,
    /// Sum of the bit rates of all admitted streams, link-only reservations included, in bit/s.
    pub link_used_bps: u64,
    /// Every core, in index order, with the streams placed on it (link-only streams appear on
    /// no core).
    pub cores: Vec<CoreSnapshot>,
}

/// Partitioned admission control (see the module docs).
#[derive(Clone, Debug)]
pub struct Admission {
    policy: Policy,
    platform: Platform,
    /// Per core, the admitted streams in admission order.
    cores: Vec<Vec<StreamSnapshot>>,
    /// Streams that use the link but none of the cores (they run their own pacing thread:
    /// uncompressed video), by id: their bit rates.
    link_only: Vec<(u64, u64)>,
    link_used_bps: u64,
}

/// A core that could take the stream, or the reason it cannot; with its tasks before.
#[derive(Clone)]
struct Verdict {
    core: usize,
    before: Vec<TaskParams>,
    outcome: Result<(), CpuCause>,
}

impl Verdict {
    /// Exact order by the core's utilisation before the new stream.
    fn by_load(a: &&Verdict, b: &&Verdict) -> std::cmp::Ordering {
        cmp_utilisation(&a.before, &b.before)
    }
}

impl Admission {
    /// No stream admitted yet.
    pub fn new(policy: Policy, platform: Platform) -> Self {
        Admission {
            policy,
            platform,
            cores: vec![Vec::new(); platform.cores],
            link_only: Vec::new(),
            link_used_bps: 0,
        }
    }

    /// Admits stream `id` (called `name` in messages) with parameters `task`, or says why not.
    pub fn try_admit(
        &mut self,
        id: u64,
        name: &str,
        task: TaskParams,
    ) -> Result<Placement, Refusal> {
        let placement = self.would_admit(id, name, task)?;
        self.cores[placement.core].push(StreamSnapshot {
            id,
            name: name.to_string(),
            task,
        });
        self.link_used_bps = self.link_used_bps.saturating_add(task.bitrate_bps);
        Ok(placement)
    }

    /// What [`Admission::try_admit`] would decide, without admitting.
    pub fn would_admit(&self, id: u64, name: &str, task: TaskParams) -> Result<Placement, Refusal> {
        let name = name.to_string();
        if let Err(problem) = task.validate() {
            return Err(Refusal::Invalid { name, problem });
        }
        if self.core_of(id).is_some() {
            return Err(Refusal::Duplicate { name, id });
        }
        self.check_link(&name, task.bitrate_bps)?;
        self.place(name, task)
    }

    /// Worst fit: the least loaded core that stays feasible (the lowest index on ties, as
    /// `min_by` keeps the first minimum); else the refusal of the least loaded core.
    fn place(&self, name: String, task: TaskParams) -> Result<Placement, Refusal> {
        let verdicts: Vec<Verdict> = (0..self.cores.len())
            .map(|core| self.verdict(core, &name, task))
            .collect();
        let fits = verdicts.iter().filter(|v| v.outcome.is_ok());
        if let Some(v) = fits.min_by(Verdict::by_load) {
            return Ok(Placement {
                core: v.core,
                core_utilisation_after: self.core_utilisation(v.core) + task.utilisation(),
            });
        }
        let Some(Verdict {
            core,
            outcome: Err(cause),
            ..
        }) = verdicts.iter().min_by(Verdict::by_load).cloned()
        else {
            return Err(Refusal::NoCores { name });
        };
        Err(Refusal::Cpu {
            name,
            core,
            cores: self.cores.len(),
            budget: self.platform.budget,
            utilisation_after: self.core_utilisation(core) + task.utilisation(),
            cause,
        })
    }

    /// Admits stream `id` on the link only (it runs no job on the cores), or says why not: the
    /// link's capacity is shared with every other stream.
    pub fn try_reserve_link(
        &mut self,
        id: u64,
        name: &str,
        bitrate_bps: u64,
    ) -> Result<(), Refusal> {
        if self.core_of(id).is_some() || self.link_only.iter().any(|(i, _)| *i == id) {
            return Err(Refusal::Duplicate {
                name: name.to_string(),
                id,
            });
        }
        self.check_link(name, bitrate_bps)?;
        self.link_only.push((id, bitrate_bps));
        self.link_used_bps = self.link_used_bps.saturating_add(bitrate_bps);
        Ok(())
    }

    /// Gives back a link-only reservation; false if there was none.
    pub fn release_link(&mut self, id: u64) -> bool {
        let Some(pos) = self.link_only.iter().position(|(i, _)| *i == id) else {
            return false;
        };
        let (_, bps) = self.link_only.remove(pos);
        self.link_used_bps = self.link_used_bps.saturating_sub(bps);
        true
    }

    /// Removes stream `id`; false if it was not admitted.
    pub fn release(&mut self, id: u64) -> bool {
        let Some(core) = self.core_of(id) else {
            return false;
        };
        let streams = &mut self.cores[core];
        if let Some(pos) = streams.iter().position(|s| s.id == id) {
            let gone = streams.remove(pos);
            self.link_used_bps = self.link_used_bps.saturating_sub(gone.task.bitrate_bps);
        }
        true
    }

    /// The core stream `id` was placed on.
    pub fn core_of(&self, id: u64) -> Option<usize> {
        self.cores
            .iter()
            .position(|streams| streams.iter().any(|s| s.id == id))
    }

    /// Utilisation of `core` (0 for a core that does not exist), for display.
    pub fn core_utilisation(&self, core: usize) -> f64 {
        self.cores
            .get(core)
            .map_or(0.0, |s| s.iter().map(|s| s.task.utilisation()).sum())
    }

    /// Sum of the admitted bit rates.
    pub fn link_used_bps(&self) -> u64 {
        self.link_used_bps
    }

    /// Number of admitted streams.
    pub fn admitted(&self) -> usize {
        self.cores.iter().map(Vec::len).sum()
    }

    /// The platform admission works with.
    pub fn platform(&self) -> &Platform {
        &self.platform
    }

    /// The scheduling policy of every core.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The admitted streams per core, for reports.
    pub fn snapshot(&self) -> AdmissionSnapshot {
        let cores = (self.cores.iter().enumerate())
            .map(|(core, streams)| CoreSnapshot {
                core,
                utilisation: self.core_utilisation(core),
                streams: streams.clone(),
            })
            .collect();
        AdmissionSnapshot {
            policy: self.policy,
            platform: self.platform,
            link_used_bps: self.link_used_bps,
            cores,
        }
    }

    fn check_link(&self, name: &str, bitrate_bps: u64) -> Result<(), Refusal> {
        let Some(capacity_bps) = self.platform.link_capacity_bps else {
            return Ok(());
        };
        let needed = u128::from(self.link_used_bps) + u128::from(bitrate_bps);
        if needed <= u128::from(capacity_bps) {
            return Ok(());
        }
        Err(Refusal::Link {
            name: name.to_string(),
            bitrate_bps,
            needed_bps: u64::try_from(needed).unwrap_or(u64::MAX),
            capacity_bps,
        })
    }

    fn tasks(&self, core: usize) -> Vec<TaskParams> {
        self.cores[core].iter().map(|s| s.task).collect()
    }

    /// Runs the policy's exact test on `core` with `task` added (last: lowest DM tie rank).
    fn verdict(&self, core: usize, name: &str, task: TaskParams) -> Verdict {
        let before = self.tasks(core);
        let mut set = before.clone();
        set.push(task);
        let Platform {
            budget, blocking, ..
        } = self.platform;
        let outcome = match self.policy {
            Policy::Edf => edf_test(&set, budget, blocking)
                .map(drop)
                .map_err(|v| self.edf_cause(v, task)),
            Policy::Dm => dm_test(&set, budget, blocking)
                .map(drop)
                .map_err(|v| self.dm_cause(v, core, name, task)),
        };
        Verdict {
            core,
            before,
            outcome,
        }
    }

    fn edf_cause(&self, v: EdfViolation, task: TaskParams) -> CpuCause {
        match v {
            EdfViolation::Overload { utilisation, .. } => self.overload(utilisation, task),
            EdfViolation::Demand { point, .. } => CpuCause::Demand { point },
            // Invalid cannot happen (every task was validated before it was admitted).
            EdfViolation::Intractable { .. } | EdfViolation::Invalid { .. } => {
                CpuCause::Intractable
            }
        }
    }

    fn dm_cause(&self, v: DmViolation, core: usize, name: &str, task: TaskParams) -> CpuCause {
        match v {
            DmViolation::Overload { utilisation, .. } => self.overload(utilisation, task),
            DmViolation::Deadline {
                task: victim,
                response_at_least,
                deadline,
                ..
            } => CpuCause::ResponseTime {
                // Index `len` is the new stream, pushed last.
                victim: (self.cores[core].get(victim))
                    .map_or(name, |s| &s.name)
                    .to_string(),
                response_at_least,
                deadline,
            },
            // Invalid cannot happen (every task was validated before it was admitted).
            DmViolation::Invalid { .. } => CpuCause::Intractable,
        }
    }

    /// The bit rate of streams like `task` whose CPU would bring `utilisation` to the budget.
    fn overload(&self, utilisation: f64, task: TaskParams) -> CpuCause {
        let excess = utilisation - self.platform.budget.as_fraction();
        let per_bps = task.utilisation() / task.bitrate_bps as f64;
        let excess_bps = (task.bitrate_bps > 0 && per_bps > 0.0 && excess > 0.0)
            .then(|| (excess / per_bps).round() as u64);
        CpuCause::Utilisation { excess_bps }
    }
}

#[cfg(test)]
mod tests;
