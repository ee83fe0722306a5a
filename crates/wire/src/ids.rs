//! The identifiers RTP passes around, as types of their own: an SSRC is not a timestamp, a
//! count or a report's delay, though all four are 32 bits on the wire; a payload type is not a
//! byte of payload or a count of packets; a sequence number wraps, and its order is serial
//! arithmetic's, not an integer's.

use std::fmt;

/// An RTP synchronization source identifier (RFC 3550 §5.1, §8): which stream a packet
/// belongs to, which participant sent a report, which source a report block is about.
///
/// Shown as 8 lowercase hex digits (`{}` and `{:08x}`), as every Metronome document and
/// message spells one.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ssrc(pub u32);

impl Ssrc {
    /// The 32 bits as the wire carries them.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// Its 4 bytes in network order, as a header or report carries them.
    pub const fn to_be_bytes(self) -> [u8; 4] {
        self.0.to_be_bytes()
    }

    /// From 4 bytes in network order.
    pub const fn from_be_bytes(b: [u8; 4]) -> Ssrc {
        Ssrc(u32::from_be_bytes(b))
    }
}

impl From<u32> for Ssrc {
    fn from(v: u32) -> Ssrc {
        Ssrc(v)
    }
}

impl From<Ssrc> for u32 {
    fn from(s: Ssrc) -> u32 {
        s.0
    }
}

impl fmt::Display for Ssrc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!("{:08x}", self.0))
    }
}

impl fmt::Debug for Ssrc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ssrc(0x{:08x})", self.0)
    }
}

impl fmt::LowerHex for Ssrc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// As RTSP's `Transport: ...;ssrc=` spells one (RFC 2326 §12.39 examples).
impl fmt::UpperHex for Ssrc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::UpperHex::fmt(&self.0, f)
    }
}

/// An RTP payload type (RFC 3550 §5.1): 7 bits that say what the payload is, 33 for MPEG-TS
/// (RFC 3551), 96-127 for what an SDP's `a=rtpmap` names (RFC 4175 video, RFC 4588
/// retransmissions, FEC). Shown as its decimal number, as SDP writes it (`{:?}` too, so that
/// traces that print a packet's verdict read as before it had a type). The field is a whole
/// byte: what fits the header's 7 bits is [`PayloadType::is_valid`]'s to say, and the
/// payloaders refuse the rest.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PayloadType(pub u8);

impl PayloadType {
    /// MPEG-TS over RTP (RFC 2250, RFC 3551's static 33).
    pub const MP2T: PayloadType = PayloadType(33);

    /// The number (not masked to 7 bits: see [`PayloadType::is_valid`]).
    pub const fn get(self) -> u8 {
        self.0
    }

    /// Whether it fits the header's 7 bits (0-127).
    pub const fn is_valid(self) -> bool {
        self.0 <= 127
    }

    /// Whether it is in the dynamic range (96-127), which an SDP must name.
    pub const fn is_dynamic(self) -> bool {
        self.0 >= 96 && self.0 <= 127
    }
}

impl From<u8> for PayloadType {
    fn from(v: u8) -> PayloadType {
        PayloadType(v)
    }
}

impl From<PayloadType> for u8 {
    fn from(p: PayloadType) -> u8 {
        p.0
    }
}

impl fmt::Display for PayloadType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for PayloadType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// An RTP sequence number (RFC 3550 §5.1): 16 bits that count a stream's packets and wrap.
///
/// It has no `Ord`: numbers that wrap have no total order. Which of two is later is serial
/// number arithmetic's (RFC 1982): [`SeqNo::delta`], [`SeqNo::is_after`]. Where a count
/// must not wrap, [`SeqNo::extend_near`] places the number on a 64-bit line. Shown as its
/// decimal number (`{:?}` too), as Wireshark and every Metronome document spell one.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SeqNo(pub u16);

impl SeqNo {
    /// The 16 bits as the wire carries them.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// The 16-bit number of an extended one (its low bits: what the header carries of a 64-bit
    /// count or of RFC 4175's 32-bit number).
    pub const fn of_extended(ext: u64) -> SeqNo {
        SeqNo(ext as u16)
    }

    /// The number after this one (65535 is followed by 0).
    pub const fn next(self) -> SeqNo {
        SeqNo(self.0.wrapping_add(1))
    }

    /// The number `n` after this one, mod 2^16.
    pub const fn add(self, n: u16) -> SeqNo {
        SeqNo(self.0.wrapping_add(n))
    }

    /// The number `n` before this one, mod 2^16.
    pub const fn sub(self, n: u16) -> SeqNo {
        SeqNo(self.0.wrapping_sub(n))
    }

    /// How many numbers forward from `earlier` this one is, mod 2^16 (0-65535): a packet's
    /// index in a stream that began at `earlier`.
    pub const fn since(self, earlier: SeqNo) -> u16 {
        self.0.wrapping_sub(earlier.0)
    }

    /// How far this number is after `other` (negative: before), -32768 to 32767, as RFC 1982
    /// compares serial numbers. Exactly half the range apart counts as before.
    pub const fn delta(self, other: SeqNo) -> i16 {
        self.0.wrapping_sub(other.0) as i16
    }

    /// Whether this number is after `other` (strictly, in serial arithmetic).
    pub const fn is_after(self, other: SeqNo) -> bool {
        self.delta(other) > 0
    }

    /// The value on a 64-bit line whose low 16 bits are this number, nearest to `near` (an
    /// extended number seen before): at most 2^15 behind it or less than 2^15 ahead (RFC 3550
    /// Appendix A.1's rollover, without its plausibility rules, which are the caller's). The
    /// line has ends: near 0, a number behind `near` by more than `near` goes a cycle up; near
    /// `u64::MAX`, one ahead past it goes a cycle down.
    pub const fn extend_near(self, near: u64) -> u64 {
        let delta = (self.0.wrapping_sub(near as u16) as i16) as i64;
        match near.checked_add_signed(delta) {
            Some(ext) => ext,
            None if delta < 0 => near.wrapping_add_signed(delta).wrapping_add(1 << 16),
            None => near.wrapping_add_signed(delta).wrapping_sub(1 << 16),
        }
    }

    /// Its 2 bytes in network order, as a header carries them.
    pub const fn to_be_bytes(self) -> [u8; 2] {
        self.0.to_be_bytes()
    }

    /// From 2 bytes in network order.
    pub const fn from_be_bytes(b: [u8; 2]) -> SeqNo {
        SeqNo(u16::from_be_bytes(b))
    }
}

/// Extends a stream's sequence numbers to 64 bits, each at [`SeqNo::extend_near`] the highest
/// so far: up to 2^15 behind the highest is late (reordered or duplicated), less than 2^15
/// ahead is new. Whether a jump is plausible (RFC 3550 `MAX_DROPOUT`) is the caller's policy.
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
    pub fn peek(&self, seq: SeqNo) -> u64 {
        match self.highest {
            None => u64::from(seq.0) + (1 << 16),
            Some(h) => seq.extend_near(h),
        }
    }

    /// The extended value of `seq`; the highest value seen advances if it is ahead.
    pub fn unwrap(&mut self, seq: SeqNo) -> u64 {
        let ext = self.peek(seq);
        if self.highest.is_none_or(|h| ext > h) {
            self.highest = Some(ext);
        }
        ext
    }

    /// Forgets history (for example after a source restarts its sequence).
    pub fn reset(&mut self) {
        self.highest = None;
    }

    /// The highest extended sequence number seen so far, `None` before the first
    /// [`SeqUnwrapper::unwrap`] or after a [`SeqUnwrapper::reset`].
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }
}

impl From<u16> for SeqNo {
    fn from(v: u16) -> SeqNo {
        SeqNo(v)
    }
}

impl From<SeqNo> for u16 {
    fn from(s: SeqNo) -> u16 {
        s.0
    }
}

impl fmt::Display for SeqNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for SeqNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::{PayloadType, SeqNo, SeqUnwrapper, Ssrc};

    /// The nearest value with these low 16 bits, by trying the three cycles around `near`
    /// (ties to the lower), as the definition says.
    fn nearest_by_search(seq: u16, near: u64) -> u64 {
        let base = near & !0xffff;
        [
            base.checked_sub(0x1_0000),
            Some(base),
            base.checked_add(0x1_0000),
        ]
        .into_iter()
        .flatten()
        .map(|b| b | u64::from(seq))
        .min_by_key(|c| c.abs_diff(near))
        .unwrap()
    }

    #[test]
    fn extension_is_the_nearest_value_with_those_low_bits() {
        let nears = [
            0u64,
            1,
            0x7fff,
            0x8000,
            0xffff,
            0x1_0000,
            0x1_8000,
            0x12_3456,
            1 << 40,
            u64::MAX - 0xffff,
            u64::MAX - 0x8000,
            u64::MAX - 0x7fff,
            u64::MAX - 1,
            u64::MAX,
        ];
        for near in nears {
            for seq in [
                0u16, 1, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff, 0x3456,
            ] {
                assert_eq!(
                    SeqNo(seq).extend_near(near),
                    nearest_by_search(seq, near),
                    "seq {seq:#x} near {near:#x}"
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn extension_agrees_with_the_search(seq: u16, near: u64) {
            let ext = SeqNo(seq).extend_near(near);
            proptest::prop_assert_eq!(ext, nearest_by_search(seq, near));
            proptest::prop_assert_eq!(ext as u16, seq);
        }
    }

    #[test]
    fn a_stream_unwraps_forward_and_tolerates_reordering_across_the_wrap() {
        let mut u = SeqUnwrapper::new();
        let a = u.unwrap(SeqNo(65_534));
        assert_eq!(u.unwrap(SeqNo(65_535)), a + 1);
        assert_eq!(u.unwrap(SeqNo(0)), a + 2);
        assert_eq!(u.unwrap(SeqNo(1)), a + 3);
        // A late packet from before the wrap maps below, not one cycle ahead.
        assert_eq!(u.unwrap(SeqNo(65_535)), a + 1);
        assert_eq!(u.highest(), Some(a + 3));
        // Reordering at the very start does not underflow.
        let mut v = SeqUnwrapper::new();
        let b = v.unwrap(SeqNo(0));
        assert_eq!(v.unwrap(SeqNo(65_535)), b - 1);
        v.reset();
        assert_eq!(v.highest(), None);
    }

    #[test]
    fn serial_order_wraps() {
        assert!(SeqNo(0).is_after(SeqNo(65535)));
        assert!(!SeqNo(65535).is_after(SeqNo(0)));
        assert_eq!(SeqNo(3).delta(SeqNo(65533)), 6);
        assert_eq!(SeqNo(0x8000).delta(SeqNo(0)), i16::MIN);
        assert!(!SeqNo(5).is_after(SeqNo(5)));
        assert_eq!(SeqNo(2).since(SeqNo(65534)), 4);
        assert_eq!(SeqNo(65535).next(), SeqNo(0));
        assert_eq!(SeqNo::of_extended(0x3_0007), SeqNo(7));
        assert_eq!(SeqNo(1).sub(2), SeqNo(65535));
        assert_eq!(SeqNo(65535).add(3), SeqNo(2));
        assert_eq!(format!("{} {:?}", SeqNo(7), SeqNo(7)), "7 7");
        assert_eq!(SeqNo::from_be_bytes([1, 2]).to_be_bytes(), [1, 2]);
        assert_eq!(u16::from(SeqNo::from(9)), 9);
    }

    #[test]
    fn a_payload_type_is_seven_bits_and_reads_as_sdp_writes_it() {
        assert!(PayloadType(127).is_valid() && !PayloadType(128).is_valid());
        assert!(PayloadType(96).is_dynamic() && PayloadType(127).is_dynamic());
        assert!(!PayloadType(95).is_dynamic() && !PayloadType(128).is_dynamic());
        assert!(!PayloadType::MP2T.is_dynamic());
        assert_eq!(
            format!("{} {:?}", PayloadType(97), PayloadType(97)),
            "97 97"
        );
        assert_eq!(u8::from(PayloadType::from(33)), 33);
    }

    #[test]
    fn an_ssrc_reads_as_eight_hex_digits() {
        let s = Ssrc(0x00ab_cdef);
        assert_eq!(s.to_string(), "00abcdef");
        assert_eq!(format!("{s:08x}"), "00abcdef");
        assert_eq!(format!("{s:?}"), "Ssrc(0x00abcdef)");
        assert_eq!(format!("{s:>10}"), "  00abcdef");
        assert_eq!(u32::from(s), 0x00ab_cdef);
        assert_eq!(Ssrc::from(7).get(), 7);
    }
}
