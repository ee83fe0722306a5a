//! The pacing model of one stream, sans-IO: the driver asks for each packet's target time, waits
//! for it by whatever means it has, and reports when the packet actually left.

use metronome_time::{Distribution, Summary, Timestamp};
use serde::Serialize;
use std::time::Duration;

/// What to do after the sender fell behind by more than the stall threshold (a preempted thread,
/// a host that stole the CPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum StallPolicy {
    /// Shift the rest of the schedule by the stall, so packets keep their spacing: the stream
    /// is late by the stall but never bursts. The default, as a receiver's buffer prefers.
    Rebase,
    /// Send the late packets back to back until the schedule is met again (a burst).
    CatchUp,
}

#[derive(Clone, Copy, Debug)]
pub struct PacingConfig {
    /// Lateness beyond which a packet counts as a stall.
    pub stall_threshold: Duration,
    pub policy: StallPolicy,
}

impl Default for PacingConfig {
    fn default() -> Self {
        PacingConfig {
            stall_threshold: Duration::from_millis(2),
            policy: StallPolicy::Rebase,
        }
    }
}

/// Lateness statistics of a paced stream.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct PacingStats {
    pub packets: u64,
    pub stalls: u64,
    /// How far the schedule has been shifted by stalls in total (Rebase policy).
    pub rebased_ms: f64,
    /// Actual send time minus target time.
    pub lateness: Summary,
}

pub struct PacingModel {
    cfg: PacingConfig,
    offset: Duration,
    stalls: u64,
    lateness: Distribution,
}

impl PacingModel {
    pub fn new(cfg: PacingConfig) -> Self {
        PacingModel {
            cfg,
            offset: Duration::ZERO,
            stalls: 0,
            lateness: Distribution::new(),
        }
    }

    /// When a packet with release time `release` should leave.
    pub fn target(&self, release: Timestamp) -> Timestamp {
        release + self.offset
    }

    /// The packet aimed at `target` left at `actual`. Returns its lateness.
    pub fn on_sent(&mut self, target: Timestamp, actual: Timestamp) -> Duration {
        let late = actual.saturating_since(target);
        self.lateness
            .record(u64::try_from(late.as_nanos()).unwrap_or(u64::MAX));
        if late > self.cfg.stall_threshold {
            self.stalls += 1;
            if self.cfg.policy == StallPolicy::Rebase {
                self.offset += late;
            }
        }
        late
    }

    /// How far stalls have shifted the schedule: packets now leave this long after the release
    /// time their RTP timestamp carries.
    pub fn offset(&self) -> Duration {
        self.offset
    }

    pub fn lateness(&self) -> &Distribution {
        &self.lateness
    }

    pub fn stats(&self) -> PacingStats {
        PacingStats {
            packets: self.lateness.len(),
            stalls: self.stalls,
            rebased_ms: self.offset.as_secs_f64() * 1000.0,
            lateness: self.lateness.summary(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Timestamp {
        Timestamp::from_millis(v)
    }

    #[test]
    fn rebase_shifts_the_rest_of_the_schedule_after_a_stall() {
        let mut p = PacingModel::new(PacingConfig::default());
        assert_eq!(p.target(ms(10)), ms(10));
        assert_eq!(
            p.on_sent(ms(10), ms(10) + Duration::from_micros(5)),
            Duration::from_micros(5)
        );
        // A 30 ms stall: the next packets keep their 2 ms spacing after it, no burst.
        p.on_sent(ms(12), ms(42));
        assert_eq!(p.target(ms(14)), ms(44));
        assert_eq!(p.target(ms(16)), ms(46));
        let s = p.stats();
        assert_eq!((s.packets, s.stalls), (2, 1));
        assert!((s.rebased_ms - 30.0).abs() < 1e-9);
    }

    #[test]
    fn catch_up_keeps_the_schedule() {
        let mut p = PacingModel::new(PacingConfig {
            policy: StallPolicy::CatchUp,
            ..PacingConfig::default()
        });
        p.on_sent(ms(12), ms(42));
        assert_eq!(p.target(ms(14)), ms(14));
        assert_eq!(p.stats().stalls, 1);
    }
}
