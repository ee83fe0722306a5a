//! What a raw sender reports: its status while it runs, its outcome when it ends.

use super::*;
use metronome_time::Micros;

pub(super) fn status(c: &PacerCounters, elapsed: Duration) -> RawSenderStatus {
    RawSenderStatus {
        elapsed,
        frames: c.frames.load(Ordering::Relaxed),
        packets: c.packets.load(Ordering::Relaxed),
        bytes: c.bytes.load(Ordering::Relaxed),
        late_frames: c.late_frames.load(Ordering::Relaxed),
        max_late_us: Micros::from_nanos_u64(c.max_late_ns.swap(0, Ordering::Relaxed)),
    }
}

pub(super) struct Finished<'a> {
    pub(super) cfg: &'a RawSenderConfig,
    pub(super) format: VideoFormat,
    pub(super) schedule: FrameSchedule,
    pub(super) rt: &'a RawStreamRt,
    pub(super) description: String,
    pub(super) packets_per_frame: usize,
    pub(super) stride: usize,
    pub(super) duration_s: f64,
    pub(super) cpu_s: f64,
    pub(super) producer_cpu_s: f64,
    pub(super) ended_by: metronome_rt::run::EndedBy,
    pub(super) counters: &'a PacerCounters,
    pub(super) pacer: PacerResult,
}

pub(super) fn outcome(f: Finished<'_>) -> RawSenderOutcome {
    let c = f.counters;
    let frames = c.frames.load(Ordering::Relaxed);
    let packets = c.packets.load(Ordering::Relaxed);
    let bytes = c.bytes.load(Ordering::Relaxed);
    let per_s = |v: f64| {
        if f.duration_s > 0.0 {
            v / f.duration_s
        } else {
            0.0
        }
    };
    let out = &f.rt.out;
    let gso = out.gso_status();
    let p = f.pacer;
    let session = lock(&f.rt.session);
    let stats = session.stats();
    RawSenderOutcome {
        source: f.description,
        destination: out.destination(),
        format: f.format.to_string(),
        model: super::super::model_name(f.cfg.model),
        packet_size: f.cfg.max_payload,
        packets_per_frame: f.packets_per_frame,
        datagram_bytes: f.stride,
        frame_bytes: f.format.frame_bytes(),
        realtime: p.grant,
        memory_locked: p.memory,
        wait_mode: f.cfg.wait.into(),
        ended_by: f.ended_by,
        duration_us: Micros::from_secs_f64(f.duration_s),
        frames_sent: frames,
        packets_sent: packets,
        bytes_sent: bytes,
        late_frames: c.late_frames.load(Ordering::Relaxed),
        late_threshold_us: Micros::from(f.cfg.late_threshold),
        frames_not_ready: p.stats.frames_not_ready,
        send_errors: p.stats.send_errors,
        last_send_error: p.stats.last_send_error,
        pps: per_s(packets as f64),
        bitrate_bps: per_s(bytes as f64 * 8.0),
        cpu_us: Micros::from_secs_f64(f.cpu_s),
        pacer_cpu_us: Micros::from_secs_f64(p.cpu_s),
        producer_cpu_us: Micros::from_secs_f64(f.producer_cpu_s),
        cpu_per_frame_us: crate::uncompressed::report::per_frame(f.cpu_s, frames),
        send_lateness: p.stats.send_lateness.summary(),
        batch_lateness: p.stats.batch_lateness.summary(),
        frame_send_time: p.stats.frame_send_time.summary(),
        spread_us: Micros::from(f.schedule.spread()),
        first_packet_offset_us: Micros::from(f.schedule.offset(0)),
        batch_window_us: Micros::from(f.cfg.batch_window),
        batch_max_packets: p.max_batch,
        batches: p.stats.batches,
        gso: out.uses_gso(),
        gso_status: gso.to_string(),
        padded: f.cfg.pad_for_gso,
        buffer: out.buffer(),
        sender_reports: session.reports().counters().sender_reports,
        receivers: session.reports().receivers().to_vec(),
        late_policy: match f.rt.settings.late {
            LatePolicy::DropLate { after } => crate::uncompressed::report::LateView::DropLate {
                after_us: Micros::from(after),
            },
            LatePolicy::CatchUp { factor } => {
                crate::uncompressed::report::LateView::CatchUp { factor }
            }
        },
        frames_dropped: c.frames_dropped.load(Ordering::Relaxed),
        packets_dropped: c.packets_dropped.load(Ordering::Relaxed),
        deadline_misses: stats.deadline_misses,
        pacing: stats.pacing,
        wait_modes: p.wait_modes,
        throttle_guard_trips: p.throttle_guard_trips,
        core_share_percent: None,
        warnings: Vec::new(),
    }
}
