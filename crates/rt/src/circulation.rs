//! [`Circulation`]: how the slots of a ring travel between a producer and the pacing thread:
//! from a free queue (the producer takes, fills and publishes) to a ready queue (the pacer
//! sends and recycles) and back. Both queues hold every slot, so neither push can fail; nothing
//! blocks and nothing is allocated after construction. [`crate::ring::PacketRing`] circulates
//! packet slots, [`crate::frame_ring::FrameRing`] whole frames.

use crossbeam_queue::ArrayQueue;

/// The two queues of a ring of `T` slots; see the module's documentation.
pub struct Circulation<T> {
    free: ArrayQueue<T>,
    ready: ArrayQueue<T>,
    capacity: usize,
}

impl<T> Circulation<T> {
    /// The queues of `slots` (at least one), every slot free.
    pub fn new(slots: impl ExactSizeIterator<Item = T>) -> Circulation<T> {
        let capacity = slots.len().max(1);
        let free = ArrayQueue::new(capacity);
        for s in slots {
            // Cannot fail: the queue has a place for every slot.
            let _ = free.push(s);
        }
        Circulation {
            free,
            ready: ArrayQueue::new(capacity),
            capacity,
        }
    }

    /// Slots in the ring, free and ready together.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Producer: an empty slot to fill, if the ring is not full.
    pub fn take_free(&self) -> Option<T> {
        self.free.pop()
    }

    /// Producer: hands a filled slot to the pacer.
    pub fn publish(&self, slot: T) {
        // Cannot fail: slots only circulate between the two queues, each sized for all of them.
        let _ = self.ready.push(slot);
    }

    /// Pacer: the next slot to send, in the order they were published.
    pub fn next_ready(&self) -> Option<T> {
        self.ready.pop()
    }

    /// Pacer (a sent slot) or producer (one it did not fill): the slot goes back to be filled.
    pub fn recycle(&self, slot: T) {
        let _ = self.free.push(slot);
    }

    /// Slots free for the producer.
    pub fn free_len(&self) -> usize {
        self.free.len()
    }

    /// Slots waiting to be sent.
    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }
}
