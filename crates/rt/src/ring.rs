//! The bounded ring between a producer and the pacing thread: pre-allocated packet slots that
//! travel from a free queue to a ready queue and back. Nothing is allocated after construction,
//! so the pacing thread never allocates.
//!
//! The source paper used FIFOs of 1024 elements of 1328 bytes; both sizes are parameters here.

use crossbeam_queue::ArrayQueue;
use metronome_time::Timestamp;

/// One packet waiting to be sent.
pub struct Slot {
    /// Which slot this is (what the sender session holds while the packet waits).
    pub id: u32,
    pub buf: Box<[u8]>,
    pub len: usize,
    /// When it is due to leave: the time its RTP timestamp names.
    pub release: Timestamp,
    /// Payload bytes, for the sender report's octet count.
    pub payload_len: usize,
}

impl Slot {
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
}

pub struct PacketRing {
    free: ArrayQueue<Slot>,
    ready: ArrayQueue<Slot>,
    capacity: usize,
}

impl PacketRing {
    /// A ring of `capacity` slots of `slot_size` bytes each (both at least 1).
    pub fn new(capacity: usize, slot_size: usize) -> Self {
        let capacity = capacity.max(1);
        let free = ArrayQueue::new(capacity);
        // Once a pacing thread has locked the process's memory, a ring made later locks its
        // own slots: the pacer reads them (see `thread::lock_memory`).
        let lock = crate::thread::memory_locked();
        for id in 0..capacity {
            let slot = Slot {
                id: id as u32,
                buf: vec![0u8; slot_size.max(1)].into_boxed_slice(),
                len: 0,
                release: Timestamp::ZERO,
                payload_len: 0,
            };
            if lock {
                crate::thread::lock_region(&slot.buf);
            }
            // Cannot fail: the queue has exactly `capacity` places.
            let _ = free.push(slot);
        }
        PacketRing {
            free,
            ready: ArrayQueue::new(capacity),
            capacity,
        }
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Producer: an empty slot to fill, if the ring is not full.
    pub fn take_free(&self) -> Option<Slot> {
        self.free.pop()
    }
    /// Producer: hand a filled slot to the pacer.
    pub fn publish(&self, slot: Slot) {
        // Cannot fail: slots only circulate between the two queues, each sized for all of them.
        let _ = self.ready.push(slot);
    }
    /// Pacer: the next packet to send, in release order.
    pub fn next_ready(&self) -> Option<Slot> {
        self.ready.pop()
    }
    /// Pacer: give a sent slot back to the producer.
    pub fn recycle(&self, slot: Slot) {
        let _ = self.free.push(slot);
    }
    /// Slots free for the producer.
    pub fn free_slots(&self) -> usize {
        self.free.len()
    }
    /// Packets waiting to be sent.
    pub fn occupancy(&self) -> usize {
        self.ready.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_circulate_in_order_and_the_ring_bounds_the_producer() {
        let ring = PacketRing::new(3, 1500);
        for i in 0..3 {
            let mut s = ring.take_free().unwrap();
            s.len = i + 1;
            ring.publish(s);
        }
        assert!(ring.take_free().is_none(), "full ring refuses the producer");
        assert_eq!(ring.occupancy(), 3);
        for i in 0..3 {
            let s = ring.next_ready().unwrap();
            assert_eq!(s.len, i + 1);
            ring.recycle(s);
        }
        assert!(ring.next_ready().is_none());
        assert!(ring.take_free().is_some());
    }
}
