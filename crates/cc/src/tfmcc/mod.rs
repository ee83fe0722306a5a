//! TFMCC, TCP-Friendly Multicast Congestion Control (RFC 4654), sans-IO: one sending rate for
//! a whole group, set by its slowest receiver.
//!
//! - [`receiver`]: each receiver's TCP-friendly rate (TFRC's equation and loss history), its
//!   RTT (timestamp echo, adjusted between echoes by the one-way delay), and when it answers a
//!   feedback round (suppression, and the random exponential timer of `feedback_timer.rs`);
//! - [`sender`]: feedback rounds, the suppression rate, the current limiting receiver (CLR),
//!   `R_max`, slow start, the increase limit, and the halvings when the CLR or everyone falls
//!   silent, behind [`crate::RateController`]; its echo queue is in `echo.rs`, the gradual
//!   increases of slow start and of a first CLR in `ramp.rs`.
//!
//! RFC 4654 puts the sender's fields in every data packet; over RTP they travel as an RTCP
//! APP packet ([`SenderInfo`], `TFMC` subtype 0, see `metronome_wire::rtcp::cc`) that the
//! sender sends whenever they change (a new round, a lower suppression rate, an echo, a new
//! CLR) and at least once per `R_max`; receivers answer with [`ReceiverFeedback`] (`TFMC`
//! subtype 1). The RFC text used is the one at the IETF (August 2006); section numbers in the
//! code are its.

mod echo;
mod feedback_timer;
mod ramp;
pub mod receiver;
pub mod sender;

pub use receiver::{TfmccReceiver, TfmccReceiverConfig};
pub use sender::{TfmccConfig, TfmccSender};

use std::time::Duration;

/// A receiver's timestamp, echoed by the sender (RFC 4654 §2.2.1: `r`, `tr_r'`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Echo {
    /// The receiver whose timestamp this is (its RTCP SSRC); others ignore the echo.
    pub receiver: u32,
    /// The receiver's timestamp, µs of its clock (32 bits, wrapping).
    pub ts_us: u32,
    /// How long the sender held it before echoing.
    pub delay: Duration,
}

/// What the sender tells the group (RFC 4654 §2.2.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SenderInfo {
    /// The feedback round (`fb_nr`).
    pub round: u16,
    /// Whether the sender is still in slow start (§3.6: no receiver has reported a loss yet).
    pub slow_start: bool,
    /// The suppression rate, bytes/s (`INFINITY`: no feedback this round yet).
    pub x_supp: f64,
    /// `R_max`, the sender's estimate of the group's largest RTT (§3.2); receivers use it as
    /// their RTT until they have one, and for suppression.
    pub r_max: Duration,
    /// This round's feedback delay `T`.
    pub feedback_delay: Duration,
    /// The current limiting receiver.
    pub clr: Option<u32>,
    /// A receiver's timestamp echoed for its RTT measurement (§3.5), if one is due.
    pub echo: Option<Echo>,
    /// The sending rate, bytes/s.
    pub x_send: f64,
}

/// What a receiver reports (RFC 4654 §2.2.2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReceiverFeedback {
    /// The receiver's clock, µs (wrapping), for the sender to echo.
    pub ts_us: u32,
    /// Its measured RTT (`None`: not measured yet, `have_RTT` clear).
    pub rtt: Option<Duration>,
    /// `X_r`, the rate it allows, bytes/s.
    pub x_r: f64,
    /// What it receives, bytes/s.
    pub x_recv: f64,
    /// The loss event rate `p` it measures, 0..=1 (0 before any loss).
    pub p: f64,
    /// The sender's clock of the last data packet received, and how long ago it came (RFC
    /// 4654 §2.2.2's `ts_i'`): the sender's own RTT sample for a receiver that has none.
    pub echo: Option<(metronome_time::Timestamp, Duration)>,
    /// The round it answers.
    pub round: u16,
    /// It has seen a loss event (§4.3.1), so `x_r` comes from the throughput equation and
    /// the sender's slow start ends; cleared after 10 RTTs without data.
    pub have_loss: bool,
    /// This is the receiver's last report: it leaves the group (§4.4).
    pub leaving: bool,
}
