//! The receiving end of a rate controller: what a receiver runs beside its RTCP reports when
//! the sender's controller needs more than receiver reports (TFRC, TFMCC, GCC). The receiver
//! session feeds it every data packet of the stream and every announcement of the sender, and
//! sends what [`Agent::poll_report`] gives.

use crate::gcc::feedback::{ArrivalRecorder, ArrivalReport};
use crate::tfmcc::{self, TfmccReceiver, TfmccReceiverConfig};
use crate::tfrc::receiver::ReceiverReport;
use crate::tfrc::TfrcReceiver;
use crate::Announce;
use metronome_time::Timestamp;
use std::time::Duration;

/// Which receiver to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AgentKind {
    /// Receiver reports only (fixed rate, ASMP).
    #[default]
    None,
    /// TFRC's receiver (RFC 5348 §6): loss event rate and receive rate, once per RTT.
    Tfrc,
    /// TFMCC's receiver (RFC 4654 §3): its own calculated rate, sent under feedback suppression.
    Tfmcc,
    /// Every packet's arrival (RFC 8888's feedback), for GCC.
    Gcc,
}

/// How often GCC's receiving end reports.
pub const GCC_FEEDBACK_INTERVAL: Duration = Duration::from_millis(50);

/// What a receiver reports.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentReport {
    /// A TFRC receiver's feedback (RFC 5348 §6.2).
    Tfrc(ReceiverReport),
    /// A TFMCC receiver's feedback (RFC 4654 §2.2.2).
    Tfmcc(tfmcc::ReceiverFeedback),
    /// The arrival times of a run of packets, for GCC (RFC 8888's content).
    Arrivals(ArrivalReport),
}

/// A running receiving end of one of the controllers that need one (see [`AgentKind`]).
#[derive(Clone, Debug)]
pub enum Agent {
    /// TFRC's receiver.
    Tfrc(Box<TfrcReceiver>),
    /// TFMCC's receiver.
    Tfmcc(Box<TfmccReceiver>),
    /// GCC's receiving end: the arrival recorder.
    Arrivals(Box<ArrivalRecorder>),
}

impl Agent {
    /// The receiver of `kind` (`None` for receiver reports only); `id` is the receiver's SSRC.
    pub fn new(kind: AgentKind, id: u32, seed: u64) -> Option<Agent> {
        match kind {
            AgentKind::None => None,
            // RFC 5348 §6: until the sender tells its RTT, a receiver assumes 500 ms.
            AgentKind::Tfrc => Some(Agent::Tfrc(Box::new(TfrcReceiver::new(
                Duration::from_millis(500),
            )))),
            AgentKind::Tfmcc => Some(Agent::Tfmcc(Box::new(TfmccReceiver::new(
                TfmccReceiverConfig::new(id, seed),
            )))),
            AgentKind::Gcc => Some(Agent::Arrivals(Box::new(ArrivalRecorder::new(
                GCC_FEEDBACK_INTERVAL,
            )))),
        }
    }

    /// A data packet: `seq` extended, `sent` its timestamp on the sender's clock, `size`
    /// bytes, arrived at `now`.
    pub fn on_packet(&mut self, now: Timestamp, seq: u64, sent: Timestamp, size: usize) {
        match self {
            Agent::Tfrc(r) => r.on_packet(now, seq, sent, size),
            Agent::Tfmcc(r) => r.on_packet(now, seq, sent, size),
            Agent::Arrivals(r) => r.on_packet(now, seq),
        }
    }

    /// The sender's announcement, sent at `sent` on its clock, arrived at `now`.
    pub fn on_announce(&mut self, now: Timestamp, a: &Announce, sent: Timestamp) {
        match (self, a) {
            (Agent::Tfrc(r), Announce::TfrcRtt(rtt)) => r.set_rtt(*rtt),
            (Agent::Tfmcc(r), Announce::Tfmcc(info)) => r.on_sender_info(now, info, sent),
            _ => {}
        }
    }

    /// When the receiver wants [`Agent::poll_report`] called next (a report or a feedback
    /// timer), if it waits for anything.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        match self {
            Agent::Tfrc(r) => r.poll_timeout(),
            Agent::Tfmcc(r) => r.poll_timeout(),
            Agent::Arrivals(r) => r.poll_timeout(),
        }
    }

    /// The receiver wishes to leave its group: TFMCC's next report says so (RFC 4654 §4.4)
    /// and is due at once, the CLR's reports until its round ends (§4.2,
    /// [`Agent::leave_pending`]); the other controllers' receivers have nothing to say.
    pub fn leave(&mut self, now: Timestamp) {
        if let Agent::Tfmcc(r) = self {
            r.leave(now);
        }
    }

    /// Whether the receiver, having wished to leave, must stay in the group a little longer:
    /// TFMCC's CLR until its feedback round ends (RFC 4654 §4.2); then [`Agent::has_left`].
    pub fn leave_pending(&self) -> bool {
        matches!(self, Agent::Tfmcc(r) if r.leave_pending())
    }

    /// Whether this end has said its last: TFMCC's after its leaving report, sent because the
    /// application left or by RFC 4654 §4.4's rule (its rate below the lowest it may report
    /// for 120 s). The application should then leave the group.
    pub fn has_left(&self) -> bool {
        matches!(self, Agent::Tfmcc(r) if r.has_left())
    }

    /// The report due at `now`, if one is; `max_packets` bounds a per-packet report (GCC's)
    /// to what its RTCP packet has room for.
    pub fn poll_report(&mut self, now: Timestamp, max_packets: usize) -> Option<AgentReport> {
        match self {
            Agent::Tfrc(r) => r.poll_report(now).map(AgentReport::Tfrc),
            Agent::Tfmcc(r) => r.poll_report(now).map(AgentReport::Tfmcc),
            Agent::Arrivals(r) => r.poll_report(now, max_packets).map(AgentReport::Arrivals),
        }
    }
}
