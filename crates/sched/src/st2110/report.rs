//! What the conformance measurement reports: per frame, per sender class, and overall.

use super::format::ReadSchedule;
use metronome_time::Summary;
use serde::Serialize;

/// The sender class a measurement supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every frame within the narrow limits, judged on the gapped schedule (2110TPN).
    Narrow,
    /// Every frame within the narrow limits, judged on the linear schedule (2110TPNL).
    NarrowLinear,
    /// Every frame within the wide limits (2110TPW), some beyond the narrow ones.
    Wide,
    NotConformant,
    /// No frame was measured.
    NoFrames,
}

/// What one frame did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FrameReport {
    pub rtp_ts: u32,
    pub packets: u32,
    /// Ended by its marker (false: cut short by the next frame or by `finish`).
    pub complete: bool,
    pub cinst_max: u32,
    pub vrx_max: i64,
    /// Negative: a packet came after the virtual receiver wanted to read it (underflow).
    pub vrx_min: i64,
    /// First arrival minus the frame's epoch, signed.
    pub first_offset_ns: i64,
    /// Last arrival minus the frame's epoch: the frame's latency.
    pub last_offset_ns: i64,
    /// Last arrival minus first arrival.
    pub spread_ns: u64,
    pub narrow: bool,
    pub wide: bool,
}

/// One sender class's limits and how many frames broke them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ClassResult {
    pub cmax: u32,
    pub vrx_full: u32,
    pub violating_frames: u64,
    pub conformant: bool,
}

/// Everything measured so far, for JSON.
#[derive(Clone, Debug, Serialize)]
pub struct ConformanceSummary {
    pub read_schedule: ReadSchedule,
    pub npackets: u32,
    pub trs_ns: f64,
    pub tdrain_ns: f64,
    pub troffset_us: f64,
    pub frames: u64,
    pub incomplete_frames: u64,
    pub packets: u64,
    /// Packets of a frame already closed (reordered or after its marker): they count in the
    /// network model, not in any frame.
    pub stray_packets: u64,
    pub cinst_max: u32,
    /// Packets by the Cinst they saw: index i counts Cinst = i; the last bucket counts every
    /// value from its index up. Length 2 × wide CMAX + 2, at most 1026.
    pub cinst_histogram: Vec<u64>,
    pub vrx_max: i64,
    pub vrx_min: i64,
    pub narrow: ClassResult,
    pub wide: ClassResult,
    pub verdict: Verdict,
    /// First to last arrival of each frame.
    pub spread: Summary,
    /// Frame epoch to last arrival of each frame.
    pub latency: Summary,
}
