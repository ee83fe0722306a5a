//! What the RFC 4175 depayloader reports about frames.

use metronome_time::Timestamp;

/// Every pgroup of the frame arrived, and its marker (RFC 4175 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameComplete {
    pub rtp_ts: u32,
    /// When its first packet arrived.
    pub first_arrival: Timestamp,
    /// When its last packet arrived (the `now` of that push).
    pub completed_at: Timestamp,
    /// The sender's capture time, if its packets carry the capture-time extension.
    pub capture_ns: Option<u64>,
    /// Sample data bytes (each pgroup once) and packets that brought them.
    pub bytes: u64,
    pub packets: u64,
}

/// A frame that ended (marker, a newer timestamp, or `flush`) with pgroups missing, or
/// without its marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramePartial {
    pub rtp_ts: u32,
    pub first_arrival: Timestamp,
    pub ended_at: Timestamp,
    pub capture_ns: Option<u64>,
    pub received_bytes: u64,
    pub missing_bytes: u64,
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
    pub count: u64,
    pub before_rtp_ts: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawEvent {
    Complete(FrameComplete),
    Partial(FramePartial),
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
    pub fn len(&self) -> usize {
        self.n
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
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
