//! The sending driver: one stream from a [`TsSource`] to one or more RTP destinations.
//!
//! Three threads, as DESIGN.md's real-time path asks:
//! - the producer (an ordinary thread) reads the source, packetizes, and fills the ring ahead
//!   of the release times;
//! - the pacer (a real-time thread) takes the next packet, waits for its release time, stamps
//!   the send time, sends it to every destination and records its own lateness;
//! - the calling thread runs RTCP: sender reports out, receiver reports in, status.

use crate::clock::Clock;
use crate::host::{HostLoad, HostWatch};
use crate::pacer::{Pacer, Step};
use crate::pacing_thread::PacingThreadConfig;
use crate::ring::PacketRing;
use crate::run::RunLimit;
use crate::streams::producer::{make_packet, Made};
use crate::streams::rtcp::{exchange, say_bye};
use crate::streams::stream::{lock, StreamRt};
use crate::streams::{MediaOut, RtcpOut};
use crate::thread::RtPolicy;
use crate::udp::{RtcpSocket, SocketOptions, UdpError, UdpSender};
use crate::url::RtpUrl;
use crate::wait::WaiterConfig;
use metronome_cc::FixedRate;
use metronome_media::{MediaError, TsSource};
use metronome_sched::{
    PacingConfig, PacingStats, TaskParams, WaitSelectorConfig, WaitSelectorStats,
};
use metronome_session::sender::{
    JobConfig, Mp2tPacketizer, PacketizerConfig, ReceiverView, SenderReportsConfig, SenderSession,
    SenderSessionConfig,
};
use metronome_time::{Bitrate, MediaClock};
use metronome_wire::rtp::SEND_TIME_EXT_LEN;
use serde::Serialize;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct SenderConfig {
    pub destinations: Vec<RtpUrl>,
    pub ssrc: u32,
    pub cname: String,
    /// Stamp each packet's send time in an RFC 8285 header extension (for one-way delay).
    pub send_time_ext: bool,
    /// Ring slots between producer and pacer (the paper: 1024).
    pub ring_slots: usize,
    pub pacer: PacerKind,
    pub rt_policy: RtPolicy,
    pub wait: WaitPolicy,
    /// When `WaitPolicy::Auto` switches between sleeping and busy-polling.
    pub wait_selector: WaitSelectorConfig,
    pub waiter: WaiterConfig,
    /// What the stream does after a stall: catch up at a bounded rate, or drop what is late.
    pub pacing: PacingConfig,
    pub pacer_cpu: Option<usize>,
    pub lock_memory: bool,
    /// Stop after this long; `None` runs until the source ends or `stop` is set.
    pub duration: Option<Duration>,
    pub rtcp_min_interval: Duration,
    /// Head start of the producer before the first release time.
    pub preroll: Duration,
    pub socket: SocketOptions,
    pub seed: u64,
}

impl SenderConfig {
    pub fn new(destinations: Vec<RtpUrl>, ssrc: u32, seed: u64) -> Self {
        SenderConfig {
            destinations,
            ssrc,
            cname: format!("metronome-{ssrc:08x}@{}", hostname()),
            send_time_ext: false,
            ring_slots: 1024,
            pacer: PacerKind::Realtime,
            rt_policy: RtPolicy::Auto,
            wait: WaitPolicy::Auto,
            wait_selector: WaitSelectorConfig::default(),
            // Spin through the largest oversleep of the last 128 sleeps: an idle vCPU wakes late
            // about 1% of the time, and a p99 margin leaves those packets late.
            waiter: WaiterConfig {
                quantile: 1.0,
                ..WaiterConfig::default()
            },
            pacing: PacingConfig::default(),
            pacer_cpu: None,
            lock_memory: true,
            duration: None,
            rtcp_min_interval: Duration::from_secs(1),
            preroll: Duration::from_millis(200),
            socket: SocketOptions::default(),
            seed,
        }
    }
}

impl SenderConfig {
    /// How the pacing thread is set up.
    pub fn pacing_thread(&self) -> PacingThreadConfig {
        PacingThreadConfig {
            rt_policy: self.rt_policy,
            wait: self.wait,
            waiter: self.waiter,
            wait_selector: self.wait_selector,
            cpu: self.pacer_cpu,
            lock_memory: self.lock_memory,
            baseline: self.pacer == PacerKind::PlainSleep,
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// How the real-time pacer waits between packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum WaitPolicy {
    /// Absolute sleep, then spin the last stretch (little CPU; inherits wake-up latency).
    SleepSpin,
    /// Spin the whole way, as an ordinary thread (a core's worth of CPU; no wake-ups at all).
    BusyPoll,
    /// Sleep-then-spin while it keeps time, busy-poll while it does not (see
    /// `metronome_sched::WaitSelector`).
    Auto,
}

/// How the pacing thread waits for each release time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum PacerKind {
    /// Real-time policy, locked memory, 1 ns timer slack, absolute sleep then spin (or busy-poll).
    Realtime,
    /// The baseline: an ordinary thread that sleeps for the time left before each packet with
    /// `std::thread::sleep`, as a plain timer-driven sender does.
    PlainSleep,
}

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error(transparent)]
    Udp(#[from] UdpError),
    #[error("source: {0}")]
    Media(#[from] MediaError),
    #[error("no destination given: add one, for example rtp://127.0.0.1:5004")]
    NoDestination,
    #[error("could not start the {0} thread: {1}")]
    Thread(&'static str, std::io::Error),
    #[error("could not set up the {0} socket: {1}")]
    Socket(&'static str, std::io::Error),
}

/// What the threads of one stream share besides the stream itself.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    pacer_done: AtomicBool,
}

/// A status snapshot, about once a second.
#[derive(Clone, Debug)]
pub struct SenderStatus {
    /// Time since the stream started (its first release time).
    pub elapsed: Duration,
    pub packets: u64,
    pub bytes: u64,
    /// Worst lateness since the previous status.
    pub max_late_us: f64,
    pub ring_occupancy: usize,
    pub receivers: Vec<ReceiverView>,
}

/// What a finished run measured.
#[derive(Clone, Debug, Serialize)]
pub struct SenderOutcome {
    pub source: String,
    pub destinations: Vec<String>,
    pub realtime: String,
    pub memory_locked: String,
    pub wait_mode: String,
    pub ended_by: &'static str,
    pub duration_s: f64,
    pub packets: u64,
    pub bytes: u64,
    /// Bytes sent over the time from the first release to the end.
    pub bitrate_bps: f64,
    pub send_errors: u64,
    pub underruns: u64,
    /// Packets per job deadline missed (a packet is its own job: due time + one interval).
    pub deadline_misses: u64,
    /// Frames a live source skipped to keep up with real time (its producer fell behind).
    pub frames_skipped: u64,
    pub ring_slots: usize,
    /// Lateness, stalls, and what catching up or dropping did.
    pub pacing: PacingStats,
    /// With `WaitPolicy::Auto`: time spent sleeping-then-spinning and busy-polling.
    pub wait_modes: WaitSelectorStats,
    pub final_spin_margin_us: f64,
    /// CPU time the pacing thread used, as a share of one core over the run.
    pub pacer_cpu_percent: f64,
    pub receivers: Vec<ReceiverView>,
    /// How busy the host was over the run (absent where /proc cannot be read).
    pub host: Option<HostLoad>,
}

/// Runs one stream until the source ends, `cfg.duration` passes, or `stop` is set.
pub fn run_sender(
    mut source: Box<dyn TsSource>,
    cfg: SenderConfig,
    stop: Arc<AtomicBool>,
    mut on_status: impl FnMut(&SenderStatus),
) -> Result<SenderOutcome, SendError> {
    if cfg.destinations.is_empty() {
        return Err(SendError::NoDestination);
    }
    let outputs = cfg
        .destinations
        .iter()
        .map(|d| UdpSender::open(d, &cfg.socket).map(|s| MediaOut::Udp(Arc::new(s))))
        .collect::<Result<Vec<_>, _>>()?;
    let rtcp_opts = SocketOptions {
        buffer_bytes: 256 << 10,
        read_timeout: Some(Duration::from_millis(5)),
    };
    let rtcp_socks = cfg
        .destinations
        .iter()
        .map(|d| RtcpSocket::open_for_sender(d, &rtcp_opts))
        .collect::<Result<Vec<_>, _>>()?;
    for s in &rtcp_socks {
        // Drained after poll(2) says readable: never block the RTCP loop on an empty socket.
        s.socket()
            .set_nonblocking(true)
            .map_err(|e| SendError::Socket("RTCP", e))?;
    }
    let description = source.describe();
    // The session bandwidth for the RTCP interval (RFC 3550 §6.2), and the rate catching up is
    // a multiple of.
    let bitrate_bps = source.nominal_bitrate().unwrap_or(5_000_000);
    let host = HostWatch::start();
    let clock = Arc::new(Clock::new());
    let epoch = clock.now() + cfg.preroll;
    let rtp_ts_base = (cfg.seed as u32).rotate_left(7) ^ cfg.ssrc;
    let pcfg = PacketizerConfig {
        send_time_ext: cfg.send_time_ext,
        ..PacketizerConfig::mp2t(cfg.ssrc, (cfg.seed >> 32) as u16, rtp_ts_base)
    };
    let mut packetizer = Mp2tPacketizer::new(pcfg, epoch);
    let rt = Arc::new(single_stream(
        &cfg,
        bitrate_bps,
        epoch,
        rtp_ts_base,
        outputs,
    ));
    let rtcp: Vec<RtcpOut> = rtcp_socks
        .into_iter()
        .map(|s| RtcpOut::Udp(Arc::new(s)))
        .collect();
    let shared = Arc::new(Shared::default());

    let producer = {
        let (rt, shared, clock) = (rt.clone(), shared.clone(), clock.clone());
        std::thread::Builder::new()
            .name("metronome-producer".into())
            .spawn(move || {
                let r = produce(&mut *source, &mut packetizer, &rt, &clock, &shared.stop);
                rt.producer_done.store(true, Ordering::Release);
                r
            })
            .map_err(|e| SendError::Thread("producer", e))?
    };
    let pacer = {
        let (rt, shared, clock) = (rt.clone(), shared.clone(), clock.clone());
        let thread_cfg = cfg.pacing_thread();
        std::thread::Builder::new()
            .name("metronome-pacer".into())
            .spawn(move || {
                let mut pacer = Pacer::start(&thread_cfg, &rt, &clock);
                while !shared.stop.load(Ordering::Relaxed) {
                    match pacer.step() {
                        Step::Sent => {}
                        Step::Empty => std::thread::sleep(Duration::from_micros(200)),
                        Step::Done => break,
                    }
                }
                shared.pacer_done.store(true, Ordering::Release);
                pacer.finish()
            })
            .map_err(|e| SendError::Thread("pacer", e))?
    };

    let start = clock.now();
    let mut next_status = start + Duration::from_secs(1);
    let mut buf = [0u8; 1500];
    let limit = RunLimit::new(start, cfg.duration, &stop);
    let c = &rt.counters;
    let ended_by = loop {
        let now = clock.now();
        if let Some(why) = limit.ended(now) {
            break why;
        }
        if shared.pacer_done.load(Ordering::Acquire) {
            break "end of input";
        }
        exchange(&rt.session, &rtcp, &clock, &mut buf);
        wait_readable(&rtcp, Duration::from_millis(20));
        if now >= next_status {
            next_status = now + Duration::from_secs(1);
            on_status(&SenderStatus {
                elapsed: now.saturating_since(epoch),
                packets: c.packets.load(Ordering::Relaxed),
                bytes: c.bytes.load(Ordering::Relaxed),
                max_late_us: c.max_late_ns.swap(0, Ordering::Relaxed) as f64 / 1000.0,
                ring_occupancy: rt.ring.occupancy(),
                receivers: lock(&rt.session).reports().receivers().to_vec(),
            });
        }
    };
    shared.stop.store(true, Ordering::Release);
    let pacer = pacer.join().expect("the pacer thread does not panic");
    let produced = producer.join().expect("the producer thread does not panic");
    let end = clock.now();
    say_bye(&rt.session, &rtcp, &clock, &mut buf);
    let session = &*lock(&rt.session);
    produced?;
    let duration_s = end.saturating_since(start).as_secs_f64();
    // The stream itself starts at the first release time, after the preroll.
    let streamed_s = end.saturating_since(epoch).as_secs_f64();
    let stats = session.stats();
    Ok(SenderOutcome {
        source: description,
        destinations: cfg.destinations.iter().map(|d| d.to_string()).collect(),
        realtime: pacer.grant,
        memory_locked: pacer.memory,
        wait_mode: match cfg.pacer {
            PacerKind::Realtime => format!("{:?}", cfg.wait),
            PacerKind::PlainSleep => "PlainSleep".to_string(),
        },
        ended_by,
        duration_s,
        packets: stats.packets,
        bytes: stats.bytes,
        bitrate_bps: if streamed_s > 0.0 {
            stats.bytes as f64 * 8.0 / streamed_s
        } else {
            0.0
        },
        send_errors: c.send_errors.load(Ordering::Relaxed),
        underruns: stats.underruns,
        deadline_misses: stats.deadline_misses,
        frames_skipped: c.frames_skipped.load(Ordering::Relaxed),
        ring_slots: cfg.ring_slots,
        pacing: stats.pacing,
        wait_modes: pacer.wait_modes,
        final_spin_margin_us: pacer.margin_ns as f64 / 1000.0,
        pacer_cpu_percent: if duration_s > 0.0 {
            pacer.cpu_s * 100.0 / duration_s
        } else {
            0.0
        },
        receivers: session.reports().receivers().to_vec(),
        host: host.finish(stats.pacing.stalls),
    })
}

/// The stream `run_sender` sends: one packet per job, due one packet interval apart.
pub fn single_stream(
    cfg: &SenderConfig,
    bitrate_bps: u64,
    epoch: metronome_time::Timestamp,
    rtp_ts_base: u32,
    outputs: Vec<MediaOut>,
) -> StreamRt {
    let header = 12
        + if cfg.send_time_ext {
            SEND_TIME_EXT_LEN
        } else {
            0
        };
    let wire_bits = ((1316 + header) * 8) as u64;
    let interval = Duration::from_nanos(wire_bits * 1_000_000_000 / bitrate_bps.max(1));
    let task = TaskParams {
        period: interval,
        deadline: interval,
        cost: Duration::ZERO,
        bitrate_bps,
    };
    let session = SenderSession::new(
        SenderSessionConfig {
            reports: SenderReportsConfig {
                ssrc: cfg.ssrc,
                cname: cfg.cname.clone(),
                clock: MediaClock::VIDEO_90K,
                rtp_ts_base,
                session_bw_bps: bitrate_bps,
                rtcp_min_interval: cfg.rtcp_min_interval,
                max_receivers: 256,
                seed: cfg.seed ^ 0x5352,
            },
            pacing: cfg.pacing,
            jobs: JobConfig {
                period: None,
                deadline: interval,
            },
            queue_capacity: cfg.ring_slots,
        },
        epoch,
        Box::new(FixedRate::new(Bitrate::bps(bitrate_bps))),
    );
    StreamRt::new(
        0,
        "stream".into(),
        task,
        epoch,
        PacketRing::new(cfg.ring_slots, 1316 + 12 + SEND_TIME_EXT_LEN),
        outputs,
        cfg.send_time_ext,
        session,
    )
}

/// The producer: source → packetizer → ring, running ahead of the pacer by up to the ring size.
fn produce(
    source: &mut dyn TsSource,
    packetizer: &mut Mp2tPacketizer,
    rt: &StreamRt,
    clock: &Clock,
    stop: &AtomicBool,
) -> Result<(), MediaError> {
    let mut ts = [0u8; 188];
    while !stop.load(Ordering::Relaxed) {
        let Some(slot) = rt.ring.take_free() else {
            // The ring is full: the producer is far enough ahead.
            std::thread::sleep(Duration::from_millis(2));
            continue;
        };
        if make_packet(source, packetizer, rt, clock, slot, &mut ts)? == Made::Ended {
            break;
        }
    }
    Ok(())
}

/// Waits until one of the RTCP sockets is readable, or `timeout`.
fn wait_readable(socks: &[RtcpOut], timeout: Duration) {
    let mut fds = [0; crate::poll::MAX_FDS];
    let mut n = 0;
    for s in socks {
        if let (RtcpOut::Udp(s), Some(slot)) = (s, fds.get_mut(n)) {
            *slot = s.socket().as_raw_fd();
            n += 1;
        }
    }
    if n == 0 {
        std::thread::sleep(timeout);
        return;
    }
    let _ = crate::poll::wait_readable(&fds[..n], timeout);
}
