//! The receiving driver: kernel-timestamped RTP in, receiver reports out, and optional per-packet
//! trace and MPEG-TS capture. One thread, polling the RTP and RTCP sockets.

use metronome_rt::clock::Clock;
use metronome_rt::host::{HostLoad, HostWatch};
use metronome_rt::run::RunLimit;
use metronome_rt::udp::{self, RtcpSocket, SocketOptions, UdpError, UdpReceiver};
use metronome_rt::url::RtpUrl;
use metronome_session::receiver::{PacketRecord, ReceiverConfig, ReceiverSession, ReceiverSummary};
use metronome_session::srtp::ReceiverSrtp;
use metronome_time::Timestamp;
use serde::Serialize;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct ReceiverRunConfig {
    pub source: RtpUrl,
    pub session: ReceiverConfig,
    pub duration: Option<Duration>,
    /// Stop after this many RTP packets have been accepted.
    pub packets: Option<u64>,
    /// Per-packet CSV trace.
    pub trace: Option<PathBuf>,
    /// Where to save the received payload (MPEG-TS for RTP/MP2T).
    pub output: Option<PathBuf>,
    pub socket: SocketOptions,
    pub status_every: Duration,
    /// Where every accepted RTP packet's payload also goes (`recv --quality`).
    pub sink: Option<PayloadSinkHandle>,
    /// For a group: send the receiver reports to this unicast address (the sender's RTCP
    /// port) instead of the group, as RFC 5760 has receivers of source-specific multicast do.
    pub feedback_to: Option<std::net::SocketAddr>,
    /// End the run once every source has said BYE (an RTSP session's stream is over then).
    pub end_on_bye: bool,
    /// The stream is SRTP with this key (the SDP's `a=crypto`): every datagram is checked
    /// and decrypted, and receiver reports go out as SRTCP.
    pub srtp: Option<metronome_session::srtp::SrtpKey>,
}

/// What gets each accepted RTP packet's payload as it arrives (in order, reordered or after a
/// resync; not duplicates), on the receiving thread: keep the work small.
pub trait PayloadSink: Send {
    /// `rec` is what the session made of the packet (source, extended sequence number, RTP
    /// timestamp, marker, arrival on the session's clock); `payload` its payload.
    fn payload(&mut self, rec: &PacketRecord, payload: &[u8]);
    /// Every RTP packet the session took (duplicates and late ones too), with its arrival on
    /// the wall clock and the whole datagram: for callers that measure per packet.
    fn packet(&mut self, _rec: &PacketRecord, _arrival_unix_ns: u64, _datagram: &[u8]) {}
}

/// A shared [`PayloadSink`]: the caller keeps a clone to read it after the run.
#[derive(Clone)]
pub struct PayloadSinkHandle(pub std::sync::Arc<std::sync::Mutex<dyn PayloadSink>>);

impl std::fmt::Debug for PayloadSinkHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PayloadSinkHandle")
    }
}

impl ReceiverRunConfig {
    pub fn new(source: RtpUrl) -> Self {
        ReceiverRunConfig {
            source,
            session: ReceiverConfig::default(),
            duration: None,
            packets: None,
            trace: None,
            output: None,
            socket: SocketOptions {
                buffer_bytes: 8 << 20,
                read_timeout: None,
            },
            status_every: Duration::from_millis(500),
            sink: None,
            feedback_to: None,
            end_on_bye: false,
            srtp: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    #[error(transparent)]
    Udp(#[from] UdpError),
    #[error("cannot write '{path}': {source}. Check that the directory exists and is writable")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("receiving on {0}: {1}")]
    Io(String, std::io::Error),
    /// What a [`DatagramSource`] reported.
    #[error("{0}")]
    Source(SourceError),
    #[error(transparent)]
    Srtp(#[from] metronome_session::srtp::SrtpError),
}

#[derive(Clone, Debug, Serialize)]
pub struct ReceiverOutcome {
    pub source: String,
    pub ended_by: &'static str,
    #[serde(
        rename = "duration_us",
        serialize_with = "metronome_time::units::secs_as_us"
    )]
    pub duration_s: f64,
    /// Whether every datagram carried a kernel receive timestamp (SO_TIMESTAMPNS).
    pub kernel_timestamps: bool,
    pub datagrams_without_kernel_timestamp: u64,
    pub receive_buffer_bytes: usize,
    /// Datagrams the kernel dropped for lack of socket buffer (SO_RXQ_OVFL).
    pub socket_overflows: u64,
    pub truncated_datagrams: u64,
    /// SRTP streams: datagrams that did not authenticate (another key, forged, damaged,
    /// replayed, or plain RTP), dropped; 0 otherwise.
    pub srtp_rejected_datagrams: u64,
    /// Receiver reports that left (none go to a unicast sender before its first SR).
    pub receiver_reports_sent: u64,
    /// How busy the host was over the run (absent where /proc cannot be read).
    pub host: Option<HostLoad>,
    #[serde(flatten)]
    pub receiver: ReceiverSummary,
}

struct Outputs {
    trace: Option<(String, BufWriter<File>)>,
    output: Option<(String, BufWriter<File>)>,
    sink: Option<PayloadSinkHandle>,
}

fn create(path: &Option<PathBuf>) -> Result<Option<(String, BufWriter<File>)>, RecvError> {
    let Some(p) = path else { return Ok(None) };
    let name = p.display().to_string();
    let f = File::create(p).map_err(|source| RecvError::File {
        path: name.clone(),
        source,
    })?;
    Ok(Some((name, BufWriter::with_capacity(1 << 20, f))))
}

fn open_outputs(cfg: &ReceiverRunConfig) -> Result<Outputs, RecvError> {
    let mut out = Outputs {
        trace: create(&cfg.trace)?,
        output: create(&cfg.output)?,
        sink: cfg.sink.clone(),
    };
    if let Some((p, w)) = &mut out.trace {
        writeln!(w, "arrival_ns,ssrc,seq,ext_seq,rtp_ts,size,verdict,transit_ticks,jitter_ticks,interarrival_ns,one_way_delay_ns,arrival_unix_ns")
            .map_err(|e| write_err(p, e))?;
    }
    Ok(out)
}

fn write_err(path: &str, source: std::io::Error) -> RecvError {
    RecvError::File {
        path: path.to_string(),
        source,
    }
}

/// Most datagrams taken from a socket in one pass, so that a flood cannot starve the stop, the
/// duration and the receiver reports.
const MAX_BATCH: usize = 256;

/// A bound receiver, ready to run.
pub struct Receiver {
    cfg: ReceiverRunConfig,
    rtp: UdpReceiver,
    rtcp: RtcpSocket,
    /// With FEC (`ReceiverRepair::fec_max_packet`): the column and row FEC sockets, on the
    /// media's port + 2 and + 4 (SMPTE 2022-1 §8).
    fec: Vec<UdpReceiver>,
    out: Outputs,
    srtp: Option<ReceiverSrtp>,
}

/// The FEC sockets of a receiver that takes FEC: the source's address on port + 2 and + 4
/// (a group's, joined as the media's).
fn open_fec(cfg: &ReceiverRunConfig) -> Result<Vec<UdpReceiver>, RecvError> {
    let takes_fec = cfg
        .session
        .repair
        .as_ref()
        .is_some_and(|r| r.fec_max_packet.is_some());
    if !takes_fec {
        return Ok(Vec::new());
    }
    if cfg.srtp.is_some() {
        // Unauthenticated FEC could rebuild any bytes into the authenticated stream.
        return Err(RecvError::Io(
            cfg.source.to_string(),
            std::io::Error::other(
                "SMPTE 2022-1 FEC is not protected by SRTP: drop --fec to receive an SRTP stream",
            ),
        ));
    }
    let offsets = [
        metronome_wire::fec2022::COLUMN_PORT_OFFSET,
        metronome_wire::fec2022::ROW_PORT_OFFSET,
    ];
    offsets
        .into_iter()
        .map(|off| {
            let mut at = cfg.source;
            let port = at.addr.port().checked_add(off).ok_or_else(|| {
                RecvError::Io(
                    cfg.source.to_string(),
                    std::io::Error::other(
                        "FEC comes on the media's port + 2 and + 4: use a lower port",
                    ),
                )
            })?;
            at.addr.set_port(port);
            let r = UdpReceiver::open(&at, &cfg.socket)?;
            r.socket()
                .set_nonblocking(true)
                .map_err(|e| RecvError::Io(at.to_string(), e))?;
            Ok(r)
        })
        .collect()
}

impl Receiver {
    /// Binds the RTP and RTCP sockets (joining the group for multicast) and opens the output files.
    pub fn open(cfg: ReceiverRunConfig) -> Result<Receiver, RecvError> {
        let rtp = UdpReceiver::open(&cfg.source, &cfg.socket)?;
        let rtcp_opts = SocketOptions {
            buffer_bytes: 256 << 10,
            read_timeout: None,
        };
        let mut rtcp = RtcpSocket::open_for_receiver(&cfg.source, &rtcp_opts)?;
        if let Some(to) = cfg.feedback_to {
            rtcp.set_peer(to);
        }
        let nb = |r: std::io::Result<()>| r.map_err(|e| RecvError::Io(cfg.source.to_string(), e));
        nb(rtp.socket().set_nonblocking(true))?;
        nb(rtcp.socket().set_nonblocking(true))?;
        let out = open_outputs(&cfg)?;
        let srtp = cfg.srtp.as_ref().map(ReceiverSrtp::new).transpose()?;
        let fec = open_fec(&cfg)?;
        Ok(Receiver {
            cfg,
            rtp,
            rtcp,
            fec,
            out,
            srtp,
        })
    }

    /// Where RTP is received.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.rtp.local_addr()
    }

    /// Receives until `duration` or `packets` is reached, or `stop` is set.
    pub fn run(
        self,
        stop: &AtomicBool,
        mut on_status: impl FnMut(&ReceiverSession),
    ) -> Result<ReceiverOutcome, RecvError> {
        let host = HostWatch::start();
        let mut r = Running::new(self);
        let start = r.clock.now();
        let limit = RunLimit::new(start, r.cfg.duration, stop);
        let mut next_status = start + r.cfg.status_every;
        let ended_by = loop {
            let now = r.clock.now();
            if let Some(why) = limit.ended(now) {
                break why;
            }
            if r.enough() {
                break PACKET_COUNT;
            }
            if r.cfg.end_on_bye && r.session.every_source_said_bye() {
                break SENDER_BYE;
            }
            let can_report = r.send_due_report(now);
            if r.session.controller_left() {
                // Its leaving report went out just now; the BYE follows in `finish`.
                break "left the group (TFMCC, RFC 4654 §4.4: its rate stayed below the lowest it may report for 120 s)";
            }
            if now >= next_status {
                next_status = now + r.cfg.status_every;
                on_status(&r.session);
            }
            let mut wake = next_status.min(limit.deadline().unwrap_or(Timestamp::MAX));
            if let Some((t, _)) = r.session.poll_timeout().filter(|_| can_report) {
                wake = wake.min(t);
            }
            r.wait(wake.saturating_since(now).min(Duration::from_millis(100)));
            r.take_rtp(MAX_BATCH, r.cfg.packets)?;
            r.take_fec()?;
            r.take_rtcp();
        };
        r.finish(ended_by, start, host, on_status)
    }
}

/// Why a run that reached `packets` ended.
const PACKET_COUNT: &str = "packet count";
/// Why a run with [`ReceiverRunConfig::end_on_bye`] ended.
const SENDER_BYE: &str = "the sender said BYE (RFC 3550 §6.6): the stream is over";

/// A receiver while it runs: its session, its sockets and outputs, and what the driver counts
/// beside the session.
struct Running {
    cfg: ReceiverRunConfig,
    clock: Clock,
    session: ReceiverSession,
    rx: RtpIn,
    rtcp: RtcpSocket,
    fec: Vec<UdpReceiver>,
    out: Outputs,
    buf: Vec<u8>,
    reports_sent: u64,
    peer: PeerFollower,
}

impl Running {
    fn new(r: Receiver) -> Self {
        Running {
            session: ReceiverSession::new(r.cfg.session.clone()),
            cfg: r.cfg,
            clock: Clock::new(),
            rx: RtpIn {
                rtp: r.rtp,
                without_ts: 0,
                overflows: 0,
                truncated: 0,
                srtp: r.srtp,
            },
            rtcp: r.rtcp,
            fec: r.fec,
            out: r.out,
            buf: vec![0u8; 65_536],
            reports_sent: 0,
            peer: PeerFollower::default(),
        }
    }

    /// Whether the packets asked for have been accepted.
    fn enough(&self) -> bool {
        self.cfg
            .packets
            .is_some_and(|n| self.session.counters().rtp_packets >= n)
    }

    /// Sends a report that is due at `now`. A unicast receiver learns where to report from the
    /// sender's first report: until then what is due waits (a rate controller's first feedback,
    /// due at the first packet, would otherwise be lost, and the sender would wait for the
    /// next). Returns whether the receiver can report.
    fn send_due_report(&mut self, now: Timestamp) -> bool {
        let can_report = self.rtcp.peer().is_some();
        if can_report {
            if let Some(n) = self.session.poll_transmit(now, &mut self.buf) {
                self.reports_sent += self.rx.send_report(&self.rtcp, &self.buf[..n]);
            }
        }
        can_report
    }

    /// Waits up to `timeout` for any socket to be readable.
    fn wait(&self, timeout: Duration) {
        let (rtp, rtcp) = (self.rx.rtp.socket(), self.rtcp.socket());
        let mut fds = [rtp.as_raw_fd(), rtcp.as_raw_fd(), -1, -1];
        for (fd, f) in fds[2..].iter_mut().zip(&self.fec) {
            *fd = f.socket().as_raw_fd();
        }
        let n = 2 + self.fec.len().min(2);
        let _ = metronome_rt::poll::wait_readable(&fds[..n], timeout.min(Duration::from_secs(1)));
    }

    /// FEC: what is queued on the FEC sockets, up to a batch each; the packets it rebuilds
    /// go out as the stream's.
    fn take_fec(&mut self) -> Result<(), RecvError> {
        for f in &self.fec {
            for _ in 0..MAX_BATCH {
                let Ok(meta) = f.recv(&mut self.buf) else {
                    break;
                };
                let (arrival, wall) = self.clock.arrival(meta.kernel_rx_realtime_ns);
                self.session.handle_fec(&self.buf[..meta.len]);
                record_rebuilt(
                    &mut self.session,
                    &mut self.out,
                    arrival,
                    wall.to_unix_nanos(),
                )?;
            }
        }
        Ok(())
    }

    /// RTP: what is queued, up to `max` datagrams.
    fn take_rtp(&mut self, max: usize, packets: Option<u64>) -> Result<(), RecvError> {
        let (session, out, buf) = (&mut self.session, &mut self.out, &mut self.buf);
        self.rx.read(&self.clock, session, out, buf, max, packets)
    }

    /// RTCP, up to a batch. For unicast, reports go back to where the current sender's SRs come
    /// from (followed when a restarted sender reports from a new port); nothing else, such as a
    /// stray datagram, decides it.
    fn take_rtcp(&mut self) {
        for _ in 0..MAX_BATCH {
            let Ok(meta) = self.rtcp.recv(&mut self.buf) else {
                break;
            };
            let (at, _) = self.clock.arrival(meta.kernel_rx_realtime_ns);
            let Some(data) = self.rx.rtcp_in(&self.buf[..meta.len]) else {
                continue;
            };
            let from_sender = self.session.handle_rtcp(at, data);
            if !self.cfg.source.is_multicast() {
                self.peer.heard(&mut self.rtcp, from_sender, data, meta.src);
            }
        }
        self.peer.settle(&mut self.rtcp, &self.session);
        while self.session.poll_event().is_some() {}
    }

    /// The end: what the kernel still holds, the BYE, the outputs flushed, the outcome.
    fn finish(
        mut self,
        ended_by: &'static str,
        start: Timestamp,
        host: HostWatch,
        mut on_status: impl FnMut(&ReceiverSession),
    ) -> Result<ReceiverOutcome, RecvError> {
        if ended_by != PACKET_COUNT {
            // What the kernel already holds arrived before the end: count it too. Bounded by
            // what a socket buffer can hold.
            self.take_rtp(1 << 20, None)?;
        }
        let end = self.clock.now();
        if let Some(n) = self.session.bye(end, &mut self.buf) {
            self.reports_sent += self.rx.send_report(&self.rtcp, &self.buf[..n]);
        }
        for (p, w) in [&mut self.out.trace, &mut self.out.output]
            .into_iter()
            .flatten()
        {
            w.flush().map_err(|e| write_err(p, e))?;
        }
        on_status(&self.session);
        let rx = &self.rx;
        Ok(ReceiverOutcome {
            source: self.cfg.source.to_string(),
            ended_by,
            duration_s: end.saturating_since(start).as_secs_f64(),
            kernel_timestamps: rx.without_ts == 0 && self.session.counters().datagrams > 0,
            datagrams_without_kernel_timestamp: rx.without_ts,
            receive_buffer_bytes: rx.rtp.recv_buffer(),
            socket_overflows: rx.overflows,
            truncated_datagrams: rx.truncated,
            srtp_rejected_datagrams: rx.srtp.as_ref().map_or(0, |k| k.rejected),
            receiver_reports_sent: self.reports_sent,
            host: host.finish(0),
            receiver: self.session.summary(),
        })
    }
}

/// The RTP socket and what the driver counts about its datagrams, beside what the session counts.
struct RtpIn {
    rtp: UdpReceiver,
    without_ts: u64,
    overflows: u64,
    truncated: u64,
    /// The stream's SRTP, for both sockets' datagrams and the reports sent.
    srtp: Option<ReceiverSrtp>,
}

impl RtpIn {
    /// Reads up to `max` queued datagrams (fewer once `packets` accepted packets are reached) and
    /// hands each to the session and the outputs.
    fn read(
        &mut self,
        clock: &Clock,
        session: &mut ReceiverSession,
        out: &mut Outputs,
        buf: &mut [u8],
        max: usize,
        packets: Option<u64>,
    ) -> Result<(), RecvError> {
        for _ in 0..max {
            if packets.is_some_and(|p| session.counters().rtp_packets >= p) {
                break;
            }
            let meta = match self.rtp.recv(buf) {
                Ok(m) => m,
                Err(e) if udp::is_timeout(&e) => break,
                Err(e) => {
                    let at = self
                        .rtp
                        .local_addr()
                        .map(|a| a.to_string())
                        .unwrap_or_default();
                    return Err(RecvError::Io(at, e));
                }
            };
            self.without_ts += meta.kernel_rx_realtime_ns.is_none() as u64;
            let (arrival, wall) = clock.arrival(meta.kernel_rx_realtime_ns);
            if let Some(d) = meta.dropped_total {
                self.overflows = d as u64;
            }
            self.truncated += meta.truncated as u64;
            let data = match &mut self.srtp {
                None => &buf[..meta.len],
                Some(k) => match k.rtp(&buf[..meta.len]) {
                    Some(plain) => plain,
                    None => continue,
                },
            };
            let rec = session.handle_rtp(arrival, Some(wall), data);
            // A retransmission is given back as the packet it repairs.
            let data = match &rec {
                Ok(r) if r.repaired => session.repaired_packet(),
                _ => data,
            };
            record(out, arrival, wall.to_unix_nanos(), data, &rec)?;
            // A packet may let FEC rebuild others (or free one rebuilt ahead of it).
            record_rebuilt(session, out, arrival, wall.to_unix_nanos())?;
        }
        Ok(())
    }

    /// An RTCP datagram as the session takes it (decrypted, for SRTP; `None`: rejected).
    fn rtcp_in<'a>(&'a mut self, datagram: &'a [u8]) -> Option<&'a [u8]> {
        match &mut self.srtp {
            None => Some(datagram),
            Some(k) => k.rtcp_in(datagram),
        }
    }

    /// Sends one of this receiver's reports (as SRTCP, for SRTP); 1 if it left.
    fn send_report(&mut self, rtcp: &RtcpSocket, report: &[u8]) -> u64 {
        match &mut self.srtp {
            None => send_report(rtcp, report),
            Some(k) => k.rtcp_out(report).map_or(0, |p| send_report(rtcp, p)),
        }
    }
}

/// Where a unicast receiver's reports go: back to where the stream's sender reports from
/// (followed when a restarted sender reports from a new port). A sender may report before its
/// first packet arrives (Metronome's sends its first report at the stream's start): the last
/// such report's SSRC and address are kept, and followed once a packet shows the SSRC is the
/// stream's. Nothing else, such as a stray datagram, decides it.
#[derive(Default)]
struct PeerFollower {
    early: Option<(u32, std::net::SocketAddr)>,
}

impl PeerFollower {
    /// An RTCP datagram from `src`; `from_sender`: the session knows it as the stream's sender's.
    fn heard(
        &mut self,
        rtcp: &mut RtcpSocket,
        from_sender: bool,
        data: &[u8],
        src: std::net::SocketAddr,
    ) {
        if from_sender {
            if rtcp.peer() != Some(src) {
                rtcp.set_peer(src);
            }
            self.early = None;
        } else if let Some(ssrc) = sender_report_ssrc(data) {
            self.early = Some((ssrc, src));
        }
    }

    /// Follows a report that came early, once its SSRC is a source of the session.
    fn settle(&mut self, rtcp: &mut RtcpSocket, session: &ReceiverSession) {
        let Some((ssrc, src)) = self.early else {
            return;
        };
        if session.sources().iter().any(|s| s.ssrc == ssrc) {
            if rtcp.peer().is_none() {
                rtcp.set_peer(src);
            }
            self.early = None;
        }
    }
}

/// The SSRC of a compound RTCP packet that starts with a sender report (RFC 3550 §6.4.1).
fn sender_report_ssrc(data: &[u8]) -> Option<u32> {
    let head: [u8; 8] = data.get(..8)?.try_into().ok()?;
    (head[0] >> 6 == 2 && head[1] == 200)
        .then(|| u32::from_be_bytes([head[4], head[5], head[6], head[7]]))
}

/// Sends a report if there is somewhere to send it; returns how many were sent (0 or 1).
pub(crate) fn send_report(rtcp: &RtcpSocket, report: &[u8]) -> u64 {
    // Before a unicast sender has been heard there is nowhere to send; the next report goes.
    (rtcp.peer().is_some() && rtcp.send(report).is_ok()) as u64
}

/// The packets FEC rebuilt by `arrival`, recorded as the stream's.
fn record_rebuilt(
    session: &mut ReceiverSession,
    out: &mut Outputs,
    arrival: Timestamp,
    arrival_unix_ns: u64,
) -> Result<(), RecvError> {
    while let Some(rec) = session.poll_rebuilt(arrival) {
        if rec.is_ok() {
            record(
                out,
                arrival,
                arrival_unix_ns,
                session.repaired_packet(),
                &rec,
            )?;
        }
    }
    Ok(())
}

fn record(
    out: &mut Outputs,
    arrival: Timestamp,
    arrival_unix_ns: u64,
    data: &[u8],
    rec: &Result<PacketRecord, metronome_session::receiver::Dropped>,
) -> Result<(), RecvError> {
    if let Some((p, w)) = &mut out.trace {
        let r = match rec {
            Ok(r) => writeln!(
                w,
                "{},{:08x},{},{},{},{},{:?},{},{:.4},{},{},{arrival_unix_ns}",
                arrival.as_nanos(),
                r.ssrc,
                r.seq,
                r.ext_seq,
                r.rtp_ts,
                r.size,
                r.verdict,
                r.transit_ticks,
                r.jitter_ticks,
                r.interarrival_ns.map(|v| v.to_string()).unwrap_or_default(),
                r.one_way_delay_ns
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
            ),
            Err(d) => writeln!(
                w,
                "{},,,,,{},\"dropped: {:?}\",,,,,{arrival_unix_ns}",
                arrival.as_nanos(),
                data.len(),
                d
            ),
        };
        r.map_err(|e| write_err(p, e))?;
    }
    use metronome_session::receiver::SeqVerdict::*;
    let Ok(r) = rec else { return Ok(()) };
    if let Some(sink) = &out.sink {
        sink.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .packet(r, arrival_unix_ns, data);
    }
    if !matches!(r.verdict, InOrder | Reordered | Resync) {
        return Ok(());
    }
    let payload = data.get(r.payload.clone()).unwrap_or_default();
    if let Some((p, w)) = &mut out.output {
        w.write_all(payload).map_err(|e| write_err(p, e))?;
    }
    if let Some(sink) = &out.sink {
        sink.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .payload(r, payload);
    }
    Ok(())
}

/// What a [`DatagramSource`] had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// An RTP datagram of this many bytes, copied into the buffer.
    Rtp(usize),
    /// An RTCP datagram of this many bytes, copied into the buffer.
    Rtcp(usize),
    /// Nothing came for a short while.
    Nothing,
    /// The source is closed: nothing more will come.
    Ended,
}

/// Why a [`DatagramSource`] failed.
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

/// Datagrams that come some other way than the receiver's UDP sockets: RTP and RTCP
/// interleaved on an RTSP connection (RFC 2326 §10.12).
pub trait DatagramSource {
    /// The next datagram, copied into `buf`; waits a short while (tens of ms) at most.
    fn recv(&mut self, buf: &mut [u8]) -> Result<Incoming, SourceError>;
    /// Sends a receiver report back the way the datagrams came; false if it could not.
    fn send_rtcp(&mut self, report: &[u8]) -> bool;
    /// Where the datagrams come from, for the outcome.
    fn describe(&self) -> String;
}

/// Receives from `src` as [`Receiver::run`] does from its sockets, until `duration` or
/// `packets`, `stop`, or the end of the source. `cfg.source` and `cfg.socket` are not used.
///
/// A datagram's arrival time is when it was read (there is no kernel timestamp), so jitter
/// includes the time the transport held it.
pub fn run_datagrams(
    cfg: &ReceiverRunConfig,
    src: &mut dyn DatagramSource,
    stop: &AtomicBool,
    mut on_status: impl FnMut(&ReceiverSession),
) -> Result<ReceiverOutcome, RecvError> {
    let mut out = open_outputs(cfg)?;
    let host = HostWatch::start();
    let clock = Clock::new();
    let mut session = ReceiverSession::new(cfg.session.clone());
    let start = clock.now();
    let mut next_status = start + cfg.status_every;
    let mut buf = vec![0u8; 65_536];
    let mut reports_sent = 0u64;
    let limit = RunLimit::new(start, cfg.duration, stop);
    let ended_by = loop {
        let now = clock.now();
        if let Some(why) = limit.ended(now) {
            break why;
        }
        if cfg
            .packets
            .is_some_and(|n| session.counters().rtp_packets >= n)
        {
            break "packet count";
        }
        if cfg.end_on_bye && session.every_source_said_bye() {
            break SENDER_BYE;
        }
        if let Some(n) = session.poll_transmit(now, &mut buf) {
            reports_sent += src.send_rtcp(&buf[..n]) as u64;
        }
        if now >= next_status {
            next_status = now + cfg.status_every;
            on_status(&session);
        }
        match src.recv(&mut buf).map_err(RecvError::Source)? {
            Incoming::Rtp(n) => {
                let (arrival, wall) = clock.arrival(None);
                let data = &buf[..n.min(buf.len())];
                let rec = session.handle_rtp(arrival, Some(wall), data);
                record(&mut out, arrival, wall.to_unix_nanos(), data, &rec)?;
            }
            Incoming::Rtcp(n) => {
                let (at, _) = clock.arrival(None);
                session.handle_rtcp(at, &buf[..n.min(buf.len())]);
            }
            Incoming::Nothing => {}
            Incoming::Ended => break "source closed",
        }
        while session.poll_event().is_some() {}
    };
    let end = clock.now();
    if let Some(n) = session.bye(end, &mut buf) {
        reports_sent += src.send_rtcp(&buf[..n]) as u64;
    }
    for (p, w) in [&mut out.trace, &mut out.output].into_iter().flatten() {
        w.flush().map_err(|e| write_err(p, e))?;
    }
    on_status(&session);
    Ok(ReceiverOutcome {
        source: src.describe(),
        ended_by,
        duration_s: end.saturating_since(start).as_secs_f64(),
        kernel_timestamps: false,
        datagrams_without_kernel_timestamp: session.counters().datagrams,
        receive_buffer_bytes: 0,
        socket_overflows: 0,
        truncated_datagrams: 0,
        srtp_rejected_datagrams: 0,
        receiver_reports_sent: reports_sent,
        host: host.finish(0),
        receiver: session.summary(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_rt::udp::SocketOptions;
    use metronome_session::receiver::{AgentKind, ReceiverConfig};
    use metronome_time::Timestamp;

    fn sender_report(ssrc: u32) -> Vec<u8> {
        // V=2, no report blocks, PT 200, length 6 (28 bytes): SSRC, NTP, RTP time, counts.
        let mut sr = vec![0x80, 200, 0, 6];
        sr.extend_from_slice(&ssrc.to_be_bytes());
        sr.extend_from_slice(&[0; 20]);
        sr
    }

    fn rtp_packet(ssrc: u32) -> Vec<u8> {
        let mut p = vec![0x80, 33, 0, 1, 0, 0, 0, 0];
        p.extend_from_slice(&ssrc.to_be_bytes());
        for _ in 0..7 {
            let mut ts = [0xffu8; 188];
            ts[..4].copy_from_slice(&[0x47, 0x1f, 0xff, 0x10]);
            p.extend_from_slice(&ts);
        }
        p
    }

    /// A sender's first report may come before its first packet: reports go back to it once a
    /// packet shows its SSRC is the stream's; a report of another SSRC, or anything that is not
    /// a sender report, decides nothing.
    #[test]
    fn a_report_before_the_first_packet_is_followed_once_the_packet_comes() {
        // RTCP at a port the kernel found free (RTP's is one below).
        let free = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let url = RtpUrl::unicast(std::net::SocketAddr::from(([127, 0, 0, 1], port - 1)));
        let mut rtcp = RtcpSocket::open_for_receiver(&url, &SocketOptions::default()).unwrap();
        let mut session = ReceiverSession::new(ReceiverConfig::default());
        let mut peer = PeerFollower::default();
        let (sender, stray) = (
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.1:40002".parse().unwrap(),
        );
        let at = Timestamp::from_nanos(1_000_000);
        assert!(!session.handle_rtcp(at, &sender_report(7)));
        peer.heard(&mut rtcp, false, &sender_report(7), sender);
        peer.heard(&mut rtcp, false, b"not rtcp", stray);
        peer.settle(&mut rtcp, &session);
        assert_eq!(rtcp.peer(), None, "no packet of SSRC 7 yet");
        session.handle_rtp(at, None, &rtp_packet(7)).unwrap();
        peer.settle(&mut rtcp, &session);
        assert_eq!(rtcp.peer(), Some(sender));

        // Another SSRC's early report is never followed.
        drop(rtcp);
        let mut rtcp = RtcpSocket::open_for_receiver(&url, &SocketOptions::default()).unwrap();
        let mut peer = PeerFollower::default();
        peer.heard(&mut rtcp, false, &sender_report(8), stray);
        peer.settle(&mut rtcp, &session);
        assert_eq!(rtcp.peer(), None);
    }

    /// A rate controller's first feedback is due at the first packet. A unicast receiver that
    /// has not heard the sender's report yet has nowhere to send it: it holds it until it has
    /// (sent at once, it was lost, and TFRC's sender, at one packet a second before feedback,
    /// waited a second for the next).
    #[test]
    fn feedback_due_before_the_sender_is_known_waits_for_it() {
        let free = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let url = RtpUrl::unicast(std::net::SocketAddr::from(([127, 0, 0, 1], port - 1)));
        let mut cfg = ReceiverRunConfig::new(url);
        cfg.session.cc = AgentKind::Tfrc;
        cfg.duration = Some(Duration::from_secs(5));
        let rx = Receiver::open(cfg).unwrap();
        let stop = AtomicBool::new(false);
        let data = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let control = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        control
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        std::thread::scope(|scope| {
            let running = scope.spawn(|| rx.run(&stop, |_| {}));
            data.send_to(&rtp_packet(7), ("127.0.0.1", port - 1))
                .unwrap();
            // The sender's report comes later than its packet.
            std::thread::sleep(Duration::from_millis(200));
            control
                .send_to(&sender_report(7), ("127.0.0.1", port))
                .unwrap();
            let mut buf = [0u8; 1500];
            let got = control.recv(&mut buf);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let n = got.expect("the feedback due at the first packet, once the sender is known");
            assert!(
                buf[..n].windows(4).any(|w| w == b"TFRC"),
                "a TFRC report, not only a receiver report"
            );
            running.join().unwrap().unwrap();
        });
    }

    /// A TS packet of `ssrc` numbered `seq`, its TS payloads marked with `seq`.
    fn numbered(ssrc: u32, seq: u16) -> Vec<u8> {
        let mut p = rtp_packet(ssrc);
        p[2..4].copy_from_slice(&seq.to_be_bytes());
        p[4..8].copy_from_slice(&(u32::from(seq) * 900).to_be_bytes());
        for ts in p[12..].chunks_exact_mut(188) {
            ts[4..].fill(seq as u8);
        }
        p
    }

    /// `recv --rtx-pt 97`: a packet lost on the way is asked for in a NACK sent to the
    /// sender's RTCP address, and its retransmission is written out as the packet itself.
    #[test]
    fn a_lost_packet_is_asked_for_and_its_retransmission_written_out() {
        use metronome_session::receiver::ReceiverRepair;
        use metronome_wire::rtcp::{parse_compound, RtcpItem};
        let free = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let out = std::env::temp_dir().join(format!("metronome-rtx-{}.ts", std::process::id()));
        let url = RtpUrl::unicast(std::net::SocketAddr::from(([127, 0, 0, 1], port - 1)));
        let mut cfg = ReceiverRunConfig::new(url);
        cfg.session.repair = Some(ReceiverRepair::new(97, Duration::from_secs(2)));
        cfg.duration = Some(Duration::from_secs(10));
        cfg.output = Some(out.clone());
        let rx = Receiver::open(cfg).unwrap();
        let stop = AtomicBool::new(false);
        let data = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let control = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        control
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let to = ("127.0.0.1", port - 1);
        std::thread::scope(|scope| {
            let running = scope.spawn(|| rx.run(&stop, |_| {}));
            data.send_to(&numbered(7, 0), to).unwrap();
            control
                .send_to(&sender_report(7), ("127.0.0.1", port))
                .unwrap();
            std::thread::sleep(Duration::from_millis(50));
            // Packet 5 is lost on the way.
            for seq in (1..10).filter(|&s| s != 5) {
                data.send_to(&numbered(7, seq), to).unwrap();
            }
            let mut asked = Vec::new();
            let mut buf = [0u8; 1500];
            while asked.is_empty() {
                let n = control.recv(&mut buf).expect("a NACK for packet 5");
                parse_compound(&buf[..n], |item| {
                    if let RtcpItem::Nack(n) = item {
                        asked.extend(n.sequences().map(|s| (n.media_ssrc, s)));
                    }
                })
                .unwrap();
            }
            assert_eq!(asked, vec![(7, 5)]);
            let ids = metronome_wire::rtx::StreamIds {
                ssrc: 0x77,
                payload_type: 97,
            };
            let mut rtx = [0u8; 1500];
            let n = metronome_wire::rtx::wrap(&numbered(7, 5), ids, 1, &mut rtx).unwrap();
            data.send_to(&rtx[..n], to).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            running.join().unwrap().unwrap();
        });
        let written = std::fs::read(&out).unwrap();
        let _ = std::fs::remove_file(&out);
        // Ten packets of seven TS packets each; packet 5's after the others, as it came.
        assert_eq!(written.len(), 10 * 7 * 188);
        let order: Vec<u8> = written.chunks_exact(7 * 188).map(|p| p[4]).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4, 6, 7, 8, 9, 5]);
    }
}
