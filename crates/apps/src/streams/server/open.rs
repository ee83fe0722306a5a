//! Turning a [`StreamSpec`] into a stream ready to admit: its source opened, its task parameters
//! derived from the media and the calibrated send cost, its sockets and ring in place.

use super::repair::RepairPlan;
use super::{memory, ServerConfig};
use crate::streams::control::ControlError;
use crate::streams::outlet::{MediaOut, RtcpOut, SessionOutlet, StartInfo};
use crate::streams::rate_knob::RateKnob;
use crate::streams::srtp::StreamSrtp;
use crate::streams::stream::StreamRt;
use metronome_cc::{ControllerKind, ControllerParams, RateController};
use metronome_config::stream::{format_bitrate, SourceSpec, StreamSpec};
use metronome_media::ts_rtp::TsRtp;
use metronome_media::{Seeked, TestSource, TestSourceConfig, TsFileSource, TsSource};
use metronome_rt::clock::Clock;
use metronome_rt::pacing::Calibration;
use metronome_rt::ring::PacketRing;
use metronome_rt::udp::{RtcpSocket, SocketOptions, UdpSender};
use metronome_rt::url::RtpUrl;
use metronome_sched::phase::staggered_start;
use metronome_sched::{PacingConfig, TaskParams};
use metronome_session::sender::{
    JobConfig, PacketizerConfig, RateLimits, RtpSource, SenderReportsConfig, SenderSession,
    SenderSessionConfig,
};
use metronome_session::srtp::{SrtpError, SrtpKey};
use metronome_time::mix::splitmix64;
use metronome_time::{Bitrate, MediaClock, RtpTime, Timestamp};
use metronome_wire::rtp::SEND_TIME_EXT_LEN;
use metronome_wire::{SeqNo, Ssrc};
use std::sync::Arc;
use std::time::Duration;

/// The largest RTP/MP2T payload: seven TS packets (RFC 2250); a stream's `mtu` may make it
/// fewer (`StreamSpec::ts_per_packet`).
const PAYLOAD: u64 = 7 * 188;
/// IPv4 + UDP headers, counted in the link rate.
const IP_UDP: u64 = metronome_time::IPV4_UDP_OVERHEAD as u64;

/// A stream opened but not yet admitted or started.
pub(super) struct Opened {
    pub rt: Arc<StreamRt>,
    /// The core admission control placed it on.
    pub core: usize,
    /// Its packets: the TS source through the RFC 2250 packetizer.
    pub source: Box<dyn RtpSource>,
    pub rtcp: Vec<RtcpOut>,
    pub description: String,
    pub start: StartInfo,
}

/// What the caller of [`open_stream`] may bring instead of what the spec declares.
#[derive(Default)]
pub(super) struct Given {
    /// An RTSP session's transport, instead of `rtp://` destinations.
    pub outlet: Option<SessionOutlet>,
    /// A source already opened (from the command line, or the lab's), instead of
    /// `spec.source`.
    pub source: Option<GivenSource>,
}

/// A source the caller brings.
pub enum GivenSource {
    /// MPEG-TS: the server cuts it into RTP packets (RFC 2250).
    Ts(Box<dyn TsSource>),
    /// A source that makes its own RTP packets (a ladder's coded frames, RFC 6416 or 6184),
    /// opened once the server has numbered and timed the stream.
    Rtp(Box<dyn RtpSourcePlan>),
}

impl From<Box<dyn TsSource>> for GivenSource {
    fn from(s: Box<dyn TsSource>) -> Self {
        GivenSource::Ts(s)
    }
}

/// An RTP source before the server has numbered it: what admission needs to know of it, and
/// how to open it.
pub trait RtpSourcePlan: Send {
    fn describe(&self) -> String;
    /// The rate it starts at, in its own units (see [`PacketShape`]).
    fn start_rate(&self) -> u64;
    /// How its rate becomes packets on the wire.
    fn shape(&self) -> PacketShape;
    /// Opens it: SSRC, first sequence number and RTP time from `start`, due times from
    /// `epoch` on the server's clock.
    fn open(
        self: Box<Self>,
        start: &StartInfo,
        epoch: Timestamp,
    ) -> Result<Box<dyn RtpSource>, String>;
}

/// How a source's rate becomes packets: the source's units each packet carries, and the
/// packet's bytes on the wire (IPv4, UDP, RTP and payload). MPEG-TS counts its TS bits; a
/// source counted on the wire (a ladder's frames) counts the whole packet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PacketShape {
    pub source_bits: u64,
    pub wire_bytes: u64,
}

impl PacketShape {
    /// `ts_per_packet` TS packets per RTP packet, with or without the send-time extension.
    pub fn mp2t(ts_per_packet: usize, send_time: bool) -> PacketShape {
        let payload = (ts_per_packet * 188) as u64;
        let header = 12 + if send_time { SEND_TIME_EXT_LEN } else { 0 } as u64;
        PacketShape {
            source_bits: payload * 8,
            wire_bytes: payload + header + IP_UDP,
        }
    }

    /// Packets of at most `wire_bytes` on the wire, the source's rate counted there.
    pub fn on_the_wire(wire_bytes: u64) -> PacketShape {
        PacketShape {
            source_bits: wire_bytes * 8,
            wire_bytes,
        }
    }
}

/// The task a stream of `ts_bitrate` MPEG-TS sent to `dests` destinations is.
pub fn task_for(spec: &StreamSpec, ts_bitrate: u64, dests: usize, cal: &Calibration) -> TaskParams {
    let shape = PacketShape::mp2t(spec.ts_per_packet(), spec.send_time);
    task_of_shape(spec, shape, ts_bitrate, dests, cal)
}

/// The task a stream of `rate` (the source's units) in packets of `shape` sent to `dests`
/// destinations is.
pub fn task_of_shape(
    spec: &StreamSpec,
    shape: PacketShape,
    rate: u64,
    dests: usize,
    cal: &Calibration,
) -> TaskParams {
    let pps = rate.max(1) as f64 / shape.source_bits.max(1) as f64;
    let interval = Duration::from_secs_f64(1.0 / pps);
    let period = spec.period.unwrap_or(interval);
    // Packets due within one period: at most ceil(T / interval) at a constant rate.
    let per_job = (period.as_secs_f64() / interval.as_secs_f64() - 1e-9)
        .ceil()
        .max(1.0) as u32;
    let dests = dests.max(1) as u32;
    let cost = spec.cost.unwrap_or(
        cal.per_packet_us.to_duration() * per_job * dests + cal.per_job_us.to_duration(),
    );
    let wire = shape.wire_bytes * 8;
    TaskParams {
        period,
        deadline: spec.deadline.unwrap_or(period),
        cost,
        bitrate_bps: (pps * wire as f64 * dests as f64).ceil() as u64,
    }
}

/// Opens the source (unless the caller brings it), derives the task, asks `admit` for a core, then opens the sockets and
/// allocates the ring (only for an admitted stream). A stream an RTSP session starts brings its
/// transport instead of `rtp://` destinations (see [`Given`]). On an error after `admit` succeeded the
/// caller releases the admission.
pub(super) fn open_stream(
    spec: &StreamSpec,
    id: u64,
    cfg: &ServerConfig,
    cal: &Calibration,
    clock: &Clock,
    given: Given,
    admit: impl FnOnce(TaskParams, u64) -> Result<usize, ControlError>,
) -> Result<Opened, ControlError> {
    let Given { outlet, source } = given;
    let source_bytes = source_bytes(spec, source.is_some());
    let destinations = spec
        .destination
        .iter()
        .map(|d| RtpUrl::parse_destination(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ControlError::Invalid(format!("stream '{}': {e}", spec.name)))?;
    let next_seq = outlet.as_ref().and_then(|o| o.next_seq);
    let earlier_reports = outlet.as_ref().map(|o| o.sent_reports.clone());
    let mut source = match source {
        Some(s) => s,
        None => GivenSource::Ts(open_source(spec)?),
    };
    if let Some(from) = outlet.as_ref().map(|o| o.from).filter(|f| !f.is_zero()) {
        source = source
            .seeked(from)
            .map_err(|e| ControlError::Invalid(format!("stream '{}': {e}", spec.name)))?;
    }
    let description = source.describe();
    let shape = source.shape(spec);
    let (ts_bitrate, ceiling) = rates(spec, &source, &description)?;
    // A session's stream goes to its one client.
    let dests = outlet.as_ref().map_or(destinations.len(), |_| 1);
    let media_task = task_of_shape(spec, shape, ceiling, dests, cal);
    let pps = ceiling as f64 / shape.source_bits.max(1) as f64;
    let repair = RepairPlan::of(spec, pps, slot_bytes(shape)).map(|r| r.sent_to(&destinations));
    let task = RepairPlan::admitted(repair.as_ref(), media_task);
    let ring_slots = spec.ring.unwrap_or(cfg.default_ring);
    let ring_bytes = (ring_slots as u64).saturating_mul(slot_bytes(shape) as u64);
    let repair_bytes = repair.as_ref().map_or(0, RepairPlan::memory_bytes);
    let core = admit(task, ring_bytes + source_bytes + repair_bytes)?;
    let fec_out = fec_outputs(spec, outlet.is_some(), &destinations)?;
    let (outputs, rtcp) = outputs(spec, outlet, &destinations)?;
    // Spreads the server's seed and the stream id into independent-looking SSRCs and bases.
    let seed = splitmix64(cfg.seed ^ id.rotate_left(17));
    // Staggered on the period so that streams do not release together (see `sched::phase`).
    let epoch = staggered_start(clock.now() + cfg.preroll, task.period, id);
    let start = start_info(
        spec,
        seed,
        next_seq,
        clock.realtime_ns_from_timestamp(epoch),
    );
    let packetizer = PacketizerConfig {
        send_time_ext: spec.send_time,
        ts_per_packet: spec.ts_per_packet(),
        ..PacketizerConfig::mp2t(start.ssrc, start.seq, start.rtptime)
    };
    let source = source
        .open(packetizer, &start, epoch)
        .map_err(|e| ControlError::Invalid(format!("stream '{}': {e}", spec.name)))?;
    let plan = SessionPlan {
        spec,
        cfg,
        task: &media_task,
        start: &start,
        seed,
        epoch,
        ring_slots,
    };
    let (session, rate) = plan.session(source.rate_range(), ts_bitrate, ceiling, shape);
    let session = with_repairs(session, repair.as_ref(), &start, seed)
        .sending_at_rate(source.leaves_at_rate())
        .continuing(earlier_reports.as_deref().unwrap_or_default());
    let rt = Arc::new(
        StreamRt::new(
            id,
            spec.name.clone(),
            task,
            epoch,
            PacketRing::new(ring_slots, slot_bytes(shape)),
            outputs,
            spec.send_time,
            session,
        )
        .with_rate(rate)
        .with_send_times(cfg.keep_send_times)
        .with_srtp(srtp(spec)?)
        .with_fec_outputs(fec_out),
    );
    Ok(Opened {
        rt,
        core,
        source,
        rtcp,
        description: format!("{description} at {}", format_bitrate(ts_bitrate)),
        start,
    })
}

/// What a stream's sender session is made from.
struct SessionPlan<'a> {
    spec: &'a StreamSpec,
    cfg: &'a ServerConfig,
    /// The media's task (without the repair budget).
    task: &'a TaskParams,
    start: &'a StartInfo,
    seed: u64,
    epoch: Timestamp,
    ring_slots: usize,
}

impl SessionPlan<'_> {
    /// The sender session and the rate knob its source follows, starting at `ts_bitrate` and
    /// raised at most to `ceiling` (the source's units) within the source's `range`.
    fn session(
        &self,
        range: Option<std::ops::RangeInclusive<u64>>,
        ts_bitrate: u64,
        ceiling: u64,
        shape: PacketShape,
    ) -> (SenderSession, RateKnob) {
        let spec = self.spec;
        // The session's rate is in bits on the wire (headers, every destination), the
        // source's in its own units (MPEG-TS bits, or wire bits): the knob converts.
        let ts_per_wire = ceiling as f64 / self.task.bitrate_bps.max(1) as f64;
        let limits = RateLimits {
            ts_per_wire,
            range,
            ceiling,
        };
        let rate = RateKnob::new(ts_bitrate, limits);
        let config = session_config(
            spec,
            self.cfg,
            self.task,
            self.start,
            self.seed,
            ts_bitrate,
            self.ring_slots,
        );
        let controller = controller(spec, shape, &rate.limits, ts_bitrate, self.epoch);
        let session = SenderSession::new(config, self.epoch, controller);
        if spec.cc.is_some() {
            // A source that follows a controller starts at its first rate (TFRC's one packet
            // a second), as in the simulator: the producer asks it before making the first
            // packet.
            rate.follow(session.target_rate());
        }
        (session, rate)
    }
}

/// The stream's SRTP, when it was declared with a key.
fn srtp(spec: &StreamSpec) -> Result<Option<StreamSrtp>, ControlError> {
    let Some(text) = &spec.srtp_key else {
        return Ok(None);
    };
    let bad = |e: SrtpError| ControlError::Invalid(format!("stream '{}': {e}", spec.name));
    let key = SrtpKey::from_base64(text).map_err(bad)?;
    StreamSrtp::new(&key).map(Some).map_err(bad)
}

/// The rate the stream starts at and the most it may be raised to (admission reserves that),
/// in the source's units: declared, or the source's own.
fn rates(
    spec: &StreamSpec,
    source: &GivenSource,
    description: &str,
) -> Result<(u64, u64), ControlError> {
    let start = spec.bitrate.or(source.nominal_bitrate()).ok_or_else(|| {
        ControlError::Invalid(format!(
            "cannot tell the rate of stream '{}' ({description}); declare it, e.g. bitrate = \"4mbit\"",
            spec.name
        ))
    })?;
    let ceiling = spec.max_bitrate.unwrap_or(start);
    if ceiling < start {
        return Err(ControlError::Invalid(format!(
            "stream '{}': max_bitrate {} is below the rate it starts at ({})",
            spec.name,
            format_bitrate(ceiling),
            format_bitrate(start)
        )));
    }
    Ok((start, ceiling))
}

/// Where the stream's packets and RTCP go: an RTSP session's transport, or a UDP socket
/// pair per `rtp://` destination (RTCP read without blocking).
fn outputs(
    spec: &StreamSpec,
    outlet: Option<SessionOutlet>,
    destinations: &[RtpUrl],
) -> Result<(Vec<MediaOut>, Vec<RtcpOut>), ControlError> {
    let (outputs, rtcp) = match outlet {
        Some(o) => (vec![o.media], vec![o.rtcp]),
        None => udp_outputs(spec, destinations)?,
    };
    // The RTCP that comes in at destination i names outlet i, where its repairs go.
    debug_assert_eq!(
        outputs.len(),
        rtcp.len(),
        "a destination's media and RTCP pair up"
    );
    for r in &rtcp {
        if let RtcpOut::Udp(s) = r {
            s.socket().set_nonblocking(true).map_err(|e| {
                ControlError::Internal(format!("stream '{}': RTCP socket: {e}", spec.name))
            })?;
        }
    }
    Ok((outputs, rtcp))
}

/// The stream's sender session: its reports, pacing, jobs and queue.
fn session_config(
    spec: &StreamSpec,
    cfg: &ServerConfig,
    task: &TaskParams,
    start: &StartInfo,
    seed: u64,
    ts_bitrate: u64,
    ring_slots: usize,
) -> SenderSessionConfig {
    let ssrc = start.ssrc;
    SenderSessionConfig {
        reports: SenderReportsConfig {
            ssrc,
            cname: stream_cname(ssrc, &spec.name),
            clock: MediaClock::VIDEO_90K,
            rtp_ts_base: start.rtptime,
            session_bw_bps: ts_bitrate,
            rtcp_min_interval: cfg.rtcp_min_interval,
            max_receivers: 256,
            seed: seed ^ 0x5352,
        },
        pacing: PacingConfig {
            link_capacity: cfg.link_capacity_bps.map(Bitrate::bps),
            // A late job still leaves as the burst it is: one period's worth of bytes.
            catch_up_burst_bytes: spec.period.map_or(0, |t| {
                (t.as_secs_f64() * task.bitrate_bps as f64 / 8.0).ceil() as u64
            }),
            ..cfg.pacing
        },
        jobs: JobConfig {
            period: spec.period,
            deadline: task.deadline,
        },
        queue_capacity: ring_slots,
    }
}

/// What the source will hold besides the ring, for the memory budget: a source the caller
/// brings is already made (its memory is the caller's); else the measured cost of its kind.
fn source_bytes(spec: &StreamSpec, brought: bool) -> u64 {
    match (brought, &spec.source) {
        (true, _) => 0,
        (false, SourceSpec::Test) => memory::TEST_SOURCE_BYTES,
        (false, SourceSpec::File(_)) => memory::FILE_SOURCE_BYTES,
    }
}

/// The RTCP CNAME of stream `name` sent as `ssrc` (its SDES, and its SDP's `a=ssrc` lines).
pub(crate) fn stream_cname(ssrc: Ssrc, name: &str) -> String {
    format!("metronome-{ssrc:08x}-{name}")
}

/// The stream's SSRC (declared or from `seed`), first sequence number (the session's next, or
/// from `seed`), RTP time base, and its epoch on the wall clock.
fn start_info(
    spec: &StreamSpec,
    seed: u64,
    next_seq: Option<SeqNo>,
    epoch_unix_ns: u64,
) -> StartInfo {
    StartInfo {
        ssrc: metronome_wire::Ssrc(spec.ssrc.unwrap_or(seed as u32)),
        seq: next_seq.unwrap_or(SeqNo((seed >> 16) as u16)),
        rtptime: RtpTime((seed >> 32) as u32),
        epoch_unix_ns,
    }
}

/// A ring slot: the largest RTP packet (MPEG-TS's seven packets and the send-time
/// extension, or the largest packet a source of its own makes).
fn slot_bytes(shape: PacketShape) -> usize {
    let mp2t = PAYLOAD as usize + 12 + SEND_TIME_EXT_LEN;
    mp2t.max(shape.wire_bytes.saturating_sub(IP_UDP) as usize)
}

impl GivenSource {
    pub fn describe(&self) -> String {
        match self {
            GivenSource::Ts(s) => s.describe(),
            GivenSource::Rtp(p) => p.describe(),
        }
    }

    fn nominal_bitrate(&self) -> Option<u64> {
        match self {
            GivenSource::Ts(s) => s.nominal_bitrate(),
            GivenSource::Rtp(p) => Some(p.start_rate()),
        }
    }

    fn shape(&self, spec: &StreamSpec) -> PacketShape {
        match self {
            GivenSource::Ts(_) => PacketShape::mp2t(spec.ts_per_packet(), spec.send_time),
            GivenSource::Rtp(p) => p.shape(),
        }
    }

    /// Started `from` into its timeline (RTSP PLAY after PAUSE, or with a range).
    fn seeked(self, from: Duration) -> Result<GivenSource, String> {
        match self {
            GivenSource::Ts(s) => Ok(GivenSource::Ts(Box::new(Seeked::new(s, from)))),
            GivenSource::Rtp(p) => Err(format!(
                "{} cannot start {from:?} into its timeline: play it from its start",
                p.describe()
            )),
        }
    }

    /// Its packets: MPEG-TS through the RFC 2250 packetizer, or the source's own.
    fn open(
        self,
        packetizer: PacketizerConfig,
        start: &StartInfo,
        epoch: Timestamp,
    ) -> Result<Box<dyn RtpSource>, String> {
        match self {
            GivenSource::Ts(s) => Ok(Box::new(TsRtp::new(s, packetizer, epoch))),
            GivenSource::Rtp(p) => p.open(start, epoch),
        }
    }
}

/// The session with the stream's retransmissions and FEC, if it makes them.
fn with_repairs(
    session: SenderSession,
    plan: Option<&RepairPlan>,
    start: &StartInfo,
    seed: u64,
) -> SenderSession {
    let Some(plan) = plan else { return session };
    let session = match plan.sender(start, seed) {
        Some(r) => session.with_repair(r),
        None => session,
    };
    match plan.fec() {
        Some(f) => session.with_fec(f),
        None => session,
    }
}

/// Two UDP sockets per `rtp://` destination for a stream with FEC (SMPTE 2022-1 §8: column
/// FEC to the media's port + 2, row FEC to + 4); none otherwise. An RTSP session's stream
/// cannot send FEC yet: refused.
fn fec_outputs(
    spec: &StreamSpec,
    rtsp: bool,
    destinations: &[RtpUrl],
) -> Result<Vec<[MediaOut; 2]>, ControlError> {
    if spec.repair.fec().is_none() {
        return Ok(Vec::new());
    }
    let invalid = |e: String| ControlError::Invalid(format!("stream '{}': {e}", spec.name));
    if rtsp {
        return Err(invalid(
            "FEC goes to rtp:// destinations only, not yet to RTSP sessions; use repair = \"rtx\""
                .into(),
        ));
    }
    let open = |d: &RtpUrl, offset: u16| {
        let port = d.addr.port().checked_add(offset).ok_or_else(|| {
            invalid(format!(
                "FEC goes to the media's port + 2 and + 4: port {} leaves no room; use a lower one",
                d.addr.port()
            ))
        })?;
        let mut to = *d;
        to.addr.set_port(port);
        let s =
            UdpSender::open(&to, &SocketOptions::default()).map_err(|e| invalid(e.to_string()))?;
        Ok(MediaOut::Udp(Arc::new(s)))
    };
    destinations
        .iter()
        .map(|d| {
            Ok([
                open(d, metronome_wire::fec2022::COLUMN_PORT_OFFSET)?,
                open(d, metronome_wire::fec2022::ROW_PORT_OFFSET)?,
            ])
        })
        .collect()
}

/// One UDP socket and one RTCP socket per `rtp://` destination.
fn udp_outputs(
    spec: &StreamSpec,
    destinations: &[RtpUrl],
) -> Result<(Vec<MediaOut>, Vec<RtcpOut>), ControlError> {
    let invalid = |e: metronome_rt::udp::UdpError| {
        ControlError::Invalid(format!("stream '{}': {e}", spec.name))
    };
    let rtcp_opts = SocketOptions {
        buffer_bytes: 256 << 10,
        read_timeout: None,
    };
    let mut media = Vec::new();
    let mut rtcp = Vec::new();
    for d in destinations {
        media.push(MediaOut::Udp(Arc::new(
            UdpSender::open(d, &SocketOptions::default()).map_err(invalid)?,
        )));
        rtcp.push(RtcpOut::Udp(Arc::new(
            RtcpSocket::open_for_sender(d, &rtcp_opts).map_err(invalid)?,
        )));
    }
    Ok((media, rtcp))
}

pub(crate) fn open_source(spec: &StreamSpec) -> Result<Box<dyn TsSource>, ControlError> {
    let invalid = |e: String| ControlError::Invalid(format!("stream '{}': {e}", spec.name));
    match &spec.source {
        SourceSpec::Test => {
            let mut c = TestSourceConfig::default();
            if let Some(size) = &spec.size {
                let (w, h) = size
                    .split_once('x')
                    .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
                    .ok_or_else(|| invalid(format!("size '{size}' is not WIDTHxHEIGHT")))?;
                c.width = w;
                c.height = h;
            }
            if let Some(fps) = spec.fps {
                c.fps = fps;
            }
            if let Some(b) = spec.bitrate {
                c.mux_rate = b;
                // 70% of the mux rate, as the default (room for TS overhead and I-frames).
                c.video_bitrate = u32::try_from(b * 7 / 10).unwrap_or(u32::MAX);
            }
            Ok(Box::new(
                TestSource::new(c).map_err(|e| invalid(e.to_string()))?,
            ))
        }
        SourceSpec::File(path) => Ok(Box::new(
            TsFileSource::open(path, spec.looping).map_err(|e| invalid(e.to_string()))?,
        )),
    }
}

/// The stream's rate controller (`spec.cc`), in wire bits: from the rate it starts at up to
/// the ceiling admission reserved, never below the least its source can send.
fn controller(
    spec: &StreamSpec,
    shape: PacketShape,
    limits: &RateLimits,
    ts_bitrate: u64,
    epoch: Timestamp,
) -> Box<dyn RateController> {
    let start = limits.wire(ts_bitrate);
    let max = limits.wire(limits.ceiling);
    let min = limits.wire(limits.range.as_ref().map_or(ts_bitrate, |r| *r.start()));
    // The packet on the wire: payload, RTP header, the send-time extension, IPv4 and UDP.
    let segment = shape.wire_bytes as u32;
    let kind = spec
        .cc
        .as_deref()
        .and_then(ControllerKind::from_name)
        .unwrap_or_default();
    let params = ControllerParams {
        segment_bytes: segment,
        start,
        min,
        max,
    };
    kind.build(params, epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_parameters_follow_the_media_and_the_declared_period() {
        let cal = Calibration::fixed(Duration::from_micros(5));
        let spec = StreamSpec::new("a", vec!["rtp://127.0.0.1:5004".into()]);
        let t = task_for(&spec, 4_000_000, 1, &cal);
        // 4 Mbit/s of TS in 1316-byte payloads: 379.9 packets/s, one per job.
        assert!((t.period.as_secs_f64() - 1316.0 * 8.0 / 4e6).abs() < 1e-9);
        assert_eq!(t.deadline, t.period);
        assert_eq!(t.cost, Duration::from_micros(6));
        // Headers are counted on the link: 1356 bytes per 1316 of payload.
        assert_eq!(t.bitrate_bps, (4e6_f64 / 1316.0 * 1356.0).ceil() as u64);
        let mut paper = spec.clone();
        paper.period = Some(Duration::from_millis(15));
        paper.deadline = Some(Duration::from_millis(10));
        let t = task_for(&paper, 4_000_000, 1, &cal);
        // 15 ms of 4 Mbit/s is 5.7 packets: a job carries up to 6.
        assert_eq!(t.cost, Duration::from_micros(6 * 5 + 1));
        assert_eq!(t.deadline, Duration::from_millis(10));
    }
}
