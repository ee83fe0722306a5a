//! The bounds of a stream's rate knob, sans-IO: the session's rate controller targets a rate
//! in bits on the wire; the source follows it in its own units (MPEG-TS bit/s), within what it
//! can do and what admission reserved.

use metronome_time::Bitrate;
use std::ops::RangeInclusive;

/// Where a stream's source rate may go, and how it converts to the session's wire rate.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimits {
    /// Source (MPEG-TS) bit/s per bit/s of the session's rate.
    pub ts_per_wire: f64,
    /// The rates the source can switch to; `None` for a source whose rate is its own (a file).
    pub range: Option<RangeInclusive<u64>>,
    /// The most it may be raised to: what admission reserved.
    pub ceiling: u64,
}

/// Why a source rate may not be asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RateRefusal {
    /// The source's rate is its own.
    Fixed,
    /// Above what admission reserved for the stream.
    AboveCeiling {
        /// The most that may be asked for, source bit/s.
        ceiling: u64,
    },
    /// Outside what the source can do (up to the ceiling).
    OutsideRange {
        /// The source rates that may be asked for, bit/s ([`RateLimits::allowed`]).
        range: RangeInclusive<u64>,
    },
}

impl RateLimits {
    /// The source rates a change may ask for: the source's range up to the ceiling.
    pub fn allowed(&self) -> Option<RangeInclusive<u64>> {
        let r = self.range.clone()?;
        (*r.start() <= self.ceiling).then(|| *r.start()..=(*r.end()).min(self.ceiling))
    }

    /// The session's rate in wire bits for a source rate.
    pub fn wire(&self, source: u64) -> Bitrate {
        Bitrate::bps((source as f64 / self.ts_per_wire).round() as u64)
    }

    /// The source rate that follows a wire rate, kept within what is allowed; `None` for a
    /// source whose rate is its own.
    pub fn source_rate(&self, wire: Bitrate) -> Option<u64> {
        let allowed = self.allowed()?;
        let ts = (wire.as_bps() as f64 * self.ts_per_wire).round() as u64;
        Some(ts.clamp(*allowed.start(), *allowed.end()))
    }

    /// The source rate of a wire rate, as it is: for a rate reported to a source that caps
    /// what it averages itself (Evalvid-RA's VBR controller); `None` for a source whose rate
    /// is its own.
    pub fn source_rate_unclamped(&self, wire: Bitrate) -> Option<u64> {
        self.allowed()?;
        Some((wire.as_bps() as f64 * self.ts_per_wire).round() as u64)
    }

    /// Whether `source` bit/s may be asked for.
    pub fn check(&self, source: u64) -> Result<(), RateRefusal> {
        let allowed = self.allowed().ok_or(RateRefusal::Fixed)?;
        if source > *allowed.end() && source > self.ceiling {
            return Err(RateRefusal::AboveCeiling {
                ceiling: self.ceiling,
            });
        }
        if !allowed.contains(&source) {
            return Err(RateRefusal::OutsideRange { range: allowed });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_bound_and_convert_the_rate() {
        // 1316 TS bytes per 1356 on the wire; the source runs 150 kbit/s to 1 Gbit/s, admitted
        // for 4 Mbit/s.
        let l = RateLimits {
            ts_per_wire: 1316.0 / 1356.0,
            range: Some(150_000..=1_000_000_000),
            ceiling: 4_000_000,
        };
        assert_eq!(l.allowed(), Some(150_000..=4_000_000));
        let wire = l.wire(2_000_000);
        assert_eq!(l.source_rate(wire), Some(2_000_000));
        assert_eq!(
            l.source_rate(Bitrate::mbps(100)),
            Some(4_000_000),
            "held to the ceiling"
        );
        assert_eq!(
            l.source_rate(Bitrate::bps(1)),
            Some(150_000),
            "and to the source's floor"
        );
        assert_eq!(l.check(3_000_000), Ok(()));
        assert_eq!(
            l.check(6_000_000),
            Err(RateRefusal::AboveCeiling { ceiling: 4_000_000 })
        );
        assert_eq!(
            l.check(50_000),
            Err(RateRefusal::OutsideRange {
                range: 150_000..=4_000_000
            })
        );
        let file = RateLimits { range: None, ..l };
        assert_eq!(
            (file.allowed(), file.check(1)),
            (None, Err(RateRefusal::Fixed))
        );
        assert_eq!(file.source_rate(wire), None);
    }
}
