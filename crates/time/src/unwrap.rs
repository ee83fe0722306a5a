//! Extending wrapping RTP counters with a rollover count (RFC 3550 Appendix A.1).

/// Extends 16-bit RTP sequence numbers to 64 bits.
///
/// Each new value is placed at the extension nearest to the highest value seen so far, so a value
/// up to 2^15 behind the highest is taken as late (reordered or duplicated), and one up to 2^15
/// ahead as new. Whether a jump is plausible (RFC 3550 `MAX_DROPOUT`) is the caller's policy.
#[derive(Clone, Debug, Default)]
pub struct SeqUnwrapper {
    highest: Option<u64>,
}

impl SeqUnwrapper {
    /// An unwrapper that has seen nothing yet. Its first value is placed one cycle up
    /// (`seq + 65536`), so a packet reordered before it still has room below.
    pub fn new() -> Self {
        Self::default()
    }
    /// The extended value of `seq`, without changing state.
    pub fn peek(&self, seq: u16) -> u64 {
        match self.highest {
            None => seq as u64 + (1 << 16), // start one cycle up so that early reordering cannot underflow
            Some(h) => {
                let delta = seq.wrapping_sub(h as u16) as i16 as i64;
                (h as i64 + delta).max(0) as u64
            }
        }
    }
    /// The extended value of `seq`; the highest value seen advances if it is ahead.
    pub fn unwrap(&mut self, seq: u16) -> u64 {
        let ext = self.peek(seq);
        if self.highest.is_none_or(|h| ext > h) {
            self.highest = Some(ext);
        }
        ext
    }
    /// Forget history (for example after a source restarts its sequence).
    pub fn reset(&mut self) {
        self.highest = None;
    }
    /// The highest extended sequence number seen so far, `None` before the first
    /// [`SeqUnwrapper::unwrap`] or after a [`SeqUnwrapper::reset`].
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }
}

/// Extends a `BITS`-bit clock to 64 bits, the same way as [`SeqUnwrapper`] with a window of
/// half its range: 32-bit RTP timestamps ([`RtpTsUnwrapper`]) and abs-send-time's 24 bits
/// ([`AbsSendTimeUnwrapper`]).
#[derive(Clone, Debug, Default)]
pub struct ClockUnwrapper<const BITS: u32> {
    last: Option<u64>,
}

/// Extends 32-bit RTP timestamps.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_wraps_forward_and_tolerates_reordering_across_the_wrap() {
        let mut u = SeqUnwrapper::new();
        let a = u.unwrap(65_534);
        assert_eq!(u.unwrap(65_535), a + 1);
        assert_eq!(u.unwrap(0), a + 2);
        assert_eq!(u.unwrap(1), a + 3);
        // A late packet from before the wrap maps below, not one cycle ahead.
        assert_eq!(u.unwrap(65_535), a + 1);
        assert_eq!(u.highest(), Some(a + 3));
        // Reordering at the very start does not underflow.
        let mut v = SeqUnwrapper::new();
        let b = v.unwrap(0);
        assert_eq!(v.unwrap(65_535), b - 1);
    }

    #[test]
    fn rtp_timestamp_wraps() {
        let mut u = RtpTsUnwrapper::new();
        let a = u.unwrap(u32::MAX - 10);
        assert_eq!(u.unwrap(5), a + 16);
        assert_eq!(u.unwrap(u32::MAX), a + 10);
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
