//! The bounded ring between a producer and the pacing thread: pre-allocated packet slots that
//! travel from a free queue to a ready queue and back. Nothing is allocated after construction,
//! so the pacing thread never allocates.
//!
//! The source paper used FIFOs of 1024 elements of 1328 bytes; both sizes are parameters here.
//!
//! The slots' bytes are one allocation per ring (`Region`): when the process's memory is
//! locked for a pacing thread, a ring made later locks its region as one range and unlocks it
//! when it goes. (Locking each slot's own allocation split the heap into a mapping per slot,
//! and freed slots stayed locked: 200 sessions playing in turn reached the kernel's limit of
//! 65 530 mappings, and the server's next allocation failed.)

use crate::circulation::Circulation;
use metronome_time::Timestamp;
use std::alloc::Layout;
use std::sync::Arc;

/// The bytes of every slot of one ring.
struct Region {
    ptr: *mut u8,
    layout: Layout,
    locked: bool,
}

// SAFETY: the region is plain bytes, handed out as disjoint slices, one per slot (`SlotBuf`);
// nothing in it is tied to a thread.
unsafe impl Send for Region {}
// SAFETY: as above; the region itself is never read or written through a shared reference.
unsafe impl Sync for Region {}

impl Region {
    /// `len` zeroed bytes (at least one), locked in RAM if `lock`. Whole pages: locking and
    /// unlocking work on pages, and a page shared with another allocation would be unlocked
    /// under it.
    fn new(len: usize, lock: bool) -> Region {
        const PAGE: usize = 4096;
        let len = len.max(1).next_multiple_of(PAGE);
        let layout = Layout::from_size_align(len, PAGE).expect("a ring of a sane size");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `ptr` is valid for `layout.size()` bytes, just allocated.
        let locked = lock
            && crate::thread::lock_region(unsafe {
                std::slice::from_raw_parts(ptr, layout.size())
            });
        Region {
            ptr,
            layout,
            locked,
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the range is this region's own allocation, unlocked (freeing memory does not
        // unlock it) and then freed with the layout it was allocated with. No slot outlives
        // the region: each holds an `Arc` of it.
        unsafe {
            if self.locked {
                libc::munlock(self.ptr.cast(), self.layout.size());
            }
            std::alloc::dealloc(self.ptr, self.layout);
        }
    }
}

/// One slot's bytes: a slice of its ring's region that only this slot touches.
pub struct SlotBuf {
    region: Arc<Region>,
    offset: usize,
    len: usize,
}

impl std::ops::Deref for SlotBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: [offset, offset + len) lies inside the region, which the `Arc` keeps alive,
        // and no other slot's range overlaps it; slots are not `Clone`.
        unsafe { std::slice::from_raw_parts(self.region.ptr.add(self.offset), self.len) }
    }
}

impl std::ops::DerefMut for SlotBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only access to the range.
        unsafe { std::slice::from_raw_parts_mut(self.region.ptr.add(self.offset), self.len) }
    }
}

/// One packet waiting to be sent.
pub struct Slot {
    /// Which slot this is (what the sender session holds while the packet waits).
    pub id: u32,
    /// The slot's bytes: `slot_size` bytes of the ring's region, of which the first `len` are
    /// the packet.
    pub buf: SlotBuf,
    /// Length in bytes of the packet written into `buf` (the whole RTP packet as it goes on the
    /// wire); at most `buf.len()`.
    pub len: usize,
    /// When it is due to leave: the time its RTP timestamp names.
    pub release: Timestamp,
    /// Payload bytes, for the sender report's octet count.
    pub payload_len: usize,
}

impl Slot {
    /// The packet: the first `len` bytes of the slot.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    /// The packet, writable: for patching header fields just before it is sent.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
}

/// The bounded ring of packet slots: a free queue the producer takes from and a ready queue
/// the pacing thread sends from, both holding at most `capacity` slots. Both sides may run on
/// different threads; neither blocks nor allocates.
pub struct PacketRing {
    slots: Circulation<Slot>,
    slot_size: usize,
}

impl PacketRing {
    /// A ring of `capacity` slots of `slot_size` bytes each (both at least 1).
    pub fn new(capacity: usize, slot_size: usize) -> Self {
        let capacity = capacity.max(1);
        let slot_size = slot_size.max(1);
        // Once a pacing thread has locked the process's memory, a ring made later locks its
        // own slots: the pacer reads them (see `thread::lock_memory`).
        let region = Arc::new(Region::new(
            capacity * slot_size,
            crate::thread::memory_locked(),
        ));
        let slots = (0..capacity).map(|id| Slot {
            id: id as u32,
            buf: SlotBuf {
                region: region.clone(),
                offset: id * slot_size,
                len: slot_size,
            },
            len: 0,
            release: Timestamp::ZERO,
            payload_len: 0,
        });
        PacketRing {
            slots: Circulation::new(slots),
            slot_size,
        }
    }
    /// The bytes a slot holds at most (at least 1).
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }
    /// Slots in the ring, free and ready together (at least 1).
    pub fn capacity(&self) -> usize {
        self.slots.capacity()
    }
    /// Producer: an empty slot to fill, if the ring is not full.
    pub fn take_free(&self) -> Option<Slot> {
        self.slots.take_free()
    }
    /// Producer: hand a filled slot to the pacer.
    pub fn publish(&self, slot: Slot) {
        self.slots.publish(slot);
    }
    /// Pacer: the next packet to send, in release order.
    pub fn next_ready(&self) -> Option<Slot> {
        self.slots.next_ready()
    }
    /// Pacer: give a sent slot back to the producer.
    pub fn recycle(&self, slot: Slot) {
        self.slots.recycle(slot);
    }
    /// Slots free for the producer.
    pub fn free_slots(&self) -> usize {
        self.slots.free_len()
    }
    /// Packets waiting to be sent.
    pub fn occupancy(&self) -> usize {
        self.slots.ready_len()
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

    #[test]
    fn each_slot_has_its_own_bytes() {
        let ring = PacketRing::new(4, 100);
        let mut slots: Vec<Slot> = std::iter::from_fn(|| ring.take_free()).collect();
        assert_eq!(slots.len(), 4);
        for s in slots.iter_mut() {
            assert_eq!(s.buf.len(), 100);
            assert!(s.buf.iter().all(|&b| b == 0), "zeroed");
            s.buf.fill(s.id as u8 + 1);
        }
        for s in &slots {
            assert!(s.buf.iter().all(|&b| b == s.id as u8 + 1));
        }
        // The slots keep the bytes alive after the ring is gone.
        drop(ring);
        assert_eq!(slots[3].buf[99], 4);
    }
}
