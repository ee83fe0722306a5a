//! `metronome serve --raw`: uncompressed video (RFC 4175) to `rtp://` destinations or as RTSP
//! mounts. The driver is `metronome_apps::uncompressed`; this turns the arguments into its
//! configuration and prints what it measured.

use super::{fresh_seed, rt_policy, ssrc_of_seed, ServeArgs};
use metronome_apps::streams::CoreRt;

use crate::raw_args::RawFormatArg;
use crate::report::warn_buffer;
use crate::report::{print_outcome, Intervals, LiveLine, Output, Snapshot};
use crate::sdp::raw_sdp;
use metronome_apps::rtsp::{Mounts, RawMount, RtspService};
use metronome_apps::streams::{ServerConfig, StreamServer};
use metronome_apps::uncompressed::{
    admitted_bitrate, model_name, RawControl, RawSender, RawSenderConfig, RawSenderOutcome,
    RawSenderStatus,
};
use metronome_media::uncompressed::{
    Depth, RawFileKind, RawFileSource, RawSource, RawTestPattern, Sampling, VideoFormat,
};
use metronome_media::MediaError;
use metronome_rt::pacing::WaitPolicy;
use metronome_rt::thread::RtPolicy;
use metronome_rt::udp::GsoStatus;
use metronome_rt::url::RtpUrl;
use metronome_sched::SenderType;
use metronome_session::rfc4175::packets_for;
use metronome_time::Micros;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

type BoxError = Box<dyn std::error::Error>;

pub(super) fn serve(a: ServeArgs, stop: Arc<AtomicBool>) -> Result<(), BoxError> {
    let file = raw_config(&a)?;
    let a = a.with_file(&file);
    if a.rtsp.is_some() {
        return serve_rtsp(a, &file, stop);
    }
    let [dest] = a.destinations.as_slice() else {
        return Err("serve --raw sends to one destination: give one rtp://HOST:PORT".into());
    };
    let destination = RtpUrl::parse_destination(dest)?;
    let (source, live) = open_source(&a)?;
    let format = source.format();
    let model = SenderType::from(a.raw.pacing);
    let cfg = sender_config(&a, destination, &format, live)?;
    let server = raw_server_config(&a, &format, &cfg)?;
    let sender = RawSender::open(source, cfg)?;
    let interval = a.interval.is_some();
    let live_line = LiveLine::new(!a.json && !interval);
    eprintln!(
        "metronome: {} → {dest} as {} ({} packets a frame)",
        sender.describe(),
        model_name(model),
        sender.packets_per_frame()
    );
    warn_buffer(&sender.buffer());
    if !matches!(sender.gso_status(), GsoStatus::On { .. }) {
        eprintln!("metronome: warning: {}", sender.gso_status());
    }
    if let Some(dir) = &a.sdp_dir {
        let url = RtpUrl::parse_destination(dest)?;
        let path = dir.join("raw.sdp");
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, raw_sdp(&format, model, &url)))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("metronome: wrote {}", path.display());
    }
    // A stream server with this one stream, as every `serve` stream: admitted on the declared
    // link, the memory budget and its core's schedulability, or refused with the reason.
    let ctl = Arc::new(RawControl::default());
    let mut lines = Intervals::new(a.json);
    let outcome = sender.run_alone(server, ctl, &stop, |s| {
        say_no_reload();
        if interval {
            lines.line(s, |d, span| RawServeInterval {
                frames: d(|s| s.frames),
                packets: d(|s| s.packets),
                bytes: d(|s| s.bytes),
                bitrate_bps: d(|s| s.bytes) as f64 * 8.0 / span,
                late_frames: d(|s| s.late_frames),
                max_late_us: s.max_late_us,
            });
        } else {
            live_line.show(&status_line(s));
        }
    })?;
    live_line.finish();
    print_outcome(Output::of(a.json, interval), &outcome, sender_summary)?;
    Ok(())
}

/// After a SIGHUP: `serve --raw` reads its config file at the start only.
fn say_no_reload() {
    if super::reload::requested() {
        eprintln!(
            "metronome: SIGHUP: serve --raw reads its --config at the start only; restart it to \
             apply a change (its sessions and stream go on meanwhile)"
        );
    }
}

/// What one uncompressed stream sent over one `--interval`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct RawServeInterval {
    /// Frames sent whole.
    pub frames: u64,
    /// RTP packets sent.
    pub packets: u64,
    /// Their bytes (RTP, headers included).
    pub bytes: u64,
    /// Their rate over the interval, bit/s.
    pub bitrate_bps: f64,
    /// Frames whose send calls started later than the late threshold after they were due.
    pub late_frames: u64,
    /// The latest a batch left after its due time, over the interval.
    pub max_late_us: Micros,
}

impl Snapshot for RawSenderStatus {
    fn elapsed(&self) -> Duration {
        self.elapsed
    }
}

/// `--config` for a raw server: its server settings, RTSP users and certificate, no streams.
fn raw_config(a: &ServeArgs) -> Result<metronome_config::serve::ServeConfig, BoxError> {
    let Some(path) = &a.config else {
        return Ok(Default::default());
    };
    let file = metronome_config::serve::load(path)?;
    // The unit's reload (`kill -HUP`) must not end a raw server: it is told to restart instead.
    super::reload::catch_sighup()?;
    if !file.streams.is_empty() {
        return Err(format!(
            "{}: --raw serves its one source, so its --config may hold [rtsp_auth] and the \
             RTSPS certificate but no [[stream]]; remove them or serve them without --raw",
            path.display()
        )
        .into());
    }
    Ok(file)
}

/// `serve --raw --rtsp ADDR`: the source as an RTSP mount (`rtsp://ADDR/raw`, or the file's
/// name); every session gets a sender of its own, admitted on `--link-capacity`.
fn serve_rtsp(
    a: ServeArgs,
    file: &metronome_config::serve::ServeConfig,
    stop: Arc<AtomicBool>,
) -> Result<(), BoxError> {
    let Some(addr) = a.rtsp else {
        return Err("internal error: serve_rtsp without --rtsp".into());
    };
    let (source, live) = open_source(&a)?;
    let format = source.format();
    let describe = source.describe();
    drop(source);
    let placeholder = RtpUrl::unicast(std::net::SocketAddr::from(([127, 0, 0, 1], 9)));
    let mut cfg = sender_config(&a, placeholder, &format, live)?;
    // Each session's frames run until TEARDOWN (or the source ends), whatever the command's
    // own duration.
    cfg.duration = None;
    let server_cfg = raw_server_config(&a, &format, &cfg)?;
    let name = super::streams::mount_name(a.source.input.as_deref(), "raw");
    let args = Arc::new(a.clone());
    let mut mounts = Mounts::default();
    mounts.add_raw(
        &name,
        RawMount {
            format,
            sender: cfg,
            live,
            describe: describe.clone(),
            open: Box::new(move || {
                open_source(&args)
                    .map(|(s, _)| s)
                    .map_err(|e| MediaError::Config(e.to_string()))
            }),
        },
    )?;
    let server = Arc::new(StreamServer::start(server_cfg)?);
    let rc = a.rtsp_config(addr, file);
    let service = RtspService::start(rc, server.clone(), mounts)?;
    eprintln!(
        "metronome: serving {}://{}/{name}: {describe} as {}",
        service.scheme(),
        super::streams::shown_addr(service.local_addr()),
        model_name(SenderType::from(a.raw.pacing))
    );
    let clock = metronome_rt::clock::Clock::new();
    let start = clock.now();
    let over = |d: Duration| clock.now().saturating_since(start) >= d;
    while !stop.load(Ordering::Relaxed) && !a.duration.is_some_and(over) {
        std::thread::sleep(Duration::from_millis(50));
        say_no_reload();
    }
    service.shutdown();
    Ok(())
}

/// The stream server of `serve --raw`: every server option, as for MPEG-TS streams. Without
/// `--max-stream-rate`, one stream may send what the source's format needs (its size and
/// rate are the operator's, not a client's, to choose), or the default, whichever is more.
fn raw_server_config(
    a: &ServeArgs,
    format: &VideoFormat,
    sender: &RawSenderConfig,
) -> Result<ServerConfig, BoxError> {
    let mut cfg = super::streams::server_config(a);
    if a.max_stream_rate.is_none() {
        cfg.max_stream_bps = cfg.max_stream_bps.max(admitted_bitrate(format, sender)?);
    }
    Ok(cfg)
}

/// How `serve --raw` sends, from its arguments.
fn sender_config(
    a: &ServeArgs,
    destination: RtpUrl,
    format: &VideoFormat,
    live: bool,
) -> Result<RawSenderConfig, BoxError> {
    let r = &a.raw;
    let model = SenderType::from(r.pacing);
    let npackets = packets_for(format, r.packet_size)?;
    let seed = a.seed.unwrap_or_else(fresh_seed);
    let mut cfg = RawSenderConfig::new(destination, ssrc_of_seed(seed), seed);
    cfg.model = model;
    cfg.max_payload = r.packet_size;
    cfg.batch_window = r.batch_window;
    cfg.late_threshold = r.late_threshold;
    cfg.gso = !r.no_gso;
    cfg.send_time_ext = a.send_time;
    cfg.duration = a.duration;
    cfg.frames = r.frames;
    cfg.live = live;
    cfg.pacer_cpu = a.cpu;
    if let Some(every) = a.interval {
        cfg.status_every = every;
    }
    let tframe = Duration::from_nanos(format.frame_duration_ns());
    let interval = match model {
        SenderType::Burst => tframe,
        _ => (tframe / npackets.max(1) as u32).max(r.batch_window),
    };
    let rt = a.rt.unwrap_or_default();
    cfg.rt_policy = rt_policy(rt, interval);
    cfg.late = a.late;
    cfg.lock_memory = rt != CoreRt::Off;
    cfg.wait = a.wait.unwrap_or_default();
    if cfg.wait == WaitPolicy::BusyPoll && rt == CoreRt::Auto {
        cfg.rt_policy = RtPolicy::Other;
    }
    Ok(cfg)
}

/// The source `serve --raw` asks for, and whether it is live (produced at its frame times).
fn open_source(a: &ServeArgs) -> Result<(Box<dyn RawSource>, bool), BoxError> {
    let r = &a.raw;
    let (w, h) = a.source.size;
    let fps = a.source.fps;
    let Some(path) = &a.source.input else {
        let sampling = r.sampling.map_or(Sampling::Ycbcr422, Sampling::from);
        let f = VideoFormat::new(w, h, sampling, r.depth.unwrap_or(Depth::Eight), fps, 1)?;
        return Ok((Box::new(RawTestPattern::new(f)?), true));
    };
    // A camera: a /dev/video* (or /dev/v4l/…) node, or any character device given without
    // --raw-format. It is live and self-timed; --size and --fps (which always have a value) are
    // the wish the driver comes as close to as it can.
    let camera = {
        use std::os::unix::fs::FileTypeExt;
        let text = path.to_string_lossy();
        text.starts_with("/dev/video")
            || text.starts_with("/dev/v4l/")
            || (r.raw_format.is_none()
                && std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device()))
    };
    if camera {
        if r.raw_format.is_some() {
            return Err(format!(
                "{} is a camera: it gives its own pixel format, so --raw-format does not apply \
                 (leave it out)",
                path.display()
            )
            .into());
        }
        let src = metronome_apps::sources::V4l2Source::open(path, Some((w, h, fps)))?;
        let f = src.format();
        let clash = r.sampling.is_some_and(|s| Sampling::from(s) != f.sampling)
            || r.depth.is_some_and(|d| d != f.depth);
        if clash {
            return Err(format!(
                "{} captures {f}: --sampling and --depth do not apply to a camera (leave them out)",
                path.display()
            )
            .into());
        }
        return Ok((Box::new(src), true));
    }
    let src = match r.raw_format {
        Some(k) => {
            let kind = match k {
                RawFormatArg::I420 => RawFileKind::I420,
                RawFormatArg::Uyvy => RawFileKind::Uyvy,
                RawFormatArg::V210 => RawFileKind::V210,
            };
            RawFileSource::open_raw(path, kind, w, h, fps, 1)?
        }
        None => RawFileSource::open(path, Some((w, h, fps, 1)))?,
    };
    let src = src.looping(a.source.looping);
    let f = src.format();
    let clash = r.sampling.is_some_and(|s| Sampling::from(s) != f.sampling)
        || r.depth.is_some_and(|d| d != f.depth);
    if clash {
        return Err(format!(
            "{} holds {f}: --sampling and --depth do not apply to it (leave them out)",
            path.display()
        )
        .into());
    }
    Ok((Box::new(src), false))
}

fn status_line(s: &RawSenderStatus) -> String {
    let secs = s.elapsed.as_secs_f64().max(1e-9);
    format!(
        "{:>6.1}s {} frames {} pkts {:.1} Mbit/s late frames {} worst batch late {:.1} µs",
        s.elapsed.as_secs_f64(),
        s.frames,
        s.packets,
        s.bytes as f64 * 8.0 / secs / 1e6,
        s.late_frames,
        s.max_late_us.as_micros_f64()
    )
}

fn sender_summary(o: &RawSenderOutcome) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "raw sender: {} ({})", o.source, o.format);
    let _ = writeln!(
        s,
        "  to {} as {} ({} packets of up to {} payload bytes a frame, {}-byte datagrams)",
        o.destination, o.model, o.packets_per_frame, o.packet_size, o.datagram_bytes
    );
    let _ = writeln!(
        s,
        "  pacing thread: {}; memory {}; wait {}",
        o.realtime, o.memory_locked, o.wait_mode
    );
    if let Some(share) = o.core_share_percent {
        let _ = writeln!(s, "  admitted: {share:.1}% of its pacing core reserved");
    }
    let _ = writeln!(
        s,
        "  sent {} frames, {} packets, {} bytes in {:.2} s ({:.0} packets/s, {:.1} Mbit/s), ended by {}",
        o.frames_sent,
        o.packets_sent,
        o.bytes_sent,
        o.duration_us.as_secs_f64(),
        o.pps,
        o.bitrate_bps / 1e6,
        o.ended_by
    );
    let _ = writeln!(
        s,
        "  late frames {} (send started > {:.0} µs after due), not ready in time {}, send errors {}{}",
        o.late_frames,
        o.late_threshold_us.as_micros_f64(),
        o.frames_not_ready,
        o.send_errors,
        o.last_send_error
            .as_deref()
            .map(|e| format!(" (first: {e})"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "  late policy {}: {} frames dropped whole ({} packets), {} stalls, {} batches past their deadline",
        o.late_policy, o.frames_dropped, o.packets_dropped, o.pacing.stalls, o.deadline_misses
    );
    let _ = writeln!(s, "  send lateness per packet: {}", o.send_lateness);
    let _ = writeln!(s, "  per send call ({}): {}", o.batches, o.batch_lateness);
    let _ = writeln!(
        s,
        "  frame send time: {}; the model spreads a frame over {:.2} ms from {:.2} ms after its epoch",
        o.frame_send_time, o.spread_us.as_millis_f64(), o.first_packet_offset_us.as_millis_f64()
    );
    let _ = writeln!(
        s,
        "  CPU {:.3} s ({:.0} µs a frame; pacer {:.3} s, producer {:.3} s)",
        o.cpu_us.as_secs_f64(),
        o.cpu_per_frame_us.as_micros_f64(),
        o.pacer_cpu_us.as_secs_f64(),
        o.producer_cpu_us.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "  {}; SO_SNDBUF {} of {} bytes",
        o.gso_status, o.buffer.accepted, o.buffer.wanted
    );
    let _ = writeln!(
        s,
        "  RTCP: {} sender reports sent, {} receivers reported",
        o.sender_reports,
        o.receivers.len()
    );
    for w in &o.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    for r in &o.receivers {
        let _ = writeln!(s, "    {}", crate::report::receiver_line(r));
    }
    s
}
