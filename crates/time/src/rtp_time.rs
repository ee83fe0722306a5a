//! [`RtpTime`]: an RTP timestamp, the media clock's 32 bits that wrap.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An RTP timestamp (RFC 3550 §5.1): the sampling instant of a packet's first octet in ticks
/// of the stream's media clock ([`crate::MediaClock`]), 32 bits from a random base, wrapping.
///
/// It has no `Ord`: which of two is later is serial arithmetic's ([`RtpTime::delta`], the
/// signed ticks between them, as RFC 3550 A.8's transit and every play-out clock compute it).
/// Written as its number (JSON too), as every document and the wire spell one.
#[derive(
    Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct RtpTime(pub u32);

impl RtpTime {
    /// The 32 bits as the wire carries them.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// `ticks` later, mod 2^32.
    pub const fn add(self, ticks: u32) -> RtpTime {
        RtpTime(self.0.wrapping_add(ticks))
    }

    /// `ticks` earlier, mod 2^32.
    pub const fn sub(self, ticks: u32) -> RtpTime {
        RtpTime(self.0.wrapping_sub(ticks))
    }

    /// How many ticks forward from `earlier` this timestamp is, mod 2^32.
    pub const fn since(self, earlier: RtpTime) -> u32 {
        self.0.wrapping_sub(earlier.0)
    }

    /// How many ticks this timestamp is after `other` (negative: before), -2^31 to 2^31 - 1.
    /// Exactly half the range apart counts as before.
    pub const fn delta(self, other: RtpTime) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// Its 4 bytes in network order, as a header carries them.
    pub const fn to_be_bytes(self) -> [u8; 4] {
        self.0.to_be_bytes()
    }

    /// From 4 bytes in network order.
    pub const fn from_be_bytes(b: [u8; 4]) -> RtpTime {
        RtpTime(u32::from_be_bytes(b))
    }
}

impl From<u32> for RtpTime {
    fn from(v: u32) -> RtpTime {
        RtpTime(v)
    }
}

impl From<RtpTime> for u32 {
    fn from(t: RtpTime) -> u32 {
        t.0
    }
}

impl fmt::Display for RtpTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for RtpTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::RtpTime;

    #[test]
    fn order_is_serial_and_wraps() {
        assert_eq!(RtpTime(5).delta(RtpTime(u32::MAX - 4)), 10);
        assert_eq!(RtpTime(u32::MAX - 4).delta(RtpTime(5)), -10);
        assert_eq!(RtpTime(1 << 31).delta(RtpTime(0)), i32::MIN);
        assert_eq!(RtpTime(u32::MAX).add(3), RtpTime(2));
        assert_eq!(RtpTime(2).since(RtpTime(u32::MAX)), 3);
        assert_eq!(RtpTime(2).sub(3), RtpTime(u32::MAX));
        assert_eq!(
            RtpTime::from_be_bytes([0, 0, 1, 2]).to_be_bytes(),
            [0, 0, 1, 2]
        );
        assert_eq!(format!("{} {:?}", RtpTime(90_000), RtpTime(7)), "90000 7");
        assert_eq!(serde_json::to_string(&RtpTime(42)).unwrap(), "42");
        assert_eq!(serde_json::from_str::<RtpTime>("42").unwrap(), RtpTime(42));
    }
}
