//! [`Bitrate`]: a rate in bit/s, and the time a number of bytes takes at it.

use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// The bytes an IPv4 header (20) and a UDP header (8) add to a datagram's payload: what a link
/// carries and a rate on the wire counts, beside the payload. The one definition every crate
/// uses.
pub const IPV4_UDP_OVERHEAD: usize = 28;

/// A bit rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Bitrate(u64);

impl Bitrate {
    /// No rate at all: nothing can be sent ([`Bitrate::transmit_time`] gives `None`).
    pub const ZERO: Bitrate = Bitrate(0);

    /// A rate of `bps` bits per second.
    pub const fn bps(bps: u64) -> Self {
        Bitrate(bps)
    }
    /// A rate of `kbps` kilobits per second (decimal: 1 kbit/s = 1000 bit/s), saturating.
    pub const fn kbps(kbps: u64) -> Self {
        Bitrate(kbps.saturating_mul(1_000))
    }
    /// A rate of `mbps` megabits per second (decimal: 1 Mbit/s = 10^6 bit/s), saturating.
    pub const fn mbps(mbps: u64) -> Self {
        Bitrate(mbps.saturating_mul(1_000_000))
    }
    /// The rate in bits per second.
    pub const fn as_bps(self) -> u64 {
        self.0
    }
    /// How long `bytes` take at this rate, rounded up to the nanosecond; `None` at zero rate.
    pub fn transmit_time(self, bytes: u64) -> Option<Duration> {
        if self.0 == 0 {
            return None;
        }
        let ns = (bytes as u128 * 8 * 1_000_000_000).div_ceil(self.0 as u128);
        Some(Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)))
    }

    /// This rate times `factor` (a factor below zero or not finite gives zero).
    pub fn scaled(self, factor: f64) -> Bitrate {
        if !(factor.is_finite() && factor > 0.0) {
            return Bitrate::ZERO;
        }
        // `as` saturates a float above u64::MAX.
        Bitrate((self.0 as f64 * factor) as u64)
    }
}

impl fmt::Display for Bitrate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            v if v >= 1_000_000 => write!(f, "{:.3} Mbit/s", v as f64 / 1e6),
            v if v >= 1_000 => write!(f, "{:.3} kbit/s", v as f64 / 1e3),
            v => write!(f, "{v} bit/s"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transmit_time_is_bits_over_rate_rounded_up() {
        // 1328 bytes at 5 Mbit/s: 10624 bits / 5e6 = 2.1248 ms.
        let t = Bitrate::mbps(5).transmit_time(1328).unwrap();
        assert_eq!(t, Duration::from_nanos(2_124_800));
        // 1 byte at 3 bit/s: 8/3 s, rounded up.
        let t = Bitrate::bps(3).transmit_time(1).unwrap();
        assert_eq!(t, Duration::from_nanos(2_666_666_667));
        assert_eq!(Bitrate::ZERO.transmit_time(100), None);
    }

    #[test]
    fn scaling_and_display() {
        assert_eq!(Bitrate::mbps(4).scaled(2.5), Bitrate::mbps(10));
        assert_eq!(Bitrate::mbps(4).scaled(-1.0), Bitrate::ZERO);
        assert_eq!(Bitrate::mbps(4).scaled(f64::NAN), Bitrate::ZERO);
        assert_eq!(Bitrate::kbps(1500).to_string(), "1.500 Mbit/s");
        assert_eq!(Bitrate::bps(800).to_string(), "800 bit/s");
    }
}
