//! Sender pacing models: when packet k of a frame leaves, relative to the frame's epoch.

use super::format::{FrameFormat, Limits, Nanos, ReadSchedule};
use metronome_time::Timestamp;
use serde::Serialize;
use std::time::Duration;

/// How a sender spreads a frame's packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SenderType {
    /// ST 2110-21 type N (`TP=2110TPN`): one packet every gapped TRS, the gap where SDI has
    /// vertical blanking.
    NarrowGapped,
    /// Type NL (`TP=2110TPNL`): one packet every linear TRS, across the whole frame period.
    NarrowLinear,
    /// Type W (`TP=2110TPW`): bursts allowed up to the wide CMAX. Here: groups of packets sent
    /// back to back, one group every `group` linear TRS, so the pacer wakes `group` times less.
    Wide,
    /// The whole frame at its epoch, as fast as the sender can (what a plain `udpsink` does).
    /// Not an ST 2110-21 type; large frames fail both narrow and wide.
    Burst,
}

impl SenderType {
    /// The read schedule a receiver judges this sender against: gapped for type N, linear for
    /// NL and W (our wide schedule is linear in groups), gapped for a burst (EBU LIST's
    /// default when a sender declares nothing).
    pub fn read_schedule(self) -> ReadSchedule {
        match self {
            SenderType::NarrowGapped | SenderType::Burst => ReadSchedule::Gapped,
            SenderType::NarrowLinear | SenderType::Wide => ReadSchedule::Linear,
        }
    }
    /// The SDP `TP=` value (ST 2110-21 §8), if this is an ST 2110-21 type.
    pub fn sdp_tp(self) -> Option<&'static str> {
        match self {
            SenderType::NarrowGapped => Some("2110TPN"),
            SenderType::NarrowLinear => Some("2110TPNL"),
            SenderType::Wide => Some("2110TPW"),
            SenderType::Burst => None,
        }
    }
}

/// The send schedule of one frame: `offset(k)` after the frame's epoch for packet k.
///
/// Packet k is read by the virtual receiver at TPR_k = TROFFSET + k × TRS after the epoch
/// (TVD = TPR_0 = epoch + TROFFSET). A sender exactly on TPR_k would underflow the receiver
/// at the slightest delay, so the schedule runs `lead` packets ahead of it:
/// `offset(k) = TROFFSET + (k − lead) × TRS`, which fills the virtual receiver buffer to about
/// `lead` packets and tolerates about `lead × TRS` of lateness. Offsets never go below zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSchedule {
    format: FrameFormat,
    kind: SenderType,
    trs: Nanos,
    troffset_ns: u64,
    lead: u32,
    group: u32,
}

impl FrameSchedule {
    /// The default schedule: `lead` = min(VRX_FULL / 2, ⌊TROFFSET / TRS⌋) (half the narrow or
    /// wide buffer, but never before the epoch), `group` = wide CMAX / 2 for [`SenderType::Wide`]
    /// (a burst of `g` packets raises Cinst to `g − 1`; half the limit leaves room for a late
    /// previous group), 1 otherwise.
    pub fn new(format: &FrameFormat, kind: SenderType) -> Self {
        let schedule = kind.read_schedule();
        let limits = format.limits(schedule);
        let vrx_full = match kind {
            SenderType::Wide => limits.vrx_full_wide,
            _ => limits.vrx_full_narrow,
        };
        let group = match kind {
            SenderType::Wide => (limits.cmax_wide / 2).max(1),
            _ => 1,
        };
        let s = FrameSchedule {
            format: *format,
            kind,
            trs: format.trs_exact(schedule),
            troffset_ns: u64::try_from(format.troffset().as_nanos()).unwrap_or(u64::MAX),
            lead: 0,
            group,
        };
        s.with_lead(vrx_full / 2)
    }
    /// Run `lead` packets ahead of the read schedule, at most ⌊TROFFSET / TRS⌋ so that no
    /// packet is due before its frame's epoch.
    pub fn with_lead(mut self, lead: u32) -> Self {
        let max = u32::try_from(self.trs.periods_in(self.troffset_ns)).unwrap_or(u32::MAX);
        self.lead = lead.min(max);
        self
    }
    /// Packets per group of a wide sender (1 = linear). Ignored by the other types.
    pub fn with_group(mut self, group: u32) -> Self {
        if self.kind == SenderType::Wide {
            self.group = group.max(1);
        }
        self
    }
    /// The video format this schedule paces.
    pub fn format(&self) -> &FrameFormat {
        &self.format
    }
    /// The sender type (N, NL, W or burst) the schedule follows.
    pub fn sender_type(&self) -> SenderType {
        self.kind
    }
    /// The read schedule a receiver judges this sender against ([`SenderType::read_schedule`]).
    pub fn read_schedule(&self) -> ReadSchedule {
        self.kind.read_schedule()
    }
    /// CMAX and VRX_FULL of both classes for the format under [`FrameSchedule::read_schedule`].
    pub fn limits(&self) -> Limits {
        self.format.limits(self.read_schedule())
    }
    /// NPACKETS: RTP packets per frame.
    pub fn npackets(&self) -> u32 {
        self.format.npackets()
    }
    /// How many packets (of TRS each) the schedule runs ahead of the virtual receiver's reads.
    pub fn lead(&self) -> u32 {
        self.lead
    }
    /// Packets sent back to back per group: wide senders only, 1 for every other type.
    pub fn group(&self) -> u32 {
        self.group
    }
    /// TRS of this schedule, floored to the nanosecond (offsets use the exact value).
    pub fn trs(&self) -> Duration {
        Duration::from_nanos(self.trs.floor_ns())
    }
    /// When packet `k` (0-based) of a frame is due, after the frame's epoch. Defined for any
    /// k, meaningful below NPACKETS. Integer arithmetic, no allocation.
    pub fn offset(&self, k: u32) -> Duration {
        let slot = match self.kind {
            SenderType::Burst => return Duration::ZERO,
            SenderType::Wide => k - k % self.group,
            SenderType::NarrowGapped | SenderType::NarrowLinear => k,
        };
        let ahead = self.trs.times_floor(slot as i128 - self.lead as i128);
        let ns = (self.troffset_ns as i128 + ahead).max(0);
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }
    /// When packet `k` of the frame whose epoch is `frame_epoch` is due.
    pub fn send_time(&self, frame_epoch: Timestamp, k: u32) -> Timestamp {
        frame_epoch + self.offset(k)
    }
    /// Offset of the frame's last packet: the frame's latency from its epoch on a perfect
    /// link.
    pub fn last_offset(&self) -> Duration {
        self.offset(self.npackets() - 1)
    }
    /// The time over which the model spreads a frame: first to last packet. RACTIVE × TFRAME
    /// less one TRS for the gapped schedule, TFRAME less one TRS for the linear one, zero for
    /// a burst. A receiver measures the same span as first to last arrival.
    pub fn spread(&self) -> Duration {
        self.last_offset().saturating_sub(self.offset(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::st2110::FrameRate;

    fn hd() -> FrameFormat {
        FrameFormat::new(FrameRate::P59_94, 4320, 1080)
    }

    #[test]
    fn gapped_runs_lead_packets_ahead_of_the_read_schedule() {
        let s = FrameSchedule::new(&hd(), SenderType::NarrowGapped);
        // VRX_FULL narrow = 9, so lead = 4; TRS = 16_016_000 / 4320 ns = 3707.407… ns.
        assert_eq!(s.lead(), 4);
        let tro = hd().troffset().as_nanos() as u64; // 637_674 ns
        assert_eq!(s.offset(4), Duration::from_nanos(tro));
        assert_eq!(s.offset(0), Duration::from_nanos(tro - 14_830)); // ⌈4 × 3707.407⌉
        assert_eq!(s.offset(5), Duration::from_nanos(tro + 3_707));
    }

    #[test]
    fn wide_sends_groups_and_burst_sends_at_once() {
        let w = FrameSchedule::new(&hd(), SenderType::Wide);
        assert_eq!(w.group(), 8);
        assert_eq!(w.offset(8), w.offset(15));
        assert!(w.offset(16) > w.offset(15));
        let b = FrameSchedule::new(&hd(), SenderType::Burst);
        assert_eq!(b.offset(4319), Duration::ZERO);
        assert_eq!(b.spread(), Duration::ZERO);
        assert!(w.with_group(1).offset(3) > w.with_group(1).offset(2));
    }

    #[test]
    fn lead_never_starts_before_the_epoch() {
        let s = FrameSchedule::new(&hd(), SenderType::NarrowLinear).with_lead(u32::MAX);
        assert!(s.offset(0) < s.trs());
        assert_eq!(SenderType::NarrowLinear.sdp_tp(), Some("2110TPNL"));
    }
}
