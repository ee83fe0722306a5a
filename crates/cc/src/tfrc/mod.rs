//! TFRC, TCP-Friendly Rate Control (RFC 5348), sans-IO:
//!
//! - [`equation`]: the TCP throughput equation and its inverse;
//! - [`loss`]: the receiver's loss history, loss events and loss event rate;
//! - [`receiver`]: when a receiver reports, and what (receive rate, loss event rate, echo);
//! - [`sender`]: the sender's allowed rate from the receiver's reports, and its no-feedback
//!   timer, behind [`crate::RateController`].
//!
//! TFMCC (RFC 4654) builds on all three: its receivers compute their rate with the same
//! equation and loss history.

pub mod equation;
pub mod loss;
pub mod receiver;
pub mod sender;

pub use receiver::TfrcReceiver;
pub use sender::{TfrcConfig, TfrcReport, TfrcSender};
