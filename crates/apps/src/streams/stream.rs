//! One admitted stream at run time: what its producer, its pacing thread and the control side
//! share, and the per-stream send step ([`Cursor`]) that every scheduling policy runs.
//!
//! What a stream does between producer and socket is its sans-IO
//! [`SenderSession`]: when each packet leaves (on
//! time, catching up after a stall, or dropped), which job it belongs to and whether that job
//! met its deadline, RTCP. The cursor only moves slots from the ring into the session, and
//! sends what the session says is due.

use super::outlet::MediaOut;
use super::protection_wait::{Protection, ProtectionWait};
use super::rate_knob::RateKnob;
use metronome_rt::clock::Clock;
use metronome_rt::pacing::{Lane, Load, Sent};
use metronome_rt::ring::{PacketRing, Slot};
use metronome_rt::sync::lock;
use metronome_sched::TaskParams;
use metronome_session::repair::Outlet;
use metronome_session::sender::{Input, JobTimes, Queued, RateLimits, SenderSession, Transmit};
use metronome_time::{Distribution, Timestamp};
use metronome_wire::rtp::{patch_send_time, shift_sequence};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

/// Counters a stream's threads publish; read at any time by the control side without a lock.
#[derive(Default)]
pub struct StreamCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    pub payload_octets: AtomicU64,
    pub send_errors: AtomicU64,
    /// Times the sender found nothing to send while the stream was running (the producer fell
    /// behind: packets go late).
    pub underruns: AtomicU64,
    /// Times the producer found the ring full. File and test sources are read on demand, so the
    /// producer just waits; a live capture source would have to drop here.
    pub overruns: AtomicU64,
    pub jobs: AtomicU64,
    /// Jobs whose last packet left after the job's absolute deadline.
    pub deadline_misses: AtomicU64,
    /// Frames a live source skipped to keep up with real time (its producer fell behind).
    pub frames_skipped: AtomicU64,
    /// Worst lateness since the status line last took it, ns.
    pub max_late_ns: AtomicU64,
    /// Rate changes the source refused (the control side checks the range first, so these
    /// are not expected).
    pub rate_refusals: AtomicU64,
}

/// The shared state of one running stream.
pub struct StreamRt {
    pub id: u64,
    pub name: String,
    pub task: TaskParams,
    /// The first due time.
    pub epoch: Timestamp,
    pub ring: PacketRing,
    /// Where every packet goes: one UDP socket per `rtp://` destination, or an RTSP session's
    /// transport.
    pub outputs: Vec<MediaOut>,
    pub send_time_ext: bool,
    pub counters: StreamCounters,
    /// The stream's send side. Locked per packet by the one thread that sends the stream, and
    /// now and then by the RTCP thread and the control side.
    pub session: Mutex<SenderSession>,
    /// Set by the control side: the stream is being removed.
    pub stop: AtomicBool,
    /// Set by the producer when the source ended or failed.
    pub producer_done: AtomicBool,
    /// Set by a server that stops: no more media, as if the source had ended here (the
    /// stream still answers NACKs while they can be of use, then ends).
    pub media_stop: AtomicBool,
    /// Set by the sending thread when it has let go of the stream.
    pub finished: AtomicBool,
    /// Set by the RTCP thread when the rate rose while a packet waited for its time at the
    /// old rate: the sending thread asks again when it may leave ([`Cursor::sooner`]).
    pub sooner: AtomicBool,
    /// Why the producer stopped early, if it failed.
    pub producer_error: Mutex<Option<String>>,
    /// What one send call cost per destination, ns, since the control side last took it
    /// (admission budgets it; `streams::rtcp` compares).
    pub send_cost: Mutex<Distribution>,
    /// The rate knob: what the source is to follow (fixed until [`StreamRt::with_rate`]).
    pub rate: RateKnob,
    /// What the source had to say that did not stop it (a truncated file), not yet taken by
    /// the server; at most [`WARNINGS_HELD`].
    pub warnings: Mutex<Vec<String>>,
    /// SRTP, when the stream was declared with a key: every packet and report protected.
    pub srtp: Option<super::srtp::StreamSrtp>,
    /// Where a stream with FEC sends it, per destination: column FEC (the media's port + 2)
    /// and row FEC (+ 4); empty without.
    pub fec_outputs: Vec<[MediaOut; 2]>,
    /// When each packet left, Unix ns, if the server keeps them
    /// (`ServerConfig::keep_send_times`); at most [`SEND_TIMES_KEPT`], the rest not kept.
    pub send_times: Option<SendTimes>,
}

/// Send times a stream keeps at most: 2^18, 17 minutes of seed 002's 250 packets a second
/// (2 MiB, reserved when the stream starts so that the pacing thread never allocates).
pub const SEND_TIMES_KEPT: usize = 1 << 18;

/// When each packet of a stream left, Unix ns, shared with its status.
pub type SendTimes = Arc<Mutex<Vec<u64>>>;

/// Warnings a stream holds for the server to take.
pub const WARNINGS_HELD: usize = 8;

impl StreamRt {
    /// A stream about to start: its ring of `ring_slots` slots of `slot_size` bytes, its
    /// session, where its packets go.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: u64,
        name: String,
        task: TaskParams,
        epoch: Timestamp,
        ring: PacketRing,
        outputs: Vec<MediaOut>,
        send_time_ext: bool,
        session: SenderSession,
    ) -> Self {
        StreamRt {
            id,
            name,
            task,
            epoch,
            ring,
            outputs,
            send_time_ext,
            counters: StreamCounters::default(),
            session: Mutex::new(session),
            stop: AtomicBool::new(false),
            producer_done: AtomicBool::new(false),
            media_stop: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            sooner: AtomicBool::new(false),
            producer_error: Mutex::new(None),
            send_cost: Mutex::new(Distribution::new()),
            rate: RateKnob::new(
                task.bitrate_bps,
                RateLimits {
                    ts_per_wire: 1.0,
                    range: None,
                    ceiling: task.bitrate_bps,
                },
            ),
            warnings: Mutex::new(Vec::new()),
            srtp: None,
            fec_outputs: Vec::new(),
            send_times: None,
        }
    }

    /// Keeps when each packet leaves (see [`StreamRt::send_times`]).
    pub fn with_send_times(mut self, keep: bool) -> Self {
        self.send_times = keep.then(|| Arc::new(Mutex::new(Vec::with_capacity(SEND_TIMES_KEPT))));
        self
    }

    /// Notes a warning of the source's (dropped when [`WARNINGS_HELD`] are waiting).
    pub fn warn(&self, w: String) {
        let mut held = self.warnings.lock().unwrap_or_else(|e| e.into_inner());
        if held.len() < WARNINGS_HELD {
            held.push(w);
        }
    }

    /// The stream with a rate knob its source can follow.
    pub fn with_rate(mut self, rate: RateKnob) -> Self {
        self.rate = rate;
        self
    }

    /// The stream's FEC goes to `outputs` (column, row) per destination.
    pub fn with_fec_outputs(mut self, outputs: Vec<[MediaOut; 2]>) -> Self {
        self.fec_outputs = outputs;
        self
    }

    /// Sends a FEC packet of `direction` to every destination's FEC port; `false` if any
    /// send failed.
    pub fn send_fec(&self, packet: &[u8], direction: metronome_wire::fec2022::Direction) -> bool {
        let lane = usize::from(direction == metronome_wire::fec2022::Direction::Row);
        let mut ok = true;
        for out in &self.fec_outputs {
            ok &= out[lane].send(packet);
        }
        ok
    }

    /// The stream sent as SRTP.
    pub fn with_srtp(mut self, srtp: Option<super::srtp::StreamSrtp>) -> Self {
        self.srtp = srtp;
        self
    }

    /// Sends one packet to every destination (protected once, for a stream with SRTP);
    /// `false` if any send failed.
    pub fn send_everywhere(&self, packet: &[u8]) -> bool {
        self.send_via(&self.outputs, packet)
    }

    /// Sends one packet (protected, for a stream with SRTP) to destination `outlet` alone;
    /// `false` if it failed or the stream has no such destination.
    pub fn send_to(&self, outlet: Outlet, packet: &[u8]) -> bool {
        self.outputs
            .get(outlet.0..=outlet.0)
            .is_some_and(|one| self.send_via(one, packet))
    }

    /// Sends one packet to each of `outs` (protected once, for a stream with SRTP); `false`
    /// if any send failed.
    fn send_via(&self, outs: &[MediaOut], packet: &[u8]) -> bool {
        // Every destination gets the packet, whatever happened to the ones before it.
        let all = |p: &[u8]| {
            let mut ok = true;
            for out in outs {
                ok &= out.send(p);
            }
            ok
        };
        match &self.srtp {
            None => all(packet),
            Some(s) => s.protect_rtp(packet, all).unwrap_or(false),
        }
    }

    /// [`StreamRt::send_everywhere`], its cost per destination noted in `send_cost` (what
    /// admission budgets; the overload watch compares).
    pub fn send_timed(&self, packet: &[u8]) -> bool {
        self.timed(self.outputs.len(), || self.send_everywhere(packet))
    }

    /// Runs `send` (to `destinations` places) and notes its cost per destination in
    /// `send_cost`.
    fn timed(&self, destinations: usize, send: impl FnOnce() -> bool) -> bool {
        let t0 = metronome_rt::clock::mono_ns();
        let ok = send();
        let took = metronome_rt::clock::mono_ns().saturating_sub(t0);
        if let Ok(mut d) = self.send_cost.try_lock() {
            d.record(took / destinations.max(1) as u64);
        }
        ok
    }

    /// Relative deadline.
    pub fn deadline(&self) -> Duration {
        self.task.deadline
    }
}

/// The sending side of one stream, owned by the thread that sends it. Holds at most one slot:
/// the packet the session has at the head of its queue; and the retransmissions and FEC
/// packets waiting for their time.
/// Allocates nothing once made.
pub struct Cursor {
    head: Option<Slot>,
    /// Whether the stream repairs (retransmissions come from the session).
    repairs: bool,
    /// The retransmissions and FEC packets the session hands out, waiting for their time
    /// (none for a stream that neither repairs nor makes FEC).
    waiting: ProtectionWait,
}

impl Cursor {
    /// The cursor of stream `rt`; with room for retransmissions (a slot's packet and RFC
    /// 4588's original sequence number) if the stream repairs, and for FEC packets if it
    /// makes them.
    pub fn new(rt: &StreamRt) -> Cursor {
        let (repairs, fec) = {
            let s = lock(&rt.session);
            (s.repairs(), s.fec_stats().is_some())
        };
        let rtx_room = metronome_wire::rtx::OSN_LEN * usize::from(repairs);
        let fec_room = metronome_wire::fec2022::FEC_HEADER_LEN * usize::from(fec);
        let room = if repairs || fec {
            rt.ring.slot_size() + rtx_room.max(fec_room)
        } else {
            0
        };
        Cursor {
            head: None,
            repairs,
            waiting: ProtectionWait::new(room),
        }
    }
}

impl Cursor {
    /// Takes the next packet from the ring into the session, if there is none in hand, and
    /// says when it may leave (or a waiting retransmission or FEC packet, if sooner) and
    /// which job it belongs to. With no packet in hand, waiting ones leave when due (the core
    /// looks at an idle lane every millisecond), and all of them once the stream is over.
    pub fn load(&mut self, rt: &StreamRt, now: Timestamp) -> Load {
        match self.load_media(rt, now) {
            Load::Ready(j) => Load::Ready(self.protection_first(j)),
            Load::Empty => {
                self.repair_while_idle(rt, now);
                self.send_due_protection(rt, now);
                Load::Empty
            }
            Load::Done => {
                self.send_due_protection(rt, Timestamp::MAX);
                Load::Done
            }
        }
    }

    /// `j`, released when the first waiting retransmission or FEC packet is due if that is sooner.
    fn protection_first(&self, j: JobTimes) -> JobTimes {
        JobTimes {
            release: self
                .waiting
                .next_due()
                .map_or(j.release, |f| f.min(j.release)),
            ..j
        }
    }

    fn load_media(&mut self, rt: &StreamRt, now: Timestamp) -> Load {
        let mut session = lock(&rt.session);
        if self.head.is_none() {
            // Told to stop its media: what the ring still holds is not sent.
            let stopped = rt.media_stop.load(Ordering::Acquire);
            let next = if stopped { None } else { rt.ring.next_ready() };
            match next {
                Some(slot) => {
                    let q = Queued {
                        id: slot.id,
                        packets: 1,
                        due: slot.release,
                        wire_len: slot.len as u32,
                        payload_len: slot.payload_len as u32,
                        seq: metronome_wire::rtp::sequence_of(slot.bytes()),
                    };
                    if session.handle_input(now, Input::Packet(q)).is_err() {
                        // Out of due order (a producer bug): the packet cannot keep its
                        // timestamp's promise, so it is not sent.
                        rt.counters.send_errors.fetch_add(1, Ordering::Relaxed);
                        rt.ring.recycle(slot);
                        return Load::Empty;
                    }
                    self.head = Some(slot);
                }
                None => {
                    let drained =
                        rt.producer_done.load(Ordering::Acquire) && rt.ring.occupancy() == 0;
                    if drained || stopped {
                        let _ = session.handle_input(now, Input::SourceEnded);
                        // The media ended: NACKs for its last packets are still answered
                        // (while idle) until the last one's play-out time.
                        if session.repairs_useful_until().is_some_and(|t| now <= t) {
                            return Load::Empty;
                        }
                        return Load::Done;
                    }
                    // The session counts this as an underrun once the stream has started.
                    let _ = session.poll_transmit(now);
                    publish_counts(rt, &session);
                    return Load::Empty;
                }
            }
        }
        times_in_hand(&session).map_or(Load::Empty, Load::Ready)
    }

    /// When the packet in hand may leave now, if the RTCP thread said its rate rose since it
    /// was loaded (`StreamRt::sooner`); `None` otherwise, or with no packet in hand.
    pub fn sooner(&mut self, rt: &StreamRt) -> Option<JobTimes> {
        if !rt.sooner.swap(false, Ordering::AcqRel) || self.head.is_none() {
            return None;
        }
        times_in_hand(&lock(&rt.session)).map(|j| self.protection_first(j))
    }

    /// Sends the packet in hand, to every destination, if the session says it is due at the
    /// clock's now; `None` if there was no packet in hand.
    pub fn send(&mut self, rt: &StreamRt, clock: &Clock) -> Option<Sent> {
        self.send_due_protection(rt, clock.now());
        // After those sends: the media packet's lateness counts them.
        let now = clock.now();
        let next_fec = self.waiting.next_due();
        let slot = self.head.as_mut()?;
        let t = {
            let mut session = lock(&rt.session);
            let t = session.poll_transmit(now);
            if t.is_none() {
                let deadline = session.head_job().map_or(now, |j| j.deadline);
                let release = session.next_send().unwrap_or(now);
                let release = next_fec.map_or(release, |f| f.min(release));
                return Some(Sent::NotYet(JobTimes { release, deadline }));
            }
            publish_counts(rt, &session);
            t
        };
        let c = &rt.counters;
        let sent = match t {
            Some(Transmit::Send { late, renumber, .. }) => {
                if renumber != 0 {
                    shift_sequence(slot.bytes_mut(), renumber as u16);
                }
                if rt.send_time_ext {
                    patch_send_time(slot.bytes_mut(), clock.wall());
                }
                if !rt.send_timed(slot.bytes()) {
                    c.send_errors.fetch_add(1, Ordering::Relaxed);
                    let _ = lock(&rt.session).handle_input(now, Input::SendFailed);
                }
                if let Some(times) = &rt.send_times {
                    let mut times = lock(times);
                    if times.len() < SEND_TIMES_KEPT {
                        times.push(clock.realtime_ns_from_timestamp(clock.now()));
                    }
                }
                c.max_late_ns.fetch_max(nanos(late), Ordering::Relaxed);
                c.packets.fetch_add(1, Ordering::Relaxed);
                c.bytes.fetch_add(slot.len as u64, Ordering::Relaxed);
                c.payload_octets
                    .fetch_add(slot.payload_len as u64, Ordering::Relaxed);
                Sent::Sent(late)
            }
            _ => Sent::Dropped,
        };
        if let Sent::Sent(_) = sent {
            self.keep_and_protect(rt, now);
        }
        if let Some(slot) = self.head.take() {
            rt.ring.recycle(slot);
        }
        Some(sent)
    }

    /// Keeps the packet just sent for retransmission, if the stream repairs, and XORs it into
    /// the stream's FEC, if it makes any. What it paid for and made waits, the session's
    /// spacing apart after it (`SenderSession::repair_spacing`, `fec_spacing`): a
    /// retransmission, if the stream's packets have paid for one
    /// ([`metronome_session::sender::SenderSession::poll_repair`]: repairs leave with the
    /// stream's packets, on its core, within what admission reserved), to the destinations;
    /// the FEC packets it completed, to their FEC ports.
    fn keep_and_protect(&mut self, rt: &StreamRt, now: Timestamp) {
        let Some(slot) = self.head.as_ref() else {
            return;
        };
        if !self.waiting.on() {
            return;
        }
        let wire_len = slot.len;
        // Behind (rare): the oldest leave now, before the session's lock is taken, until
        // there is room for what one packet makes (a retransmission, a row's and a column's).
        while self.waiting.room() < 3 {
            if let Some((what, packet)) = self.waiting.pop_due(Timestamp::MAX) {
                send_protection(rt, what, packet);
            }
        }
        let mut session = lock(&rt.session);
        session.keep_sent(slot.bytes(), slot.release);
        let (gap, half) = (
            session.repair_spacing(wire_len),
            session.fec_spacing(wire_len),
        );
        let mut at = self.waiting.last_due().map_or(now, |t| t.max(now));
        if self.repairs {
            if let Some(r) = session.poll_repair(now, at + gap, self.waiting.free()) {
                at += gap;
                self.waiting.commit(at, Protection::Rtx(r.outlet), r.len);
            }
        }
        while !self.waiting.is_full() {
            let Some((d, n)) = session.poll_fec(self.waiting.free()) else {
                break;
            };
            at += half;
            self.waiting.commit(at, Protection::Fec(d), n);
        }
    }

    /// With no packet of the stream waiting (the source is between frames, or has ended),
    /// what its packets have paid for leaves now, a repair's spacing apart
    /// ([`metronome_session::sender::SenderSession::repair_spacing`]), rather than wait for a
    /// packet that may not come.
    fn repair_while_idle(&mut self, rt: &StreamRt, now: Timestamp) {
        if !self.repairs {
            return;
        }
        let mut session = lock(&rt.session);
        if session.next_send().is_some() {
            return;
        }
        let gap = session.repair_spacing(rt.ring.slot_size());
        let mut at = self.waiting.last_due().map_or(now, |t| t.max(now));
        while !self.waiting.is_full() {
            let Some(r) = session.poll_repair(now, at + gap, self.waiting.free()) else {
                break;
            };
            at += gap;
            self.waiting.commit(at, Protection::Rtx(r.outlet), r.len);
        }
    }

    /// Sends the waiting retransmissions and FEC packets due by `now`, the session's lock not
    /// held while they go.
    fn send_due_protection(&mut self, rt: &StreamRt, now: Timestamp) {
        while let Some((what, packet)) = self.waiting.pop_due(now) {
            send_protection(rt, what, packet);
        }
    }

    /// Gives the packet in hand back to the ring (the stream is being removed, or ends at its
    /// duration). Retransmissions and FEC packets still waiting go now: they protect packets
    /// already sent (and the stream's counts say they were made).
    pub fn release(&mut self, rt: &StreamRt) {
        self.send_due_protection(rt, Timestamp::MAX);
        if let Some(slot) = self.head.take() {
            rt.ring.recycle(slot);
        }
    }
}

/// Copies the session's counts into the lock-free counters the control side reads.
fn publish_counts(rt: &StreamRt, session: &SenderSession) {
    let n = session.counts();
    let c = &rt.counters;
    c.underruns.store(n.underruns, Ordering::Relaxed);
    c.jobs.store(n.jobs, Ordering::Relaxed);
    c.deadline_misses
        .store(n.deadline_misses, Ordering::Relaxed);
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// An MPEG-TS (or coded-frame) stream as a pacing core runs it: its packets one at a time
/// through its sender session.
pub struct TsLane {
    rt: Arc<StreamRt>,
    cursor: Cursor,
}

impl TsLane {
    /// The lane, ready for `core::Command::Add`.
    pub fn boxed(rt: Arc<StreamRt>) -> Box<dyn Lane> {
        Box::new(TsLane {
            cursor: Cursor::new(&rt),
            rt,
        })
    }
}

/// The head packet's job, released when the session says it may leave.
fn times_in_hand(session: &SenderSession) -> Option<JobTimes> {
    let (job, at) = (session.head_job()?, session.next_send()?);
    Some(JobTimes {
        release: job.release.max(at),
        deadline: job.deadline,
    })
}

impl Lane for TsLane {
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
    fn sooner(&mut self, _now: Timestamp) -> Option<JobTimes> {
        self.cursor.sooner(&self.rt)
    }
    fn finish(&mut self) {
        self.cursor.release(&self.rt);
        self.rt.finished.store(true, Ordering::Release);
    }
}

/// Sends a retransmission to the destination whose receiver asked for it (or to every one),
/// or a FEC packet to every destination's FEC port; a failure is counted. What the send cost
/// per destination is noted beside the media's: admission budgets every packet the stream
/// sends, its repairs among them.
fn send_protection(rt: &StreamRt, what: Protection, packet: &[u8]) {
    let ok = match what {
        Protection::Rtx(Some(outlet)) => rt.timed(1, || rt.send_to(outlet, packet)),
        Protection::Rtx(None) => rt.send_timed(packet),
        Protection::Fec(direction) => {
            rt.timed(rt.fec_outputs.len(), || rt.send_fec(packet, direction))
        }
    };
    if !ok {
        rt.counters.send_errors.fetch_add(1, Ordering::Relaxed);
    }
}
