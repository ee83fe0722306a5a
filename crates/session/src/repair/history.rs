//! [`SendHistory`]: the packets a sender sent lately, kept for retransmission. A ring indexed
//! by sequence number, allocated once: its bound is packets × bytes per packet, and nothing a
//! receiver asks makes it grow.

use metronome_time::Timestamp;
use metronome_wire::SeqNo;

/// One kept packet's bookkeeping; its bytes are in the history's arena.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// Whether the slot holds a packet (and `sequence` is its number).
    used: bool,
    sequence: SeqNo,
    len: usize,
    /// When the packet is no use to a viewer any more (its frame's play-out deadline).
    deadline: Timestamp,
    /// When the retransmissions still on their way began, if it was retransmitted.
    repaired: Option<Timestamp>,
    /// Where its retransmissions since then went (a set of the repairer's outlets).
    repaired_to: u64,
}

/// A kept packet, as [`SendHistory::get`] gives it.
#[derive(Debug)]
pub struct Kept<'a> {
    /// The packet as it was sent.
    pub packet: &'a [u8],
    /// The latest time a copy of it is of use at the receivers.
    pub deadline: Timestamp,
    /// Since when its retransmissions went (as [`SendHistory::mark_repaired`] was told), if
    /// it was retransmitted.
    pub repaired: Option<Timestamp>,
    /// Where they went, as [`SendHistory::mark_repaired`] was told.
    pub repaired_to: u64,
}

/// The last packets sent (each of at most `max_packet` bytes), by sequence number. Its
/// capacity is a power of two (at most 65 536), so that the ring stays in step with sequence
/// numbers across their wrap: packet `n` is always `capacity` packets older than the one that
/// replaces it.
#[derive(Debug)]
pub struct SendHistory {
    slots: Vec<Slot>,
    arena: Vec<u8>,
    max_packet: usize,
    /// Packets too large to keep (never retransmitted).
    too_large: u64,
}

impl SendHistory {
    /// A history of at least `capacity` packets (rounded up to a power of two, at most
    /// 65 536) of at most `max_packet` bytes (1 to 65 535, an RTP packet's bounds).
    pub fn new(capacity: usize, max_packet: usize) -> SendHistory {
        let capacity = capacity.clamp(1, 1 << 16).next_power_of_two();
        let max_packet = max_packet.clamp(1, usize::from(u16::MAX));
        let mut arena = vec![0u8; capacity * max_packet];
        // Zeroed memory is mapped on its first write: written now, a page at a time, so that
        // the driver's pacing thread, which keeps each packet it sends here, takes no page
        // fault for it (what a kept byte holds before a packet is kept is never read).
        for b in arena.iter_mut().step_by(4096) {
            *b = 1;
        }
        std::hint::black_box(&mut arena);
        SendHistory {
            slots: vec![Slot::default(); capacity],
            arena,
            max_packet,
            too_large: 0,
        }
    }

    /// The memory it holds, bytes (what admission counts against the stream).
    pub fn memory_bytes(&self) -> usize {
        self.arena.len() + self.slots.len() * std::mem::size_of::<Slot>()
    }

    /// Packets it keeps at most.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The largest packet it keeps, bytes.
    pub fn max_packet(&self) -> usize {
        self.max_packet
    }

    /// Packets that were too large to keep.
    pub fn too_large(&self) -> u64 {
        self.too_large
    }

    fn index(&self, sequence: SeqNo) -> usize {
        usize::from(sequence.get()) % self.slots.len()
    }

    /// Keeps a sent packet (replacing the oldest in its slot) until `deadline`.
    pub fn keep(&mut self, sequence: SeqNo, packet: &[u8], deadline: Timestamp) {
        let i = self.index(sequence);
        if packet.len() > self.max_packet {
            self.too_large += 1;
            self.slots[i].used = false;
            return;
        }
        let at = i * self.max_packet;
        self.arena[at..at + packet.len()].copy_from_slice(packet);
        self.slots[i] = Slot {
            used: true,
            sequence,
            len: packet.len(),
            deadline,
            repaired: None,
            repaired_to: 0,
        };
    }

    /// The packet numbered `sequence`, if it is still kept.
    pub fn get(&self, sequence: SeqNo) -> Option<Kept<'_>> {
        let i = self.index(sequence);
        let s = self.slots[i];
        (s.used && s.sequence == sequence).then(|| {
            let at = i * self.max_packet;
            Kept {
                packet: &self.arena[at..at + s.len],
                deadline: s.deadline,
                repaired: s.repaired,
                repaired_to: s.repaired_to,
            }
        })
    }

    /// Notes that `sequence` was retransmitted, its retransmissions since `since` having gone
    /// `to` (a set the caller keeps: the repairer's outlets, one bit each).
    pub fn mark_repaired(&mut self, sequence: SeqNo, since: Timestamp, to: u64) {
        let i = self.index(sequence);
        if self.slots[i].used && self.slots[i].sequence == sequence {
            self.slots[i].repaired = Some(since);
            self.slots[i].repaired_to = to;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(ms: u64) -> Timestamp {
        Timestamp::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn it_keeps_the_last_packets_and_forgets_older_ones() {
        let mut h = SendHistory::new(4, 8);
        for seq in 65_534u16..=65_535 {
            h.keep(SeqNo(seq), &seq.to_be_bytes(), at(100));
        }
        for seq in 0u16..4 {
            h.keep(SeqNo(seq), &[seq as u8; 3], at(200));
        }
        // 65 534 and 65 535 were overwritten by 2 and 3 (same slots mod 4).
        assert!(h.get(SeqNo(65_534)).is_none() && h.get(SeqNo(65_535)).is_none());
        let k = h.get(SeqNo(3)).unwrap();
        assert_eq!(
            (k.packet, k.deadline, k.repaired),
            (&[3u8; 3][..], at(200), None)
        );
        h.mark_repaired(SeqNo(3), at(150), 0b10);
        let k = h.get(SeqNo(3)).unwrap();
        assert_eq!((k.repaired, k.repaired_to), (Some(at(150)), 0b10));
        // A number that maps to a used slot but is not the one kept there.
        assert!(h.get(SeqNo(7)).is_none());
    }

    #[test]
    fn across_the_wrap_it_keeps_as_many_packets_as_anywhere() {
        // 1 000 becomes 1 024: packets 65 000..=65 535 stay kept while 0..488 are sent.
        let mut h = SendHistory::new(1000, 8);
        assert_eq!(h.capacity(), 1024);
        for seq in (64_000u16..=u16::MAX).chain(0..488) {
            h.keep(SeqNo(seq), &seq.to_be_bytes(), at(1));
        }
        assert!((65_000..=u16::MAX)
            .chain(0..488)
            .all(|s| h.get(SeqNo(s)).is_some()));
        assert!(h.get(SeqNo(64_999)).is_none(), "1 025 packets back");
    }

    #[test]
    fn a_packet_too_large_is_counted_not_kept() {
        let mut h = SendHistory::new(2, 4);
        h.keep(SeqNo(1), &[1; 4], at(1));
        h.keep(SeqNo(3), &[9; 5], at(1));
        assert_eq!(h.too_large(), 1);
        assert!(h.get(SeqNo(1)).is_none() && h.get(SeqNo(3)).is_none());
        assert!(h.memory_bytes() >= 8);
    }
}
