//! When a driver's run ends: a stop flag (Ctrl-C, a test), a duration, or the driver's own reason.

use metronome_time::Timestamp;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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
    pub fn ended(&self, now: Timestamp) -> Option<&'static str> {
        if self.stop.load(Ordering::Relaxed) {
            return Some("stopped");
        }
        if self
            .duration
            .is_some_and(|d| now.saturating_since(self.start) >= d)
        {
            return Some("duration");
        }
        None
    }
    /// The end of the run's duration, if it has one.
    pub fn deadline(&self) -> Option<Timestamp> {
        self.duration.map(|d| self.start + d)
    }
}
