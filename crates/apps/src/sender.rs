//! One stream from a [`TsSource`](metronome_media::TsSource) to one or more RTP destinations: `serve URL`, `demo` and
//! `bench pacing`.
//!
//! It is the multi-stream server ([`StreamServer`]) with one stream on one core: the same
//! admission, producer pool, pacing thread, sender session and RTCP as every other stream.
//! [`run_sender`] starts it, watches the stream and reports what it measured.

use crate::streams::{
    CoreRt, GivenSource, SchedKind, ServerConfig, ServerError, ServerOutcome, StartInfo,
    StreamServer, StreamStatus,
};
use metronome_config::repair::Repair;
use metronome_config::stream::StreamSpec;
use metronome_media::MediaError;
use metronome_rt::clock::Clock;
use metronome_rt::host::{HostLoad, HostWatch};
use metronome_rt::pacing::{PacerKind, WaitPolicy};
use metronome_rt::run::RunLimit;
use metronome_rt::sync::lock;
use metronome_rt::udp::{SocketOptions, UdpError, UdpSender};
use metronome_rt::url::RtpUrl;
use metronome_sched::{OverloadPolicy, PacingConfig, PacingStats, WaitSelectorStats};
use metronome_session::sender::ReceiverView;
use metronome_time::Micros;
use metronome_time::Timestamp;
use metronome_wire::Ssrc;
use serde::Serialize;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct SenderConfig {
    pub destinations: Vec<RtpUrl>,
    pub ssrc: Ssrc,
    /// Stamp each packet's send time in an RFC 8285 header extension (for one-way delay).
    pub send_time_ext: bool,
    /// Ring slots between producer and pacer (the paper: 1024).
    pub ring_slots: usize,
    pub pacer: PacerKind,
    /// Real-time policy of the pacing thread.
    pub rt: CoreRt,
    pub wait: WaitPolicy,
    /// What the stream does after a stall: catch up at a bounded rate, or drop what is late.
    pub pacing: PacingConfig,
    pub pacer_cpu: Option<usize>,
    pub lock_memory: bool,
    /// Stop after this long; `None` runs until the source ends or `stop` is set.
    pub duration: Option<Duration>,
    pub rtcp_min_interval: Duration,
    /// Head start of the producer before the first release time.
    pub preroll: Duration,
    pub seed: u64,
    /// The rate controller (`metronome_cc::ControllerKind`'s names), and the
    /// most it may raise the stream to.
    pub cc: Option<String>,
    pub max_bitrate: Option<u64>,
    /// The largest IP packet (fewer TS packets per RTP packet than seven where it needs).
    pub mtu: Option<u32>,
    /// How often `run_sender` reports its status (on whole multiples of it from the
    /// stream's start; and once more when it has stopped, with the final counts).
    pub status_every: Duration,
    /// Loss repair (`"rtx"`: NACK and retransmission, `"fec"`: SMPTE 2022-1 FEC), and the
    /// receivers' play-out delay it must make (200 ms if `None`).
    pub repair: Repair,
    pub playout_delay: Option<Duration>,
    /// Keep when each packet left ([`SenderOutcome::send_times_unix_ns`]).
    pub keep_send_times: bool,
}

impl SenderConfig {
    pub fn new(destinations: Vec<RtpUrl>, ssrc: Ssrc, seed: u64) -> Self {
        SenderConfig {
            destinations,
            ssrc,
            send_time_ext: false,
            ring_slots: 1024,
            pacer: PacerKind::Realtime,
            rt: CoreRt::Auto,
            wait: WaitPolicy::Auto,
            pacing: PacingConfig::default(),
            pacer_cpu: None,
            lock_memory: true,
            duration: None,
            rtcp_min_interval: Duration::from_secs(1),
            preroll: Duration::from_millis(200),
            seed,
            cc: None,
            max_bitrate: None,
            mtu: None,
            status_every: Duration::from_secs(1),
            repair: Repair::None,
            playout_delay: None,
            keep_send_times: false,
        }
    }

    /// The server that runs the stream: one core (the baseline: one plain thread), pinned only
    /// where asked, with the producer and RTCP free to run on any CPU.
    pub fn server_config(&self) -> ServerConfig {
        ServerConfig {
            sched: match self.pacer {
                PacerKind::Realtime => SchedKind::Edf,
                PacerKind::PlainSleep => SchedKind::Naive,
            },
            rt_cores: 1,
            rt: self.rt,
            wait: self.wait,
            cpus: self.pacer_cpu.map(|c| vec![c]),
            isolate: false,
            lock_memory: self.lock_memory,
            producers: 1,
            preroll: self.preroll,
            default_ring: self.ring_slots.max(1),
            streams_per_core: 16,
            rtcp_min_interval: self.rtcp_min_interval,
            pacing: self.pacing,
            // One stream, not admitted by request: only its lateness is worth a warning.
            overload: OverloadPolicy::Deadlines,
            seed: self.seed,
            keep_send_times: self.keep_send_times,
            ..ServerConfig::default()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error(transparent)]
    Udp(#[from] UdpError),
    #[error("source: {0}")]
    Media(#[from] MediaError),
    #[error("source: {0}")]
    Source(String),
    #[error("no destination given: add one, for example rtp://127.0.0.1:5004")]
    NoDestination,
    #[error(transparent)]
    Server(ServerError),
    #[error("the stream was not started: {0}")]
    Refused(String),
}

/// A status snapshot, each `status_every` (a second unless set), and a last one at the stop.
#[derive(Clone, Debug)]
pub struct SenderStatus {
    /// Time since the stream started (its first release time).
    pub elapsed: Duration,
    pub packets: u64,
    pub bytes: u64,
    /// Worst lateness since the previous status.
    pub max_late_us: Micros,
    pub ring_occupancy: usize,
    pub receivers: Vec<ReceiverView>,
    /// The MPEG-TS rate the rate knob targets now (the rate controller's, where there is one).
    pub target_bitrate_bps: u64,
}

impl SenderStatus {
    /// The stream's status `elapsed` after its start, its worst lateness since the last.
    fn of(s: StreamStatus, elapsed: Duration, max_late: Duration) -> SenderStatus {
        SenderStatus {
            elapsed,
            packets: s.packets,
            bytes: s.bytes,
            max_late_us: Micros::from(max_late),
            ring_occupancy: s.ring_occupancy,
            receivers: s.receivers,
            target_bitrate_bps: s.target_bitrate_bps,
        }
    }
}

/// What a finished run measured.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SenderOutcome {
    pub source: String,
    pub destinations: Vec<String>,
    /// The stream's SSRC and the sequence number of its first RTP packet (a receiver numbers
    /// packets from it).
    #[serde(serialize_with = "metronome_time::units::hex32")]
    #[schemars(with = "metronome_time::units::Hex32")]
    pub ssrc: Ssrc,
    pub first_seq: u16,
    /// The stream's time zero on the wall clock, Unix ns (packet due times count from it).
    pub epoch_unix_ns: u64,
    /// The scheduling policy the pacing thread got.
    pub realtime: metronome_rt::thread::GrantView,
    /// Whether its memory is locked.
    pub memory_locked: metronome_rt::thread::MemoryLock,
    /// How it waited for each packet's time.
    pub wait_mode: WaitName,
    pub ended_by: metronome_rt::run::EndedBy,
    pub duration_us: Micros,
    pub packets: u64,
    pub bytes: u64,
    /// Bytes sent over the time from the first release to the end.
    pub bitrate_bps: f64,
    /// The MPEG-TS rate the rate controller targeted at the end (the fixed rate without one).
    pub target_bitrate_bps: u64,
    pub send_errors: u64,
    pub underruns: u64,
    /// Packets per job deadline missed (a packet is its own job: due time + one interval).
    pub deadline_misses: u64,
    /// Frames a live source skipped to keep up with real time (its producer fell behind).
    pub frames_skipped: u64,
    pub ring_slots: usize,
    /// Lateness, stalls, and what catching up or dropping did.
    pub pacing: PacingStats,
    /// With `WaitPolicy::Auto`: time spent sleeping-then-spinning and busy-polling.
    pub wait_modes: WaitSelectorStats,
    pub final_spin_margin_us: Micros,
    /// CPU time the pacing thread used, as a share of one core over the run.
    pub pacer_cpu_percent: f64,
    pub receivers: Vec<ReceiverView>,
    /// With [`SenderConfig::repair`]: what the receivers' NACKs asked and what was
    /// retransmitted; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<metronome_session::sender::ResendStats>,
    /// With FEC in [`SenderConfig::repair`]: the SMPTE 2022-1 FEC packets sent; absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fec: Option<metronome_session::repair::FecSendCounters>,
    /// How busy the host was over the run (absent where /proc cannot be read).
    pub host: Option<HostLoad>,
    /// What went wrong without stopping the stream (a file that ends mid-packet), in words.
    pub warnings: Vec<String>,
    /// With [`SenderConfig::keep_send_times`]: when each packet left, in order, Unix ns; not
    /// in the document.
    #[serde(skip)]
    #[schemars(skip)]
    pub send_times_unix_ns: Vec<u64>,
}

/// The stream's name in the server that runs it.
const NAME: &str = "stream1";

/// Runs one stream until the source ends, `cfg.duration` passes, or `stop` is set.
///
/// The stream runs on the multi-stream server ([`StreamServer`]) like any other: admitted
/// against the send cost measured at start-up, fed by the producer pool, paced by a core's
/// pacing thread (or, for the benchmarks' baseline, by a plain sleeping thread: `naive`),
/// reported on by the RTCP thread. This function only watches it and says what it measured.
pub fn run_sender(
    source: impl Into<GivenSource>,
    cfg: SenderConfig,
    stop: Arc<AtomicBool>,
    mut on_status: impl FnMut(&SenderStatus),
) -> Result<SenderOutcome, SendError> {
    if cfg.destinations.is_empty() {
        return Err(SendError::NoDestination);
    }
    let source: GivenSource = source.into();
    let description = source.describe();
    let spec = stream_spec(&cfg)?;
    // Probe the destinations before the server starts, so that a bad one is said plainly.
    for d in &cfg.destinations {
        UdpSender::open(d, &SocketOptions::default())?;
    }
    let host = HostWatch::start();
    let server = StreamServer::start(cfg.server_config()).map_err(SendError::Server)?;
    let clock = Clock::new();
    let start = clock.now();
    let added = server.add_source(spec, source);
    let (status, first) = match added {
        Ok(s) => s,
        Err(e) => {
            server.shutdown();
            return Err(SendError::Refused(e.message().to_string()));
        }
    };
    let mut warnings = Vec::new();
    let (ended_by, reported) = watch(
        &server,
        &cfg,
        &clock,
        start,
        &stop,
        &mut warnings,
        &mut on_status,
    );

    let end = clock.now();
    // Said by the source just before the end, or as the stream was reaped.
    std::thread::sleep(Duration::from_millis(30));
    warnings.extend(server.take_warnings());
    let last_late = server.take_max_late(NAME).unwrap_or_default();
    let outcome = server.shutdown();
    let stopped = clock.now();
    let s = outcome
        .streams
        .iter()
        .find(|s| s.name == NAME)
        .unwrap_or(&status);
    if let Some(e) = &s.error {
        return Err(SendError::Source(e.clone()));
    }
    // The last, shorter status, to the stop: the statuses' counts end where the summary's do.
    if stopped > reported {
        let elapsed = stopped.saturating_since(start + cfg.preroll);
        on_status(&SenderStatus::of(s.clone(), elapsed, last_late));
    }
    let run = Run {
        description,
        first,
        ended_by,
        duration_s: end.saturating_since(start).as_secs_f64(),
        host: host.finish(s.stalls),
        warnings,
    };
    Ok(run.outcome(&cfg, s, &outcome))
}

/// What one run of the sender was, besides its stream's status and the server's outcome.
struct Run {
    description: String,
    first: StartInfo,
    ended_by: metronome_rt::run::EndedBy,
    duration_s: f64,
    host: Option<HostLoad>,
    warnings: Vec<String>,
}

impl Run {
    fn outcome(
        self,
        cfg: &SenderConfig,
        s: &StreamStatus,
        outcome: &ServerOutcome,
    ) -> SenderOutcome {
        let first = self.first;
        let pacer = outcome.pacers.first();
        let pacer_cpu_percent = outcome.core_cpu_percent.first().copied().unwrap_or(0.0);
        SenderOutcome {
            source: self.description,
            destinations: cfg.destinations.iter().map(|d| d.to_string()).collect(),
            ssrc: first.ssrc,
            first_seq: first.seq.get(),
            epoch_unix_ns: first.epoch_unix_ns,
            realtime: outcome
                .server
                .cores
                .first()
                .map(|c| c.grant.clone())
                .unwrap_or_default(),
            memory_locked: pacer.map(|p| p.memory.clone()).unwrap_or_default(),
            wait_mode: match cfg.pacer {
                PacerKind::Realtime => cfg.wait.into(),
                PacerKind::PlainSleep => WaitName::PlainSleep,
            },
            ended_by: self.ended_by,
            duration_us: Micros::from_secs_f64(self.duration_s),
            packets: s.packets,
            bytes: s.bytes,
            bitrate_bps: s.bitrate_bps,
            target_bitrate_bps: s.target_bitrate_bps,
            send_errors: s.send_errors,
            underruns: s.underruns,
            deadline_misses: s.deadline_misses,
            frames_skipped: s.frames_skipped,
            repair: s.repair,
            fec: s.fec,
            ring_slots: s.ring_capacity,
            pacing: PacingStats {
                packets: s.packets,
                lateness: s.lateness,
                stalls: s.stalls,
                late_packets: s.late_packets,
                dropped: s.dropped,
            },
            wait_modes: pacer.map(|p| p.wait_modes).unwrap_or_default(),
            final_spin_margin_us: pacer.map_or(Micros::ZERO, |p| p.spin_margin_us),
            pacer_cpu_percent,
            receivers: s.receivers.clone(),
            host: self.host,
            warnings: self
                .warnings
                .into_iter()
                .map(|w| w.replace(&format!("stream '{NAME}': "), ""))
                .collect(),
            send_times_unix_ns: s
                .send_times
                .as_ref()
                .map(|t| std::mem::take(&mut *lock(t)))
                .unwrap_or_default(),
        }
    }
}

/// The one stream's spec, from the sender's settings.
fn stream_spec(cfg: &SenderConfig) -> Result<StreamSpec, SendError> {
    let mut spec = StreamSpec::new(
        NAME,
        cfg.destinations.iter().map(|d| d.to_string()).collect(),
    );
    spec.send_time = cfg.send_time_ext;
    spec.ssrc = Some(cfg.ssrc.get());
    spec.ring = Some(cfg.ring_slots.max(1));
    spec.cc = cfg.cc.clone();
    spec.max_bitrate = cfg.max_bitrate;
    spec.mtu = cfg.mtu;
    spec.repair = cfg.repair;
    spec.playout_delay = cfg.playout_delay.filter(|_| cfg.repair != Repair::None);
    spec.validate_settings()
        .map_err(|e| SendError::Refused(e.to_string()))?;
    Ok(spec)
}

/// Watches the running stream until the run's limit, `stop`, or the source's end, reporting
/// its status every `cfg.status_every` from the stream's start and collecting the server's
/// warnings. Returns why it ended, and when it last reported.
fn watch(
    server: &StreamServer,
    cfg: &SenderConfig,
    clock: &Clock,
    start: Timestamp,
    stop: &Arc<AtomicBool>,
    warnings: &mut Vec<String>,
    on_status: &mut impl FnMut(&SenderStatus),
) -> (metronome_rt::run::EndedBy, Timestamp) {
    // The stream starts at its first release time, after the preroll: the statuses count
    // their seconds from there, as `elapsed` does.
    let first_release = start + cfg.preroll;
    let limit = RunLimit::new(start, cfg.duration, stop);
    let every = cfg.status_every.max(Duration::from_millis(10));
    let mut next_status = first_release + every;
    let mut reported = first_release;
    loop {
        let now = clock.now();
        if let Some(why) = limit.ended(now) {
            break (why, reported);
        }
        if !server.is_running(NAME) {
            break (metronome_rt::run::EndedBy::EndOfInput, reported);
        }
        warnings.extend(server.take_warnings());
        if now >= next_status {
            next_status += every;
            reported = now;
            if let Some(s) = server.stream(NAME) {
                let late = server.take_max_late(NAME).unwrap_or_default();
                on_status(&SenderStatus::of(
                    s,
                    now.saturating_since(first_release),
                    late,
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How a pacing thread waits for each release, as JSON spells it: `--wait`'s values, and
/// `plain-sleep` for the baseline pacer (`--pacer plain-sleep`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WaitName {
    /// Switching between sleeping then spinning and busy-polling, as the load asks.
    Auto,
    /// Sleeping until shortly before, then spinning.
    SleepSpin,
    /// Spinning the whole time.
    BusyPoll,
    /// One plain sleep per packet (the baseline).
    PlainSleep,
}

impl From<WaitPolicy> for WaitName {
    fn from(w: WaitPolicy) -> Self {
        match w {
            WaitPolicy::Auto => WaitName::Auto,
            WaitPolicy::SleepSpin => WaitName::SleepSpin,
            WaitPolicy::BusyPoll => WaitName::BusyPoll,
        }
    }
}

impl std::fmt::Display for WaitName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WaitName::Auto => "auto",
            WaitName::SleepSpin => "sleep-spin",
            WaitName::BusyPoll => "busy-poll",
            WaitName::PlainSleep => "plain-sleep",
        })
    }
}
