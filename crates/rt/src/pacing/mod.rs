//! The pacer: what sends each packet at its time.
//!
//! - [`thread`]: the one set-up of every pacing thread (real-time policy, locked memory,
//!   pinning) and how it waits for a release time ([`WaitPolicy`]).
//! - [`core`]: one pacing thread per real-time core, scheduling all its streams job by job under
//!   EDF or deadline-monotonic priorities.
//! - [`lane`]: what a core runs: one stream's send step, whatever the stream carries.
//! - [`calibrate`](mod@calibrate): the cost of one send, measured on this machine at start-up (the admission
//!   test's cost term).

pub mod calibrate;
pub mod core;
pub mod lane;
pub mod thread;

pub use self::core::{run_core, Command, Core, CoreConfig, CoreShared};
pub use calibrate::{calibrate, Calibration};
pub use lane::{Lane, Load, Sent};
pub use metronome_sched::WaitPolicy;
pub use thread::{PacerKind, PacingThread, PacingThreadConfig, PacingThreadReport};
