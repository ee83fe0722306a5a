//! RT throttling guard: a SCHED_FIFO pacer whose streams leave it almost no time to sleep would
//! run into the kernel's RT throttling (stopped ~50 ms each second: every stream misses). Every
//! 100 ms the guard looks at the pacer's CPU share; above 80% the thread would barely sleep
//! anyway, so it should busy-poll as an ordinary thread for the next 20 s before trying to sleep
//! again. Sans-IO: the driver reads the thread's CPU clock and passes it in.

use metronome_time::Timestamp;
use std::time::Duration;

const WINDOW: Duration = Duration::from_millis(100);
const SHARE: f64 = 0.8;
const HOLD: Duration = Duration::from_secs(20);

pub struct ThrottleGuard {
    next_check: Timestamp,
    cpu_at_check_s: f64,
    hold_busy_until: Timestamp,
    trips: u64,
}

impl ThrottleGuard {
    /// A guard starting at `now`, when the thread had used `cpu_s` seconds of CPU.
    pub fn new(now: Timestamp, cpu_s: f64) -> Self {
        ThrottleGuard {
            next_check: now + WINDOW,
            cpu_at_check_s: cpu_s,
            hold_busy_until: Timestamp::ZERO,
            trips: 0,
        }
    }

    /// Whether a window has passed and the guard wants the thread's CPU time.
    pub fn due(&self, now: Timestamp) -> bool {
        now >= self.next_check
    }

    /// Closes a window at `now` with the thread's CPU time `cpu_s`. Returns true when a thread
    /// that is sleeping between packets (`sleeping`) should switch to busy-polling.
    pub fn on_window(&mut self, now: Timestamp, cpu_s: f64, sleeping: bool) -> bool {
        let share = (cpu_s - self.cpu_at_check_s) / WINDOW.as_secs_f64();
        self.cpu_at_check_s = cpu_s;
        self.next_check = now + WINDOW;
        let trip = share > SHARE && sleeping;
        if trip {
            self.trips += 1;
            self.hold_busy_until = now + HOLD;
        }
        trip
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
    fn a_busy_sleeping_thread_trips_once_and_is_held_for_twenty_seconds() {
        let t = Timestamp::from_millis;
        let mut g = ThrottleGuard::new(t(0), 0.0);
        assert!(!g.due(t(99)));
        assert!(g.due(t(100)));
        // 50% of the window: no trip.
        assert!(!g.on_window(t(100), 0.05, true));
        // 90%: trip, and hold busy-polling for 20 s.
        assert!(g.on_window(t(200), 0.14, true));
        assert!(g.holds_busy(t(20_199)));
        assert!(!g.holds_busy(t(20_200)));
        // Already busy-polling: nothing to switch.
        assert!(!g.on_window(t(300), 0.24, false));
        assert_eq!(g.trips(), 1);
    }
}
