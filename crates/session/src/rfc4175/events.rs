//! What the RFC 4175 depayloader reports about frames.

use metronome_time::{RtpTime, Timestamp};

/// Every pgroup of the frame arrived, and its marker (RFC 4175 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameComplete {
    /// The frame's RTP timestamp (90 kHz clock).
    pub rtp_ts: RtpTime,
    /// When its first packet arrived.
    pub first_arrival: Timestamp,
    /// When its last packet arrived (the `now` of that push).
    pub completed_at: Timestamp,
    /// The sender's capture time (CLOCK_REALTIME ns on the sender's clock), if its packets
    /// carry the capture-time extension.
    pub capture_ns: Option<u64>,
    /// Sample data bytes (each pgroup once) and packets that brought them.
    pub bytes: u64,
    /// Packets that brought new sample data to the frame (duplicates not counted).
    pub packets: u64,
}

/// A frame that ended (marker, a newer timestamp, or `flush`) with pgroups missing, or
/// without its marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramePartial {
    /// The frame's RTP timestamp (90 kHz clock).
    pub rtp_ts: RtpTime,
    /// When its first packet arrived.
    pub first_arrival: Timestamp,
    /// When it ended: the `now` of the push (or `flush`) that ended it.
    pub ended_at: Timestamp,
    /// The sender's capture time (CLOCK_REALTIME ns on the sender's clock), if its packets carry
    /// the capture-time extension.
    pub capture_ns: Option<u64>,
    /// Sample data bytes that arrived, each pgroup counted once.
    pub received_bytes: u64,
    /// Sample data bytes of the frame that did not arrive (the frame size less `received_bytes`).
    pub missing_bytes: u64,
    /// Packets that brought new sample data to the frame (duplicates not counted).
    pub packets: u64,
    /// Sequence numbers in the frame's span that did not bring data (best effort: packets lost
    /// at the very start or end of a frame are counted where the span shows them).
    pub missing_packets: u64,
    /// Whether the frame ended with its marker.
    pub marker: bool,
}

/// Whole frames missing before the frame with `before_rtp_ts` (from the timestamps and the
/// frame rate; best effort).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLost {
    /// How many frames are missing (at least 1).
    pub count: u64,
    /// RTP timestamp of the frame that arrived after the gap.
    pub before_rtp_ts: RtpTime,
}

/// One thing the depayloader learned about a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawEvent {
    /// A frame ended with its marker and every pgroup.
    Complete(FrameComplete),
    /// A frame ended with pgroups missing or without its marker.
    Partial(FramePartial),
    /// Whole frames never arrived before the current one.
    Lost(FrameLost),
}

/// The events of one push, in order (at most three: the previous frame ending, frames lost,
/// this frame ending). No allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawEvents {
    ev: [Option<RawEvent>; 3],
    n: usize,
}

impl RawEvents {
    pub(crate) fn push(&mut self, e: RawEvent) {
        if let Some(slot) = self.ev.get_mut(self.n) {
            *slot = Some(e);
            self.n += 1;
        }
    }
    /// How many events the push produced (0 to 3).
    pub fn len(&self) -> usize {
        self.n
    }
    /// Whether the push produced no event.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// The events in the order they happened.
    pub fn iter(&self) -> impl Iterator<Item = RawEvent> + '_ {
        self.ev.iter().flatten().copied()
    }
}

impl IntoIterator for RawEvents {
    type Item = RawEvent;
    type IntoIter = std::iter::Flatten<std::array::IntoIter<Option<RawEvent>, 3>>;
    fn into_iter(self) -> Self::IntoIter {
        self.ev.into_iter().flatten()
    }
}
