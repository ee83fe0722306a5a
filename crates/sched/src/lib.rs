//! Scheduling of sends: when each packet should leave, which stream's packet goes next, and
//! whether a new stream may start at all. Sans-IO: time comes in as arguments, nothing here
//! reads a clock, sleeps or spawns.
//!
//! - [`task`]: a stream as a real-time task — period T, relative deadline D ≤ T, worst-case
//!   cost C per job, bit rate — and the scheduling [`Policy`] (EDF or deadline-monotonic).
//! - [`analysis`]: exact schedulability tests for one limited-preemptive core with a CPU
//!   [`Budget`] and one packet of blocking: [`edf_test`] (processor demand, Baruah, Rosier &
//!   Howell 1990, with George, Rivierre & Spuri 1996 blocking) and [`dm_test`] (response-time
//!   analysis, Audsley et al. 1993). Integer arithmetic only.
//! - [`admission`]: partitioned admission control — worst-fit placement over the pacing cores
//!   under the exact test, the link's capacity, and [`Refusal`]s a person can act on.
//! - [`dispatch`]: the run-time [`Dispatcher`] of a pacing thread: the highest-priority released
//!   job, re-picked after every packet; allocation-free after construction.
//! - [`sim`]: a deterministic virtual-time simulation of one core's pacer over the
//!   dispatcher, periodic or sporadic (seeded), counting deadline misses.
//! - [`pacing`]: the pacing model of one stream: when a packet leaves, lateness accounting, and
//!   what happens after a stall (catch up at a bounded rate, or drop what is late); the schedule
//!   itself never moves.
//! - [`overload`]: whether the admitted set still fits the machine as it is now (measured send
//!   cost, missed deadlines), and what to do when it does not: warn, refuse or shed.
//! - [`wait_choice`]: whether the pacer sleeps-then-spins or busy-polls, chosen by the lateness
//!   it sees.
//! - [`st2110`]: SMPTE ST 2110-21 sender pacing models for uncompressed video (narrow gapped,
//!   narrow linear, wide, burst) and the receiver's Cinst/VRX conformance measurement.

pub mod admission;
pub mod analysis;
pub mod cpu;
pub mod dispatch;
mod fmt_util;
mod ledger;
pub mod memory;
pub mod overload;
pub mod pacing;
pub mod phase;
pub mod sim;
pub mod st2110;
pub mod task;
pub mod throttle_guard;
pub mod wait_choice;

pub use admission::{
    Admission, AdmissionSnapshot, CoreSnapshot, CpuCause, Placement, Platform, Refusal,
    StreamSnapshot,
};
pub use analysis::{cmp_utilisation, compare_utilisation, dm_test, edf_test, utilisation};
pub use analysis::{Budget, DemandPoint, DmReport, DmViolation, EdfReport, EdfViolation};
pub use cpu::{CpuBudget, CpuRefusal};
pub use dispatch::{Dispatcher, Job};
pub use memory::{MemoryBudget, MemoryRefusal};
pub use overload::{
    Action as OverloadAction, OverloadPolicy, OverloadWatch, Window as OverloadWindow,
};
pub use pacing::{Decision, LatePolicy, PacingConfig, PacingModel, PacingStats};
pub use sim::{simulate, Release, SimOutcome, SimTask, SimTaskOutcome};
pub use st2110::{Conformance, ConformanceSummary, FrameFormat, FrameSchedule, SenderType};
pub use task::{Policy, TaskParams, TaskProblem, MAX_PERIOD};
pub use throttle_guard::{GuardStep, ThrottleGuard};
pub use wait_choice::{
    WaitChoice, WaitPolicy, WaitSelector, WaitSelectorConfig, WaitSelectorStats,
};
