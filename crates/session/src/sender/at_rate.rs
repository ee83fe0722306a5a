//! Sending at the rate controller's rate, as a rate-based transport sends what its application
//! hands it (TFRC's sender, RFC 5348 §4.6; TFMCC's, RFC 4654 §3.7; Evalvid-RA's agents): a
//! packet is due when it was made, and packets leave one after another, each once the sender
//! is free: `s / X` after the one before it left, at the rate `X` of the moment that one left.
//! What the rate does not carry waits in the session's queue, so a rate that rises reaches the
//! packets already made (a source that fixed each packet's time when it made it could not).

use metronome_time::{Bitrate, Timestamp};
use std::time::Duration;

/// The longest the sender waits after one packet: above TFMCC's least rate (one packet per
/// 8 s, RFC 4654 §3.1) at the largest packet.
const LONGEST_GAP: Duration = Duration::from_secs(64);

/// When the sender is free to send its next packet (see the module).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AtRate {
    free_at: Option<Timestamp>,
}

impl AtRate {
    /// When a packet due at `due` may leave: at once if the sender is free, else when it is.
    pub(super) fn release(&self, due: Timestamp) -> Timestamp {
        self.free_at.map_or(due, |free| free.max(due))
    }

    /// A packet of `wire_bytes` left, released at `release`, while the rate was `rate`: the
    /// next leaves its time at that rate later. Counted from its release, not from when the
    /// driver sent it, so that a driver woken late does not slow the stream (RFC 5348 §4.6's
    /// `t_nom`).
    pub(super) fn on_sent(&mut self, release: Timestamp, wire_bytes: u32, rate: Bitrate) {
        let secs = f64::from(wire_bytes) * 8.0 / rate.as_bps().max(1) as f64;
        let gap = Duration::from_secs_f64(secs.min(LONGEST_GAP.as_secs_f64()));
        self.free_at = Some(release + gap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_packet_waits_its_time_at_the_rate_of_when_the_one_before_left() {
        let mut a = AtRate::default();
        let t0 = Timestamp::from_nanos(1_000_000_000);
        assert_eq!(a.release(t0), t0, "the first leaves when due");
        // 1000 bytes at 80 kbit/s: 100 ms.
        a.on_sent(t0, 1000, Bitrate::bps(80_000));
        let next = a.release(t0);
        assert_eq!(next, t0 + Duration::from_millis(100));
        // The rate rose meanwhile: the packet after it waits only its time at the new rate.
        a.on_sent(next, 1000, Bitrate::bps(800_000));
        assert_eq!(a.release(t0), next + Duration::from_millis(10));
        // A packet made after the sender was free leaves when it is due.
        let late = next + Duration::from_secs(1);
        assert_eq!(a.release(late), late);
    }

    #[test]
    fn no_rate_is_a_bounded_wait() {
        let mut a = AtRate::default();
        a.on_sent(Timestamp::ZERO, 1500, Bitrate::bps(0));
        assert_eq!(a.release(Timestamp::ZERO), Timestamp::ZERO + LONGEST_GAP);
    }
}
