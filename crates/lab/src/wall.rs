//! The lab's only clock readings: when a run started, and how long a point took. Neither
//! enters a simulation; they describe the run (and how fast the simulator was).

use std::time::Instant;

/// Nanoseconds since the Unix epoch, now.
#[allow(clippy::disallowed_methods)] // describes the run; never an input to a simulation
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Wall-clock time since [`Stopwatch::start`].
pub struct Stopwatch(Instant);

impl Stopwatch {
    #[allow(clippy::disallowed_methods)] // measures the simulator's speed, not an input to it
    pub fn start() -> Self {
        Stopwatch(Instant::now())
    }

    pub fn seconds(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}
