//! One raw-video stream at run time, as the pacing cores run it: [`RawStreamRt`] is what its
//! producer, its pacing thread and its owner share; [`RawCursor`] is its send step, which a
//! core's loop (`metronome_rt::pacing::Core`, the loop every MPEG-TS stream runs on too) calls job by
//! job.
//!
//! Each frame's packets leave at their [`FrameSchedule`] times, batched into one GSO call for
//! all packets due within the batch window after the one waited for (a burst sends the whole
//! frame in one [`RawOut::send_segments`]). A batch never holds more packets than the model
//! lets arrive at once: CMAX − 1 of its class (ST 2110-21: n packets at one instant raise
//! Cinst to n − 1, and one more may still be in the bucket). Every batch is a job of the core:
//! released at its first packet's time, due within the late threshold.
//!
//! A frame leaves whole or not at all (ST 2110 receivers want whole frames): its batches go
//! into the session as one frame ([`Input::Frame`]). Under the drop-late policy a frame whose
//! first batch is too late when its turn comes is dropped whole, every batch of it at once;
//! once its first batch has left, the rest follow, late if need be, and are never dropped. A
//! packet that is overdue when the cursor gets to it goes out at once with the others that
//! are overdue (catching up within the frame keeps its latency bounded); its lateness is
//! recorded, and a frame whose send calls started more than the late threshold after they were
//! due counts as a late frame. Nothing allocates per frame or per packet (the error message of
//! a failed send excepted).

use super::outlet::RawOut;
use metronome_rt::clock::Clock;
use metronome_rt::frame_ring::{FrameRing, FrameSlot};
use metronome_rt::pacing::WaitPolicy;
use metronome_rt::pacing::{Lane, Load, Sent};
use metronome_rt::pacing::{PacingThreadConfig, PacingThreadReport};
use metronome_rt::sync::lock;
use metronome_rt::udp::GSO_MAX_SEGMENTS;
use metronome_sched::st2110::{batch_end, max_batch};
use metronome_sched::{FrameSchedule, LatePolicy, SenderType, WaitSelectorStats};
use metronome_session::sender::{Input, JobTimes, Queued, SenderSession, Transmit};
use metronome_time::{Distribution, Timestamp};
use metronome_wire::rfc4175::shift_sequence;
use metronome_wire::rtp::patch_send_time;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Spin before a burst's due time: none. A burst waits once a frame, with
/// milliseconds to spare against its latency target; an absolute sleep's wake-up delay (tens
/// of µs here) costs less than spinning through it.
const BURST_SPIN_NS: u64 = 0;

/// How a raw stream's packets are batched and judged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PacerSettings {
    /// Packets due within this window after the one waited for go in the same send call.
    pub batch_window: Duration,
    /// A frame whose send calls start later than this after they were due is late.
    pub late_threshold: Duration,
    /// Patch the send-time element (the payloader leaves room for it) into every packet.
    pub send_time_ext: bool,
    /// What is done with late frames and batches (the session's pacing follows it too).
    pub late: LatePolicy,
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
    /// Frames not sent at all, dropped whole: later than the late policy allows when their
    /// turn came (or refused by the session).
    pub frames_dropped: AtomicU64,
    /// The packets those frames held (none of a frame that began to leave is ever dropped).
    pub packets_dropped: AtomicU64,
    /// Worst batch lateness since the status line last took it.
    pub max_late_ns: AtomicU64,
}

/// What a finished raw stream's pacing measured.
pub struct PacerResult {
    pub grant: metronome_rt::thread::GrantView,
    pub memory: metronome_rt::thread::MemoryLock,
    pub cpu_s: f64,
    pub stats: RawSendStats,
    pub wait_modes: WaitSelectorStats,
    pub throttle_guard_trips: u64,
    /// Most packets in one send call, if limited (not for a burst).
    pub max_batch: Option<usize>,
}

impl PacerResult {
    /// The stream's measurements and its pacing thread's report, together.
    pub fn new(rt: &RawStreamRt, thread: PacingThreadReport) -> Self {
        let stats = std::mem::replace(&mut *lock(&rt.stats), RawSendStats::new());
        PacerResult {
            grant: thread.grant,
            memory: thread.memory,
            cpu_s: thread.cpu_s,
            stats,
            wait_modes: thread.wait_modes,
            throttle_guard_trips: thread.throttle_guard_trips,
            max_batch: (rt.max_batch != usize::MAX).then_some(rt.max_batch),
        }
    }
}

/// The pacing thread's set-up for a raw stream of `schedule`: `base`, adjusted to the model.
pub fn thread_config(base: PacingThreadConfig, schedule: &FrameSchedule) -> PacingThreadConfig {
    let mut t = base;
    if schedule.sender_type() == SenderType::Burst {
        t.waiter.min_margin_ns = BURST_SPIN_NS;
        t.waiter.max_margin_ns = BURST_SPIN_NS;
        t.waiter.initial_margin_ns = BURST_SPIN_NS;
        // A burst pacer wakes once a frame: sleeping then spinning costs next to nothing, and
        // one late wake-up among 25 a second would make the selector busy-poll a whole core
        // for 20 s. The paced models follow the load.
        if t.wait == WaitPolicy::Auto {
            t.wait = WaitPolicy::SleepSpin;
        }
    } else {
        // A packet late by less than half the packet spacing stays within the model's limits
        // (it can only meet the next one, raising Cinst by one): sleeping is good enough at
        // low packet rates, and the selector should not busy-poll for them.
        let trs = schedule.format().trs(schedule.read_schedule());
        t.wait_selector.late_threshold = t.wait_selector.late_threshold.max(trs / 2);
    }
    t
}

/// What the cursor measures as it sends; taken by the owner when the stream ends.
pub struct RawSendStats {
    pub send_lateness: Distribution,
    pub batch_lateness: Distribution,
    pub frame_send_time: Distribution,
    pub batches: u64,
    pub frames_not_ready: u64,
    pub send_errors: u64,
    pub last_send_error: Option<String>,
}

impl RawSendStats {
    fn new() -> Self {
        RawSendStats {
            send_lateness: Distribution::new(),
            batch_lateness: Distribution::new(),
            frame_send_time: Distribution::new(),
            batches: 0,
            frames_not_ready: 0,
            send_errors: 0,
            last_send_error: None,
        }
    }
}

/// The shared state of one running raw stream.
pub struct RawStreamRt {
    pub id: u64,
    pub ring: FrameRing,
    pub out: RawOut,
    pub schedule: FrameSchedule,
    pub settings: PacerSettings,
    /// Most packets in one send call.
    pub max_batch: usize,
    /// What it has sent so far, and how it is stopped from outside (an RTSP session).
    pub ctl: Arc<RawControl>,
    /// The stream's send side, batch by batch: when each leaves (on time, late, or dropped
    /// by the late policy), jobs and deadlines, RTCP. Locked per frame and per batch by the
    /// pacing thread, and now and then by the RTCP side.
    pub session: Mutex<SenderSession>,
    /// Set by the owner: stop after the batch in hand.
    pub stop: AtomicBool,
    /// Set by the producer when the source ended or failed.
    pub producer_done: AtomicBool,
    /// Set by the pacing thread when it has let go of the stream.
    pub finished: AtomicBool,
    /// Locked once a batch by the pacing thread, at the end by the owner.
    pub stats: Mutex<RawSendStats>,
}

impl RawStreamRt {
    pub fn new(
        id: u64,
        ring: FrameRing,
        out: RawOut,
        schedule: FrameSchedule,
        settings: PacerSettings,
        ctl: Arc<RawControl>,
        session: SenderSession,
    ) -> Self {
        RawStreamRt {
            id,
            ring,
            out,
            max_batch: max_batch(&schedule),
            schedule,
            settings,
            ctl,
            session: Mutex::new(session),
            stop: AtomicBool::new(false),
            producer_done: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            stats: Mutex::new(RawSendStats::new()),
        }
    }

    /// Relative deadline of each batch (its priority under deadline-monotonic scheduling).
    pub fn deadline(&self) -> Duration {
        self.settings.late_threshold
    }

    /// Where packet `k`'s batch ends (exclusive), see [`batch_end`].
    fn batch_end(&self, epoch: Timestamp, k: usize, n: usize) -> usize {
        batch_end(
            &self.schedule,
            self.settings.batch_window,
            GSO_MAX_SEGMENTS,
            epoch,
            k,
            n,
        )
    }
}

/// The frame in hand and how far through it the cursor is.
struct InHand {
    slot: FrameSlot,
    /// The next batch: packets `starts[b]..starts[b + 1]`.
    b: usize,
    first_send: Option<Timestamp>,
    worst_late: Duration,
    sent: usize,
}

/// The sending side of one raw stream, owned by the thread that sends it: at most one frame in
/// hand, its batches queued in the session. Allocates nothing after [`RawCursor::new`].
pub struct RawCursor {
    hand: Option<InHand>,
    /// Where each batch of the frame in hand starts, and its end.
    starts: Vec<usize>,
    /// The frame's batches as the session queues them.
    entries: Vec<Queued>,
}

impl RawCursor {
    /// A cursor for frames of up to `max_packets` packets.
    pub fn new(max_packets: usize) -> Self {
        RawCursor {
            hand: None,
            starts: Vec::with_capacity(max_packets + 1),
            entries: Vec::with_capacity(max_packets),
        }
    }

    /// Takes the next frame from the ring if none is in hand (its batches into the session),
    /// and says when the next batch may leave. A frame whose first packet is already later
    /// than the late policy allows is dropped whole: a partial frame helps no receiver.
    pub fn load(&mut self, rt: &RawStreamRt, now: Timestamp) -> Load {
        if rt.stop.load(Ordering::Relaxed) {
            return Load::Done;
        }
        let sched = rt.schedule;
        let mut session = lock(&rt.session);
        while self.hand.is_none() {
            let Some(slot) = rt.ring.next_ready() else {
                if rt.producer_done.load(Ordering::Acquire) && rt.ring.ready_len() == 0 {
                    let _ = session.handle_input(now, Input::SourceEnded);
                    return Load::Done;
                }
                // Between frames the queue is empty by design: not an underrun (a frame that
                // comes late is counted as not ready).
                return Load::Empty;
            };
            let n = slot.npackets;
            let due = sched.send_time(slot.epoch, 0);
            let too_late = match rt.settings.late {
                LatePolicy::DropLate { after } => now > due + after,
                LatePolicy::CatchUp { .. } => false,
            };
            if n == 0 || too_late {
                if too_late {
                    drop_whole(rt, &mut session, now, n);
                }
                rt.ring.recycle(slot);
                continue;
            }
            if slot.ready_at > due {
                lock(&rt.stats).frames_not_ready += 1;
            }
            if !self.queue_frame(rt, &mut session, &slot, now) {
                rt.ring.recycle(slot);
                continue;
            }
            self.hand = Some(InHand {
                slot,
                b: 0,
                first_send: None,
                worst_late: Duration::ZERO,
                sent: 0,
            });
        }
        let (Some(job), Some(at)) = (session.head_job(), session.next_send()) else {
            return Load::Empty;
        };
        Load::Ready(JobTimes {
            release: job.release.max(at),
            deadline: job.deadline,
        })
    }

    /// Cuts the frame into batches and queues them in the session as one frame; false if
    /// the session refused it (a producer out of due order), which is then dropped whole.
    fn queue_frame(
        &mut self,
        rt: &RawStreamRt,
        session: &mut SenderSession,
        slot: &FrameSlot,
        now: Timestamp,
    ) -> bool {
        let (n, epoch) = (slot.npackets, slot.epoch);
        self.starts.clear();
        let mut k = 0;
        while k < n {
            self.starts.push(k);
            k = rt.batch_end(epoch, k, n);
        }
        self.starts.push(n);
        let payload = |a: usize| slot.payload_bytes * a as u64 / n as u64;
        self.entries.clear();
        self.entries.extend(self.starts.windows(2).map(|w| {
            let (a, b) = (w[0], w[1]);
            Queued {
                id: a as u32,
                packets: (b - a) as u32,
                due: rt.schedule.send_time(epoch, a as u32),
                wire_len: u32::try_from(slot.wire_bytes(a, b)).unwrap_or(u32::MAX),
                payload_len: u32::try_from(payload(b) - payload(a)).unwrap_or(u32::MAX),
                seq: metronome_wire::rtp::sequence_of(slot.packet(a)),
            }
        }));
        if session
            .handle_input(now, Input::Frame(&self.entries))
            .is_err()
        {
            drop_whole(rt, session, now, n);
            return false;
        }
        true
    }

    /// Sends (or drops, as the session says) the next batch of the frame in hand, if it is due
    /// at the clock's now; `None` if there is no frame in hand.
    pub fn send(&mut self, rt: &RawStreamRt, clock: &Clock) -> Option<Sent> {
        let h = self.hand.as_mut()?;
        let now = clock.now();
        let k = self.starts[h.b];
        let (t, end) = {
            let mut session = lock(&rt.session);
            let t = match session.poll_transmit(now) {
                Some(t) => t,
                None => {
                    let deadline = session.head_job().map_or(now, |j| j.deadline);
                    let release = session.next_send().unwrap_or(now);
                    return Some(Sent::NotYet(JobTimes { release, deadline }));
                }
            };
            h.b += 1;
            let last = self.starts.len() - 1;
            match t {
                Transmit::Send { .. } => join_due_batches(rt, &mut session, &self.starts, h, now),
                Transmit::Drop { .. } => {
                    // The frame's first batch came too late: the session drops the rest of
                    // the frame with it, at once.
                    while h.b < last {
                        let next = session.poll_transmit(now);
                        debug_assert!(matches!(next, Some(Transmit::Drop { .. })), "{next:?}");
                        h.b += 1;
                    }
                }
            }
            (t, self.starts[h.b])
        };
        let c = &rt.ctl.counters;
        let result = match t {
            Transmit::Send { late, renumber, .. } => {
                // Merged batches share it: no drop lies between them.
                if renumber != 0 {
                    for i in k..end {
                        shift_sequence(h.slot.packet_mut(i), renumber);
                    }
                }
                if rt.settings.send_time_ext {
                    let wall = clock.wall();
                    for i in k..end {
                        patch_send_time(h.slot.packet_mut(i), wall);
                    }
                }
                h.first_send.get_or_insert(now);
                let mut stats = lock(&rt.stats);
                let sent = send_range(&rt.out, &h.slot, k, end, &mut stats);
                if sent < end - k {
                    let _ = lock(&rt.session).handle_input(now, Input::SendFailed);
                }
                h.sent += sent;
                c.packets.fetch_add(sent as u64, Ordering::Relaxed);
                c.bytes
                    .fetch_add(h.slot.wire_bytes(k, k + sent), Ordering::Relaxed);
                h.worst_late = h.worst_late.max(late);
                stats.batches += 1;
                stats.batch_lateness.record(nanos(late));
                let epoch = h.slot.epoch;
                for i in k..end {
                    let d = rt.schedule.send_time(epoch, i as u32);
                    stats.send_lateness.record(nanos(now.saturating_since(d)));
                }
                c.max_late_ns.fetch_max(nanos(late), Ordering::Relaxed);
                Sent::Sent(late)
            }
            Transmit::Drop { .. } => Sent::Dropped,
        };
        if h.b + 1 == self.starts.len() {
            let n = h.slot.npackets;
            if let Some(t) = h.first_send {
                let done = clock.now();
                lock(&rt.stats)
                    .frame_send_time
                    .record(nanos(done.saturating_since(t)));
                // Payload octets of what left (a frame cut short counts its share).
                let octets = h.slot.payload_bytes * h.sent as u64 / n as u64;
                c.payload_octets.fetch_add(octets, Ordering::Relaxed);
                if h.worst_late > rt.settings.late_threshold {
                    c.late_frames.fetch_add(1, Ordering::Relaxed);
                }
                c.frames.fetch_add(1, Ordering::Relaxed);
            } else {
                // Dropped whole by the session (its batches took no sequence number).
                c.frames_dropped.fetch_add(1, Ordering::Relaxed);
                c.packets_dropped.fetch_add(n as u64, Ordering::Relaxed);
            }
            if let Some(h) = self.hand.take() {
                rt.ring.recycle(h.slot);
            }
        }
        Some(result)
    }

    /// Gives the frame in hand back to the ring (a frame cut short counts as sent, in part).
    pub fn release(&mut self, rt: &RawStreamRt) {
        if let Some(h) = self.hand.take() {
            if h.sent > 0 && h.sent < h.slot.npackets {
                let c = &rt.ctl.counters;
                let octets = h.slot.payload_bytes * h.sent as u64 / h.slot.npackets as u64;
                c.payload_octets.fetch_add(octets, Ordering::Relaxed);
                c.frames.fetch_add(1, Ordering::Relaxed);
            }
            rt.ring.recycle(h.slot);
        }
    }
}

/// A raw-video (RFC 4175) stream as a pacing core runs it: frames in batches.
pub struct RawLane {
    rt: Arc<RawStreamRt>,
    cursor: RawCursor,
}

impl RawLane {
    /// The lane, ready for `core::Command::Add`.
    pub fn boxed(rt: Arc<RawStreamRt>) -> Box<dyn Lane> {
        let cursor = RawCursor::new(rt.ring.max_packets());
        Box::new(RawLane { rt, cursor })
    }
}

impl Lane for RawLane {
    fn id(&self) -> u64 {
        self.rt.id
    }
    fn deadline(&self) -> Duration {
        self.rt.deadline()
    }
    fn load(&mut self, now: Timestamp) -> Load {
        self.cursor.load(&self.rt, now)
    }
    fn send(&mut self, clock: &Clock) -> Option<Sent> {
        self.cursor.send(&self.rt, clock)
    }
    fn finish(&mut self) {
        self.cursor.release(&self.rt);
        self.rt.finished.store(true, Ordering::Release);
    }
}

/// A frame of `packets` dropped whole before any of it was queued: counted, and its packets
/// take no sequence number.
fn drop_whole(rt: &RawStreamRt, session: &mut SenderSession, now: Timestamp, packets: usize) {
    let c = &rt.ctl.counters;
    c.frames_dropped.fetch_add(1, Ordering::Relaxed);
    c.packets_dropped
        .fetch_add(packets as u64, Ordering::Relaxed);
    let packets = u32::try_from(packets).unwrap_or(u32::MAX);
    let _ = session.handle_input(now, Input::Discarded { packets });
}

/// After batch `h.b − 1` was handed out to send at `now`: a late wake-up finds more packets
/// due, and the batches due by now plus the batch window join the same send call, as long as
/// it stays within the model's burst limit (CMAX − 1) and one GSO call. A batch of a frame
/// that began to leave is never dropped (the session keeps frames whole).
fn join_due_batches(
    rt: &RawStreamRt,
    session: &mut SenderSession,
    starts: &[usize],
    h: &mut InHand,
    now: Timestamp,
) {
    let k = starts[h.b - 1];
    let most = rt.max_batch.min(GSO_MAX_SEGMENTS);
    while h.b + 1 < starts.len() && starts[h.b + 1] - k <= most {
        let due = session.next_send().unwrap_or(Timestamp::MAX);
        if due > now + rt.settings.batch_window {
            break;
        }
        match session.poll_transmit(now.max(due)) {
            Some(Transmit::Send { .. }) => h.b += 1,
            Some(Transmit::Drop { .. }) => {
                unreachable!("SenderSession never drops a batch of a frame that began to leave")
            }
            None => break,
        }
    }
}

/// Sends packets `a..b` of `slot`; returns how many left.
fn send_range(
    out: &RawOut,
    slot: &FrameSlot,
    a: usize,
    b: usize,
    stats: &mut RawSendStats,
) -> usize {
    let result = if slot.uniform {
        out.send_segments(slot.span(a, b), slot.stride())
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
            match out.send_batch(&packets[..end - start]) {
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
            stats.send_errors += 1;
            // Only the first error is kept as text: repeated errors (ENOBUFS under load) must
            // not allocate in the pacing thread.
            if stats.last_send_error.is_none() {
                stats.last_send_error = Some(e.to_string());
            }
            sent
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What other threads see of a running raw sender, and how they stop it (an RTSP session's
/// PAUSE and TEARDOWN).
#[derive(Default)]
pub struct RawControl {
    /// Set to stop; the sender ends after the frame it is sending.
    pub stop: AtomicBool,
    /// Stop without RTCP BYE (a pause: the source is not leaving).
    pub quiet: AtomicBool,
    /// What the pacer has sent so far.
    pub counters: PacerCounters,
    /// RTCP receiver reports heard so far (liveness of an RTSP session).
    pub receiver_reports: AtomicU64,
    /// Once the sender has ended: the sender reports its receivers may still echo, oldest
    /// first, for the stream that continues it (`RawSenderConfig::earlier_reports`).
    pub sent_reports: std::sync::Mutex<Vec<u32>>,
}
