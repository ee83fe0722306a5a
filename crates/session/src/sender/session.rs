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

use super::jobs::{JobClock, JobConfig, JobTimes};
use super::report::{SenderEvent, SenderReports, SenderReportsConfig};
use metronome_cc::{Feedback, RateController};
use metronome_sched::{Decision, PacingConfig, PacingModel, PacingStats};
use metronome_time::Micros;
use metronome_time::{Bitrate, Distribution, NtpTime, Timestamp};
use metronome_wire::{SeqNo, Ssrc};
use serde::Serialize;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// Everything a [`SenderSession`] needs besides its epoch and rate controller.
#[derive(Clone, Debug)]
pub struct SenderSessionConfig {
    /// The RTCP side: SSRC, CNAME, clock, RTCP bandwidth and interval.
    pub reports: SenderReportsConfig,
    /// How packets are paced, and what happens to late ones (catch up or drop).
    pub pacing: PacingConfig,
    /// How packets group into jobs, and each job's relative deadline.
    pub jobs: JobConfig,
    /// Packets held at most: the number of slots the driver has.
    pub queue_capacity: usize,
}

/// A packet the producer made, waiting in the driver's slot `id`; or a batch of packets that
/// leave in one send call (the GSO batches of raw video), as one entry with one due time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queued {
    /// The driver's slot that holds the packet (or batch).
    pub id: u32,
    /// RTP packets the entry carries: 1, or a batch's count.
    pub packets: u32,
    /// When it is due to leave: the time its RTP timestamp names; for a session sending at
    /// the controller's rate ([`SenderSession::sending_at_rate`]), when it was made, and it
    /// leaves once the sender is free too.
    pub due: Timestamp,
    /// Bytes on the wire (RTP header and payload).
    pub wire_len: u32,
    /// RTP payload bytes (RFC 3550 §6.4.1's octet count).
    pub payload_len: u32,
    /// The RTP sequence number of its first packet, as the producer wrote it (the packets
    /// leave with it less `Transmit::Send::renumber`).
    pub seq: SeqNo,
}

/// What a driver tells the session.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// One packet (or batch) the producer made, in due order after those before it.
    Packet(Queued),
    /// The entries of one frame (a raw frame's GSO batches), in due order: the frame leaves
    /// whole or not at all. If its first entry is dropped (late), the others are dropped with
    /// it at once; once its first entry has left, the others leave too, late if need be, and
    /// are never dropped. Refused whole (nothing queued) when the queue lacks room for all of
    /// them or the first is out of due order.
    Frame(&'a [Queued]),
    /// An RTCP compound from `from`; `wall` is its arrival on the wall clock (for the RTT).
    Rtcp {
        /// When it arrived, on the wall clock.
        wall: NtpTime,
        /// The address it came from.
        from: SocketAddr,
        /// The compound packet's bytes (plain RTCP: SRTCP already unprotected).
        data: &'a [u8],
    },
    /// A packet handed out to send could not be sent (the socket refused it).
    SendFailed,
    /// The producer has finished: once the queue is empty the stream is over.
    SourceEnded,
    /// Someone asks for another rate: the controller decides what to make of it.
    SetRate(Bitrate),
    /// The driver discarded this many packets without queueing them (a raw frame too late to
    /// start): like the ones the session drops, they take no sequence number.
    Discarded {
        /// How many RTP packets were discarded.
        packets: u32,
    },
}

/// Why the session refused an input; nothing of it was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The queue has no room for the packet (or the whole frame): the driver handed over more
    /// than it has slots.
    #[error("the stream's queue is full ({capacity} packets): the driver gave more packets than it has slots")]
    QueueFull {
        /// Entries the queue holds at most.
        capacity: usize,
    },
    /// A packet is due before one already queued: producers must hand packets over in due
    /// order.
    #[error("a packet due at {due} came after one due at {last}: the producer must hand packets over in due order")]
    OutOfOrder {
        /// The refused packet's due time.
        due: Timestamp,
        /// The latest due time already queued (or earlier in the same frame).
        last: Timestamp,
    },
}

/// What the driver does with a slot now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transmit {
    /// Send slot `id` now, to every destination of the stream. `late` is measured from the
    /// release of the packet's job: its due time, or with a period, the grid point its job is
    /// released at (the paper's periodic tasks send a period's packets together).
    Send {
        /// The slot to send.
        id: u32,
        /// When the packet was due: the time its RTP timestamp names, or sending at the
        /// controller's rate, its release there (its due time, or when the sender was free if
        /// later).
        due: Timestamp,
        /// How late it leaves: `now` less its job's release.
        late: Duration,
        /// The job it belongs to.
        job: JobTimes,
        /// How far to move the entry's sequence numbers back: the packets dropped before it
        /// never left, so they take no sequence number (RFC 3550 §5.1: it increments by one
        /// for each packet sent) and receivers see no loss the network did not cause. Zero
        /// until something is dropped; wraps as sequence numbers do.
        renumber: u32,
    },
    /// Slot `id` is dropped (too late to be of use): give it back unsent.
    Drop {
        /// The slot to give back.
        id: u32,
        /// When the packet was due (as in [`Transmit::Send`]).
        due: Timestamp,
        /// How late it was when dropped, from its job's release.
        late: Duration,
    },
}

impl Transmit {
    /// The slot this is about.
    pub fn id(&self) -> u32 {
        match *self {
            Transmit::Send { id, .. } | Transmit::Drop { id, .. } => id,
        }
    }
}

/// Why the session wants to be woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The next packet is due.
    Release,
    /// The next late packet may leave under the catch-up rate bound.
    CatchUp,
    /// A sender report is due.
    SenderReport,
    /// The rate controller's timer.
    RateController,
}

/// What happened to the stream, for logs, traces and the producer.
#[derive(Clone, Debug, PartialEq)]
pub enum SessionEvent {
    /// Packets began to leave later than the stall threshold.
    StallBegan {
        /// When the first packet that late left (or was dropped).
        at: Timestamp,
        /// How late it was.
        late: Duration,
    },
    /// The stream is back on its schedule.
    StallEnded {
        /// When the first packet back on schedule left (or was dropped).
        at: Timestamp,
        /// How long the stall lasted.
        lasted: Duration,
    },
    /// A packet (or batch) was dropped as too late to be of use (drop-late pacing, or with its
    /// frame).
    Dropped {
        /// When it was due.
        due: Timestamp,
        /// How late it was when dropped.
        late: Duration,
    },
    /// A job's packet left after the job's deadline (reported once per job).
    DeadlineMissed {
        /// The job that missed.
        job: JobTimes,
        /// When the packet that made it miss left (or was dropped).
        at: Timestamp,
    },
    /// The queue ran empty while the stream was running: the producer fell behind.
    Underrun {
        /// When the queue was found empty.
        at: Timestamp,
    },
    /// The target rate changed, on a report or on the controller's own clock (TFRC's
    /// no-feedback timer, TFMCC's increase): the producer should follow (encoder bitrate, mux
    /// rate).
    RateChanged {
        /// When the controller changed it.
        at: Timestamp,
        /// The new target rate, on the wire.
        rate: Bitrate,
    },
    /// The rate controller computed its rate from a receiver's report
    /// ([`RateController::reads`]), whether it changed it or not (after the
    /// [`SessionEvent::RateChanged`] of a change): a producer that averages the rate it hears
    /// at every report (Evalvid-RA's VBR controller, which its TFRC agent tells at every
    /// feedback, and only then) counts it. The reports of one RTCP compound count once.
    RateReported {
        /// When the report was handled.
        at: Timestamp,
        /// The target rate after the report, on the wire.
        rate: Bitrate,
    },
    /// What the RTCP side heard: receivers, their reports, rate control feedback.
    Receiver(SenderEvent),
}

/// What a session has done so far.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SenderStats {
    /// RTP packets sent.
    pub packets: u64,
    /// Bytes sent on the wire (RTP header and payload, as `Queued::wire_len` counts them).
    pub bytes: u64,
    /// RTP payload bytes sent (the sender report's octet count, unwrapped).
    pub payload_octets: u64,
    /// Packets the driver could not send ([`Input::SendFailed`]).
    pub send_errors: u64,
    /// Times the queue ran empty while the stream was running (the producer fell behind).
    pub underruns: u64,
    /// Jobs that have had packets leave or be dropped.
    pub jobs: u64,
    /// Jobs that missed their deadline.
    pub deadline_misses: u64,
    /// Most packets queued at once.
    pub queue_high_water: usize,
    /// The rate controller's current target, bits per second on the wire.
    pub target_rate_bps: u64,
    /// Times the target rate changed.
    pub rate_changes: u64,
    /// Events dropped, oldest first, because 256 were waiting unpolled.
    pub events_dropped: u64,
    /// Stalls, late and dropped packets, and the lateness summary, from the pacing model.
    pub pacing: PacingStats,
}

/// The counts of [`SenderStats`] that are cheap to read on every packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SenderCounts {
    /// RTP packets sent.
    pub packets: u64,
    /// Times the queue ran empty while the stream was running.
    pub underruns: u64,
    /// Jobs that have had packets leave or be dropped.
    pub jobs: u64,
    /// Jobs that missed their deadline.
    pub deadline_misses: u64,
    /// Episodes in which packets left later than the stall threshold.
    pub stalls: u64,
    /// Packets sent later than the stall threshold.
    pub late_packets: u64,
    /// Queue entries dropped: late, or with their frame.
    pub dropped: u64,
}

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
    /// The target rate after the last of them.
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

    /// The next retransmission to send at `now` (to the stream's destinations), written into
    /// `buf`; its length. Retransmissions are made when NACKs come in ([`Input::Rtcp`]);
    /// one that can no longer make its deadline by `now` is dropped and counted.
    pub fn poll_repair(&mut self, now: Timestamp, buf: &mut [u8]) -> Option<usize> {
        self.repair.as_mut()?.poll(now, buf)
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
            Input::Rtcp { wall, from, data } => self.handle_rtcp(now, wall, from, data),
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

    fn handle_rtcp(&mut self, now: Timestamp, wall: NtpTime, from: SocketAddr, data: &[u8]) {
        let log = self.send_log.as_deref();
        let sent_at = |seq: SeqNo| log.and_then(|l| l.sent_at(seq));
        self.reports.handle_rtcp(now, wall, from, data, &sent_at);
        self.answer_nacks(now);
        let mut heard = false;
        while let Some(e) = self.reports.poll_event() {
            match &e {
                SenderEvent::ReceiverReport { ssrc, rtt, .. } => {
                    if let (Some(r), Some(rtt)) = (self.repair.as_mut(), *rtt) {
                        r.rtt_sample(*ssrc, rtt);
                    }
                    if let Some(fb) = self.feedback(*ssrc) {
                        heard |= self.controller.reads(&fb);
                        self.controller.on_feedback(now, &fb);
                    }
                }
                SenderEvent::Tfrc { ssrc, report } => {
                    let fb = self.feedback(*ssrc).map_or_else(
                        || Feedback {
                            tfrc: Some(*report),
                            ..Feedback::bare(ssrc.get(), from)
                        },
                        |fb| Feedback {
                            tfrc: Some(*report),
                            ..fb
                        },
                    );
                    heard |= self.controller.reads(&fb);
                    self.controller.on_feedback(now, &fb);
                }
                SenderEvent::Tfmcc { ssrc, report } => {
                    let fb = Feedback {
                        tfmcc: Some(*report),
                        ..Feedback::bare(ssrc.get(), from)
                    };
                    heard |= self.controller.reads(&fb);
                    self.controller.on_feedback(now, &fb);
                }
                SenderEvent::ReceiverBye { ssrc } => {
                    self.controller.on_receiver_left(now, ssrc.get());
                }
                SenderEvent::PacketFeedback {
                    report_timestamp,
                    reports,
                    ..
                } => {
                    if let Some(log) = self.send_log.as_mut() {
                        let mut results = Vec::with_capacity(reports.len());
                        let unmatched = log.results(*report_timestamp, reports, &mut results);
                        self.feedback_unmatched += unmatched as u64;
                        self.controller.on_packet_results(now, &results);
                        heard |= self.controller.wants_packet_feedback();
                    }
                }
                _ => {}
            }
            self.push_event(SessionEvent::Receiver(e));
        }
        self.follow_controller(now);
        if heard {
            self.s.rate_reports += 1;
            self.s.reported_rate = Some(self.rate);
            self.push_event(SessionEvent::RateReported {
                at: now,
                rate: self.rate,
            });
        }
    }

    fn feedback(&self, ssrc: Ssrc) -> Option<Feedback> {
        let r = self.reports.receivers().iter().find(|r| r.ssrc == ssrc)?;
        Some(Feedback {
            receiver: r.ssrc.get(),
            from: r.addr,
            fraction_lost: r.fraction_lost,
            cumulative_lost: r.cumulative_lost as i64,
            extended_highest_seq: r.extended_highest_seq,
            jitter: r.jitter_us.to_duration(),
            rtt: r.rtt_us.map(Micros::to_duration),
            // Receiver reports carry no loss event rate: TFRC's reports come their own way.
            tfrc: None,
            tfmcc: None,
        })
    }

    /// Packets a receiver's RFC 8888 feedback named that were not in the send log (sent too
    /// long ago, or never).
    pub fn feedback_unmatched(&self) -> u64 {
        self.feedback_unmatched
    }

    /// Wakes the rate controller if its timer is due.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        if self
            .controller
            .poll_timeout()
            .is_some_and(|(t, _)| t <= now)
        {
            self.controller.handle_timeout(now);
            self.follow_controller(now);
        }
    }

    /// Answers the NACKs of the RTCP compound just handled.
    fn answer_nacks(&mut self, now: Timestamp) {
        let nacks = self.reports.take_nacks();
        let Some(r) = self.repair.as_mut() else {
            return;
        };
        for n in &nacks {
            let rtt = self.reports.receiver_rtt(n.reporter);
            if let Some(rtt) = rtt {
                r.rtt_sample(n.reporter, rtt);
            }
            r.on_nack(n, rtt, now);
        }
    }

    /// The session takes the controller's target rate.
    fn follow_controller(&mut self, now: Timestamp) {
        let rate = self.controller.target_rate();
        if rate != self.rate {
            if let Some(r) = self.repair.as_mut() {
                r.set_rate(rate.as_bps());
            }
            self.rate = rate;
            self.pacing.set_rate(rate);
            if let Some(a) = self.at_rate.as_mut() {
                a.on_rate(rate, now);
            }
            self.s.rate_changes += 1;
            self.push_event(SessionEvent::RateChanged { at: now, rate });
        }
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
        self.reports.poll_transmit_with(now, wall, buf, &apps)
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
        [head, report, cc].into_iter().flatten().min_by_key(|x| x.0)
    }

    /// The next instant the session's RTCP side needs the driver (a sender report due, the
    /// rate controller's timer), for a driver that runs it apart from the packets.
    pub fn rtcp_timeout(&self) -> Option<Timestamp> {
        let report = self.reports.poll_timeout().map(|(t, _)| t);
        let cc = self.controller.poll_timeout().map(|(t, _)| t);
        [report, cc].into_iter().flatten().min()
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

    /// The rate controller's name (`metronome_cc::ControllerKind::name`).
    pub fn controller_name(&self) -> &'static str {
        self.controller.name()
    }

    /// The rate controller's current target rate, on the wire.
    pub fn target_rate(&self) -> Bitrate {
        self.rate
    }

    /// RTCP compounds with a report the rate controller computes its rate from
    /// ([`RateController::reads`], or per-packet feedback; each is a
    /// [`SessionEvent::RateReported`]), for a driver that does not poll events.
    pub fn rate_reports(&self) -> u64 {
        self.s.rate_reports
    }

    /// The target rate right after the last of [`SenderSession::rate_reports`] (not moved by
    /// the controller's timer since), on the wire.
    pub fn reported_rate(&self) -> Option<Bitrate> {
        self.s.reported_rate
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
