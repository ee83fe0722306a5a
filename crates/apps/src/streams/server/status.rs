//! What the server shows about itself and each stream: in the API, the status line and reports.

use super::Running;
use metronome_rt::clock::process_cpu_s;
use metronome_rt::clock::Clock;
use metronome_rt::pacing::Calibration;
use metronome_rt::sync::lock;
use metronome_session::sender::{ReceiverView, ResendStats};
use metronome_time::Distribution;
use metronome_time::Micros;
use metronome_time::Summary;
use serde::Serialize;
use std::sync::atomic::Ordering;

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct TaskView {
    pub period_us: Micros,
    pub deadline_us: Micros,
    pub cost_us: Micros,
    pub utilisation_percent: f64,
    pub bitrate_bps: u64,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct StreamStatus {
    pub name: String,
    pub id: u64,
    /// running, ended (the source ended), failed, or removed.
    #[schemars(extend("enum" = ["running", "ended", "failed", "removed"]))]
    pub state: String,
    pub error: Option<String>,
    pub core: usize,
    /// The source as it was started, its rates then (the rate now: `target_bitrate_bps`).
    pub source: String,
    pub destinations: Vec<String>,
    /// The stream's SSRC, 8 lowercase hex digits.
    #[schemars(with = "metronome_time::units::Hex32")]
    pub ssrc: String,
    pub task: TaskView,
    pub elapsed_us: Micros,
    pub packets: u64,
    pub bytes: u64,
    /// Bytes sent over the time since the first release.
    pub bitrate_bps: f64,
    /// The MPEG-TS rate the stream's rate knob targets now (its source switches at its next
    /// GOP), bit/s.
    pub target_bitrate_bps: u64,
    /// The most the knob may raise it to (what admission reserved), MPEG-TS bit/s.
    pub max_bitrate_bps: u64,
    /// Whether the source can change its rate (the test source can; a file cannot).
    pub rate_adjustable: bool,
    pub jobs: u64,
    pub deadline_misses: u64,
    pub underruns: u64,
    pub overruns: u64,
    pub send_errors: u64,
    pub ring_occupancy: usize,
    pub ring_capacity: usize,
    /// Send time minus job release (the due time, unless a period groups packets), per packet.
    pub lateness: Summary,
    /// Times the stream fell more than the stall threshold behind its schedule.
    pub stalls: u64,
    /// Packets sent more than the stall threshold late (caught up at the bounded rate).
    pub late_packets: u64,
    /// Packets dropped for being too late (drop-late policy).
    pub dropped: u64,
    /// Frames a live source skipped to keep up with real time (its producer fell behind).
    pub frames_skipped: u64,
    pub receivers: Vec<ReceiverView>,
    /// The stream's RTCP: reports sent and received, and what was refused (malformed,
    /// about another SSRC, forged LSRs, receivers beyond the table).
    pub rtcp: metronome_session::sender::SenderCounters,
    /// With `repair = "rtx"`: what the receivers' NACKs asked and what was retransmitted
    /// (packets; `bytes` the retransmissions' RTP bytes); absent for a stream that does not
    /// repair.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<ResendStats>,
    /// With `repair = "fec"`: SMPTE 2022-1 FEC packets sent (`rows`, `columns`, `bytes`: their
    /// RTP bytes, to each destination) and `restarts` of the matrix; absent without FEC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fec: Option<metronome_session::repair::FecSendCounters>,
    /// When each packet left, if the server keeps them (`ServerConfig::keep_send_times`):
    /// for the caller, not in the status document.
    #[serde(skip)]
    #[schemars(skip)]
    pub send_times: Option<crate::streams::stream::SendTimes>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct CoreView {
    pub index: usize,
    /// Admitted utilisation (sum of cost / period).
    pub utilisation_percent: f64,
    /// The scheduling policy the core's pacing thread got.
    pub grant: metronome_rt::thread::GrantView,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ServerStatus {
    pub sched: String,
    pub running: usize,
    pub admitted: usize,
    /// Requests admission refused: streams, RTSP sessions, rate raises beyond what a stream
    /// was admitted for, shared holds.
    pub refused: u64,
    pub link_used_bps: u64,
    pub link_capacity_bps: Option<u64>,
    /// What the admitted streams hold in memory (rings and sources), bytes.
    pub memory_reserved_bytes: u64,
    /// The most they may hold (`--memory-budget`), bytes.
    pub memory_budget_bytes: u64,
    /// What the running live encoders take as admission reserved it (each measured when one
    /// like it was first asked for), percent of one CPU.
    pub encode_reserved_percent: f64,
    /// The most they may take (`--encode-budget`), percent of one CPU.
    pub encode_budget_percent: f64,
    /// What the producer threads (the encoders among them) used over the last second,
    /// measured, percent of one CPU.
    pub producer_cpu_percent: f64,
    pub core_budget_percent: f64,
    pub cores: Vec<CoreView>,
    pub calibration: Calibration,
    /// Lateness of every packet sent so far, all streams.
    pub lateness: Summary,
    pub process_cpu_us: Micros,
    /// Why the admitted streams no longer fit the host, while they do not.
    pub overload: Option<String>,
}

/// `GET /streams` of the control API: the server and its running streams.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct StreamList {
    pub server: ServerStatus,
    pub streams: Vec<StreamStatus>,
}

pub(super) fn stream_status(r: &Running, state: &str, clock: &Clock) -> StreamStatus {
    let rt = &r.rt;
    let c = &rt.counters;
    let (pacing, receivers, rtcp, repair, fec) = {
        let session = lock(&rt.session);
        (
            session.stats().pacing,
            session.reports().receivers().to_vec(),
            *session.reports().counters(),
            session.repair_stats(),
            session.fec_stats(),
        )
    };
    let elapsed = clock.now().saturating_since(r.rt.epoch).as_secs_f64();
    let bytes = c.bytes.load(Ordering::Relaxed);
    let error = lock(&rt.producer_error).clone();
    let state = if error.is_some() { "failed" } else { state };
    StreamStatus {
        name: rt.name.clone(),
        id: rt.id,
        state: state.to_string(),
        error,
        core: r.core,
        source: r.source.clone(),
        destinations: r.spec.destination.clone(),
        ssrc: format!("{:08x}", r.ssrc),
        task: TaskView {
            period_us: Micros::from(rt.task.period),
            deadline_us: Micros::from(rt.task.deadline),
            cost_us: Micros::from(rt.task.cost),
            utilisation_percent: rt.task.utilisation() * 100.0,
            bitrate_bps: rt.task.bitrate_bps,
        },
        elapsed_us: Micros::from_secs_f64(elapsed),
        packets: c.packets.load(Ordering::Relaxed),
        bytes,
        bitrate_bps: if elapsed > 0.0 {
            bytes as f64 * 8.0 / elapsed
        } else {
            0.0
        },
        target_bitrate_bps: rt.rate.target.load(Ordering::Relaxed),
        max_bitrate_bps: rt.rate.limits.ceiling,
        rate_adjustable: rt.rate.limits.allowed().is_some(),
        jobs: c.jobs.load(Ordering::Relaxed),
        deadline_misses: c.deadline_misses.load(Ordering::Relaxed),
        underruns: c.underruns.load(Ordering::Relaxed),
        overruns: c.overruns.load(Ordering::Relaxed),
        send_errors: c.send_errors.load(Ordering::Relaxed),
        ring_occupancy: rt.ring.occupancy(),
        ring_capacity: rt.ring.capacity(),
        lateness: pacing.lateness,
        stalls: pacing.stalls,
        late_packets: pacing.late_packets,
        dropped: pacing.dropped,
        frames_skipped: c.frames_skipped.load(Ordering::Relaxed),
        receivers,
        rtcp,
        repair,
        fec,
        send_times: rt.send_times.clone(),
    }
}

/// What the server and its streams show (the API, the status line, the outcome).
impl super::Inner {
    pub(super) fn statuses(&self, with_ended: bool) -> Vec<StreamStatus> {
        let mut v: Vec<StreamStatus> = lock(&self.streams)
            .values()
            .map(|r| stream_status(r, "running", &self.clock))
            .collect();
        if with_ended {
            v.extend(lock(&self.ended).iter().cloned());
        }
        v
    }

    pub(super) fn server_status(&self) -> ServerStatus {
        // Lock order: the stream table before admission (as `add` takes them).
        let running = lock(&self.streams).len();
        let adm = lock(&self.admission);
        let cores = (0..adm.platform().cores)
            .map(|i| CoreView {
                index: i,
                utilisation_percent: adm.core_utilisation(i) * 100.0,
                grant: self
                    .cores
                    .get(i)
                    .map(|c| lock(&c.grant).clone())
                    .unwrap_or_else(|| metronome_rt::thread::GrantView {
                        note: "naive: one SCHED_OTHER thread per stream".into(),
                        ..Default::default()
                    }),
            })
            .collect();
        let mut lateness = Distribution::new();
        for c in &self.cores {
            lateness.merge(&lock(&c.lateness));
        }
        lateness.merge(&lock(&self.naive_lateness));
        let memory = {
            let m = lock(&self.memory);
            (m.used(), m.budget())
        };
        let encoders = {
            let e = lock(&self.encoders);
            (e.used(), e.budget())
        };
        ServerStatus {
            sched: self.cfg.sched.to_string(),
            running,
            admitted: adm.admitted(),
            refused: self.refused.load(Ordering::Relaxed),
            link_used_bps: adm.link_used_bps(),
            link_capacity_bps: adm.platform().link_capacity_bps,
            memory_reserved_bytes: memory.0,
            memory_budget_bytes: memory.1,
            encode_reserved_percent: encoders.0 * 100.0,
            encode_budget_percent: encoders.1 * 100.0,
            producer_cpu_percent: lock(&self.producer_cpu).last * 100.0,
            core_budget_percent: self.cfg.core_budget * 100.0,
            cores,
            calibration: self.calibration,
            lateness: lateness.summary(),
            process_cpu_us: Micros::from_secs_f64(process_cpu_s()),
            overload: lock(&self.overload).reason().map(String::from),
        }
    }
}
