//! `metronome serve`: one source, paced, to one or more RTP destinations.

mod declared;
mod raw;
pub(crate) use raw::RawServeInterval;
mod reload;
mod streams;

use crate::args::{parse_bytes, parse_duration, parse_late, parse_prefix, parse_rate, SourceArgs};
use crate::report::{print_outcome, sender_status, sender_summary, LiveLine, Output};
use clap::Args;
use metronome_apps::sender::{run_sender, SenderConfig};
use metronome_apps::streams::GivenSource;
use metronome_apps::streams::{parse_cpus, parse_share, CoreRt, SchedKind};
use metronome_config::scenario::RtpCc;
use metronome_rt::pacing::WaitPolicy;
use metronome_rt::thread::RtPolicy;
use metronome_rt::url::RtpUrl;
use metronome_sched::{LatePolicy, OverloadPolicy};
use metronome_time::Micros;
use metronome_wire::rtp::{SendTimeExt, ABS_SEND_TIME_URI, SEND_TIME_EXT_ID};
use metronome_wire::sdp::{MediaDescription, SessionDescription};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// `--overload`'s values: the policies' own names, listed in `--help`.
fn overload_choice() -> impl clap::builder::TypedValueParser<Value = OverloadPolicy> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(OverloadPolicy::CHOICES)
        .try_map(|s| s.parse::<OverloadPolicy>())
}

/// `--rt`'s values, listed in `--help`.
fn rt_choice() -> impl clap::builder::TypedValueParser<Value = CoreRt> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(CoreRt::CHOICES).try_map(|s| s.parse::<CoreRt>())
}

/// `--wait`'s values, listed in `--help`.
fn wait_choice() -> impl clap::builder::TypedValueParser<Value = WaitPolicy> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(WaitPolicy::CHOICES)
        .try_map(|s| s.parse::<WaitPolicy>())
}

#[derive(Args, Clone, Debug)]
pub(crate) struct ServeArgs {
    /// Destinations: rtp://HOST:PORT, or rtp://GROUP:PORT?ttl=1&iface=ADDR for multicast
    #[arg(value_name = "URL", default_value = "rtp://127.0.0.1:5004")]
    pub destinations: Vec<String>,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub coded: crate::coded::CodedArgs,
    /// Write the stream's SDP here before its first packet (its first destination's), for
    /// ffplay, VLC, GStreamer's sdpdemux or `metronome recv FILE.sdp`
    #[arg(long, value_name = "FILE")]
    pub sdp: Option<PathBuf>,
    /// Stop after this long (seconds, or 500ms, 2s); default: until the input ends or Ctrl-C
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Stamp each packet's send time in an RTP header extension, so receivers measure one-way delay
    #[arg(long)]
    pub send_time: bool,
    /// Real-time policy of the pacing thread: SCHED_FIFO where permitted (auto), SCHED_FIFO
    /// priority 80 (fifo), SCHED_DEADLINE with a budget sized for the packet rate (deadline),
    /// or an ordinary thread (off) [default: auto; config: rt]
    #[arg(long, value_parser = rt_choice())]
    pub rt: Option<CoreRt>,
    /// How the pacer waits between packets: sleep then spin; spin the whole way (keeps a core
    /// busy); or auto, which busy-polls only while sleeping makes more than 1% of packets late
    /// [default: auto; config: wait]
    #[arg(long, value_parser = wait_choice())]
    pub wait: Option<WaitPolicy>,
    /// Pin the pacing thread to this CPU [config: cpu]
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Packets buffered between producer and pacer
    #[arg(long, default_value_t = 1024)]
    pub ring: usize,
    /// After a stall (the pacer was preempted, the producer fell behind), packets keep the
    /// time their RTP timestamp names and are: caught up at a multiple of the stream's rate
    /// (`catch-up`, `catch-up=3`), or dropped when later than a limit (`drop-late`,
    /// `drop-late=20ms`). The schedule itself never shifts, and a dropped packet takes no
    /// sequence number. Default: `catch-up` for MPEG-TS; for `--raw`, a frame that would
    /// start a frame period late is dropped whole [config: late]
    #[arg(long, value_parser = parse_late, value_name = "POLICY")]
    pub late: Option<LatePolicy>,
    /// Write the sender's frame trace here at the end: every video frame's number, type, size,
    /// RTP packets (by sequence number, extended from the first packet's) and send time (its
    /// first packet's release, Unix ns); Metronome's CSV, or Evalvid's `st` for a .st file
    #[arg(long, value_name = "FILE")]
    pub frame_trace: Option<PathBuf>,
    /// Rate control: fixed (the source's rate), tfrc (RFC 5348, one receiver), tfmcc (RFC 4654,
    /// a multicast group), asmp (receiver reports only) or gcc (WebRTC's, one receiver, from
    /// RFC 8888 feedback); receivers run the receiving end with `metronome recv --cc`. The
    /// test source follows at its next GOP, up to --max-bitrate
    #[arg(long, value_parser = crate::args::controller_names(), value_name = "CONTROLLER")]
    pub cc: Option<String>,
    /// The most a rate controller may raise the stream to (default: the starting rate)
    #[arg(long, value_parser = parse_rate, value_name = "RATE")]
    pub max_bitrate: Option<u64>,
    /// The largest IP packet, bytes: fewer than seven TS packets go in each RTP packet where
    /// seven do not fit (e.g. 1018, seed 002's)
    #[arg(long, value_name = "BYTES")]
    pub mtu: Option<u32>,
    /// Print JSON only on stdout: the summary at the end; with --interval, JSON lines (each
    /// interval, then the summary, one line each)
    #[arg(long)]
    pub json: bool,
    /// Print a line per interval on stdout (packets, rate, lateness, the rate target; frames
    /// with --raw), as iperf3 does, e.g. --interval 1s: text, or a JSON line with --json; the
    /// summary still comes at the end. On a terminal, without --json: 1s unless given; 0
    /// turns the lines off (a status line rewritten in place instead). A stream sent alone
    /// only: not with --config, --stream, --sched, --rt-cores, --link-capacity, --control,
    /// --rtsp or --sdp-dir, which make a stream server (with --raw, not with --rtsp)
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Option<Duration>,
    /// Seed for SSRC, initial sequence number and RTCP timing (default: from the clock;
    /// config: seed)
    #[arg(long)]
    pub seed: Option<u64>,
    /// Many streams: a TOML file of `[[stream]]` tables and server settings (every key:
    /// docs/config.md)
    #[arg(long, value_name = "FILE", help_heading = "Many streams")]
    pub config: Option<PathBuf>,
    /// A stream as KEY=VALUE pairs (repeatable), e.g.
    /// name=cam1,destination=rtp://127.0.0.1:5004,source=a.ts,loop=true,period=15ms,deadline=10ms
    #[arg(long, value_name = "SPEC", help_heading = "Many streams")]
    pub stream: Vec<String>,
    /// Scheduling of the streams' send jobs: edf, dm (one pacing thread per real-time core), or
    /// naive (one plain sleeping thread per stream, the baseline)
    #[arg(long, help_heading = "Many streams")]
    pub sched: Option<SchedKind>,
    /// Real-time cores, each with a pacing thread (default 1)
    #[arg(long, help_heading = "Many streams")]
    pub rt_cores: Option<usize>,
    /// Declared link capacity that admitted streams must fit in, e.g. 1gbit
    #[arg(long, value_parser = parse_rate, help_heading = "Many streams")]
    pub link_capacity: Option<u64>,
    /// The most the admitted streams may hold in memory (their rings and sources), e.g. 2GiB;
    /// a stream past it is refused with the reason [default: a quarter of the machine's]
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE", help_heading = "Many streams")]
    pub memory_budget: Option<u64>,
    /// The most one stream may send, to all its destinations together, e.g. 500mbit; a
    /// stream past it is refused with the reason [default: 200mbit, or with --raw the source's
    /// own rate if more; config: max_stream_rate]
    #[arg(long, value_parser = parse_rate, help_heading = "Many streams")]
    pub max_stream_rate: Option<u64>,
    /// The CPU the live encoders (test-source streams and mounts) may take together, e.g. 1.5
    /// or 150%; an encoder past it is refused with the reason, PLAY with 453 [default: 80% of
    /// the producers' CPUs; config: encode_budget]
    #[arg(long, value_parser = parse_cpus, value_name = "CPUS", help_heading = "Many streams")]
    pub encode_budget: Option<f64>,
    /// What one live encoder costs, e.g. 25%, instead of measuring it when one is first asked
    /// for (config: encode_cost)
    #[arg(long, value_parser = parse_cpus, value_name = "CPUS", help_heading = "Many streams")]
    pub encode_cost: Option<f64>,
    /// Share of each real-time core the pacers may use, e.g. 95% or 0.95 (default 95%)
    #[arg(long, value_parser = parse_share, help_heading = "Many streams")]
    pub core_budget: Option<f64>,
    /// Serve the HTTP/JSON control API here (GET/POST /streams, DELETE /streams/NAME); every
    /// request but GET /health needs the token of --control-token-file
    #[arg(long, value_name = "ADDR", help_heading = "Control API")]
    pub control: Option<SocketAddr>,
    /// The control API's bearer token ('Authorization: Bearer TOKEN'): read from this file, or
    /// made in it (mode 0600) when there is none [default: $XDG_CONFIG_HOME/metronome/
    /// control-token, else ~/.config/metronome/control-token]
    #[arg(long, value_name = "FILE", help_heading = "Control API")]
    pub control_token_file: Option<PathBuf>,
    /// A host name the control API may be reached by (its requests' Host), besides IP
    /// addresses and localhost; repeat for more
    #[arg(long, value_name = "NAME", help_heading = "Control API")]
    pub control_host: Vec<String>,
    /// Where streams added through the control API may send: an address or prefix such as
    /// 10.1.0.0/16; repeat for more [default: 127.0.0.0/8, ::1, 239.0.0.0/8 and ff05::/16,
    /// this machine and administratively scoped multicast]
    #[arg(long, value_name = "PREFIX", value_parser = parse_prefix, help_heading = "Control API")]
    pub allow_destination: Vec<metronome_config::prefix::IpPrefix>,
    /// Serve every stream over RTSP here (rtsp://HOST:PORT/NAME); with no stream declared, the
    /// built-in test source at rtsp://HOST:PORT/test
    #[arg(long, value_name = "ADDR", help_heading = "RTSP")]
    pub rtsp: Option<SocketAddr>,
    /// Serve RTSPS (RTSP over TLS, rtsps://) with this PEM certificate chain (with
    /// --rtsp-tls-key; config: rtsp_tls_cert)
    #[arg(
        long,
        value_name = "FILE",
        requires = "rtsp_tls_key",
        help_heading = "RTSP"
    )]
    pub rtsp_tls_cert: Option<PathBuf>,
    /// The PEM private key of --rtsp-tls-cert (config: rtsp_tls_key)
    #[arg(
        long,
        value_name = "FILE",
        requires = "rtsp_tls_cert",
        help_heading = "RTSP"
    )]
    pub rtsp_tls_key: Option<PathBuf>,
    /// Give every RTSP session of a live test-source mount its own encoder, as before
    /// sources were shared (by default the sessions of such a mount read one encoder; config:
    /// rtsp_encoder_per_session)
    #[arg(long, help_heading = "RTSP")]
    pub rtsp_encoder_per_session: bool,
    /// Tear an RTSP session down after this long without a request or receiver report
    /// [default: 60s; config: rtsp_session_timeout]
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", help_heading = "RTSP")]
    pub rtsp_session_timeout: Option<Duration>,
    /// Close an RTSP connection that has no session after this long without a byte [default:
    /// 60s; config: rtsp_idle_timeout]
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", help_heading = "RTSP")]
    pub rtsp_idle_timeout: Option<Duration>,
    /// A request must arrive whole within this long of its first byte, however its bytes
    /// trickle in (else 408 and the connection closes) [default: 5s; config:
    /// rtsp_request_timeout]
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", help_heading = "RTSP")]
    pub rtsp_request_timeout: Option<Duration>,
    /// Most RTSP connections at once; when full, a connection without a session that waits
    /// for the rest of a request, or idles, longest is closed to make room (else 503)
    /// [default: 1024; config: rtsp_max_connections]
    #[arg(long, value_name = "N", help_heading = "RTSP")]
    pub rtsp_max_connections: Option<usize>,
    /// Most RTSP connections from one address at once (the same rule makes room) [default:
    /// 64; config: rtsp_max_per_address]
    #[arg(long, value_name = "N", help_heading = "RTSP")]
    pub rtsp_max_per_address: Option<usize>,
    /// Most RTSP sessions at once (SETUP beyond it: 503) [default: 256; config:
    /// rtsp_max_sessions]
    #[arg(long, value_name = "N", help_heading = "RTSP")]
    pub rtsp_max_sessions: Option<usize>,
    /// Most RTSP sessions from one address at once (SETUP beyond it: 503) [default: 64;
    /// config: rtsp_max_sessions_per_address]
    #[arg(long, value_name = "N", help_heading = "RTSP")]
    pub rtsp_max_sessions_per_address: Option<usize>,
    /// Write an SDP file for each pushed stream into this directory (NAME.sdp), for
    /// `ffplay NAME.sdp`, VLC, GStreamer's sdpdemux or `metronome recv NAME.sdp` (config:
    /// sdp_dir)
    #[arg(long, value_name = "DIR", help_heading = "Many streams")]
    pub sdp_dir: Option<PathBuf>,
    /// Budget this send cost per packet instead of measuring it at start-up, e.g. 5us
    /// (config: send_cost)
    #[arg(long, value_parser = parse_duration, help_heading = "Many streams")]
    pub send_cost: Option<Duration>,
    /// When the running streams no longer fit the host (the send cost measured while running
    /// exceeds what admission budgeted, or deadlines are missed): say so (warn), also refuse
    /// new streams until they fit again (refuse), or also stop the newest stream once
    /// deadlines are missed two seconds in a row, and again while they still are (shed)
    /// [default: warn; config: overload]
    #[arg(long, value_parser = overload_choice(), help_heading = "Many streams")]
    pub overload: Option<OverloadPolicy>,
    #[command(flatten)]
    pub raw: crate::raw_args::RawServeArgs,
}

pub(crate) fn rt_policy(c: CoreRt, packet_interval: Duration) -> RtPolicy {
    match c {
        CoreRt::Auto => RtPolicy::Auto,
        CoreRt::Fifo => RtPolicy::Fifo {
            priority: RtPolicy::DEFAULT_FIFO_PRIORITY,
        },
        // Half of each packet interval: the sender caps its spin at half of that budget, which
        // leaves the rest for the send itself.
        CoreRt::Deadline => RtPolicy::Deadline {
            runtime: packet_interval / 2,
            deadline: packet_interval,
            period: packet_interval,
        },
        CoreRt::Off => RtPolicy::Other,
    }
}

/// A seed from the clock and the process id, for runs that do not give one.
pub(crate) fn fresh_seed() -> u64 {
    let t = metronome_rt::clock::realtime_ns();
    t ^ ((std::process::id() as u64) << 32) ^ 0x9e37_79b9_7f4a_7c15
}

/// The SSRC of a stream run from `seed` (the same seed gives the same SSRC).
pub(crate) fn ssrc_of_seed(seed: u64) -> metronome_wire::Ssrc {
    metronome_wire::Ssrc((seed ^ (seed >> 29)) as u32)
}

impl ServeArgs {
    /// The RTSP service's settings from the `--rtsp-*` options (merged with the config file,
    /// [`ServeArgs::with_file`]) and the file's users, serving on `addr`.
    pub(crate) fn rtsp_config(
        &self,
        addr: SocketAddr,
        file: &metronome_config::serve::ServeConfig,
    ) -> metronome_apps::rtsp::RtspServiceConfig {
        let mut rc = metronome_apps::rtsp::RtspServiceConfig::new(addr);
        rc.auth = file.rtsp_auth.clone();
        rc.share_live = !self.rtsp_encoder_per_session;
        rc.tls = (self.rtsp_tls_cert.clone())
            .zip(self.rtsp_tls_key.clone())
            .map(|(cert, key)| metronome_apps::rtsp::TlsFiles { cert, key });
        // The options (or the file) over the service's defaults.
        let count = |given: Option<usize>, default: usize| given.unwrap_or(default).max(1);
        rc.session_timeout = self.rtsp_session_timeout.unwrap_or(rc.session_timeout);
        rc.idle_timeout = self.rtsp_idle_timeout.unwrap_or(rc.idle_timeout);
        rc.request_timeout = self.rtsp_request_timeout.unwrap_or(rc.request_timeout);
        rc.max_connections = count(self.rtsp_max_connections, rc.max_connections);
        rc.max_per_address = count(self.rtsp_max_per_address, rc.max_per_address);
        rc.max_sessions = count(self.rtsp_max_sessions, rc.max_sessions);
        rc.max_sessions_per_address = count(
            self.rtsp_max_sessions_per_address,
            rc.max_sessions_per_address,
        );
        rc
    }

    /// These options with what the config file sets and the command line does not: the
    /// command line over the file, the file over the defaults. Every setting of the file but
    /// its streams and `[rtsp_auth]` (which a reload applies, serve/reload.rs) is read here,
    /// once, at the start.
    pub(crate) fn with_file(mut self, file: &metronome_config::serve::ServeConfig) -> Self {
        self.control = self.control.or(file.control);
        self.rtsp = self.rtsp.or(file.rtsp);
        self.sched = self.sched.or(file.sched);
        self.rt_cores = self.rt_cores.or(file.rt_cores);
        self.rt = self.rt.or(file.rt);
        self.wait = self.wait.or(file.wait);
        self.cpu = self.cpu.or(file.cpu);
        self.late = self.late.or(file.late);
        self.seed = self.seed.or(file.seed);
        self.core_budget = self.core_budget.or(file.core_budget);
        self.link_capacity = self.link_capacity.or(file.link_capacity);
        self.memory_budget = self.memory_budget.or(file.memory_budget);
        self.max_stream_rate = self.max_stream_rate.or(file.max_stream_rate);
        self.encode_budget = self.encode_budget.or(file.encode_budget);
        self.send_cost = self.send_cost.or(file.send_cost);
        self.encode_cost = self.encode_cost.or(file.encode_cost);
        self.overload = self.overload.or(file.overload);
        self.sdp_dir = self.sdp_dir.take().or(file.sdp_dir.clone());
        self.rtsp_tls_cert = self.rtsp_tls_cert.take().or(file.rtsp_tls_cert.clone());
        self.rtsp_tls_key = self.rtsp_tls_key.take().or(file.rtsp_tls_key.clone());
        let l = &file.rtsp_limits;
        self.rtsp_session_timeout = self.rtsp_session_timeout.or(l.session_timeout);
        self.rtsp_idle_timeout = self.rtsp_idle_timeout.or(l.idle_timeout);
        self.rtsp_request_timeout = self.rtsp_request_timeout.or(l.request_timeout);
        self.rtsp_max_connections = self.rtsp_max_connections.or(l.max_connections);
        self.rtsp_max_per_address = self.rtsp_max_per_address.or(l.max_per_address);
        self.rtsp_max_sessions = self.rtsp_max_sessions.or(l.max_sessions);
        self.rtsp_max_sessions_per_address =
            (self.rtsp_max_sessions_per_address).or(l.max_sessions_per_address);
        self.rtsp_encoder_per_session |= l.encoder_per_session == Some(true);
        self
    }
}

/// The sender's configuration.
pub(crate) fn sender_config(a: &ServeArgs, destinations: Vec<RtpUrl>) -> SenderConfig {
    let seed = a.seed.unwrap_or_else(fresh_seed);
    let mut cfg = SenderConfig::new(destinations, ssrc_of_seed(seed), seed);
    cfg.rt = a.rt.unwrap_or_default();
    cfg.lock_memory = cfg.rt != CoreRt::Off;
    cfg.wait = a.wait.unwrap_or_default();
    cfg.pacer_cpu = a.cpu;
    cfg.ring_slots = a.ring.max(1);
    cfg.duration = a.duration;
    cfg.send_time_ext = a.send_time;
    cfg.pacing.late = a.late.unwrap_or(LatePolicy::CATCH_UP);
    cfg.cc = a.cc.clone();
    cfg.max_bitrate = a.max_bitrate;
    cfg.mtu = a.mtu;
    if let Some(every) = a.interval {
        cfg.status_every = every;
    }
    cfg
}

/// Why `--interval` is refused by a stream server.
const INTERVAL_IS_ONE_STREAMS: &str = "--interval prints the figures of a stream sent alone \
    (serve rtp://…, serve --raw rtp://…); with --config, --stream, --sched, --rt-cores, \
    --link-capacity, --control, --rtsp or --sdp-dir, serve runs a stream server, which gives \
    each stream's figures in its status line, at GET /streams and at GET /metrics (--control \
    ADDR): drop --interval, or poll those";

pub(crate) fn run(
    mut a: ServeArgs,
    stop: Arc<AtomicBool>,
) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(input) = &a.source.input {
        // A named pipe: its writer is waited for where a stop and --duration can end the wait.
        crate::fifo::wait_for_writer(input, &stop, a.duration)?;
    }
    // A raw stream to one destination is sent alone whatever server options it takes (its
    // server has the one lane); an MPEG-TS stream with them is a stream server's.
    let server = match a.raw.raw {
        true => a.rtsp.is_some(),
        false => streams::wanted(&a),
    };
    a.interval = crate::report::interval_wanted(a.interval, a.json, !server);
    if a.interval.is_some() && server {
        return Err(INTERVAL_IS_ONE_STREAMS.into());
    }
    if a.raw.raw {
        return raw::serve(a, stop);
    }
    if a.coded.codec.is_some() && streams::wanted(&a) {
        return Err(
            "--codec sends one stream to the destinations given: it does not combine \
                    with --config, --stream, --rtsp, --control or --sdp-dir (write its SDP with \
                    --sdp FILE)"
                .into(),
        );
    }
    if streams::wanted(&a) {
        return streams::run(a, stop);
    }
    let destinations = a
        .destinations
        .iter()
        .map(|d| RtpUrl::parse_destination(d))
        .collect::<Result<Vec<_>, _>>()?;
    let mut cfg = sender_config(&a, destinations.clone());
    let (source, noted, media) = match a.coded.codec {
        Some(codec) => coded_source(&a, codec, &mut cfg)?,
        None => ts_source(&a)?,
    };
    if let (Some(path), Some(dest)) = (&a.sdp, destinations.first()) {
        write_sdp(path, dest, media)?;
    }
    let live = LiveLine::new(!a.json);
    if live.is_on() {
        eprintln!(
            "metronome: {} → {}",
            source.describe(),
            a.destinations.join(", ")
        );
    }
    let interval = a.interval.is_some();
    let mut last = (0u64, 0u64, Duration::ZERO);
    let mut outcome = run_sender(source, cfg, stop, |s| {
        if !interval {
            live.show(&sender_status(s));
            return;
        }
        let (p0, b0, t0) = last;
        let span = s.elapsed.saturating_sub(t0).as_secs_f64().max(1e-9);
        crate::report::interval_line(
            Output::of(a.json, true),
            t0.as_secs_f64(),
            s.elapsed.as_secs_f64(),
            ServeInterval {
                packets: s.packets.saturating_sub(p0),
                bytes: s.bytes.saturating_sub(b0),
                bitrate_bps: s.bytes.saturating_sub(b0) as f64 * 8.0 / span,
                max_late_us: s.max_late_us,
                target_bitrate_bps: s.target_bitrate_bps,
                receivers: s.receivers.len(),
            },
        );
        last = (s.packets, s.bytes, s.elapsed);
    })?;
    live.finish();
    if a.coded.codec.is_some()
        && a.duration.is_some()
        && outcome.ended_by == metronome_rt::run::EndedBy::EndOfInput
    {
        // The ladder was made --duration long (`coded_source`): its end is the duration's.
        outcome.ended_by = metronome_rt::run::EndedBy::Duration;
    }
    for w in &outcome.warnings {
        eprintln!("metronome: warning: {w}");
    }
    if let (Some(noted), Some(path)) = (noted, &a.frame_trace) {
        write_frame_trace(path, noted, &outcome)?;
    }
    print_outcome(Output::of(a.json, interval), &outcome, sender_summary)?;
    Ok(())
}

/// What one stream sent over one `--interval`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct ServeInterval {
    /// RTP packets sent.
    pub packets: u64,
    /// Their bytes (RTP, headers included).
    pub bytes: u64,
    /// Their rate over the interval, bit/s.
    pub bitrate_bps: f64,
    /// The latest a packet has been sent after its due time so far.
    pub max_late_us: Micros,
    /// The rate the stream's controller (or its declared rate) targets now, bit/s.
    pub target_bitrate_bps: u64,
    /// Receivers that have reported.
    pub receivers: usize,
}

/// The MPEG-TS source (a file or the live test source), noting its frames for
/// `--frame-trace`; the media its SDP describes.
fn ts_source(a: &ServeArgs) -> Result<(GivenSource, Option<Noted>, MediaDescription), BoxError> {
    let mut source = a.source.open()?;
    let noted = match &a.frame_trace {
        Some(p) => {
            // Refused now, not after the stream: the trace's file must be writable.
            std::fs::File::create(p).map_err(|e| format!("--frame-trace {}: {e}", p.display()))?;
            let (noting, noted) = metronome_media::frames::NotingSource::new(source);
            // As many TS packets to an RTP packet as the sender's packetizer puts in one.
            let mut spec = metronome_apps::streams::StreamSpec::new("stream1", Vec::new());
            spec.mtu = a.mtu;
            spec.send_time = a.send_time;
            source = Box::new(noting.with_ts_per_packet(spec.ts_per_packet()));
            Some(Noted::Ts(noted))
        }
        None => None,
    };
    Ok((source.into(), noted, MediaDescription::mp2t(0)))
}

/// `--codec`: the ladder's video (see [`crate::coded`]), its frames always noted; the media its
/// SDP describes. Its packets carry no send-time extension, as the lab's ladder video and
/// Evalvid-RA's carry none (`--send-time` does not apply).
fn coded_source(
    a: &ServeArgs,
    codec: crate::coded::CodecArg,
    cfg: &mut SenderConfig,
) -> Result<(GivenSource, Option<Noted>, MediaDescription), BoxError> {
    let cc = match a.cc.as_deref() {
        Some(name) => RtpCc::from_name(name).ok_or_else(|| format!("--cc {name}: unknown"))?,
        None => RtpCc::Fixed,
    };
    let start = a.source.bitrate.unwrap_or(1_000_000);
    let most = a.max_bitrate.unwrap_or(start).max(start);
    // Both checked as the encoders need them when the command line was read.
    let picture = (a.source.size.0, a.source.size.1, a.source.fps);
    let duration = a
        .duration
        .unwrap_or(Duration::from_secs(crate::coded::DEFAULT_SECS));
    let stream = crate::coded::open(&a.coded, codec, picture, cc, (start, most), a.mtu, duration)?;
    // A ladder's packets are Evalvid-RA's: no send-time extension, except abs-send-time for
    // TFRC's and TFMCC's receivers, which the server stamps.
    let send_time = stream.source.send_time();
    cfg.send_time_ext = !send_time.is_none();
    // The ladder is `duration` long: the stream ends with its last frame, whole.
    cfg.duration = None;
    let f = &stream.format;
    let mut media = MediaDescription::new(
        "video",
        0,
        metronome_lab::ladder::PAYLOAD_TYPE,
        f.encoding,
        f.clock_rate,
    );
    media.fmtp = Some(f.fmtp.clone());
    media.bitrate_kbps = Some(most.div_ceil(1000));
    if send_time == SendTimeExt::Abs24 {
        media.extmap = Some((SEND_TIME_EXT_ID, ABS_SEND_TIME_URI.to_string()));
    }
    let source = GivenSource::Rtp(Box::new(stream.source));
    Ok((source, Some(Noted::Ladder(stream.frames)), media))
}

/// Writes the SDP of the stream to `dest` (its `media`) at `path`.
fn write_sdp(path: &std::path::Path, dest: &RtpUrl, media: MediaDescription) -> Result<(), String> {
    let ttl = dest.is_multicast().then(|| dest.ttl_byte());
    let text = SessionDescription::rtp(
        crate::sdp::origin_for(dest),
        metronome_rt::clock::realtime_ns() >> 1,
        "metronome",
        dest.addr,
        ttl,
        media,
    )
    .to_sdp();
    std::fs::write(path, text).map_err(|e| format!("--sdp {}: {e}", path.display()))
}

type BoxError = Box<dyn std::error::Error>;

/// Where the source notes the frames it sends.
enum Noted {
    Ts(Arc<std::sync::Mutex<metronome_media::frames::Noted>>),
    Ladder(Arc<std::sync::Mutex<Option<metronome_lab::model::Frames>>>),
}

impl Noted {
    /// The frames as sent, `epoch_ns` their time zero (Unix ns), packets numbered from
    /// `first_packet`.
    fn trace(self, epoch_ns: u64, first_packet: u64) -> Vec<metronome_quality::playout::SentFrame> {
        match self {
            Noted::Ts(noted) => {
                let mut noted = noted.lock().unwrap_or_else(|e| e.into_inner());
                noted.finish();
                noted.frames.trace(epoch_ns, first_packet)
            }
            Noted::Ladder(frames) => {
                let opened = frames.lock().unwrap_or_else(|e| e.into_inner()).take();
                match opened.flatten() {
                    Some(shared) => {
                        let map = metronome_lab::video::lock_frames(&shared);
                        map.sent.trace(epoch_ns, first_packet)
                    }
                    None => Vec::new(),
                }
            }
        }
    }
}

/// The frames the sender noted, as a trace: packets as many as were sent, by sequence number.
fn write_frame_trace(
    path: &std::path::Path,
    noted: Noted,
    outcome: &metronome_apps::sender::SenderOutcome,
) -> Result<(), String> {
    let mut frames = noted.trace(outcome.epoch_unix_ns, u64::from(outcome.first_seq));
    // Frames whose packets never left (the run stopped first) are not in the trace.
    let sent_end = u64::from(outcome.first_seq) + outcome.packets;
    frames.retain(|f| f.packets.first().is_some_and(|p| *p < sent_end));
    for f in &mut frames {
        f.packets.retain(|p| *p < sent_end);
    }
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    let evalvid = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("st"));
    let written = if evalvid {
        metronome_quality::trace::write_st(&mut w, &frames)
    } else {
        metronome_quality::trace::write_frames(&mut w, &frames)
    };
    written
        .and_then(|()| std::io::Write::flush(&mut w))
        .map_err(|e| format!("cannot write the frame trace {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        serve: ServeArgs,
    }

    /// Every setting the file takes, merged once: the command line over the file, the file
    /// over the defaults (which are applied where the setting is used).
    #[test]
    fn the_command_line_wins_over_the_file_and_the_file_over_the_defaults() {
        let file = metronome_config::serve::parse(
            "rt_cores = 3\nmemory_budget = \"64MB\"\nrtsp_max_sessions = 5\nrtsp_session_timeout = \"9s\"\n",
            "test.toml",
        )
        .unwrap();
        let given = Args::try_parse_from(["serve", "--rt-cores", "2", "--rtsp-max-sessions", "7"])
            .unwrap()
            .serve
            .with_file(&file);
        assert_eq!(given.rt_cores, Some(2));
        assert_eq!(given.rtsp_max_sessions, Some(7));
        assert_eq!(given.memory_budget, file.memory_budget);
        assert!(given.memory_budget.is_some());
        assert_eq!(given.rtsp_session_timeout, Some(Duration::from_secs(9)));
        assert_eq!(
            given.core_budget, None,
            "neither says: the default applies where used"
        );
        let rc = given.rtsp_config("127.0.0.1:0".parse().unwrap(), &file);
        assert_eq!(
            (rc.max_sessions, rc.session_timeout),
            (7, Duration::from_secs(9))
        );
    }

    /// The pacing threads' settings come from the file too, and reach the stream server's
    /// config; the command line's win.
    #[test]
    fn the_pacing_threads_settings_come_from_the_file() {
        let file = metronome_config::serve::parse(
            "rt = \"off\"\nwait = \"sleep-spin\"\ncpu = 1\nlate = \"drop-late=20ms\"\nseed = 42\n",
            "test.toml",
        )
        .unwrap();
        let a = Args::try_parse_from(["serve"])
            .unwrap()
            .serve
            .with_file(&file);
        let cfg = streams::server_config(&a);
        assert_eq!(
            (cfg.rt, cfg.wait, cfg.seed),
            (CoreRt::Off, WaitPolicy::SleepSpin, 42)
        );
        assert_eq!(cfg.cpus, Some(vec![1]));
        assert!(!cfg.lock_memory, "off: no memory lock");
        assert_eq!(
            cfg.pacing.late,
            LatePolicy::DropLate {
                after: Duration::from_millis(20)
            }
        );
        let given = Args::try_parse_from([
            "serve",
            "--rt",
            "fifo",
            "--wait",
            "busy-poll",
            "--seed",
            "7",
        ])
        .unwrap()
        .serve
        .with_file(&file);
        let cfg = streams::server_config(&given);
        assert_eq!(
            (cfg.rt, cfg.wait, cfg.seed),
            (CoreRt::Fifo, WaitPolicy::BusyPoll, 7)
        );
        assert!(Args::try_parse_from(["serve", "--rt", "sometimes"]).is_err());
    }
}
