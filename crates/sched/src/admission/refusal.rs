//! Why a stream was refused, in words a person can act on: which stream, which core or link,
//! the numbers, and what to change.

use crate::analysis::{Budget, DemandPoint};
use crate::fmt_util::{Ns, Pct, Rate};
use crate::task::TaskProblem;
use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// Why [`crate::Admission`] refused a stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Refusal {
    /// The stream's parameters are outside the task model.
    Invalid {
        /// The name the caller gave the refused stream.
        name: String,
        /// Which constraint of the task model the parameters break.
        problem: TaskProblem,
    },
    /// A stream with this id is already admitted.
    Duplicate {
        /// The name the caller gave the refused stream.
        name: String,
        /// The stream id that is already in use (on a core or as a link-only reservation).
        id: u64,
    },
    /// The link would carry more than its declared capacity.
    Link {
        /// The name the caller gave the refused stream.
        name: String,
        /// The refused stream's own bit rate, in bit/s.
        bitrate_bps: u64,
        /// Admitted bit rates plus this stream's, in bit/s (saturates at `u64::MAX`).
        needed_bps: u64,
        /// The declared link capacity ([`crate::Platform::link_capacity_bps`]), in bit/s.
        capacity_bps: u64,
    },
    /// The platform declares no pacing core.
    NoCores {
        /// The name the caller gave the refused stream.
        name: String,
    },
    /// No core stays feasible with the stream; `core` is the most promising (least loaded) one
    /// and `cause` is why it fails.
    Cpu {
        /// The name the caller gave the refused stream.
        name: String,
        /// Index of the least loaded core, whose failure is reported.
        core: usize,
        /// How many pacing cores the platform has (all of them refused the stream).
        cores: usize,
        /// The share of each core the pacer may use.
        budget: Budget,
        /// The core's utilisation with the stream added (for display).
        utilisation_after: f64,
        /// Why the exact test fails on `core`.
        cause: CpuCause,
    },
}

/// Why a core cannot take a stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum CpuCause {
    /// Utilisation above the budget. `excess_bps` estimates how much bit rate of streams costing
    /// what this one costs per bit would have to stop (none when that is unknown).
    Utilisation {
        /// Estimated bit rate to remove, in bit/s; `None` when the stream's bit rate or cost is
        /// zero, so no rate can be derived.
        excess_bps: Option<u64>,
    },
    /// EDF: the jobs due within a window need more than the budget allows in it.
    Demand {
        /// The first window that fails: its length, demand, blocking and available work.
        point: DemandPoint,
    },
    /// DM: stream `victim` may respond after its deadline.
    ResponseTime {
        /// Name of the stream that would miss: the new stream or one already on the core.
        victim: String,
        /// A lower bound of the victim's worst-case response time (the first iterate of the
        /// response-time recurrence that passed its deadline).
        response_at_least: Duration,
        /// The victim's relative deadline.
        deadline: Duration,
    },
    /// The utilisation is within a hair of the budget and the exact test would not finish.
    Intractable,
}

impl Refusal {
    /// The name of the refused stream.
    pub fn name(&self) -> &str {
        match self {
            Refusal::Invalid { name, .. }
            | Refusal::Duplicate { name, .. }
            | Refusal::Link { name, .. }
            | Refusal::NoCores { name }
            | Refusal::Cpu { name, .. } => name,
        }
    }
}

impl std::error::Error for Refusal {}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Invalid { name, problem } => write!(f, "cannot admit '{name}': {problem}"),
            Refusal::Duplicate { name, id } => write!(
                f,
                "cannot admit '{name}': stream id {id} is already admitted; release it first"
            ),
            Refusal::Link {
                name,
                bitrate_bps,
                needed_bps,
                capacity_bps,
            } => write!(
                f,
                "admitting '{name}' ({}) would need {} of the declared {} link; \
                 stop a stream or declare a larger --link-capacity",
                Rate(*bitrate_bps),
                Rate(*needed_bps),
                Rate(*capacity_bps)
            ),
            Refusal::NoCores { name } => write!(
                f,
                "cannot admit '{name}': the platform has no pacing core; declare at least one"
            ),
            Refusal::Cpu { .. } => fmt_cpu(self, f),
        }
    }
}

/// What every CPU refusal message names: the stream, the core, its load and budget.
struct CpuContext<'a> {
    name: &'a str,
    which: String,
    utilisation_after: f64,
    budget: Budget,
}

fn fmt_cpu(r: &Refusal, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let Refusal::Cpu {
        name,
        core,
        cores,
        budget,
        utilisation_after,
        cause,
    } = r
    else {
        return Ok(());
    };
    let which = if *cores > 1 {
        format!("core {core} (the least loaded of {cores})")
    } else {
        format!("core {core}")
    };
    let cx = CpuContext {
        name,
        which,
        utilisation_after: *utilisation_after,
        budget: *budget,
    };
    match cause {
        CpuCause::Utilisation { excess_bps } => cx.utilisation(f, *excess_bps),
        CpuCause::Demand { point } => cx.demand(f, point),
        CpuCause::ResponseTime {
            victim,
            response_at_least,
            deadline,
        } => cx.response(f, victim, *response_at_least, *deadline),
        CpuCause::Intractable => write!(
            f,
            "admitting '{}' would put {} at {}, too close to its {} budget to check exactly; \
             leave some headroom or add a core",
            cx.name,
            cx.which,
            Pct(cx.utilisation_after),
            cx.budget
        ),
    }
}

impl CpuContext<'_> {
    fn utilisation(&self, f: &mut fmt::Formatter<'_>, excess_bps: Option<u64>) -> fmt::Result {
        let excess = (self.utilisation_after - self.budget.as_fraction()).max(0.0);
        write!(
            f,
            "admitting '{}' would put {} at {} of its {} budget; free {} of that core",
            self.name,
            self.which,
            Pct(self.utilisation_after),
            self.budget,
            Pct(excess)
        )?;
        if let Some(bps) = excess_bps {
            write!(f, " (about {} of streams like this one)", Rate(bps))?;
        }
        write!(f, " or add a core")
    }

    fn demand(&self, f: &mut fmt::Formatter<'_>, point: &DemandPoint) -> fmt::Result {
        write!(
            f,
            "admitting '{}' would let jobs due within {} need {}",
            self.name,
            Ns(point.at),
            Ns(point.needed())
        )?;
        if !point.blocking.is_zero() {
            write!(f, " ({} of it for a packet in flight)", Ns(point.blocking))?;
        }
        write!(
            f,
            " of {}, but its {} budget gives only {} in that window; \
             lengthen its deadline or add a core",
            self.which,
            self.budget,
            Ns(point.available)
        )
    }

    fn response(
        &self,
        f: &mut fmt::Formatter<'_>,
        victim: &str,
        response: Duration,
        deadline: Duration,
    ) -> fmt::Result {
        let whose = if victim == self.name {
            "its jobs".to_string()
        } else {
            format!("jobs of '{victim}'")
        };
        write!(
            f,
            "admitting '{}' on {} would let {whose} take {} or more, past their {} deadline \
             (core at {} of its {} budget); lengthen deadlines, use EDF, or add a core",
            self.name,
            self.which,
            Ns(response),
            Ns(deadline),
            Pct(self.utilisation_after),
            self.budget
        )
    }
}
