//! The receiving driver: kernel-timestamped RTP in, receiver reports out, and optional per-packet
//! trace and MPEG-TS capture. One thread, polling the RTP and RTCP sockets.

//!
//! - `mod.rs`: what a run is given and gives back, the bound [`Receiver`] and its loop.
//! - `rtp_in.rs`: the RTP socket's datagrams into the session; where reports go
//!   (`PeerFollower`).
//! - `output.rs`: the trace, the payload capture and the sink each packet goes to.
//! - `datagrams.rs`: [`run_datagrams`], for datagrams that come another way (RTSP
//!   interleaved).

mod datagrams;
mod output;
mod rtp_in;
#[cfg(test)]
mod tests;

pub use datagrams::{run_datagrams, DatagramSource, Incoming, SourceError};
use metronome_time::Micros;
use output::{open_outputs, record_rebuilt, write_err, Outputs};
use rtp_in::{PeerFollower, RtpIn};

use metronome_rt::clock::Clock;
use metronome_rt::host::{HostLoad, HostWatch};
use metronome_rt::run::{EndedBy, RunLimit};
use metronome_rt::udp::{RtcpSocket, SocketOptions, UdpError, UdpReceiver};
use metronome_rt::url::RtpUrl;
use metronome_session::receiver::{PacketRecord, ReceiverConfig, ReceiverSession, ReceiverSummary};
use metronome_session::repair::NackConfig;
use metronome_session::srtp::ReceiverSrtp;
use metronome_time::Timestamp;
use serde::Serialize;
use std::io::Write;
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

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ReceiverOutcome {
    pub source: String,
    pub ended_by: metronome_rt::run::EndedBy,
    pub duration_us: Micros,
    /// Whether every datagram carried a kernel receive timestamp (SO_TIMESTAMPNS).
    pub kernel_timestamps: bool,
    pub datagrams_without_kernel_timestamp: u64,
    pub receive_buffer_bytes: usize,
    /// Datagrams the kernel dropped on the RTP socket, for lack of buffer (its drop count at
    /// the end, or as the last datagram carried it: SO_MEMINFO, SO_RXQ_OVFL).
    pub socket_overflows: u64,
    /// The same on the FEC sockets, column and row together (0 without FEC). FEC that comes
    /// before the stream's first packet waits in its socket's buffer, so a long wait shows
    /// here.
    pub fec_socket_overflows: u64,
    pub truncated_datagrams: u64,
    /// FEC datagrams from another host than the stream's packets, dropped: FEC rebuilds
    /// packets, so only the stream's sender may send it. FEC that comes before the stream's
    /// first packet waits for it; what still waits when the run ends is counted here too.
    pub foreign_fec_datagrams: u64,
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

/// What the kernel dropped on `socket`: its drop count now, where the kernel gives it, else
/// the count the last datagram read carried (`stamped`), which misses drops after it.
fn dropped(socket: &UdpReceiver, stamped: u64) -> u64 {
    socket.drops().map_or(stamped, |now| now.max(stamped))
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

    /// Receives until `duration` or `packets` is reached, or `stop` is set. `on_status` gets
    /// the session and the time since the start every `status_every` (on whole multiples of
    /// it), and once more at the end.
    pub fn run(
        self,
        stop: &AtomicBool,
        mut on_status: impl FnMut(&ReceiverSession, Duration),
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
                break EndedBy::Packets;
            }
            if r.cfg.end_on_bye && r.session.every_source_said_bye() {
                break EndedBy::SenderBye;
            }
            let can_report = r.send_due_report(now);
            if r.session.controller_left() {
                // Its leaving report went out just now; the BYE follows in `finish`.
                break EndedBy::LeftGroup;
            }
            if now >= next_status {
                next_status = next_status_after(next_status, now, r.cfg.status_every);
                on_status(&r.session, now.saturating_since(start));
            }
            let mut wake = next_status.min(limit.deadline().unwrap_or(Timestamp::MAX));
            if let Some((t, _)) = r.session.poll_timeout().filter(|_| can_report) {
                wake = wake.min(t);
            }
            r.wait(wake.saturating_since(now).min(Duration::from_millis(100)));
            r.take_rtp(MAX_BATCH, r.cfg.packets)?;
            r.take_fec(MAX_BATCH, false)?;
            r.take_rtcp();
        };
        r.finish(ended_by, start, host, on_status)
    }
}

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
    /// FEC datagrams dropped for coming from another host than the stream's.
    foreign_fec: u64,
    /// Each FEC socket's SO_RXQ_OVFL count, as its last datagram carried it.
    fec_overflows: [u64; 2],
}

/// The session's configuration, a member of a group asking as one (RFC 4585's dither, the
/// sender's TLLEIs heard) where it was set to ask as a unicast receiver: the group's size is
/// not known here, so its dither is drawn uniformly.
fn group_asking(cfg: &ReceiverRunConfig) -> ReceiverConfig {
    let mut session = cfg.session.clone();
    if let Some(r) = session.repair.as_mut() {
        if cfg.source.is_multicast() && r.nack == NackConfig::default() {
            r.nack = NackConfig::group(0, 0);
        }
    }
    session
}

impl Running {
    fn new(r: Receiver) -> Self {
        Running {
            session: ReceiverSession::new(group_asking(&r.cfg)),
            cfg: r.cfg,
            clock: Clock::new(),
            rx: RtpIn {
                rtp: r.rtp,
                without_ts: 0,
                overflows: 0,
                truncated: 0,
                srtp: r.srtp,
                media_from: None,
            },
            rtcp: r.rtcp,
            fec: r.fec,
            out: r.out,
            buf: vec![0u8; 65_536],
            reports_sent: 0,
            peer: PeerFollower::default(),
            foreign_fec: 0,
            fec_overflows: [0; 2],
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

    /// Waits up to `timeout` for any socket to be readable (the FEC sockets once the stream's
    /// first packet has come: until then their datagrams wait, see [`Running::take_fec`]).
    fn wait(&self, timeout: Duration) {
        let (rtp, rtcp) = (self.rx.rtp.socket(), self.rtcp.socket());
        let mut fds = [rtp.as_raw_fd(), rtcp.as_raw_fd(), -1, -1];
        for (fd, f) in fds[2..].iter_mut().zip(&self.fec) {
            *fd = f.socket().as_raw_fd();
        }
        let fec = if self.rx.media_from.is_some() {
            self.fec.len().min(2)
        } else {
            0
        };
        let n = 2 + fec;
        let _ = metronome_rt::poll::wait_readable(&fds[..n], timeout.min(Duration::from_secs(1)));
    }

    /// FEC: what is queued on the FEC sockets, up to `max` datagrams each, from the host the
    /// stream's packets come from; the packets it rebuilds go out as the stream's. Before the
    /// stream's first packet nothing says whose FEC to take: it waits in its socket's buffer
    /// (the kernel's bound, no memory of ours), unless the run is `ending`, when what waits is
    /// counted as foreign and dropped.
    fn take_fec(&mut self, max: usize, ending: bool) -> Result<(), RecvError> {
        if self.rx.media_from.is_none() && !ending {
            return Ok(());
        }
        for (f, overflows) in self.fec.iter().zip(&mut self.fec_overflows) {
            for _ in 0..max {
                let Ok(meta) = f.recv(&mut self.buf) else {
                    break;
                };
                if let Some(d) = meta.dropped_total {
                    *overflows = u64::from(d);
                }
                if self.rx.media_from != Some(meta.src.ip()) {
                    self.foreign_fec += 1;
                    continue;
                }
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
        ended_by: EndedBy,
        start: Timestamp,
        host: HostWatch,
        mut on_status: impl FnMut(&ReceiverSession, Duration),
    ) -> Result<ReceiverOutcome, RecvError> {
        if ended_by != EndedBy::Packets {
            // What the kernel already holds arrived before the end: count it too. Bounded by
            // what a socket buffer can hold.
            self.take_rtp(1 << 20, None)?;
            self.take_fec(1 << 20, true)?;
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
        on_status(&self.session, end.saturating_since(start));
        let rx = &self.rx;
        Ok(ReceiverOutcome {
            source: self.cfg.source.to_string(),
            ended_by,
            duration_us: Micros::from(end.saturating_since(start)),
            kernel_timestamps: rx.without_ts == 0 && self.session.counters().datagrams > 0,
            datagrams_without_kernel_timestamp: rx.without_ts,
            receive_buffer_bytes: rx.rtp.recv_buffer(),
            socket_overflows: dropped(&rx.rtp, rx.overflows),
            fec_socket_overflows: (self.fec.iter())
                .zip(self.fec_overflows)
                .map(|(f, stamped)| dropped(f, stamped))
                .sum(),
            truncated_datagrams: rx.truncated,
            foreign_fec_datagrams: self.foreign_fec,
            srtp_rejected_datagrams: rx.srtp.as_ref().map_or(0, |k| k.rejected),
            receiver_reports_sent: self.reports_sent,
            host: host.finish(0),
            receiver: self.session.summary(),
        })
    }
}

/// Sends a report if there is somewhere to send it; returns how many were sent (0 or 1).
/// When the status after the one due at `due` is due: on whole multiples of `every` from the
/// start, so that interval lines read 0-1 s, 1-2 s; a run that fell behind skips to the next
/// multiple after `now`.
pub(crate) fn next_status_after(due: Timestamp, now: Timestamp, every: Duration) -> Timestamp {
    let every = every.max(Duration::from_millis(1));
    let mut next = due + every;
    while next <= now {
        next += every;
    }
    next
}

pub(crate) fn send_report(rtcp: &RtcpSocket, report: &[u8]) -> u64 {
    // Before a unicast sender has been heard there is nowhere to send; the next report goes.
    (rtcp.peer().is_some() && rtcp.send(report).is_ok()) as u64
}
