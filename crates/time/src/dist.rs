//! Latency and interval distributions: a pre-allocated HDR histogram and its summary.

use crate::Micros;
use hdrhistogram::Histogram;
use serde::Serialize;

/// A distribution of non-negative nanosecond values, 1 ns to 100 s at 3 significant digits.
/// All memory is allocated up front; recording never allocates. Values above the range are
/// clamped to it (and counted in `clamped`).
#[derive(Clone, Debug)]
pub struct Distribution {
    hist: Histogram<u64>,
    clamped: u64,
    /// Keeps nothing ([`with_digits`](Distribution::with_digits)`(0)`).
    off: bool,
}

const MAX_NS: u64 = 100_000_000_000;

impl Default for Distribution {
    fn default() -> Self {
        Self::new()
    }
}

impl Distribution {
    /// A distribution at 3 significant digits (about 200 KB, allocated here).
    pub fn new() -> Self {
        Self::with_digits(3)
    }

    /// A distribution kept to `digits` significant digits (1 to 3; 3 is [`new`](Self::new)),
    /// or none at all (0: it records nothing and stays empty). Memory is what bounds it: 3
    /// digits take about 200 KB, 2 about 30 KB, 1 about 4 KB; a simulation of ten thousand
    /// receivers keeps none per receiver and measures delay its own way.
    pub fn with_digits(digits: u8) -> Self {
        let (hi, digits) = if digits == 0 {
            (2, 0)
        } else {
            (MAX_NS, digits.min(3))
        };
        let mut hist =
            Histogram::new_with_bounds(1, hi, digits).expect("static histogram bounds are valid");
        hist.auto(false);
        Distribution {
            hist,
            clamped: 0,
            off: digits == 0,
        }
    }
    /// Adds one value in nanoseconds. Zero is recorded as 1 ns (the histogram's floor);
    /// anything above 100 s is recorded as 100 s and counted as clamped. Does nothing in a
    /// distribution made with 0 digits. Never allocates.
    pub fn record(&mut self, ns: u64) {
        if self.off {
            return;
        }
        let v = if ns > MAX_NS {
            self.clamped += 1;
            MAX_NS
        } else {
            ns.max(1)
        };
        // Cannot fail: v is within the bounds the histogram was built with.
        let _ = self.hist.record(v);
    }
    /// How many values have been recorded (clamped ones included).
    pub fn len(&self) -> u64 {
        self.hist.len()
    }
    /// Whether no value has been recorded (always true with 0 digits).
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }
    /// Forgets every value recorded, keeping the allocation and the precision.
    pub fn clear(&mut self) {
        self.hist.reset();
        self.clamped = 0;
    }
    /// Adds every value of `other` to this one. Does nothing if either was made with 0
    /// digits. Merging a finer distribution into a coarser one keeps the coarser precision.
    pub fn merge(&mut self, other: &Distribution) {
        if self.off || other.off {
            return;
        }
        let _ = self.hist.add(&other.hist);
        self.clamped += other.clamped;
    }
    /// The value in nanoseconds at quantile `q` (0.0 to 1.0: 0.5 is the median), to the
    /// histogram's precision; 0 when nothing has been recorded.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.value_at_quantile(q)
        }
    }
    /// Count, minimum, mean, median, p99, p99.9 and maximum (all zero when empty).
    pub fn summary(&self) -> Summary {
        let empty = self.hist.is_empty();
        let ns = |v: u64| Micros::from_nanos_u64(if empty { 0 } else { v });
        Summary {
            count: self.hist.len(),
            min_us: ns(self.hist.min()),
            mean_us: Micros::from_nanos_u64(if empty {
                0
            } else {
                self.hist.mean().round() as u64
            }),
            p50_us: ns(self.quantile_ns(0.50)),
            p99_us: ns(self.quantile_ns(0.99)),
            p999_us: ns(self.quantile_ns(0.999)),
            max_us: ns(self.hist.max()),
        }
    }
}

/// A distribution of durations (its figures in µs in JSON), for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Summary {
    /// Number of values recorded, including those clamped to 100 s.
    pub count: u64,
    /// Smallest value (to the histogram's precision; 0 when empty).
    pub min_us: Micros,
    /// Arithmetic mean (computed from the histogram's buckets; 0 when empty).
    pub mean_us: Micros,
    /// Median (50th percentile).
    pub p50_us: Micros,
    /// 99th percentile.
    pub p99_us: Micros,
    /// 99.9th percentile.
    pub p999_us: Micros,
    /// Largest value (to the histogram's precision; at most 100 s, values above are
    /// clamped; 0 when empty).
    pub max_us: Micros,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs, max {:.1} µs ({} samples)",
            self.p50_us.as_micros_f64(),
            self.p99_us.as_micros_f64(),
            self.p999_us.as_micros_f64(),
            self.max_us.as_micros_f64(),
            self.count
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewer_digits_keep_coarser_quantiles_and_zero_keeps_nothing() {
        let mut fine = Distribution::new();
        let mut coarse = Distribution::with_digits(1);
        let mut off = Distribution::with_digits(0);
        for v in 1..=1000u64 {
            fine.record(v * 1000);
            coarse.record(v * 1000);
            off.record(v * 1000);
        }
        let p50 = fine.quantile_ns(0.5) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.001, "{p50}");
        // One significant digit: within one bucket of 1/16 (HDR keeps 2^k sub-buckets).
        let c50 = coarse.quantile_ns(0.5) as f64;
        assert!((c50 - 500_000.0).abs() / 500_000.0 < 0.1, "{c50}");
        assert_eq!(coarse.len(), 1000);
        assert!(off.is_empty());
        assert_eq!(off.quantile_ns(0.5), 0);
        assert_eq!(off.summary().count, 0);
    }
}
