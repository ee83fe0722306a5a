//! A rising sending rate on its way to a target, in steps driven by the sender's timer.
//!
//! RFC 4654 raises the rate gradually in two places:
//! - **slow start (§3.6):** "the current sending rate is gradually adjusted to the target rate
//!   reported in the receiver reports over the course of an RTT" (the CLR's):
//!   [`Ramp::over`], in [`Ramp::STEPS`] equal steps;
//! - **a first CLR asking for much more (§3.3 case 1):** "X is gradually increased to X_r at an
//!   increase rate of no more than 8s/R_max bits/s every R_max seconds": [`Ramp::per_step`],
//!   one step of at most `s / R_max` every `R_max`.
//!
//! A decrease never ramps: the sender takes it at once.

use metronome_time::Timestamp;
use std::time::Duration;

/// The rate moving from `from` (at `start`) to `to` (at `start + over`), one step every
/// `step`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Ramp {
    from: f64,
    to: f64,
    start: Timestamp,
    over: Duration,
    step: Duration,
    /// When the next step is due.
    next: Timestamp,
}

impl Ramp {
    /// Slow start's steps in one RTT.
    pub(super) const STEPS: u32 = 8;

    /// From `from` to `to` over `over`, in [`Ramp::STEPS`] equal steps.
    pub(super) fn over(from: f64, to: f64, start: Timestamp, over: Duration) -> Ramp {
        let over = over.max(Duration::from_micros(Ramp::STEPS as u64));
        Ramp::new(from, to, start, over, over / Ramp::STEPS)
    }

    /// From `from` to `to` by at most `most` a step, one step every `every`.
    pub(super) fn per_step(
        from: f64,
        to: f64,
        start: Timestamp,
        most: f64,
        every: Duration,
    ) -> Ramp {
        let every = every.max(Duration::from_micros(1));
        let steps = ((to - from) / most.max(f64::MIN_POSITIVE))
            .ceil()
            .clamp(1.0, 1e6);
        Ramp::new(from, to, start, every.mul_f64(steps), every)
    }

    fn new(from: f64, to: f64, start: Timestamp, over: Duration, step: Duration) -> Ramp {
        Ramp {
            from,
            to,
            start,
            over,
            step,
            next: start + step,
        }
    }

    /// Where the ramp ends.
    pub(super) fn target(&self) -> f64 {
        self.to
    }

    /// When its next step is due.
    pub(super) fn next_step(&self) -> Timestamp {
        self.next
    }

    /// A lower end `to` (above the rate `x` at `now`): the rest of the way starts again from
    /// `x`, to end when the ramp would have, so the rate never falls on the way.
    pub(super) fn lower_target(&mut self, now: Timestamp, x: f64, to: f64) {
        let end = self.start + self.over;
        let left = end.saturating_since(now).max(self.step);
        *self = Ramp::new(x, to.min(self.to), now, left, self.step.min(left));
    }

    /// The rate after the steps due by `now`, and whether the ramp has ended. The rate is that
    /// of the last step begun: it never runs ahead of the timer.
    pub(super) fn at(&mut self, now: Timestamp) -> (f64, bool) {
        if self.next <= now {
            let behind = now.saturating_since(self.next).as_nanos();
            let steps = (behind / self.step.as_nanos().max(1) + 1).min(u32::MAX as u128) as u32;
            self.next += self.step * steps;
        }
        let stepped = self
            .next
            .saturating_since(self.start)
            .saturating_sub(self.step);
        let done = (stepped.as_secs_f64() / self.over.as_secs_f64()).clamp(0.0, 1.0);
        (self.from + (self.to - self.from) * done, done >= 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_an_rtt_in_eight_steps() {
        let ms = Timestamp::from_millis;
        let mut r = Ramp::over(1000.0, 2000.0, ms(0), Duration::from_millis(80));
        assert_eq!(r.next_step(), ms(10));
        assert_eq!(r.at(ms(5)), (1000.0, false));
        assert_eq!(r.at(ms(10)), (1125.0, false));
        assert_eq!(r.at(ms(45)), (1500.0, false));
        assert_eq!(r.at(ms(80)), (2000.0, true));
        assert_eq!(r.at(ms(500)), (2000.0, true));
    }

    #[test]
    fn per_step_never_more_than_allowed() {
        let ms = Timestamp::from_millis;
        // 2500 to go by 1000 a step every 100 ms: three steps of 833.3.
        let mut r = Ramp::per_step(1000.0, 3500.0, ms(0), 1000.0, Duration::from_millis(100));
        let mut last = 1000.0;
        for k in 1..=3 {
            let (x, done) = r.at(ms(100 * k));
            assert!(x - last <= 1000.0 + 1e-9 && x > last, "{x} after {last}");
            assert_eq!(done, k == 3);
            last = x;
        }
        assert!((last - 3500.0).abs() < 1e-9);
    }

    #[test]
    fn a_lower_target_never_lowers_the_rate_on_the_way() {
        let ms = Timestamp::from_millis;
        let mut r = Ramp::over(1000.0, 3000.0, ms(0), Duration::from_millis(80));
        let (x, _) = r.at(ms(40));
        assert_eq!(x, 2000.0);
        r.lower_target(ms(40), x, 2400.0);
        assert_eq!(r.target(), 2400.0);
        let (y, _) = r.at(ms(50));
        assert!(y > x && y < 2400.0, "{y}");
        assert_eq!(r.at(ms(80)), (2400.0, true));
    }
}
