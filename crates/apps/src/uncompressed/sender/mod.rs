//! [`RawSender`]: one uncompressed video stream (RFC 4175) paced to one destination.
//!
//! Three threads: the producer (an ordinary thread) reads or renders each frame, stamps its
//! capture time and payloads it into a ring slot; the pacer (a pacing core with the stream as
//! its one lane, [`super::stream`], real-time where permitted) sends it by the chosen model;
//! the calling thread runs RTCP and reports status.

use super::outlet::RawOut;
use super::report::{BufferInfo, RawSenderOutcome, RawSenderStatus};
use super::stream::{
    thread_config, PacerCounters, PacerResult, PacerSettings, RawControl, RawStreamRt,
};
use crate::streams::server::rtcp::{exchange, say_bye};
use crate::streams::RtcpOut;
use crate::streams::{Calibration, RawAdmission, StreamServer};
use crate::uncompressed::stream::RawLane;
use metronome_cc::FixedRate;
use metronome_media::uncompressed::{RawFrame, RawSource, VideoFormat};
use metronome_media::MediaError;
use metronome_rt::clock::{process_cpu_s, thread_cpu_s, Clock};
use metronome_rt::frame_ring::{FrameRing, FrameSlot};
use metronome_rt::pacing::WaitPolicy;
use metronome_rt::pacing::{Command, Core, CoreConfig, CoreShared};
use metronome_rt::pacing::{PacingThreadConfig, PacingThreadReport};
use metronome_rt::run::EndedBy;
use metronome_rt::sync::lock;
use metronome_rt::thread::RtPolicy;
use metronome_rt::udp::GSO_MAX_SEGMENTS;
use metronome_rt::udp::{
    wanted_for, BatchSender, GsoStatus, RtcpSocket, SendPath, SocketOptions, UdpError,
};
use metronome_rt::url::RtpUrl;
use metronome_rt::wait::WaiterConfig;
use metronome_sched::st2110::FrameRate;
use metronome_sched::st2110::{frame_task, SendCosts};
use metronome_sched::{
    FrameFormat, FrameSchedule, LatePolicy, PacingConfig, Policy, SenderType, TaskParams,
    WaitSelectorConfig,
};
use metronome_session::rfc4175::{RawPayError, RawPayloader, RawPayloaderConfig};
use metronome_session::sender::{
    JobConfig, SenderReportsConfig, SenderSession, SenderSessionConfig,
};
use metronome_time::{Bitrate, MediaClock, RtpTime, Timestamp};
use metronome_wire::{PayloadType, SeqNo, Ssrc};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the calling thread looks at the stop flags and RTCP (round-trip times do not
/// suffer: reports carry the kernel's receive time).
const STATUS_TURN: Duration = Duration::from_millis(100);

#[derive(Clone, Debug)]
pub struct RawSenderConfig {
    pub destination: RtpUrl,
    pub ssrc: Ssrc,
    /// Seeds the initial sequence number and RTP timestamp.
    pub seed: u64,
    pub payload_type: PayloadType,
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
    pub initial_seq: Option<SeqNo>,
    /// The sender reports of the stream this one continues (an RTSP session's, after PAUSE),
    /// oldest first: receivers' reports that echo one are taken
    /// (`SenderSession::continuing`). What this one sent is left in
    /// [`RawControl::sent_reports`] when it ends.
    pub earlier_reports: Vec<u32>,
    /// Send RTCP sender reports to the destination's RTCP port (port + 1) and read the
    /// receivers' reports there ([`RawSender::open`] only; an RTSP session brings its own).
    pub rtcp: bool,
    /// The RTCP CNAME.
    pub cname: String,
    /// What is done with late frames; by default a frame whose first packet would leave a
    /// frame period late is dropped whole (ST 2110 receivers want whole frames on time).
    pub late: Option<LatePolicy>,
    /// How often the running sender says how it goes (`on_status`): 1 s by default; `serve
    /// --raw --interval`. Looked at every 100 ms, so no finer than that.
    pub status_every: Duration,
}

impl RawSenderConfig {
    pub fn new(destination: RtpUrl, ssrc: Ssrc, seed: u64) -> Self {
        RawSenderConfig {
            destination,
            ssrc,
            seed,
            payload_type: metronome_session::rfc4175::DEFAULT_PAYLOAD_TYPE,
            model: SenderType::NarrowGapped,
            max_payload: metronome_session::rfc4175::MTU_1500_MAX_PAYLOAD,
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
            earlier_reports: Vec::new(),
            rtcp: true,
            cname: "metronome@raw".to_string(),
            late: None,
            status_every: Duration::from_secs(1),
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
    /// The stream server of a lone stream ([`RawSender::run_alone`]) could not start.
    #[error(transparent)]
    Server(#[from] crate::streams::ServerError),
    /// Admission refused the stream, with the reason.
    #[error("admission refused the stream: {0}")]
    Refused(String),
}

/// Where a raw stream is paced.
pub enum RawPlace {
    /// On a pacing core of its own, not admitted ([`RawSender::run`]: the crate's tests), or
    /// admitted by a server without cores (`naive`), which leaves the stream to pace itself.
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
    rtp_ts_base: RtpTime,
    first_seq: SeqNo,
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
        let sender = BatchSender::open(&cfg.destination, &opts)?;
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
        let schedule = schedule_of(&format, &payloader, &cfg);
        if let (RawOut::Udp(s), false) = (&out, cfg.gso) {
            s.set_path(SendPath::Mmsg);
        }
        let ring = FrameRing::new(cfg.ring_frames.max(2), npackets, stride);
        Ok(RawSender {
            rtp_ts_base: pcfg.rtp_ts_base,
            first_seq: SeqNo::of_extended(u64::from(pcfg.initial_seq)),
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

    /// What the sender holds in memory while it runs, bytes: its ring of packetized frames
    /// and the frame its source fills (what a server's memory budget counts for it).
    pub fn memory_bytes(&self) -> u64 {
        let frames = self.cfg.ring_frames.max(2) as u64;
        let packets = self.payloader.packets_per_frame() as u64;
        let stride = self.payloader.packet_capacity() as u64;
        frames
            .saturating_mul(packets)
            .saturating_mul(stride)
            .saturating_add(self.format.frame_bytes() as u64)
    }

    /// The first packet's sequence number and RTP timestamp (RTSP's RTP-Info).
    pub fn first_packet(&self) -> (SeqNo, RtpTime) {
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

    /// Sends until the source ends, the frame count or duration is reached, or `stop` is set,
    /// on a pacing core of its own and not admitted (what the crate's tests run; a program
    /// serving the stream runs it as a server's: [`RawSender::run_alone`]). `on_status` is
    /// called each [`RawSenderConfig::status_every`], and once more at the end.
    pub fn run(
        self,
        stop: Arc<AtomicBool>,
        on_status: impl FnMut(&RawSenderStatus),
    ) -> Result<RawSenderOutcome, RawSendError> {
        let ctl = Arc::new(RawControl::default());
        self.run_on(RawPlace::Own, ctl, &stop, on_status)
    }

    /// The task admission control sees for this stream (see [`frame_task`]).
    pub fn task(&self, cal: &Calibration) -> TaskParams {
        task_of(&self.schedule, &self.payloader, &self.cfg, cal)
    }

    /// Runs the stream, watched and stopped through `ctl` as well as `stop` (an RTSP session's
    /// PAUSE and TEARDOWN), paced where `place` says: on a pacing core of its own, or as a
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
        let plan = plan_of(&cfg, &schedule, epoch0);
        let core_cfg = own_core(&cfg, &schedule);
        let core = CoreShared::new(core_cfg.capacity);
        let rt = Arc::new(RawStreamRt::new(
            admission.as_ref().map_or(1, |a| a.id),
            ring,
            out,
            schedule,
            pacer_settings(&cfg, late),
            ctl.clone(),
            session,
        ));
        let mut rtcp_buf = [0u8; 1500];
        // On a server's core, if it has one for the stream; else on a core of its own.
        let shared = match (&server, &admission) {
            (Some(s), Some(a)) if s.start_raw(a, RawLane::boxed(rt.clone())) => Some((s, a)),
            _ => None,
        };
        let (pacer, produced, ended_by) = Threads {
            rt: &rt,
            ctl: &ctl,
            stop,
            clock,
            plan: &plan,
            shared,
            core_cfg: &core_cfg,
            core: &core,
            rtcp: &rtcp,
            tframe,
            status_every: cfg.status_every,
        }
        .run(&mut *source, &mut payloader, &mut on_status, &mut rtcp_buf)?;
        if let (Some(s), Some(a)) = (server, admission) {
            s.end_raw(a, &rt.finished);
        }
        let (_, producer_cpu_s) = produced?;
        // The run ends with its last packet: the wait before the BYE is not part of it.
        let end = clock.now();
        let cpu_s = process_cpu_s() - cpu0;
        farewell(&rt, &rtcp, &ctl, clock, &mut rtcp_buf);
        *lock(&ctl.sent_reports) = lock(&rt.session).reports().sent_reports().collect();
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

/// The task admission control sees for a stream sent by `payloader` on `schedule`, batched as
/// `cfg` says, at `cal`'s costs.
/// An ended stream's RTCP BYE (RFC 3550 §6.6), to `rtcp`:
/// [`crate::streams::server::BYE_AFTER_LAST`] after its last packet (FFmpeg reads a waiting
/// RTCP packet before waiting RTP ones, and ends at BYE), or sooner if a client asks
/// meanwhile (its TEARDOWN or PAUSE is not kept waiting). A paused RTSP session's source is
/// not leaving: no BYE then.
fn farewell(rt: &RawStreamRt, rtcp: &[RtcpOut], ctl: &RawControl, clock: &Clock, buf: &mut [u8]) {
    if rtcp.is_empty() {
        return;
    }
    let until = clock.now() + crate::streams::server::BYE_AFTER_LAST;
    while !ctl.stop.load(Ordering::Relaxed) && clock.now() < until {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    if !ctl.quiet.load(Ordering::Relaxed) {
        say_bye(&rt.session, rtcp, None, clock, buf);
    }
}

fn task_of(
    schedule: &FrameSchedule,
    payloader: &RawPayloader,
    cfg: &RawSenderConfig,
    cal: &Calibration,
) -> TaskParams {
    let costs = SendCosts {
        per_call: cal.per_packet_us.to_duration(),
        per_job: cal.per_job_us.to_duration(),
        per_segment: cal.per_segment_us.to_duration(),
    };
    frame_task(
        schedule,
        cfg.batch_window,
        GSO_MAX_SEGMENTS,
        payloader.packets_per_frame(),
        payloader.packet_capacity(),
        costs,
    )
}

/// What admission reserves on the link for a stream of `format` sent as `cfg` says, bit/s
/// (every datagram with its IPv4 and UDP headers): the rate of [`RawSender::task`] before the
/// sender is open.
pub fn admitted_bitrate(format: &VideoFormat, cfg: &RawSenderConfig) -> Result<u64, RawSendError> {
    let payloader = RawPayloader::new(payloader_config(format, cfg), *format)?;
    let schedule = schedule_of(format, &payloader, cfg);
    let free = Calibration::fixed(Duration::ZERO);
    Ok(task_of(&schedule, &payloader, cfg, &free).bitrate_bps)
}

/// When each packet of a frame of `format` is due, by `cfg`'s model.
fn schedule_of(
    format: &VideoFormat,
    payloader: &RawPayloader,
    cfg: &RawSenderConfig,
) -> FrameSchedule {
    let rate = FrameRate::new(format.fps_num, format.fps_den);
    let ff = FrameFormat::new(rate, payloader.packets_per_frame() as u32, format.height);
    FrameSchedule::new(&ff, cfg.model)
}

/// How the pacer sends each frame's batches.
fn pacer_settings(cfg: &RawSenderConfig, late: LatePolicy) -> PacerSettings {
    PacerSettings {
        batch_window: cfg.batch_window,
        late_threshold: cfg.late_threshold,
        send_time_ext: cfg.send_time_ext,
        late,
    }
}

/// When the producer makes which frame, and until when.
fn plan_of(cfg: &RawSenderConfig, schedule: &FrameSchedule, epoch0: Timestamp) -> Plan {
    let tframe = schedule.format().tframe();
    Plan {
        ff: *schedule.format(),
        epoch0,
        end: cfg.duration.map(|d| epoch0 + d),
        frames: cfg.frames,
        live: cfg.live,
        lead: cfg
            .produce_lead
            .unwrap_or(tframe.min(Duration::from_millis(20))),
        pad: cfg.pad_for_gso,
    }
}

/// The pacing thread of a sender not on a server: a core of its own, running the loop every
/// MPEG-TS stream runs on, with this one stream on it.
fn own_core(cfg: &RawSenderConfig, schedule: &FrameSchedule) -> CoreConfig {
    CoreConfig {
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
            schedule,
        ),
        capacity: 1,
    }
}

/// A raw stream's threads: its producer, its pacer (unless it is a lane of a server's core)
/// and, on the calling thread, its [`Watch`].
struct Threads<'a> {
    rt: &'a Arc<RawStreamRt>,
    ctl: &'a RawControl,
    stop: &'a AtomicBool,
    clock: &'a Clock,
    plan: &'a Plan,
    /// The server's core it is a lane of, if it is one.
    shared: Option<(&'a Arc<StreamServer>, &'a RawAdmission)>,
    core_cfg: &'a CoreConfig,
    core: &'a CoreShared,
    rtcp: &'a [RtcpOut],
    tframe: Duration,
    status_every: Duration,
}

/// What the producer returned: why it stopped and its CPU time.
type Produced = Result<(EndedBy, f64), RawSendError>;

impl Threads<'_> {
    fn wake(&self) {
        match self.shared {
            Some((s, a)) => s.wake_raw(a),
            None => self.core.wake(),
        }
    }

    /// Runs the stream until it ends: the pacer's result, the producer's, and why it ended.
    fn run(
        &self,
        source: &mut dyn RawSource,
        payloader: &mut RawPayloader,
        on_status: &mut dyn FnMut(&RawSenderStatus),
        rtcp_buf: &mut [u8],
    ) -> Result<(PacerResult, Produced, EndedBy), RawSendError> {
        let (rt, clock) = (self.rt, self.clock);
        let wake = || self.wake();
        std::thread::scope(|scope| {
            let producer = std::thread::Builder::new()
                .name("metronome-raw-producer".into())
                .spawn_scoped(scope, || {
                    // It works a few ms a frame; at the top nice level (where permitted) a busy
                    // machine delays it less.
                    metronome_rt::thread::spin_at_top_nice();
                    let cpu = thread_cpu_s();
                    let r = produce(source, payloader, rt, &wake, clock, self.plan);
                    rt.producer_done.store(true, Ordering::Release);
                    wake();
                    r.map(|why| (why, thread_cpu_s() - cpu))
                })
                .map_err(|e| RawSendError::Thread("producer", e))?;
            let pacer = match self.shared {
                None => Some(
                    std::thread::Builder::new()
                        .name("metronome-raw-pacer".into())
                        .spawn_scoped(scope, || self.own_pacer())
                        .map_err(|e| RawSendError::Thread("pacer", e))?,
                ),
                Some(_) => None,
            };
            let let_go = || match self.shared {
                Some((s, a)) => {
                    s.remove_raw(a);
                }
                None => {
                    let _ = self.core.commands.push(Command::Remove(rt.id));
                }
            };
            Watch {
                rt,
                ctl: self.ctl,
                stop: self.stop,
                clock,
                rtcp: self.rtcp,
                epoch0: self.plan.epoch0,
                every: self.status_every,
                // The last frame before the duration's end has left by then (a frame's
                // packets take at most its period); a slow source's frame (one a minute) is
                // cut there.
                cut: self
                    .plan
                    .end
                    .map(|e| e + self.tframe.min(Duration::from_millis(500))),
            }
            .run(&let_go, &wake, on_status, rtcp_buf);
            rt.stop.store(true, Ordering::Release);
            let pacer = match pacer {
                Some(h) => h.join().expect("the raw pacer does not panic"),
                None => self.shared_pacer(),
            };
            let produced = producer.join().expect("the raw producer does not panic");
            let ended_by = self.ended_by(&produced);
            Ok((pacer, produced, ended_by))
        })
    }

    /// The pacing thread of a sender that has a core of its own.
    fn own_pacer(&self) -> PacerResult {
        let mut pacer = Core::new(self.core_cfg, self.core, self.clock);
        // The table has room for it: the command cannot be refused.
        let _ = self
            .core
            .commands
            .push(Command::Add(RawLane::boxed(self.rt.clone())));
        while !self.rt.finished.load(Ordering::Acquire) {
            pacer.step();
        }
        PacerResult::new(self.rt, pacer.finish())
    }

    /// What a lane of a server's core says of its pacing.
    fn shared_pacer(&self) -> PacerResult {
        let grant = self
            .shared
            .map(|(s, a)| {
                let c = a.core.unwrap_or(0);
                s.core_grant(c).within(&format!("shared pacing core {c}"))
            })
            .unwrap_or_default();
        PacerResult::new(self.rt, PacingThreadReport::shared(grant))
    }

    fn ended_by(&self, produced: &Produced) -> EndedBy {
        if self.stop.load(Ordering::Relaxed) || self.ctl.stop.load(Ordering::Relaxed) {
            return EndedBy::Stopped;
        }
        match produced {
            Ok((why, _)) => *why,
            Err(_) => EndedBy::Error,
        }
    }
}

/// What the calling thread does while a raw stream runs: stops it when asked or at the
/// duration's end, runs its RTCP, and says how it goes each `every`.
struct Watch<'a> {
    rt: &'a RawStreamRt,
    ctl: &'a RawControl,
    stop: &'a AtomicBool,
    clock: &'a Clock,
    rtcp: &'a [RtcpOut],
    epoch0: Timestamp,
    /// How often `on_status` is called, from the first frame's epoch.
    every: Duration,
    /// When the stream is stopped even in the middle of a frame (`--duration`).
    cut: Option<Timestamp>,
}

impl Watch<'_> {
    /// Until the pacer has let the stream go. `let_go` asks the pacing core to drop it at its
    /// next look (it may be waiting for a packet seconds away: a slow source's frame is spread
    /// over its period); `wake` wakes it.
    fn run(
        &self,
        let_go: &dyn Fn(),
        wake: &dyn Fn(),
        on_status: &mut dyn FnMut(&RawSenderStatus),
        rtcp_buf: &mut [u8],
    ) {
        let (rt, ctl) = (self.rt, self.ctl);
        let every = self.every.max(STATUS_TURN);
        let mut next_status = self.epoch0 + every;
        // Frames and packets at the last status: the last word is said only if either moved
        // since (a frame cut short counts without a packet).
        let mut said = (0, 0);
        while !rt.finished.load(Ordering::Acquire) {
            let over = self.cut.is_some_and(|c| self.clock.now() >= c);
            let asked = self.stop.load(Ordering::Relaxed) || ctl.stop.load(Ordering::Relaxed);
            if (over || asked) && !rt.stop.swap(true, Ordering::AcqRel) {
                let_go();
                wake();
            }
            std::thread::sleep(STATUS_TURN);
            if !self.rtcp.is_empty() {
                exchange(&rt.session, self.rtcp, None, self.clock, rtcp_buf);
            }
            let heard = lock(&rt.session)
                .reports()
                .receivers()
                .iter()
                .map(|r| r.reports)
                .sum();
            ctl.receiver_reports.store(heard, Ordering::Relaxed);
            let now = self.clock.now();
            if now >= next_status {
                // On the grid from the epoch, as iperf3's intervals are; a turn held up past
                // several makes one longer interval.
                while next_status <= now {
                    next_status += every;
                }
                let s = status(&ctl.counters, now.saturating_since(self.epoch0));
                said = (s.frames, s.packets);
                on_status(&s);
            }
        }
        // The last word: what was sent since the last status (iperf3's last, shorter interval).
        let s = status(
            &ctl.counters,
            self.clock.now().saturating_since(self.epoch0),
        );
        if (s.frames, s.packets) != said {
            on_status(&s);
        }
    }
}

/// The stream's sender session: RTCP at 1 s, `late` for late batches, a job per batch due
/// within the late threshold, a queue for one frame's batches, at the stream's wire rate.
fn new_session(
    cfg: &RawSenderConfig,
    late: LatePolicy,
    wire_bps: u64,
    packets_per_frame: usize,
    rtp_ts_base: RtpTime,
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
    .continuing(&cfg.earlier_reports)
}

/// How the payloader is set up for `cfg`.
fn payloader_config(format: &VideoFormat, cfg: &RawSenderConfig) -> RawPayloaderConfig {
    let mut pcfg = RawPayloaderConfig::new(cfg.ssrc, format);
    pcfg.payload_type = cfg.payload_type;
    pcfg.initial_seq = match cfg.initial_seq {
        // The extended sequence number's low 16 bits are the RTP header's.
        Some(seq) => u32::from(seq.get()),
        None => (cfg.seed >> 16) as u32,
    };
    pcfg.rtp_ts_base = RtpTime((cfg.seed as u32).rotate_left(7) ^ cfg.ssrc.get());
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

mod alone;
mod outcome;
mod produce;
#[cfg(test)]
mod tests;

use outcome::{outcome, status, Finished};
#[cfg(test)]
use produce::payload_into;
use produce::{produce, Plan};
