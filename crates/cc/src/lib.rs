//! Rate control: what rate a stream should send at, from what its receivers report.
//!
//! A [`RateController`] is sans-IO like the rest of the core: the sender session feeds it every
//! receiver report as [`Feedback`] and every packet it sends, wakes it when it asks
//! ([`RateController::poll_timeout`]: a feedback timer, a no-feedback timer), and reads its
//! [`RateController::target_rate`] after each call. The session follows the target: its pacing
//! and catching up take that rate, and it tells the producer (the encoder's bitrate, the mux
//! rate, which rendition feeds the next GOP) through an event.
//!
//! Some controllers tell their receivers something ([`RateController::poll_announce`]: TFRC
//! its RTT, TFMCC its feedback round, suppression rate and echoes), and their receivers answer
//! with more than receiver reports ([`Feedback::tfrc`], [`Feedback::tfmcc`]); the sessions
//! carry both in RTCP APP packets, and a receiver runs the matching [`receiver::Agent`].
//!
//! [`FixedRate`] keeps the rate it was given. [`tfrc`]: TFRC (RFC 5348): the throughput
//! equation, the receiver's loss history and loss event rate, the sender's rate rules and its
//! no-feedback timer. [`tfmcc`]: TFMCC (RFC 4654) for a multicast group. [`asmp`]: ASMP, from
//! receiver reports alone (seed 002). [`gcc`]: GCC (draft-ietf-rmcat-gcc), WebRTC's, from
//! per-packet feedback (RFC 8888), for unicast. [`vbr`]: Evalvid-RA's VBR controller, which
//! turns the allowed rate into the quantizer (the ladder's rung) of the next GOP.

use metronome_time::{Bitrate, Timestamp};
use std::net::SocketAddr;
use std::time::Duration;

pub mod asmp;
mod fixed;
pub mod gcc;
mod kind;
pub mod receiver;
pub mod tfmcc;
pub mod tfrc;
pub mod vbr;

pub use asmp::{AsmpConfig, AsmpSender};
pub use fixed::FixedRate;
pub use gcc::{GccConfig, GccSender, PacketResult};
pub use kind::{ControllerKind, ControllerParams};
pub use tfmcc::{TfmccConfig, TfmccSender};
pub use tfrc::{TfrcConfig, TfrcReport, TfrcSender};
pub use vbr::{VbrConfig, VbrController, VbrDecision};

/// One receiver report block about our stream (RFC 3550 §6.4.1), as the sender saw it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Feedback {
    /// The reporting receiver's SSRC.
    pub receiver: u32,
    /// The address the report came from (where the sender session received it).
    pub from: SocketAddr,
    /// Fraction of packets lost since its previous report, 0..=1.
    pub fraction_lost: f64,
    /// Packets lost since the receiver began, as the report block counts it: expected minus
    /// received, so it can be negative when duplicates arrive (RFC 3550 §6.4.1).
    pub cumulative_lost: i64,
    /// The highest RTP sequence number received, extended with the count of sequence number
    /// cycles in the high 16 bits (RFC 3550 §6.4.1).
    pub extended_highest_seq: u32,
    /// Interarrival jitter (RFC 3550 A.8).
    pub jitter: Duration,
    /// Round-trip time from LSR/DLSR, once the receiver has seen a sender report.
    pub rtt: Option<Duration>,
    /// A TFRC receiver's report (loss event rate, receive rate, RTT sample), where the
    /// receiver sends one.
    pub tfrc: Option<TfrcReport>,
    /// A TFMCC receiver's report, where the receiver sends one.
    pub tfmcc: Option<tfmcc::ReceiverFeedback>,
}

impl Feedback {
    /// Feedback from `receiver` with no receiver report figures (a TFRC or TFMCC report on its
    /// own): fill in what came.
    pub fn bare(receiver: u32, from: SocketAddr) -> Feedback {
        Feedback {
            receiver,
            from,
            fraction_lost: 0.0,
            cumulative_lost: 0,
            extended_highest_seq: 0,
            jitter: Duration::ZERO,
            rtt: None,
            tfrc: None,
            tfmcc: None,
        }
    }
}

/// What a controller tells its receivers (the session sends it in RTCP).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Announce {
    /// TFRC: the sender's RTT (RFC 5348 §3.2.1), which the receiver groups losses by.
    TfrcRtt(Duration),
    /// TFMCC: the sender's fields (RFC 4654 §2.2.1).
    Tfmcc(tfmcc::SenderInfo),
}

/// Why a controller asked to be woken (shown in traces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControllerTimer {
    /// Time to decide on the feedback gathered (TFMCC's feedback round).
    Feedback,
    /// No feedback for too long: slow down (TFRC's no-feedback timer).
    NoFeedback,
    /// Something to tell the receivers.
    Announce,
}

/// Decides a stream's target rate.
pub trait RateController: Send {
    /// A short name for summaries: "fixed", "tfrc", "tfmcc", ...
    fn name(&self) -> &'static str;
    /// The rate the stream should send at now.
    fn target_rate(&self) -> Bitrate;
    /// A receiver reported at `now`.
    fn on_feedback(&mut self, now: Timestamp, feedback: &Feedback);
    /// Whether [`RateController::on_feedback`] computes a rate from `feedback` (TFRC from its
    /// reports, TFMCC from its, ASMP from receiver reports; a fixed rate from none): the
    /// sender session tells the producer of each report taken (Evalvid-RA's VBR controller
    /// hears the rate at every feedback its TFRC agent takes).
    fn reads(&self, _feedback: &Feedback) -> bool {
        true
    }
    /// The stream sent `bytes` at `now`.
    fn on_sent(&mut self, _now: Timestamp, _bytes: u64) {}
    /// Receiver `receiver` (its SSRC) said goodbye (RTCP BYE) at `now`: it no longer counts.
    fn on_receiver_left(&mut self, _now: Timestamp, _receiver: u32) {}
    /// Whether it reads per-packet feedback: the sender session then keeps a log of what it
    /// sent (GCC).
    fn wants_packet_feedback(&self) -> bool {
        false
    }
    /// Whether its receivers' reports echo a packet's sequence number for the sender to turn
    /// into when it left (TFRC, TFMCC): the sender session then keeps the same log.
    fn wants_send_times(&self) -> bool {
        false
    }
    /// A receiver's per-packet feedback (RFC 8888), matched with the send times, arrived at
    /// `now` (GCC reads it; the others ignore it).
    fn on_packet_results(&mut self, _now: Timestamp, _results: &[PacketResult]) {}
    /// When the controller wants [`RateController::handle_timeout`] called, and why.
    fn poll_timeout(&self) -> Option<(Timestamp, ControllerTimer)> {
        None
    }
    /// The time asked for in [`RateController::poll_timeout`] has come (`now`): run the timer
    /// that was due (a feedback round, a no-feedback slow-down). Does nothing by default.
    fn handle_timeout(&mut self, _now: Timestamp) {}
    /// Something to tell the receivers, if it is due at `now` (its time is in
    /// [`RateController::poll_timeout`]).
    fn poll_announce(&mut self, _now: Timestamp) -> Option<Announce> {
        None
    }
    /// The application asks for another rate (a user, a test): a fixed-rate controller takes
    /// it; an adaptive one may treat it as its upper bound.
    fn set_rate(&mut self, rate: Bitrate);
}
