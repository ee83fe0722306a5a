//! A TFMCC receiver's feedback timer (RFC 4654 §4.5): when, in a feedback round, a receiver
//! that is not the CLR answers, unless others' answers suppress it first.
//!
//! - **The draw:** `t = max(T (1 + ln x / ln N), 0)`, x uniform in (0, 1], N the bound on the
//!   group's size, T the round's feedback delay. With a bias `γ > 0` (Metronome's option,
//!   after the SIGCOMM 2001 paper's idea of biasing feedback to low rates; RFC 4654 has
//!   none), `t = max(T (γ r + (1 − γ)(1 + ln x / ln N)), 0)`, `r = X_r / X` clamped to
//!   [0, 1]: receivers below the sending rate answer earlier. Few receivers draw a short
//!   timer: `P(t ≤ τ T) = N^(τ − 1)`.
//! - **`R_max` changing during the round** scales the timer: `t = t R_max / R_max'`, `t`
//!   counted from when it was set.
//! - **Idle:** a timer due with no data packet for longer than `R_max` waits
//!   `now − tr_i − R_max` more (the sender may have crashed: no implosion of reports).
//!
//! Whether others' answers suppress it is the receiver's to judge (it knows its rate and
//! RTT); it then cancels the timer.

use super::SenderInfo;
use metronome_time::Timestamp;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// One receiver's feedback timer: its randomness, and the round's timer while one runs.
#[derive(Clone, Debug)]
pub(super) struct FeedbackTimer {
    rng: ChaCha8Rng,
    /// N, the bound on the group's size the timers are spread for.
    group_bound: u32,
    /// γ, the bias towards low rates (0: RFC 4654's timer).
    bias: f64,
    /// When the report is due.
    due: Option<Timestamp>,
    /// When the timer was set, and the `R_max` it was set with.
    base: Option<(Timestamp, Duration)>,
}

impl FeedbackTimer {
    /// No timer running; draws from `seed`.
    pub(super) fn new(seed: u64, group_bound: u32, bias: f64) -> Self {
        FeedbackTimer {
            rng: ChaCha8Rng::seed_from_u64(seed),
            group_bound,
            bias,
            due: None,
            base: None,
        }
    }

    /// When the report is due, while the timer runs.
    pub(super) fn due(&self) -> Option<Timestamp> {
        self.due
    }

    /// Whether a timer runs.
    pub(super) fn is_running(&self) -> bool {
        self.due.is_some()
    }

    /// Stops the timer (suppressed, a new round, or the receiver became the CLR).
    pub(super) fn cancel(&mut self) {
        self.due = None;
        self.base = None;
    }

    /// A report is due at `now`, outside the rounds (a leaving report).
    pub(super) fn fire_at(&mut self, now: Timestamp) {
        self.due = Some(now);
    }

    /// A new round (`info`) began at `now`: a fresh draw. `rate` is the receiver's `X_r`
    /// (used only with a bias).
    pub(super) fn start(&mut self, now: Timestamp, info: &SenderInfo, rate: f64) {
        self.due = Some(now + self.draw(info, rate));
        self.base = Some((now, info.r_max));
    }

    /// `t` for a round of feedback delay `T` (`info.feedback_delay`).
    fn draw(&mut self, info: &SenderInfo, rate: f64) -> Duration {
        let u: f64 = 1.0 - self.rng.random::<f64>(); // (0, 1]
        let n = (self.group_bound.max(2) as f64).ln();
        let exp = 1.0 + u.ln() / n;
        let g = self.bias.clamp(0.0, 1.0);
        let r = if info.x_send > 0.0 && info.x_send.is_finite() {
            (rate / info.x_send).clamp(0.0, 1.0)
        } else {
            1.0
        };
        let f = (g * r + (1.0 - g) * exp).max(0.0);
        info.feedback_delay.mul_f64(f)
    }

    /// `R_max` is now `r_max`: `t = t R_max / R_max'`, `t` counted from when it was set.
    pub(super) fn rescale(&mut self, r_max: Duration) {
        let (Some(due), Some((from, was))) = (self.due, self.base) else {
            return;
        };
        if r_max == was || was.is_zero() {
            return;
        }
        let t = due.saturating_since(from);
        self.due = Some(from + t.mul_f64(r_max.as_secs_f64() / was.as_secs_f64()));
        self.base = Some((from, r_max));
    }

    /// A timer due by `now` with no data packet since `last_arrival` for more than `r_max`
    /// waits `now − last_arrival − r_max` longer; true if it was put off.
    pub(super) fn put_off_while_idle(
        &mut self,
        now: Timestamp,
        last_arrival: Timestamp,
        r_max: Duration,
    ) -> bool {
        let Some(due) = self.due else {
            return false;
        };
        let gap = now.saturating_since(last_arrival).saturating_sub(r_max);
        if gap.is_zero() {
            return false;
        }
        self.due = Some(due + gap);
        true
    }
}
