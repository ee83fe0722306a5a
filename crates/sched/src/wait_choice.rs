//! Choosing how the pacer waits, by the load: sleep-then-spin costs little CPU but inherits the
//! host's wake-up latency; busy-polling keeps a core but is immune to it. DESIGN.md measured both
//! on these machines: when the host is busy, sleeping threads wake milliseconds late, while a
//! spinning one holds p99 in microseconds. The selector watches lateness and switches.

use metronome_time::Timestamp;
use serde::Serialize;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum WaitChoice {
    SleepSpin,
    BusyPoll,
}

#[derive(Clone, Copy, Debug)]
pub struct WaitSelectorConfig {
    /// A packet later than this counts as late.
    pub late_threshold: Duration,
    /// More than this share of late packets in a window switches to busy-polling.
    pub max_late_share: f64,
    /// How long a judging window lasts.
    pub window: Duration,
    /// How long to busy-poll before trying to sleep again.
    pub retry_after: Duration,
}

impl Default for WaitSelectorConfig {
    fn default() -> Self {
        WaitSelectorConfig {
            late_threshold: Duration::from_micros(20),
            max_late_share: 0.01,
            window: Duration::from_secs(1),
            retry_after: Duration::from_secs(20),
        }
    }
}

/// Time spent in each mode, and how often it switched.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct WaitSelectorStats {
    pub switches_to_busy_poll: u64,
    pub switches_to_sleep: u64,
    pub busy_poll_s: f64,
    pub sleep_spin_s: f64,
}

pub struct WaitSelector {
    cfg: WaitSelectorConfig,
    mode: WaitChoice,
    since: Option<Timestamp>,
    window_start: Option<Timestamp>,
    packets: u64,
    late: u64,
    stats: WaitSelectorStats,
}

impl WaitSelector {
    pub fn new(cfg: WaitSelectorConfig) -> Self {
        WaitSelector {
            cfg,
            mode: WaitChoice::SleepSpin,
            since: None,
            window_start: None,
            packets: 0,
            late: 0,
            stats: WaitSelectorStats::default(),
        }
    }

    pub fn mode(&self) -> WaitChoice {
        self.mode
    }

    /// A packet left at `now`, `lateness` after its target. Returns the new mode when it changes.
    pub fn on_sent(&mut self, now: Timestamp, lateness: Duration) -> Option<WaitChoice> {
        let since = *self.since.get_or_insert(now);
        let start = *self.window_start.get_or_insert(now);
        self.packets += 1;
        self.late += (lateness > self.cfg.late_threshold) as u64;
        let next = match self.mode {
            WaitChoice::SleepSpin if now.saturating_since(start) >= self.cfg.window => {
                let share = self.late as f64 / self.packets as f64;
                self.packets = 0;
                self.late = 0;
                self.window_start = Some(now);
                (share > self.cfg.max_late_share).then_some(WaitChoice::BusyPoll)
            }
            WaitChoice::BusyPoll if now.saturating_since(since) >= self.cfg.retry_after => {
                Some(WaitChoice::SleepSpin)
            }
            _ => None,
        }?;
        let spent = now.saturating_since(since).as_secs_f64();
        match self.mode {
            WaitChoice::SleepSpin => {
                self.stats.sleep_spin_s += spent;
                self.stats.switches_to_busy_poll += 1;
            }
            WaitChoice::BusyPoll => {
                self.stats.busy_poll_s += spent;
                self.stats.switches_to_sleep += 1;
            }
        }
        self.mode = next;
        self.since = Some(now);
        self.window_start = Some(now);
        self.packets = 0;
        self.late = 0;
        Some(next)
    }

    /// Statistics up to `now`.
    pub fn stats(&self, now: Timestamp) -> WaitSelectorStats {
        let mut s = self.stats;
        let current = self
            .since
            .map_or(0.0, |t| now.saturating_since(t).as_secs_f64());
        match self.mode {
            WaitChoice::SleepSpin => s.sleep_spin_s += current,
            WaitChoice::BusyPoll => s.busy_poll_s += current,
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(s: &mut WaitSelector, from_ms: u64, to_ms: u64, late_every: u64) -> Vec<WaitChoice> {
        let mut changes = vec![];
        for ms in from_ms..to_ms {
            let late = if late_every > 0 && ms % late_every == 0 {
                100
            } else {
                1
            };
            if let Some(c) = s.on_sent(Timestamp::from_millis(ms), Duration::from_micros(late)) {
                changes.push(c);
            }
        }
        changes
    }

    #[test]
    fn switches_to_busy_poll_when_more_than_one_percent_is_late_and_tries_sleep_again() {
        let mut s = WaitSelector::new(WaitSelectorConfig::default());
        // A packet every ms; 1 in 200 late (0.5%): stays asleep.
        assert!(feed(&mut s, 0, 3000, 200).is_empty());
        // 1 in 50 late (2%): switches at the end of the next full window.
        assert_eq!(feed(&mut s, 3000, 5000, 50), vec![WaitChoice::BusyPoll]);
        assert_eq!(s.mode(), WaitChoice::BusyPoll);
        // Busy-polls for 20 s whatever happens, then tries to sleep again.
        let changes = feed(&mut s, 5000, 26_000, 0);
        assert_eq!(changes, vec![WaitChoice::SleepSpin]);
        let st = s.stats(Timestamp::from_millis(26_000));
        assert_eq!((st.switches_to_busy_poll, st.switches_to_sleep), (1, 1));
        assert!((st.busy_poll_s - 20.0).abs() < 0.01, "{st:?}");
        assert!(
            (st.sleep_spin_s + st.busy_poll_s - 26.0).abs() < 0.01,
            "{st:?}"
        );
    }
}
