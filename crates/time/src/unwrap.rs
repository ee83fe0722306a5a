//! Extending wrapping RTP clocks with a rollover count (RFC 3550 Appendix A.1).

use crate::RtpTime;

/// Extends a `BITS`-bit clock to 64 bits, each value nearest the last (a window of half its
/// range): 32-bit RTP timestamps ([`RtpTsUnwrapper`]) and abs-send-time's 24 bits
/// ([`AbsSendTimeUnwrapper`]). Sequence numbers extend with `metronome_wire::SeqNo`.
#[derive(Clone, Debug, Default)]
pub struct ClockUnwrapper<const BITS: u32> {
    last: Option<u64>,
}

/// Extends 32-bit RTP timestamps ([`ClockUnwrapper::unwrap_rtp`]).
pub type RtpTsUnwrapper = ClockUnwrapper<32>;
/// Extends WebRTC's 24-bit abs-send-time (6.18 fixed-point seconds, wrapping every 64 s).
pub type AbsSendTimeUnwrapper = ClockUnwrapper<24>;

impl<const BITS: u32> ClockUnwrapper<BITS> {
    const RANGE: i64 = 1 << BITS;

    /// An unwrapper that has seen nothing yet. Its first value is placed one cycle up
    /// (`v + 2^BITS`), so a value that arrives later but lies before it still extends
    /// without going below zero.
    pub fn new() -> Self {
        ClockUnwrapper { last: None }
    }
    /// The extended value of `v` (its low `BITS` bits) relative to the last value given (not
    /// the highest: timestamps of reordered packets go back and forth legitimately).
    pub fn unwrap(&mut self, v: u32) -> u64 {
        let v = i64::from(v) & (Self::RANGE - 1);
        let ext = match self.last {
            None => v + Self::RANGE,
            Some(l) => {
                let l = l as i64;
                let mut delta = (v - l).rem_euclid(Self::RANGE);
                if delta >= Self::RANGE / 2 {
                    delta -= Self::RANGE;
                }
                (l + delta).max(0)
            }
        } as u64;
        self.last = Some(ext);
        ext
    }
    /// Forget the last value (for example after the source restarts its clock); the next
    /// value is placed as if it were the first.
    pub fn reset(&mut self) {
        self.last = None;
    }
}

impl ClockUnwrapper<32> {
    /// The extended value of RTP timestamp `ts` ([`ClockUnwrapper::unwrap`] of its bits).
    pub fn unwrap_rtp(&mut self, ts: RtpTime) -> u64 {
        self.unwrap(ts.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtp_timestamp_wraps() {
        let mut u = RtpTsUnwrapper::new();
        let a = u.unwrap(u32::MAX - 10);
        assert_eq!(u.unwrap(5), a + 16);
        assert_eq!(u.unwrap(u32::MAX), a + 10);
        assert_eq!(u.unwrap_rtp(RtpTime(7)), a + 18);
    }

    #[test]
    fn abs_send_time_wraps_every_64_seconds() {
        let mut u = AbsSendTimeUnwrapper::new();
        let top = (1 << 24) - 1;
        let a = u.unwrap(top - 2);
        assert_eq!(u.unwrap(1), a + 4);
        assert_eq!(u.unwrap(top), a + 2);
        // Bits above the 24 are not the clock's.
        assert_eq!(u.unwrap(0xFF00_0003), a + 6);
    }
}
