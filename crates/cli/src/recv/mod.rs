//! `metronome recv`: receive, measure, report.
//!
//! What to receive is one of:
//! - `rtp://…`: listen there (see `metronome_rt::url`);
//! - a `.sdp` file: its first media, on its connection address and port (a multicast group is
//!   joined), with the payload type the SDP gives;
//! - `rtsp://HOST[:PORT]/PATH`: DESCRIBE, SETUP (UDP unicast, multicast or TCP interleaved),
//!   PLAY, keep-alives, and TEARDOWN at the end; the URL's `USER:PASSWORD@` answers the
//!   server's challenge; `rtsps://` is the same over TLS.

mod raw;
pub(crate) use raw::RawRecvInterval;

use crate::args::parse_duration;
use crate::recv_quality::{judge, JudgeOptions, LiveQuality, LiveViewer};
use crate::report::{print_outcome, receiver_summary, LiveLine, Output};
use clap::{Args, ValueEnum};
use metronome_apps::receiver::{
    run_datagrams, PayloadSinkHandle, Receiver, ReceiverOutcome, ReceiverRunConfig,
    ReceiverRunConfig as Cfg, RecvError,
};
use metronome_apps::rtsp_client::{
    InterleavedSource, RtspClient, RtspClientConfig, RtspClientError, Transport, TransportRequest,
};
use metronome_quality::playout::LateRule;
use metronome_quality::y4m::Reader;
use metronome_rt::udp::UdpError;
use metronome_rt::url::RtpUrl;
use metronome_session::receiver::PayloadKind;
use metronome_session::srtp::SrtpKey;
use metronome_time::MediaClock;
use metronome_time::Micros;
use metronome_wire::sdp::{Connection, MediaDescription, SessionDescription, MAX_SDP_BYTES};
use metronome_wire::PayloadType;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

type BoxError = Box<dyn std::error::Error>;

// Doc comments here are `--help` text: `[USER:PASSWORD@]` is a URL's syntax, not a link.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Args, Debug)]
pub(crate) struct RecvArgs {
    /// What to receive: rtp://:PORT, rtp://ADDR:PORT, rtp://GROUP:PORT?iface=ADDR (multicast),
    /// an SDP file (FILE.sdp), or an RTSP URL (rtsp://[USER:PASSWORD@]HOST:PORT/PATH, or
    /// rtsps:// over TLS)
    #[arg(value_name = "URL|FILE.sdp")]
    pub url: String,
    /// Stop after this long (seconds, or 500ms, 2s)
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many RTP packets
    #[arg(long)]
    pub packets: Option<u64>,
    /// Write a per-packet CSV trace
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Save the received MPEG-TS
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print JSON only on stdout: the summary at the end; with --interval, JSON lines (each
    /// interval, then the summary, one line each)
    #[arg(long)]
    pub json: bool,
    /// Accept any payload type, not only MPEG-TS (RFC 2250)
    #[arg(long)]
    pub any_payload: bool,
    /// Print a line per interval on stdout (packets, rate, loss, jitter over the interval;
    /// frames with --raw), as iperf3 does, e.g. --interval 1s: text, or a JSON line with
    /// --json; the summary still comes at the end. On a terminal, without --json: 1s unless
    /// given; 0 turns the lines off (a status line rewritten in place instead)
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Option<Duration>,
    /// Run a rate controller's receiving end and send its feedback in RTCP, matching the
    /// sender's `serve --cc`: tfrc (RFC 5348's reports), tfmcc (RFC 4654's), gcc (RFC 8888
    /// feedback every 50 ms); asmp and fixed need only the receiver reports every receiver sends
    #[arg(long, value_parser = crate::args::controller_names(), value_name = "CONTROLLER")]
    pub cc: Option<String>,
    /// Track up to this many sources (SSRCs) on the port, each measured on its own
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_sources: u32,
    /// Ask for lost packets (RTCP generic NACK, RFC 4585) and take their retransmissions
    /// (RFC 4588), which come with this payload type (the SDP's `rtx` one): only packets a
    /// retransmission can still bring within --playout-delay are asked for
    #[arg(long, value_name = "PT", value_parser = clap::value_parser!(u8).range(96..=127))]
    pub rtx_pt: Option<u8>,
    /// Rebuild lost packets from SMPTE 2022-1 FEC (row and column XOR, as `serve`'s
    /// `repair=fec` and GStreamer's `rtpst2022-1-fecenc` send it), taken on the media's
    /// port + 2 (columns) and + 4 (rows)
    #[arg(long)]
    pub fec: bool,
    /// With --rtx-pt or --fec, or an SDP that announces retransmission (`a=rtpmap:PT
    /// rtx/...`): how long after the fastest packet a packet is still of use (the viewer's
    /// play-out delay, as a jitter buffer's latency; seconds, or 200ms) [default: 200ms]
    #[arg(long, value_parser = parse_duration)]
    pub playout_delay: Option<Duration>,
    /// For rtsp:// URLs: how the media comes (UDP to ports bound here, the server's multicast
    /// group, or interleaved on the RTSP connection)
    #[arg(long, value_enum, default_value_t = RtspTransport::Udp)]
    pub rtsp_transport: RtspTransport,
    /// For rtsps:// URLs: trust the server's certificate by the CA certificates in this PEM
    /// file (a private CA, or a self-signed server's own certificate) instead of the system's
    #[arg(long, value_name = "FILE")]
    pub rtsp_tls_ca: Option<std::path::PathBuf>,
    /// The interface (its IPv4 address) to join a multicast group on, for an SDP file or RTSP
    /// multicast. Default: for RTSP, the interface of the RTSP connection; else the kernel's
    /// choice
    #[arg(long, value_name = "ADDR")]
    pub iface: Option<Ipv4Addr>,
    /// Judge what a viewer saw against this reference video (.y4m, 4:2:0, the source before
    /// encoding): the frames that arrived whole (H.264 in MPEG-TS; from an SDP, MPEG-4 Part 2
    /// or H.264 straight over RTP), decoded by FFmpeg's decoder, each display slot against the
    /// reference's frame (PSNR, SSIM, MOS), frames lost by type, cumulative jitter
    #[arg(long, value_name = "REFERENCE.y4m")]
    pub quality: Option<PathBuf>,
    /// With --quality: write one CSV row per display slot here
    #[arg(long, value_name = "FILE", requires = "quality")]
    pub quality_frames: Option<PathBuf>,
    /// With --quality: write the video as the viewer saw it here, every display slot (.y4m,
    /// or raw planar 4:2:0 for .yuv)
    #[arg(long, value_name = "FILE", requires = "quality")]
    pub shown: Option<PathBuf>,
    /// With --quality: the viewer's play-out deadline (a player's buffer: slot j is on screen
    /// at the first frame's arrival plus j frames plus this), e.g. 150ms
    #[arg(long, value_parser = parse_duration, requires = "quality")]
    pub playout_deadline: Option<Duration>,
    /// With --playout-deadline: a frame late for its slot is shown at a later slot if it is
    /// then the newest arrived (newest, seed 002), or is lost (drop, Evalvid's stricter rule)
    #[arg(long, value_enum, default_value_t = LateFrames::Newest, requires = "quality")]
    pub late_frames: LateFrames,
    /// With --quality: reference frames to skip before the first frame received (a receiver
    /// that joined a running stream)
    #[arg(long, default_value_t = 0, requires = "quality")]
    pub reference_start: u64,
    #[command(flatten)]
    pub raw: crate::raw_args::RawRecvArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LateFrames {
    Newest,
    Drop,
}

impl From<LateFrames> for LateRule {
    fn from(l: LateFrames) -> LateRule {
        match l {
            LateFrames::Newest => LateRule::NewestArrived,
            LateFrames::Drop => LateRule::Drop,
        }
    }
}

/// The live viewer of `--quality`, shared with the receiving thread.
type Viewer = Option<Arc<std::sync::Mutex<LiveViewer>>>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum RtspTransport {
    Udp,
    Tcp,
    Multicast,
}

pub(crate) fn run(mut a: RecvArgs, stop: Arc<AtomicBool>) -> Result<(), BoxError> {
    a.interval = crate::report::interval_wanted(a.interval, a.json, true);
    let scheme = a.url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    if matches!(scheme.as_deref(), Some("rtsp" | "rtsps")) {
        return run_rtsp(&a, &stop);
    }
    if is_sdp_file(&a.url) {
        return run_sdp(&a, &stop);
    }
    if a.raw.stream.raw {
        return raw::recv_url(&a, &stop);
    }
    let url = RtpUrl::parse_source(&a.url)?;
    let (mut cfg, viewer) = config(&a, url)?;
    if a.any_payload {
        cfg.session.payload = PayloadKind::Any;
    }
    let receiver = Receiver::open(cfg)?;
    // Said once the sockets are bound (and the group joined): a script may start sending now.
    eprintln!("metronome: listening on {}", a.url);
    let outcome = run_receiver(&a, receiver, &stop);
    finish(&a, outcome?, viewer)
}

/// Runs `receiver` until it stops: with `--interval`, a line on stdout each interval (the
/// receiver's status comes that often, `config`); without, the live status line on a terminal.
fn run_receiver(
    a: &RecvArgs,
    receiver: Receiver,
    stop: &AtomicBool,
) -> Result<ReceiverOutcome, RecvError> {
    let live = LiveLine::new(a.interval.is_none());
    let outcome = receiver.run(stop, on_status(a, &live));
    live.finish();
    outcome
}

/// What a receiver does with its session and the time since its start, at each status.
type OnStatus<'a> = dyn FnMut(&metronome_session::receiver::ReceiverSession, Duration) + 'a;

/// What a receiver does with each status: with `--interval`, a line on stdout; without, the
/// live status line on a terminal.
fn on_status<'a>(a: &RecvArgs, live: &'a LiveLine) -> Box<OnStatus<'a>> {
    match a.interval {
        Some(_) => Box::new(interval_lines(Output::of(a.json, true))),
        None => Box::new(live_status(live)),
    }
}

/// How often a receiver says how it goes: each `--interval`, at least 10 ms apart.
fn status_every(a: &RecvArgs) -> Option<Duration> {
    a.interval.map(|every| every.max(Duration::from_millis(10)))
}

/// A `.sdp` path, or any existing file that is not a URL.
fn is_sdp_file(s: &str) -> bool {
    !s.contains("://") && (s.to_ascii_lowercase().ends_with(".sdp") || Path::new(s).is_file())
}

/// The run configuration every mode shares, and the live viewer of `--quality`.
fn config(a: &RecvArgs, source: RtpUrl) -> Result<(ReceiverRunConfig, Viewer), BoxError> {
    let mut cfg = ReceiverRunConfig::new(source);
    if let Some(every) = status_every(a) {
        cfg.status_every = every;
    }
    cfg.duration = a.duration;
    cfg.packets = a.packets;
    cfg.trace = a.trace.clone();
    cfg.output = a.output.clone();
    cfg.session.ssrc = metronome_wire::Ssrc(crate::serve::fresh_seed() as u32);
    cfg.session.max_sources = a.max_sources as usize;
    cfg.session.cc =
        a.cc.as_deref()
            .and_then(metronome_cc::ControllerKind::from_name)
            .unwrap_or_default()
            .receiver();
    cfg.session.repair = viewer_repair(a, a.rtx_pt.map(PayloadType));
    if a.playout_delay.is_some() && a.rtx_pt.is_none() && !a.fec && !is_sdp_file(&a.url) {
        eprintln!(
            "metronome: --playout-delay is what repairs must make, and none are asked for: add --rtx-pt PT (the SDP's rtx payload type) or --fec"
        );
    }
    let viewer = match &a.quality {
        Some(reference) => {
            // Refused now rather than after the stream: the reference must be readable.
            open_reference(reference)?;
            let v = Arc::new(std::sync::Mutex::new(LiveViewer::default()));
            cfg.sink = Some(PayloadSinkHandle(v.clone()));
            Some(v)
        }
        None => None,
    };
    Ok((cfg, viewer))
}

fn open_reference(p: &Path) -> Result<Reader<std::io::BufReader<std::fs::File>>, BoxError> {
    let f = std::fs::File::open(p).map_err(|e| {
        format!(
            "--quality {}: {e}. Give the reference video as Y4M (ffmpeg -i SOURCE -pix_fmt yuv420p ref.y4m)",
            p.display()
        )
    })?;
    Ok(Reader::y4m(std::io::BufReader::with_capacity(1 << 16, f))
        .map_err(|e| format!("--quality {}: {e}", p.display()))?)
}

/// What the viewer repairs: retransmissions on `rtx_pt`, FEC with --fec, both, or nothing.
fn viewer_repair(
    a: &RecvArgs,
    rtx_pt: Option<PayloadType>,
) -> Option<metronome_session::receiver::ReceiverRepair> {
    use metronome_session::receiver::ReceiverRepair;
    match (rtx_pt, a.fec) {
        (Some(pt), false) => Some(ReceiverRepair::new(pt, playout_delay(a))),
        (Some(pt), true) => Some(ReceiverRepair::new(pt, playout_delay(a)).with_fec()),
        (None, true) => Some(ReceiverRepair::fec(playout_delay(a))),
        (None, false) => None,
    }
}

/// The viewer's play-out delay that repairs must make: --playout-delay, or GStreamer's
/// `rtpjitterbuffer` latency.
fn playout_delay(a: &RecvArgs) -> Duration {
    a.playout_delay
        .unwrap_or(metronome_config::repair::DEFAULT_PLAYOUT_DELAY)
}

/// Measures what the SDP says comes: MPEG-TS (payload type 33) with its checks, anything else
/// in any-payload mode, on the media's clock.
fn apply_media(cfg: &mut Cfg, a: &RecvArgs, m: &MediaDescription) {
    let mp2t = m.is_mp2t() && m.payload_type == PayloadType::MP2T && !a.any_payload;
    cfg.session.payload = if mp2t {
        PayloadKind::Mp2t
    } else {
        PayloadKind::Any
    };
    cfg.session.clock = MediaClock::new(m.clock_rate);
    if let Some(repair) = announced_repair(a, m) {
        cfg.session.repair = Some(repair);
    }
    let judged = a.quality.is_some() && coded_video(m).is_some();
    if !mp2t && !a.any_payload && !judged {
        eprintln!(
            "metronome: payload type {} is {}/{}, not MPEG-TS: measuring RTP only (any-payload mode)",
            m.payload_type, m.encoding, m.clock_rate
        );
    }
}

/// What an SDP that announces retransmission (RFC 4588's `rtx`, `apt=` this media) has the
/// viewer repair: lost packets asked for as --rtx-pt would, unless --rtx-pt says otherwise;
/// where it pairs the retransmission's SSRC with the media's (`a=ssrc-group:FID`), only that
/// SSRC's retransmissions are taken.
fn announced_repair(
    a: &RecvArgs,
    m: &MediaDescription,
) -> Option<metronome_session::receiver::ReceiverRepair> {
    let r = m.retransmission.filter(|_| a.rtx_pt.is_none())?;
    let repair = viewer_repair(a, Some(r.payload_type))?;
    Some(metronome_session::receiver::ReceiverRepair {
        rtx_ssrc: r.ssrc,
        ..repair
    })
}

/// The codec of coded video straight over RTP that `--quality` judges: MP4V-ES (RFC 6416) or
/// H.264 (RFC 6184).
fn coded_video(m: &MediaDescription) -> Option<metronome_media::decode::VideoCodec> {
    use metronome_media::decode::VideoCodec;
    if m.encoding.eq_ignore_ascii_case("MP4V-ES") {
        Some(VideoCodec::Mpeg4Part2)
    } else if m.encoding.eq_ignore_ascii_case("H264") {
        Some(VideoCodec::H264)
    } else {
        None
    }
}

/// A line per status call (`--interval`, one each interval from the start, and a last,
/// shorter one at the end): what the main source added since the last one (nothing yet: no
/// line), over the time that passed.
fn interval_lines(
    out: Output,
) -> impl FnMut(&metronome_session::receiver::ReceiverSession, Duration) {
    // (received, payload bytes, lost) and the time at the previous status.
    let mut last = (0u64, 0u64, 0u64);
    let mut since = Duration::ZERO;
    move |s, elapsed| {
        let at = std::mem::replace(&mut since, elapsed).as_secs_f64();
        let Some(src) = s.main_source() else { return };
        let m = metronome_session::receiver::SourceSummary::of(src, s.config().clock.rate());
        let (r0, b0, l0) = last;
        let now = elapsed.as_secs_f64();
        if now - at < 1e-3 && (m.received, m.lost) == (r0, l0) {
            // The end came right after a status, and nothing with it: no line of no time.
            return;
        }
        let span = (now - at).max(1e-9);
        crate::report::interval_line(
            out,
            at,
            now,
            RecvInterval {
                packets: m.received.saturating_sub(r0),
                payload_bytes: m.payload_bytes.saturating_sub(b0),
                bitrate_bps: m.payload_bytes.saturating_sub(b0) as f64 * 8.0 / span,
                lost: m.lost.saturating_sub(l0),
                jitter_us: m.jitter_us,
                ssrc: m.ssrc.clone(),
            },
        );
        last = (m.received, m.payload_bytes, m.lost);
    }
}

/// What the main source added over one `--interval`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct RecvInterval {
    /// RTP packets received.
    pub packets: u64,
    /// Their payload, bytes.
    pub payload_bytes: u64,
    /// The payload's rate over the interval, bit/s.
    pub bitrate_bps: f64,
    /// Packets lost (RFC 3550's count: expected less received).
    pub lost: u64,
    /// RFC 3550's interarrival jitter at the interval's end.
    pub jitter_us: Micros,
    /// The source's SSRC, 8 lowercase hex digits.
    #[schemars(with = "metronome_time::units::Hex32")]
    pub ssrc: String,
}

fn live_status(
    live: &LiveLine,
) -> impl FnMut(&metronome_session::receiver::ReceiverSession, Duration) + '_ {
    move |s, _| live.show(&s.status_line())
}

/// The receiver's outcome, with what the viewer saw (`--quality`).
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct Judged<'a> {
    #[serde(flatten)]
    outcome: &'a ReceiverOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    quality: Option<LiveQuality>,
}

fn finish(a: &RecvArgs, outcome: ReceiverOutcome, viewer: Viewer) -> Result<(), BoxError> {
    let quality = match (viewer, &a.quality) {
        (Some(v), Some(reference)) => Some(judge_run(a, &v, reference)?),
        _ => None,
    };
    let judged = Judged {
        outcome: &outcome,
        quality,
    };
    print_outcome(Output::of(a.json, a.interval.is_some()), &judged, |j| {
        let mut s = receiver_summary(j.outcome);
        if let Some(q) = &j.quality {
            s.push_str(&crate::recv_quality::human(q));
        }
        s
    })?;
    nothing_arrived(a, &outcome)
}

/// A run that received no RTP packet is a failure (a script or a service manager should see
/// it), after its summary: the sender, the address or a firewall is wrong.
fn nothing_arrived(a: &RecvArgs, outcome: &ReceiverOutcome) -> Result<(), BoxError> {
    let c = &outcome.receiver.counters;
    if c.rtp_packets > 0 {
        return Ok(());
    }
    let other = match (c.datagrams, outcome.srtp_rejected_datagrams) {
        (0, 0) => String::new(),
        (0, n) => format!(
            " ({n} datagrams came that did not authenticate as SRTP: is the SDP's a=crypto key \
             the sender's?)"
        ),
        (n, _) => {
            format!(" ({n} datagrams came that were not RTP packets of the stream; see counters)")
        }
    };
    Err(format!(
        "no RTP packet arrived from {} in {:.1} s{other}: check that the sender sends to this \
         address and port (for a multicast group, that it is routed to this interface)",
        a.url,
        outcome.duration_us.as_secs_f64()
    )
    .into())
}

fn judge_run(
    a: &RecvArgs,
    viewer: &std::sync::Mutex<LiveViewer>,
    reference: &Path,
) -> Result<LiveQuality, BoxError> {
    let reader = open_reference(reference)?;
    let mut csv = match &a.quality_frames {
        Some(p) => {
            let f = std::fs::File::create(p)
                .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
            let mut w = std::io::BufWriter::new(f);
            writeln!(w, "{}", crate::recv_quality::FRAMES_HEADER)
                .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
            Some(w)
        }
        None => None,
    };
    let opts = JudgeOptions {
        deadline_ns: a.playout_deadline.map(|d| d.as_nanos() as u64),
        late: a.late_frames.into(),
        reference_start: a.reference_start,
    };
    let mut shown = match &a.shown {
        Some(p) => Some(std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(p).map_err(|e| format!("cannot write {}: {e}", p.display()))?,
        )),
        None => None,
    };
    let raw = a
        .shown
        .as_ref()
        .is_some_and(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("yuv")));
    let mut viewer = viewer.lock().unwrap_or_else(|e| e.into_inner());
    let q = judge(
        &mut viewer,
        reader,
        &reference.display().to_string(),
        opts,
        csv.as_mut().map(|w| w as &mut dyn Write),
        shown.as_mut().map(|w| crate::recv_quality::ShownVideo {
            out: w as &mut dyn Write,
            y4m: !raw,
        }),
    )?;
    if let (Some(mut w), Some(p)) = (shown, &a.shown) {
        w.flush()
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    if let (Some(mut w), Some(p)) = (csv, &a.quality_frames) {
        w.flush()
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(q)
}

fn run_sdp(a: &RecvArgs, stop: &AtomicBool) -> Result<(), BoxError> {
    let path = a.url.as_str();
    let sdp = read_sdp(path)?;
    let Some(m) = sdp.media.first() else {
        return Err(format!("{path}: no m= line: the SDP describes no media to receive").into());
    };
    if sdp.media.len() > 1 {
        eprintln!(
            "metronome: {path} has {} media; receiving the first (m={} {})",
            sdp.media.len(),
            m.media,
            m.port
        );
    }
    if m.port == 0 {
        return Err(format!(
            "{path}: the media's port is 0, as in an RTSP DESCRIBE answer: receive it with metronome recv rtsp://SERVER/PATH"
        )
        .into());
    }
    let Some(c) = m.connection_or(&sdp) else {
        return Err(format!(
            "{path}: no c= line for the media or the session: add one, e.g. c=IN IP4 127.0.0.1"
        )
        .into());
    };
    let at = SocketAddr::new(c.addr, m.port);
    let url = if c.addr.is_multicast() {
        RtpUrl::multicast(at, a.iface)
    } else {
        // 0.0.0.0 / ::, loopback or an address of this machine: listen there.
        if let Err(e) = std::net::UdpSocket::bind(SocketAddr::new(c.addr, 0)) {
            if e.kind() == std::io::ErrorKind::AddrNotAvailable {
                return Err(format!(
                    "{path}: c= address {} is neither a multicast group nor an address of this machine: the SDP describes a stream sent to another host",
                    c.addr
                )
                .into());
            }
        }
        RtpUrl::unicast(at)
    };
    let srtp = m
        .crypto
        .as_deref()
        .map(SrtpKey::from_crypto_attribute)
        .transpose()
        .map_err(|e| format!("{path}: {e}"))?;
    if raw::is_raw_media(m) {
        if srtp.is_some() {
            return Err(
                format!("{path}: SRTP is read for MPEG-TS and coded video, not raw video").into(),
            );
        }
        return raw::recv_sdp(a, url, m, stop);
    }
    let (mut cfg, viewer) = config(a, url)?;
    apply_media(&mut cfg, a, m);
    cfg.srtp = srtp;
    if let (Some(v), Some(codec)) = (&viewer, coded_video(m)) {
        let config = m
            .fmtp
            .as_deref()
            .and_then(|f| metronome_media::payload::depay::config_of_fmtp(codec, f));
        *v.lock().unwrap_or_else(|e| e.into_inner()) = LiveViewer::coded(codec, config);
    }
    let receiver = Receiver::open(cfg).map_err(|e| format!("{path}: {e}"))?;
    eprintln!(
        "metronome: listening on {url} (from {path}: {} payload type {})",
        m.encoding, m.payload_type
    );
    let outcome = run_receiver(a, receiver, stop)?;
    if outcome.srtp_rejected_datagrams > 0 && outcome.receiver.counters.rtp_packets > 0 {
        eprintln!(
            "metronome: {} datagrams did not authenticate as SRTP and were dropped: is the \
             SDP's a=crypto key the sender's?",
            outcome.srtp_rejected_datagrams
        );
    }
    finish(a, outcome, viewer)
}

fn read_sdp(path: &str) -> Result<SessionDescription, BoxError> {
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut text = String::new();
    f.take(MAX_SDP_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {path}: {e} (an SDP is UTF-8 text)"))?;
    Ok(SessionDescription::parse(&text).map_err(|e| format!("{path}: {e}"))?)
}

fn run_rtsp(a: &RecvArgs, stop: &Arc<AtomicBool>) -> Result<(), BoxError> {
    let cfg = RtspClientConfig {
        tls_ca: a.rtsp_tls_ca.clone(),
        ..RtspClientConfig::default()
    };
    let mut client = RtspClient::connect(&a.url, &cfg)?;
    if let Err(e) = client.options() {
        // A server that does not answer OPTIONS may still DESCRIBE; anything else is fatal.
        if !matches!(e.status(), Some(405 | 501)) {
            return Err(e.into());
        }
    }
    let d = client.describe()?;
    let m = d.sdp.media[0].clone();
    let media_url = d.media_url(0)?;
    let aggregate = d.aggregate_url();
    let shown = client.url().to_string();
    // Where RTP comes in is only known once bound (UDP) or set up (multicast).
    let (mut cfg, viewer) = config(a, RtpUrl::unicast(SocketAddr::new(unspecified(&m), 0)))?;
    apply_media(&mut cfg, a, &m);
    // The session's stream is over when its sender says BYE (a file played to its end).
    cfg.end_on_bye = true;
    match a.rtsp_transport {
        RtspTransport::Udp => {
            let (receiver, port) = open_even_port(&cfg)?;
            let reply = client.setup(&media_url, TransportRequest::Udp { rtp_port: port })?;
            client.play(&aggregate)?;
            eprintln!(
                "metronome: listening on rtp://:{port} for {shown} (RTSP session {}, UDP{})",
                reply.session,
                match reply.transport {
                    Transport::Udp {
                        server_rtp_port: Some(p),
                        ..
                    } => format!(" from server port {p}"),
                    _ => String::new(),
                }
            );
            receive_udp(a, client, receiver, stop, viewer)
        }
        RtspTransport::Multicast => {
            let reply = client.setup(&media_url, TransportRequest::Multicast)?;
            let Transport::Multicast {
                group, rtp_port, ..
            } = reply.transport
            else {
                return Err(format!("{shown}: SETUP did not give a multicast group").into());
            };
            let iface = a.iface.or(match client.local_addr().map(|l| l.ip()) {
                Some(IpAddr::V4(v4)) => Some(v4),
                _ => None,
            });
            cfg.source = RtpUrl::multicast(SocketAddr::new(group, rtp_port), iface);
            let receiver = Receiver::open(cfg)?;
            client.play(&aggregate)?;
            eprintln!(
                "metronome: listening on {} for {shown} (RTSP session {}, multicast)",
                SocketAddr::new(group, rtp_port),
                reply.session
            );
            receive_udp(a, client, receiver, stop, viewer)
        }
        RtspTransport::Tcp => {
            let reply = client.setup(&media_url, TransportRequest::Tcp)?;
            let Transport::Interleaved {
                rtp_channel,
                rtcp_channel,
            } = reply.transport
            else {
                return Err(format!("{shown}: SETUP did not give interleaved channels").into());
            };
            client.play(&aggregate)?;
            eprintln!(
                "metronome: listening on {shown} (RTSP session {}, TCP interleaved channels {rtp_channel}-{rtcp_channel})",
                reply.session
            );
            let mut src = InterleavedSource::new(client, rtp_channel, rtcp_channel);
            let live = LiveLine::new(a.interval.is_none());
            let outcome = run_datagrams(&cfg, &mut src, stop, on_status(a, &live));
            live.finish();
            let mut client = src.into_client();
            if let Err(e) = client.teardown() {
                eprintln!("metronome: warning: {e}");
            }
            finish(a, outcome?, viewer)
        }
    }
}

/// Receives on UDP while a thread keeps the RTSP session alive; TEARDOWN at the end. The run
/// ends on `stop` (SIGTERM, Ctrl-C), at its duration, or when the server ends the session
/// (closes the connection, after its BYE), as over TCP.
fn receive_udp(
    a: &RecvArgs,
    client: RtspClient,
    receiver: Receiver,
    stop: &Arc<AtomicBool>,
    viewer: Viewer,
) -> Result<(), BoxError> {
    // `halt` ends the receiver: set by the keep-alive thread when the session ends, and by the
    // watcher when `stop` is.
    let halt = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let (d, h) = (done.clone(), halt.clone());
    let keeper = std::thread::Builder::new()
        .name("rtsp-keepalive".into())
        .spawn(move || {
            let r = client.keep_alive_until(&d);
            h.store(true, Ordering::Relaxed);
            r
        })?;
    let (s, h, d) = (stop.clone(), halt.clone(), done.clone());
    let watcher = std::thread::Builder::new()
        .name("stop-watch".into())
        .spawn(move || {
            while !d.load(Ordering::Relaxed) && !h.load(Ordering::Relaxed) {
                if s.load(Ordering::Relaxed) {
                    h.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })?;
    let outcome = run_receiver(a, receiver, &halt);
    done.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    match keeper.join() {
        Ok(Ok(())) => {}
        Ok(Err(RtspClientError::Closed { .. })) => {
            eprintln!("metronome: the server ended the RTSP session (it closed the connection)")
        }
        Ok(Err(e)) => eprintln!("metronome: warning: {e}"),
        Err(_) => eprintln!("metronome: warning: the RTSP keep-alive thread panicked"),
    }
    finish(a, outcome?, viewer)
}

fn unspecified(m: &MediaDescription) -> IpAddr {
    m.connection.map_or(Ipv4Addr::UNSPECIFIED.into(), |c| {
        Connection::unspecified_like(c.addr).addr
    })
}

/// Binds the receiver on an even port with its RTCP neighbour (RFC 3550 §11), as
/// `client_port=P-(P+1)` promises.
fn open_even_port(cfg: &Cfg) -> Result<(Receiver, u16), RecvError> {
    let ip = cfg.source.addr.ip();
    const ATTEMPTS: usize = 32;
    for attempt in 1..=ATTEMPTS {
        let probe = std::net::UdpSocket::bind(SocketAddr::new(ip, 0))
            .map_err(|e| RecvError::Io(ip.to_string(), e))?;
        let port = probe
            .local_addr()
            .map_err(|e| RecvError::Io(ip.to_string(), e))?
            .port()
            & !1;
        drop(probe);
        if port < 1024 || port == u16::MAX - 1 {
            continue;
        }
        let mut c = cfg.clone();
        c.source = RtpUrl::unicast(SocketAddr::new(ip, port));
        match Receiver::open(c) {
            Ok(r) => return Ok((r, port)),
            Err(RecvError::Udp(UdpError::Bind { .. })) if attempt < ATTEMPTS => continue,
            Err(e) => return Err(e),
        }
    }
    Err(RecvError::Io(
        ip.to_string(),
        std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!("no free even/odd UDP port pair found in {ATTEMPTS} tries"),
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use metronome_wire::sdp::SessionDescription;
    use metronome_wire::Ssrc;

    #[derive(Parser)]
    struct Line {
        #[command(flatten)]
        recv: RecvArgs,
    }

    fn args(extra: &[&str]) -> RecvArgs {
        let line = ["recv", "cam.sdp"].iter().chain(extra);
        Line::try_parse_from(line).unwrap().recv
    }

    /// The SDP of a stream declared with `repair=rtx,ssrc=305419896`, as `metronome sdp`
    /// writes it.
    const PAIRED: &str = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=cam\r\nc=IN IP4 127.0.0.1\r\n\
        t=0 0\r\nm=video 5004 RTP/AVPF 33 97\r\na=rtpmap:33 MP2T/90000\r\n\
        a=rtcp-fb:33 nack\r\na=rtpmap:97 rtx/90000\r\na=fmtp:97 apt=33;rtx-time=200\r\n\
        a=ssrc-group:FID 305419896 1080036984\r\n\
        a=ssrc:305419896 cname:metronome-12345678-cam\r\n\
        a=ssrc:1080036984 cname:metronome-12345678-cam\r\n";

    #[test]
    fn an_sdp_that_pairs_the_retransmissions_has_only_their_ssrc_taken() {
        let sdp = SessionDescription::parse(PAIRED).unwrap();
        let repair = announced_repair(&args(&[]), &sdp.media[0]).unwrap();
        assert_eq!(repair.rtx_payload_type, Some(PayloadType(97)));
        assert_eq!(repair.rtx_ssrc, Some(Ssrc(1_080_036_984)));
        // Without the pairing, any SSRC's; with --rtx-pt, what the user said.
        let unpaired = PAIRED.replace("a=ssrc-group:FID 305419896 1080036984\r\n", "");
        let sdp = SessionDescription::parse(&unpaired).unwrap();
        let repair = announced_repair(&args(&[]), &sdp.media[0]).unwrap();
        assert_eq!(repair.rtx_ssrc, None);
        assert!(announced_repair(&args(&["--rtx-pt", "98"]), &sdp.media[0]).is_none());
    }
}
