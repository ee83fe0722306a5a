//! Uncompressed video (RFC 4175): `metronome serve --raw`, `metronome recv --raw` (or an SDP
//! whose media is `raw/90000`) and `metronome sdp --raw`. The drivers are
//! `metronome_apps::raw`; this file turns arguments into their configurations and prints what
//! they measured.

use crate::args::{parse_duration, parse_size};
use crate::recv::RecvArgs;
use crate::report::{print_outcome, LiveLine};
use crate::sdp::SdpArgs;
use crate::serve::{fresh_seed, rt_policy, RtChoice, ServeArgs};
use clap::{Args, ValueEnum};
use metronome_apps::raw::{
    model_name, parse_model, BufferInfo, RawReceiver, RawReceiverConfig, RawReceiverOutcome,
    RawSender, RawSenderConfig, RawSenderOutcome, RawSenderStatus,
};
use metronome_apps::rtsp::{Mounts, RawMount, RtspService};
use metronome_apps::streams::{ServerConfig, StreamServer};
use metronome_media::raw::{
    Depth, RawFileKind, RawFileSource, RawSource, RawTestPattern, Sampling, VideoFormat,
};
use metronome_media::MediaError;
use metronome_rt::pacing::WaitPolicy;
use metronome_rt::thread::RtPolicy;
use metronome_rt::udp::GsoStatus;
use metronome_rt::url::RtpUrl;
use metronome_sched::SenderType;
use metronome_session::raw::{packets_for, parse_fmtp, MAX_PAYLOAD_LIMIT};
use metronome_wire::sdp::{Connection, MediaDescription, SessionDescription};
use std::fmt::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

type BoxError = Box<dyn std::error::Error>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SamplingArg {
    /// YCbCr-4:2:2
    #[value(name = "422")]
    S422,
    /// YCbCr-4:2:0 (8-bit)
    #[value(name = "420")]
    S420,
    /// RGB (8-bit)
    Rgb,
}

impl From<SamplingArg> for Sampling {
    fn from(s: SamplingArg) -> Sampling {
        match s {
            SamplingArg::S422 => Sampling::Ycbcr422,
            SamplingArg::S420 => Sampling::Ycbcr420,
            SamplingArg::Rgb => Sampling::Rgb,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PacingArg {
    /// The whole frame at its epoch, as fast as the link takes it (GStreamer's udpsink)
    Burst,
    /// ST 2110-21 type N: one packet every TRS over the active part of the frame period
    NarrowGapped,
    /// ST 2110-21 type NL: one packet every TRS over the whole frame period
    NarrowLinear,
    /// ST 2110-21 type W: small groups of packets back to back
    Wide,
}

impl From<PacingArg> for SenderType {
    fn from(p: PacingArg) -> SenderType {
        match p {
            PacingArg::Burst => SenderType::Burst,
            PacingArg::NarrowGapped => SenderType::NarrowGapped,
            PacingArg::NarrowLinear => SenderType::NarrowLinear,
            PacingArg::Wide => SenderType::Wide,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RawFormatArg {
    /// Planar 4:2:0 8-bit (ffmpeg's yuv420p)
    I420,
    /// Packed 4:2:2 8-bit (ffmpeg's uyvy422)
    Uyvy,
    /// Packed 4:2:2 10-bit (ffmpeg's v210)
    V210,
}

fn parse_depth(s: &str) -> Result<Depth, String> {
    s.trim()
        .parse::<u32>()
        .ok()
        .and_then(Depth::from_bits)
        .ok_or_else(|| format!("'{s}' is not a supported depth: 8 or 10"))
}

/// `N` or `N/D` frames per second.
fn parse_fps(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("'{s}' is not a frame rate; write 25 or 30000/1001");
    let (n, d) = s.split_once('/').unwrap_or((s, "1"));
    match (n.trim().parse::<u32>(), d.trim().parse::<u32>()) {
        (Ok(n), Ok(d)) if n > 0 && d > 0 => Ok((n, d)),
        _ => Err(bad()),
    }
}

fn parse_packet_size(s: &str) -> Result<usize, String> {
    let v: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of bytes"))?;
    if !(64..=MAX_PAYLOAD_LIMIT).contains(&v) {
        return Err(format!(
            "{v} bytes: the RTP payload must be 64 to {MAX_PAYLOAD_LIMIT} bytes (1428 fits a \
             1500-byte MTU; larger datagrams are fragmented by the kernel)"
        ));
    }
    Ok(v)
}

/// `serve --raw` options (the source's size, rate, input and loop come from `SourceArgs`).
#[derive(Args, Clone, Debug)]
pub struct RawServeArgs {
    /// Send uncompressed video (RFC 4175): the test pattern at --size and --fps, or -i FILE
    /// (.y4m; or headerless .yuv/.uyvy/.v210, or any name with --raw-format)
    #[arg(long, help_heading = "Raw video (--raw)")]
    pub raw: bool,
    /// Colour sampling of the test pattern (default 422; a file gives its own)
    #[arg(long, value_enum, help_heading = "Raw video (--raw)")]
    pub sampling: Option<SamplingArg>,
    /// Bits per sample of the test pattern: 8 or 10 (10 with 422 only; default 8)
    #[arg(long, value_parser = parse_depth, help_heading = "Raw video (--raw)")]
    pub depth: Option<Depth>,
    /// How each frame's packets are spread: burst, or an ST 2110-21 sender type
    #[arg(
        long,
        value_enum,
        default_value = "narrow-gapped",
        help_heading = "Raw video (--raw)"
    )]
    pub pacing: PacingArg,
    /// RTP payload bytes per packet (1428 fits a 1500-byte MTU; up to 65471, which the kernel
    /// fragments)
    #[arg(long, value_parser = parse_packet_size, default_value = "1428", help_heading = "Raw video (--raw)")]
    pub packet_size: usize,
    /// Pixel format of a headerless input file (default: from its extension)
    #[arg(long, value_enum, help_heading = "Raw video (--raw)")]
    pub raw_format: Option<RawFormatArg>,
    /// Stop after this many frames
    #[arg(long, help_heading = "Raw video (--raw)")]
    pub frames: Option<u64>,
    /// Packets due within this window go out in one GSO send call
    #[arg(long, value_parser = parse_duration, default_value = "20us", help_heading = "Raw video (--raw)")]
    pub batch_window: Duration,
    /// A frame whose send calls start later than this after they were due counts as late
    #[arg(long, value_parser = parse_duration, default_value = "1ms", help_heading = "Raw video (--raw)")]
    pub late_threshold: Duration,
    /// Send with sendmmsg instead of UDP GSO
    #[arg(long, help_heading = "Raw video (--raw)")]
    pub no_gso: bool,
}

/// What a raw stream is, for `recv --raw` and `sdp --raw`.
#[derive(Args, Clone, Debug)]
pub struct RawStreamArgs {
    /// Uncompressed video (RFC 4175) of --size, --fps, --sampling and --depth (an SDP file with
    /// `raw/90000` says all of it)
    #[arg(long, help_heading = "Raw video (--raw)")]
    pub raw: bool,
    /// Frame size (default 640x360, as `serve --raw`)
    #[arg(long, value_parser = parse_size, help_heading = "Raw video (--raw)")]
    pub size: Option<(u32, u32)>,
    /// Frame rate, N or N/D (default 30, as `serve --raw`)
    #[arg(long, value_parser = parse_fps, help_heading = "Raw video (--raw)")]
    pub fps: Option<(u32, u32)>,
    /// Colour sampling (default 422)
    #[arg(long, value_enum, help_heading = "Raw video (--raw)")]
    pub sampling: Option<SamplingArg>,
    /// Bits per sample: 8 or 10 (default 8)
    #[arg(long, value_parser = parse_depth, help_heading = "Raw video (--raw)")]
    pub depth: Option<Depth>,
    /// The sender type: recv judges ST 2110-21 conformance against it (default: the SDP's TP=,
    /// else narrow-gapped); sdp writes it as TP= (default narrow-gapped)
    #[arg(long, value_enum, help_heading = "Raw video (--raw)")]
    pub pacing: Option<PacingArg>,
}

impl RawStreamArgs {
    fn format(&self) -> Result<VideoFormat, BoxError> {
        let (w, h) = self.size.unwrap_or((640, 360));
        let (n, d) = self.fps.unwrap_or((30, 1));
        let sampling = self.sampling.map_or(Sampling::Ycbcr422, Sampling::from);
        Ok(VideoFormat::new(
            w,
            h,
            sampling,
            self.depth.unwrap_or(Depth::Eight),
            n,
            d,
        )?)
    }
}

/// `recv --raw` options.
#[derive(Args, Clone, Debug)]
pub struct RawRecvArgs {
    #[command(flatten)]
    pub stream: RawStreamArgs,
    /// Stop once this many frames have ended (complete, partial or lost)
    #[arg(long, help_heading = "Raw video (--raw)")]
    pub frames: Option<u64>,
    /// Scheduling of the receiving thread: SCHED_FIFO (priority 70, below the pacers) where
    /// permitted, or an ordinary thread
    #[arg(
        long,
        value_enum,
        default_value = "auto",
        help_heading = "Raw video (--raw)"
    )]
    pub rt: RecvRt,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RecvRt {
    Auto,
    Off,
}

// ---------------------------------------------------------------------------------------------
// serve --raw

pub fn serve(a: ServeArgs, stop: Arc<AtomicBool>) -> Result<(), BoxError> {
    if a.rtsp.is_some() {
        return serve_rtsp(a, stop);
    }
    let [dest] = a.destinations.as_slice() else {
        return Err("serve --raw sends to one destination: give one rtp://HOST:PORT".into());
    };
    let destination = RtpUrl::parse_destination(dest)?;
    let (source, live) = open_source(&a)?;
    let format = source.format();
    let model = SenderType::from(a.raw.pacing);
    let cfg = sender_config(&a, destination, &format, live)?;
    let sender = RawSender::open(source, cfg)?;
    let live_line = LiveLine::new(!a.json);
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
    let outcome = sender.run(stop, |s| live_line.show(&status_line(s)))?;
    live_line.finish();
    print_outcome(a.json, &outcome, sender_summary)?;
    Ok(())
}

/// `--config` for a raw server, which reads its RTSP users and certificate only.
fn raw_config(a: &ServeArgs) -> Result<metronome_spec::config::ServeConfig, BoxError> {
    let Some(path) = &a.config else {
        return Ok(Default::default());
    };
    let file = metronome_spec::config::load(path)?;
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
fn serve_rtsp(a: ServeArgs, stop: Arc<AtomicBool>) -> Result<(), BoxError> {
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
    let name = crate::multi::mount_name(a.source.input.as_deref(), "raw");
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
    let server = Arc::new(StreamServer::start(ServerConfig {
        link_capacity_bps: a.link_capacity,
        seed: a.seed.unwrap_or_else(fresh_seed),
        ..ServerConfig::default()
    })?);
    let rc = a.rtsp_config(addr, &raw_config(&a)?);
    let service = RtspService::start(rc, server.clone(), mounts)?;
    eprintln!(
        "metronome: serving {}://{}/{name}: {describe} as {}",
        service.scheme(),
        crate::multi::shown_addr(service.local_addr()),
        model_name(SenderType::from(a.raw.pacing))
    );
    let clock = metronome_rt::clock::Clock::new();
    let start = clock.now();
    let over = |d: Duration| clock.now().saturating_since(start) >= d;
    while !stop.load(Ordering::Relaxed) && !a.duration.is_some_and(over) {
        std::thread::sleep(Duration::from_millis(50));
    }
    service.shutdown();
    Ok(())
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
    let mut cfg = RawSenderConfig::new(destination, (seed ^ (seed >> 29)) as u32, seed);
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
    let tframe = Duration::from_nanos(format.frame_duration_ns());
    let interval = match model {
        SenderType::Burst => tframe,
        _ => (tframe / npackets.max(1) as u32).max(r.batch_window),
    };
    cfg.rt_policy = rt_policy(a.rt, interval);
    cfg.late = a.late;
    cfg.lock_memory = !matches!(a.rt, RtChoice::Off);
    cfg.wait = WaitPolicy::from(a.wait);
    if cfg.wait == WaitPolicy::BusyPoll && matches!(a.rt, RtChoice::Auto) {
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
        let src = metronome_apps::raw::V4l2Source::open(path, Some((w, h, fps)))?;
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

fn warn_buffer(b: &BufferInfo) {
    if let Some(advice) = &b.advice {
        eprintln!("metronome: warning: {advice}");
    }
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
        s.max_late_us
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
    let _ = writeln!(
        s,
        "  sent {} frames, {} packets, {} bytes in {:.2} s ({:.0} packets/s, {:.1} Mbit/s), ended by {}",
        o.frames_sent,
        o.packets_sent,
        o.bytes_sent,
        o.duration_s,
        o.pps,
        o.bitrate_bps / 1e6,
        o.ended_by
    );
    let _ = writeln!(
        s,
        "  late frames {} (send started > {:.0} µs after due), not ready in time {}, send errors {}{}",
        o.late_frames,
        o.late_threshold_us,
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
        o.frame_send_time, o.spread_ms, o.first_packet_offset_ms
    );
    let _ = writeln!(
        s,
        "  CPU {:.3} s ({:.0} µs a frame; pacer {:.3} s, producer {:.3} s)",
        o.cpu_s, o.cpu_per_frame_us, o.pacer_cpu_s, o.producer_cpu_s
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
    for r in &o.receivers {
        let _ = writeln!(s, "    {}", crate::report::receiver_line(r));
    }
    s
}

// ---------------------------------------------------------------------------------------------
// recv --raw

/// `recv --raw rtp://…`.
pub fn recv_url(a: &RecvArgs, stop: &AtomicBool) -> Result<(), BoxError> {
    let source = RtpUrl::parse_source(&a.url)?;
    let st = &a.raw.stream;
    let mut cfg = RawReceiverConfig::new(source, st.format()?);
    cfg.declared = st.pacing.map_or(SenderType::NarrowGapped, SenderType::from);
    receive(a, cfg, stop)
}

/// Whether an SDP media is RFC 4175 raw video.
pub fn is_raw_media(m: &MediaDescription) -> bool {
    m.encoding.eq_ignore_ascii_case("raw")
}

/// `recv FILE.sdp` of raw video: the format from its fmtp, the sender type from `TP=`.
pub fn recv_sdp(
    a: &RecvArgs,
    source: RtpUrl,
    m: &MediaDescription,
    stop: &AtomicBool,
) -> Result<(), BoxError> {
    let Some(f) = m.fmtp.as_deref() else {
        return Err(
            "the SDP's raw video has no a=fmtp line: it must give sampling, width, height and depth (RFC 4175 §6.1)"
                .into(),
        );
    };
    let parsed = parse_fmtp(f).map_err(|e| format!("SDP: {e}"))?;
    let mut cfg = RawReceiverConfig::new(source, parsed.format);
    cfg.payload_type = Some(m.payload_type);
    let tp = f.split(';').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("tp")
            .then(|| parse_model(v))?
    });
    cfg.declared = a
        .raw
        .stream
        .pacing
        .map(SenderType::from)
        .or(tp)
        .unwrap_or(SenderType::NarrowGapped);
    receive(a, cfg, stop)
}

fn receive(a: &RecvArgs, mut cfg: RawReceiverConfig, stop: &AtomicBool) -> Result<(), BoxError> {
    cfg.duration = a.duration;
    cfg.frames = a.raw.frames;
    cfg.output = a.output.clone();
    if a.raw.rt == RecvRt::Off {
        cfg.rt_policy = RtPolicy::Other;
    }
    let shown = cfg.source.to_string();
    let format = cfg.format;
    let rx = RawReceiver::open(cfg)?;
    warn_buffer(&rx.buffer());
    // Said once the socket is bound (and the group joined): a script may start sending now.
    eprintln!("metronome: listening on {shown} for raw video {format}");
    let live = LiveLine::new(true);
    let outcome = rx.run(stop, |line| live.show(line))?;
    live.finish();
    print_outcome(a.json, &outcome, receiver_summary)?;
    Ok(())
}

fn receiver_summary(o: &RawReceiverOutcome) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "raw receiver on {} ({}): {:.2} s, ended by {}; SSRC {}",
        o.source,
        o.format,
        o.duration_s,
        o.ended_by,
        o.ssrc.map_or("none".to_string(), |v| format!("{v:08x}"))
    );
    let _ = writeln!(
        s,
        "  frames: {} complete, {} partial, {} lost",
        o.frames_complete, o.frames_partial, o.frames_lost
    );
    if o.frames_without_capture_time > 0 {
        let _ = writeln!(
            s,
            "  {} complete frames carried no capture time (not a Metronome sender): latency unknown for them",
            o.frames_without_capture_time
        );
    }
    let _ = writeln!(
        s,
        "  latency, capture → complete in memory: {}",
        o.latency_us
    );
    let _ = writeln!(s, "  spread, first → last packet: {}", o.spread_us);
    if let Some(c) = &o.conformance {
        let _ = writeln!(
            s,
            "  ST 2110-21 vs {}: verdict {:?}; Cinst max {} (narrow CMAX {}, wide {}), VRX {}..{} (narrow VRX_FULL {}), {} frames",
            o.declared_model,
            c.verdict,
            c.cinst_max,
            c.narrow.cmax,
            c.wide.cmax,
            c.vrx_min,
            c.vrx_max,
            c.narrow.vrx_full,
            c.frames
        );
    }
    let d = &o.drops;
    let _ = writeln!(
        s,
        "  {} datagrams ({:.0}/s, {:.1} Mbit/s); malformed {}, other SSRC {}, duplicates {}, late {}, truncated {}; socket overflows {}",
        o.packets,
        o.pps,
        o.bitrate_bps / 1e6,
        d.total_malformed,
        d.other_ssrc,
        d.duplicates,
        d.late,
        d.truncated,
        o.rx_overflow
    );
    let _ = writeln!(
        s,
        "  CPU {:.3} s ({:.0} µs a frame); {}; GRO {}; SO_RCVBUF {} of {} bytes",
        o.cpu_s,
        o.cpu_per_frame_us,
        o.realtime,
        if o.gro { "on" } else { "off" },
        o.buffer.accepted,
        o.buffer.wanted
    );
    let _ = writeln!(
        s,
        "  RTCP: {} sender reports heard{}, {} receiver reports sent; RTP packets lost {}, jitter {:.2} ms",
        o.rtcp.sender_reports,
        o.rtcp
            .sender_cname
            .as_deref()
            .map(|c| format!(" (from {c})"))
            .unwrap_or_default(),
        o.rtcp.receiver_reports_sent,
        o.rtcp.packets_lost,
        o.rtcp.jitter_ms
    );
    if o.frames_written > 0 || o.frames_not_written > 0 {
        let _ = writeln!(
            s,
            "  output: {} frames written, {} not written",
            o.frames_written, o.frames_not_written
        );
    }
    if let Some(e) = &o.output_error {
        let _ = writeln!(s, "  output failed: {e}");
    }
    s
}

// ---------------------------------------------------------------------------------------------
// sdp --raw

/// `metronome sdp --raw rtp://HOST:PORT …`: NAME is the destination.
pub fn print_sdp(a: &SdpArgs) -> Result<(), BoxError> {
    let dest = RtpUrl::parse_destination(&a.name)
        .map_err(|e| format!("with --raw, give the destination (rtp://HOST:PORT): {e}"))?;
    let st = &a.raw;
    let model = st.pacing.map_or(SenderType::NarrowGapped, SenderType::from);
    let text = raw_sdp(&st.format()?, model, &dest);
    match &a.output {
        Some(p) => write_file(p, &text)?,
        None => print!("{text}"),
    }
    Ok(())
}

fn write_file(p: &Path, text: &str) -> Result<(), BoxError> {
    std::fs::write(p, text).map_err(|e| format!("cannot write {}: {e}", p.display()).into())
}

/// The SDP of a raw stream to `dest`: `a=rtpmap:96 raw/90000` and the RFC 4175 fmtp, with the
/// ST 2110-21 sender type (`TP=`) when the model is one.
pub fn raw_sdp(format: &VideoFormat, model: SenderType, dest: &RtpUrl) -> String {
    let media = metronome_apps::raw::sdp_media(format, model, dest.addr.port());
    let mut s = SessionDescription::new(crate::sdp::origin_for(dest), 1, "metronome raw video");
    s.connection = Some(Connection::new(
        dest.addr.ip(),
        dest.is_multicast().then(|| dest.ttl_byte()),
    ));
    s.tool = Some(metronome_wire::sdp::TOOL.to_string());
    s.media.push(media);
    s.to_sdp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdp_round_trips_through_the_fmtp_parser() {
        let f = VideoFormat::new(720, 576, Sampling::Ycbcr422, Depth::Eight, 25, 1).unwrap();
        let dest = RtpUrl::parse_destination("rtp://127.0.0.1:5004").unwrap();
        let text = raw_sdp(&f, SenderType::NarrowGapped, &dest);
        assert!(text.contains("a=rtpmap:96 raw/90000"), "{text}");
        assert!(text.contains("TP=2110TPN"), "{text}");
        let sdp = SessionDescription::parse(&text).unwrap();
        let m = &sdp.media[0];
        assert!(is_raw_media(m));
        assert_eq!(parse_fmtp(m.fmtp.as_deref().unwrap()).unwrap().format, f);
        assert!(!raw_sdp(&f, SenderType::Burst, &dest).contains("TP="));
    }

    #[test]
    fn argument_parsers() {
        assert_eq!(parse_fps("30000/1001"), Ok((30000, 1001)));
        assert_eq!(parse_fps("25"), Ok((25, 1)));
        assert!(parse_fps("0").is_err());
        assert_eq!(parse_depth("10"), Ok(Depth::Ten));
        assert!(parse_depth("12").is_err());
        assert!(parse_packet_size("65000").is_ok());
        assert!(parse_packet_size("70000").is_err());
    }
}
