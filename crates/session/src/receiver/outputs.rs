//! What a receiver gives back: its counters, what it made of each datagram, its events and
//! timers.

use super::source::SeqVerdict;
use metronome_time::{RtpTime, Timestamp};
use metronome_wire::mp2t;
use metronome_wire::{PayloadType, SeqNo, Ssrc};
use std::ops::Range;

/// Datagram-level counters: everything that arrived, and why what was dropped was dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Counters {
    /// RTP datagrams handed to [`ReceiverSession::handle_rtp`](super::ReceiverSession::handle_rtp), whatever became of them.
    pub datagrams: u64,
    /// Bytes of those datagrams (UDP payload: RTP header and payload).
    pub bytes: u64,
    /// RTP packets taken as packets of a source (duplicates and late ones included).
    pub rtp_packets: u64,
    /// Datagrams that did not parse as RTP ([`Dropped::NotRtp`]).
    pub not_rtp: u64,
    /// Packets of a payload type other than MP2T's 33 when MP2T is expected.
    pub wrong_payload_type: u64,
    /// MP2T packets whose payload is not whole 188-byte TS packets with their sync bytes.
    pub bad_payload: u64,
    /// Packets of a new SSRC refused because `max_sources` were tracked and none could go.
    pub too_many_sources: u64,
    /// Packets held back as an unconfirmed large sequence jump (RFC 3550 A.1).
    pub jump_suspects: u64,
    /// RTCP datagrams handed to [`ReceiverSession::handle_rtcp`](super::ReceiverSession::handle_rtcp).
    pub rtcp_packets: u64,
    /// RTCP datagrams that did not parse as a compound packet.
    pub rtcp_malformed: u64,
    /// RTCP items not for us: other packet types, other receivers' feedback, APP packets that
    /// are not the stream's rate controller's announcements.
    pub rtcp_ignored_items: u64,
    /// New sources heard while another was already tracked (a restarted or switched sender).
    pub ssrc_changes: u64,
    /// Sources forgotten (silent too long, or said BYE) to make room for a new one.
    pub sources_evicted: u64,
    /// Events dropped, oldest first, because 256 were waiting unpolled.
    pub events_dropped: u64,
    /// Compound packets sent out of turn with the rate controller's feedback.
    pub cc_reports: u64,
}

/// Why a datagram was not taken as a packet of a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// The datagram does not parse as RTP.
    NotRtp,
    /// MP2T is expected and the packet has this other payload type.
    WrongPayloadType(PayloadType),
    /// MP2T is expected and the payload is not whole, synchronized TS packets.
    BadPayload(mp2t::Mp2tError),
    /// A packet of this new SSRC while `max_sources` sources are tracked, none silent or gone.
    TooManySources(Ssrc),
    /// A large sequence jump not yet confirmed by the next packet (RFC 3550 A.1).
    JumpSuspect,
    /// A retransmission that repairs nothing: malformed, of a packet already had, or before
    /// the stream's first packet (counted in [`RepairStats`](super::RepairStats)).
    Retransmission,
}

impl Dropped {
    /// As a trace's `verdict` column spells it after `dropped: ` (kebab-case): `not-rtp`,
    /// `wrong-payload-type`, `bad-payload`, `too-many-sources`, `jump-suspect`,
    /// `retransmission`.
    pub fn name(self) -> &'static str {
        match self {
            Dropped::NotRtp => "not-rtp",
            Dropped::WrongPayloadType(_) => "wrong-payload-type",
            Dropped::BadPayload(_) => "bad-payload",
            Dropped::TooManySources(_) => "too-many-sources",
            Dropped::JumpSuspect => "jump-suspect",
            Dropped::Retransmission => "retransmission",
        }
    }
}

/// What the receiver made of one accepted RTP packet (for traces and for writing the payload).
#[derive(Clone, Debug, PartialEq)]
pub struct PacketRecord {
    /// The packet's SSRC.
    pub ssrc: Ssrc,
    /// The packet's 16-bit RTP sequence number.
    pub seq: SeqNo,
    /// The sequence number extended past its wraps (RFC 3550 A.1).
    pub ext_seq: u64,
    /// The packet's RTP timestamp.
    pub rtp_ts: RtpTime,
    /// The RTP header's marker bit (the last packet of a frame, for video).
    pub marker: bool,
    /// When it arrived (the `now` given).
    pub arrival: Timestamp,
    /// Bytes of the datagram.
    pub size: usize,
    /// Where the RTP payload lies in the datagram (header, extension and padding excluded).
    pub payload: Range<usize>,
    /// How the packet relates to the sequence so far.
    pub verdict: SeqVerdict,
    /// RFC 3550 transit time in RTP units (arrival − timestamp, wrapping).
    pub transit_ticks: i32,
    /// The source's interarrival jitter after this packet, in RTP timestamp units (RFC 3550 A.8).
    pub jitter_ticks: f64,
    /// Nanoseconds since the previous arrival; `None` for the first packet, a duplicate or a late
    /// one.
    pub interarrival_ns: Option<u64>,
    /// One-way delay in nanoseconds (may be negative if the clocks disagree), when the packet
    /// carries the 64-bit send time and the driver gave the wall clock.
    pub one_way_delay_ns: Option<i64>,
    /// It came as a retransmission (RFC 4588) and is given back as the packet it repairs:
    /// `payload` is then a range of [`ReceiverSession::repaired_packet`](super::ReceiverSession::repaired_packet), not of the
    /// datagram, and it counts in no statistics of the stream.
    pub repaired: bool,
}

/// Things that changed, for logs and traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiverEvent {
    /// A packet of a new SSRC started a source.
    NewSource {
        /// The new source's SSRC.
        ssrc: Ssrc,
        /// When its first packet arrived.
        at: Timestamp,
    },
    /// A large sequence jump was confirmed: the source's sequence restarts (RFC 3550 A.1).
    SequenceJump {
        /// The source whose sequence jumped.
        ssrc: Ssrc,
        /// The sequence number it restarts at.
        to_seq: SeqNo,
        /// When the confirming packet arrived.
        at: Timestamp,
    },
    /// A sender report arrived from a tracked source.
    SenderReport {
        /// The source that sent it.
        ssrc: Ssrc,
        /// When it arrived.
        at: Timestamp,
    },
    /// A tracked source sent an RTCP BYE (RFC 3550 §6.6).
    Bye {
        /// The source that left.
        ssrc: Ssrc,
        /// When its BYE arrived.
        at: Timestamp,
    },
}

pub(super) const MAX_EVENTS: usize = 256;

/// Why the receiver wants to be woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReceiverTimer {
    /// The next regular receiver report is due (RFC 3550 §6.3 interval).
    ReceiverReport,
    /// The rate controller's receiving end has a report due (TFRC, TFMCC).
    RateFeedback,
    /// A missing packet is to be asked for (a NACK, sent early: RFC 4585 §3.5.2), or given up.
    Nack,
}
