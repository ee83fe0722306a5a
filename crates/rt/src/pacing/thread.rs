//! The one place a pacing thread is set up and waits: every sender (the EDF/DM cores, which
//! send every MPEG-TS stream, and raw video) starts its pacing thread with [`PacingThread::start`] and waits with
//! [`PacingThread::wait_until`].
//!
//! Set-up, once: the real-time policy the system grants (SCHED_DEADLINE fits the spin margin to
//! its budget), locked memory, 1 ns timer slack, pinning, and top niceness for a busy-polling
//! ordinary thread. While running: the wait selector (sleep-then-spin while that keeps time,
//! busy-poll while it does not) and the RT throttling guard (a SCHED_FIFO thread that would spin
//! most of a window busy-polls as an ordinary thread instead, so throttling never stops it).
//!
//! The benchmarks' baseline is not set up here: it is `metronome_apps::streams::naive`, a plain thread per
//! stream with no policy, no locked memory, the default timer slack and `std::thread::sleep`.

use crate::clock::{thread_cpu_s, Clock};
use crate::thread::{self, GrantView, Granted, MemoryLock, MemoryState, RtPolicy};
use crate::wait::{WaitMode, Waiter, WaiterConfig};
use metronome_sched::WaitPolicy;
use metronome_sched::{
    GuardStep, ThrottleGuard, WaitChoice, WaitSelector, WaitSelectorConfig, WaitSelectorStats,
};
use metronome_time::Timestamp;
use serde::Serialize;
use std::time::Duration;

/// How a pacing thread runs.
#[derive(Clone, Copy, Debug)]
pub struct PacingThreadConfig {
    /// The scheduling policy to ask for; the thread falls back to SCHED_OTHER if refused
    /// (see [`thread::make_current_thread_realtime`]).
    pub rt_policy: RtPolicy,
    /// How it waits for each release: sleep-then-spin, busy-poll, or switching between them.
    pub wait: WaitPolicy,
    /// The sleep-then-spin waiter's margin tuning; under SCHED_DEADLINE its margins are fitted
    /// to the granted runtime.
    pub waiter: WaiterConfig,
    /// When [`WaitPolicy::Auto`] switches between sleeping and busy-polling (unused otherwise).
    pub wait_selector: WaitSelectorConfig,
    /// The CPU (0-based, as the kernel numbers them) to pin the thread to; `None` leaves its
    /// affinity alone. A pinning failure is ignored.
    pub cpu: Option<usize>,
    /// Lock the process's current pages in RAM ([`thread::lock_memory`]) so that the thread
    /// never waits for a page fault; the report says whether it worked.
    pub lock_memory: bool,
}

/// What a pacing thread reports when it ends.
#[derive(Clone, Debug)]
pub struct PacingThreadReport {
    /// The scheduling policy it got.
    pub grant: GrantView,
    /// Whether memory was locked (`as-core` for a stream on a shared core).
    pub memory: MemoryLock,
    /// CPU time it used, s.
    pub cpu_s: f64,
    /// Time spent sleeping-then-spinning and busy-polling, and how often it switched, as the
    /// wait selector counted them: only a thread under [`WaitPolicy::Auto`] feeds the
    /// selector, so under the other policies these stay zero.
    pub wait_modes: WaitSelectorStats,
    /// Times the RT throttling guard switched it to busy-polling.
    pub throttle_guard_trips: u64,
    /// The spin margin it ended with, ns.
    pub margin_ns: u64,
}

impl PacingThreadReport {
    /// For a stream sent by a core shared with others: what the core was granted; its CPU
    /// time and waiting belong to the core, not to one stream.
    pub fn shared(grant: GrantView) -> Self {
        PacingThreadReport {
            grant,
            memory: MemoryLock::of(MemoryState::AsCore),
            cpu_s: 0.0,
            wait_modes: WaitSelectorStats::default(),
            throttle_guard_trips: 0,
            margin_ns: 0,
        }
    }
}

/// The pacing state of the thread that created it with [`PacingThread::start`]: its precise
/// waiter, the wait selector and the RT throttling guard. Belongs to that one thread; waiting
/// and following the load allocate nothing (only [`report`](Self::report) does).
pub struct PacingThread {
    rt_policy: RtPolicy,
    /// Follow the load (`WaitPolicy::Auto`): switch between sleeping and busy-polling.
    auto: bool,
    /// Whether the wait selector may try busy-polling: only for a thread that has no real-time
    /// policy to lose. A real-time thread that busy-polls must become an ordinary one (RT
    /// throttling), and then any process on its core preempts it for a whole time slice:
    /// measured, 15 streams under EDF missed 47 deadlines (p99.9 6 ms) on a quiet host during
    /// such trials, and none without them. Only the throttling guard may make it do so.
    try_busy_poll: bool,
    waiter: Waiter,
    selector: WaitSelector,
    guard: ThrottleGuard,
    grant: GrantView,
    memory: MemoryLock,
    cpu_start: f64,
    /// How late the last wait for a future instant woke, not yet shown to the selector.
    wake_late: Option<Duration>,
    /// The throttling guard has capped the spin margin.
    capped: bool,
    /// The throttling guard made the thread busy-poll (it ends that when its hold runs out).
    busy_by_guard: bool,
}

/// The spin margin while the throttling guard has the thread sleep more: on a busy core a
/// real-time thread wakes within a few µs.
const GUARD_MARGIN_NS: u64 = 10_000;

impl PacingThread {
    /// Sets up the calling thread as a pacing thread, as `cfg` asks and the system permits.
    pub fn start(cfg: &PacingThreadConfig, clock: &Clock) -> Self {
        let mut waiter_cfg = cfg.waiter;
        let g = thread::make_current_thread_realtime(cfg.rt_policy);
        if let Granted::Deadline { runtime, .. } = g.granted {
            waiter_cfg.fit_deadline_runtime(runtime);
        }
        let real_time = g.granted != Granted::Other;
        let memory = if cfg.lock_memory {
            match thread::lock_memory() {
                Ok(()) => MemoryLock::of(MemoryState::Locked),
                Err(e) => MemoryLock {
                    state: MemoryState::NotLocked,
                    reason: Some(e.to_string()),
                },
            }
        } else {
            MemoryLock::of(MemoryState::NotRequested)
        };
        let _ = thread::set_timer_slack_ns(1);
        if cfg.wait == WaitPolicy::BusyPoll && cfg.rt_policy == RtPolicy::Other {
            thread::spin_at_top_nice();
        }
        let grant = g.view();
        if let Some(cpu) = cfg.cpu {
            let _ = thread::pin_to_cpu(cpu);
        }
        let mode = match cfg.wait {
            WaitPolicy::BusyPoll => WaitMode::BusyPoll,
            WaitPolicy::SleepSpin | WaitPolicy::Auto => WaitMode::SleepSpin,
        };
        let cpu_start = thread_cpu_s();
        PacingThread {
            rt_policy: cfg.rt_policy,
            auto: cfg.wait == WaitPolicy::Auto,
            try_busy_poll: !real_time,
            waiter: Waiter::with_config(mode, waiter_cfg),
            selector: WaitSelector::new(cfg.wait_selector),
            guard: ThrottleGuard::new(clock.now(), cpu_start),
            grant,
            memory,
            cpu_start,
            wake_late: None,
            capped: false,
            busy_by_guard: false,
        }
    }

    /// Waits until `t`; returns when the wait ended.
    pub fn wait_until(&mut self, clock: &Clock, t: Timestamp) -> Timestamp {
        let ahead = t > clock.now();
        let mono = self.waiter.wait_until(clock.mono_ns_from_timestamp(t));
        let woke = clock.timestamp_from_mono_ns(mono);
        if ahead {
            self.wake_late = Some(woke.saturating_since(t));
        }
        woke
    }

    /// With nothing to send before `t`: waits precisely for `t` if it is within `most`;
    /// otherwise it comes back within `most` (to look at its commands and idle streams) and:
    /// - while busy-polling with work in sight, polls the whole way, as busy-polling promises;
    /// - else sleeps without spinning (a thread with no work in sight leaves the CPU alone;
    ///   an unpark ends the sleep early, see `pacing::core::CoreShared::wake`), and
    ///   ends the plain sleep at least `most` before `t`, so that a late wake-up from it never
    ///   makes the packet at `t` late: the precise wait takes over from there.
    pub fn idle_until(&mut self, clock: &Clock, t: Timestamp, most: Duration) {
        let now = clock.now();
        let left = t.saturating_since(now);
        if left <= most {
            self.wait_until(clock, t);
        } else if self.waiter.mode() == WaitMode::BusyPoll && t != Timestamp::MAX {
            self.wait_until(clock, now + most);
        } else if left < most * 2 {
            std::thread::park_timeout(left - most);
        } else {
            std::thread::park_timeout(most);
        }
    }

    /// After a packet left at `now`: switch between sleeping and busy-polling as the wait
    /// selector and the RT throttling guard decide. The selector judges how late the thread
    /// woke from its last wait, not how late the packet was: a packet the producer delivered
    /// late, or one caught up after a stall, says nothing about sleeping, and busy-polling
    /// would only take the CPU the producer needs.
    pub fn follow_load(&mut self, now: Timestamp) {
        let woke_late = self.wake_late.take();
        if !self.auto {
            return;
        }
        self.check_throttling(now);
        // While the throttling guard holds busy-polling, the selector has nothing to decide.
        let Some(late) = woke_late.filter(|_| self.try_busy_poll && !self.guard.holds_busy(now))
        else {
            return;
        };
        if let Some(choice) = self.selector.on_sent(now, late) {
            self.waiter.apply_choice(choice, self.rt_policy);
        }
    }

    /// Nothing was ready to send (a producer fell behind). A busy-polling thread goes back to
    /// sleeping for a while: on these 2-CPU machines its polling takes the CPU the producer
    /// needs (measured: a live encoder underran 60 times in 6 s behind a busy-polling pacer,
    /// and not once behind a sleeping one).
    pub fn note_starved(&mut self, now: Timestamp) {
        if !self.auto {
            return;
        }
        if let Some(choice) = self.selector.on_starved(now) {
            self.waiter.apply_choice(choice, self.rt_policy);
        }
    }

    /// Follows the RT throttling guard (call now and then even with nothing to send): a thread
    /// that barely sleeps first caps its spin margin and stays a real-time thread; if even
    /// that leaves it no time to sleep, it busy-polls as an ordinary thread.
    pub fn check_throttling(&mut self, now: Timestamp) {
        if !self.auto || !self.guard.due(now) {
            return;
        }
        if self.busy_by_guard && !self.guard.holds_busy(now) {
            // The hold ran out: sleep again (the guard trips again if it still must).
            self.busy_by_guard = false;
            self.selector.force_sleep(now);
            self.waiter
                .apply_choice(WaitChoice::SleepSpin, self.rt_policy);
        }
        let sleeping = self.waiter.mode() == WaitMode::SleepSpin;
        match self.guard.on_window(now, thread_cpu_s(), sleeping) {
            GuardStep::Keep => {
                if self.capped && !self.guard.sleeping_more(now) {
                    self.capped = false;
                    self.waiter.cap_margin(None);
                }
            }
            GuardStep::SleepMore => {
                self.capped = true;
                self.waiter.cap_margin(Some(GUARD_MARGIN_NS));
            }
            GuardStep::BusyPoll => {
                self.busy_by_guard = true;
                self.selector.force_busy(now);
                self.waiter
                    .apply_choice(WaitChoice::BusyPoll, self.rt_policy);
            }
        }
    }

    /// The scheduling policy granted at [`start`](Self::start), with its `note` (what was
    /// refused and why, and the RT throttling setting).
    pub fn grant(&self) -> &GrantView {
        &self.grant
    }

    /// How the thread has run since [`start`](Self::start): its grant, memory locking, CPU
    /// time, wait modes, throttling-guard trips and current spin margin. Call on the thread
    /// itself: the CPU time read is the calling thread's.
    pub fn report(&self, clock: &Clock) -> PacingThreadReport {
        PacingThreadReport {
            grant: self.grant.clone(),
            memory: self.memory.clone(),
            cpu_s: thread_cpu_s() - self.cpu_start,
            wait_modes: self.selector.stats(clock.now()),
            throttle_guard_trips: self.guard.trips(),
            margin_ns: self.waiter.margin_ns(),
        }
    }
}

/// How the pacing thread waits for each release time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PacerKind {
    /// Real-time policy, locked memory, 1 ns timer slack, absolute sleep then spin (or busy-poll).
    Realtime,
    /// The baseline: an ordinary thread that sleeps for the time left before each packet with
    /// `std::thread::sleep`, as a plain timer-driven sender does.
    PlainSleep,
}
