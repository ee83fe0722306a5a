//! Retransmissions and FEC packets waiting for their time on the pacing thread. A media
//! packet that pays for a retransmission, or completes a row or a column and so makes a FEC
//! packet: sent right behind it, the pair (or more) arrives at a small queue on the way as a
//! burst, and the second finds it full. They leave instead the session's spacing apart
//! (`SenderSession::repair_spacing`, `fec_spacing`) after the packet that made them, as the
//! simulator sends them (`metronome-sim`'s RTP flow): between the stream's packets.
//!
//! The buffers are made once: the pacing thread allocates nothing.

use metronome_session::repair::Outlet;
use metronome_time::Timestamp;
use metronome_wire::fec2022::Direction;

/// Packets that may wait at once (a retransmission, a row's and a column's per media packet
/// at most, so more only when the pacing thread fell behind: then the oldest leave at once).
const CAPACITY: usize = 6;

/// What a waiting packet is, so where it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Protection {
    /// A retransmission (RFC 4588): to the media port of the one destination whose receiver
    /// asked for it, or of every destination (`None`).
    Rtx(Option<Outlet>),
    /// A FEC packet of a row or a column: to the destinations' FEC port for it.
    Fec(Direction),
}

/// A FIFO of retransmissions and FEC packets, each with its time.
pub(super) struct ProtectionWait {
    bufs: Vec<Vec<u8>>,
    /// Per buffer: when it leaves, what it is and its length.
    meta: [(Timestamp, Protection, usize); CAPACITY],
    head: usize,
    len: usize,
}

impl ProtectionWait {
    /// Room for packets of `packet_room` bytes; none (and nothing ever waits) for a stream
    /// that neither repairs nor makes FEC (`packet_room` 0).
    pub(super) fn new(packet_room: usize) -> ProtectionWait {
        let n = if packet_room == 0 { 0 } else { CAPACITY };
        ProtectionWait {
            bufs: (0..n).map(|_| vec![0; packet_room]).collect(),
            meta: [(Timestamp::ZERO, Protection::Rtx(None), 0); CAPACITY],
            head: 0,
            len: 0,
        }
    }

    /// Whether the stream repairs or makes FEC.
    pub(super) fn on(&self) -> bool {
        !self.bufs.is_empty()
    }

    /// Buffers free.
    pub(super) fn room(&self) -> usize {
        self.bufs.len() - self.len
    }

    /// Whether every buffer holds a packet.
    pub(super) fn is_full(&self) -> bool {
        self.len == self.bufs.len()
    }

    /// When the first waiting packet leaves.
    pub(super) fn next_due(&self) -> Option<Timestamp> {
        (self.len > 0).then(|| self.meta[self.head].0)
    }

    /// When the last waiting packet leaves.
    pub(super) fn last_due(&self) -> Option<Timestamp> {
        (self.len > 0).then(|| self.meta[(self.head + self.len - 1) % self.bufs.len()].0)
    }

    /// The buffer the next packet is written into (call [`Self::commit`] once written).
    /// Panics when full or off: check [`Self::is_full`] first.
    pub(super) fn free(&mut self) -> &mut [u8] {
        assert!(!self.is_full(), "ProtectionWait::free on a full queue");
        let i = (self.head + self.len) % self.bufs.len();
        &mut self.bufs[i]
    }

    /// The packet just written into [`Self::free`]'s buffer waits, to leave at `due`.
    pub(super) fn commit(&mut self, due: Timestamp, what: Protection, len: usize) {
        let i = (self.head + self.len) % self.bufs.len();
        self.meta[i] = (due, what, len);
        self.len += 1;
    }

    /// The first waiting packet, if it is due by `now`, taken off the queue.
    pub(super) fn pop_due(&mut self, now: Timestamp) -> Option<(Protection, &[u8])> {
        let (due, what, len) = self.meta[self.head];
        if self.len == 0 || due > now {
            return None;
        }
        let i = self.head;
        self.head = (self.head + 1) % self.bufs.len();
        self.len -= 1;
        Some((what, &self.bufs[i][..len]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(us: u64) -> Timestamp {
        Timestamp::ZERO + Duration::from_micros(us)
    }

    #[test]
    fn packets_leave_in_order_at_their_time_and_the_queue_is_bounded() {
        let mut w = ProtectionWait::new(16);
        assert!(w.on() && w.next_due().is_none());
        for k in 0..CAPACITY as u8 {
            w.free()[0] = k;
            let what = match k % 3 {
                0 => Protection::Rtx(Some(Outlet(1))),
                1 => Protection::Fec(Direction::Row),
                _ => Protection::Fec(Direction::Column),
            };
            w.commit(at(100 * (u64::from(k) + 1)), what, 1);
        }
        assert!(w.is_full());
        assert_eq!((w.next_due(), w.last_due()), (Some(at(100)), Some(at(600))));
        assert!(w.pop_due(at(99)).is_none());
        assert_eq!(
            w.pop_due(at(100)),
            Some((Protection::Rtx(Some(Outlet(1))), &[0u8][..]))
        );
        // Room again: the ring wraps.
        w.free()[0] = 9;
        w.commit(at(700), Protection::Fec(Direction::Row), 1);
        let mut left = Vec::new();
        while let Some((_, p)) = w.pop_due(at(1_000)) {
            left.push(p[0]);
        }
        assert_eq!(left, vec![1, 2, 3, 4, 5, 9]);
        assert!(w.next_due().is_none());
    }

    #[test]
    fn a_stream_without_protection_keeps_nothing() {
        let w = ProtectionWait::new(0);
        assert!(!w.on() && w.next_due().is_none());
    }

    #[test]
    fn half_a_packet_at_the_streams_rate() {
        use metronome_session::repair::fec_spacing as half_packet;
        // 1 400 bytes at 5.6 Mbit/s: 2 ms a packet.
        assert_eq!(half_packet(1_400, 5_600_000), Duration::from_millis(1));
        // A rate of 0 counts as 1 bit/s (no division by zero); at most 5 ms.
        assert_eq!(half_packet(1_400, 0), Duration::from_millis(5));
        assert_eq!(half_packet(1_400, 1_000_000), Duration::from_millis(5));
    }
}
