//! Time as Metronome's sans-IO core sees it.
//!
//! The core never reads a clock. Drivers pass time in:
//! - [`Timestamp`]: nanoseconds since a per-run epoch, monotonic. Every state machine takes `now: Timestamp`.
//! - [`NtpTime`]: wall-clock time in the RFC 3550 / RFC 5905 64-bit format, for RTCP sender reports and
//!   for the send-time header extension (on one host, sender and receiver wall clocks agree).
//! - [`MediaClock`]: converts between [`Timestamp`] and RTP media ticks (90 kHz for video, RFC 3551);
//!   [`RtpTime`], the 32-bit RTP timestamp those ticks make, wrapping.
//! - [`RtpTsUnwrapper`] and [`AbsSendTimeUnwrapper`]: extend 32-bit RTP timestamps and 24-bit send times
//!   with a rollover count (sequence numbers: `metronome_wire::SeqNo`).
//! - [`Distribution`]: a pre-allocated histogram of nanosecond values (lateness, jitter, delay).
//! - [`Bitrate`]: a rate in bit/s, and how long bytes take at it.
//! - [`Micros`]: a duration as machine output writes one, in microseconds.
//! - [`mix::splitmix64`]: the seed mixer every crate uses.
//! - [`json::rounded`]: figures as Metronome's JSON writes them (six decimals at most).

mod dist;
pub mod json;
mod micros;
pub mod mix;
mod ntp;
mod rate;
mod rtp_time;
pub mod units;
mod unwrap;

pub use dist::{Distribution, Summary};
pub use micros::Micros;
pub use ntp::NtpTime;
pub use rate::{Bitrate, IPV4_UDP_OVERHEAD};
pub use rtp_time::RtpTime;
pub use unwrap::{AbsSendTimeUnwrapper, ClockUnwrapper, RtpTsUnwrapper};

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time, in nanoseconds since the run's epoch (the driver's choice of zero).
///
/// Monotonic within a run. `Timestamp::ZERO` is the epoch; a simulator starts there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The run's epoch, 0 ns: where a simulated run starts.
    pub const ZERO: Timestamp = Timestamp(0);
    /// The latest representable instant, 2^64 − 1 ns (about 584 years) after the epoch; the
    /// value arithmetic saturates at, and a convenient "never" for deadlines.
    pub const MAX: Timestamp = Timestamp(u64::MAX);

    /// The instant `ns` nanoseconds after the epoch.
    pub const fn from_nanos(ns: u64) -> Self {
        Timestamp(ns)
    }
    /// The instant `us` microseconds after the epoch (saturating at [`Timestamp::MAX`]).
    pub const fn from_micros(us: u64) -> Self {
        Timestamp(us.saturating_mul(1_000))
    }
    /// The instant `s` whole seconds after the epoch (saturating at [`Timestamp::MAX`]).
    pub const fn from_secs(s: u64) -> Self {
        Timestamp(s.saturating_mul(1_000_000_000))
    }
    /// The instant `ms` milliseconds after the epoch (saturating at [`Timestamp::MAX`]).
    pub const fn from_millis(ms: u64) -> Self {
        Timestamp(ms.saturating_mul(1_000_000))
    }
    /// Nanoseconds since the epoch: the exact internal value.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Seconds since the epoch as a float, for display and statistics (loses nanosecond
    /// precision beyond about 104 days, where f64's 53-bit mantissa runs out).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Time elapsed since `earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
    /// Signed difference `self - other` in nanoseconds (positive when `self` is later).
    pub fn signed_nanos_since(self, other: Timestamp) -> i64 {
        (self.0 as i128 - other.0 as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
    /// The instant `d` before `self`, or `None` if that would be before the epoch.
    pub fn checked_sub(self, d: Duration) -> Option<Timestamp> {
        self.0.checked_sub(dur_nanos(d)).map(Timestamp)
    }
    /// The instant `d` before `self`, clamped at the epoch ([`Timestamp::ZERO`]).
    pub fn saturating_sub(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(dur_nanos(d)))
    }
}

fn dur_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(dur_nanos(d)))
    }
}

impl AddAssign<Duration> for Timestamp {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Timestamp> for Timestamp {
    type Output = Duration;
    /// Saturating: an earlier minus a later timestamp is zero. Use
    /// [`Timestamp::signed_nanos_since`] where the sign matters.
    fn sub(self, rhs: Timestamp) -> Duration {
        self.saturating_since(rhs)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

/// An RTP media clock: a rate in Hz (RFC 3550 §5.1 "timestamp").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MediaClock {
    rate: u32,
}

impl MediaClock {
    /// The 90 kHz clock of video and MPEG-TS payloads (RFC 3551 §5, RFC 2250 §2).
    pub const VIDEO_90K: MediaClock = MediaClock { rate: 90_000 };

    /// A clock at `rate` Hz. A rate of zero makes no sense and is replaced by 1 Hz.
    pub const fn new(rate: u32) -> Self {
        MediaClock {
            rate: if rate == 0 { 1 } else { rate },
        }
    }
    /// The clock rate in Hz (ticks per second); never zero.
    pub const fn rate(self) -> u32 {
        self.rate
    }
    /// Whole ticks in `d` (truncating), modulo 2^64.
    pub fn ticks(self, d: Duration) -> u64 {
        (d.as_nanos() * self.rate as u128 / 1_000_000_000) as u64
    }
    /// The RTP timestamp of `t` for a stream whose timestamp at `epoch` is `base` (wraps at 2^32).
    pub fn rtp_timestamp(self, base: RtpTime, epoch: Timestamp, t: Timestamp) -> RtpTime {
        let ticks = self.ticks(t.saturating_since(epoch));
        base.add(ticks as u32)
    }
    /// Ticks to a duration (nanosecond precision, truncating).
    pub fn duration(self, ticks: u64) -> Duration {
        Duration::from_nanos((ticks as u128 * 1_000_000_000 / self.rate as u128) as u64)
    }
    /// Ticks to seconds as a float, for statistics such as RFC 3550 jitter.
    pub fn ticks_to_secs(self, ticks: f64) -> f64 {
        ticks / self.rate as f64
    }

    /// The tick of frame `index` at `fps_num/fps_den` frames per second: its sampling instant,
    /// `⌊index × rate × fps_den / fps_num⌋`, modulo 2^64. Exact integer arithmetic (a u128
    /// intermediate, so no drift over any number of frames): at 90 kHz, 30000/1001 gives
    /// 3003 ticks a frame and 60000/1001 alternates 1501 and 1502. An RTP timestamp is the
    /// stream's base plus the low 32 bits of this. A zero `fps_num` is taken as 1.
    ///
    /// The one home of this formula: the RFC 4175 payloader and depayloader and the ST 2110
    /// models use it (and [`Self::frames_nearest`], its inverse).
    pub fn frame_ticks(self, index: u64, fps_num: u32, fps_den: u32) -> u64 {
        // < 2^64 × 2^32 × 2^32: no overflow.
        let ticks = u128::from(index) * u128::from(self.rate) * u128::from(fps_den)
            / u128::from(fps_num.max(1));
        ticks as u64
    }

    /// The inverse of [`Self::frame_ticks`]: the whole number of frames at `fps_num/fps_den`
    /// nearest to `ticks` (halves round up; negative for negative `ticks`). Frame ticks are
    /// floored, so the difference of two frames' ticks gives back the difference of their
    /// indices whenever a frame is longer than two ticks. Zeros in the rate are taken as 1.
    pub fn frames_nearest(self, ticks: i128, fps_num: u32, fps_den: u32) -> i128 {
        let num = i128::from(fps_num.max(1));
        let per = i128::from(self.rate) * i128::from(fps_den.max(1));
        (2 * ticks * num + per).div_euclid(2 * per)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_arithmetic_saturates() {
        let t = Timestamp::from_millis(5);
        assert_eq!(t + Duration::from_millis(1), Timestamp::from_millis(6));
        assert_eq!(Timestamp::from_millis(1) - t, Duration::ZERO);
        assert_eq!(t.signed_nanos_since(Timestamp::from_millis(6)), -1_000_000);
        assert_eq!(Timestamp::MAX + Duration::from_secs(1), Timestamp::MAX);
    }

    #[test]
    fn rtp_timestamp_at_90k_wraps() {
        let c = MediaClock::VIDEO_90K;
        let epoch = Timestamp::from_millis(1000);
        // 1 s after the epoch is 90 000 ticks.
        assert_eq!(
            c.rtp_timestamp(RtpTime(10), epoch, epoch + Duration::from_secs(1)),
            RtpTime(90_010)
        );
        // Near the top of the 32-bit range the timestamp wraps.
        assert_eq!(
            c.rtp_timestamp(RtpTime(u32::MAX), epoch, epoch + Duration::from_micros(100)),
            RtpTime(8)
        );
        assert_eq!(c.duration(90_000), Duration::from_secs(1));
    }

    /// `frame_ticks` at 90 kHz another way, in u64 only: `num` frames take exactly
    /// `90000 × den` ticks, so whole cycles of `num` frames, then the frames left.
    fn frame_ticks_reference(index: u64, num: u64, den: u64) -> u64 {
        let (cycles, rest) = (index / num, index % num);
        cycles * 90_000 * den + rest * 90_000 * den / num
    }

    #[test]
    fn frame_ticks_are_exact_at_ntsc_rates() {
        let c = MediaClock::VIDEO_90K;
        // 29.97: exactly 3003 ticks a frame.
        for n in [0, 1, 2, 1000, 30_000, 1_000_001] {
            assert_eq!(c.frame_ticks(n, 30_000, 1001), n * 3003, "frame {n}");
        }
        // 59.94: 1501.5 ticks a frame, floored, so steps alternate 1501 and 1502.
        let steps: Vec<u64> = (0..6)
            .map(|n| c.frame_ticks(n + 1, 60_000, 1001) - c.frame_ticks(n, 60_000, 1001))
            .collect();
        assert_eq!(steps, [1501, 1502, 1501, 1502, 1501, 1502]);
        assert_eq!(c.frame_ticks(1, 25, 1), 3600);
        assert_eq!(c.frame_ticks(7, 50, 1), 12_600);
        // An unreduced rate gives the same ticks.
        assert_eq!(
            c.frame_ticks(12_345, 60_000, 2002),
            c.frame_ticks(12_345, 30_000, 1001)
        );
        // Another clock rate: 48 kHz audio "frames" of 1/1000 s.
        assert_eq!(MediaClock::new(48_000).frame_ticks(3, 1000, 1), 144);
        assert_eq!(c.frame_ticks(5, 0, 1), c.frame_ticks(5, 1, 1));
    }

    #[test]
    fn frame_ticks_do_not_drift_at_huge_indices() {
        let c = MediaClock::VIDEO_90K;
        // About 30 million years of 29.97 video: beyond f64's 53-bit mantissa, still exact.
        let n = (1u64 << 52) + 12_345;
        assert_eq!(c.frame_ticks(n, 30_000, 1001), n * 3003);
        assert_eq!(
            c.frame_ticks(n, 60_000, 1001),
            frame_ticks_reference(n, 60_000, 1001)
        );
        assert_eq!(
            c.frame_ticks(n, 24_000, 1001),
            frame_ticks_reference(n, 24_000, 1001)
        );
        // A float formula is off here; the integer one is not.
        let float = (n as f64 * 90_000.0 * 1001.0 / 60_000.0) as u64;
        assert_ne!(float, c.frame_ticks(n, 60_000, 1001));
        // The largest index: the tick count wraps modulo 2^64, and its low 32 bits (what an
        // RTP timestamp carries) are those of the exact product.
        let exact = u128::from(u64::MAX) * 90_000 * 1001 / 30_000;
        assert_eq!(c.frame_ticks(u64::MAX, 30_000, 1001), exact as u64);
        assert_eq!(c.frame_ticks(u64::MAX, 30_000, 1001) as u32, exact as u32);
        assert_eq!(
            c.frame_ticks(u64::MAX, 1, u32::MAX),
            (u128::from(u64::MAX) * 90_000 * u128::from(u32::MAX)) as u64
        );
    }

    #[test]
    fn frames_nearest_inverts_frame_ticks() {
        let c = MediaClock::VIDEO_90K;
        for (num, den) in [(30_000, 1001), (60_000, 1001), (25, 1), (50, 1), (1000, 1)] {
            for a in [0u64, 1, 7, 1_000_003] {
                for k in 0..5u64 {
                    let d =
                        c.frame_ticks(a + k, num, den) as i128 - c.frame_ticks(a, num, den) as i128;
                    assert_eq!(
                        c.frames_nearest(d, num, den),
                        k as i128,
                        "{num}/{den} {a}+{k}"
                    );
                    assert_eq!(c.frames_nearest(-d, num, den), -(k as i128));
                }
            }
        }
        // Nearest, halves up: a 29.97 frame is 3003 ticks, a 25 fps one 3600.
        assert_eq!(c.frames_nearest(1501, 30_000, 1001), 0);
        assert_eq!(c.frames_nearest(1502, 30_000, 1001), 1);
        assert_eq!(c.frames_nearest(-1502, 30_000, 1001), -1);
        assert_eq!(c.frames_nearest(1799, 25, 1), 0);
        assert_eq!(c.frames_nearest(1800, 25, 1), 1);
        assert_eq!(c.frames_nearest(-1800, 25, 1), 0);
    }
}
