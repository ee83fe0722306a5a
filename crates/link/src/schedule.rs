//! Links that change over time: a schedule of configurations, as steps or as a repeating
//! pattern (a square wave is two steps repeated).
//!
//! A [`Link`](crate::Link) built with a schedule applies it by itself: every call that
//! takes `now` first puts in force the configuration of that instant, so a driver (the
//! simulator, the emulator) need not know that the link changes. What a change means:
//!
//! - **rate**: exact. A packet's serialization integrates the rate over time, through every
//!   change ahead (the schedule is known in advance), so a packet waiting when the rate drops
//!   leaves at the new rate, and a saturated link carries exactly the integral of the rate.
//!   A rate of 0 in a step is an outage: nothing leaves until the rate returns.
//! - **everything else** (delay, jitter, loss, queue limits, duplication): applies to packets
//!   sent from the change on; packets already accepted keep what they were given.
//!
//! A token bucket (`burst_bytes`) whose rate changes is refused: tbf's bucket under a
//! changing rate is not defined the same way by every implementation.

use crate::config::{ConfigError, LinkConfig};
use metronome_time::Timestamp;
use std::time::Duration;

/// When each configuration is in force.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSchedule {
    /// `(offset, configuration)` from the start of the run (or of each period), the first at
    /// offset zero, offsets increasing.
    steps: Vec<(Duration, LinkConfig)>,
    /// The steps repeat with this period (`None`: the last step lasts forever).
    period: Option<Duration>,
}

/// A schedule that makes no sense.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    /// No step was given.
    #[error("a link schedule needs at least one step, the first at 0 s")]
    Empty,
    /// The first step's offset (carried) is not zero, leaving the start unconfigured.
    #[error("the first step of a link schedule must be at 0 s (it is at {0:?})")]
    FirstNotAtZero(Duration),
    /// A step's offset (first) is not after the previous one's (second); equal offsets
    /// count as out of order.
    #[error("link schedule steps must be in increasing time order ({0:?} comes after {1:?})")]
    OutOfOrder(Duration, Duration),
    /// A repeating schedule's period does not exceed its last step's offset, so that step
    /// would never be in force.
    #[error("the period ({period:?}) must be longer than the last step's offset ({last:?})")]
    PeriodTooShort {
        /// The period given.
        period: Duration,
        /// Offset of the last step.
        last: Duration,
    },
    /// A step's configuration fails [`LinkConfig::validate`] (a rate of 0 is allowed: it
    /// is an outage).
    #[error("step at {at:?}: {error}")]
    Step {
        /// Offset of the bad step.
        at: Duration,
        /// What is wrong with its configuration.
        error: ConfigError,
    },
    /// Some step has a token bucket (`burst_bytes`) and the steps' rates differ.
    #[error("a token bucket (burst) cannot change its rate over time; use a plain rate, or keep tbf's rate fixed")]
    BucketRateChanges,
    /// A step has a delivery trace; a trace link cannot be scheduled.
    #[error("a delivery trace is a rate of its own; it cannot change in a schedule")]
    TraceInSchedule,
}

impl LinkSchedule {
    /// Steps: each configuration from its offset until the next one; the last forever.
    pub fn steps(steps: Vec<(Duration, LinkConfig)>) -> Result<Self, ScheduleError> {
        Self::new(steps, None)
    }

    /// A square wave: `high` for `duty · period`, then `low`, repeating.
    pub fn square(
        high: LinkConfig,
        low: LinkConfig,
        period: Duration,
        duty: f64,
    ) -> Result<Self, ScheduleError> {
        let on = Duration::from_nanos((period.as_nanos() as f64 * duty.clamp(0.0, 1.0)) as u64);
        Self::new(vec![(Duration::ZERO, high), (on, low)], Some(period))
    }

    /// Steps repeating with `period` (`None`: not repeating).
    pub fn new(
        steps: Vec<(Duration, LinkConfig)>,
        period: Option<Duration>,
    ) -> Result<Self, ScheduleError> {
        let first = steps.first().ok_or(ScheduleError::Empty)?;
        if !first.0.is_zero() {
            return Err(ScheduleError::FirstNotAtZero(first.0));
        }
        for w in steps.windows(2) {
            if w[1].0 <= w[0].0 {
                return Err(ScheduleError::OutOfOrder(w[1].0, w[0].0));
            }
        }
        let last = steps.last().map_or(Duration::ZERO, |s| s.0);
        if let Some(p) = period {
            if p <= last {
                return Err(ScheduleError::PeriodTooShort { period: p, last });
            }
        }
        for (at, cfg) in &steps {
            // An outage (rate 0) is a step's right; everything else must make sense.
            let check = LinkConfig {
                rate_bps: cfg.rate_bps.filter(|r| *r > 0),
                ..cfg.clone()
            };
            check
                .validate()
                .map_err(|error| ScheduleError::Step { at: *at, error })?;
            if cfg.delivery.is_some() {
                return Err(ScheduleError::TraceInSchedule);
            }
        }
        let rates_change = steps.iter().any(|s| s.1.rate_bps != first.1.rate_bps);
        if rates_change && steps.iter().any(|s| s.1.burst_bytes.is_some()) {
            return Err(ScheduleError::BucketRateChanges);
        }
        Ok(LinkSchedule { steps, period })
    }

    /// The configuration in force at `t`, and when the next change comes (`None`: never).
    pub fn at(&self, t: Timestamp) -> (&LinkConfig, Option<Timestamp>) {
        let ns = t.as_nanos();
        let (base, phase) = match self.period {
            Some(p) => {
                let p = p.as_nanos().max(1) as u64;
                (ns - ns % p, ns % p)
            }
            None => (0, ns),
        };
        let i = self
            .steps
            .iter()
            .rposition(|(at, _)| at.as_nanos() as u64 <= phase)
            .unwrap_or(0);
        let next = match (self.steps.get(i + 1), self.period) {
            (Some((at, _)), _) => Some(base + at.as_nanos() as u64),
            (None, Some(p)) => Some(base + p.as_nanos() as u64),
            (None, None) => None,
        };
        (&self.steps[i].1, next.map(Timestamp::from_nanos))
    }

    /// Whether the rate ever differs from the first step's.
    pub fn rate_changes(&self) -> bool {
        self.steps
            .iter()
            .any(|s| s.1.rate_bps != self.steps[0].1.rate_bps)
    }

    /// When `size` bytes whose serialization starts at `start` have left: the rate
    /// integrated over time from `start` (an infinite rate sends the rest at once; a zero rate
    /// sends nothing). `Timestamp::MAX` if the schedule never sends them.
    pub fn finish(&self, start: Timestamp, size: usize) -> Timestamp {
        // Work in bit·10⁹: r bit/s for d ns carries r·d of them, exactly.
        let mut need = size as u128 * 8 * 1_000_000_000;
        let mut t = start;
        // Bounded: a schedule with no capacity at all would loop through its periods forever.
        for _ in 0..1_000_000 {
            let (cfg, next) = self.at(t);
            let Some(rate) = cfg.rate_bps else {
                return t;
            };
            let span = next.map(|n| n.saturating_since(t).as_nanos());
            let cap = span.map(|d| rate as u128 * d);
            match cap {
                Some(c) if c < need => {
                    need -= c;
                    t = next.unwrap_or(Timestamp::MAX);
                }
                _ if rate == 0 => return Timestamp::MAX,
                _ => {
                    let ns = need.div_ceil(rate as u128);
                    return t + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX));
                }
            }
        }
        Timestamp::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(bps: u64) -> LinkConfig {
        LinkConfig {
            rate_bps: Some(bps),
            ..LinkConfig::default()
        }
    }

    #[test]
    fn the_configuration_in_force_and_the_next_change() {
        let s =
            LinkSchedule::square(rate(10_000_000), rate(0), Duration::from_secs(1), 0.25).unwrap();
        let ms = Timestamp::from_millis;
        assert_eq!(s.at(ms(0)).0.rate_bps, Some(10_000_000));
        assert_eq!(s.at(ms(0)).1, Some(ms(250)));
        assert_eq!(s.at(ms(250)).0.rate_bps, Some(0));
        assert_eq!(s.at(ms(999)).1, Some(ms(1000)));
        assert_eq!(s.at(ms(1100)).0.rate_bps, Some(10_000_000));
        // 1250 bytes at 10 Mbit/s take 1 ms; started at 249.5 ms, half goes before the
        // outage and the rest from 1 s on.
        let t = s.finish(Timestamp::from_micros(249_500), 1250);
        assert_eq!(t, Timestamp::from_micros(1_000_500));
    }

    #[test]
    fn schedules_that_make_no_sense_are_refused() {
        assert_eq!(LinkSchedule::steps(vec![]), Err(ScheduleError::Empty));
        let late = LinkSchedule::steps(vec![(Duration::from_secs(1), rate(1))]);
        assert!(matches!(late, Err(ScheduleError::FirstNotAtZero(_))));
        let bucket = LinkConfig {
            burst_bytes: Some(4096),
            ..rate(1_000_000)
        };
        let changes = vec![(Duration::ZERO, bucket), (Duration::from_secs(1), rate(2))];
        assert_eq!(
            LinkSchedule::steps(changes),
            Err(ScheduleError::BucketRateChanges)
        );
        let short = LinkSchedule::new(
            vec![(Duration::ZERO, rate(1)), (Duration::from_secs(2), rate(2))],
            Some(Duration::from_secs(1)),
        );
        assert!(matches!(short, Err(ScheduleError::PeriodTooShort { .. })));
    }
}
