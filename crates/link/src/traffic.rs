//! Cross traffic both modes send: UDP at a constant bit rate or in a square wave, spaced as
//! iperf spaces it. The simulator's UDP flow (`metronome-sim`) follows a [`UdpSchedule`] in
//! virtual time, the emulator's sender in the lab's emu mode in real time.

use std::time::Duration;

/// How the sending rate varies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RatePattern {
    /// Always this many payload bit/s.
    Constant(u64),
    /// `high` for `duty · period`, then `low` for the rest, repeating from the flow's start.
    Square {
        /// Payload rate during the first part of each period, bit/s.
        high_bps: u64,
        /// Payload rate for the rest of the period, bit/s (0: silent).
        low_bps: u64,
        /// Length of one high-then-low cycle (a zero period acts as 1 ns).
        period: Duration,
        /// Fraction of each period spent at `high_bps`, 0.0 to 1.0.
        duty: f64,
    },
}

impl RatePattern {
    /// The rate at `since_start` from the flow's start.
    pub fn rate_at(&self, since_start: Duration) -> u64 {
        match *self {
            RatePattern::Constant(r) => r,
            RatePattern::Square {
                high_bps,
                low_bps,
                period,
                duty,
            } => {
                let p = period.as_nanos().max(1);
                let phase = since_start.as_nanos() % p;
                if (phase as f64) < duty * p as f64 {
                    high_bps
                } else {
                    low_bps
                }
            }
        }
    }

    /// The highest rate of the pattern (for reports).
    pub fn peak_bps(&self) -> u64 {
        match *self {
            RatePattern::Constant(r) => r,
            RatePattern::Square {
                high_bps, low_bps, ..
            } => high_bps.max(low_bps),
        }
    }
}

/// When a UDP flow's datagrams leave, as iperf spaces them: evenly at the pattern's rate, the
/// ns·rate remainder carried from gap to gap (exact over the run, not rounded per datagram);
/// through a square wave's zero phase, nothing until its next period. Sans-IO: the simulator's
/// flow follows it in virtual time, the emulator's sender in real time.
#[derive(Clone, Debug)]
pub struct UdpSchedule {
    payload_bytes: u32,
    rate: RatePattern,
    carry: u128,
}

impl UdpSchedule {
    /// A schedule of datagrams carrying `payload_bytes` bytes of UDP payload each (IP and
    /// UDP headers not counted in the rate), sent at `rate`.
    pub fn new(payload_bytes: u32, rate: RatePattern) -> Self {
        UdpSchedule {
            payload_bytes,
            rate,
            carry: 0,
        }
    }

    /// The rate pattern the schedule follows.
    pub fn rate(&self) -> RatePattern {
        self.rate
    }

    /// After a datagram due at `since_start` (from the flow's start), the next one's time: the
    /// gap of its payload at the rate then; at a rate of zero, the pattern's next period (a
    /// square wave's next high phase), or `None` for a constant zero rate (nothing more).
    pub fn next_after(&mut self, since_start: Duration) -> Option<Duration> {
        let rate = self.rate.rate_at(since_start);
        if rate == 0 {
            let RatePattern::Square { period, .. } = self.rate else {
                return None;
            };
            let p = period.as_nanos().max(1);
            self.carry = 0;
            return Some(Duration::from_nanos(
                ((since_start.as_nanos() / p + 1) * p) as u64,
            ));
        }
        let numer = self.payload_bytes as u128 * 8 * 1_000_000_000 + self.carry;
        self.carry = numer % rate as u128;
        Some(since_start + Duration::from_nanos((numer / rate as u128) as u64))
    }
}
