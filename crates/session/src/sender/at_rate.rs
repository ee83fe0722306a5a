//! Sending at the rate controller's rate, as a rate-based transport sends what its application
//! hands it (TFRC's sender, RFC 5348 §4.6; TFMCC's, RFC 4654 §3.7; Evalvid-RA's agents): a
//! packet is due when it was made, and packets leave one after another, each once the sender
//! is free: `s / X` after the one before it left, at the rate `X` of the moment that one left
//! (a rate that rises meanwhile shortens the wait). What the rate does not carry waits in the
//! session's queue, so a rate that rises reaches the packets already made (a source that fixed
//! each packet's time when it made it could not). A dropped packet frees the sender at once.

use metronome_time::{Bitrate, Timestamp};
use std::time::Duration;

/// The longest the sender waits after one packet: above TFMCC's least rate (one packet per
/// 8 s, RFC 4654 §3.1) at the largest packet.
const LONGEST_GAP: Duration = Duration::from_secs(64);

/// When the sender is free to send its next packet (see the module).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AtRate {
    free_at: Option<Timestamp>,
    /// The last packet sent: when its time at the rate began, and its bytes on the wire.
    last: Option<(Timestamp, u32)>,
}

/// How early a packet may leave against the sender's nominal schedule (RFC 5348 §4.6's
/// `t_delta`, at most half a packet's time): a driver woken this much late does not slow the
/// stream, one that was stalled longer does not make up the stall at more than the rate.
const EARLY: Duration = Duration::from_millis(1);

impl AtRate {
    /// When a packet due at `due` may leave: at once if the sender is free, else when it is.
    pub(super) fn release(&self, due: Timestamp) -> Timestamp {
        self.free_at.map_or(due, |free| free.max(due))
    }

    /// A packet of `wire_bytes` left at `now`, released at `release`, while the rate was
    /// `rate`: the next leaves its time at that rate later, counted from its release (RFC
    /// 5348 §4.6's `t_nom`) unless it left more than [`EARLY`] (or half its time) after it.
    pub(super) fn on_sent(
        &mut self,
        release: Timestamp,
        now: Timestamp,
        wire_bytes: u32,
        rate: Bitrate,
    ) {
        let gap = gap(wire_bytes, rate);
        let slack = EARLY.min(gap / 2);
        let from = release.max(now.saturating_sub(slack));
        self.last = Some((from, wire_bytes));
        self.free_at = Some(from + gap);
    }

    /// A retransmission of `wire_bytes` left at `now`, outside the stream's schedule: the
    /// sender is busy its time at `rate` longer, so that the stream and its repairs together
    /// keep to the rate.
    pub(super) fn on_repair(&mut self, now: Timestamp, wire_bytes: u32, rate: Bitrate) {
        // Its time begins when the stream's last packet's ends; it is the last sent now.
        let from = self.free_at.map_or(now, |f| f.max(now));
        self.last = Some((from, wire_bytes));
        self.free_at = Some(from + gap(wire_bytes, rate));
    }

    /// A packet was dropped at `now` (too late): the sender is free now, so that the packets
    /// behind it are not judged late by a schedule it no longer keeps.
    pub(super) fn on_dropped(&mut self, now: Timestamp) {
        self.free_at = Some(self.free_at.map_or(now, |f| f.max(now)));
    }

    /// The rate changed to `rate` at `now`: a faster rate shortens the wait after the last
    /// packet, to no sooner than now (a slower one applies from the next).
    pub(super) fn on_rate(&mut self, rate: Bitrate, now: Timestamp) {
        if let (Some((from, bytes)), Some(free)) = (self.last, self.free_at) {
            self.free_at = Some(free.min((from + gap(bytes, rate)).max(now)));
        }
    }
}

/// A packet's time at `rate`, at most [`LONGEST_GAP`].
pub(super) fn gap(wire_bytes: u32, rate: Bitrate) -> Duration {
    let secs = f64::from(wire_bytes) * 8.0 / rate.as_bps().max(1) as f64;
    Duration::from_secs_f64(secs.min(LONGEST_GAP.as_secs_f64()))
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
        a.on_sent(t0, t0, 1000, Bitrate::bps(80_000));
        let next = a.release(t0);
        assert_eq!(next, t0 + Duration::from_millis(100));
        // The rate rose meanwhile: the packet after it waits only its time at the new rate.
        a.on_sent(next, next, 1000, Bitrate::bps(800_000));
        assert_eq!(a.release(t0), next + Duration::from_millis(10));
        // A packet made after the sender was free leaves when it is due.
        let late = next + Duration::from_secs(1);
        assert_eq!(a.release(late), late);
    }

    #[test]
    fn a_repair_takes_its_time_at_the_rate_after_the_stream_packet_before_it() {
        let mut a = AtRate::default();
        let t0 = Timestamp::from_nanos(1_000_000_000);
        // 1000 bytes at 80 kbit/s: 100 ms; a 500-byte repair right after it: 50 ms more.
        a.on_sent(t0, t0, 1000, Bitrate::bps(80_000));
        a.on_repair(t0, 500, Bitrate::bps(80_000));
        assert_eq!(a.release(t0), t0 + Duration::from_millis(150));
        // The rate doubles at 120 ms: the repair's time is halved from where it began.
        a.on_rate(Bitrate::bps(160_000), t0 + Duration::from_millis(120));
        assert_eq!(a.release(t0), t0 + Duration::from_millis(125));
        // An idle sender: the repair's time starts now.
        let idle = t0 + Duration::from_secs(1);
        a.on_repair(idle, 1000, Bitrate::bps(80_000));
        assert_eq!(a.release(idle), idle + Duration::from_millis(100));
    }

    #[test]
    fn no_rate_is_a_bounded_wait() {
        let mut a = AtRate::default();
        a.on_sent(Timestamp::ZERO, Timestamp::ZERO, 1500, Bitrate::bps(0));
        assert_eq!(a.release(Timestamp::ZERO), Timestamp::ZERO + LONGEST_GAP);
        // A rate that comes meanwhile shortens the wait.
        a.on_rate(Bitrate::bps(12_000_000), Timestamp::ZERO);
        assert_eq!(a.release(Timestamp::ZERO), Timestamp::from_micros(1000));
    }

    #[test]
    fn a_sender_late_or_dropping_does_not_send_faster_than_the_rate_or_drop_what_follows() {
        let mut a = AtRate::default();
        let t0 = Timestamp::from_nanos(1_000_000_000);
        // Sent 50 ms after its release: the next waits its whole time from then, less 1 ms.
        a.on_sent(
            t0,
            t0 + Duration::from_millis(50),
            1000,
            Bitrate::bps(80_000),
        );
        assert_eq!(a.release(t0), t0 + Duration::from_millis(149));
        // 20 µs late: the schedule is kept.
        let mut b = AtRate::default();
        b.on_sent(
            t0,
            t0 + Duration::from_micros(20),
            1000,
            Bitrate::bps(80_000),
        );
        assert_eq!(b.release(t0), t0 + Duration::from_millis(100));
        // A drop at a time past the schedule frees the sender then.
        let late = t0 + Duration::from_secs(1);
        b.on_dropped(late);
        assert_eq!(b.release(t0), late);
    }
}
