//! The precise waiter: wait until an absolute CLOCK_MONOTONIC deadline.
//!
//! - [`WaitMode::SleepSpin`]: `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` until
//!   `deadline − margin`, then spin on `clock_gettime` until the deadline. The margin adapts to how
//!   late the sleeps wake: a high quantile ([`WaiterConfig::quantile`], default p99: the 2nd
//!   largest of the last 128) of recent oversleeps plus a headroom, clamped to
//!   [`WaiterConfig::min_margin_ns`, `max_margin_ns`]. Until 128 sleeps have been seen, the
//!   largest oversleep so far is used (conservative).
//! - [`WaitMode::BusyPoll`]: spin the whole way. For users who dedicate a core; under SCHED_FIFO
//!   it runs into RT throttling (see [`crate::thread`]).
//!
//! A sleep-spin waiter whose gaps are shorter than its margin spins all the time, too: when the host
//! is busy and sleeps overshoot by milliseconds, the margin grows toward 2 ms. Watch
//! [`Waiter::margin_ns`] and [`WaitStats`].
//!
//! No call allocates; the state is a fixed ring of 128 samples. A `Waiter` belongs to one thread.

use crate::clock::mono_ns;
use crate::thread::{self, RtPolicy};
use metronome_sched::WaitChoice;

/// How [`Waiter::wait_until`] waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    /// Sleep until `deadline − margin`, then spin.
    SleepSpin,
    /// Spin the whole way (keeps the core busy).
    BusyPoll,
}

/// Tuning of the adaptive margin (nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WaiterConfig {
    /// Lower clamp of the margin.
    pub min_margin_ns: u64,
    /// Upper clamp of the margin.
    pub max_margin_ns: u64,
    /// Added to the oversleep quantile.
    pub headroom_ns: u64,
    /// Margin before the first sleep has been measured.
    pub initial_margin_ns: u64,
    /// Quantile of the recent oversleeps that the margin covers (0.0..=1.0; 1.0 is the window's
    /// maximum, which reacts to a single outlier for 128 sleeps).
    pub quantile: f64,
}

impl Default for WaiterConfig {
    fn default() -> Self {
        WaiterConfig {
            min_margin_ns: 20_000,
            max_margin_ns: 2_000_000,
            headroom_ns: 10_000,
            initial_margin_ns: 200_000,
            quantile: 0.99,
        }
    }
}

impl WaiterConfig {
    /// Fits the margins to a SCHED_DEADLINE reservation of `runtime`: each wake-up gets a fresh
    /// budget (the CBS wake-up rule), and the spin must fit in half of it, or the kernel
    /// throttles the thread until its next period.
    pub fn fit_deadline_runtime(&mut self, runtime: std::time::Duration) {
        let cap = u64::try_from(runtime.as_nanos() / 2).unwrap_or(u64::MAX);
        self.max_margin_ns = self.max_margin_ns.min(cap);
        self.initial_margin_ns = self.initial_margin_ns.min(cap);
        self.min_margin_ns = self.min_margin_ns.min(cap);
    }
}

/// Counters since the waiter was created (or since [`Waiter::reset_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitStats {
    /// Calls to `wait_until`.
    pub waits: u64,
    /// Calls whose deadline had already passed on entry (returned at once).
    pub already_past: u64,
    /// Calls that slept (SleepSpin with the deadline further away than the margin).
    pub sleeps: u64,
    /// Sleeps that woke after the deadline itself: the margin was too small for that wake-up.
    pub woke_after_deadline: u64,
    /// Oversleep (wake-up minus sleep target) of the last sleep, ns.
    pub last_oversleep_ns: u64,
    /// Largest oversleep of any sleep so far, ns: how late the kernel woke the thread at worst.
    pub max_oversleep_ns: u64,
    /// Total time spent spinning.
    pub spin_ns_total: u64,
    /// Largest `returned − deadline` (includes calls entered late).
    pub max_late_ns: u64,
}

/// Oversleep samples kept.
pub const WINDOW: usize = 128;

/// The precise waiter. See the module documentation.
#[derive(Clone, Debug)]
pub struct Waiter {
    mode: WaitMode,
    config: WaiterConfig,
    margin_ns: u64,
    /// Index into the sorted window that is the configured quantile.
    quantile_index: usize,
    /// Recent oversleeps in ns (saturated at u32::MAX ≈ 4.3 s).
    ring: [u32; WINDOW],
    next: usize,
    filled: usize,
    stats: WaitStats,
    /// A cap on the margin set from outside (the RT throttling guard), below the configured one.
    cap_ns: Option<u64>,
}

impl Waiter {
    /// A waiter with the default configuration.
    pub fn new(mode: WaitMode) -> Self {
        Self::with_config(mode, WaiterConfig::default())
    }

    /// A waiter with the given margin tuning. The first margin is `initial_margin_ns` clamped
    /// to `[min_margin_ns, max_margin_ns]`; a `quantile` outside 0.0..=1.0 is clamped, and NaN
    /// is taken as 1.0 (the window's maximum).
    pub fn with_config(mode: WaitMode, config: WaiterConfig) -> Self {
        let margin_ns = config.initial_margin_ns.clamp(
            config.min_margin_ns,
            config.max_margin_ns.max(config.min_margin_ns),
        );
        let q = if config.quantile.is_nan() {
            1.0
        } else {
            config.quantile.clamp(0.0, 1.0)
        };
        Waiter {
            mode,
            config,
            margin_ns,
            quantile_index: ((WINDOW - 1) as f64 * q).round() as usize,
            ring: [0; WINDOW],
            next: 0,
            filled: 0,
            stats: WaitStats::default(),
            cap_ns: None,
        }
    }

    /// How the waiter waits now.
    pub fn mode(&self) -> WaitMode {
        self.mode
    }

    /// Switch modes (e.g. to BusyPoll when the host is busy); keeps the margin history.
    /// Follows a wait selector's choice. Busy-polling runs as an ordinary thread at nice −20
    /// (spinning under SCHED_FIFO would meet RT throttling); sleeping returns to `rt_policy`.
    /// Allocates nothing.
    pub fn apply_choice(&mut self, choice: WaitChoice, rt_policy: RtPolicy) {
        match choice {
            WaitChoice::BusyPoll => {
                thread::spin_at_top_nice();
                self.set_mode(WaitMode::BusyPoll);
            }
            WaitChoice::SleepSpin => {
                thread::switch_policy(rt_policy);
                self.set_mode(WaitMode::SleepSpin);
            }
        }
    }

    /// Switches between sleep-then-spin and busy-polling, keeping the oversleep history and the
    /// margin. Unlike [`apply_choice`](Self::apply_choice), it leaves the thread's scheduling
    /// policy alone.
    pub fn set_mode(&mut self, mode: WaitMode) {
        self.mode = mode;
    }

    /// The current sleep-spin margin in nanoseconds.
    pub fn margin_ns(&self) -> u64 {
        self.margin_ns
    }

    /// Caps the spin margin at `cap_ns` (the thread sleeps more and spins less), or lifts the
    /// cap with `None`. Allocates nothing.
    pub fn cap_margin(&mut self, cap_ns: Option<u64>) {
        self.cap_ns = cap_ns;
        if let Some(cap) = cap_ns {
            self.margin_ns = self.margin_ns.min(cap);
        }
    }

    /// Counters since the waiter was made or last [`reset_stats`](Self::reset_stats).
    pub fn stats(&self) -> &WaitStats {
        &self.stats
    }

    /// Zeroes the counters of [`stats`](Self::stats); the margin and its oversleep history
    /// are kept.
    pub fn reset_stats(&mut self) {
        self.stats = WaitStats::default();
    }

    /// Waits until CLOCK_MONOTONIC ≥ `deadline_mono_ns` and returns the CLOCK_MONOTONIC reading
    /// taken when the wait ended (always ≥ the deadline). Returns at once if the deadline has
    /// passed. Use [`crate::clock::Clock::mono_ns_from_timestamp`] to turn a run time into a
    /// deadline.
    pub fn wait_until(&mut self, deadline_mono_ns: u64) -> u64 {
        self.stats.waits += 1;
        let mut now = mono_ns();
        if now >= deadline_mono_ns {
            self.stats.already_past += 1;
            self.note_late(now - deadline_mono_ns);
            return now;
        }
        if self.mode == WaitMode::SleepSpin && deadline_mono_ns - now > self.margin_ns {
            let target = deadline_mono_ns - self.margin_ns;
            sleep_until(target);
            now = mono_ns();
            self.stats.sleeps += 1;
            self.record_oversleep(now.saturating_sub(target));
            if now >= deadline_mono_ns {
                self.stats.woke_after_deadline += 1;
                self.note_late(now - deadline_mono_ns);
                return now;
            }
        }
        let spin_start = now;
        while now < deadline_mono_ns {
            core::hint::spin_loop();
            now = mono_ns();
        }
        self.stats.spin_ns_total += now - spin_start;
        self.note_late(now - deadline_mono_ns);
        now
    }

    /// Feeds the margin a sleep taken another way (a `ppoll` that also watches sockets, say)
    /// that woke `oversleep_ns` after its target: the caller then sleeps until `deadline −`
    /// [`margin_ns`](Self::margin_ns) and spins the rest, as [`wait_until`](Self::wait_until)
    /// does.
    pub fn record_sleep(&mut self, oversleep_ns: u64) {
        self.stats.sleeps += 1;
        self.record_oversleep(oversleep_ns);
    }

    fn note_late(&mut self, late_ns: u64) {
        self.stats.max_late_ns = self.stats.max_late_ns.max(late_ns);
    }

    /// Adds one oversleep sample and recomputes the margin (O(WINDOW), on the stack, ~0.3 µs).
    fn record_oversleep(&mut self, oversleep_ns: u64) {
        self.stats.last_oversleep_ns = oversleep_ns;
        self.stats.max_oversleep_ns = self.stats.max_oversleep_ns.max(oversleep_ns);
        self.ring[self.next] = u32::try_from(oversleep_ns).unwrap_or(u32::MAX);
        self.next = (self.next + 1) % WINDOW;
        self.filled = (self.filled + 1).min(WINDOW);
        let q = if self.filled < WINDOW {
            self.ring[..self.filled].iter().copied().max().unwrap_or(0)
        } else {
            let mut sorted = self.ring;
            *sorted.select_nth_unstable(self.quantile_index).1
        };
        let c = &self.config;
        let max = c.max_margin_ns.max(c.min_margin_ns);
        let margin = (q as u64 + c.headroom_ns).clamp(c.min_margin_ns, max);
        self.margin_ns = self.cap_ns.map_or(margin, |cap| margin.min(cap));
    }
}

/// Sleeps until CLOCK_MONOTONIC ≥ `target_ns` (absolute, so a signal just restarts it).
fn sleep_until(target_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (target_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (target_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid timespec; with TIMER_ABSTIME the remainder pointer is unused.
        let r = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if r != libc::EINTR {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_never_early(mode: WaitMode) -> Waiter {
        let mut w = Waiter::new(mode);
        let start = mono_ns() + 1_000_000;
        for i in 0..200u64 {
            let deadline = start + i * 1_000_000;
            let got = w.wait_until(deadline);
            assert!(
                got >= deadline,
                "{mode:?}: returned {got} before deadline {deadline}"
            );
        }
        assert_eq!(w.stats().waits, 200);
        w
    }

    #[test]
    fn sleep_spin_never_returns_early() {
        let w = check_never_early(WaitMode::SleepSpin);
        assert!(w.stats().sleeps > 0);
        let m = w.margin_ns();
        assert!((20_000..=2_000_000).contains(&m), "margin {m}");
    }

    #[test]
    fn busy_poll_never_returns_early_and_never_sleeps() {
        let mut w = Waiter::new(WaitMode::BusyPoll);
        let start = mono_ns();
        for i in 1..=20u64 {
            let d = start + i * 100_000;
            assert!(w.wait_until(d) >= d);
        }
        assert_eq!(w.stats().sleeps, 0);
    }

    #[test]
    fn past_deadline_returns_at_once() {
        let mut w = Waiter::new(WaitMode::SleepSpin);
        let now = mono_ns();
        assert!(w.wait_until(now.saturating_sub(1_000_000)) >= now);
        assert!(w.wait_until(0) >= now);
        assert_eq!(w.stats().already_past, 2);
    }

    #[test]
    fn margin_follows_the_quantile_and_is_clamped() {
        let mut w = Waiter::new(WaitMode::SleepSpin);
        for _ in 0..WINDOW {
            w.record_oversleep(50_000);
        }
        assert_eq!(w.margin_ns(), 60_000);
        // One outlier in 128 is ignored by the p99 quantile (the 2nd largest); a second is not.
        for _ in 0..1 {
            w.record_oversleep(1_000_000);
        }
        assert_eq!(w.margin_ns(), 60_000);
        w.record_oversleep(1_000_000);
        assert_eq!(w.margin_ns(), 1_010_000);
        for _ in 0..WINDOW {
            w.record_oversleep(u64::MAX);
        }
        assert_eq!(w.margin_ns(), 2_000_000);
        for _ in 0..WINDOW {
            w.record_oversleep(0);
        }
        assert_eq!(w.margin_ns(), 20_000);
    }

    /// Manual measurement, not a test of timing: `cargo test -p metronome-rt --release --
    /// --ignored --nocapture waiter_lateness`.
    #[test]
    #[ignore]
    fn waiter_lateness_report() {
        for mode in [WaitMode::SleepSpin, WaitMode::BusyPoll] {
            let mut w = Waiter::new(mode);
            let mut late = Vec::with_capacity(2000);
            let start = mono_ns() + 1_000_000;
            for i in 0..2000u64 {
                let d = start + i * 1_000_000;
                late.push(w.wait_until(d) - d);
            }
            late.sort_unstable();
            let q = |p: f64| late[((late.len() - 1) as f64 * p) as usize];
            println!(
                "{mode:?}: late p50 {} ns p99 {} ns p99.9 {} ns max {} ns; margin {} ns; {:?}",
                q(0.5),
                q(0.99),
                q(0.999),
                late[late.len() - 1],
                w.margin_ns(),
                w.stats()
            );
        }
    }
}
