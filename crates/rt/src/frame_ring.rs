//! The frame ring between the raw-video producer and its pacing thread: a few pre-allocated
//! frames of packets that travel from a free queue to a ready queue and back. Nothing is
//! allocated after construction.
//!
//! A slot holds every RTP packet of one frame back to back, packet `i` at `i × stride`, with
//! its length. When all packets but the last fill their stride exactly (the producer pads
//! them), the slot is `uniform`: any run of its packets is one buffer cut into equal segments,
//! which is what UDP GSO sends in one system call.

use crate::circulation::Circulation;
use metronome_time::Timestamp;

/// The packets of one frame, and when they are due.
pub struct FrameSlot {
    buf: Box<[u8]>,
    lens: Box<[u32]>,
    stride: usize,
    /// Packets in use.
    pub npackets: usize,
    /// Every packet but the last is exactly `stride` bytes.
    pub uniform: bool,
    /// Frame number from the start of the stream.
    pub index: u64,
    /// The frame's epoch on the run's clock (its first packet is due at or after it).
    pub epoch: Timestamp,
    /// Capture time in CLOCK_REALTIME ns (what the capture-time extension carries).
    pub capture_ns: u64,
    /// RTP payload bytes of all packets (padding excluded).
    pub payload_bytes: u64,
    /// When the producer finished the frame.
    pub ready_at: Timestamp,
}

impl FrameSlot {
    fn new(max_packets: usize, stride: usize) -> FrameSlot {
        let stride = stride.max(1);
        let max_packets = max_packets.max(1);
        FrameSlot {
            buf: vec![0u8; max_packets * stride].into_boxed_slice(),
            lens: vec![0u32; max_packets].into_boxed_slice(),
            stride,
            npackets: 0,
            uniform: false,
            index: 0,
            epoch: Timestamp::ZERO,
            capture_ns: 0,
            payload_bytes: 0,
            ready_at: Timestamp::ZERO,
        }
    }

    /// Bytes reserved for each packet: packet `i` starts at byte `i × stride` of the slot's
    /// buffer. Also the GSO segment size when the slot is [`uniform`](Self::uniform).
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Packets a slot can hold.
    pub fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// The whole room of packet `i` (`stride` bytes), to write it; `None` past the capacity.
    pub fn room_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let s = self.stride;
        self.buf.get_mut(i * s..(i + 1) * s)
    }

    /// Records the length of packet `i` (at most `stride`).
    pub fn set_len(&mut self, i: usize, len: usize) {
        if let Some(l) = self.lens.get_mut(i) {
            *l = len.min(self.stride) as u32;
        }
    }

    /// Length in bytes of packet `i` as recorded by [`set_len`](Self::set_len); 0 past the
    /// capacity.
    pub fn len_of(&self, i: usize) -> usize {
        self.lens.get(i).map_or(0, |&l| l as usize)
    }

    /// Packet `i` as sent.
    pub fn packet(&self, i: usize) -> &[u8] {
        let start = i * self.stride;
        self.buf
            .get(start..start + self.len_of(i))
            .unwrap_or_default()
    }

    /// Packet `i` as sent, writable: for patching header fields (sequence number, send time)
    /// just before it leaves. Empty past the capacity.
    pub fn packet_mut(&mut self, i: usize) -> &mut [u8] {
        let start = i * self.stride;
        let len = self.len_of(i);
        self.buf.get_mut(start..start + len).unwrap_or_default()
    }

    /// Packets `a..b` as one buffer (their strides back to back, the last one cut to its
    /// length). Meaningful as equal segments only when the slot is [`uniform`](Self::uniform).
    pub fn span(&self, a: usize, b: usize) -> &[u8] {
        if b <= a {
            return &[];
        }
        let end = (b - 1) * self.stride + self.len_of(b - 1);
        self.buf.get(a * self.stride..end).unwrap_or_default()
    }

    /// Bytes of packets `a..b` on the wire (RTP headers, payload and padding).
    pub fn wire_bytes(&self, a: usize, b: usize) -> u64 {
        (a..b.min(self.lens.len()))
            .map(|i| u64::from(self.lens[i]))
            .sum()
    }
}

/// The bounded ring of frames. `capacity` frames of up to `max_packets` packets of `stride`
/// bytes each are allocated up front.
pub struct FrameRing {
    slots: Circulation<FrameSlot>,
    max_packets: usize,
}

impl FrameRing {
    /// A ring of `capacity` frames, each with room for `max_packets` packets of `stride`
    /// bytes; all three are raised to at least 1. Every slot starts on the free queue.
    pub fn new(capacity: usize, max_packets: usize, stride: usize) -> FrameRing {
        let slots = (0..capacity.max(1)).map(|_| FrameSlot::new(max_packets, stride));
        FrameRing {
            slots: Circulation::new(slots),
            max_packets: max_packets.max(1),
        }
    }

    /// Most packets a slot holds.
    pub fn max_packets(&self) -> usize {
        self.max_packets
    }

    /// Producer: an empty slot to fill, if the ring is not full.
    pub fn take_free(&self) -> Option<FrameSlot> {
        self.slots.take_free()
    }

    /// Producer: hands a filled slot to the pacer.
    pub fn publish(&self, slot: FrameSlot) {
        self.slots.publish(slot);
    }

    /// Producer: returns a slot it did not fill.
    pub fn give_back(&self, slot: FrameSlot) {
        self.slots.recycle(slot);
    }

    /// Pacer: the next frame, oldest first.
    pub fn next_ready(&self) -> Option<FrameSlot> {
        self.slots.next_ready()
    }

    /// Pacer: a sent frame's slot goes back to the producer.
    pub fn recycle(&self, slot: FrameSlot) {
        self.slots.recycle(slot);
    }

    /// Frames waiting to be sent.
    pub fn ready_len(&self) -> usize {
        self.slots.ready_len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_lengths() {
        let ring = FrameRing::new(2, 3, 10);
        let mut s = ring.take_free().unwrap();
        assert_eq!((s.capacity(), s.stride()), (3, 10));
        for i in 0..3 {
            s.room_mut(i).unwrap().fill(i as u8 + 1);
            s.set_len(i, if i == 2 { 4 } else { 10 });
        }
        assert!(s.room_mut(3).is_none());
        s.npackets = 3;
        assert_eq!(s.span(0, 3).len(), 24);
        assert_eq!(s.span(1, 2), &[2u8; 10][..]);
        assert_eq!(s.packet(2), &[3u8; 4][..]);
        assert_eq!(s.wire_bytes(0, 3), 24);
        assert!(s.span(2, 2).is_empty());
        ring.publish(s);
        assert_eq!(ring.ready_len(), 1);
        let s = ring.next_ready().unwrap();
        ring.recycle(s);
        assert!(ring.take_free().is_some() && ring.take_free().is_some());
        assert!(ring.take_free().is_none());
    }
}
