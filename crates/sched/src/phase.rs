//! Release phases: where in its period a new stream's jobs start.
//!
//! Streams that release together queue behind each other in the pacer: with 100 streams of the
//! same period started within a few milliseconds, dozens of jobs can fall due in the same tens of
//! microseconds, and the last of them leaves late by all their send costs. Giving the k-th stream
//! the phase `frac(k·φ)·T` on a grid shared by every stream (φ the golden ratio's conjugate)
//! spreads any number of equal-period streams almost evenly over the period (the three-distance
//! theorem: the gaps take at most three sizes, within a factor φ+1 of each other), without
//! knowing how many will come. A stream starts at most one period later than it could have.

use metronome_time::Timestamp;
use std::time::Duration;

/// 2^64 / φ, for the fractional part of k·φ in fixed point.
const PHI_FRAC: u64 = 0x9E37_79B9_7F4A_7C15;

/// The first instant at or after `earliest` whose phase on the grid `k·period` from time zero
/// is the `k`-th stream's staggered phase.
pub fn staggered_start(earliest: Timestamp, period: Duration, k: u64) -> Timestamp {
    let t = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX);
    if t == 0 {
        return earliest;
    }
    let frac = k.wrapping_mul(PHI_FRAC);
    let want = ((frac as u128 * t as u128) >> 64) as u64;
    let cur = earliest.as_nanos() % t;
    let delta = (want + t - cur) % t;
    earliest + Duration::from_nanos(delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_period_streams_spread_over_the_period() {
        let period = Duration::from_micros(2632);
        let t = period.as_nanos() as u64;
        let n = 100u64;
        let mut phases: Vec<u64> = (0..n)
            .map(|k| {
                // Streams start at arbitrary moments a few ms apart.
                let earliest = Timestamp::from_nanos(1_000_000_007 + k * 3_141_593);
                let s = staggered_start(earliest, period, k);
                assert!(s >= earliest && s < earliest + period);
                s.as_nanos() % t
            })
            .collect();
        phases.sort_unstable();
        let mut gaps: Vec<u64> = phases.windows(2).map(|w| w[1] - w[0]).collect();
        gaps.push(phases[0] + t - phases[n as usize - 1]);
        let min = *gaps.iter().min().unwrap();
        let max = *gaps.iter().max().unwrap();
        // Even spacing would be t/100 = 26 µs; the golden-ratio sequence stays within ~2.6x.
        assert!(min * 3 >= t / n, "smallest gap {min} ns");
        assert!(max <= 3 * t / n, "largest gap {max} ns");
    }

    #[test]
    fn a_zero_period_starts_at_once() {
        let e = Timestamp::from_nanos(5);
        assert_eq!(staggered_start(e, Duration::ZERO, 3), e);
    }
}
