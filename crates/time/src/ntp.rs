//! NTP timestamps (RFC 5905 §6, used by RTCP: RFC 3550 §4 and §6.4.1).

use std::time::Duration;

/// Seconds from the NTP era 0 epoch (1900-01-01) to the Unix epoch (1970-01-01).
const NTP_UNIX_OFFSET_SECS: u64 = 2_208_988_800;

/// A 64-bit NTP timestamp: 32 bits of seconds since 1900, 32 bits of fraction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NtpTime(pub u64);

impl NtpTime {
    /// From nanoseconds since the Unix epoch (what CLOCK_REALTIME and SO_TIMESTAMPNS give).
    pub fn from_unix_nanos(ns: u64) -> Self {
        let secs = ns / 1_000_000_000 + NTP_UNIX_OFFSET_SECS;
        let frac = ((ns % 1_000_000_000) << 32) / 1_000_000_000;
        NtpTime((secs << 32) | frac)
    }
    /// Back to nanoseconds since the Unix epoch (zero for times before 1970).
    pub fn to_unix_nanos(self) -> u64 {
        let secs = (self.0 >> 32).saturating_sub(NTP_UNIX_OFFSET_SECS);
        let frac = ((self.0 & 0xffff_ffff) * 1_000_000_000) >> 32;
        secs * 1_000_000_000 + frac
    }
    /// The middle 32 bits, the "compact" form used in LSR and DLSR (RFC 3550 §6.4.1).
    pub fn compact(self) -> u32 {
        (self.0 >> 16) as u32
    }
    /// Nanoseconds from `earlier` to `self`, signed (clocks on one host agree; across hosts they may not).
    pub fn signed_nanos_since(self, earlier: NtpTime) -> i64 {
        self.to_unix_nanos() as i64 - earlier.to_unix_nanos() as i64
    }
}

/// A duration in compact NTP units (1/65536 s), as DLSR carries it.
pub(crate) fn compact_from_duration(d: Duration) -> u32 {
    let units = d.as_nanos() * 65_536 / 1_000_000_000;
    u32::try_from(units).unwrap_or(u32::MAX)
}

/// Compact NTP units (1/65536 s) to a duration.
pub(crate) fn compact_to_duration(units: u32) -> Duration {
    Duration::from_nanos((units as u64 * 1_000_000_000) >> 16)
}

impl NtpTime {
    /// Round-trip time from a report block, per RFC 3550 §6.4.1: `A - LSR - DLSR`, where `A` is the
    /// compact arrival time of the report. `None` when the report carries no LSR (no SR received yet)
    /// or the result would be negative (clock trouble or a forged report).
    pub fn round_trip(arrival: NtpTime, lsr: u32, dlsr: u32) -> Option<Duration> {
        if lsr == 0 {
            return None;
        }
        let a = arrival.compact();
        let rtt = a.wrapping_sub(lsr).wrapping_sub(dlsr);
        // A negative value shows as a huge wrapped one; more than 1/2 of the 18 h compact range is bogus.
        if rtt > u32::MAX / 2 {
            return None;
        }
        Some(compact_to_duration(rtt))
    }
    /// `d` in compact NTP units (1/65536 s, truncated), as the DLSR field of an RTCP report
    /// block carries it (RFC 3550 §6.4.1); saturates at `u32::MAX` (about 18.2 hours).
    pub fn compact_from_duration(d: Duration) -> u32 {
        compact_from_duration(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_round_trip_within_a_nanosecond() {
        let ns = 1_700_000_000_123_456_789;
        let back = NtpTime::from_unix_nanos(ns).to_unix_nanos();
        assert!(ns.abs_diff(back) <= 1, "{ns} vs {back}");
    }

    #[test]
    fn rfc3550_rtt_example() {
        // RFC 3550 §6.4.1 worked example: A = 0xb710:8000 (46864.500 s), LSR = 0xb705:2000
        // (46853.125 s), DLSR = 0x0005:4000 (5.250 s): RTT = 6.125 s.
        let arrival = NtpTime(0xb710_8000u64 << 16);
        let rtt = NtpTime::round_trip(arrival, 0xb705_2000, 0x0005_4000).unwrap();
        assert_eq!(rtt, Duration::from_millis(6125));
        assert_eq!(NtpTime::round_trip(arrival, 0, 5), None);
        // A report whose LSR + DLSR is later than its arrival is rejected, not wrapped into hours.
        assert_eq!(NtpTime::round_trip(arrival, 0xb710_8000, 0x10), None);
    }

    #[test]
    fn compact_units() {
        assert_eq!(compact_from_duration(Duration::from_secs(1)), 65_536);
        assert_eq!(compact_to_duration(32_768), Duration::from_millis(500));
    }
}
