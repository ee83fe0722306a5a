//! [`SenderSession`]: one stream's whole send side, sans-IO.
//!
//! It owns everything a stream does between its producer and the socket:
//! - the queue of packets, held as slot ids (the bytes stay in the driver's slots: no copies);
//! - when each leaves: due times, the pacing model, catching up or dropping after a stall
//!   ([`metronome_sched::pacing`]), and the accounting of jobs and deadlines ([`JobClock`]);
//! - RTCP: sender reports and BYE out, receiver reports in ([`SenderReports`]);
//! - the rate knob: a [`RateController`] that may change the target rate at any time; the
//!   session follows it and tells the producer of each change through
//!   [`SessionEvent::RateChanged`], and of each report the controller computed its rate from
//!   through [`SessionEvent::RateReported`];
//! - statistics and events.
//!
//! A driver runs it like this, with whatever clock it has (real or virtual):
//!
//! ```text
//! handle_input(now, Input::Packet(..))     // the producer made a packet in slot `id`
//! poll_transmit(now) -> Transmit           // send slot `id` now (or give it back: dropped)
//! poll_rtcp(now, wall, buf) -> len         // a sender report is due
//! handle_input(now, Input::Rtcp { .. })    // a receiver report came in
//! poll_timeout() -> (when, Wake)           // sleep until then
//! poll_event() -> SessionEvent             // stalls, drops, misses, rate changes, receivers
//! ```
//!
//! Media and control are polled apart (`poll_transmit`, `poll_rtcp`) because a real-time driver
//! sends them from different threads: building an RTCP compound never delays a packet.
//!
//! Here: the session, its queue and what leaves when. What goes in and comes out (inputs,
//! transmits, events, statistics) is in `io`; what receivers send back (RTCP, the rate
//! controller it drives, the repairs it answers) in `feedback`.

use super::jobs::{JobClock, JobTimes};
use super::report::SenderReports;
use metronome_cc::RateController;
use metronome_sched::{Decision, PacingModel};
use metronome_time::{Bitrate, Distribution, NtpTime, Timestamp};
use metronome_wire::SeqNo;
use std::collections::VecDeque;
use std::time::Duration;

mod feedback;
mod io;

pub use io::{
    Input, InputError, Queued, Repair, SenderCounts, SenderSessionConfig, SenderStats,
    SessionEvent, Transmit, Wake,
};

const MAX_EVENTS: usize = 256;

/// A queued entry, and whether it shares the fate of the entry before it (a frame's later
/// entries: see [`Input::Frame`]).
#[derive(Clone, Copy, Debug)]
struct Entry {
    q: Queued,
    follows: bool,
}

/// One stream's send side, sans-IO: queue, pacing, jobs and deadlines, RTCP and the rate
/// controller. See the module docs for how a driver runs it.
pub struct SenderSession {
    queue: VecDeque<Entry>,
    capacity: usize,
    pacing: PacingModel,
    jobs: JobClock,
    reports: SenderReports,
    controller: Box<dyn RateController>,
    rate: Bitrate,
    /// When the head packet was last told to wait until.
    head_wait: Option<Timestamp>,
    last_due: Timestamp,
    stall_began: Option<Timestamp>,
    started: bool,
    empty_counted: bool,
    source_ended: bool,
    events: VecDeque<SessionEvent>,
    s: Counts,
    /// Packets dropped or discarded so far (wrapping): see `Transmit::Send::renumber`.
    renumber: u32,
    /// Whether the last entry to leave the queue was dropped (an entry that follows it in its
    /// frame is dropped too).
    last_dropped: bool,
    /// What left when, for a controller that reads per-packet feedback (GCC) or echoes of
    /// sequence numbers (TFRC, TFMCC).
    send_log: Option<Box<super::send_log::SendLog>>,
    /// Reported packets that were not in the log.
    feedback_unmatched: u64,
    /// Answers to NACKs, if the stream makes them ([`SenderSession::with_repair`]).
    repair: Option<Box<super::resend::Resend>>,
    /// SMPTE 2022-1 FEC, if the stream sends it ([`SenderSession::with_fec`]).
    fec: Option<Box<crate::repair::FecEncoder>>,
    /// Packets leave at the controller's rate ([`SenderSession::sending_at_rate`]).
    at_rate: Option<super::at_rate::AtRate>,
    /// Since when the rate of retransmissions and FEC is measured, and the wire bytes they
    /// had taken then (`feedback.rs`'s `media_share`).
    overhead_since: (Timestamp, u64),
    /// That rate as last measured, bit/s.
    overhead_bps: u64,
}

#[derive(Default)]
struct Counts {
    packets: u64,
    bytes: u64,
    payload_octets: u64,
    send_errors: u64,
    underruns: u64,
    queue_high_water: usize,
    rate_changes: u64,
    /// RTCP compounds with a report the rate controller computes its rate from.
    rate_reports: u64,
    /// The media's share of the target after the last of them.
    reported_rate: Option<Bitrate>,
    events_dropped: u64,
}

impl SenderSession {
    /// A stream whose RTP timestamps count from `epoch`, sending at the rate `controller` sets.
    pub fn new(
        cfg: SenderSessionConfig,
        epoch: Timestamp,
        controller: Box<dyn RateController>,
    ) -> Self {
        let rate = controller.target_rate();
        let controller_wants_log =
            controller.wants_packet_feedback() || controller.wants_send_times();
        let capacity = cfg.queue_capacity.max(1);
        SenderSession {
            queue: VecDeque::with_capacity(capacity),
            capacity,
            pacing: PacingModel::new(cfg.pacing, rate),
            jobs: JobClock::new(cfg.jobs, epoch),
            reports: SenderReports::new(cfg.reports, epoch),
            controller,
            rate,
            head_wait: None,
            last_due: Timestamp::ZERO,
            stall_began: None,
            started: false,
            empty_counted: false,
            source_ended: false,
            events: VecDeque::with_capacity(MAX_EVENTS),
            s: Counts::default(),
            renumber: 0,
            last_dropped: false,
            send_log: controller_wants_log.then(Box::default),
            feedback_unmatched: 0,
            repair: None,
            fec: None,
            at_rate: None,
            overhead_since: (epoch, 0),
            overhead_bps: 0,
        }
    }

    /// The stream's packets are due when they were made and leave at the rate controller's
    /// rate, each once the sender is free after the one before it (TFRC's and TFMCC's
    /// senders: see `at_rate.rs`); what the rate does not carry waits in the queue. For a
    /// source that says so ([`super::RtpSource::leaves_at_rate`]); `on` false: each packet
    /// leaves at its due time.
    pub fn sending_at_rate(mut self, on: bool) -> Self {
        self.at_rate = on.then(super::at_rate::AtRate::default);
        self
    }

    /// When the packet `q` at the head of the queue is due to leave: its due time, or while
    /// sending at the rate, no sooner than the sender is free.
    fn head_due(&self, q: &Queued) -> Timestamp {
        self.at_rate.map_or(q.due, |a| a.release(q.due))
    }

    /// Packets made and due by `now` that have not left: the sender's queue, as a source
    /// that scales its rate by it counts it (Evalvid-RA's VBR controller,
    /// [`super::RtpSource::note_queue`]).
    pub fn queued_due(&self, now: Timestamp) -> usize {
        self.queue
            .iter()
            .take_while(|e| e.q.due <= now)
            .map(|e| e.q.packets as usize)
            .sum()
    }

    /// The stream answers receivers' NACKs with retransmissions (RFC 4585, RFC 4588): the
    /// driver gives it every packet that left ([`SenderSession::keep_sent`]) and sends what
    /// [`SenderSession::poll_repair`] gives after each RTCP input.
    pub fn with_repair(mut self, cfg: super::resend::SenderRepair) -> Self {
        let media_time = self.reports.media_time();
        let ssrc = self.reports.config_ssrc();
        let resend = super::resend::Resend::new(cfg, ssrc, media_time, self.rate.as_bps());
        self.repair = Some(Box::new(resend));
        self
    }

    /// The stream continues an earlier one with its SSRC (an RTSP session's, after PAUSE and
    /// PLAY): receivers' reports that echo one of the earlier stream's sender reports
    /// (`earlier`, [`SenderReports::sent_reports`], oldest first) are taken.
    pub fn continuing(mut self, earlier: &[u32]) -> Self {
        self.reports.continue_from(earlier.iter().copied());
        self
    }

    /// The stream sends SMPTE 2022-1 FEC: the driver gives it every packet that left
    /// ([`SenderSession::keep_sent`]) and sends what [`SenderSession::poll_fec`] gives after
    /// each, column FEC to the media's port + 2, row FEC to + 4.
    pub fn with_fec(mut self, cfg: crate::repair::FecConfig) -> Self {
        let first = SeqNo(self.reports.config_ssrc().get().rotate_left(7) as u16);
        self.fec = Some(Box::new(crate::repair::FecEncoder::new(cfg, first)));
        self
    }

    /// Packet `packet` left as it is now (renumbered, stamped; before SRTP), due at `due`:
    /// kept for retransmission, if the stream repairs, and XORed into its FEC, if it has any.
    pub fn keep_sent(&mut self, packet: &[u8], due: Timestamp) {
        if let Some(r) = self.repair.as_mut() {
            r.sent(packet, due);
        }
        if let Some(f) = self.fec.as_mut() {
            f.push(packet);
        }
    }

    /// The next FEC packet to send now, written into `buf` (at least
    /// [`crate::repair::FecConfig::max_fec_packet`] + 12 bytes): its direction (columns go to
    /// the media's port + 2, rows to + 4) and length.
    pub fn poll_fec(
        &mut self,
        buf: &mut [u8],
    ) -> Option<(metronome_wire::fec2022::Direction, usize)> {
        self.fec.as_mut()?.poll(buf)
    }

    /// What the stream's FEC made, if it sends FEC.
    pub fn fec_stats(&self) -> Option<crate::repair::FecSendCounters> {
        self.fec.as_ref().map(|f| f.counters())
    }

    /// The next retransmission to send at `now`, written into `buf`: its length, and the
    /// destination it goes to (where its NACK came in, [`Input::Rtcp`]'s `outlet`: a stream's
    /// other destinations have the packet; or every one, [`Repair::outlet`]).
    /// Retransmissions are made when NACKs come in ([`Input::Rtcp`]) and leave with the
    /// stream's packets: a driver asks right after each packet it sent
    /// ([`SenderSession::keep_sent`]), and gets one when the stream's packets have paid for it
    /// (a quarter each, eight ahead at most: [`super::REPAIR_BURST`]). Sending at a rate
    /// controller's rate ([`SenderSession::sending_at_rate`]), a retransmission takes its
    /// time at that rate as a packet of the stream does, so the media and its repairs
    /// together keep to the controller's target. The driver sends it at `leaves` (a spacing
    /// after the packets before it, [`SenderSession::repair_spacing`]; not before `now`): one
    /// that could no longer make its deadline leaving then is dropped and counted.
    pub fn poll_repair(
        &mut self,
        now: Timestamp,
        leaves: Timestamp,
        buf: &mut [u8],
    ) -> Option<Repair> {
        let (len, outlet) = self.repair.as_mut()?.poll(leaves.max(now), buf)?;
        if let Some(a) = self.at_rate.as_mut() {
            a.on_repair(now, len as u32, self.rate);
        }
        Some(Repair { len, outlet })
    }

    /// How long after the packet before it (a media packet of `wire_len` bytes, or a packet
    /// waiting before it) a retransmission leaves: half a packet's time at the stream's rate
    /// (so that it leaves between the stream's packets, at most 5 ms), or at a rate
    /// controller's rate a whole packet's time, the time the sender is busy with that packet.
    pub fn repair_spacing(&self, wire_len: usize) -> std::time::Duration {
        let wire = u32::try_from(wire_len).unwrap_or(u32::MAX);
        match self.at_rate {
            Some(_) => super::at_rate::gap(wire, self.rate),
            None => crate::repair::fec_spacing(wire_len, self.rate.as_bps()),
        }
    }

    /// How long after the packet before it a FEC packet leaves: half a packet of `wire_len`
    /// bytes at the stream's rate, at most 5 ms ([`crate::repair::fec_spacing`]).
    pub fn fec_spacing(&self, wire_len: usize) -> std::time::Duration {
        crate::repair::fec_spacing(wire_len, self.rate.as_bps())
    }

    /// Until when a retransmission may still reach a viewer in time: the last play-out time
    /// of a packet the stream kept (`None` if it does not repair, or kept none). A driver
    /// whose stream's media ended keeps answering NACKs until then, as the simulator does
    /// through its drain.
    pub fn repairs_useful_until(&self) -> Option<Timestamp> {
        self.repair.as_ref()?.useful_until()
    }

    /// Whether the stream answers NACKs ([`SenderSession::with_repair`]).
    pub fn repairs(&self) -> bool {
        self.repair.is_some()
    }

    /// What the stream's repairs did, if it repairs.
    pub fn repair_stats(&self) -> Option<super::resend::ResendStats> {
        let unread = self.reports.nacks_unread();
        self.repair.as_ref().map(|r| r.stats(unread))
    }

    /// Takes one input at `now`. Only packets and frames can be refused (queue full, out of due
    /// order), and then nothing of them is queued.
    pub fn handle_input(&mut self, now: Timestamp, input: Input<'_>) -> Result<(), InputError> {
        match input {
            Input::Packet(p) => self.enqueue(std::slice::from_ref(&p))?,
            Input::Frame(entries) => self.enqueue(entries)?,
            Input::Rtcp {
                wall,
                from,
                outlet,
                data,
            } => self.handle_rtcp(now, wall, from, outlet, data),
            Input::SendFailed => self.s.send_errors += 1,
            Input::SourceEnded => self.source_ended = true,
            Input::SetRate(rate) => {
                self.controller.set_rate(rate);
                self.follow_controller(now);
            }
            Input::Discarded { packets } => self.renumber = self.renumber.wrapping_add(packets),
        }
        Ok(())
    }

    /// Queues `entries` as one frame, or none of them.
    fn enqueue(&mut self, entries: &[Queued]) -> Result<(), InputError> {
        if self.queue.len() + entries.len() > self.capacity {
            return Err(InputError::QueueFull {
                capacity: self.capacity,
            });
        }
        let mut last = self.last_due;
        for p in entries {
            if p.due < last {
                return Err(InputError::OutOfOrder { due: p.due, last });
            }
            last = p.due;
        }
        for (i, &q) in entries.iter().enumerate() {
            self.queue.push_back(Entry { q, follows: i > 0 });
        }
        self.last_due = last;
        self.empty_counted = false;
        self.s.queue_high_water = self.s.queue_high_water.max(self.queue.len());
        Ok(())
    }

    /// The next slot to send (or drop) at `now`, if any is due.
    pub fn poll_transmit(&mut self, now: Timestamp) -> Option<Transmit> {
        let Some(&Entry { q: head, follows }) = self.queue.front() else {
            if self.started && !self.empty_counted && !self.source_ended {
                self.empty_counted = true;
                self.s.underruns += 1;
                self.push_event(SessionEvent::Underrun { at: now });
            }
            return None;
        };
        let was_stalled = self.pacing.in_stall();
        let due = self.head_due(&head);
        let job = self.jobs.job_of(due);
        let bytes = u64::from(head.wire_len);
        let decision = match (follows, self.last_dropped) {
            (false, _) => self.pacing.decide(now, job.release, bytes),
            // Its frame was dropped: so is it, now.
            (true, true) => self.pacing.drop_with_frame(now, job.release),
            // Its frame has begun to leave: the rest follows, late if need be.
            (true, false) => self.pacing.decide_in_frame(now, job.release, bytes),
        };
        let (late, send) = match decision {
            Decision::Wait(t) => {
                self.head_wait = Some(t);
                return None;
            }
            Decision::Send { late } => (late, true),
            Decision::Drop { late } => (late, false),
        };
        self.head_wait = None;
        self.queue.pop_front();
        self.last_dropped = !send;
        self.note_stall(now, was_stalled, late);
        if self.jobs.on_done(job, now) {
            self.push_event(SessionEvent::DeadlineMissed { job, at: now });
        }
        let id = head.id;
        if !send {
            if let Some(a) = self.at_rate.as_mut() {
                a.on_dropped(now);
            }
            self.renumber = self.renumber.wrapping_add(head.packets);
            self.push_event(SessionEvent::Dropped { due, late });
            return Some(Transmit::Drop { id, due, late });
        }
        self.started = true;
        self.s.packets += u64::from(head.packets);
        self.s.bytes += u64::from(head.wire_len);
        self.s.payload_octets += u64::from(head.payload_len);
        self.reports
            .on_sent(u64::from(head.packets), u64::from(head.payload_len));
        self.controller.on_sent(now, u64::from(head.wire_len));
        if let Some(a) = self.at_rate.as_mut() {
            a.on_sent(due, now, head.wire_len, self.rate);
        }
        if let Some(log) = self.send_log.as_mut() {
            let seq = head.seq.sub(self.renumber as u16);
            log.record(now, seq, head.packets, head.wire_len);
        }
        Some(Transmit::Send {
            id,
            due,
            late,
            job,
            renumber: self.renumber,
        })
    }

    fn note_stall(&mut self, now: Timestamp, was_stalled: bool, late: Duration) {
        match (was_stalled, self.pacing.in_stall()) {
            (false, true) => {
                self.stall_began = Some(now);
                self.push_event(SessionEvent::StallBegan { at: now, late });
            }
            (true, false) => {
                let began = self.stall_began.take().unwrap_or(now);
                self.push_event(SessionEvent::StallEnded {
                    at: now,
                    lasted: now.saturating_since(began),
                });
            }
            _ => {}
        }
    }

    /// A sender report into `buf`, when one is due at `now` (`wall`: the NTP time of `now`).
    pub fn poll_rtcp(&mut self, now: Timestamp, wall: NtpTime, buf: &mut [u8]) -> Option<usize> {
        let announce = self.controller.poll_announce(now);
        let apps: Vec<_> = announce.iter().map(crate::cc_app::announce_app).collect();
        let notice = self.notice_due().is_some_and(|t| t <= now);
        // Room kept after the report for a TLLEI of every number waiting (12 + 4 each).
        let keep = if notice {
            12 + 4 * super::resend::MAX_NOTICED
        } else {
            0
        };
        let end = buf.len().saturating_sub(keep);
        let n = self
            .reports
            .poll_transmit_with(now, wall, &mut buf[..end], &apps, notice)?;
        let ssrc = self.reports.config_ssrc();
        let told = match self.repair.as_mut() {
            Some(r) if notice => r.write_notice(now, ssrc, &mut buf[n..]),
            _ => 0,
        };
        Some(n + told)
    }

    /// When losses are next to be told to the group (RFC 6642 TLLEI), if any wait.
    fn notice_due(&self) -> Option<Timestamp> {
        self.repair.as_ref().and_then(|r| r.notice_due())
    }

    /// The last sender report, with a BYE (RFC 3550 §6.6).
    pub fn bye(&mut self, now: Timestamp, wall: NtpTime, buf: &mut [u8]) -> Option<usize> {
        self.reports.bye(now, wall, buf)
    }

    /// The next instant the session needs the driver, and why.
    pub fn poll_timeout(&self) -> Option<(Timestamp, Wake)> {
        let head = self.next_send().map(|t| {
            let catching_up = self.head_job().is_some_and(|j| t > j.release);
            (
                t,
                if catching_up {
                    Wake::CatchUp
                } else {
                    Wake::Release
                },
            )
        });
        let report = self
            .reports
            .poll_timeout()
            .map(|(t, _)| (t, Wake::SenderReport));
        let cc = self
            .controller
            .poll_timeout()
            .map(|(t, _)| (t, Wake::RateController));
        let notice = self.notice_due().map(|t| (t, Wake::SenderReport));
        [head, report, cc, notice]
            .into_iter()
            .flatten()
            .min_by_key(|x| x.0)
    }

    /// The next instant the session's RTCP side needs the driver (a sender report due, the
    /// rate controller's timer), for a driver that runs it apart from the packets.
    pub fn rtcp_timeout(&self) -> Option<Timestamp> {
        let report = self.reports.poll_timeout().map(|(t, _)| t);
        let cc = self.controller.poll_timeout().map(|(t, _)| t);
        [report, cc, self.notice_due()].into_iter().flatten().min()
    }

    /// When the next packet may leave: its job's release (its due time, unless a period groups
    /// packets into jobs), or later while catching up.
    pub fn next_send(&self) -> Option<Timestamp> {
        let e = self.queue.front()?;
        if e.follows && self.last_dropped {
            // Dropped with its frame, at once.
            return Some(Timestamp::ZERO);
        }
        let release = self.jobs.job_of(self.head_due(&e.q)).release;
        Some(self.head_wait.unwrap_or(release).max(release))
    }

    /// The job of the packet at the head of the queue.
    pub fn head_job(&self) -> Option<JobTimes> {
        self.queue
            .front()
            .map(|p| self.jobs.job_of(self.head_due(&p.q)))
    }

    /// The oldest event not yet polled (at most 256 wait; older ones are dropped and counted).
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    fn push_event(&mut self, e: SessionEvent) {
        if self.events.len() == MAX_EVENTS {
            self.events.pop_front();
            self.s.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    /// The source has ended and every packet has left or been dropped.
    pub fn is_finished(&self) -> bool {
        self.source_ended && self.queue.is_empty()
    }

    /// Entries in the queue now (packets or batches waiting to leave).
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Entries the queue has room for.
    pub fn room(&self) -> usize {
        self.capacity - self.queue.len()
    }

    /// The RTCP side: receivers heard and RTCP counters.
    pub fn reports(&self) -> &SenderReports {
        &self.reports
    }

    /// Lateness of every packet sent.
    pub fn lateness(&self) -> &Distribution {
        self.pacing.lateness()
    }

    /// The counters, without the lateness summary (cheap: for every packet).
    pub fn counts(&self) -> SenderCounts {
        let p = self.pacing.counts();
        SenderCounts {
            packets: self.s.packets,
            underruns: self.s.underruns,
            jobs: self.jobs.jobs(),
            deadline_misses: self.jobs.misses(),
            stalls: p.0,
            late_packets: p.1,
            dropped: p.2,
        }
    }

    /// Everything counted so far, with the lateness summary (for the end of a run).
    pub fn stats(&self) -> SenderStats {
        SenderStats {
            packets: self.s.packets,
            bytes: self.s.bytes,
            payload_octets: self.s.payload_octets,
            send_errors: self.s.send_errors,
            underruns: self.s.underruns,
            jobs: self.jobs.jobs(),
            deadline_misses: self.jobs.misses(),
            queue_high_water: self.s.queue_high_water,
            target_rate_bps: self.rate.as_bps(),
            rate_changes: self.s.rate_changes,
            events_dropped: self.s.events_dropped,
            pacing: self.pacing.stats(),
        }
    }
}
