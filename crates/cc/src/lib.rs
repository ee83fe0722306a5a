//! Rate control: what rate a stream should send at, from what its receivers report.
//!
//! A [`RateController`] is sans-IO like the rest of the core: the sender session feeds it every
//! receiver report as [`Feedback`] and every packet it sends, wakes it when it asks
//! ([`RateController::poll_timeout`]: a feedback timer, a no-feedback timer), and reads its
//! [`RateController::target_rate`] after each call. The session follows the target: its pacing
//! and catching up take that rate, and it tells the producer (the encoder's bitrate, the mux
//! rate, which rendition feeds the next GOP) through an event.
//!
//! [`FixedRate`] keeps the rate it was given. [`tfrc`]: TFRC (RFC 5348): the throughput
//! equation, the receiver's loss history and loss event rate, the sender's rate rules and its
//! no-feedback timer. TFMCC (RFC 4654) and ASMP plug in here next.

use metronome_time::{Bitrate, Timestamp};
use std::net::SocketAddr;
use std::time::Duration;

mod fixed;
pub mod tfrc;

pub use fixed::FixedRate;
pub use tfrc::{TfrcConfig, TfrcReport, TfrcSender};

/// One receiver report block about our stream (RFC 3550 §6.4.1), as the sender saw it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Feedback {
    /// The reporting receiver's SSRC.
    pub receiver: u32,
    pub from: SocketAddr,
    /// Fraction of packets lost since its previous report, 0..=1.
    pub fraction_lost: f64,
    pub cumulative_lost: i64,
    pub extended_highest_seq: u32,
    /// Interarrival jitter (RFC 3550 A.8).
    pub jitter: Duration,
    /// Round-trip time from LSR/DLSR, once the receiver has seen a sender report.
    pub rtt: Option<Duration>,
    /// A TFRC receiver's report (loss event rate, receive rate, RTT sample), where the
    /// receiver sends one.
    pub tfrc: Option<TfrcReport>,
}

/// Why a controller asked to be woken (shown in traces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControllerTimer {
    /// Time to decide on the feedback gathered (TFMCC's feedback round).
    Feedback,
    /// No feedback for too long: slow down (TFRC's no-feedback timer).
    NoFeedback,
}

/// Decides a stream's target rate.
pub trait RateController: Send {
    /// A short name for summaries: "fixed", "tfrc", "tfmcc", ...
    fn name(&self) -> &'static str;
    /// The rate the stream should send at now.
    fn target_rate(&self) -> Bitrate;
    /// A receiver reported at `now`.
    fn on_feedback(&mut self, now: Timestamp, feedback: &Feedback);
    /// The stream sent `bytes` at `now`.
    fn on_sent(&mut self, _now: Timestamp, _bytes: u64) {}
    /// When the controller wants [`RateController::handle_timeout`] called, and why.
    fn poll_timeout(&self) -> Option<(Timestamp, ControllerTimer)> {
        None
    }
    fn handle_timeout(&mut self, _now: Timestamp) {}
    /// The application asks for another rate (a user, a test): a fixed-rate controller takes
    /// it; an adaptive one may treat it as its upper bound.
    fn set_rate(&mut self, rate: Bitrate);
}
