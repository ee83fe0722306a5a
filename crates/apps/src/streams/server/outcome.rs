//! What a finished server reports.

use super::status::{ServerStatus, StreamStatus};
use metronome_rt::host::HostLoad;
use metronome_rt::pacing::PacingThreadReport;
use metronome_time::Micros;

/// What a finished server reports.
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
pub struct ServerOutcome {
    pub server: ServerStatus,
    pub streams: Vec<StreamStatus>,
    /// CPU time of each core's pacing thread over the run, as a share of one core (under
    /// `naive`, one figure: all the streams' threads together).
    pub core_cpu_percent: Vec<f64>,
    /// How each core's pacing thread ran (none under `naive`).
    pub pacers: Vec<PacerView>,
    pub duration_us: Micros,
    /// How busy the host was over the run (absent where /proc cannot be read).
    pub host: Option<HostLoad>,
}

/// How one core's pacing thread ran, for the outcome.
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
pub struct PacerView {
    /// The scheduling policy it got.
    pub grant: metronome_rt::thread::GrantView,
    /// Whether its memory is locked.
    pub memory: metronome_rt::thread::MemoryLock,
    /// CPU time it used, as a share of one core over the run.
    pub cpu_percent: f64,
    /// With `--wait auto`: time spent sleeping-then-spinning and busy-polling.
    pub wait_modes: metronome_sched::WaitSelectorStats,
    /// Times the RT throttling guard switched it to busy-polling.
    pub throttle_guard_trips: u64,
    /// The spin margin it ended with.
    pub spin_margin_us: Micros,
}

impl PacerView {
    pub(super) fn new(r: &PacingThreadReport, duration_s: f64) -> Self {
        PacerView {
            grant: r.grant.clone(),
            memory: r.memory.clone(),
            cpu_percent: r.cpu_s * 100.0 / duration_s.max(1e-9),
            wait_modes: r.wait_modes,
            throttle_guard_trips: r.throttle_guard_trips,
            spin_margin_us: Micros::from_nanos_u64(r.margin_ns),
        }
    }
}
