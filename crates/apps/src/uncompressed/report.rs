//! What the raw-video drivers measured, for people and for JSON (`metronome serve --raw --json`,
//! `metronome recv --raw --json`, `metronome bench raw`).

use metronome_rt::udp::BufferReport;
use metronome_sched::{ConformanceSummary, WaitSelectorStats};
use metronome_session::rfc4175::RawDrops;
use metronome_time::Micros;
use metronome_time::{Distribution, Summary};
use metronome_wire::Ssrc;
use serde::Serialize;
use std::time::Duration;

/// A socket buffer request and what the kernel granted.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct BufferInfo {
    pub wanted: usize,
    pub accepted: usize,
    pub capped: bool,
    /// When capped: the sysctl to run.
    pub advice: Option<String>,
}

impl From<&BufferReport> for BufferInfo {
    fn from(r: &BufferReport) -> Self {
        BufferInfo {
            wanted: r.wanted,
            accepted: r.accepted(),
            capped: r.is_capped(),
            advice: r.advice.clone(),
        }
    }
}

/// CPU time `cpu_s` (seconds) per frame of `frames`; 0 without frames.
pub(crate) fn per_frame(cpu_s: f64, frames: u64) -> Micros {
    if frames == 0 {
        Micros::ZERO
    } else {
        Micros::from_secs_f64(cpu_s / frames as f64)
    }
}

/// A distribution of durations, its keys without a unit suffix (the field holding it says
/// `_us`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LatencyUs {
    pub count: u64,
    pub min: Micros,
    pub mean: Micros,
    pub p50: Micros,
    pub p99: Micros,
    pub p999: Micros,
    pub max: Micros,
}

impl From<&Distribution> for LatencyUs {
    fn from(d: &Distribution) -> Self {
        let s = d.summary();
        LatencyUs {
            count: s.count,
            min: s.min_us,
            mean: s.mean_us,
            p50: s.p50_us,
            p99: s.p99_us,
            p999: s.p999_us,
            max: s.max_us,
        }
    }
}

impl std::fmt::Display for LatencyUs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.0} µs, p99 {:.0} µs, p99.9 {:.0} µs, max {:.0} µs ({} frames)",
            self.p50.as_micros_f64(),
            self.p99.as_micros_f64(),
            self.p999.as_micros_f64(),
            self.max.as_micros_f64(),
            self.count
        )
    }
}

/// A status snapshot of a raw sender, about once a second.
#[derive(Clone, Debug)]
pub struct RawSenderStatus {
    /// Since the first frame's epoch.
    pub elapsed: Duration,
    pub frames: u64,
    pub packets: u64,
    pub bytes: u64,
    pub late_frames: u64,
    /// Worst batch lateness since the previous status.
    pub max_late_us: Micros,
}

/// A status snapshot of a raw receiver: its counts since it started.
#[derive(Clone, Debug)]
pub struct RawReceiverStatus {
    /// Since the receiver started.
    pub elapsed: Duration,
    pub frames_complete: u64,
    pub frames_partial: u64,
    pub frames_lost: u64,
    /// RTP packets of the stream.
    pub packets: u64,
    /// Their bytes (RTP, headers included).
    pub bytes: u64,
    /// Datagrams the kernel dropped from the socket's full buffer.
    pub rx_overflow: u64,
    /// Capture-to-complete latency so far, median and 99th percentile.
    pub latency_p50_us: Micros,
    pub latency_p99_us: Micros,
}

impl RawReceiverStatus {
    /// Frames that have ended: complete, partial or lost.
    pub fn frames_ended(&self) -> u64 {
        self.frames_complete + self.frames_partial + self.frames_lost
    }

    /// The status in one line of words, for a terminal.
    pub fn line(&self) -> String {
        format!(
            "{} frames complete, {} partial, {} lost | latency p50 {:.0} µs p99 {:.0} µs | {} packets, overflow {}",
            self.frames_complete,
            self.frames_partial,
            self.frames_lost,
            self.latency_p50_us.as_micros_f64(),
            self.latency_p99_us.as_micros_f64(),
            self.packets,
            self.rx_overflow
        )
    }
}

/// What a finished raw sender measured.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct RawSenderOutcome {
    pub source: String,
    pub destination: String,
    /// e.g. `1920x1080 YCbCr-4:2:2 10-bit @ 60/1`.
    pub format: String,
    /// `burst`, `narrow-gapped`, `narrow-linear` or `wide`.
    pub model: &'static str,
    /// Bytes of RTP payload per packet at most (`--packet-size`).
    pub packet_size: usize,
    pub packets_per_frame: usize,
    /// Bytes of one datagram (RTP header, extension, payload, padding).
    pub datagram_bytes: usize,
    pub frame_bytes: usize,
    /// The scheduling policy the pacing thread got.
    pub realtime: metronome_rt::thread::GrantView,
    /// Whether its memory is locked.
    pub memory_locked: metronome_rt::thread::MemoryLock,
    /// How it waited for each batch's time.
    pub wait_mode: crate::sender::WaitName,
    /// `frames`, `duration`, `end-of-input`, `stopped` or `error`.
    pub ended_by: metronome_rt::run::EndedBy,
    /// First frame's epoch to the end.
    pub duration_us: Micros,
    pub frames_sent: u64,
    pub packets_sent: u64,
    /// Datagram bytes (RTP headers included).
    pub bytes_sent: u64,
    /// Frames with a send call that started more than `late_threshold_us` after it was due.
    pub late_frames: u64,
    pub late_threshold_us: Micros,
    /// Frames the producer had not finished when their first packet was due.
    pub frames_not_ready: u64,
    pub send_errors: u64,
    pub last_send_error: Option<String>,
    pub pps: f64,
    pub bitrate_bps: f64,
    /// Process CPU time over the run (producer, pacer and the rest).
    pub cpu_us: Micros,
    pub pacer_cpu_us: Micros,
    pub producer_cpu_us: Micros,
    pub cpu_per_frame_us: Micros,
    /// Per packet: start of the send call that carried it − its due time (0 when sent early
    /// within the batch window).
    pub send_lateness: Summary,
    /// Per send call: its start − the due time of its first packet.
    pub batch_lateness: Summary,
    /// Per frame: start of its first send call to the return of its last.
    pub frame_send_time: Summary,
    /// The model's spread of a frame (first to last packet).
    pub spread_us: Micros,
    /// When the first packet of a frame is due after the frame's epoch.
    pub first_packet_offset_us: Micros,
    pub batch_window_us: Micros,
    /// Most packets in one send call: CMAX − 1 of the model's class (none for a burst).
    pub batch_max_packets: Option<usize>,
    pub batches: u64,
    pub gso: bool,
    pub gso_status: String,
    /// Packets padded to one size for GSO.
    pub padded: bool,
    pub buffer: BufferInfo,
    /// RTCP sender reports sent.
    pub sender_reports: u64,
    /// What each receiver said in its RTCP receiver reports: loss, jitter, round-trip time.
    pub receivers: Vec<metronome_session::sender::ReceiverView>,
    pub wait_modes: WaitSelectorStats,
    pub throttle_guard_trips: u64,
    /// What is done with late frames: `drop-late` (a frame whose first packet would be later
    /// than `after_us` is dropped whole) or `catch-up` (sent at `factor` times the rate).
    pub late_policy: LateView,
    /// Frames dropped whole by the late policy (a frame leaves whole or not at all).
    pub frames_dropped: u64,
    /// The packets those frames held; they took no sequence number.
    pub packets_dropped: u64,
    /// Batches (each a job, due within `late_threshold_us`) that left after their deadline.
    pub deadline_misses: u64,
    /// The sender session's view, batch by batch: lateness, stalls, late and dropped batches.
    pub pacing: metronome_sched::PacingStats,
    /// The share of its pacing core that admission reserved for it (its task's cost over its
    /// period), percent: a lone stream on a server of its own (`serve --raw`); absent on a
    /// core of its own or under `naive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_share_percent: Option<f64>,
    /// What the stream server of a lone stream had to say while it ran (overload, missed
    /// deadlines); absent when nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Packets the receiver did not use, by reason.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct RawRecvDrops {
    /// Malformed or unusable RFC 4175 packets, by reason (from the depayloader).
    #[serde(flatten)]
    pub malformed: RawDrops,
    pub total_malformed: u64,
    /// Packets of other SSRCs than the stream's (the first whose packet the depayloader used).
    pub other_ssrc: u64,
    /// Datagrams longer than the receive buffer.
    pub truncated: u64,
    /// Packets whose pixels had all arrived already.
    pub duplicates: u64,
    /// Packets of a frame already finished.
    pub late: u64,
}

/// What a finished raw receiver measured.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct RawReceiverOutcome {
    pub source: String,
    pub format: String,
    /// The sender model conformance is judged against.
    pub declared_model: &'static str,
    /// `frames`, `duration` or `stopped`.
    pub ended_by: metronome_rt::run::EndedBy,
    pub duration_us: Micros,
    /// The SSRC received (the first whose packet the depayloader used), 8 lowercase hex
    /// digits in JSON.
    #[serde(serialize_with = "metronome_time::units::opt_hex32")]
    #[schemars(with = "Option<metronome_time::units::Hex32>")]
    pub ssrc: Option<Ssrc>,
    pub frames_complete: u64,
    pub frames_partial: u64,
    pub frames_lost: u64,
    /// RTCP: the sender's reports heard and receiver reports sent (RFC 3550 §6.4).
    pub rtcp: RawRtcpStats,
    /// Complete frames without the capture-time extension (their latency is unknown).
    pub frames_without_capture_time: u64,
    pub frames_written: u64,
    /// Complete frames not written because the writer fell behind (or could not be identified).
    pub frames_not_written: u64,
    /// Why the Y4M output failed, if it did.
    pub output_error: Option<String>,
    /// Datagrams received (any source).
    pub packets: u64,
    pub bytes: u64,
    /// Over the time from the first to the last datagram.
    pub pps: f64,
    pub bitrate_bps: f64,
    /// Per complete frame: CLOCK_REALTIME when the depayloader reported it complete − its
    /// capture time (both clocks of this host; across hosts they must be synchronised).
    pub latency_us: LatencyUs,
    /// Per complete frame: kernel arrival of the packet that completed it − its capture time.
    pub arrival_latency_us: LatencyUs,
    /// Per complete frame: last − first packet arrival (kernel timestamps).
    pub spread_us: LatencyUs,
    /// ST 2110-21 measurement from the second complete frame on (the first gives NPACKETS).
    pub conformance: Option<ConformanceSummary>,
    pub drops: RawRecvDrops,
    /// Datagrams the kernel dropped for lack of socket buffer (SO_RXQ_OVFL).
    pub rx_overflow: u64,
    pub kernel_timestamps: bool,
    pub gro: bool,
    pub cpu_us: Micros,
    pub recv_cpu_us: Micros,
    pub cpu_per_frame_us: Micros,
    pub buffer: BufferInfo,
    /// The receiving thread's scheduling policy.
    pub realtime: metronome_rt::thread::GrantView,
}

/// The RTCP side of a raw receiver.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct RawRtcpStats {
    pub sender_reports: u64,
    pub receiver_reports_sent: u64,
    /// The sender's CNAME, from its SDES.
    pub sender_cname: Option<String>,
    /// Packets lost by RFC 3550 A.3 (expected − received), as the reports say.
    pub packets_lost: u64,
    /// RFC 3550 interarrival jitter at the end (every packet of a frame carries the frame's
    /// timestamp, so a paced frame's spread shows here).
    pub jitter_us: Micros,
}

/// A raw sender's late policy, as JSON gives it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "policy", rename_all = "kebab-case")]
pub enum LateView {
    /// A frame whose first packet would leave later than `after_us` is dropped whole.
    DropLate {
        /// How late a frame may start.
        after_us: Micros,
    },
    /// Late frames are sent, at `factor` times the rate until on time again.
    CatchUp {
        /// The rate's multiple while catching up.
        factor: f64,
    },
}

impl std::fmt::Display for LateView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LateView::DropLate { after_us } => write!(f, "drop-late={}us", after_us.as_micros()),
            LateView::CatchUp { factor } => write!(f, "catch-up={factor}"),
        }
    }
}
