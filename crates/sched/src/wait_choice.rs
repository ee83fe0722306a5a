//! Choosing how the pacer waits, by the load: sleep-then-spin costs little CPU but inherits the
//! host's wake-up latency; busy-polling keeps a core but is immune to it. DESIGN.md measured both
//! on these machines: when the host is busy, sleeping threads wake milliseconds late, while a
//! spinning one holds p99 in microseconds. The selector watches lateness and switches.

use metronome_time::Micros;
use metronome_time::Timestamp;
use serde::Serialize;
use std::time::Duration;

/// How a real-time pacer waits between packets, as its user chooses (`--wait`, the config
/// file's `wait`; spelled in JSON as there).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitPolicy {
    /// Absolute sleep, then spin the last stretch (little CPU; inherits wake-up latency).
    SleepSpin,
    /// Spin the whole way, as an ordinary thread (a core's worth of CPU; no wake-ups at all).
    BusyPoll,
    /// Sleep-then-spin while it keeps time, busy-poll while it does not (a [`WaitSelector`]).
    #[default]
    Auto,
}

impl WaitPolicy {
    /// The policies as they are written, for `--help` and errors.
    pub const CHOICES: [&'static str; 3] = ["auto", "sleep-spin", "busy-poll"];

    /// As on the command line (`--wait`), in the config file and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            WaitPolicy::SleepSpin => "sleep-spin",
            WaitPolicy::BusyPoll => "busy-poll",
            WaitPolicy::Auto => "auto",
        }
    }
}

impl std::str::FromStr for WaitPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(WaitPolicy::Auto),
            "sleep-spin" => Ok(WaitPolicy::SleepSpin),
            "busy-poll" => Ok(WaitPolicy::BusyPoll),
            _ => Err(format!(
                "unknown wait policy '{}': use auto, sleep-spin or busy-poll",
                s.escape_debug()
            )),
        }
    }
}

/// How the pacer waits for a packet's due time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum WaitChoice {
    /// Sleep until shortly before the due time, then spin the rest: little CPU, but the
    /// wake-up latency of the host. The mode a [`WaitSelector`] starts in.
    SleepSpin,
    /// Spin on the clock the whole time: a core kept busy, but no wake-up latency.
    BusyPoll,
}

/// Thresholds and timings of a [`WaitSelector`]. The default: late beyond 20 µs, switch above
/// 1% late in a 1 s window, a 250 ms busy-poll trial, retry sleeping after 20 s.
#[derive(Clone, Copy, Debug)]
pub struct WaitSelectorConfig {
    /// A packet later than this counts as late.
    pub late_threshold: Duration,
    /// More than this share of late packets in a window (a fraction, 0.01 = 1%) switches to
    /// busy-polling.
    pub max_late_share: f64,
    /// How long a judging window lasts.
    pub window: Duration,
    /// How long busy-polling is tried before it is judged against the sleeping it replaced:
    /// short, because a trial that does worse (an ordinary thread preempted by a process on
    /// its core) costs late packets while it lasts.
    pub trial: Duration,
    /// How long to busy-poll before trying to sleep again.
    pub retry_after: Duration,
}

impl Default for WaitSelectorConfig {
    fn default() -> Self {
        WaitSelectorConfig {
            late_threshold: Duration::from_micros(20),
            max_late_share: 0.01,
            window: Duration::from_secs(1),
            trial: Duration::from_millis(250),
            retry_after: Duration::from_secs(20),
        }
    }
}

/// Time spent in each mode, and how often it switched.
#[derive(Clone, Copy, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct WaitSelectorStats {
    /// Times the selector went from sleep-then-spin to busy-polling (forced switches included).
    pub switches_to_busy_poll: u64,
    /// Times it went back from busy-polling to sleep-then-spin (forced switches included).
    pub switches_to_sleep: u64,
    /// Time spent busy-polling.
    pub busy_poll_us: Micros,
    /// Time spent sleeping-then-spinning.
    pub sleep_spin_us: Micros,
}

/// Chooses between sleep-then-spin and busy-polling from the lateness of the packets sent:
/// switches to busy-polling when a window is too late, keeps it only while it beats the
/// sleeping it replaced, and returns to sleeping after `retry_after` or when the producer
/// starves.
pub struct WaitSelector {
    cfg: WaitSelectorConfig,
    mode: WaitChoice,
    since: Option<Timestamp>,
    window_start: Option<Timestamp>,
    packets: u64,
    late: u64,
    /// No busy-polling before this: busy-polling starved the producer, or did no better.
    sleep_until: Option<Timestamp>,
    /// The late share of the sleeping window that made it switch to busy-polling: what
    /// busy-polling must beat to be kept.
    sleep_share: f64,
    stats: WaitSelectorStats,
}

impl WaitSelector {
    /// A selector that starts in [`WaitChoice::SleepSpin`]; its clocks start at the first
    /// packet sent.
    pub fn new(cfg: WaitSelectorConfig) -> Self {
        WaitSelector {
            cfg,
            mode: WaitChoice::SleepSpin,
            since: None,
            window_start: None,
            packets: 0,
            late: 0,
            sleep_until: None,
            sleep_share: 0.0,
            stats: WaitSelectorStats::default(),
        }
    }

    /// The current way of waiting.
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
                let held = self.sleep_until.is_some_and(|t| now < t);
                self.sleep_share = share;
                (share > self.cfg.max_late_share && !held).then_some(WaitChoice::BusyPoll)
            }
            WaitChoice::BusyPoll if now.saturating_since(since) >= self.cfg.retry_after => {
                Some(WaitChoice::SleepSpin)
            }
            // Busy-polling is kept only while it beats the sleeping it replaced, measured in
            // the same run: on a busy host an ordinary thread that spins is preempted too.
            WaitChoice::BusyPoll if now.saturating_since(start) >= self.cfg.trial => {
                let share = self.late as f64 / self.packets as f64;
                self.packets = 0;
                self.late = 0;
                self.window_start = Some(now);
                if share >= self.sleep_share {
                    self.sleep_until = Some(now + self.cfg.retry_after);
                    Some(WaitChoice::SleepSpin)
                } else {
                    None
                }
            }
            _ => None,
        }?;
        Some(self.switch(now, next))
    }

    /// What the pacer sends was not ready in time (its producer fell behind). While
    /// busy-polling, that is the polling taking the CPU the producer needs: sleep again, and
    /// do not busy-poll for `retry_after`. Returns the new mode when it changes.
    pub fn on_starved(&mut self, now: Timestamp) -> Option<WaitChoice> {
        if self.mode != WaitChoice::BusyPoll {
            return None;
        }
        self.sleep_until = Some(now + self.cfg.retry_after);
        Some(self.switch(now, WaitChoice::SleepSpin))
    }

    /// Something else decided to busy-poll (the RT throttling guard): account for it, so that
    /// the time shows in the statistics and the retry clock starts now.
    pub fn force_busy(&mut self, now: Timestamp) {
        if self.mode != WaitChoice::BusyPoll {
            self.switch(now, WaitChoice::BusyPoll);
        }
    }

    /// Something else ended busy-polling (the RT throttling guard's hold ran out).
    pub fn force_sleep(&mut self, now: Timestamp) {
        if self.mode != WaitChoice::SleepSpin {
            self.switch(now, WaitChoice::SleepSpin);
        }
    }

    fn switch(&mut self, now: Timestamp, next: WaitChoice) -> WaitChoice {
        let since = self.since.unwrap_or(now);
        let spent = Micros::from(now.saturating_since(since));
        match self.mode {
            WaitChoice::SleepSpin => {
                self.stats.sleep_spin_us += spent;
                self.stats.switches_to_busy_poll += 1;
            }
            WaitChoice::BusyPoll => {
                self.stats.busy_poll_us += spent;
                self.stats.switches_to_sleep += 1;
            }
        }
        self.mode = next;
        self.since = Some(now);
        self.window_start = Some(now);
        self.packets = 0;
        self.late = 0;
        next
    }

    /// Statistics up to `now`.
    pub fn stats(&self, now: Timestamp) -> WaitSelectorStats {
        let mut s = self.stats;
        let current = self
            .since
            .map_or(Micros::ZERO, |t| Micros::from(now.saturating_since(t)));
        match self.mode {
            WaitChoice::SleepSpin => s.sleep_spin_us += current,
            WaitChoice::BusyPoll => s.busy_poll_us += current,
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
        assert_eq!(feed(&mut s, 3000, 4001, 50), vec![WaitChoice::BusyPoll]);
        assert_eq!(s.mode(), WaitChoice::BusyPoll);
        // Busy-polling does better (nothing late): kept for 20 s, then sleeping is tried again.
        let changes = feed(&mut s, 4001, 26_000, 0);
        assert_eq!(changes, vec![WaitChoice::SleepSpin]);
        let st = s.stats(Timestamp::from_millis(26_000));
        assert_eq!((st.switches_to_busy_poll, st.switches_to_sleep), (1, 1));
        assert!(
            (st.busy_poll_us.as_secs_f64() - 20.0).abs() < 0.01,
            "{st:?}"
        );
        assert_eq!(s.mode(), WaitChoice::SleepSpin);
        assert!(
            (st.sleep_spin_us.as_secs_f64() + st.busy_poll_us.as_secs_f64() - 26.0).abs() < 0.01,
            "{st:?}"
        );
    }

    #[test]
    fn busy_polling_that_does_no_better_than_sleeping_is_given_up_for_a_while() {
        let mut s = WaitSelector::new(WaitSelectorConfig::default());
        // 2% late while sleeping: switch.
        assert_eq!(feed(&mut s, 0, 1001, 50), vec![WaitChoice::BusyPoll]);
        // Busy-polling, 5% are still late: back to sleep after its 250 ms trial.
        assert_eq!(feed(&mut s, 1001, 1300, 20), vec![WaitChoice::SleepSpin]);
        // And no busy-polling again for 20 s, however late.
        assert!(feed(&mut s, 1300, 21_000, 10).is_empty());
    }

    #[test]
    fn a_starved_producer_sends_a_busy_poller_back_to_sleep_for_a_while() {
        let mut s = WaitSelector::new(WaitSelectorConfig::default());
        assert_eq!(
            s.on_starved(Timestamp::from_millis(10)),
            None,
            "asleep already"
        );
        assert_eq!(feed(&mut s, 0, 1100, 50), vec![WaitChoice::BusyPoll]);
        assert_eq!(
            s.on_starved(Timestamp::from_millis(1100)),
            Some(WaitChoice::SleepSpin)
        );
        // However late the wake-ups, no busy-polling for 20 s; then it may again.
        assert!(feed(&mut s, 1100, 21_000, 10).is_empty());
        assert_eq!(feed(&mut s, 21_000, 21_200, 10), vec![WaitChoice::BusyPoll]);
    }
}
