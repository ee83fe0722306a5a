//! RT throttling guard: a SCHED_FIFO pacer whose streams leave it almost no time to sleep would
//! run into the kernel's RT throttling (stopped ~50 ms each second once real-time threads use
//! 95% of it: every stream misses). Every 100 ms the guard looks at the pacer's CPU share and
//! answers in two steps:
//!
//! 1. above 80%, the thread first **sleeps more**: its spin margin is capped, and it stays a
//!    real-time thread. On a busy core a real-time thread wakes within microseconds (the core is
//!    not idle), and an ordinary process can never preempt it: measured with a CPU hog on the
//!    pacer's core, 100 streams went from p99 1.9 ms (busy-polling as an ordinary thread, which
//!    the hog preempted) to tens of µs.
//! 2. above 90% with the margin capped, the work itself fills the core: the thread busy-polls as
//!    an ordinary thread, at nice −20, which throttling does not stop.
//!
//! Either step holds for 20 s before the thread tries its usual way again. Sans-IO: the driver
//! reads the thread's CPU clock and passes it in.

use metronome_time::Timestamp;
use std::time::Duration;

const WINDOW: Duration = Duration::from_millis(100);
/// Above this share the thread caps its spin margin.
const SLEEP_MORE_SHARE: f64 = 0.8;
/// Above this share, with the margin capped, it busy-polls as an ordinary thread.
const BUSY_SHARE: f64 = 0.9;
const HOLD: Duration = Duration::from_secs(20);

/// What the guard tells the thread after a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardStep {
    /// Nothing to change.
    Keep,
    /// Cap the spin margin (stay a real-time thread, sleep more).
    SleepMore,
    /// Busy-poll as an ordinary thread.
    BusyPoll,
}

/// The state of the RT throttling guard of one pacing thread (see the module docs): when the
/// next 100 ms window closes, the thread's CPU time at the last check, and until when each of
/// the two steps holds.
pub struct ThrottleGuard {
    next_check: Timestamp,
    cpu_at_check_s: f64,
    sleep_more_until: Timestamp,
    hold_busy_until: Timestamp,
    trips: u64,
}

impl ThrottleGuard {
    /// A guard starting at `now`, when the thread had used `cpu_s` seconds of CPU.
    pub fn new(now: Timestamp, cpu_s: f64) -> Self {
        ThrottleGuard {
            next_check: now + WINDOW,
            cpu_at_check_s: cpu_s,
            sleep_more_until: Timestamp::ZERO,
            hold_busy_until: Timestamp::ZERO,
            trips: 0,
        }
    }

    /// Whether a window has passed and the guard wants the thread's CPU time.
    pub fn due(&self, now: Timestamp) -> bool {
        now >= self.next_check
    }

    /// Closes a window at `now` with the thread's CPU time `cpu_s`, for a thread that is
    /// sleeping between packets (`sleeping`) or busy-polling.
    pub fn on_window(&mut self, now: Timestamp, cpu_s: f64, sleeping: bool) -> GuardStep {
        let share = (cpu_s - self.cpu_at_check_s) / WINDOW.as_secs_f64();
        self.cpu_at_check_s = cpu_s;
        self.next_check = now + WINDOW;
        if !sleeping {
            return GuardStep::Keep;
        }
        if self.sleeping_more(now) {
            if share > BUSY_SHARE {
                self.trips += 1;
                self.hold_busy_until = now + HOLD;
                return GuardStep::BusyPoll;
            }
            return GuardStep::Keep;
        }
        if share > SLEEP_MORE_SHARE {
            self.sleep_more_until = now + HOLD;
            return GuardStep::SleepMore;
        }
        GuardStep::Keep
    }

    /// Whether the spin margin stays capped.
    pub fn sleeping_more(&self, now: Timestamp) -> bool {
        now < self.sleep_more_until
    }

    /// Whether the guard still holds busy-polling (a choice to sleep again is to be ignored).
    pub fn holds_busy(&self, now: Timestamp) -> bool {
        now < self.hold_busy_until
    }

    /// Times the guard switched to busy-polling.
    pub fn trips(&self) -> u64 {
        self.trips
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_real_time_thread_first_sleeps_more_then_busy_polls_and_is_held() {
        let t = Timestamp::from_millis;
        let mut g = ThrottleGuard::new(t(0), 0.0);
        assert!(!g.due(t(99)));
        assert!(g.due(t(100)));
        // 50% of the window: nothing.
        assert_eq!(g.on_window(t(100), 0.05, true), GuardStep::Keep);
        // 85%: sleep more, for 20 s.
        assert_eq!(g.on_window(t(200), 0.135, true), GuardStep::SleepMore);
        assert!(g.sleeping_more(t(20_199)) && !g.sleeping_more(t(20_200)));
        // 85% again while sleeping more: keep (under the 95% the kernel allows).
        assert_eq!(g.on_window(t(300), 0.22, true), GuardStep::Keep);
        // 95% with the margin capped: busy-poll, held for 20 s.
        assert_eq!(g.on_window(t(400), 0.315, true), GuardStep::BusyPoll);
        assert!(g.holds_busy(t(20_399)));
        assert!(!g.holds_busy(t(20_400)));
        // Already busy-polling: nothing to switch.
        assert_eq!(g.on_window(t(500), 0.415, false), GuardStep::Keep);
        assert_eq!(g.trips(), 1);
    }
}
