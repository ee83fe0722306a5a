//! A scenario point, declared in `metronome-config`, built as a simulation in `metronome-sim`.

use crate::ladder::LadderVideo;
use crate::video::{FrameMap, SharedFrames, Timed};
use metronome_apps::streams::PacketShape;
use metronome_cc::{ControllerParams, RateController};
use metronome_config::scenario::Variation;
use metronome_config::scenario::{
    CodedVideo, DeliveryDecl, FlowDecl, FlowKind, JitterDistribution, LinkProfile, LossDecl,
    RateShape, Repair, RtpCc, Scenario, TcpCc, VideoContent, VideoDecl,
};
use metronome_link::topology::{derive_seed, LinkPlan, NodeId, Topology};
use metronome_link::traffic::RatePattern;
use metronome_link::{DeliveryTrace, JitterModel, LinkConfig, LinkSchedule, LossModel};
use metronome_media::ladder::source::LadderSourceConfig;
use metronome_sched::PacingConfig;
use metronome_session::receiver::{PayloadKind, ReceiverConfig, ReceiverRepair};
use metronome_session::repair::{rtx_ssrc, FecConfig, NackConfig, RTX_PAYLOAD_TYPE};
use metronome_session::sender::{
    CbrTs, JobConfig, PacketizerConfig, RtpSource, SenderRepair, SenderReportsConfig,
    SenderSessionConfig,
};
use metronome_sim::flows::rtp::{MemberWindow, RtpFlow, RtpFlowConfig};
use metronome_sim::flows::tcp::{TcpCongestion, TcpFlow, TcpFlowConfig};
use metronome_sim::flows::udp::{UdpFlow, UdpFlowConfig};
use metronome_sim::trace::TraceLevel;
use metronome_sim::Sim;
use metronome_time::{Bitrate, MediaClock, RtpTime, Timestamp};
use metronome_wire::rtp::SendTimeExt;
use metronome_wire::rtx::StreamIds;
use metronome_wire::{SeqNo, Ssrc};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The link model for a profile: its configuration, or its schedule if it changes over time.
/// `dir` is where relative trace files are found (`None`: a built-in scenario, which has
/// none).
pub fn link_plan(p: &LinkProfile, dir: Option<&Path>) -> Result<LinkPlan, String> {
    let base = link_config(p, dir)?;
    let plan = match &p.variation {
        None => return Ok(LinkPlan::Fixed(base)),
        Some(Variation::Steps(steps)) => {
            let mut all = vec![(Duration::ZERO, base)];
            for (at, sp) in steps {
                all.push((*at, link_config(sp, dir)?));
            }
            LinkSchedule::steps(all)
        }
        Some(Variation::Square { period, duty, low }) => {
            LinkSchedule::square(base, link_config(low, dir)?, *period, *duty)
        }
    };
    plan.map(LinkPlan::Scheduled).map_err(|e| e.to_string())
}

/// The link model's configuration for a profile. `hold_extra` adds to the delay: the packet
/// is held that much longer, and counts against netem's limit for that much longer.
pub fn link_config(p: &LinkProfile, dir: Option<&Path>) -> Result<LinkConfig, String> {
    let delivery = match &p.delivery {
        None => None,
        Some(DeliveryDecl::Millis(ms)) => Some(Arc::new(
            DeliveryTrace::from_millis(ms).map_err(|e| e.to_string())?,
        )),
        Some(DeliveryDecl::File(f)) => {
            let dir = dir.ok_or("a built-in scenario has no trace files")?;
            let path = dir.join(f);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read the delivery trace {}: {e}", path.display()))?;
            let t = DeliveryTrace::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            Some(Arc::new(t))
        }
    };
    Ok(LinkConfig {
        delivery,
        rate_bps: p.rate_bps,
        burst_bytes: p.burst_bytes,
        delay: p.delay + p.hold_extra,
        jitter: p.jitter,
        jitter_model: match p.jitter_distribution {
            JitterDistribution::Uniform => JitterModel::Uniform,
            JitterDistribution::Normal => JitterModel::Normal { reorder: false },
            JitterDistribution::NormalReorder => JitterModel::Normal { reorder: true },
            JitterDistribution::Pareto => JitterModel::Pareto { reorder: false },
            JitterDistribution::ParetoReorder => JitterModel::Pareto { reorder: true },
            JitterDistribution::ParetoNormal => JitterModel::ParetoNormal { reorder: false },
            JitterDistribution::ParetoNormalReorder => JitterModel::ParetoNormal { reorder: true },
        },
        loss: match p.loss {
            LossDecl::None => LossModel::None,
            LossDecl::Random(x) => LossModel::Bernoulli(x),
            LossDecl::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => LossModel::GilbertElliott {
                p_good_to_bad: p,
                p_bad_to_good: r,
                loss_in_good: loss_good,
                loss_in_bad: loss_bad,
            },
        },
        reorder: p.reorder,
        reorder_delay: p.reorder_delay,
        duplicate: p.duplicate,
        queue_limit_bytes: p.queue_bytes,
        queue_limit_packets: p.queue_packets,
        netem_limit: p.netem_limit,
    })
}

/// A simulation built from a scenario point, and what is needed to read its video flows'
/// frames afterwards: (flow index, its frame map).
pub struct Built {
    pub sim: Sim,
    pub videos: Vec<(usize, SharedFrames)>,
}

/// Flow `k`'s seed in a point seeded `seed`: both modes seed the flow's sessions from it.
pub(crate) fn flow_seed(seed: u64, k: usize) -> u64 {
    derive_seed(seed, 1_000_000 + k as u64)
}

/// The seed of a flow's first receiver (each next one's is one more, in both modes).
pub(crate) fn receivers_seed(flow_seed: u64) -> u64 {
    flow_seed ^ 0x5eed
}

/// The simulation of one point, seeded with `seed`; the flows in declaration order. `dir`:
/// the scenario file's directory, for relative trace files.
pub fn build(s: &Scenario, seed: u64, dir: Option<&Path>) -> Result<Built, String> {
    let mut videos = Vec::new();
    let trace = TraceLevel::of(s.trace.csv, s.trace.pcap);
    let mut sim = Sim::with_topology(topology(s, seed, dir)?, trace);
    let node = |sim: &Sim, name: &str| {
        sim.net()
            .topology()
            .node_by_name(name)
            .ok_or_else(|| format!("no node '{name}'"))
    };
    for (i, f) in s.flows.iter().enumerate() {
        let src = node(&sim, &f.from)?;
        let receivers =
            f.to.iter()
                .map(|r| node(&sim, r))
                .collect::<Result<Vec<_>, _>>()?;
        let flow_seed = flow_seed(seed, i);
        match &f.kind {
            FlowKind::Command { .. } => {
                return Err(format!(
                    "flow '{}' runs a program (kind = \"command\"), and programs run only on real sockets: use --mode emu (as root)",
                    f.name
                ))
            }
            FlowKind::Udp { payload, rate } => {
                sim.add_flow(Box::new(udp(s, f, src, receivers, *payload, *rate)));
            }
            FlowKind::Rtp { .. } => {
                let plan = RtpPlan::of(f, dir).expect("an RTP flow");
                let (flow, frames) = rtp(s, f, src, receivers, plan, flow_seed)?;
                sim.add_flow(Box::new(flow));
                if let Some(map) = frames {
                    videos.push((i, map));
                }
            }
            FlowKind::Tcp {
                cc,
                bytes,
                rate_bps,
                mtu,
                initial_window,
                max_window,
                delayed_ack,
            } => {
                let own = smoltcp_initial_window(*mtu);
                if let Some(w) = initial_window.filter(|&w| w != own) {
                    return Err(format!(
                        "flow '{}': initial_window = {w}: the simulator's TCP (smoltcp) starts with 2,048 bytes whatever it is told, {own} segment(s) at this mtu; use initial_window = {own} here, or run it on real sockets (--mode emu, as root), where the kernel takes it",
                        f.name
                    ));
                }
                sim.add_flow(Box::new(TcpFlow::new(TcpFlowConfig {
                    name: f.name.clone(),
                    src,
                    dst: receivers[0],
                    congestion: match cc {
                        TcpCc::Reno => TcpCongestion::Reno,
                        TcpCc::Cubic => TcpCongestion::Cubic,
                    },
                    bytes: *bytes,
                    app_rate_bps: *rate_bps,
                    start: f.start,
                    duration: f.duration,
                    // Windows up to 4 MiB: above 100 Mbit/s × 300 ms.
                    buffer_bytes: 4 << 20,
                    max_window: *max_window,
                    delayed_ack: *delayed_ack,
                    mtu: mtu.map_or(metronome_sim::flows::tcp::DEFAULT_MTU, |m| m as usize),
                    interval: s.interval,
                    seed: flow_seed,
                })));
            }
        }
    }
    Ok(Built { sim, videos })
}

/// The scenario's nodes and links, seeded with `seed`: the network both modes build from (the
/// simulator's links and the emulator's, the routes and multicast trees of both). Each
/// directed link gets its plan in declaration order, `a → b` then `b → a`.
pub fn topology(s: &Scenario, seed: u64, dir: Option<&Path>) -> Result<Topology, String> {
    let mut topology = Topology::new(seed);
    for n in &s.nodes {
        topology.add_node(n.clone());
    }
    let node = |t: &Topology, name: &str| {
        t.node_by_name(name)
            .ok_or_else(|| format!("no node '{name}'"))
    };
    for l in &s.links {
        let (a, b) = (node(&topology, &l.a)?, node(&topology, &l.b)?);
        for ((from, to), (name, profile)) in [((a, b), &l.ab), ((b, a), &l.ba)] {
            let plan =
                link_plan(profile, dir).map_err(|e| format!("link profile '{name}': {e}"))?;
            if let LinkPlan::Fixed(cfg) = &plan {
                cfg.validate()
                    .map_err(|e| format!("link profile '{name}': {e}"))?;
            }
            topology.add_link(from, to, plan);
        }
    }
    Ok(topology)
}

/// The whole segments in smoltcp's first congestion window (2,048 bytes, its Reno's and
/// CUBIC's `2 × 1024`; smoltcp holds back the rest of a segment, Nagle) at IP packets of
/// `mtu` (1500 by default), at least 1.
pub fn smoltcp_initial_window(mtu: Option<u32>) -> u32 {
    (2048 / mtu.unwrap_or(1500).saturating_sub(40).max(1)).max(1)
}

/// When the run ends: the last flow's end plus the drain time.
pub fn end_time(s: &Scenario) -> Timestamp {
    let last = s
        .flows
        .iter()
        .map(|f| f.start + f.duration)
        .max()
        .unwrap_or_default();
    Timestamp::ZERO + last + s.drain
}

fn udp(
    s: &Scenario,
    f: &FlowDecl,
    src: NodeId,
    receivers: Vec<NodeId>,
    payload: u32,
    rate: RateShape,
) -> UdpFlow {
    UdpFlow::new(UdpFlowConfig {
        name: f.name.clone(),
        src,
        receivers,
        payload_bytes: payload,
        rate: rate_pattern(rate),
        start: f.start,
        duration: f.duration,
        interval: s.interval,
        histograms: s.histograms,
    })
}

/// A scenario's UDP rate as the simulator's flows (and the emulator's sender) pace it.
pub(crate) fn rate_pattern(rate: RateShape) -> RatePattern {
    match rate {
        RateShape::Constant(r) => RatePattern::Constant(r),
        RateShape::Square {
            high_bps,
            low_bps,
            period,
            duty,
        } => RatePattern::Square {
            high_bps,
            low_bps,
            period,
            duty,
        },
    }
}

pub type Frames = Option<SharedFrames>;

/// Bytes an RTP packet of MPEG-TS takes beyond its TS packets, as the lab sends it: the RTP
/// header, the send-time extension, IPv4 and UDP.
pub const RTP_TS_OVERHEAD: usize =
    12 + metronome_wire::rtp::SEND_TIME_EXT_LEN + metronome_time::IPV4_UDP_OVERHEAD;

/// TS packets per RTP packet within an IP packet of `mtu` bytes (7 without one).
pub fn ts_per_packet(mtu: Option<u32>) -> usize {
    mtu.map_or(7, |m| {
        ((m as usize).saturating_sub(RTP_TS_OVERHEAD) / 188).clamp(1, 7)
    })
}

/// What an RTP flow sends and how its rate is decided: the same for the simulator and the
/// real-time driver.
#[derive(Clone, Debug)]
pub struct RtpPlan {
    pub rate_bps: u64,
    /// The picture and what it shows (a file's path made absolute).
    pub video: Option<(VideoDecl, VideoContent)>,
    pub cc: RtpCc,
    pub start_bps: Option<u64>,
    pub ts_per_packet: usize,
    pub gop: Option<u32>,
    pub coded: Option<CodedVideo>,
    pub mtu: Option<u32>,
    /// The sender's and receivers' minimum RTCP interval.
    pub rtcp_interval: Duration,
    /// The send-time header extension packets carry. MPEG-TS flows carry the NTP time (16
    /// bytes), which receivers on real sockets read one-way delay from. A ladder's video
    /// carries none, as Evalvid-RA's packets carry none (payloads of `mtu − 40` bytes: seed
    /// 002's 978 at 1018; delays count from each packet's due time), except under TFRC or
    /// TFMCC, whose receivers need each packet's send time (RFC 5348 §3.2.1, RFC 4654 §2.2.1: the
    /// protocols' own data header has it; ns-2's costs no bytes): abs-send-time, 8 bytes, so
    /// 970-byte payloads at 1018.
    pub send_time: SendTimeExt,
    /// How viewers get lost packets back, and their play-out deadline (which repairs need).
    pub repair: Repair,
    pub playout_deadline: Option<Duration>,
}

/// A viewer's repair settings for a flow that repairs (`repair` with a play-out deadline):
/// asking for retransmissions on [`RTX_PAYLOAD_TYPE`] that can make the deadline, rebuilding
/// from FEC, or both. A flow to more than one viewer goes to a group: its viewers dither
/// their NACKs ([`NackConfig::group`]) and hear the sender's TLLEIs. Both modes' viewers take
/// these.
pub fn viewer_repair(
    repair: Repair,
    playout: Option<Duration>,
    viewers: usize,
) -> Option<ReceiverRepair> {
    let playout = playout?;
    let mut r = match repair {
        Repair::None => return None,
        Repair::Rtx => ReceiverRepair::new(RTX_PAYLOAD_TYPE, playout),
        Repair::Fec(_) => ReceiverRepair::fec(playout),
        Repair::RtxFec(_) => ReceiverRepair::new(RTX_PAYLOAD_TYPE, playout).with_fec(),
    };
    if viewers > 1 {
        r.nack = NackConfig::group(viewers.min(u32::MAX as usize) as u32, 0);
    }
    Some(r)
}

/// A flow's repairs: the sender's retransmissions and FEC, and its viewers' settings.
#[derive(Clone, Debug, Default)]
pub struct FlowRepairs {
    /// Retransmissions, with `repair = "rtx"`.
    pub rtx: Option<SenderRepair>,
    /// SMPTE 2022-1 FEC, with `repair = "fec"`.
    pub fec: Option<FecConfig>,
    /// What the viewers do.
    pub viewer: Option<ReceiverRepair>,
}

impl RtpPlan {
    /// The sender's and the viewers' repair settings, if the flow repairs: retransmissions
    /// as SSRC `rtx_ssrc(n.ssrc)`, numbered from a seeded start; a history of
    /// 4 096 packets (4 s at 10 Mbit/s of 1 250-byte packets); the viewers' play-out delay the
    /// flow's deadline, a 100 ms round trip assumed until measured.
    /// FEC over the flow's matrix, of packets of at most 1 500 bytes.
    pub fn repairs(&self, n: &Numbering, viewers: usize) -> FlowRepairs {
        let Some(playout) = self.playout_deadline else {
            return FlowRepairs::default();
        };
        let rtx = StreamIds {
            ssrc: rtx_ssrc(n.ssrc),
            payload_type: RTX_PAYLOAD_TYPE,
        };
        FlowRepairs {
            rtx: self.repair.rtx().then(|| {
                let r = SenderRepair::rtx(rtx, SeqNo(n.seq.get() ^ 0x5a5a), playout, 4096, 1500);
                if viewers > 1 {
                    r.to_group()
                } else {
                    r
                }
            }),
            fec: self.repair.fec().map(FecConfig::new),
            viewer: viewer_repair(self.repair, self.playout_deadline, viewers),
        }
    }

    /// How its rate becomes packets: MPEG-TS counts its TS bits; a ladder's frames count the
    /// whole packet on the wire, at most the MTU.
    pub fn packet_shape(&self) -> PacketShape {
        match self.coded {
            Some(_) => PacketShape::on_the_wire(u64::from(self.mtu.unwrap_or(1500))),
            None => PacketShape::mp2t(self.ts_per_packet, !self.send_time.is_none()),
        }
    }

    /// The plan of flow `f` (`None` if it is not RTP), its content's path resolved against
    /// the scenario's directory `dir`.
    pub fn of(f: &FlowDecl, dir: Option<&Path>) -> Option<RtpPlan> {
        let FlowKind::Rtp {
            rate_bps,
            video,
            ref content,
            cc,
            start_bps,
            mtu,
            gop,
            coded,
            rtcp_interval,
            repair,
            playout_deadline,
            ..
        } = f.kind
        else {
            return None;
        };
        Some(RtpPlan {
            rate_bps,
            video: video.map(|v| (v, resolve(content, dir))),
            cc,
            start_bps,
            ts_per_packet: ts_per_packet(mtu),
            gop,
            coded,
            mtu,
            rtcp_interval,
            repair,
            playout_deadline,
            send_time: match coded {
                None => SendTimeExt::Ntp64,
                Some(_) if cc.receivers_need_send_times() => SendTimeExt::Abs24,
                Some(_) => SendTimeExt::None,
            },
        })
    }

    /// Packets the sender may hold: a ladder sent at its controller's rate keeps what the
    /// rate does not carry in the sender's queue (Evalvid-RA's agent), 4 096 packets (about
    /// 16 s of seed 002's video at 2 Mbit/s); other sources are made only a little ahead.
    pub fn queue_slots(&self) -> usize {
        if self.coded.is_some() && self.cc.sends_at_its_rate() {
            4096
        } else {
            512
        }
    }

    /// Bytes of each packet on the wire beyond its RTP payload: RTP's header, the send-time
    /// extension if it is carried, UDP and IPv4.
    pub fn packet_overhead(&self) -> u32 {
        12 + self.send_time.bytes() as u32 + 28
    }

    /// Where the source starts: the declared rate, or with a controller its `start_rate` (a
    /// quarter of the declared rate by default); the controller's first rate follows at once.
    pub fn start_bps(&self) -> u64 {
        match self.cc {
            RtpCc::Fixed => self.rate_bps,
            _ => self
                .start_bps
                .unwrap_or(self.rate_bps / 4)
                .min(self.rate_bps),
        }
    }
}

/// How a flow's packets are numbered and timed: SSRC, first sequence number, RTP time of the
/// stream's time zero, and that time zero on the driver's clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Numbering {
    pub ssrc: Ssrc,
    pub seq: SeqNo,
    pub rtp_ts_base: RtpTime,
    pub epoch: Timestamp,
}

impl Numbering {
    /// The simulator's: from the flow's seed, far from a wrap (packets are numbered from the
    /// first one sent), from the flow's start.
    fn simulated(seed: u64, f: &FlowDecl) -> Numbering {
        Numbering {
            ssrc: Ssrc(seed as u32 | 1),
            seq: SeqNo(1000 + (seed % 20_000) as u16),
            rtp_ts_base: RtpTime((seed >> 16) as u32),
            epoch: Timestamp::ZERO + f.start,
        }
    }
}

/// What an RTP flow sends, made once for every driver: its packets, its frames (video), and
/// the least it sends on the wire whatever the rate (the rate controller's floor; 0 for a
/// source sent at the controller's rate).
pub struct FlowSource {
    pub source: Box<dyn RtpSource>,
    pub frames: Frames,
    pub floor_bps: u64,
}

/// The flow's rate controller: its ceiling is the declared rate; `segment` is the packet's
/// size on the wire; `floor_bps` the least the source sends (the video's lowest rendition, on
/// the wire; 0 if it is sent at the controller's rate), below which the controller never
/// goes.
fn controller(
    plan: &RtpPlan,
    segment: u32,
    floor_bps: u64,
    epoch: Timestamp,
) -> Box<dyn RateController> {
    let max = Bitrate::bps(plan.rate_bps);
    let min = floor_bps;
    let params = ControllerParams {
        segment_bytes: segment,
        start: Bitrate::bps(plan.start_bps()),
        min: Bitrate::bps(min),
        max,
    };
    plan.cc.build(params, epoch)
}

#[allow(clippy::too_many_arguments)]
/// The ladder flow `f` sends (`v` showing `content`, coded as `coded`): its GOP, as long as
/// the flow; this process's, the cache's, or encoded now.
pub fn flow_ladder(
    f: &FlowDecl,
    v: VideoDecl,
    content: &VideoContent,
    coded: CodedVideo,
    plan: &RtpPlan,
) -> Result<Arc<metronome_media::ladder::Ladder>, String> {
    let gop = plan.gop.unwrap_or(v.fps);
    let frames = (f.duration.as_nanos() * u128::from(v.fps)).div_ceil(1_000_000_000) as u32;
    let spec = crate::ladder::spec(v, content, coded, gop, frames.max(1))?;
    crate::ladder::ladder(spec, v, content).map_err(|e| format!("flow '{}': {e}", f.name))
}

/// A flow's ladder video: the ladder of its content (from the cache, or encoded now), sent as
/// Evalvid-RA sends it; its frame map; its floor on the wire (see [`FlowSource`]).
fn ladder_video(
    f: &FlowDecl,
    v: VideoDecl,
    content: &VideoContent,
    coded: CodedVideo,
    plan: &RtpPlan,
    n: &Numbering,
) -> Result<(Timed<LadderVideo>, SharedFrames, u64), String> {
    let watch = crate::wall::Stopwatch::start();
    let ladder = flow_ladder(f, v, content, coded, plan)?;
    let getting_s = watch.seconds();
    let payloader = crate::ladder::payloader(n.ssrc, n.seq, plan.mtu, plan.send_time);
    // Sent at its controller's rate, the ladder has no floor: what the rate does not carry
    // waits in the sender's queue (Evalvid-RA's agent), in both modes alike.
    let floor = if plan.cc.sends_at_its_rate() {
        0
    } else {
        crate::ladder::floor_bps(&ladder, payloader.max_payload, plan.packet_overhead())
    };
    let map = Arc::new(Mutex::new(FrameMap {
        picture: Some(v),
        content: content.clone(),
        // Encoding the ladder (or reading it from the cache) is the video's work too.
        making_s: getting_s,
        ladder_s: getting_s,
        ..FrameMap::default()
    }));
    let cfg = LadderSourceConfig {
        payloader,
        rtp_ts_base: n.rtp_ts_base,
        overhead_per_packet: plan.packet_overhead(),
        reference_q: coded.quantizers.0,
        max_bps: plan.rate_bps as f64,
        epoch: n.epoch,
        send_at_rate: plan.cc.sends_at_its_rate(),
    };
    let source = Timed {
        inner: LadderVideo::new(ladder, cfg, map.clone()).with_floor(floor),
        frames: map.clone(),
    };
    Ok((source, map, floor))
}

/// A scenario's content with a file's path made absolute against the scenario's directory.
pub fn resolve(content: &VideoContent, dir: Option<&Path>) -> VideoContent {
    match (content, dir) {
        (VideoContent::File(p), Some(d)) if p.is_relative() => VideoContent::File(d.join(p)),
        _ => content.clone(),
    }
}

/// What flow `f` sends, numbered and timed by `n`: constant-rate MPEG-TS, the encoded test
/// pattern in MPEG-TS (its frames noted), or a ladder's frames as coded (see
/// [`crate::ladder`]). The simulator and the real-time driver both send this.
pub fn flow_source(f: &FlowDecl, plan: &RtpPlan, n: &Numbering) -> Result<FlowSource, String> {
    let rate_bps = plan.start_bps();
    let k = plan.ts_per_packet;
    let ts_interval = Duration::from_nanos(188 * 8 * 1_000_000_000 / rate_bps.max(1));
    let packets = match plan.cc {
        RtpCc::Fixed => {
            (f.duration.as_nanos() / (ts_interval.as_nanos() * k as u128).max(1)) as usize
        }
        // A followed source runs for the flow's duration at whatever rate it is given.
        _ => usize::MAX,
    };
    let epoch = n.epoch;
    let pcfg = PacketizerConfig {
        send_time_ext: !plan.send_time.is_none(),
        ts_per_packet: k,
        ..PacketizerConfig::mp2t(n.ssrc, n.seq, n.rtp_ts_base)
    };
    let ts_floor = || {
        let ts_share = (k * 188) as f64 / (k * 188 + RTP_TS_OVERHEAD) as f64;
        (metronome_media::testsrc::MIN_RATE as f64 / ts_share) as u64
    };
    Ok(match (&plan.video, plan.coded) {
        (None, _) => FlowSource {
            source: Box::new(
                CbrTs::new(pcfg, epoch, ts_interval, packets).until(epoch + f.duration),
            ),
            frames: None,
            floor_bps: 0,
        },
        (Some((v, content)), None) => {
            let (src, map) =
                crate::video::test_video(*v, content, rate_bps, f.duration, plan.gop, pcfg, epoch)
                    .map_err(|e| format!("flow '{}': {e}", f.name))?;
            FlowSource {
                source: Box::new(src),
                frames: Some(map),
                floor_bps: ts_floor(),
            }
        }
        (Some((v, content)), Some(coded)) => {
            let (src, map, floor) = ladder_video(f, *v, content, coded, plan, n)?;
            FlowSource {
                source: Box::new(src),
                frames: Some(map),
                floor_bps: floor,
            }
        }
    })
}

/// When the flow's receivers join and leave its group, by their index in `f.to`.
fn member_windows(f: &FlowDecl) -> Vec<MemberWindow> {
    f.membership
        .iter()
        .filter_map(|m| {
            Some(MemberWindow {
                receiver: f.to.iter().position(|n| *n == m.node)?,
                join: Timestamp::ZERO + m.join,
                leave: m.leave.map(|l| Timestamp::ZERO + l),
            })
        })
        .collect()
}

/// An MPEG-TS stream through the engine's sender session: `ts_per_packet` TS packets per RTP
/// packet, the send-time extension on (`RtpPlan::send_time`), a 2 ms deadline per packet. The TS is made of
/// placeholder packets at a constant rate, or with `video` is the encoded test pattern (whose
/// frames are kept). With a rate controller the source follows it (the constant-rate TS from
/// its next packet, the video from its next GOP), made at most 200 ms ahead, as the real
/// driver's producer.
fn rtp(
    s: &Scenario,
    f: &FlowDecl,
    src: NodeId,
    receivers: Vec<NodeId>,
    plan: RtpPlan,
    seed: u64,
) -> Result<(RtpFlow, Frames), String> {
    let n = Numbering::simulated(seed, f);
    let (ssrc, epoch) = (n.ssrc, n.epoch);
    // The controller's packet size: as the real-time server gives it (a TS packet's wire
    // bytes, or a ladder's whole packet, at most the MTU).
    let segment = plan.packet_shape().wire_bytes as u32;
    let repairs = plan.repairs(&n, receivers.len());
    let FlowSource {
        source,
        frames,
        floor_bps,
    } = flow_source(f, &plan, &n)?;
    // Full histograms for a handful of receivers; none in the sessions of a crowd (the
    // simulator's own meter still measures their delay and jitter).
    let histogram_digits = if s.histograms && receivers.len() <= 64 {
        3
    } else {
        0
    };
    let session = SenderSessionConfig {
        reports: SenderReportsConfig {
            ssrc,
            cname: f.name.clone(),
            clock: MediaClock::VIDEO_90K,
            rtp_ts_base: n.rtp_ts_base,
            session_bw_bps: plan.rate_bps,
            rtcp_min_interval: plan.rtcp_interval,
            max_receivers: receivers.len().max(1),
            seed,
        },
        pacing: PacingConfig::default(),
        jobs: JobConfig {
            period: None,
            deadline: Duration::from_millis(2),
        },
        queue_capacity: plan.queue_slots(),
    };
    let flow = RtpFlow::new(
        RtpFlowConfig {
            name: f.name.clone(),
            src,
            receivers,
            session,
            receiver: ReceiverConfig {
                // A ladder's video is MPEG-4 or H.264 over RTP, not MPEG-TS.
                payload: if plan.coded.is_some() {
                    PayloadKind::Any
                } else {
                    PayloadKind::Mp2t
                },
                session_bw_bps: plan.rate_bps,
                seed: receivers_seed(seed),
                histogram_digits,
                cc: plan.cc.receiver(),
                rtcp_min_interval: plan.rtcp_interval,
                repair: repairs.viewer,
                ..ReceiverConfig::default()
            },
            epoch,
            send_time_ext: !plan.send_time.is_none(),
            slot_size: 1500,
            stalls: Vec::new(),
            ip_overhead: metronome_time::IPV4_UDP_OVERHEAD as u32,
            interval: s.interval,
            histograms: s.histograms,
            log: false,
            track_arrivals: frames.is_some(),
            lookahead: (plan.cc != RtpCc::Fixed).then_some(Duration::from_millis(200)),
            membership: member_windows(f),
            repair: repairs.rtx,
            fec: repairs.fec,
        },
        source,
        controller(&plan, segment, floor_bps, epoch),
    );
    Ok((flow, frames))
}

#[cfg(test)]
mod tests {
    use metronome_config::scenario::ScenarioFile;

    fn built(initial_window: u32) -> Result<(), String> {
        let text = format!(
            "name = \"t\"\n[links.l]\nrate = \"10mbit\"\n[topology]\nshape = \"chain\"\n\
             nodes = [\"a\", \"b\"]\nlink = \"l\"\n[[flow]]\nname = \"tcp\"\nkind = \"tcp\"\n\
             from = \"a\"\nto = \"b\"\ninitial_window = {initial_window}\n"
        );
        let f = ScenarioFile::parse(&text, "t.toml").map_err(|e| e.to_string())?;
        let s = f.resolve(&f.points()[0]).map_err(|e| e.to_string())?;
        super::build(&s, 1, None).map(|_| ())
    }

    /// The simulator's TCP starts from smoltcp's 2,048 bytes whatever it is told: it takes
    /// the initial window that is (one segment at the default 1500-byte packets, two at
    /// seed 002's 1040) and says why it cannot take another.
    #[test]
    fn the_simulators_tcp_takes_only_smoltcps_own_initial_window() {
        assert_eq!(super::smoltcp_initial_window(None), 1);
        assert_eq!(super::smoltcp_initial_window(Some(1040)), 2);
        built(1).expect("one segment of 1460 bytes");
        let e = built(10).expect_err("smoltcp cannot start from ten");
        assert!(
            e.contains("initial_window = 10") && e.contains("use initial_window = 1"),
            "{e}"
        );
    }
}
