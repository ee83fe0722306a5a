//! Mahimahi packet-delivery traces (Netravali et al., "Mahimahi: Accurate Record-and-Replay
//! for HTTP", USENIX ATC 2015): a link whose capacity is a recorded list of delivery
//! opportunities instead of a rate.
//!
//! The format is Mahimahi's `mm-link` trace: one integer per line, a time in milliseconds
//! from the start; each line is one opportunity to deliver one MTU of 1504 bytes (several
//! lines with the same time are several opportunities). The trace repeats, each repetition
//! offset by its last time. As in Mahimahi's link queue, an opportunity with nothing queued is
//! wasted, and a packet's bytes may be spread over several opportunities (and an opportunity's
//! leftover bytes go to the next packet queued).

use metronome_time::Timestamp;

/// Bytes one delivery opportunity carries (Mahimahi's `PACKET_SIZE`).
pub const OPPORTUNITY_BYTES: usize = 1504;

/// The most opportunities a trace may list (a day of a 1 Gbit/s trace is far below).
pub const MAX_OPPORTUNITIES: usize = 10_000_000;

/// A delivery trace: opportunities in ns from the start of each repetition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryTrace {
    times_ns: Vec<u64>,
    period_ns: u64,
}

/// A trace that cannot be used, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("delivery trace line {line}: {message}")]
pub struct TraceError {
    /// 1-based; 0 for the trace as a whole.
    pub line: usize,
    /// What is wrong and what the trace should hold instead.
    pub message: String,
}

/// Where a link is in its trace: the last opportunity used and the bytes it has left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TraceCursor {
    last: Option<u64>,
    left: usize,
}

impl DeliveryTrace {
    /// Reads Mahimahi's format: a millisecond time per line, never decreasing; blank lines
    /// are skipped.
    pub fn parse(text: &str) -> Result<Self, TraceError> {
        let mut ms = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            let v: u64 = t.parse().map_err(|_| TraceError {
                line: i + 1,
                message: format!(
                    "'{t}' is not a time: each line is a whole number of milliseconds"
                ),
            })?;
            if ms.last().is_some_and(|&l| v < l) {
                return Err(TraceError {
                    line: i + 1,
                    message: format!(
                        "{v} ms comes after {} ms: times never decrease",
                        ms[ms.len() - 1]
                    ),
                });
            }
            if ms.len() == MAX_OPPORTUNITIES {
                return Err(TraceError {
                    line: i + 1,
                    message: format!("more than {MAX_OPPORTUNITIES} opportunities"),
                });
            }
            ms.push(v);
        }
        Self::from_millis(&ms)
    }

    /// A trace from its times in milliseconds (non-decreasing, the last above zero).
    pub fn from_millis(ms: &[u64]) -> Result<Self, TraceError> {
        let whole = |message: &str| TraceError {
            line: 0,
            message: message.into(),
        };
        let &last = ms.last().ok_or_else(|| whole("the trace is empty"))?;
        if last == 0 {
            return Err(whole(
                "the last time must be above 0 ms: it is the trace's period",
            ));
        }
        if ms.windows(2).any(|w| w[1] < w[0]) {
            return Err(whole("times must never decrease"));
        }
        Ok(DeliveryTrace {
            times_ns: ms.iter().map(|m| m * 1_000_000).collect(),
            period_ns: last * 1_000_000,
        })
    }

    /// The rate it carries on average, bit/s.
    pub fn mean_rate_bps(&self) -> f64 {
        self.times_ns.len() as f64 * OPPORTUNITY_BYTES as f64 * 8.0 * 1e9 / self.period_ns as f64
    }

    /// The time of opportunity `k` (counting across repetitions).
    fn time(&self, k: u64) -> Timestamp {
        let n = self.times_ns.len() as u64;
        let t = (k / n).saturating_mul(self.period_ns) + self.times_ns[(k % n) as usize];
        Timestamp::from_nanos(t)
    }

    /// The first opportunity after `t`: as in Mahimahi's link queue, which uses up every
    /// opportunity up to and including the present before it queues an arriving packet, a
    /// packet arriving at an opportunity's instant waits for the next one.
    fn first_after(&self, t: Timestamp) -> u64 {
        let n = self.times_ns.len() as u64;
        let ns = t.as_nanos();
        let (cycle, phase) = (ns / self.period_ns, ns % self.period_ns);
        let i = self.times_ns.partition_point(|&x| x <= phase) as u64;
        cycle * n + i
    }

    /// When the last of `size` bytes, queued from `from`, is delivered.
    pub(crate) fn finish(&self, cur: &mut TraceCursor, from: Timestamp, size: usize) -> Timestamp {
        let mut need = size.max(1);
        let mut k = self.first_after(from);
        if let Some(last) = cur.last {
            if self.time(last) >= from {
                // Queued behind the packet before: its opportunity's leftover bytes are ours,
                // then the next opportunities in turn (several may share one instant).
                let used = need.min(cur.left);
                cur.left -= used;
                need -= used;
                if need == 0 {
                    return self.time(last);
                }
                k = last + 1;
            } else {
                k = k.max(last + 1);
            }
        }
        loop {
            let take = need.min(OPPORTUNITY_BYTES);
            need -= take;
            if need == 0 {
                cur.last = Some(k);
                cur.left = OPPORTUNITY_BYTES - take;
                return self.time(k);
            }
            k += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_name_the_line() {
        let e = DeliveryTrace::parse("1\n2\nthree\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.to_string().contains("'three'"), "{e}");
        let e = DeliveryTrace::parse("5\n4\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(DeliveryTrace::parse("\n\n").is_err());
        assert!(DeliveryTrace::parse("0\n0\n").is_err());
        let t = DeliveryTrace::parse("1\n1\n2\n\n4\n").unwrap();
        // Four MTUs per 4 ms: 12.032 Mbit/s.
        assert!((t.mean_rate_bps() - 12_032_000.0).abs() < 1e-6);
    }

    #[test]
    fn bytes_spread_over_opportunities_and_leftovers_carry() {
        let t = DeliveryTrace::from_millis(&[1, 2, 3, 4]).unwrap();
        let ms = Timestamp::from_millis;
        let mut c = TraceCursor::default();
        // 1000 bytes at 0.5 ms: the opportunity at 1 ms; 504 bytes left in it.
        assert_eq!(t.finish(&mut c, Timestamp::from_micros(500), 1000), ms(1));
        // 1000 more queued behind it: 504 at 1 ms, the rest at 2 ms.
        assert_eq!(t.finish(&mut c, ms(1), 1000), ms(2));
        // Idle until 10 ms: the opportunities before are wasted, and the one at 10 ms itself
        // (3rd cycle's 2nd, since the trace repeats every 4 ms) is past when the packet
        // arrives at that instant: it leaves at 11 ms.
        assert_eq!(t.finish(&mut c, ms(10), 100), ms(11));
        // A packet of 4000 bytes needs three opportunities: 21, 22 and 23 ms.
        assert_eq!(t.finish(&mut c, ms(20), 4000), ms(23));
    }
}
