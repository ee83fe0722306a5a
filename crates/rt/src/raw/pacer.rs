//! The raw-video pacing thread: takes each frame from the ring, and sends its packets at their
//! [`FrameSchedule`] times, batching into one GSO call all packets due within the batch window
//! (a burst sends the whole frame in one [`FastSender::send_segments`]). A batch never holds
//! more packets than the model lets arrive at once: CMAX − 1 of its class (ST 2110-21: n
//! packets at one instant raise Cinst to n − 1, and one more may still be in the bucket).
//!
//! A packet that is overdue when the pacer gets to it goes out at once with the others that are
//! overdue (catching up within the frame keeps its latency bounded); its lateness is recorded,
//! and a frame whose send calls started more than the late threshold after they were due counts
//! as a late frame. No frame is skipped. Nothing allocates per frame or per packet (the error
//! message of a failed send excepted).

use super::out::RawOut;
use super::ring::{FrameRing, FrameSlot};
use crate::clock::Clock;
use crate::pacing_thread::{PacingThread, PacingThreadConfig};
use crate::sender::WaitPolicy;
use crate::udp::GSO_MAX_SEGMENTS;
use metronome_sched::{FrameSchedule, SenderType, WaitSelectorStats};
use metronome_time::{Distribution, Timestamp};
use metronome_wire::rtp::patch_send_time;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Spin before a burst's due time: none. A burst waits once a frame, with
/// milliseconds to spare against its latency target; an absolute sleep's wake-up delay (tens
/// of µs here) costs less than spinning through it.
const BURST_SPIN_NS: u64 = 0;
/// Longest park while no frame is ready (how late a stop may be seen).
const IDLE_PARK: Duration = Duration::from_millis(100);
/// A paced model's pacer wakes this long before a frame is due, then waits precisely.
const PACED_WAKE_EARLY: Duration = Duration::from_millis(1);

/// How the pacing thread runs.
#[derive(Clone, Debug)]
pub struct PacerSettings {
    /// How the pacing thread is set up (adjusted below to the sender type).
    pub thread: PacingThreadConfig,
    /// Packets due within this window after the one waited for go in the same send call.
    pub batch_window: Duration,
    /// A frame whose send calls start later than this after they were due is late.
    pub late_threshold: Duration,
    /// Patch the send-time element (the payloader leaves room for it) into every packet.
    pub send_time_ext: bool,
}

/// What the pacer publishes while it runs.
#[derive(Default)]
pub struct PacerCounters {
    pub frames: AtomicU64,
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// RTP payload octets sent (padding excluded), for sender reports (RFC 3550 §6.4.1).
    pub payload_octets: AtomicU64,
    pub late_frames: AtomicU64,
    /// Worst batch lateness since the status line last took it.
    pub max_late_ns: AtomicU64,
}

/// What a finished pacer measured.
pub struct PacerResult {
    pub grant: String,
    pub memory: String,
    pub cpu_s: f64,
    pub send_lateness: Distribution,
    pub batch_lateness: Distribution,
    pub frame_send_time: Distribution,
    pub batches: u64,
    pub frames_not_ready: u64,
    pub send_errors: u64,
    pub last_send_error: Option<String>,
    pub wait_modes: WaitSelectorStats,
    pub throttle_guard_trips: u64,
    /// Most packets in one send call, if limited (not for a burst).
    pub max_batch: Option<usize>,
}

pub struct RawPacer<'a> {
    sender: &'a RawOut,
    clock: &'a Clock,
    schedule: FrameSchedule,
    s: PacerSettings,
    max_batch: usize,
    thread: PacingThread,
    r: PacerResult,
}

impl<'a> RawPacer<'a> {
    /// Sets up the calling thread as the pacing thread, as `s` asks and the system permits.
    pub fn start(
        s: PacerSettings,
        schedule: FrameSchedule,
        sender: &'a RawOut,
        clock: &'a Clock,
    ) -> Self {
        let mut t = s.thread;
        if schedule.sender_type() == SenderType::Burst {
            t.waiter.min_margin_ns = BURST_SPIN_NS;
            t.waiter.max_margin_ns = BURST_SPIN_NS;
            t.waiter.initial_margin_ns = BURST_SPIN_NS;
            // A burst pacer wakes once a frame: sleeping then spinning costs next to nothing,
            // and one late wake-up among 25 a second would make the selector busy-poll a
            // whole core for 20 s. The paced models follow the load.
            if t.wait == WaitPolicy::Auto {
                t.wait = WaitPolicy::SleepSpin;
            }
        } else {
            // A packet late by less than half the packet spacing stays within the model's
            // limits (it can only meet the next one, raising Cinst by one): sleeping is good
            // enough at low packet rates, and the selector should not busy-poll for them.
            let trs = schedule.format().trs(schedule.read_schedule());
            t.wait_selector.late_threshold = t.wait_selector.late_threshold.max(trs / 2);
        }
        let thread = PacingThread::start(&t, clock);
        let limits = schedule.limits();
        let max_batch = match schedule.sender_type() {
            SenderType::Burst => usize::MAX,
            SenderType::Wide => (limits.cmax_wide as usize)
                .saturating_sub(1)
                .max(schedule.group() as usize),
            SenderType::NarrowGapped | SenderType::NarrowLinear => {
                (limits.cmax_narrow as usize).saturating_sub(1).max(1)
            }
        };
        RawPacer {
            max_batch,
            sender,
            clock,
            schedule,
            thread,
            s,
            r: PacerResult {
                grant: String::new(),
                memory: String::new(),
                cpu_s: 0.0,
                send_lateness: Distribution::new(),
                batch_lateness: Distribution::new(),
                frame_send_time: Distribution::new(),
                batches: 0,
                frames_not_ready: 0,
                send_errors: 0,
                last_send_error: None,
                wait_modes: WaitSelectorStats::default(),
                throttle_guard_trips: 0,
                max_batch: None,
            },
        }
    }

    /// Sends frames until the producer is done and the ring is empty, or `stop` is set.
    /// Frame `n` of the grid has its epoch at `stream_epoch + n × TFRAME`.
    pub fn run(
        &mut self,
        ring: &FrameRing,
        producer_done: &AtomicBool,
        stop: &AtomicBool,
        c: &PacerCounters,
        stream_epoch: Timestamp,
    ) {
        let sched = self.schedule;
        let tframe = sched.format().tframe();
        let burst = sched.sender_type() == SenderType::Burst;
        // When the next frame's first packet is due, as far as the grid says.
        let mut next_due = sched.send_time(sched.format().frame_epoch(stream_epoch, 0), 0);
        while !stop.load(Ordering::Relaxed) {
            let Some(mut slot) = ring.next_ready() else {
                if producer_done.load(Ordering::Acquire) && ring.ready_len() == 0 {
                    break;
                }
                // Nothing yet. Frames are ready well before they are due, so sleep until the
                // next one is (a paced model wakes a little before, for its precise wait). A
                // frame that is nearly due when published, or the end, unparks this thread.
                let wake_at = if burst {
                    next_due
                } else {
                    next_due.saturating_sub(PACED_WAKE_EARLY)
                };
                let left = wake_at.saturating_since(self.clock.now());
                let nap = if left.is_zero() { IDLE_PARK } else { left };
                std::thread::park_timeout(nap.min(IDLE_PARK));
                continue;
            };
            self.send_frame(&mut slot, stop, c);
            next_due = sched.send_time(slot.epoch + tframe, 0);
            ring.recycle(slot);
        }
    }

    fn send_frame(&mut self, slot: &mut FrameSlot, stop: &AtomicBool, c: &PacerCounters) {
        let n = slot.npackets;
        if n == 0 {
            return;
        }
        let sched = self.schedule;
        let epoch = slot.epoch;
        if slot.ready_at > sched.send_time(epoch, 0) {
            self.r.frames_not_ready += 1;
        }
        let burst = sched.sender_type() == SenderType::Burst;
        let window = self.s.batch_window;
        let mut k = 0;
        let mut first_send: Option<Timestamp> = None;
        let mut worst_late = Duration::ZERO;
        let mut sent_total = 0usize;
        while k < n {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let due = sched.send_time(epoch, k as u32);
            let now = self.wait_until(due);
            let end = if burst {
                n
            } else {
                let limit = now.max(due) + window;
                let max = k
                    .saturating_add(self.max_batch.min(GSO_MAX_SEGMENTS))
                    .min(n);
                let mut j = k + 1;
                while j < max && sched.send_time(epoch, j as u32) <= limit {
                    j += 1;
                }
                j
            };
            if self.s.send_time_ext {
                let wall = self.clock.wall();
                for i in k..end {
                    patch_send_time(slot.packet_mut(i), wall);
                }
            }
            first_send.get_or_insert(now);
            let sent = self.send_range(slot, k, end);
            sent_total += sent;
            c.packets.fetch_add(sent as u64, Ordering::Relaxed);
            c.bytes
                .fetch_add(slot.wire_bytes(k, k + sent), Ordering::Relaxed);
            let late = now.saturating_since(due);
            worst_late = worst_late.max(late);
            self.r.batches += 1;
            self.r.batch_lateness.record(nanos(late));
            for i in k..end {
                let d = sched.send_time(epoch, i as u32);
                self.r.send_lateness.record(nanos(now.saturating_since(d)));
            }
            c.max_late_ns.fetch_max(nanos(late), Ordering::Relaxed);
            self.thread.follow_load(now);
            k = end;
        }
        let done = self.clock.now();
        if let Some(t) = first_send {
            self.r
                .frame_send_time
                .record(nanos(done.saturating_since(t)));
        }
        // Payload octets of what left (a frame cut short counts its share).
        let octets = slot.payload_bytes * sent_total as u64 / n as u64;
        c.payload_octets.fetch_add(octets, Ordering::Relaxed);
        if worst_late > self.s.late_threshold {
            c.late_frames.fetch_add(1, Ordering::Relaxed);
        }
        c.frames.fetch_add(1, Ordering::Relaxed);
    }

    /// Waits for `due`; returns the time the wait ended.
    fn wait_until(&mut self, due: Timestamp) -> Timestamp {
        self.thread.wait_until(self.clock, due)
    }

    /// Sends packets `a..b`; returns how many left.
    fn send_range(&mut self, slot: &FrameSlot, a: usize, b: usize) -> usize {
        let result = if slot.uniform {
            self.sender
                .send_segments(slot.span(a, b), slot.stride())
                .map_err(|e| (e.sent, e))
        } else {
            let mut packets: [&[u8]; GSO_MAX_SEGMENTS] = [&[]; GSO_MAX_SEGMENTS];
            let mut sent = 0;
            let mut err = None;
            for start in (a..b).step_by(GSO_MAX_SEGMENTS) {
                let end = (start + GSO_MAX_SEGMENTS).min(b);
                for (p, i) in packets.iter_mut().zip(start..end) {
                    *p = slot.packet(i);
                }
                match self.sender.send_batch(&packets[..end - start]) {
                    Ok(m) => sent += m,
                    Err(e) => {
                        sent += e.sent;
                        err = Some(e);
                        break;
                    }
                }
            }
            match err {
                None => Ok(sent),
                Some(e) => Err((sent, e)),
            }
        };
        match result {
            Ok(n) => n,
            Err((sent, e)) => {
                self.r.send_errors += 1;
                // Only the first error is kept as text: repeated errors (ENOBUFS under load)
                // must not allocate in the pacing thread.
                if self.r.last_send_error.is_none() {
                    self.r.last_send_error = Some(e.to_string());
                }
                sent
            }
        }
    }

    /// Most packets in one send call (unbounded for a burst).
    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    pub fn finish(mut self) -> PacerResult {
        let t = self.thread.report(self.clock);
        self.r.grant = t.grant;
        self.r.memory = t.memory;
        self.r.cpu_s = t.cpu_s;
        self.r.wait_modes = t.wait_modes;
        self.r.throttle_guard_trips = t.throttle_guard_trips;
        self.r.max_batch = (self.max_batch != usize::MAX).then_some(self.max_batch);
        self.r
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
