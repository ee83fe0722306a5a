//! What the conformance measurement reports: per frame, per sender class, and overall.

use super::format::ReadSchedule;
use metronome_time::Micros;
use metronome_time::{RtpTime, Summary};
use serde::Serialize;

/// The sender class a measurement supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every frame within the narrow limits, judged on the gapped schedule (2110TPN).
    Narrow,
    /// Every frame within the narrow limits, judged on the linear schedule (2110TPNL).
    NarrowLinear,
    /// Every frame within the wide limits (2110TPW), some beyond the narrow ones.
    Wide,
    /// At least one frame broke the wide limits too (or underflowed the virtual receiver):
    /// the stream fits no ST 2110-21 sender class.
    NotConformant,
    /// No frame was measured.
    NoFrames,
}

impl Verdict {
    /// As JSON and the command line spell it: `narrow`, `narrow-linear`, `wide`,
    /// `not-conformant`, `no-frames`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Narrow => "narrow",
            Verdict::NarrowLinear => "narrow-linear",
            Verdict::Wide => "wide",
            Verdict::NotConformant => "not-conformant",
            Verdict::NoFrames => "no-frames",
        }
    }
}

/// What one frame did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FrameReport {
    /// The frame's RTP timestamp (its epoch on the 90 kHz clock), as carried in its packets.
    pub rtp_ts: RtpTime,
    /// Packets of this frame received (strays excluded).
    pub packets: u32,
    /// Ended by its marker (false: cut short by the next frame or by `finish`).
    pub complete: bool,
    /// Highest Cinst (packets found in the network-model bucket) seen by a packet of this
    /// frame.
    pub cinst_max: u32,
    /// Highest virtual receiver buffer level in the frame, in packets (arrived minus read).
    pub vrx_max: i64,
    /// Lowest virtual receiver buffer level in the frame, in packets. Negative: a packet came
    /// after the virtual receiver wanted to read it (underflow).
    pub vrx_min: i64,
    /// First arrival minus the frame's epoch, signed.
    pub first_offset_ns: i64,
    /// Last arrival minus the frame's epoch: the frame's latency.
    pub last_offset_ns: i64,
    /// Last arrival minus first arrival.
    pub spread_ns: u64,
    /// Within the narrow limits: Cinst ≤ narrow CMAX and 0 ≤ VRX ≤ narrow VRX_FULL.
    pub narrow: bool,
    /// Within the wide limits: Cinst ≤ wide CMAX and 0 ≤ VRX ≤ wide VRX_FULL.
    pub wide: bool,
}

/// One sender class's limits and how many frames broke them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ClassResult {
    /// The class's CMAX: the most packets Cinst may reach, for this format.
    pub cmax: u32,
    /// The class's VRX_FULL: the most packets the virtual receiver buffer may hold.
    pub vrx_full: u32,
    /// Frames (complete or not) that broke CMAX, VRX_FULL or underflowed.
    pub violating_frames: u64,
    /// At least one frame measured and none violating.
    pub conformant: bool,
}

/// Everything measured so far, for JSON.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ConformanceSummary {
    /// The read schedule (gapped or linear) the VRX model and narrow CMAX were judged on.
    pub read_schedule: ReadSchedule,
    /// NPACKETS: RTP packets per frame of the format.
    pub npackets: u32,
    /// TRS, the virtual receiver's read interval (to the ns, not floored to whole µs).
    pub trs_us: Micros,
    /// TDRAIN, the drain interval of the network compatibility model.
    pub tdrain_us: Micros,
    /// TROFFSET, frame epoch to the first read (TPR0).
    pub troffset_us: Micros,
    /// Frames closed (by their marker, by a newer frame, or by `finish`).
    pub frames: u64,
    /// Of those, frames closed without their marker.
    pub incomplete_frames: u64,
    /// Every packet received, strays included.
    pub packets: u64,
    /// Packets of a frame already closed (reordered or after its marker): they count in the
    /// network model, not in any frame.
    pub stray_packets: u64,
    /// Highest Cinst any packet saw, strays included.
    pub cinst_max: u32,
    /// Packets by the Cinst they saw: index i counts Cinst = i; the last bucket counts every
    /// value from its index up. Length 2 × wide CMAX + 2, at most 1026.
    pub cinst_histogram: Vec<u64>,
    /// Highest VRX level of any frame, in packets (0 when no frame was measured).
    pub vrx_max: i64,
    /// Lowest VRX level of any frame, in packets; negative means underflow (0 when no frame
    /// was measured).
    pub vrx_min: i64,
    /// Limits and result for the narrow sender class (N or NL, by `read_schedule`).
    pub narrow: ClassResult,
    /// Limits and result for the wide sender class (W).
    pub wide: ClassResult,
    /// The strictest class every frame met.
    pub verdict: Verdict,
    /// First to last arrival of each frame (in µs, as [`Summary`] reports).
    pub spread: Summary,
    /// Frame epoch to last arrival of each frame, negative values counted as zero (in µs).
    pub latency: Summary,
}
