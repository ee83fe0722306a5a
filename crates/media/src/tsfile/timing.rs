//! The file's PCR timeline (ISO/IEC 13818-1 §2.4.2.2): each PCR anchors a packet index to
//! a time, and packets between two PCRs are placed by linear interpolation on their index,
//! which for fixed-size packets is their byte position (§2.4.2.3: the rate between PCRs is
//! constant, so a byte's arrival time is linear in its position).
//!
//! Times are kept in 27 MHz ticks from the first PCR. A PCR that wraps (at 2^33 × 300) is
//! unwrapped; a discontinuity indicator, a PCR that goes backwards, does not move, or jumps
//! further than `max_gap` starts a new time base: the new PCR's time is extrapolated at the last
//! known rate and later PCRs count from it (a "rebase").

use metronome_wire::ts::{PCR_HZ, PCR_MODULUS};

/// Bits per TS packet.
const PACKET_BITS: u128 = 188 * 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Anchor {
    index: u64,
    ticks: u64,
    pcr: u64,
}

/// A stretch of packets whose times are known: `a` (exclusive) to `b` (inclusive), with packets
/// at or before `a` pinned to `a`'s time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub a_index: u64,
    pub a_ticks: u64,
    pub b_index: u64,
    pub b_ticks: u64,
}

impl Segment {
    /// The time of packet `index` (27 MHz ticks), by linear interpolation between the ends.
    pub(crate) fn ticks_at(&self, index: u64) -> u64 {
        if index <= self.a_index || self.b_index <= self.a_index {
            return self.a_ticks;
        }
        let span = (self.b_ticks - self.a_ticks) as u128;
        let k = (index.min(self.b_index) - self.a_index) as u128;
        self.a_ticks + (span * k / (self.b_index - self.a_index) as u128) as u64
    }
}

#[derive(Debug)]
pub(crate) struct PcrTimeline {
    anchor: Option<Anchor>,
    /// (packets, ticks) of the last well-behaved PCR interval.
    last_rate: Option<(u64, u64)>,
    /// Sums over all well-behaved intervals, for the average rate.
    total: (u64, u64),
    max_gap: u64,
    fallback_rate: u64,
    pub rebases: u64,
}

impl PcrTimeline {
    /// `max_gap`: the largest believable step between consecutive PCRs, in 27 MHz ticks.
    /// `fallback_rate`: bit/s used to extrapolate before any rate has been measured.
    pub(crate) fn new(max_gap: u64, fallback_rate: u64) -> Self {
        PcrTimeline {
            anchor: None,
            last_rate: None,
            total: (0, 0),
            max_gap,
            fallback_rate,
            rebases: 0,
        }
    }

    pub(crate) fn has_anchor(&self) -> bool {
        self.anchor.is_some()
    }
    pub(crate) fn has_rate(&self) -> bool {
        self.last_rate.is_some()
    }

    /// The average rate over well-behaved PCR intervals, bit/s.
    pub(crate) fn average_rate(&self) -> Option<u64> {
        let (packets, ticks) = self.total;
        (ticks > 0).then(|| (packets as u128 * PACKET_BITS * PCR_HZ as u128 / ticks as u128) as u64)
    }

    /// Ticks that `packets` packets last at the last measured rate (or the fallback rate).
    pub(crate) fn extrapolate(&self, packets: u64) -> u64 {
        match self.last_rate {
            Some((p, t)) => (packets as u128 * t as u128 / p as u128) as u64,
            None => {
                (packets as u128 * PACKET_BITS * PCR_HZ as u128 / self.fallback_rate as u128) as u64
            }
        }
    }

    /// Takes the PCR carried by packet `index` and returns that packet's time in ticks.
    /// `discontinuity`: the packet's discontinuity_indicator (§2.4.3.5), or a forced new time base.
    pub(crate) fn on_pcr(&mut self, index: u64, pcr: u64, discontinuity: bool) -> u64 {
        let pcr = pcr % PCR_MODULUS;
        let ticks = match self.anchor {
            None => 0,
            Some(a) => {
                let packets = index.saturating_sub(a.index).max(1);
                // Modular difference: a wrap past 2^33 × 300 reads as a small forward step.
                let delta = (pcr + PCR_MODULUS - a.pcr) % PCR_MODULUS;
                if discontinuity || delta == 0 || delta > self.max_gap {
                    self.rebases += 1;
                    a.ticks + self.extrapolate(packets)
                } else {
                    self.last_rate = Some((packets, delta));
                    self.total.0 += packets;
                    self.total.1 += delta;
                    a.ticks + delta
                }
            }
        };
        self.anchor = Some(Anchor { index, ticks, pcr });
        ticks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 27_000;

    #[test]
    fn interpolation_and_wrap() {
        let mut tl = PcrTimeline::new(1000 * MS, 1_000_000);
        let start = PCR_MODULUS - 10 * MS;
        assert_eq!(tl.on_pcr(100, start, false), 0);
        // 20 ms later, across the wrap.
        assert_eq!(tl.on_pcr(200, 10 * MS, false), 20 * MS);
        let seg = Segment {
            a_index: 100,
            a_ticks: 0,
            b_index: 200,
            b_ticks: 20 * MS,
        };
        assert_eq!(seg.ticks_at(50), 0, "before the first PCR: pinned to it");
        assert_eq!(seg.ticks_at(150), 10 * MS);
        assert_eq!(tl.average_rate(), Some((100 * 1504 * 1000 / 20) as u64));
        assert_eq!(tl.rebases, 0);
    }

    #[test]
    fn jumps_backwards_and_discontinuities_rebase_at_the_last_rate() {
        let mut tl = PcrTimeline::new(1000 * MS, 1_000_000);
        tl.on_pcr(0, 5_000 * MS, false);
        assert_eq!(tl.on_pcr(10, 5_010 * MS, false), 10 * MS);
        // A jump of an hour: extrapolated, 10 packets per 10 ms.
        assert_eq!(tl.on_pcr(20, 3_600_000 * MS, false), 20 * MS);
        // Backwards.
        assert_eq!(tl.on_pcr(30, 7 * MS, false), 30 * MS);
        // Continues normally from the new base.
        assert_eq!(tl.on_pcr(40, 17 * MS, false), 40 * MS);
        // Flagged discontinuity, even with a plausible value.
        assert_eq!(tl.on_pcr(50, 20 * MS, true), 50 * MS);
        assert_eq!(tl.rebases, 3);
    }

    #[test]
    fn fallback_rate_before_any_measurement() {
        let mut tl = PcrTimeline::new(1000 * MS, 1_504_000);
        tl.on_pcr(0, 0, false);
        // 1000 packets of 1504 bits at 1.504 Mbit/s: one second.
        assert_eq!(tl.on_pcr(1000, 0, false), 1000 * MS);
    }
}
