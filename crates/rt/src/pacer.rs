//! The pacing thread's work: take the next packet from the ring, wait for its release time, stamp
//! the send time, send it to every destination, and account for its lateness.
//!
//! [`Pacer::start`] does everything that may allocate or make system calls once (real-time policy,
//! memory locking, timer slack, pinning); [`Pacer::step`] is the per-packet path and allocates
//! nothing (`crates/rt/tests/pacer_alloc.rs` checks it).

use crate::clock::{thread_cpu_s, Clock};
use crate::ring::PacketRing;
use crate::sender::{PacerKind, SenderConfig, WaitPolicy};
use crate::thread::{self, Granted, RtPolicy};
use crate::udp::UdpSender;
use crate::wait::{WaitMode, Waiter};
use metronome_sched::{PacingModel, WaitSelector, WaitSelectorStats};
use metronome_wire::rtp::patch_send_time;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Counters the pacer publishes for the RTCP thread and the status line.
#[derive(Default)]
pub struct PacerCounters {
    pub packets: AtomicU64,
    pub payload_octets: AtomicU64,
    pub bytes: AtomicU64,
    pub send_errors: AtomicU64,
    pub underruns: AtomicU64,
    /// Worst lateness since the status line last took it.
    pub max_late_ns: AtomicU64,
    /// How far stalls have shifted the schedule (see `PacingModel::offset`), in ns.
    pub schedule_offset_ns: AtomicU64,
}

/// What one [`Pacer::step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Sent,
    /// Nothing to send yet: the caller waits a little and tries again.
    Empty,
    /// The ring is empty and the producer has finished.
    Done,
}

/// What a finished pacer reports.
pub struct PacerResult {
    pub pacing: PacingModel,
    pub grant: String,
    pub memory: String,
    pub margin_ns: u64,
    pub cpu_s: f64,
    pub wait_modes: WaitSelectorStats,
}

pub struct Pacer<'a> {
    ring: &'a PacketRing,
    senders: &'a [UdpSender],
    clock: &'a Clock,
    baseline: bool,
    auto: bool,
    send_time_ext: bool,
    rt_policy: RtPolicy,
    waiter: Waiter,
    selector: WaitSelector,
    pacing: PacingModel,
    empty: bool,
    grant: String,
    memory: String,
    cpu_start: f64,
}

impl<'a> Pacer<'a> {
    /// Sets up the calling thread as the pacing thread, as `cfg` asks and the system permits.
    pub fn start(
        cfg: &SenderConfig,
        ring: &'a PacketRing,
        senders: &'a [UdpSender],
        clock: &'a Clock,
    ) -> Self {
        let baseline = cfg.pacer == PacerKind::PlainSleep;
        let mut waiter_cfg = cfg.waiter;
        let grant = if baseline {
            "SCHED_OTHER (baseline: plain sleep per packet)".to_string()
        } else {
            let g = thread::make_current_thread_realtime(cfg.rt_policy);
            if let Granted::Deadline { runtime, .. } = g.granted {
                waiter_cfg.fit_deadline_runtime(runtime);
            }
            g.to_string()
        };
        let memory = if cfg.lock_memory && !baseline {
            match thread::lock_memory() {
                Ok(()) => "locked".to_string(),
                Err(e) => format!("not locked: {e}"),
            }
        } else {
            "not requested".to_string()
        };
        if !baseline {
            let _ = thread::set_timer_slack_ns(1);
        }
        if cfg.wait == WaitPolicy::BusyPoll && cfg.rt_policy == RtPolicy::Other && !baseline {
            thread::spin_at_top_nice();
        }
        if let Some(cpu) = cfg.pacer_cpu {
            let _ = thread::pin_to_cpu(cpu);
        }
        let first_mode = match cfg.wait {
            WaitPolicy::BusyPoll => WaitMode::BusyPoll,
            WaitPolicy::SleepSpin | WaitPolicy::Auto => WaitMode::SleepSpin,
        };
        Pacer {
            ring,
            senders,
            clock,
            baseline,
            auto: cfg.wait == WaitPolicy::Auto && !baseline,
            send_time_ext: cfg.send_time_ext,
            rt_policy: cfg.rt_policy,
            waiter: Waiter::with_config(first_mode, waiter_cfg),
            selector: WaitSelector::new(cfg.wait_selector),
            pacing: PacingModel::new(cfg.pacing),
            // The ring starts empty while the producer warms up: that is not an underrun.
            empty: true,
            grant,
            memory,
            cpu_start: thread_cpu_s(),
        }
    }

    /// Sends the next packet at its time, if there is one. Allocates nothing.
    pub fn step(&mut self, counters: &PacerCounters, producer_done: &AtomicBool) -> Step {
        let Some(mut slot) = self.ring.next_ready() else {
            if producer_done.load(Ordering::Acquire) && self.ring.occupancy() == 0 {
                return Step::Done;
            }
            if !self.empty {
                counters.underruns.fetch_add(1, Ordering::Relaxed);
                self.empty = true;
            }
            return Step::Empty;
        };
        self.empty = false;
        let clock = self.clock;
        let target = self.pacing.target(slot.release);
        let actual_ns = if self.baseline {
            std::thread::sleep(target.saturating_since(clock.now()));
            clock.mono_ns()
        } else {
            self.waiter.wait_until(clock.mono_ns_from_timestamp(target))
        };
        if self.send_time_ext {
            patch_send_time(slot.bytes_mut(), clock.wall());
        }
        for s in self.senders {
            if s.send(slot.bytes()).is_err() {
                counters.send_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        let sent_at = clock.timestamp_from_mono_ns(actual_ns);
        let late = self.pacing.on_sent(target, sent_at);
        if self.auto {
            self.follow_load(sent_at, late);
        }
        let offset_ns = u64::try_from(self.pacing.offset().as_nanos()).unwrap_or(u64::MAX);
        counters
            .schedule_offset_ns
            .store(offset_ns, Ordering::Relaxed);
        let late_ns = u64::try_from(late.as_nanos()).unwrap_or(u64::MAX);
        counters.max_late_ns.fetch_max(late_ns, Ordering::Relaxed);
        counters.packets.fetch_add(1, Ordering::Relaxed);
        counters.bytes.fetch_add(slot.len as u64, Ordering::Relaxed);
        counters
            .payload_octets
            .fetch_add(slot.payload_len as u64, Ordering::Relaxed);
        self.ring.recycle(slot);
        Step::Sent
    }

    /// Switches between sleeping and busy-polling as the wait selector decides.
    fn follow_load(&mut self, now: metronome_time::Timestamp, late: std::time::Duration) {
        if let Some(choice) = self.selector.on_sent(now, late) {
            self.waiter.apply_choice(choice, self.rt_policy);
        }
    }

    pub fn finish(self) -> PacerResult {
        PacerResult {
            wait_modes: self.selector.stats(self.clock.now()),
            margin_ns: self.waiter.margin_ns(),
            cpu_s: thread_cpu_s() - self.cpu_start,
            pacing: self.pacing,
            grant: self.grant,
            memory: self.memory,
        }
    }
}
