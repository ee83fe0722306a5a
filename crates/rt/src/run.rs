//! When a driver's run ends: a stop flag (Ctrl-C, a test), a duration, or the driver's own reason.

use metronome_time::Timestamp;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Why a run ended, as machine output spells it (`ended_by`) and a person reads it
/// ([`std::fmt::Display`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EndedBy {
    /// Stopped: Ctrl-C, SIGTERM, or the program that runs it.
    Stopped,
    /// Its `--duration` passed.
    Duration,
    /// It had the packets it was to take (`--packets`).
    Packets,
    /// It had the frames it was to send or take (`--frames`).
    Frames,
    /// Its input ended (a file not looped, a source that closed).
    EndOfInput,
    /// The sender said BYE (RFC 3550 §6.6).
    SenderBye,
    /// It left the group: TFMCC's rule that a receiver whose rate stays below the lowest it
    /// may report for 120 s leaves (RFC 4654 §4.4).
    LeftGroup,
    /// An error ended it (said beside).
    Error,
}

impl std::fmt::Display for EndedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EndedBy::Stopped => "stopped",
            EndedBy::Duration => "duration",
            EndedBy::Packets => "packet count",
            EndedBy::Frames => "frames",
            EndedBy::EndOfInput => "end of input",
            EndedBy::SenderBye => "the sender said BYE (RFC 3550 §6.6): the stream is over",
            EndedBy::LeftGroup => {
                "left the group (TFMCC, RFC 4654 §4.4: its rate stayed below the lowest it may report for 120 s)"
            }
            EndedBy::Error => "error",
        })
    }
}

/// When a run ends: as soon as `stop` is set, or once `duration` has passed since `start` on
/// the run's clock. Checking it reads one atomic and allocates nothing.
pub struct RunLimit<'a> {
    start: Timestamp,
    duration: Option<Duration>,
    stop: &'a AtomicBool,
}

impl<'a> RunLimit<'a> {
    /// A limit for a run that began at `start`, lasting `duration` (`None`: until stopped),
    /// and stopped early when `stop` is set (by a Ctrl-C handler, say).
    pub fn new(start: Timestamp, duration: Option<Duration>, stop: &'a AtomicBool) -> Self {
        RunLimit {
            start,
            duration,
            stop,
        }
    }
    /// Why the run is over at `now`, if it is.
    pub fn ended(&self, now: Timestamp) -> Option<EndedBy> {
        if self.stop.load(Ordering::Relaxed) {
            return Some(EndedBy::Stopped);
        }
        if self
            .duration
            .is_some_and(|d| now.saturating_since(self.start) >= d)
        {
            return Some(EndedBy::Duration);
        }
        None
    }
    /// The end of the run's duration, if it has one.
    pub fn deadline(&self) -> Option<Timestamp> {
        self.duration.map(|d| self.start + d)
    }
}
