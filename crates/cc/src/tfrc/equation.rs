//! The TCP throughput equation of TFRC (RFC 5348 §3.1), and its inverse.
//!
//! ```text
//!                               s
//! X_Bps = ----------------------------------------------------------
//!         R*sqrt(2*b*p/3) + (t_RTO * (3*sqrt(3*b*p/8)) * p * (1+32*p^2))
//! ```
//!
//! `s` the segment size in bytes, `R` the round-trip time in seconds, `p` the loss event rate,
//! `b` the packets one TCP acknowledgement covers (RFC 5348 says 1), `t_RTO` TCP's
//! retransmission timeout, which RFC 5348 sets to `4*R`. The result is in bytes per second.

use std::time::Duration;

/// Packets acknowledged by one TCP ACK (RFC 5348 §3.1: "b SHOULD be 1").
pub const B: f64 = 1.0;

/// The allowed rate in bytes per second for segments of `s` bytes, a round-trip time `rtt`
/// and a loss event rate `p` in (0, 1]. `p == 0` (no loss seen) has no finite rate:
/// `f64::INFINITY`.
pub fn throughput_bytes_per_s(s: f64, rtt: Duration, p: f64) -> f64 {
    let r = rtt.as_secs_f64();
    if p <= 0.0 {
        return f64::INFINITY;
    }
    let p = p.min(1.0);
    let t_rto = 4.0 * r;
    let denominator = r * (2.0 * B * p / 3.0).sqrt()
        + t_rto * (3.0 * (3.0 * B * p / 8.0).sqrt()) * p * (1.0 + 32.0 * p * p);
    if denominator <= 0.0 {
        return f64::INFINITY;
    }
    s / denominator
}

/// The loss event rate at which the equation allows `x` bytes per second (RFC 5348 §6.3.1:
/// how a receiver sizes its first loss interval from the rate it was receiving). The
/// equation falls strictly with `p`, so a bisection in log space finds it to 1 part in 10⁹.
/// Rates above what `p = 10⁻¹²` allows give that; rates below what `p = 1` allows give 1.
pub fn loss_rate_for(s: f64, rtt: Duration, x: f64) -> f64 {
    let (mut lo, mut hi) = (1e-12_f64, 1.0_f64);
    if throughput_bytes_per_s(s, rtt, lo) <= x {
        return lo;
    }
    if throughput_bytes_per_s(s, rtt, hi) >= x {
        return hi;
    }
    for _ in 0..200 {
        let mid = (lo * hi).sqrt();
        if throughput_bytes_per_s(s, rtt, mid) > x {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi / lo < 1.0 + 1e-9 {
            break;
        }
    }
    (lo * hi).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn worked_values_of_the_equation() {
        // Evaluated by hand (and in double precision elsewhere) from RFC 5348 §3.1, b = 1,
        // t_RTO = 4R.
        for (s, rtt, p, want) in [
            (1000.0, ms(100), 0.01, 112_332.234_362_992_98),
            (1460.0, ms(40), 0.001, 1_401_029.254_578_079_3),
            (1000.0, ms(200), 0.1, 8_850.510_388_956_618),
            (1000.0, ms(50), 1e-6, 24_494_676.975_738_995),
        ] {
            let got = throughput_bytes_per_s(s, rtt, p);
            assert!((got - want).abs() / want < 1e-12, "{s} {rtt:?} {p}: {got}");
        }
        assert_eq!(throughput_bytes_per_s(1000.0, ms(100), 0.0), f64::INFINITY);
        // Four times the loss event rate: about half the rate while the first term rules.
        let ratio = throughput_bytes_per_s(1000.0, ms(100), 1e-4)
            / throughput_bytes_per_s(1000.0, ms(100), 4e-4);
        assert!((ratio - 2.0).abs() < 0.01, "{ratio}");
    }

    #[test]
    fn the_inverse_gives_back_the_loss_event_rate() {
        for p in [1e-6, 1e-4, 0.003, 0.05, 0.3] {
            let x = throughput_bytes_per_s(1200.0, ms(80), p);
            let back = loss_rate_for(1200.0, ms(80), x);
            assert!((back - p).abs() / p < 1e-6, "{p}: {back}");
        }
        assert_eq!(loss_rate_for(1200.0, ms(80), 1e15), 1e-12);
        assert_eq!(loss_rate_for(1200.0, ms(80), 1.0), 1.0);
    }
}
