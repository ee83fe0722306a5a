//! The producer: frames from the source, stamped and payloaded into ring slots.

use super::*;
use metronome_rt::run::EndedBy;

/// A frame published with its epoch less than this ahead wakes the pacer at once.
const WAKE_PACER_WITHIN: Duration = Duration::from_millis(2);

/// Largest RTP padding (RFC 3550 §5.1: the count is one octet).
const MAX_PADDING: usize = 255;

/// What the producer needs to know about the stream's timing.
pub(super) struct Plan {
    pub(super) ff: FrameFormat,
    pub(super) epoch0: Timestamp,
    pub(super) end: Option<Timestamp>,
    pub(super) frames: Option<u64>,
    pub(super) live: bool,
    pub(super) lead: Duration,
    pub(super) pad: bool,
}

/// The producer: frames from the source, stamped and payloaded into ring slots, in order.
/// Returns why it stopped.
///
/// A [self-timed](RawSource::self_timed) source (a camera) is not held to the frame grid:
/// `next_frame` blocks until a frame is captured and stamps its capture time itself, and the
/// frame's epoch is the instant it is ready, so the pacer starts sending it at once under the
/// chosen model. The duration then counts on the clock rather than on the grid.
pub(super) fn produce(
    source: &mut dyn RawSource,
    pay: &mut RawPayloader,
    rt: &RawStreamRt,
    wake: &dyn Fn(),
    clock: &Clock,
    plan: &Plan,
) -> Result<EndedBy, RawSendError> {
    let ring = &rt.ring;
    let mut frame = RawFrame::new(source.format());
    let self_timed = source.self_timed();
    let mut n = 0u64;
    loop {
        if rt.stop.load(Ordering::Relaxed) {
            return Ok(EndedBy::Stopped);
        }
        if plan.frames.is_some_and(|f| n >= f) {
            return Ok(EndedBy::Frames);
        }
        let epoch = if self_timed {
            clock.now()
        } else {
            plan.ff.frame_epoch(plan.epoch0, n)
        };
        if plan.end.is_some_and(|end| epoch >= end) {
            return Ok(EndedBy::Duration);
        }
        let Some(mut slot) = take_free(ring, &rt.stop) else {
            return Ok(EndedBy::Stopped);
        };
        if plan.live
            && !self_timed
            && !sleep_until(clock, epoch.saturating_sub(plan.lead), &rt.stop)
        {
            ring.give_back(slot);
            return Ok(EndedBy::Stopped);
        }
        if !source.next_frame(&mut frame)? {
            ring.give_back(slot);
            return Ok(EndedBy::EndOfInput);
        }
        frame.index = n;
        if !self_timed {
            frame.capture_ns = clock.realtime_ns_from_timestamp(epoch);
        }
        if let Err(e) = payload_into(pay, &frame, &mut slot, plan.pad) {
            ring.give_back(slot);
            return Err(e.into());
        }
        let ready = clock.now();
        slot.index = n;
        slot.epoch = if self_timed { ready } else { epoch };
        // The pacer sleeps until the next frame on the grid is due; it needs waking only for a
        // frame that is (nearly) due already: a camera's, or one produced late.
        let wake_pacer = slot.epoch <= ready + WAKE_PACER_WITHIN;
        slot.capture_ns = frame.capture_ns;
        slot.ready_at = ready;
        ring.publish(slot);
        if wake_pacer {
            wake();
        }
        n += 1;
    }
}

/// A free slot, waiting while the ring is full; `None` if stopped meanwhile.
fn take_free(ring: &FrameRing, stop: &AtomicBool) -> Option<FrameSlot> {
    loop {
        if let Some(s) = ring.take_free() {
            return Some(s);
        }
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sleeps until `t` in steps of at most 50 ms; false if stopped meanwhile.
fn sleep_until(clock: &Clock, t: Timestamp, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = t.saturating_since(clock.now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// Writes every packet of `frame` into `slot`, padding all but the last to the slot's stride
/// (RFC 3550 §5.1) when `pad`, so that the frame is uniform for GSO.
pub(super) fn payload_into(
    pay: &mut RawPayloader,
    frame: &RawFrame,
    slot: &mut FrameSlot,
    pad: bool,
) -> Result<(), RawPayError> {
    let stride = slot.stride();
    let mut packets = pay.begin_frame(frame)?;
    let (mut i, mut payload, mut uniform) = (0, 0u64, true);
    // The slot was sized by `packets_for` for this payloader, so it has room for every packet.
    while let Some(room) = slot.room_mut(i) {
        let Some(info) = packets.next_packet(room)? else {
            break;
        };
        let mut len = info.len;
        if !info.marker && len < stride {
            if pad && stride - len <= MAX_PADDING {
                add_padding(room, len);
                len = stride;
            } else {
                uniform = false;
            }
        }
        slot.set_len(i, len);
        payload += info.payload_len as u64;
        i += 1;
    }
    slot.npackets = i;
    slot.uniform = uniform;
    slot.payload_bytes = payload;
    Ok(())
}

/// Pads the RTP packet of `len` bytes at the start of `room` to the whole of `room` (at most
/// 255 more bytes): P bit set, zeros, and the padding count in the last octet (RFC 3550 §5.1).
fn add_padding(room: &mut [u8], len: usize) {
    let total = room.len();
    let pad = total - len;
    room[len..total - 1].fill(0);
    room[total - 1] = pad as u8;
    room[0] |= 0x20;
}
