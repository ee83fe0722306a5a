//! [`RawSender`]: one uncompressed video stream (RFC 4175) paced to one destination.
//!
//! Three threads: the producer (an ordinary thread) reads or renders each frame, stamps its
//! capture time and payloads it into a ring slot; the pacer (a pacing core with the stream as
//! its one lane, [`super::stream`], real-time where permitted) sends it by the chosen model;
//! the calling thread runs RTCP and reports status.

use super::out::RawOut;
use super::report::{BufferInfo, RawSenderOutcome, RawSenderStatus};
use super::ring::{FrameRing, FrameSlot};
use super::stream::{thread_config, PacerCounters, PacerResult, PacerSettings, RawStreamRt};
use crate::clock::{process_cpu_s, thread_cpu_s, Clock};
use crate::pacing_thread::{PacingThreadConfig, PacingThreadReport};
use crate::sender::WaitPolicy;
use crate::streams::core::{Command, Core, CoreConfig, CoreShared};
use crate::streams::rtcp::{exchange, say_bye};
use crate::streams::stream::lock;
use crate::streams::RtcpOut;
use crate::streams::{Calibration, RawAdmission, StreamServer};
use crate::thread::RtPolicy;
use crate::udp::GSO_MAX_SEGMENTS;
use crate::udp::{
    wanted_for, FastSender, GsoStatus, RtcpSocket, SendPath, SocketOptions, UdpError,
};
use crate::url::RtpUrl;
use crate::wait::WaiterConfig;
use metronome_cc::FixedRate;
use metronome_media::raw::{RawFrame, RawSource, VideoFormat};
use metronome_media::MediaError;
use metronome_sched::st2110::FrameRate;
use metronome_sched::st2110::{frame_task, SendCosts};
use metronome_sched::{
    FrameFormat, FrameSchedule, LatePolicy, PacingConfig, Policy, SenderType, TaskParams,
    WaitSelectorConfig,
};
use metronome_session::raw::{RawPayError, RawPayloader, RawPayloaderConfig};
use metronome_session::sender::{
    JobConfig, SenderReportsConfig, SenderSession, SenderSessionConfig,
};
use metronome_time::Timestamp;
use metronome_time::{Bitrate, MediaClock};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A frame published with its epoch less than this ahead wakes the pacer at once.
const WAKE_PACER_WITHIN: Duration = Duration::from_millis(2);

/// How often the calling thread looks at the stop flags and RTCP (round-trip times do not
/// suffer: reports carry the kernel's receive time).
const STATUS_TURN: Duration = Duration::from_millis(100);

/// Largest RTP padding (RFC 3550 §5.1: the count is one octet).
const MAX_PADDING: usize = 255;

#[derive(Clone, Debug)]
pub struct RawSenderConfig {
    pub destination: RtpUrl,
    pub ssrc: u32,
    /// Seeds the initial sequence number and RTP timestamp.
    pub seed: u64,
    pub payload_type: u8,
    pub model: SenderType,
    /// Bytes of RTP payload per packet at most (1428 fits a 1500-byte MTU; up to 65 000, which
    /// the kernel fragments).
    pub max_payload: usize,
    /// Packets due within this window after the one waited for leave in the same GSO call.
    pub batch_window: Duration,
    /// A frame whose send calls start later than this after they were due counts as late.
    pub late_threshold: Duration,
    /// Pad packets to one size so that batches go out with UDP GSO.
    pub pad_for_gso: bool,
    /// UDP GSO (else `sendmmsg`).
    pub gso: bool,
    pub send_time_ext: bool,
    pub rt_policy: RtPolicy,
    pub wait: WaitPolicy,
    pub waiter: WaiterConfig,
    pub wait_selector: WaitSelectorConfig,
    pub pacer_cpu: Option<usize>,
    pub lock_memory: bool,
    /// Frames whose epoch is this long after the first one's are not sent.
    pub duration: Option<Duration>,
    pub frames: Option<u64>,
    /// Time from start-up to the first frame's epoch.
    pub preroll: Duration,
    /// Frames between producer and pacer.
    pub ring_frames: usize,
    /// A live source: produce each frame only `produce_lead` before its epoch (a camera does
    /// not have the future). Otherwise (a file) read ahead by up to the ring.
    pub live: bool,
    /// How long before its epoch a live frame is produced; default one frame period, at most
    /// 20 ms.
    pub produce_lead: Option<Duration>,
    /// SO_SNDBUF to ask for; default: a frame's worth or 10 ms at the stream's rate.
    pub send_buffer: Option<usize>,
    /// The first packet's sequence number (an RTSP session resuming after PAUSE continues
    /// its numbering); by default derived from the seed.
    pub initial_seq: Option<u16>,
    /// Send RTCP sender reports to the destination's RTCP port (port + 1) and read the
    /// receivers' reports there ([`RawSender::open`] only; an RTSP session brings its own).
    pub rtcp: bool,
    /// The RTCP CNAME.
    pub cname: String,
    /// What is done with late frames; by default a frame whose first packet would leave a
    /// frame period late is dropped whole (ST 2110 receivers want whole frames on time).
    pub late: Option<LatePolicy>,
}

impl RawSenderConfig {
    pub fn new(destination: RtpUrl, ssrc: u32, seed: u64) -> Self {
        RawSenderConfig {
            destination,
            ssrc,
            seed,
            payload_type: metronome_session::raw::DEFAULT_PAYLOAD_TYPE,
            model: SenderType::NarrowGapped,
            max_payload: metronome_session::raw::MTU_1500_MAX_PAYLOAD,
            batch_window: Duration::from_micros(20),
            late_threshold: Duration::from_millis(1),
            pad_for_gso: true,
            gso: true,
            send_time_ext: false,
            rt_policy: RtPolicy::Auto,
            wait: WaitPolicy::Auto,
            // Packets are tens of µs apart: a margin above the gap would never sleep, and never
            // learn a smaller one. Start small; the wait selector busy-polls if sleeping is late.
            waiter: WaiterConfig {
                initial_margin_ns: 50_000,
                ..WaiterConfig::default()
            },
            wait_selector: WaitSelectorConfig::default(),
            pacer_cpu: None,
            lock_memory: true,
            duration: None,
            frames: None,
            preroll: Duration::from_millis(200),
            ring_frames: 4,
            live: true,
            produce_lead: None,
            send_buffer: None,
            initial_seq: None,
            rtcp: true,
            cname: "metronome@raw".to_string(),
            late: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RawSendError {
    #[error(transparent)]
    Udp(#[from] UdpError),
    #[error("source: {0}")]
    Media(#[from] MediaError),
    #[error("payloader: {0}")]
    Payload(#[from] RawPayError),
    #[error("could not start the {0} thread: {1}")]
    Thread(&'static str, std::io::Error),
}

/// Where a raw stream is paced.
pub enum RawPlace {
    /// On a pacing core of its own (`serve --raw`, the benchmarks).
    Own,
    /// On the core of a stream server that admitted it (`StreamServer::admit_raw`), sharing
    /// that core with the other streams on it; its admission is given back when it ends.
    Server(Arc<StreamServer>, RawAdmission),
}

/// An opened raw sender: socket ready, buffers allocated, not yet sending.
pub struct RawSender {
    source: Box<dyn RawSource>,
    cfg: RawSenderConfig,
    format: VideoFormat,
    payloader: RawPayloader,
    schedule: FrameSchedule,
    out: RawOut,
    rtcp: Vec<RtcpOut>,
    ring: FrameRing,
    rtp_ts_base: u32,
    first_seq: u16,
}

impl RawSender {
    /// Checks the format and packet size, opens the socket to `cfg.destination` (and its RTCP
    /// socket when `cfg.rtcp`) and allocates the frame ring.
    pub fn open(source: Box<dyn RawSource>, cfg: RawSenderConfig) -> Result<Self, RawSendError> {
        let format = source.format();
        format.validate().map_err(MediaError::from)?;
        let opts = SocketOptions {
            buffer_bytes: send_buffer_for(&format, &cfg)?,
            read_timeout: None,
        };
        let sender = FastSender::open(&cfg.destination, &opts)?;
        let rtcp = if cfg.rtcp {
            let s = RtcpSocket::open_for_sender(&cfg.destination, &SocketOptions::default())?;
            s.socket()
                .set_nonblocking(true)
                .map_err(|e| RawSendError::Udp(UdpError::Socket(e)))?;
            vec![RtcpOut::Udp(Arc::new(s))]
        } else {
            Vec::new()
        };
        Self::open_with(source, cfg, RawOut::Udp(Box::new(sender)), rtcp)
    }

    /// Like [`RawSender::open`], to an output and RTCP the caller opened (an RTSP session's
    /// server ports or its interleaved channels). `cfg.destination` is only shown.
    pub fn open_with(
        source: Box<dyn RawSource>,
        cfg: RawSenderConfig,
        out: RawOut,
        rtcp: Vec<RtcpOut>,
    ) -> Result<Self, RawSendError> {
        let format = source.format();
        format.validate().map_err(MediaError::from)?;
        let pcfg = payloader_config(&format, &cfg);
        let payloader = RawPayloader::new(pcfg, format)?;
        let npackets = payloader.packets_per_frame();
        let stride = payloader.packet_capacity();
        let rate = FrameRate::new(format.fps_num, format.fps_den);
        let ff = FrameFormat::new(rate, npackets as u32, format.height);
        let schedule = FrameSchedule::new(&ff, cfg.model);
        if let (RawOut::Udp(s), false) = (&out, cfg.gso) {
            s.set_path(SendPath::Mmsg);
        }
        let ring = FrameRing::new(cfg.ring_frames.max(2), npackets, stride);
        Ok(RawSender {
            rtp_ts_base: pcfg.rtp_ts_base,
            first_seq: pcfg.initial_seq as u16,
            source,
            cfg,
            format,
            payloader,
            schedule,
            out,
            rtcp,
            ring,
        })
    }

    /// The first packet's sequence number and RTP timestamp (RTSP's RTP-Info).
    pub fn first_packet(&self) -> (u16, u32) {
        (self.first_seq, self.rtp_ts_base)
    }

    pub fn format(&self) -> VideoFormat {
        self.format
    }
    pub fn schedule(&self) -> &FrameSchedule {
        &self.schedule
    }
    pub fn packets_per_frame(&self) -> usize {
        self.payloader.packets_per_frame()
    }
    pub fn buffer(&self) -> BufferInfo {
        self.out.buffer()
    }
    pub fn gso_status(&self) -> GsoStatus {
        self.out.gso_status()
    }
    pub fn describe(&self) -> String {
        self.source.describe()
    }

    /// Sends until the source ends, the frame count or duration is reached, or `stop` is set.
    /// `on_status` is called about once a second.
    pub fn run(
        self,
        stop: Arc<AtomicBool>,
        on_status: impl FnMut(&RawSenderStatus),
    ) -> Result<RawSenderOutcome, RawSendError> {
        self.run_with(Arc::new(RawControl::default()), &stop, on_status)
    }

    /// [`RawSender::run`], watched and stopped through `ctl` as well as `stop` (an RTSP
    /// session's PAUSE and TEARDOWN).
    pub fn run_with(
        self,
        ctl: Arc<RawControl>,
        stop: &AtomicBool,
        on_status: impl FnMut(&RawSenderStatus),
    ) -> Result<RawSenderOutcome, RawSendError> {
        self.run_on(RawPlace::Own, ctl, stop, on_status)
    }

    /// The task admission control sees for this stream (see [`frame_task`]).
    pub fn task(&self, cal: &Calibration) -> TaskParams {
        let costs = SendCosts {
            per_call: cal.per_packet,
            per_job: cal.per_job,
            per_segment: cal.per_segment,
        };
        frame_task(
            &self.schedule,
            self.cfg.batch_window,
            GSO_MAX_SEGMENTS,
            self.payloader.packets_per_frame(),
            self.payloader.packet_capacity(),
            costs,
        )
    }

    /// [`RawSender::run_with`], paced where `place` says: on a pacing core of its own, or as a
    /// lane of a stream server's core it was admitted on (an RTSP session), sharing that core
    /// with every other stream on it.
    pub fn run_on(
        self,
        place: RawPlace,
        ctl: Arc<RawControl>,
        stop: &AtomicBool,
        mut on_status: impl FnMut(&RawSenderStatus),
    ) -> Result<RawSenderOutcome, RawSendError> {
        let (server, admission) = match place {
            RawPlace::Own => (None, None),
            RawPlace::Server(s, a) => (Some(s), Some(a)),
        };
        let RawSender {
            mut source,
            cfg,
            format,
            mut payloader,
            schedule,
            out,
            rtcp,
            ring,
            rtp_ts_base,
            first_seq: _,
        } = self;
        let description = source.describe();
        let packets_per_frame = payloader.packets_per_frame();
        let stride = payloader.packet_capacity();
        // On a server's core, the server's clock: every time the core compares is on it.
        let clock = match &server {
            Some(s) => s.clock(),
            None => Arc::new(Clock::new()),
        };
        let clock = &*clock;
        let cpu0 = process_cpu_s();
        let epoch0 = clock.now() + cfg.preroll;
        let tframe = schedule.format().tframe();
        // Late frames: dropped whole once their first packet is a frame period late (the next
        // frame is due then), unless the user chose otherwise.
        let late = cfg.late.unwrap_or(LatePolicy::DropLate { after: tframe });
        let wire_bps = wire_bitrate(&format, &cfg)?;
        let session = new_session(&cfg, late, wire_bps, packets_per_frame, rtp_ts_base, epoch0);
        let plan = Plan {
            ff: *schedule.format(),
            epoch0,
            end: cfg.duration.map(|d| epoch0 + d),
            frames: cfg.frames,
            live: cfg.live,
            lead: cfg
                .produce_lead
                .unwrap_or(tframe.min(Duration::from_millis(20))),
            pad: cfg.pad_for_gso,
        };
        let settings = PacerSettings {
            batch_window: cfg.batch_window,
            late_threshold: cfg.late_threshold,
            send_time_ext: cfg.send_time_ext,
            late,
        };
        // The pacing thread is a core of its own, running the loop every MPEG-TS stream runs
        // on, with this one stream on it.
        let core_cfg = CoreConfig {
            policy: Policy::Edf,
            thread: thread_config(
                PacingThreadConfig {
                    rt_policy: cfg.rt_policy,
                    wait: cfg.wait,
                    waiter: cfg.waiter,
                    wait_selector: cfg.wait_selector,
                    cpu: cfg.pacer_cpu,
                    lock_memory: cfg.lock_memory,
                },
                &schedule,
            ),
            capacity: 1,
        };
        let core = CoreShared::new(core_cfg.capacity);
        let rt = Arc::new(RawStreamRt::new(
            admission.as_ref().map_or(1, |a| a.id),
            ring,
            out,
            schedule,
            settings,
            ctl.clone(),
            session,
        ));
        let mut rtcp_buf = [0u8; 1500];
        // On a server's core, if it has one for the stream; else on a core of its own.
        let shared = match (&server, &admission) {
            (Some(s), Some(a)) if s.start_raw(a, rt.clone()) => Some((s, a)),
            _ => None,
        };
        let wake = || match shared {
            Some((s, a)) => s.wake_raw(a),
            None => core.wake(),
        };
        let (pacer, produced, ended_by) = std::thread::scope(|scope| {
            let producer = std::thread::Builder::new()
                .name("metronome-raw-producer".into())
                .spawn_scoped(scope, || {
                    // It works a few ms a frame; at the top nice level (where permitted) a busy
                    // machine delays it less.
                    crate::thread::spin_at_top_nice();
                    let cpu = thread_cpu_s();
                    let r = produce(&mut *source, &mut payloader, &rt, &wake, clock, &plan);
                    rt.producer_done.store(true, Ordering::Release);
                    wake();
                    r.map(|why| (why, thread_cpu_s() - cpu))
                })
                .map_err(|e| RawSendError::Thread("producer", e))?;
            let pacer = if shared.is_none() {
                let h = std::thread::Builder::new()
                    .name("metronome-raw-pacer".into())
                    .spawn_scoped(scope, || {
                        let mut pacer = Core::new(&core_cfg, &core, clock);
                        // The table has room for it: the command cannot be refused.
                        let _ = core.commands.push(Command::AddRaw(rt.clone()));
                        while !rt.finished.load(Ordering::Acquire) {
                            pacer.step();
                        }
                        PacerResult::new(&rt, pacer.finish())
                    })
                    .map_err(|e| RawSendError::Thread("pacer", e))?;
                Some(h)
            } else {
                None
            };
            let mut next_status = epoch0 + Duration::from_secs(1);
            while !rt.finished.load(Ordering::Acquire) {
                if stop.load(Ordering::Relaxed) || ctl.stop.load(Ordering::Relaxed) {
                    rt.stop.store(true, Ordering::Release);
                    wake();
                }
                std::thread::sleep(STATUS_TURN);
                if !rtcp.is_empty() {
                    exchange(&rt.session, &rtcp, clock, &mut rtcp_buf);
                }
                let heard = lock(&rt.session)
                    .reports()
                    .receivers()
                    .iter()
                    .map(|r| r.reports)
                    .sum();
                ctl.receiver_reports.store(heard, Ordering::Relaxed);
                let now = clock.now();
                if now >= next_status {
                    next_status = now + Duration::from_secs(1);
                    on_status(&status(&ctl.counters, now.saturating_since(epoch0)));
                }
            }
            rt.stop.store(true, Ordering::Release);
            let pacer = match pacer {
                Some(h) => h.join().expect("the raw pacer does not panic"),
                None => {
                    let grant = shared
                        .map(|(s, a)| {
                            let c = a.core.unwrap_or(0);
                            format!("shared pacing core {c}: {}", s.core_grant(c))
                        })
                        .unwrap_or_default();
                    PacerResult::new(&rt, PacingThreadReport::shared(grant))
                }
            };
            let produced = producer.join().expect("the raw producer does not panic");
            let ended_by = if stop.load(Ordering::Relaxed) || ctl.stop.load(Ordering::Relaxed) {
                "stopped"
            } else {
                match &produced {
                    Ok((why, _)) => *why,
                    Err(_) => "error",
                }
            };
            Ok::<_, RawSendError>((pacer, produced, ended_by))
        })?;
        if let (Some(s), Some(a)) = (server, admission) {
            s.end_raw(a, &rt);
        }
        let (_, producer_cpu_s) = produced?;
        // A paused RTSP session's source is not leaving: no BYE then (RFC 3550 §6.6).
        if !ctl.quiet.load(Ordering::Relaxed) && !rtcp.is_empty() {
            say_bye(&rt.session, &rtcp, clock, &mut rtcp_buf);
        }
        let end = clock.now();
        let cpu_s = process_cpu_s() - cpu0;
        Ok(outcome(Finished {
            cfg: &cfg,
            format,
            schedule,
            rt: &rt,
            description,
            packets_per_frame,
            stride,
            duration_s: end.saturating_since(epoch0).as_secs_f64(),
            cpu_s,
            producer_cpu_s,
            ended_by,
            counters: &ctl.counters,
            pacer,
        }))
    }
}

/// The stream's sender session: RTCP at 1 s, `late` for late batches, a job per batch due
/// within the late threshold, a queue for one frame's batches, at the stream's wire rate.
fn new_session(
    cfg: &RawSenderConfig,
    late: LatePolicy,
    wire_bps: u64,
    packets_per_frame: usize,
    rtp_ts_base: u32,
    epoch0: Timestamp,
) -> SenderSession {
    SenderSession::new(
        SenderSessionConfig {
            reports: SenderReportsConfig {
                ssrc: cfg.ssrc,
                cname: cfg.cname.clone(),
                clock: MediaClock::VIDEO_90K,
                rtp_ts_base,
                session_bw_bps: wire_bps,
                // 1 s, as the MPEG-TS streams: RFC 3550 §6.2 allows a reduced minimum, and at
                // raw rates RTCP's 5% share is never the limit.
                rtcp_min_interval: Duration::from_secs(1),
                max_receivers: 64,
                seed: cfg.seed,
            },
            pacing: PacingConfig {
                late,
                ..PacingConfig::default()
            },
            jobs: JobConfig {
                period: None,
                deadline: cfg.late_threshold,
            },
            queue_capacity: packets_per_frame,
        },
        epoch0,
        Box::new(FixedRate::new(Bitrate::bps(wire_bps))),
    )
}

/// How the payloader is set up for `cfg`.
fn payloader_config(format: &VideoFormat, cfg: &RawSenderConfig) -> RawPayloaderConfig {
    let mut pcfg = RawPayloaderConfig::new(cfg.ssrc, format);
    pcfg.payload_type = cfg.payload_type;
    pcfg.initial_seq = match cfg.initial_seq {
        // The extended sequence number's low 16 bits are the RTP header's.
        Some(seq) => u32::from(seq),
        None => (cfg.seed >> 16) as u32,
    };
    pcfg.rtp_ts_base = (cfg.seed as u32).rotate_left(7) ^ cfg.ssrc;
    pcfg.max_payload = cfg.max_payload;
    pcfg.capture_time_ext = true;
    pcfg.send_time_ext = cfg.send_time_ext;
    pcfg
}

/// Packets a frame and datagram size (padded) of a stream of `format` sent as `cfg` says.
pub fn wire_geometry(
    format: &VideoFormat,
    cfg: &RawSenderConfig,
) -> Result<(usize, usize), RawSendError> {
    let p = RawPayloader::new(payloader_config(format, cfg), *format)?;
    Ok((p.packets_per_frame(), p.packet_capacity()))
}

/// Bits per second on the wire (RTP headers and padding included, IP/UDP not).
pub fn wire_bitrate(format: &VideoFormat, cfg: &RawSenderConfig) -> Result<u64, RawSendError> {
    let (n, stride) = wire_geometry(format, cfg)?;
    Ok((n as u128 * stride as u128 * 8 * u128::from(format.fps_num)
        / u128::from(format.fps_den.max(1))) as u64)
}

/// SO_SNDBUF to ask for: `cfg.send_buffer`, or a frame's worth or 10 ms at the stream's rate.
pub fn send_buffer_for(format: &VideoFormat, cfg: &RawSenderConfig) -> Result<usize, RawSendError> {
    if let Some(b) = cfg.send_buffer {
        return Ok(b);
    }
    let (n, stride) = wire_geometry(format, cfg)?;
    Ok(wanted_for(
        wire_bitrate(format, cfg)?,
        n * stride,
        Duration::from_millis(10),
    ))
}

/// What other threads see of a running raw sender, and how they stop it (an RTSP session's
/// PAUSE and TEARDOWN).
#[derive(Default)]
pub struct RawControl {
    /// Set to stop; the sender ends after the frame it is sending.
    pub stop: AtomicBool,
    /// Stop without RTCP BYE (a pause: the source is not leaving).
    pub quiet: AtomicBool,
    /// What the pacer has sent so far.
    pub counters: PacerCounters,
    /// RTCP receiver reports heard so far (liveness of an RTSP session).
    pub receiver_reports: AtomicU64,
}

fn status(c: &PacerCounters, elapsed: Duration) -> RawSenderStatus {
    RawSenderStatus {
        elapsed,
        frames: c.frames.load(Ordering::Relaxed),
        packets: c.packets.load(Ordering::Relaxed),
        bytes: c.bytes.load(Ordering::Relaxed),
        late_frames: c.late_frames.load(Ordering::Relaxed),
        max_late_us: c.max_late_ns.swap(0, Ordering::Relaxed) as f64 / 1000.0,
    }
}

/// What the producer needs to know about the stream's timing.
struct Plan {
    ff: FrameFormat,
    epoch0: Timestamp,
    end: Option<Timestamp>,
    frames: Option<u64>,
    live: bool,
    lead: Duration,
    pad: bool,
}

/// The producer: frames from the source, stamped and payloaded into ring slots, in order.
/// Returns why it stopped.
///
/// A [self-timed](RawSource::self_timed) source (a camera) is not held to the frame grid:
/// `next_frame` blocks until a frame is captured and stamps its capture time itself, and the
/// frame's epoch is the instant it is ready, so the pacer starts sending it at once under the
/// chosen model. The duration then counts on the clock rather than on the grid.
fn produce(
    source: &mut dyn RawSource,
    pay: &mut RawPayloader,
    rt: &RawStreamRt,
    wake: &dyn Fn(),
    clock: &Clock,
    plan: &Plan,
) -> Result<&'static str, RawSendError> {
    let ring = &rt.ring;
    let mut frame = RawFrame::new(source.format());
    let self_timed = source.self_timed();
    let mut n = 0u64;
    loop {
        if rt.stop.load(Ordering::Relaxed) {
            return Ok("stopped");
        }
        if plan.frames.is_some_and(|f| n >= f) {
            return Ok("frames");
        }
        let epoch = if self_timed {
            clock.now()
        } else {
            plan.ff.frame_epoch(plan.epoch0, n)
        };
        if plan.end.is_some_and(|end| epoch >= end) {
            return Ok("duration");
        }
        let Some(mut slot) = take_free(ring, &rt.stop) else {
            return Ok("stopped");
        };
        if plan.live
            && !self_timed
            && !sleep_until(clock, epoch.saturating_sub(plan.lead), &rt.stop)
        {
            ring.give_back(slot);
            return Ok("stopped");
        }
        if !source.next_frame(&mut frame)? {
            ring.give_back(slot);
            return Ok("end of input");
        }
        frame.index = n;
        if !self_timed {
            frame.capture_ns = clock.realtime_ns_from_timestamp(epoch);
        }
        if let Err(e) = payload_into(pay, &frame, &mut slot, plan.pad) {
            ring.give_back(slot);
            return Err(e.into());
        }
        let ready = clock.now();
        slot.index = n;
        slot.epoch = if self_timed { ready } else { epoch };
        // The pacer sleeps until the next frame on the grid is due; it needs waking only for a
        // frame that is (nearly) due already: a camera's, or one produced late.
        let wake_pacer = slot.epoch <= ready + WAKE_PACER_WITHIN;
        slot.capture_ns = frame.capture_ns;
        slot.ready_at = ready;
        ring.publish(slot);
        if wake_pacer {
            wake();
        }
        n += 1;
    }
}

/// A free slot, waiting while the ring is full; `None` if stopped meanwhile.
fn take_free(ring: &FrameRing, stop: &AtomicBool) -> Option<FrameSlot> {
    loop {
        if let Some(s) = ring.take_free() {
            return Some(s);
        }
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sleeps until `t` in steps of at most 50 ms; false if stopped meanwhile.
fn sleep_until(clock: &Clock, t: Timestamp, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = t.saturating_since(clock.now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// Writes every packet of `frame` into `slot`, padding all but the last to the slot's stride
/// (RFC 3550 §5.1) when `pad`, so that the frame is uniform for GSO.
fn payload_into(
    pay: &mut RawPayloader,
    frame: &RawFrame,
    slot: &mut FrameSlot,
    pad: bool,
) -> Result<(), RawPayError> {
    let stride = slot.stride();
    let mut packets = pay.begin_frame(frame)?;
    let (mut i, mut payload, mut uniform) = (0, 0u64, true);
    // The slot was sized by `packets_for` for this payloader, so it has room for every packet.
    while let Some(room) = slot.room_mut(i) {
        let Some(info) = packets.next_packet(room)? else {
            break;
        };
        let mut len = info.len;
        if !info.marker && len < stride {
            if pad && stride - len <= MAX_PADDING {
                add_padding(room, len);
                len = stride;
            } else {
                uniform = false;
            }
        }
        slot.set_len(i, len);
        payload += info.payload_len as u64;
        i += 1;
    }
    slot.npackets = i;
    slot.uniform = uniform;
    slot.payload_bytes = payload;
    Ok(())
}

/// Pads the RTP packet of `len` bytes at the start of `room` to the whole of `room` (at most
/// 255 more bytes): P bit set, zeros, and the padding count in the last octet (RFC 3550 §5.1).
fn add_padding(room: &mut [u8], len: usize) {
    let total = room.len();
    let pad = total - len;
    room[len..total - 1].fill(0);
    room[total - 1] = pad as u8;
    room[0] |= 0x20;
}

struct Finished<'a> {
    cfg: &'a RawSenderConfig,
    format: VideoFormat,
    schedule: FrameSchedule,
    rt: &'a RawStreamRt,
    description: String,
    packets_per_frame: usize,
    stride: usize,
    duration_s: f64,
    cpu_s: f64,
    producer_cpu_s: f64,
    ended_by: &'static str,
    counters: &'a PacerCounters,
    pacer: PacerResult,
}

fn outcome(f: Finished<'_>) -> RawSenderOutcome {
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
        model: super::model_name(f.cfg.model),
        packet_size: f.cfg.max_payload,
        packets_per_frame: f.packets_per_frame,
        datagram_bytes: f.stride,
        frame_bytes: f.format.frame_bytes(),
        realtime: p.grant,
        memory_locked: p.memory,
        wait_mode: f.cfg.wait.name().to_string(),
        ended_by: f.ended_by,
        duration_s: f.duration_s,
        frames_sent: frames,
        packets_sent: packets,
        bytes_sent: bytes,
        late_frames: c.late_frames.load(Ordering::Relaxed),
        late_threshold_us: f.cfg.late_threshold.as_secs_f64() * 1e6,
        frames_not_ready: p.stats.frames_not_ready,
        send_errors: p.stats.send_errors,
        last_send_error: p.stats.last_send_error,
        pps: per_s(packets as f64),
        bitrate_bps: per_s(bytes as f64 * 8.0),
        cpu_s: f.cpu_s,
        pacer_cpu_s: p.cpu_s,
        producer_cpu_s: f.producer_cpu_s,
        cpu_per_frame_us: if frames > 0 {
            f.cpu_s * 1e6 / frames as f64
        } else {
            0.0
        },
        send_lateness: p.stats.send_lateness.summary(),
        batch_lateness: p.stats.batch_lateness.summary(),
        frame_send_time: p.stats.frame_send_time.summary(),
        spread_ms: f.schedule.spread().as_secs_f64() * 1e3,
        first_packet_offset_ms: f.schedule.offset(0).as_secs_f64() * 1e3,
        batch_window_us: f.cfg.batch_window.as_secs_f64() * 1e6,
        batch_max_packets: p.max_batch,
        batches: p.stats.batches,
        gso: out.uses_gso(),
        gso_status: gso.to_string(),
        padded: f.cfg.pad_for_gso,
        buffer: out.buffer(),
        sender_reports: session.reports().counters().sender_reports,
        receivers: session.reports().receivers().to_vec(),
        late_policy: match f.rt.settings.late {
            LatePolicy::DropLate { after } => format!("drop-late={}us", after.as_micros()),
            LatePolicy::CatchUp { factor } => format!("catch-up={factor}"),
        },
        frames_dropped: c.frames_dropped.load(Ordering::Relaxed),
        packets_dropped: c.packets_dropped.load(Ordering::Relaxed),
        deadline_misses: stats.deadline_misses,
        pacing: stats.pacing,
        wait_modes: p.wait_modes,
        throttle_guard_trips: p.throttle_guard_trips,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_media::raw::{Depth, RawTestPattern, Sampling};
    use metronome_wire::rtp::RtpView;

    /// A pacing thread held up in the middle of a frame (preempted on a busy host) for longer
    /// than the drop-late bound: the frame still leaves whole, the rest of it at once when the
    /// thread runs again. The cursor is driven here as a core drives it, on the real clock.
    #[test]
    fn a_frame_held_up_halfway_still_leaves_whole() {
        use super::super::stream::RawCursor;
        use crate::streams::stream::{Load, Sent};

        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let dest = format!("rtp://{}", rx.local_addr().unwrap());
        let mut cfg = RawSenderConfig::new(RtpUrl::parse_destination(&dest).unwrap(), 7, 1);
        cfg.max_payload = 300;
        cfg.rtcp = false;
        let late = LatePolicy::DropLate {
            after: Duration::from_millis(10),
        };
        let f = VideoFormat::new(160, 96, Sampling::Ycbcr422, Depth::Eight, 25, 1).unwrap();
        let source = Box::new(RawTestPattern::new(f).unwrap());
        let RawSender {
            mut payloader,
            schedule,
            out,
            ring,
            rtp_ts_base,
            ..
        } = RawSender::open(source, cfg.clone()).unwrap();
        let n = payloader.packets_per_frame();
        let clock = Clock::new();
        let epoch0 = clock.now() + Duration::from_millis(5);
        let session = new_session(&cfg, late, 10_000_000, n, rtp_ts_base, epoch0);
        let mut slot = ring.take_free().unwrap();
        let mut frame = RawFrame::new(f);
        RawTestPattern::new(f).unwrap().render(0, &mut frame);
        payload_into(&mut payloader, &frame, &mut slot, true).unwrap();
        slot.epoch = epoch0;
        ring.publish(slot);
        let settings = PacerSettings {
            batch_window: cfg.batch_window,
            late_threshold: cfg.late_threshold,
            send_time_ext: false,
            late,
        };
        let ctl = Arc::new(RawControl::default());
        let rt = RawStreamRt::new(1, ring, out, schedule, settings, ctl.clone(), session);
        let mut cursor = RawCursor::new(n);
        let mut held_up = false;
        while let Load::Ready(job) = cursor.load(&rt, clock.now()) {
            std::thread::sleep(job.release.saturating_since(clock.now()));
            if let Some(Sent::Sent(_)) = cursor.send(&rt, &clock) {
                if !held_up {
                    // The first batch has left: the thread is held up for 30 ms.
                    held_up = true;
                    std::thread::sleep(Duration::from_millis(30));
                }
            }
        }
        let c = &ctl.counters;
        let count = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert!(held_up);
        assert_eq!(
            (
                count(&c.frames),
                count(&c.frames_dropped),
                count(&c.packets_dropped)
            ),
            (1, 0, 0)
        );
        assert_eq!(count(&c.packets), n as u64);
        rx.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 2048];
        let got = std::iter::from_fn(|| rx.recv(&mut buf).ok()).count();
        assert_eq!(got, n, "every packet of the frame arrives");
    }

    #[test]
    fn frames_are_padded_to_one_size_and_depayload_unchanged() {
        let f = VideoFormat::new(1920, 8, Sampling::Ycbcr422, Depth::Ten, 60, 1).unwrap();
        let mut cfg = RawPayloaderConfig::new(5, &f);
        cfg.capture_time_ext = true;
        let mut pay = RawPayloader::new(cfg, f).unwrap();
        let ring = FrameRing::new(1, pay.packets_per_frame(), pay.packet_capacity());
        let mut slot = ring.take_free().unwrap();
        let mut frame = RawFrame::new(f);
        RawTestPattern::new(f).unwrap().render(3, &mut frame);
        frame.capture_ns = 42;
        payload_into(&mut pay, &frame, &mut slot, true).unwrap();
        assert!(slot.uniform);
        assert_eq!(slot.npackets, pay.packets_per_frame());
        let mut d = metronome_session::raw::RawDepayloader::new(f, Some(96)).unwrap();
        let mut complete = 0;
        for i in 0..slot.npackets {
            let p = slot.packet(i);
            if i + 1 < slot.npackets {
                assert_eq!(p.len(), slot.stride());
            }
            assert!(RtpView::parse(p).is_ok());
            for e in d.push(Timestamp::ZERO, p) {
                if let metronome_session::raw::RawEvent::Complete(c) = e {
                    assert_eq!(c.capture_ns, Some(42));
                    complete += 1;
                }
            }
        }
        assert_eq!(complete, 1);
        assert_eq!(d.frame().unwrap().data, frame.data);
        assert_eq!(d.counters().dropped.total(), 0);
        // Without padding the packets differ where lines end.
        payload_into(&mut pay, &frame, &mut slot, false).unwrap();
        assert!(!slot.uniform);
    }
}
