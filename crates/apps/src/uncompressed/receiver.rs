//! [`RawReceiver`]: uncompressed video (RFC 4175) in, measured per frame.
//!
//! One thread: [`BatchReceiver`] batches (GRO + `recvmmsg`, kernel timestamps, SO_RXQ_OVFL) into
//! a [`RawDepayloader`] for the SSRC of the first packet it can use (others are counted). For
//! every complete frame: latency = CLOCK_REALTIME read right after the depayloader reports it
//! complete − the capture time the sender put in the RTP header extension; spread = last −
//! first packet arrival. Every packet's kernel arrival time feeds an ST 2110-21 [`Conformance`]
//! measurement, which starts at the second complete frame (the first one tells how many
//! packets a frame has).

use super::frame_writer::FrameWriter;
use super::report::{
    per_frame, BufferInfo, LatencyUs, RawReceiverOutcome, RawReceiverStatus, RawRecvDrops,
    RawRtcpStats,
};
use crate::receiver::send_report;
use metronome_media::uncompressed::VideoFormat;
use metronome_media::MediaError;
use metronome_rt::clock::{process_cpu_s, realtime_ns, thread_cpu_s, Clock};
use metronome_rt::run::RunLimit;
use metronome_rt::thread::{make_current_thread_realtime, RtPolicy};
use metronome_rt::udp::{
    is_timeout, wanted_for, BatchReceiver, RecvBufs, RtcpSocket, SocketOptions, UdpError,
};
use metronome_rt::url::RtpUrl;
use metronome_sched::st2110::{Arrival, EpochAnchor, FrameRate};
use metronome_sched::{Conformance, FrameFormat, FrameSchedule, SenderType};
use metronome_session::receiver::{PayloadKind, ReceiverConfig, ReceiverSession};
use metronome_session::rfc4175::{FrameComplete, RawDepayloader, RawEvent, RawEvents};
use metronome_time::Micros;
use metronome_time::{Distribution, Timestamp};
use metronome_wire::rtp::RtpView;
use metronome_wire::{PayloadType, Ssrc};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// How often the receive loop looks at RTCP.
const RTCP_TURN: Duration = Duration::from_millis(20);
/// Reports read per turn at most: a flood on the RTCP port cannot hold up the media.
const RTCP_DRAIN: usize = 64;

#[derive(Clone, Debug)]
pub struct RawReceiverConfig {
    pub source: RtpUrl,
    pub format: VideoFormat,
    /// Accept only this payload type, if given.
    pub payload_type: Option<PayloadType>,
    /// The sender model that conformance is judged against.
    pub declared: SenderType,
    pub duration: Option<Duration>,
    /// Stop once this many frames have ended (complete, partial or lost).
    pub frames: Option<u64>,
    /// Write every complete frame to this Y4M file.
    pub output: Option<PathBuf>,
    /// SO_RCVBUF to ask for; default: two frames, or 40 ms at the stream's rate.
    pub buffer_bytes: Option<usize>,
    pub gro: bool,
    /// Scheduling of the receiving thread (the calling thread): SCHED_FIFO below the pacers'
    /// priority by default, so that a busy machine delays frames less.
    pub rt_policy: RtPolicy,
    /// RTCP on the RTP port + 1 (the group's, for multicast): the sender's reports in, receiver
    /// reports (loss, jitter, LSR/DLSR for its round-trip time) back to where they came from.
    pub rtcp: bool,
    /// How often the running receiver says how it goes (`on_status`): 500 ms by default;
    /// `recv --raw --interval`.
    pub status_every: Duration,
}

impl RawReceiverConfig {
    pub fn new(source: RtpUrl, format: VideoFormat) -> Self {
        RawReceiverConfig {
            source,
            format,
            payload_type: None,
            declared: SenderType::NarrowGapped,
            duration: None,
            frames: None,
            output: None,
            buffer_bytes: None,
            gro: true,
            rt_policy: RtPolicy::Fifo { priority: 70 },
            rtcp: true,
            status_every: Duration::from_millis(500),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RawRecvError {
    #[error(transparent)]
    Udp(#[from] UdpError),
    #[error("{0}")]
    Format(String),
    #[error("output: {0}")]
    Output(#[from] MediaError),
    #[error("receiving on {0}: {1}")]
    Io(String, std::io::Error),
}

/// A bound raw receiver, not yet receiving.
pub struct RawReceiver {
    cfg: RawReceiverConfig,
    rx: BatchReceiver,
    rtcp: Option<RtcpSocket>,
    depay: RawDepayloader,
}

impl RawReceiver {
    /// Binds (and joins a multicast group) with a receive buffer sized for the stream.
    pub fn open(cfg: RawReceiverConfig) -> Result<Self, RawRecvError> {
        let depay = RawDepayloader::new(cfg.format, cfg.payload_type).map_err(|e| {
            RawRecvError::Format(format!(
                "{e}: give the stream's --size, --sampling and --depth"
            ))
        })?;
        let f = cfg.format;
        // Headers add about 2% at 1428-byte payloads.
        let bps = f.bitrate() / 50 * 51;
        let buffer_bytes = cfg
            .buffer_bytes
            .unwrap_or_else(|| wanted_for(bps, 2 * f.frame_bytes(), Duration::from_millis(40)));
        let rx = BatchReceiver::open(
            &cfg.source,
            &SocketOptions {
                buffer_bytes,
                read_timeout: Some(Duration::from_millis(50)),
            },
        )?;
        if !cfg.gro {
            rx.set_gro(false);
        }
        let rtcp = if cfg.rtcp {
            // The RTP port the kernel picked (port 0 asked for) decides the RTCP port.
            let mut at = cfg.source;
            if let Ok(local) = rx.local_addr() {
                at.addr.set_port(local.port());
            }
            let s = RtcpSocket::open_for_receiver(&at, &SocketOptions::default())?;
            s.socket()
                .set_nonblocking(true)
                .map_err(|e| RawRecvError::Io(cfg.source.to_string(), e))?;
            Some(s)
        } else {
            None
        };
        Ok(RawReceiver {
            cfg,
            rx,
            rtcp,
            depay,
        })
    }

    pub fn buffer(&self) -> BufferInfo {
        BufferInfo::from(self.rx.buffer_report())
    }

    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.rx.local_addr().ok()
    }

    /// Receives until the frame count or duration is reached or `stop` is set; `on_status`
    /// gets the counts so far each [`RawReceiverConfig::status_every`], and once more at the
    /// end.
    pub fn run(
        self,
        stop: &AtomicBool,
        mut on_status: impl FnMut(&RawReceiverStatus),
    ) -> Result<RawReceiverOutcome, RawRecvError> {
        let RawReceiver {
            cfg,
            rx,
            mut rtcp,
            depay,
        } = self;
        let writer = match &cfg.output {
            Some(p) => Some(FrameWriter::create(p, cfg.format)?),
            None => None,
        };
        let grant = make_current_thread_realtime(cfg.rt_policy);
        let clock = Clock::new();
        let mut st = State::new(&cfg, depay, writer, clock);
        let mut bufs = RecvBufs::default();
        let start = clock.now();
        let limit = RunLimit::new(start, cfg.duration, stop);
        let every = cfg.status_every.max(Duration::from_millis(1));
        let mut next_status = start + every;
        // What the last status said (packets, frames ended): the last word only if more since.
        let mut said = (0, 0);
        let mut next_rtcp = start;
        let mut rtcp_buf = [0u8; 1500];
        let ended_by = loop {
            let now = clock.now();
            if let Some(why) = limit.ended(now) {
                break why;
            }
            if cfg.frames.is_some_and(|n| st.frames_ended() >= n) {
                break metronome_rt::run::EndedBy::Frames;
            }
            if now >= next_status {
                next_status = crate::receiver::next_status_after(next_status, now, every);
                let s = st.status(now.saturating_since(start));
                said = (s.packets, s.frames_ended());
                on_status(&s);
            }
            if let (Some(sock), true) = (rtcp.as_mut(), now >= next_rtcp) {
                next_rtcp = now + RTCP_TURN;
                st.rtcp_turn(now, sock, cfg.source.is_multicast(), &mut rtcp_buf);
            }
            match rx.recv_batch(&mut bufs) {
                Ok(batch) => {
                    let dropped = batch.dropped_total();
                    for d in batch {
                        st.on_datagram(d.data, d.kernel_rx_realtime_ns, d.truncated);
                    }
                    if let Some(n) = dropped {
                        st.rx_overflow = u64::from(n);
                    }
                }
                Err(e) if is_timeout(&e) => {}
                Err(e) => return Err(RawRecvError::Io(cfg.source.to_string(), e)),
            }
        };
        let flushed = st.depay.flush(clock.now());
        st.on_events(flushed, None);
        let end = clock.now();
        // The last word, with the frames the flush ended (iperf3's last, shorter interval).
        let s = st.status(end.saturating_since(start));
        if (s.packets, s.frames_ended()) != said {
            on_status(&s);
        }
        if let Some(sock) = &rtcp {
            if let Some(n) = st.session.bye(end, &mut rtcp_buf) {
                st.reports_sent += send_report(sock, &rtcp_buf[..n]);
            }
        }
        let mut outcome = st.finish(&cfg, &rx, ended_by, end.saturating_since(start));
        outcome.realtime = grant.view();
        Ok(outcome)
    }
}

/// Everything the receive loop keeps.
struct State {
    depay: RawDepayloader,
    /// RFC 3550 statistics of the stream, for receiver reports.
    session: ReceiverSession,
    reports_sent: u64,
    writer: Option<FrameWriter>,
    clock: Clock,
    declared: SenderType,
    format: VideoFormat,
    conformance: Option<Conformance>,
    ssrc: Option<Ssrc>,
    latency: Distribution,
    arrival_latency: Distribution,
    spread: Distribution,
    packets: u64,
    bytes: u64,
    first_at: Option<Timestamp>,
    last_at: Timestamp,
    other_ssrc: u64,
    truncated: u64,
    without_ts: u64,
    without_capture: u64,
    rx_overflow: u64,
    cpu0: f64,
    thread_cpu0: f64,
}

impl State {
    fn new(
        cfg: &RawReceiverConfig,
        depay: RawDepayloader,
        writer: Option<FrameWriter>,
        clock: Clock,
    ) -> State {
        let session = ReceiverSession::new(ReceiverConfig {
            cname: "metronome-recv@raw".into(),
            payload: PayloadKind::Any,
            send_time_ext_id: None,
            session_bw_bps: cfg.format.bitrate(),
            max_sources: 1,
            ..ReceiverConfig::default()
        });
        State {
            depay,
            session,
            reports_sent: 0,
            writer,
            clock,
            declared: cfg.declared,
            format: cfg.format,
            conformance: None,
            ssrc: None,
            latency: Distribution::new(),
            arrival_latency: Distribution::new(),
            spread: Distribution::new(),
            packets: 0,
            bytes: 0,
            first_at: None,
            last_at: Timestamp::ZERO,
            other_ssrc: 0,
            truncated: 0,
            without_ts: 0,
            without_capture: 0,
            rx_overflow: 0,
            cpu0: process_cpu_s(),
            thread_cpu0: thread_cpu_s(),
        }
    }

    fn frames_ended(&self) -> u64 {
        let c = self.depay.counters();
        c.frames_complete + c.frames_partial + c.frames_lost
    }

    fn on_datagram(&mut self, data: &[u8], kernel_rt: Option<u64>, truncated: bool) {
        self.packets += 1;
        self.bytes += data.len() as u64;
        if kernel_rt.is_none() {
            self.without_ts += 1;
        }
        let (at, _) = self.clock.arrival(kernel_rt);
        self.first_at.get_or_insert(at);
        self.last_at = at;
        if truncated {
            self.truncated += 1;
            return;
        }
        let mut candidate = None;
        if let Ok(rtp) = RtpView::parse(data) {
            match self.ssrc {
                None => candidate = Some(rtp.ssrc()),
                Some(s) if s != rtp.ssrc() => {
                    self.other_ssrc += 1;
                    return;
                }
                Some(_) => {}
            }
            // Sequence, loss and jitter for the receiver reports (RFC 3550 A.1, A.3, A.8).
            let _ = self.session.handle_rtp(at, None, data);
            if let Some(c) = self.conformance.as_mut() {
                c.on_packet(Arrival {
                    at,
                    rtp_ts: rtp.timestamp(),
                    marker: rtp.marker(),
                });
            }
        }
        // Anything else (not RTP at all, malformed RFC 4175) the depayloader counts. The stream
        // is the SSRC of the first packet it used, so a stray datagram cannot capture it.
        let used = self.depay.counters().used;
        let events = self.depay.push(at, data);
        if candidate.is_some() && self.depay.counters().used > used {
            self.ssrc = candidate;
        }
        self.on_events(events, kernel_rt);
    }

    /// RTCP: the sender's reports in (a unicast receiver answers where they come from), a
    /// receiver report out when one is due.
    fn rtcp_turn(
        &mut self,
        now: Timestamp,
        sock: &mut RtcpSocket,
        multicast: bool,
        buf: &mut [u8],
    ) {
        for _ in 0..RTCP_DRAIN {
            let Ok(meta) = sock.recv(buf) else { break };
            let (at, _) = self.clock.arrival(meta.kernel_rx_realtime_ns);
            let from_sender = self.session.handle_rtcp(at, &buf[..meta.len]);
            if from_sender && !multicast && sock.peer() != Some(meta.src) {
                sock.set_peer(meta.src);
            }
        }
        while self.session.poll_event().is_some() {}
        if let Some(n) = self.session.poll_transmit(now, buf) {
            self.reports_sent += send_report(sock, &buf[..n]);
        }
    }

    fn on_events(&mut self, events: RawEvents, kernel_rt: Option<u64>) {
        let n = events.len();
        for (i, e) in events.into_iter().enumerate() {
            match e {
                RawEvent::Complete(c) => self.on_complete(&c, kernel_rt, i + 1 == n),
                RawEvent::Partial(_) | RawEvent::Lost(_) => {}
            }
        }
    }

    fn on_complete(&mut self, c: &FrameComplete, kernel_rt: Option<u64>, is_last_event: bool) {
        let done_rt = realtime_ns();
        match c.capture_ns {
            Some(cap) => {
                self.latency.record(done_rt.saturating_sub(cap));
                if let Some(k) = kernel_rt {
                    self.arrival_latency.record(k.saturating_sub(cap));
                }
            }
            None => self.without_capture += 1,
        }
        self.spread
            .record(nanos(c.completed_at.saturating_since(c.first_arrival)));
        if self.conformance.is_none() {
            self.conformance = Some(self.start_conformance(c.packets));
        }
        if let Some(w) = self.writer.as_mut() {
            // The depayloader lends only the last frame that ended.
            match self.depay.frame() {
                Some(f) if is_last_event => w.offer(f),
                _ => w.skip(),
            }
        }
    }

    /// The measurement, for frames of `npackets` packets from the next packet on.
    fn start_conformance(&self, npackets: u64) -> Conformance {
        let f = self.format;
        let rate = FrameRate::new(f.fps_num, f.fps_den);
        let ff = FrameFormat::new(
            rate,
            npackets.clamp(1, u64::from(u32::MAX)) as u32,
            f.height,
        );
        let schedule = FrameSchedule::new(&ff, self.declared);
        Conformance::for_sender(&schedule, EpochAnchor::first_packet_of(&schedule))
    }

    fn status(&self, elapsed: Duration) -> RawReceiverStatus {
        let c = self.depay.counters();
        let l = LatencyUs::from(&self.latency);
        RawReceiverStatus {
            elapsed,
            frames_complete: c.frames_complete,
            frames_partial: c.frames_partial,
            frames_lost: c.frames_lost,
            packets: self.packets,
            bytes: self.bytes,
            rx_overflow: self.rx_overflow,
            latency_p50_us: l.p50,
            latency_p99_us: l.p99,
        }
    }

    fn finish(
        mut self,
        cfg: &RawReceiverConfig,
        rx: &BatchReceiver,
        ended_by: metronome_rt::run::EndedBy,
        ran: Duration,
    ) -> RawReceiverOutcome {
        let (written, not_written, output_error) = match self.writer.take().map(FrameWriter::finish)
        {
            Some(Ok((w, n))) => (w, n, None),
            Some(Err(e)) => (0, c_complete(&self.depay), Some(e.to_string())),
            None => (0, 0, None),
        };
        let cpu_s = process_cpu_s() - self.cpu0;
        let c = *self.depay.counters();
        let active = self
            .first_at
            .map_or(0.0, |f| self.last_at.saturating_since(f).as_secs_f64());
        let per_s = |v: f64| if active > 0.0 { v / active } else { 0.0 };
        if let Some(conf) = self.conformance.as_mut() {
            conf.finish();
        }
        let main = self.session.main_source();
        RawReceiverOutcome {
            source: cfg.source.to_string(),
            format: cfg.format.to_string(),
            declared_model: super::model_name(cfg.declared),
            ended_by,
            duration_us: Micros::from(ran),
            ssrc: self.ssrc,
            frames_complete: c.frames_complete,
            frames_partial: c.frames_partial,
            frames_lost: c.frames_lost,
            rtcp: RawRtcpStats {
                sender_reports: main.map_or(0, |m| m.sender_reports),
                receiver_reports_sent: self.reports_sent,
                sender_cname: main.and_then(|m| m.cname.clone()),
                packets_lost: main.map_or(0, |m| m.lost()),
                jitter_us: Micros::from_millis_f64(main.map_or(0.0, |m| m.jitter_ticks() / 90.0)),
            },
            frames_without_capture_time: self.without_capture,
            frames_written: written,
            frames_not_written: not_written,
            output_error,
            packets: self.packets,
            bytes: self.bytes,
            pps: per_s(self.packets as f64),
            bitrate_bps: per_s(self.bytes as f64 * 8.0),
            latency_us: LatencyUs::from(&self.latency),
            arrival_latency_us: LatencyUs::from(&self.arrival_latency),
            spread_us: LatencyUs::from(&self.spread),
            conformance: self.conformance.as_ref().map(Conformance::summary),
            drops: RawRecvDrops {
                malformed: c.dropped,
                total_malformed: c.dropped.total(),
                other_ssrc: self.other_ssrc,
                truncated: self.truncated,
                duplicates: c.duplicates,
                late: c.late,
            },
            rx_overflow: self.rx_overflow,
            kernel_timestamps: self.without_ts == 0 && self.packets > 0,
            gro: rx.gro(),
            cpu_us: Micros::from_secs_f64(cpu_s),
            recv_cpu_us: Micros::from_secs_f64(thread_cpu_s() - self.thread_cpu0),
            cpu_per_frame_us: per_frame(cpu_s, c.frames_complete),
            buffer: BufferInfo::from(rx.buffer_report()),
            realtime: Default::default(),
        }
    }
}

fn c_complete(d: &RawDepayloader) -> u64 {
    d.counters().frames_complete
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
