//! Human-readable numbers for refusal messages: durations, bit rates, percentages.

use std::fmt;
use std::time::Duration;

/// A duration in the largest unit that keeps it ≥ 1 ("2.1 ms", "10 µs", "1.5 s").
pub(crate) struct Ns(pub Duration);

impl fmt::Display for Ns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos() as f64;
        let (v, unit) = if ns < 1e3 {
            (ns, "ns")
        } else if ns < 1e6 {
            (ns / 1e3, "µs")
        } else if ns < 1e9 {
            (ns / 1e6, "ms")
        } else {
            (ns / 1e9, "s")
        };
        write!(f, "{} {unit}", trimmed(v, 0))
    }
}

/// A bit rate in SI units with at least one decimal ("4.0 Mbit/s", "1.004 Gbit/s").
pub(crate) struct Rate(pub u64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bps = self.0 as f64;
        let (v, unit) = if bps < 1e3 {
            (bps, "bit/s")
        } else if bps < 1e6 {
            (bps / 1e3, "kbit/s")
        } else if bps < 1e9 {
            (bps / 1e6, "Mbit/s")
        } else {
            (bps / 1e9, "Gbit/s")
        };
        write!(f, "{} {unit}", trimmed(v, 1))
    }
}

/// A fraction as a percentage with one decimal ("97.3%").
pub(crate) struct Pct(pub f64);

impl fmt::Display for Pct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1}%", self.0 * 100.0)
    }
}

/// `v` with three decimals, trailing zeros removed but at least `min_decimals` kept.
fn trimmed(v: f64, min_decimals: usize) -> String {
    let s = format!("{v:.3}");
    let (int, frac) = s.split_once('.').unwrap_or((s.as_str(), ""));
    let mut frac = frac.trim_end_matches('0').to_string();
    while frac.len() < min_decimals {
        frac.push('0');
    }
    if frac.is_empty() {
        int.to_string()
    } else {
        format!("{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_chosen_and_trimmed() {
        assert_eq!(Ns(Duration::from_micros(2100)).to_string(), "2.1 ms");
        assert_eq!(Ns(Duration::from_micros(10)).to_string(), "10 µs");
        assert_eq!(Ns(Duration::from_nanos(7)).to_string(), "7 ns");
        assert_eq!(Ns(Duration::from_millis(1500)).to_string(), "1.5 s");
        assert_eq!(Rate(4_000_000).to_string(), "4.0 Mbit/s");
        assert_eq!(Rate(1_004_000_000).to_string(), "1.004 Gbit/s");
        assert_eq!(Rate(1_000_000_000).to_string(), "1.0 Gbit/s");
        assert_eq!(Rate(640).to_string(), "640.0 bit/s");
        assert_eq!(Pct(0.9731).to_string(), "97.3%");
    }
}
