//! The media side of RTSP sessions, on a [`StreamServer`].
//!
//! - SETUP binds what the transport needs and nothing is sent yet: an even/odd UDP port pair
//!   on the address the client reached (unicast), channels on the client's connection
//!   (interleaved), or nothing (multicast: the mount's group).
//! - PLAY starts an admitted stream: one per unicast session, named `MOUNT.SESSION`, going to
//!   the session's transport; multicast sessions share one stream per mount, `MOUNT.multicast`,
//!   started by the first and stopped with the last. Admission control refuses with a reason,
//!   which becomes 453 Not Enough Bandwidth.
//! - PAUSE stops the stream and remembers how far it got; TEARDOWN releases everything.

use super::mounts::{Mounts, RawMount, SharedRawSource};
use super::refusal;
use super::shared::SharedSources;
use crate::interleaved::{ConnOut, Inbox};
use crate::streams::{MediaOut, RtcpOut, SessionOutlet, StartInfo, StreamServer};
use crate::uncompressed::{send_buffer_for, RawControl, RawOut, RawPlace, RawSender};
use metronome_rt::udp::{bind_pair, BatchSender, RtcpSocket, SocketOptions, UdpSender};
use metronome_rt::url::RtpUrl;
use metronome_session::rtsp::{
    Backend, ConnId, Delivery, MountInfo, PlayInfo, Refusal, Requested, SessionId, SetupRequest,
};
use metronome_time::{MediaClock, RtpTime};
use metronome_wire::{SeqNo, Ssrc};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Most interleaved RTCP datagrams held per session between RTCP turns.
const INBOX: usize = 64;

/// How a session's media leaves.
enum Prepared {
    Udp {
        rtp: Arc<UdpSender>,
        rtcp: Arc<RtcpSocket>,
    },
    Interleaved {
        out: Arc<ConnOut>,
        rtp_channel: u8,
        rtcp_channel: u8,
        inbox: Arc<Inbox>,
        peer: SocketAddr,
    },
    Multicast,
}

impl Prepared {
    /// Where the stream's RTCP goes and comes from (none for multicast: the group's stream
    /// has its own).
    fn rtcp_out(&self) -> Option<RtcpOut> {
        match self {
            Prepared::Udp { rtcp, .. } => Some(RtcpOut::Udp(rtcp.clone())),
            Prepared::Interleaved {
                out,
                rtcp_channel,
                inbox,
                peer,
                ..
            } => Some(RtcpOut::Interleaved {
                conn: out.clone(),
                channel: *rtcp_channel,
                inbox: inbox.clone(),
                peer: *peer,
            }),
            Prepared::Multicast => None,
        }
    }
}

struct SessionMedia {
    mount: String,
    conn: ConnId,
    prepared: Prepared,
    ssrc: Ssrc,
    /// The stream it plays, while playing.
    playing: Option<String>,
    /// Where the current play started, in the presentation.
    from: Duration,
    /// Where the current play's packets started numbering.
    start: Option<StartInfo>,
    /// The sequence number the next play continues with (after a PAUSE).
    next_seq: Option<SeqNo>,
    /// The sender reports of the stream it played before a PAUSE, which the next play's
    /// stream takes as its own (the client's reports echo them); at most 1,024.
    sent_reports: Vec<u32>,
    /// The client's address: only its own receiver reports keep the session alive.
    peer: std::net::IpAddr,
    /// Receiver reports seen so far from the stream it plays now (liveness).
    reports: u64,
    /// Uncompressed video: the session's own sender and source.
    raw: Option<RawSession>,
}

/// A raw-video session: its source (kept across PAUSE, so a file resumes where it was) and,
/// while playing, its sender's thread.
struct RawSession {
    mount: Arc<RawMount>,
    source: SharedRawSource,
    play: Option<RawPlay>,
}

struct RawPlay {
    ctl: Arc<RawControl>,
    /// Runs the session's sender; it gives its admission back when it ends.
    thread: JoinHandle<()>,
    first_seq: SeqNo,
    first_rtptime: RtpTime,
}

/// The shared multicast stream of a mount.
struct Group {
    users: usize,
    start: StartInfo,
}

pub(super) struct MediaBackend {
    server: Arc<StreamServer>,
    mounts: Arc<Mounts>,
    sessions: HashMap<SessionId, SessionMedia>,
    groups: HashMap<String, Group>,
    /// Every open connection's writer, for interleaved transports.
    conns: HashMap<ConnId, Arc<ConnOut>>,
    /// Where RTCP that arrives on a connection's channel goes.
    inboxes: HashMap<(ConnId, u8), Arc<Inbox>>,
    /// The live sources mounts' sessions share.
    shared: SharedSources,
}

impl MediaBackend {
    /// `share_live`: sessions of a live test-source mount read one encoder (see `shared`).
    pub(super) fn new(
        server: Arc<StreamServer>,
        mounts: Arc<Mounts>,
        share_live: bool,
    ) -> MediaBackend {
        MediaBackend {
            server,
            mounts,
            sessions: HashMap::new(),
            groups: HashMap::new(),
            conns: HashMap::new(),
            inboxes: HashMap::new(),
            shared: SharedSources::new(share_live),
        }
    }

    /// The mounts served from now on (a reloaded config). Sessions playing go on; a mount
    /// gone refuses new ones; one whose settings changed gives new sessions a source of its
    /// own (a multicast group already playing keeps its stream until its last viewer leaves).
    pub(super) fn set_mounts(&mut self, mounts: Mounts) {
        let mounts = mounts.with_raw_of(&self.mounts);
        for name in self.mounts.names() {
            let same = match (self.mounts.get(name), mounts.get(name)) {
                (Some(a), Some(b)) => a.spec == b.spec,
                _ => false,
            };
            if !same {
                self.shared.forget(name);
            }
        }
        self.mounts = Arc::new(mounts);
    }

    /// The mounts served now.
    pub(super) fn mounts(&self) -> &Mounts {
        &self.mounts
    }

    pub(super) fn connection_opened(&mut self, conn: ConnId, out: Arc<ConnOut>) {
        self.conns.insert(conn, out);
    }

    pub(super) fn connection_gone(&mut self, conn: ConnId) {
        self.conns.remove(&conn);
        self.inboxes.retain(|(c, _), _| *c != conn);
    }

    /// Interleaved data from the client on `channel`: its RTCP, for the session's stream.
    pub(super) fn interleaved_in(&self, conn: ConnId, channel: u8, payload: &[u8]) -> bool {
        match self.inboxes.get(&(conn, channel)) {
            Some(inbox) => {
                inbox.push(payload);
                true
            }
            None => false,
        }
    }

    /// Sessions on `conn`.
    pub(super) fn shrink_to_fit(&mut self) {
        self.sessions.shrink_to_fit();
        self.groups.shrink_to_fit();
        self.conns.shrink_to_fit();
        self.inboxes.shrink_to_fit();
    }

    /// How many sessions each connection that has one holds (one pass over the sessions).
    pub(super) fn sessions_per_connection(&self) -> HashMap<ConnId, usize> {
        let mut n = HashMap::new();
        for s in self.sessions.values() {
            *n.entry(s.conn).or_insert(0) += 1;
        }
        n
    }

    /// Playing sessions whose client sent a receiver report since the last call: alive even
    /// if it sends no keep-alive requests.
    pub(super) fn reporting_sessions(&mut self) -> Vec<SessionId> {
        let mut alive = Vec::new();
        for (id, s) in self.sessions.iter_mut() {
            if let Some(play) = s.raw.as_ref().and_then(|r| r.play.as_ref()) {
                let reports = play.ctl.receiver_reports.load(Ordering::Relaxed);
                if reports > s.reports {
                    s.reports = reports;
                    alive.push(*id);
                }
                continue;
            }
            let Some(name) = &s.playing else { continue };
            let Some(status) = self.server.stream(name) else {
                continue;
            };
            // A multicast group's stream hears every member; count this client's reports only.
            let reports: u64 = status
                .receivers
                .iter()
                .filter(|r| r.addr.ip() == s.peer)
                .map(|r| r.reports)
                .sum();
            if reports > s.reports {
                s.reports = reports;
                alive.push(*id);
            }
        }
        alive
    }

    /// Interleaved: the session's channels on its own connection, and an inbox for the RTCP
    /// that arrives on them.
    fn prepare_interleaved(
        &mut self,
        req: &SetupRequest<'_>,
        rtp_channel: u8,
        rtcp_channel: u8,
        ssrc: Ssrc,
    ) -> Result<(Prepared, Delivery), Refusal> {
        let out = self
            .conns
            .get(&req.conn)
            .cloned()
            .ok_or_else(|| Refusal::Internal("the connection is gone".into()))?;
        if self.inboxes.contains_key(&(req.conn, rtcp_channel)) {
            return Err(Refusal::UnsupportedTransport(format!(
                "interleaved channel {rtcp_channel} is already in use on this connection"
            )));
        }
        // The pacer queues media on this connection from now on: its queue is allocated now,
        // on the control side.
        out.reserve_for_media();
        let inbox = Arc::new(Inbox::new(INBOX));
        self.inboxes.insert((req.conn, rtcp_channel), inbox.clone());
        let prepared = Prepared::Interleaved {
            out,
            rtp_channel,
            rtcp_channel,
            inbox,
            peer: req.peer,
        };
        let delivery = Delivery::Interleaved {
            rtp_channel,
            rtcp_channel,
            ssrc,
        };
        Ok((prepared, delivery))
    }

    /// The stream a mount's multicast sessions share.
    fn group_stream(mount: &str) -> String {
        format!("{mount}.multicast")
    }

    fn stream_name(mount: &str, session: SessionId) -> String {
        let id = session.to_string();
        format!("{mount}.{}", &id[..12])
    }

    fn start_multicast(&mut self, mount: &str) -> Result<StartInfo, Refusal> {
        let m = self.mounts.get(mount).ok_or(Refusal::NotFound)?;
        let Some(group) = m.multicast else {
            return Err(Refusal::UnsupportedTransport(format!(
                "mount '{mount}' has no multicast group"
            )));
        };
        let mut spec = m.spec.clone();
        spec.name = Self::group_stream(mount);
        spec.destination = vec![group.to_string()];
        spec.ssrc = Some(ssrc_of(mount).get());
        let (_, start) = self.server.add_with(spec, None, None).map_err(refusal)?;
        Ok(start)
    }
}

impl Backend for MediaBackend {
    fn mount(&mut self, name: &str, local: SocketAddr) -> Option<MountInfo> {
        let m = self.mounts.get(name)?;
        Some(MountInfo {
            sdp: self.mounts.sdp(name, local)?,
            duration: m.duration,
            multicast: m.multicast.is_some(),
            srtp: m.spec.srtp_key.is_some(),
            feedback: m.raw.is_none() && m.spec.repair.rtx(),
        })
    }

    fn setup(&mut self, req: &SetupRequest<'_>) -> Result<Delivery, Refusal> {
        let mount = self.mounts.get(req.mount).ok_or(Refusal::NotFound)?;
        let ssrc = ssrc_of(&req.session.to_string());
        // A raw session's source is opened now, so that a source that cannot be read fails
        // the SETUP rather than the PLAY.
        let raw = mount
            .raw
            .as_ref()
            .map(|m| open_raw(m, req.mount))
            .transpose()?;
        let multicast = mount.multicast;
        let (prepared, delivery) = match req.transport {
            Requested::Udp {
                client_rtp,
                client_rtcp,
            } => prepare_udp(req, client_rtp, client_rtcp, ssrc)?,
            Requested::Interleaved {
                rtp_channel,
                rtcp_channel,
            } => self.prepare_interleaved(req, rtp_channel, rtcp_channel, ssrc)?,
            Requested::Multicast => {
                let Some(group) = multicast else {
                    return Err(Refusal::UnsupportedTransport(format!(
                        "mount '{}' is unicast only; ask for RTP/AVP;unicast or RTP/AVP/TCP",
                        req.mount
                    )));
                };
                let delivery = Delivery::Multicast {
                    group: group.addr.ip(),
                    port: group.addr.port(),
                    rtcp_port: group.rtcp_addr().port(),
                    ttl: group.ttl_byte(),
                    ssrc: ssrc_of(req.mount),
                };
                (Prepared::Multicast, delivery)
            }
        };
        // The state machine sets a session up once (a second SETUP gets 455), with a fresh id.
        self.sessions.insert(
            req.session,
            SessionMedia {
                mount: req.mount.to_string(),
                conn: req.conn,
                prepared,
                ssrc,
                playing: None,
                from: Duration::ZERO,
                start: None,
                next_seq: None,
                sent_reports: Vec::new(),
                peer: req.peer.ip(),
                reports: 0,
                raw,
            },
        );
        Ok(delivery)
    }

    fn play(&mut self, session: SessionId, from: Option<Duration>) -> Result<PlayInfo, Refusal> {
        let s = self
            .sessions
            .get(&session)
            .ok_or_else(|| Refusal::Internal("PLAY of a session never set up".into()))?;
        let mount = self.mounts.get(&s.mount).ok_or(Refusal::NotFound)?;
        let end = mount.duration;
        if s.raw.is_some() {
            return self.play_raw(session);
        }
        if matches!(s.prepared, Prepared::Multicast) {
            let name = s.mount.clone();
            if s.playing.is_none() {
                if !self.groups.contains_key(&name) {
                    let start = self.start_multicast(&name)?;
                    self.groups.insert(name.clone(), Group { users: 0, start });
                }
                if let Some(g) = self.groups.get_mut(&name) {
                    g.users += 1;
                }
            }
            let stream = Self::group_stream(&name);
            let g = &self.groups[&name];
            // A late joiner starts where the group is now.
            let position = self.server.position(&stream).unwrap_or_default();
            let sent = self.server.stream(&stream).map_or(0, |st| st.packets);
            if let Some(s) = self.sessions.get_mut(&session) {
                s.playing = Some(stream);
                s.reports = 0;
            }
            return Ok(PlayInfo {
                seq: g.start.seq.add(sent as u16),
                rtptime: g
                    .start
                    .rtptime
                    .add(MediaClock::VIDEO_90K.ticks(position) as u32),
                start: Duration::ZERO,
                end: None,
            });
        }
        let from = if end.is_some() {
            from.unwrap_or(s.from)
        } else {
            Duration::ZERO
        };
        let name = Self::stream_name(&s.mount, session);
        let media = match &s.prepared {
            Prepared::Udp { rtp, .. } => MediaOut::Udp(rtp.clone()),
            Prepared::Interleaved {
                out, rtp_channel, ..
            } => MediaOut::Interleaved {
                conn: out.clone(),
                channel: *rtp_channel,
            },
            Prepared::Multicast => unreachable!("handled above"),
        };
        let Some(rtcp) = s.prepared.rtcp_out() else {
            unreachable!("multicast is handled above")
        };
        // PLAY while playing (a new range): the stream playing now is the one continued.
        let sent_reports = match &s.playing {
            Some(old) => self.server.pause(old).ok().map(|p| p.sent_reports),
            None => None,
        };
        let mut spec = mount.spec.clone();
        spec.name = name.clone();
        spec.destination = Vec::new();
        spec.ssrc = Some(s.ssrc.get());
        let outlet = SessionOutlet {
            media,
            rtcp,
            from,
            next_seq: s.next_seq,
            sent_reports: sent_reports.unwrap_or_else(|| s.sent_reports.clone()),
        };
        let source = if self.shared.shares(&mount.spec) {
            Some(self.shared.tap(&self.server, &s.mount, &mount.spec)?)
        } else {
            None
        };
        let (_, start) = self
            .server
            .add_with(spec, Some(outlet), source)
            .map_err(refusal)?;
        if let Some(s) = self.sessions.get_mut(&session) {
            s.playing = Some(name);
            s.from = from;
            s.start = Some(start);
            // A new stream: its report counts start again.
            s.reports = 0;
        }
        Ok(PlayInfo {
            seq: start.seq,
            rtptime: start.rtptime,
            start: from,
            end,
        })
    }

    fn pause(&mut self, session: SessionId) -> Result<Duration, Refusal> {
        self.stop(session, false)
    }

    fn teardown(&mut self, session: SessionId) {
        // The client leaves: its stream says BYE (RFC 3550 §6.6).
        let _ = self.stop(session, true);
        if let Some(s) = self.sessions.remove(&session) {
            if let Prepared::Interleaved {
                rtcp_channel, out, ..
            } = s.prepared
            {
                self.inboxes.remove(&(s.conn, rtcp_channel));
                // The connection's media queue goes with its last interleaved session.
                let others = self.inboxes.keys().any(|(c, _)| *c == s.conn);
                if !others {
                    out.release_media();
                }
            }
        }
    }
}

impl MediaBackend {
    /// Stops what a session plays and returns the position reached; `bye` when the session
    /// ends (TEARDOWN), not when it pauses.
    fn stop(&mut self, session: SessionId, bye: bool) -> Result<Duration, Refusal> {
        let Some(s) = self.sessions.get_mut(&session) else {
            return Err(Refusal::Internal("PAUSE of a session never set up".into()));
        };
        if let Some(raw) = s.raw.as_mut() {
            if let Some(play) = raw.play.take() {
                // A pause is not a departure: no BYE (RFC 3550 §6.6).
                play.ctl.quiet.store(!bye, Ordering::Relaxed);
                play.ctl.stop.store(true, Ordering::Release);
                let _ = play.thread.join();
                let sent = play.ctl.counters.packets.load(Ordering::Relaxed);
                s.next_seq = Some(play.first_seq.add(sent as u16));
                s.sent_reports =
                    std::mem::take(&mut *metronome_rt::sync::lock(&play.ctl.sent_reports));
            }
            s.playing = None;
            return Ok(Duration::ZERO);
        }
        let Some(stream) = s.playing.take() else {
            return Ok(s.from);
        };
        if matches!(s.prepared, Prepared::Multicast) {
            let mount = s.mount.clone();
            self.leave_group(&mount);
            return Ok(Duration::ZERO);
        }
        let position = self.server.position(&stream).unwrap_or_default();
        let stopped = if bye {
            self.server.remove(&stream)
        } else {
            self.server.pause(&stream).map(|p| {
                s.sent_reports = p.sent_reports;
                p.status
            })
        };
        if let (Ok(st), Some(start)) = (stopped, s.start) {
            s.next_seq = Some(start.seq.add(st.packets as u16));
        }
        let end = self.mounts.get(&s.mount).and_then(|m| m.duration);
        let reached = s.from + position;
        s.from = end.map_or(Duration::ZERO, |e| reached.min(e));
        Ok(s.from)
    }

    /// PLAY of a raw-video session: admits its stream (the core's schedulability, the link, the
    /// memory budget) and starts its sender on the session's transport, as a lane of the core
    /// it was admitted on.
    fn play_raw(&mut self, session: SessionId) -> Result<PlayInfo, Refusal> {
        let s = self
            .sessions
            .get_mut(&session)
            .ok_or_else(|| Refusal::Internal("PLAY of a session never set up".into()))?;
        let Some(raw) = s.raw.as_mut() else {
            return Err(Refusal::Internal("not a raw session".into()));
        };
        if let Some(p) = &raw.play {
            // Already playing: PLAY again changes nothing (the source is live).
            return Ok(PlayInfo {
                seq: p.first_seq,
                rtptime: p.first_rtptime,
                start: Duration::ZERO,
                end: None,
            });
        }
        let m = raw.mount.clone();
        let mut cfg = m.sender.clone();
        cfg.ssrc = s.ssrc;
        cfg.seed = u64::from(s.ssrc.get()) << 32 | u64::from(s.next_seq.unwrap_or_default().get());
        cfg.initial_seq = s.next_seq;
        cfg.earlier_reports = s.sent_reports.clone();
        cfg.live = m.live;
        let name = Self::stream_name(&s.mount, session);
        let refuse = |e: crate::uncompressed::RawSendError| {
            Refusal::Internal(format!("cannot send '{}': {e}", s.mount))
        };
        let rtcp = s.prepared.rtcp_out();
        let out = raw_out(&s.prepared, &m, &mut cfg).map_err(|e| match e {
            RawOutError::Send(e) => refuse(e),
            RawOutError::Refused(r) => r,
        })?;
        let sender = RawSender::open_with(
            Box::new(raw.source.clone()),
            cfg,
            out,
            rtcp.into_iter().collect(),
        )
        .map_err(refuse)?;
        // Admitted on a pacing core like every stream: the core's schedulability test and
        // the link; it runs as a lane of that core.
        let task = sender.task(&self.server.calibration());
        let admitted = self
            .server
            .admit_raw(&name, task, sender.memory_bytes())
            .map_err(refusal)?;
        let (seq, rtptime) = sender.first_packet();
        let ctl = Arc::new(RawControl::default());
        let thread = {
            let (ctl, server, place) = (ctl.clone(), self.server.clone(), admitted.clone());
            std::thread::Builder::new()
                .name("metronome-raw-session".into())
                .spawn(move || {
                    let never = AtomicBool::new(false);
                    // What it measured is for `serve --raw`; a session's clients measure it.
                    let _ = sender.run_on(RawPlace::Server(server, place), ctl, &never, |_| {});
                })
        };
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                self.server.release_raw(admitted);
                return Err(Refusal::Internal(format!("could not start a sender: {e}")));
            }
        };
        raw.play = Some(RawPlay {
            ctl,
            thread,
            first_seq: seq,
            first_rtptime: rtptime,
        });
        s.playing = Some(name);
        s.reports = 0;
        Ok(PlayInfo {
            seq,
            rtptime,
            start: Duration::ZERO,
            end: None,
        })
    }

    fn leave_group(&mut self, mount: &str) {
        let Some(g) = self.groups.get_mut(mount) else {
            return;
        };
        g.users = g.users.saturating_sub(1);
        if g.users == 0 {
            self.groups.remove(mount);
            let _ = self.server.remove(&Self::group_stream(mount));
        }
    }

    /// Stops everything (the service is shutting down).
    pub(super) fn teardown_all(&mut self) {
        let ids: Vec<SessionId> = self.sessions.keys().copied().collect();
        for id in ids {
            self.teardown(id);
        }
    }

    /// Lets every session go as the whole server stops: a coded stream playing over UDP,
    /// unicast or to a group, stays in the stream server, whose stop ends it (last NACKs
    /// answered, then its BYE); the others are torn down.
    pub(super) fn leave_to_server(&mut self) {
        let ids: Vec<SessionId> = self.sessions.keys().copied().collect();
        for id in ids {
            let s = &self.sessions[&id];
            let over_udp = matches!(s.prepared, Prepared::Udp { .. } | Prepared::Multicast);
            if over_udp && s.raw.is_none() && s.playing.is_some() {
                self.sessions.remove(&id);
            } else {
                self.teardown(id);
            }
        }
    }
}

/// Why a raw session's output could not be made.
enum RawOutError {
    Send(crate::uncompressed::RawSendError),
    Refused(Refusal),
}

/// Where a raw session's packets go: a batch sender on its SETUP's server port, or its
/// connection's channel; `cfg.destination` set to match.
fn raw_out(
    prepared: &Prepared,
    m: &RawMount,
    cfg: &mut crate::uncompressed::RawSenderConfig,
) -> Result<RawOut, RawOutError> {
    fn port_err(e: impl std::fmt::Display) -> RawOutError {
        RawOutError::Refused(Refusal::Internal(format!("server port: {e}")))
    }
    match prepared {
        Prepared::Udp { rtp, .. } => {
            let dest = *rtp.destination();
            cfg.destination = dest;
            let opts = SocketOptions {
                buffer_bytes: send_buffer_for(&m.format, cfg).map_err(RawOutError::Send)?,
                read_timeout: None,
            };
            // The SETUP's server port, shared: it outlives this play.
            let socket = rtp.socket().try_clone().map_err(port_err)?;
            let batch = BatchSender::from_socket(socket, &dest, &opts).map_err(port_err)?;
            Ok(RawOut::Udp(Box::new(batch)))
        }
        Prepared::Interleaved {
            out,
            rtp_channel,
            peer,
            ..
        } => {
            cfg.destination = RtpUrl::unicast(*peer);
            Ok(RawOut::Interleaved {
                conn: out.clone(),
                channel: *rtp_channel,
                peer: *peer,
            })
        }
        Prepared::Multicast => Err(RawOutError::Refused(Refusal::UnsupportedTransport(
            "raw video is served unicast only".into(),
        ))),
    }
}

/// A raw session's source, opened at SETUP.
fn open_raw(m: &Arc<RawMount>, mount: &str) -> Result<RawSession, Refusal> {
    let source = (m.open)()
        .map_err(|e| Refusal::Internal(format!("cannot open the source of '{mount}': {e}")))?;
    Ok(RawSession {
        mount: m.clone(),
        source: SharedRawSource::new(source),
        play: None,
    })
}

/// UDP unicast: an even/odd server port pair on the address the client reached, sending to
/// the client's own address.
fn prepare_udp(
    req: &SetupRequest<'_>,
    client_rtp: u16,
    client_rtcp: u16,
    ssrc: Ssrc,
) -> Result<(Prepared, Delivery), Refusal> {
    let to_rtp = SocketAddr::new(req.peer.ip(), client_rtp);
    let to_rtcp = SocketAddr::new(req.peer.ip(), client_rtcp);
    let opts = SocketOptions {
        buffer_bytes: 4 << 20,
        read_timeout: None,
    };
    let (rtp, rtcp) = bind_pair(req.local.ip(), to_rtp, to_rtcp, &opts)
        .map_err(|e| Refusal::Unavailable(format!("no server ports: {e}")))?;
    rtcp.socket()
        .set_nonblocking(true)
        .map_err(|e| Refusal::Internal(format!("RTCP socket: {e}")))?;
    let port = |s: std::io::Result<SocketAddr>| s.map(|a| a.port()).unwrap_or(0);
    let delivery = Delivery::Udp {
        client_rtp,
        client_rtcp,
        server_rtp: port(rtp.local_addr()),
        server_rtcp: port(rtcp.local_addr()),
        ssrc,
    };
    let prepared = Prepared::Udp {
        rtp: Arc::new(rtp),
        rtcp: Arc::new(rtcp),
    };
    Ok((prepared, delivery))
}

/// A stable SSRC for a name (a session id or a mount): FNV-1a, folded to 32 bits.
fn ssrc_of(name: &str) -> Ssrc {
    let h = super::fnv1a(name);
    Ssrc((h ^ (h >> 32)) as u32)
}
