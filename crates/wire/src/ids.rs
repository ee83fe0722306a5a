//! The identifiers RTP passes around, as types of their own: an SSRC is not a timestamp, a
//! count or a report's delay, though all four are 32 bits on the wire.

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

#[cfg(test)]
mod tests {
    use super::Ssrc;

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
