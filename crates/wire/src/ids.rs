//! The identifiers RTP passes around, as types of their own: an SSRC is not a timestamp, a
//! count or a report's delay, though all four are 32 bits on the wire; a payload type is not a
//! byte of payload or a count of packets.

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

#[cfg(test)]
mod tests {
    use super::{PayloadType, Ssrc};

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
