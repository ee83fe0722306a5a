//! What goes into a [`SenderSession`](super::SenderSession) and what comes out: its settings,
//! the driver's inputs, the transmits and wake-ups it asks for, its events and its counts.

use super::super::jobs::{JobConfig, JobTimes};
use super::super::report::{SenderEvent, SenderReportsConfig};
use crate::repair::Outlet;
use metronome_sched::{PacingConfig, PacingStats};
use metronome_time::{Bitrate, NtpTime, Timestamp};
use metronome_wire::SeqNo;
use serde::Serialize;
use std::net::SocketAddr;
use std::time::Duration;

/// Everything a [`SenderSession`](super::SenderSession) needs besides its epoch and rate controller.
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
    /// the controller's rate ([`SenderSession::sending_at_rate`](super::SenderSession::sending_at_rate)), when it was made, and it
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

/// A retransmission [`SenderSession::poll_repair`](super::SenderSession::poll_repair) wrote:
/// its length, and where it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repair {
    /// Bytes written.
    pub len: usize,
    /// The one destination it goes to: where its NACK came in. `None`: every destination
    /// (a stream that tells a group of its repairs, or sends SRTP:
    /// [`SenderRepair::everywhere`](crate::sender::SenderRepair::everywhere)).
    pub outlet: Option<Outlet>,
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
        /// The destination it came in at (the driver's RTCP socket or connection of that
        /// destination): the retransmissions it asks for go there alone.
        outlet: Outlet,
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
    /// A sender report is due, or a compound that tells the group of losses (RFC 6642).
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
    /// ([`RateController::reads`](metronome_cc::RateController::reads)), whether it changed it or not (after the
    /// [`SessionEvent::RateChanged`] of a change): a producer that averages the rate it hears
    /// at every report (Evalvid-RA's VBR controller, which its TFRC agent tells at every
    /// feedback, and only then) counts it. The reports of one RTCP compound count once.
    RateReported {
        /// When the report was handled.
        at: Timestamp,
        /// The target rate after the report, on the wire.
        rate: Bitrate,
        /// What of it the media may take, on the wire: all of it where packets leave at the
        /// controller's rate, else the target less the rate retransmissions and FEC took
        /// (measured over half a second at least). A source that averages the rate it hears
        /// is given this.
        media: Bitrate,
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
