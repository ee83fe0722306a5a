//! Scheduling of sends: when each packet should leave, and what happens when it cannot.
//!
//! - [`pacing`]: the pacing model of one stream: release time → target send time, lateness
//!   accounting, and the stall policy (never catch up with a burst unless asked to).
//! - [`wait_choice`]: whether the pacer sleeps-then-spins or busy-polls, chosen by the lateness it sees.
//!
//! Deadline scheduling of many streams (EDF, deadline-monotonic) and admission control will live
//! beside it.

pub mod pacing;
pub mod wait_choice;

pub use pacing::{PacingConfig, PacingModel, PacingStats, StallPolicy};
pub use wait_choice::{WaitChoice, WaitSelector, WaitSelectorConfig, WaitSelectorStats};
