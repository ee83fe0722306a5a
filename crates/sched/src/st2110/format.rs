//! The ST 2110-21 parameters of one video format: TFRAME, NPACKETS, RACTIVE, TROFFSET, and the
//! quantities derived from them (TRS, TDRAIN, CMAX, VRX_FULL). Exact integer arithmetic: every
//! period is a rational number of nanoseconds and only the final value is floored.

use metronome_time::{MediaClock, RtpTime, Timestamp};
use serde::Serialize;
use std::time::Duration;

const NS_PER_S: u128 = 1_000_000_000;
/// The RTP clock of video (ST 2110-20 §6.1 via RFC 4175: 90 kHz).
const RTP_CLOCK: MediaClock = MediaClock::VIDEO_90K;

/// Frames per second as a fraction (`60000/1001` for 59.94). TFRAME = `den/num` seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FrameRate {
    num: u32,
    den: u32,
}

impl FrameRate {
    /// 50 frames per second (TFRAME 20 ms).
    pub const P50: FrameRate = FrameRate { num: 50, den: 1 };
    /// 60000/1001 ≈ 59.94 frames per second (TFRAME ≈ 16.683 ms).
    pub const P59_94: FrameRate = FrameRate {
        num: 60_000,
        den: 1_001,
    };
    /// 60 frames per second (TFRAME ≈ 16.667 ms).
    pub const P60: FrameRate = FrameRate { num: 60, den: 1 };

    /// `num/den` frames per second, reduced. A zero in either place is replaced by 1 (as
    /// `MediaClock::new` does for a zero rate) rather than dividing by zero later.
    pub fn new(num: u32, den: u32) -> Self {
        let (num, den) = (num.max(1), den.max(1));
        let g = gcd(num as u128, den as u128) as u32;
        FrameRate {
            num: num / g,
            den: den / g,
        }
    }
    /// The rate whose frame period is `period` (nanosecond precision; at most ~4.29 s).
    pub fn from_period(period: Duration) -> Self {
        let ns = u32::try_from(period.as_nanos()).unwrap_or(u32::MAX);
        FrameRate::new(1_000_000_000, ns)
    }
    /// Numerator of the reduced frames-per-second fraction (60000 for 59.94).
    pub fn num(self) -> u32 {
        self.num
    }
    /// Denominator of the reduced frames-per-second fraction (1001 for 59.94).
    pub fn den(self) -> u32 {
        self.den
    }
    /// Frames per second as a float, for display.
    pub fn fps(self) -> f64 {
        self.num as f64 / self.den as f64
    }
    /// TFRAME, floored to the nanosecond.
    pub fn period(self) -> Duration {
        Duration::from_nanos(self.tframe().floor_ns())
    }
    /// TFRAME exactly, in nanoseconds.
    pub(crate) fn tframe(self) -> Nanos {
        Nanos::new(NS_PER_S * self.den as u128, self.num as u128)
    }
}

/// RACTIVE as active/total lines. Only the gapped read schedule uses it (ST 2110-21 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ActiveRatio {
    active: u16,
    total: u16,
}

impl ActiveRatio {
    /// Progressive images, any size (§6.3.2: RACTIVE = 1080/1125). 720p's 720/750 is the
    /// same number, 0.96; EBU LIST and Intel MTL use 1080/1125 for every progressive raster.
    pub const PROGRESSIVE: ActiveRatio = ActiveRatio {
        active: 1080,
        total: 1125,
    };
    /// Interlaced 576-line formats (§6.3.3), for custom use: 0.9216.
    pub const I576: ActiveRatio = ActiveRatio {
        active: 576,
        total: 625,
    };
    /// Interlaced 480-line formats (§6.3.3): 487/525.
    pub const I480: ActiveRatio = ActiveRatio {
        active: 487,
        total: 525,
    };
    /// The linear read schedule: no blanking gap.
    pub const ONE: ActiveRatio = ActiveRatio {
        active: 1,
        total: 1,
    };

    /// `active/total`, or `None` unless `0 < active <= total`.
    pub fn new(active: u16, total: u16) -> Option<Self> {
        (active > 0 && active <= total).then_some(ActiveRatio { active, total })
    }
    /// RACTIVE as a number in `(0, 1]` (0.96 for progressive), for display.
    pub fn as_f64(self) -> f64 {
        self.active as f64 / self.total as f64
    }
}

/// The two packet read schedules (PRS) of the virtual receiver (§6.3 gapped, §6.4 linear).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReadSchedule {
    /// Packets read over RACTIVE × TFRAME, then a gap like SDI's vertical blanking.
    Gapped,
    /// Packets read evenly over the whole TFRAME.
    Linear,
}

/// The limits of both sender classes for one format and read schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// CMAX of narrow senders (N, NL), in packets: at least 4.
    pub cmax_narrow: u32,
    /// CMAX of wide senders (W), in packets: at least 16.
    pub cmax_wide: u32,
    /// VRX_FULL of narrow senders, in packets: at least 8.
    pub vrx_full_narrow: u32,
    /// VRX_FULL of wide senders, in packets: at least 720.
    pub vrx_full_wide: u32,
}

/// One progressive video format as ST 2110-21 sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FrameFormat {
    rate: FrameRate,
    npackets: u32,
    height: u32,
    ractive: ActiveRatio,
    troffset: Duration,
}

impl FrameFormat {
    /// A progressive format of `height` lines sent as `npackets` RTP packets per frame (at
    /// least 1), with RACTIVE = 1080/1125 and TROFFSET = TRODEFAULT.
    pub fn new(rate: FrameRate, npackets: u32, height: u32) -> Self {
        FrameFormat {
            rate,
            npackets: npackets.max(1),
            height,
            ractive: ActiveRatio::PROGRESSIVE,
            troffset: tro_default(rate, height),
        }
    }
    /// For rasters that are not broadcast formats, RACTIVE may be given as their own
    /// active/total lines. Below 1/β (≈ 0.909) a gapped sender cannot meet CMAX: its packets
    /// come faster than the network model drains them.
    pub fn with_active_ratio(mut self, ractive: ActiveRatio) -> Self {
        self.ractive = ractive;
        self
    }
    /// A TROFFSET other than TRODEFAULT (the SDP's `TROFF`).
    pub fn with_troffset(mut self, troffset: Duration) -> Self {
        self.troffset = troffset;
        self
    }
    /// The frame rate (TFRAME is its inverse).
    pub fn rate(&self) -> FrameRate {
        self.rate
    }
    /// NPACKETS: RTP packets per frame, at least 1.
    pub fn npackets(&self) -> u32 {
        self.npackets
    }
    /// Active lines per frame (1080 for 1080p); chooses TRODEFAULT.
    pub fn height(&self) -> u32 {
        self.height
    }
    /// RACTIVE, used by the gapped read schedule.
    pub fn active_ratio(&self) -> ActiveRatio {
        self.ractive
    }
    /// TROFFSET: from a frame's epoch to the virtual receiver's first read (TPR0).
    pub fn troffset(&self) -> Duration {
        self.troffset
    }
    /// TFRAME, the frame period, floored to the nanosecond.
    pub fn tframe(&self) -> Duration {
        self.rate.period()
    }
    /// RACTIVE as the read schedule uses it: 1 for the linear schedule (§6.4; EBU LIST
    /// `get_ractive` does the same, also inside the narrow CMAX formula).
    fn ractive_for(&self, schedule: ReadSchedule) -> ActiveRatio {
        match schedule {
            ReadSchedule::Gapped => self.ractive,
            ReadSchedule::Linear => ActiveRatio::ONE,
        }
    }
    /// TRS, the read interval: TFRAME × RACTIVE / NPACKETS (gapped, §6.3) or TFRAME /
    /// NPACKETS (linear, §6.4). Floored to the nanosecond; schedules use the exact value.
    pub fn trs(&self, schedule: ReadSchedule) -> Duration {
        Duration::from_nanos(self.trs_exact(schedule).floor_ns())
    }
    pub(crate) fn trs_exact(&self, schedule: ReadSchedule) -> Nanos {
        let r = self.ractive_for(schedule);
        let t = self.rate.tframe();
        Nanos::new(
            t.num * r.active as u128,
            t.den * r.total as u128 * self.npackets as u128,
        )
    }
    /// TDRAIN of the network compatibility model: (TFRAME / NPACKETS) / β with β = 1.1,
    /// whatever the read schedule (EBU LIST `c_calculator.cpp`).
    pub(crate) fn tdrain_exact(&self) -> Nanos {
        let t = self.rate.tframe();
        Nanos::new(t.num * 10, t.den * 11 * self.npackets as u128)
    }
    /// CMAX and VRX_FULL of narrow and wide senders (ST 2110-21 sender-type table; MAXIP =
    /// 1500 bytes, so 1500·8/MAXIP = 8 and 1500·720/MAXIP = 720):
    /// - narrow CMAX = max(4, ⌊NPACKETS / (43200 × RACTIVE × TFRAME)⌋)
    /// - wide CMAX = max(16, ⌊NPACKETS / (21600 × TFRAME)⌋)
    /// - narrow VRX_FULL = max(8, ⌊NPACKETS / (27000 × TFRAME)⌋)
    /// - wide VRX_FULL = max(720, ⌊NPACKETS / (300 × TFRAME)⌋)
    pub fn limits(&self, schedule: ReadSchedule) -> Limits {
        let r = self.ractive_for(schedule);
        // NPACKETS / (k × TFRAME) = NPACKETS × num / (k × den), TFRAME = den/num seconds.
        let per = |k: u128, active: u128, total: u128| -> u32 {
            let n = self.npackets as u128 * self.rate.num as u128 * total;
            let d = k * self.rate.den as u128 * active;
            u32::try_from(n / d).unwrap_or(u32::MAX)
        };
        Limits {
            cmax_narrow: per(43_200, r.active as u128, r.total as u128).max(4),
            cmax_wide: per(21_600, 1, 1).max(16),
            vrx_full_narrow: per(27_000, 1, 1).max(8),
            vrx_full_wide: per(300, 1, 1).max(720),
        }
    }
    /// The epoch of frame `n` on a stream whose frame 0 began at `stream_epoch`:
    /// `stream_epoch + ⌊n × TFRAME⌋` (ST 2110-21 aligns frame n to n × TFRAME after the SMPTE
    /// epoch; a Metronome stream uses its own start instead).
    pub fn frame_epoch(&self, stream_epoch: Timestamp, n: u64) -> Timestamp {
        let ns = self.rate.tframe().times_floor(n as i128);
        stream_epoch + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }
    /// The RTP timestamp of frame `n`: its epoch on the 90 kHz clock, ⌊n × TFRAME × 90000⌋
    /// modulo 2^32 (ST 2110-10 media clock; so 59.94 alternates 1501 and 1502 ticks).
    pub fn rtp_timestamp(&self, n: u64) -> RtpTime {
        RtpTime(RTP_CLOCK.frame_ticks(n, self.rate.num, self.rate.den) as u32)
    }
}

/// TRODEFAULT for progressive images (§6.3.2): 43 lines of 1125 × TFRAME from 1080 lines up,
/// 28 of 750 below (720p). Formats under 720 lines take 28/750 as well, as EBU LIST and MTL
/// do; interlaced formats (22/1125, 26/625, 20/525 of the frame) are not modelled here.
pub fn tro_default(rate: FrameRate, height: u32) -> Duration {
    let (lines, total) = if height >= 1080 {
        (43, 1125)
    } else {
        (28, 750)
    };
    let t = rate.tframe();
    Duration::from_nanos(Nanos::new(t.num * lines, t.den * total).floor_ns())
}

/// A non-negative rational number of nanoseconds, `num/den`, `den > 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Nanos {
    pub(crate) num: u128,
    pub(crate) den: u128,
}

impl Nanos {
    pub(crate) fn new(num: u128, den: u128) -> Self {
        let g = gcd(num, den.max(1)).max(1);
        Nanos {
            num: num / g,
            den: den.max(1) / g,
        }
    }
    pub(crate) fn floor_ns(self) -> u64 {
        u64::try_from(self.num / self.den).unwrap_or(u64::MAX)
    }
    pub(crate) fn as_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }
    /// ⌊k × self⌋ in nanoseconds, for any sign of k.
    pub(crate) fn times_floor(self, k: i128) -> i128 {
        let num = i128::try_from(self.num).unwrap_or(i128::MAX);
        let den = i128::try_from(self.den).unwrap_or(i128::MAX);
        k.saturating_mul(num).div_euclid(den)
    }
    /// How many whole periods of `self` fit in `ns` nanoseconds: ⌊ns / self⌋.
    pub(crate) fn periods_in(self, ns: u64) -> u64 {
        if self.num == 0 {
            return u64::MAX;
        }
        u64::try_from((ns as u128).saturating_mul(self.den) / self.num).unwrap_or(u64::MAX)
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_reduce_and_survive_zero() {
        assert_eq!(FrameRate::new(50, 1), FrameRate::new(100, 2));
        assert_eq!(FrameRate::new(0, 0), FrameRate::new(1, 1));
        assert_eq!(
            FrameRate::from_period(Duration::from_millis(20)),
            FrameRate::P50
        );
        assert_eq!(FrameRate::P59_94.period(), Duration::from_nanos(16_683_333));
    }

    #[test]
    fn rtp_timestamps_follow_frame_epochs() {
        let f = FrameFormat::new(FrameRate::P59_94, 4320, 1080);
        // 90000 × 1001 / 60000 = 1501.5 ticks a frame.
        assert_eq!(f.rtp_timestamp(1), RtpTime(1501));
        assert_eq!(f.rtp_timestamp(2), RtpTime(3003));
        assert_eq!(
            f.frame_epoch(Timestamp::ZERO, 3),
            Timestamp::from_nanos(50_050_000)
        );
    }

    #[test]
    fn active_ratio_rejects_nonsense() {
        assert!(ActiveRatio::new(0, 10).is_none());
        assert!(ActiveRatio::new(11, 10).is_none());
        assert_eq!(ActiveRatio::new(720, 750).unwrap().as_f64(), 0.96);
    }
}
