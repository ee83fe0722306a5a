//! The RTSP control plane's one thread: every connection on one readiness loop (`epoll`
//! through mio), with no thread per client.
//!
//! - The listener accepts while the connection table's rule (`metronome_session::rtsp::room`)
//!   lets it, closing a slow or idle holder to make room; a newcomer for whom a place can be
//!   made soon (the holders are too young to close) waits in the lobby until then; else 503.
//! - A readable connection is read into its framer; each whole request is answered through
//!   the connection's [`ConnOut`], and interleaved data (the client's RTCP) goes to its
//!   session. A connection that floods is read for a budget per turn, then others get theirs.
//! - A queue with something to write rings the [`Doorbell`] (pacing threads do, for `$`
//!   frames); the loop writes until the socket would block and finishes the rest when it is
//!   writable again.
//! - Every [`TICK`] a sweep applies the deadlines: a whole request within the request timeout
//!   (408), no connection idle without a session past the idle timeout, no queue stalled past
//!   the write timeout; and the session timer.
//!
//! An idle connection costs its socket, its framer and its queue, each empty until used: a
//! few hundred bytes, where a thread per connection cost its stacks.

use super::state::Shared;
use super::tls::ConnStream;
use crate::interleaved::{ConnOut, Doorbell, Flush};
use metronome_session::rtsp::room::{Admit, Deadlines, Expiry, Lobby, Room};
use metronome_session::rtsp::{ConnId, Frame, FrameError, Framer, FramerLimits, REASON_HEADER};
use metronome_time::Timestamp;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::collections::HashMap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub(super) const LISTENER: Token = Token(0);
pub(super) const BELL: Token = Token(1);
/// The first connection's token; connection ids count up from it and are never reused.
const FIRST_CONN: u64 = 2;
/// How often the deadlines are checked (and the longest `poll` waits).
const TICK: Duration = Duration::from_millis(250);
/// How often memory is given back to the system while connections close.
const GIVE_BACK_EVERY: Duration = Duration::from_secs(5);
/// Bytes read from one connection before the others get their turn.
const READ_BUDGET: usize = 256 << 10;
/// Bytes of `$` frames queued for a slow reader before frames are dropped: 800 ms of a
/// 10 Mbit/s stream, beside what the kernel's socket buffer holds. Allocated, and touched as
/// the queue cycles, for every connection that carries media: it is what an interleaved
/// session costs.
const OUT_QUEUE: usize = 1 << 20;

/// One client connection.
struct Conn {
    stream: ConnStream,
    peer: SocketAddr,
    local: SocketAddr,
    out: Arc<ConnOut>,
    framer: Framer,
    /// Since when its queue has had bytes the socket would not take.
    stalled_since: Option<Timestamp>,
    /// Ending, for this reason, once its queue is written.
    closing: Option<&'static str>,
}

pub(super) struct Loop {
    shared: Arc<Shared>,
    poll: Poll,
    listener: TcpListener,
    bell: Arc<Doorbell>,
    /// RTSPS: every connection is TLS with these settings.
    tls: Option<Arc<rustls::ServerConfig>>,
    conns: HashMap<u64, Conn>,
    /// Their places, timing and caps (sans-IO: `session::rtsp::room`).
    room: Room,
    /// Newcomers waiting for a place to be made (accepted, not yet read).
    lobby: Lobby<(TcpStream, SocketAddr)>,
    next: u64,
    /// What reads land in.
    input: Vec<u8>,
    /// What writes go out of (see [`ConnOut::flush_into`]).
    output: Vec<u8>,
    /// A response being serialised.
    wire: Vec<u8>,
    /// Connections with input left after their budget.
    again: Vec<u64>,
    rung: Vec<u64>,
    last_sweep: Timestamp,
    /// Memory give-backs still due (see [`Loop::give_back_memory`]), and the last one.
    give_backs_due: u8,
    last_give_back: Timestamp,
}

impl Loop {
    pub(super) fn new(
        shared: Arc<Shared>,
        poll: Poll,
        mut listener: TcpListener,
        bell: Arc<Doorbell>,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> io::Result<Loop> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let now = shared.clock.now();
        let room = Room::new(shared.cfg.max_connections, shared.cfg.max_per_address);
        Ok(Loop {
            shared,
            poll,
            listener,
            bell,
            tls,
            conns: HashMap::new(),
            room,
            lobby: Lobby::default(),
            next: FIRST_CONN,
            input: vec![0; 16 << 10],
            output: Vec::with_capacity(crate::interleaved::CHUNK),
            wire: Vec::with_capacity(4096),
            again: Vec::new(),
            rung: Vec::new(),
            last_sweep: now,
            give_backs_due: 0,
            last_give_back: now,
        })
    }

    /// Serves until the service's stop flag is set, then closes every connection.
    pub(super) fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        while !self.shared.stop.load(Ordering::Acquire) {
            let timeout = if self.again.is_empty() {
                let now = self.shared.clock.now();
                self.lobby
                    .next_due()
                    .map_or(TICK, |t| t.saturating_since(now).min(TICK))
            } else {
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != ErrorKind::Interrupted {
                    tracing::error!(target: "metronome::rtsp", "the RTSP event loop cannot wait: {e}");
                    std::thread::sleep(TICK);
                }
                continue;
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    BELL => {}
                    Token(id) => {
                        let id = id as u64;
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read(id);
                        }
                        if ev.is_writable() {
                            self.write(id);
                        }
                    }
                }
            }
            for id in std::mem::take(&mut self.again) {
                self.read(id);
            }
            let now = self.shared.clock.now();
            for w in self.lobby.due(now) {
                let (stream, peer) = w.item;
                self.admit(stream, peer, w.arrived);
            }
            let mut rung = std::mem::take(&mut self.rung);
            self.bell.take(&mut rung);
            for id in rung.drain(..) {
                self.write(id);
            }
            self.rung = rung;
            let now = self.shared.clock.now();
            if now.saturating_since(self.last_sweep) >= TICK {
                self.last_sweep = now;
                self.sweep(now);
            }
        }
        // The sessions stay: the service's shutdown ends them, or leaves their streams to the
        // stream server's own stop (`RtspService::shutdown_with_server`).
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.close(id, "the server closed it", false);
        }
        for w in self.lobby.drain() {
            let (mut stream, _) = w.item;
            self.refuse_unserved(&mut stream);
        }
    }

    /// Answers a newcomer that gets no place 503 (counted); it is closed when dropped.
    fn refuse_unserved(&self, stream: &mut TcpStream) {
        self.shared.refused.fetch_add(1, Ordering::Relaxed);
        // A fresh socket takes this whole. (A TLS client would read it as a broken
        // handshake: it is just closed.)
        if self.tls.is_none() {
            let _ = stream
                .write(b"RTSP/1.0 503 Service Unavailable\r\nCSeq: 0\r\nContent-Length: 0\r\n\r\n");
        }
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    let now = self.shared.clock.now();
                    self.admit(stream, peer, now)
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors, say: the connection waits in the backlog, and the
                    // next sweep tries again.
                    tracing::warn!(target: "metronome::rtsp", "cannot accept an RTSP connection: {e}");
                    return;
                }
            }
        }
    }

    /// Serves a newcomer (that arrived at `arrived`) if the connection table's rule lets it
    /// (closing the holder it names first), holds it in the lobby if a place can be made
    /// soon, else answers 503.
    fn admit(&mut self, mut stream: TcpStream, peer: SocketAddr, arrived: Timestamp) {
        let ip = peer.ip();
        let now = self.shared.clock.now();
        // Sessions per connection, read (under the lock) only if the rule needs them.
        let sessions = std::cell::OnceCell::new();
        let busy = |id| {
            let s = sessions.get_or_init(|| self.shared.lock().backend.sessions_per_connection());
            s.get(&id).copied().unwrap_or(0)
        };
        match self.room.admit(ip, now, busy) {
            Admit::Serve => {}
            Admit::CloseFirst(ConnId(id)) => {
                self.shared.evicted.fetch_add(1, Ordering::Relaxed);
                self.finish(id, "closed to make room for another client");
            }
            Admit::Wait(until) => {
                if let Err((mut stream, peer)) = self.lobby.hold((stream, peer), arrived, until) {
                    tracing::warn!(target: "metronome::rtsp", "refused {peer} (503): every connection is in use");
                    self.refuse_unserved(&mut stream);
                }
                return;
            }
            Admit::Refuse => {
                tracing::warn!(target: "metronome::rtsp", "refused {peer} (503): every connection is in use");
                self.refuse_unserved(&mut stream);
                return;
            }
        }
        let id = self.next;
        self.next += 1;
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut stream, Token(id as usize), interest)
        {
            tracing::warn!(target: "metronome::rtsp", "cannot watch the connection from {peer}: {e}");
            return;
        }
        let local = stream.local_addr().unwrap_or(self.shared.cfg.addr);
        let _ = stream.set_nodelay(true);
        let stream = match ConnStream::new(stream, self.tls.as_ref()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(target: "metronome::rtsp", "cannot start TLS with {peer}: {e}");
                return;
            }
        };
        self.bell.reserve(self.conns.len() + 1);
        let out = Arc::new(ConnOut::new(id, OUT_QUEUE, self.bell.clone()));
        self.shared
            .lock()
            .backend
            .connection_opened(ConnId(id), out.clone());
        self.conns.insert(
            id,
            Conn {
                stream,
                peer,
                local,
                out,
                framer: Framer::new(FramerLimits::default()),
                stalled_since: None,
                closing: None,
            },
        );
        self.room.enter(ConnId(id), ip, now);
        self.shared
            .connections
            .store(self.conns.len(), Ordering::Release);
        tracing::info!(target: "metronome::rtsp", "client {peer} connected (connection {id})");
    }

    /// Reads what `id` sent and answers each whole request.
    fn read(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.closing.is_some() {
            return;
        }
        let mut budget = READ_BUDGET;
        // When bytes were last read: the time their requests are handled at, and what the
        // connection's quiet time counts from. One reading for both, so a connection whose
        // last request was its sessions' last sign of life is exactly as quiet as they are
        // when they time out (and is closed with them).
        let mut heard = None;
        let mut requests = 0;
        let why = loop {
            let room = c.framer.buffer_space().min(self.input.len());
            if room == 0 {
                // The framer is full and produced nothing: it cannot happen with its limits,
                // but a connection that gets here is cut rather than looped on.
                break Some("its framing could not go on");
            }
            match c.stream.read(&mut self.input[..room]) {
                Ok(0) => break Some("it closed the connection"),
                Ok(n) => {
                    let now = self.shared.clock.now();
                    heard = Some(now);
                    c.framer.push(&self.input[..n]);
                    match answer(&self.shared, (id, now), c, &mut self.wire) {
                        Ok(n) => requests += n,
                        Err(why) => break Some(why),
                    }
                    if c.closing.is_some() {
                        break None;
                    }
                    budget = budget.saturating_sub(n);
                    if budget == 0 {
                        self.again.push(id);
                        break None;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break None,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // rustls's verdict on what it was sent (a client that does not speak TLS).
                Err(e) if e.kind() == ErrorKind::InvalidData => {
                    break Some("its TLS failed (does it speak rtsps://?)")
                }
                Err(_) => break Some("the connection failed"),
            }
        };
        // Between requests, or in the middle of one: what the deadlines and the choice of a
        // connection to close (when full) go by.
        if let Some(now) = heard {
            self.room.heard(ConnId(id), now, c.framer.mid_message());
            if requests > 0 {
                self.room.request_done(ConnId(id), now);
            }
        }
        if c.closing.is_some() {
            self.room.closing(ConnId(id));
        }
        if let Some(why) = why {
            self.finish(id, why);
        }
    }

    /// Writes what `id` has queued, as far as its socket takes it; ends a connection that was
    /// closing once everything is written.
    fn write(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        // Records TLS holds go first; the queue's bytes follow them.
        let pushed = c.stream.push_pending();
        match pushed.and_then(|_| c.out.flush_into(&mut c.stream, &mut self.output)) {
            Ok(Flush::Drained) if matches!(c.stream.push_pending(), Ok(false)) => {
                // Everything is with TLS, some of it not yet on the socket.
                c.stalled_since.get_or_insert(self.shared.clock.now());
            }
            Ok(Flush::Drained) => c.stalled_since = None,
            Ok(Flush::Blocked { written }) => {
                if written > 0 || c.stalled_since.is_none() {
                    c.stalled_since = Some(self.shared.clock.now());
                }
            }
            Ok(Flush::Closed) => {
                let why = c.closing.unwrap_or("the server closed it");
                self.finish(id, why);
            }
            Err(_) => self.finish(id, "the connection failed"),
        }
    }

    /// Applies the deadlines, retries a stalled accept, and runs the session timer.
    fn sweep(&mut self, now: Timestamp) {
        let cfg = self.shared.cfg.clone();
        let mut ended: Vec<(u64, &'static str)> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.stalled_since
                    .is_some_and(|t| now.saturating_since(t) >= cfg.write_timeout)
            })
            .map(|(&id, _)| (id, "it does not read what it is sent"))
            .collect();
        // A connection with no session lives as long as the idle timeout; one with sessions
        // as long as they do (the session timer tears them down).
        let sessions = self.shared.lock().backend.sessions_per_connection();
        let deadlines = Deadlines {
            request: cfg.request_timeout,
            first_request: cfg.idle_timeout,
            idle: cfg.idle_timeout,
        };
        let busy = |id| sessions.get(&id).copied().unwrap_or(0);
        for (ConnId(id), expiry) in self.room.expired(now, deadlines, busy) {
            if ended.iter().any(|(e, _)| *e == id) {
                continue;
            }
            match expiry {
                Expiry::Idle => ended.push((id, "idle without a session")),
                Expiry::Request => self.late(id, cfg.request_timeout),
            }
        }
        for (id, why) in ended {
            self.finish(id, why);
        }
        self.accept_all();
        self.give_back_memory(now);
        for id in self.time_sessions_out(now, cfg.session_timeout) {
            self.finish(id, "its sessions timed out");
        }
    }

    /// Runs the session timer. A connection whose every session timed out, and that was as
    /// silent as they were, is closed with them (returned): its client has gone, and what the
    /// connection holds (its socket, its media queue) comes back now rather than after the
    /// idle timeout. One that still talks stays open (its sessions' ports and media queue
    /// went with them).
    fn time_sessions_out(&mut self, now: Timestamp, timeout: Duration) -> Vec<u64> {
        let mut core = self.shared.lock();
        let core = &mut *core;
        for id in core.backend.reporting_sessions() {
            core.rtsp.touch(id, now);
        }
        if core.rtsp.poll_timeout().is_none_or(|t| t > now) {
            return Vec::new();
        }
        let conns = |rtsp: &metronome_session::rtsp::RtspServer| {
            rtsp.session_infos()
                .map(|s| s.conn)
                .collect::<std::collections::BTreeSet<_>>()
        };
        let before = conns(&core.rtsp);
        for id in core.rtsp.handle_timeout(now, &mut core.backend) {
            tracing::info!(
                target: "metronome::rtsp",
                "session {id} timed out: no request or receiver report for {timeout:?}"
            );
        }
        let after = conns(&core.rtsp);
        let silent = |c: &&ConnId| self.room.quiet_for(**c, now).is_some_and(|q| q >= timeout);
        before
            .difference(&after)
            .filter(silent)
            .map(|c| c.0)
            .collect()
    }

    /// Answers 408 to a request that did not arrive whole in time, and closes the connection
    /// once that is written.
    fn late(&mut self, id: u64, limit: Duration) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let e = FrameError::Timeout {
            seconds: limit.as_secs(),
            cseq: None,
        };
        self.shared.bad_requests.fetch_add(1, Ordering::Relaxed);
        let response = self.shared.lock().rtsp.error_response(&e);
        self.wire.clear();
        if response.write(&mut self.wire).is_ok() {
            c.out.send_message(&self.wire);
        }
        c.closing = Some("its request did not arrive whole in time (408)");
        c.out.close();
        self.room.closing(ConnId(id));
    }

    /// After connections have closed, gives their memory back to the system, at most every
    /// [`GIVE_BACK_EVERY`], and once more after the last close (streams are torn down on other
    /// threads, a little later): the tables shrink, and the allocator returns its free pages
    /// (glibc keeps them otherwise, and a server that once held a thousand clients would stay
    /// that size).
    fn give_back_memory(&mut self, now: Timestamp) {
        if self.give_backs_due == 0 || now.saturating_since(self.last_give_back) < GIVE_BACK_EVERY {
            return;
        }
        self.give_backs_due -= 1;
        self.last_give_back = now;
        self.conns.shrink_to_fit();
        self.room.shrink_to_fit();
        self.again.shrink_to_fit();
        self.rung.shrink_to_fit();
        self.shared.lock().shrink_to_fit();
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim takes a byte count and only releases free memory.
        unsafe {
            libc::malloc_trim(0);
        }
    }

    /// Ends connection `id` now, and the sessions bound to it.
    fn finish(&mut self, id: u64, why: &'static str) {
        self.close(id, why, true);
    }

    /// Ends connection `id` now, and the sessions bound to it if `end_sessions`.
    fn close(&mut self, id: u64, why: &'static str, end_sessions: bool) {
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        c.out.close();
        self.give_backs_due = 2;
        let _ = self.poll.registry().deregister(c.stream.tcp());
        c.stream.shutdown();
        self.room.leave(ConnId(id));
        {
            let mut core = self.shared.lock();
            let core = &mut *core;
            if end_sessions {
                core.rtsp.connection_closed(ConnId(id), &mut core.backend);
            }
            core.backend.connection_gone(ConnId(id));
        }
        self.shared
            .connections
            .store(self.conns.len(), Ordering::Release);
        tracing::info!(target: "metronome::rtsp", "client {} left (connection {id}): {why}", c.peer);
    }
}

/// Answers every whole request `c`'s framer holds, as read at `now` (returns how many it
/// answered), and routes its interleaved data. An error is why the connection must end now; a framing error that
/// leaves the stream untrustworthy queues its answer and marks the connection closing.
fn answer(
    shared: &Shared,
    (id, now): (u64, Timestamp),
    c: &mut Conn,
    wire: &mut Vec<u8>,
) -> Result<usize, &'static str> {
    let mut answered = 0;
    while let Some(frame) = c.framer.next_frame() {
        let mut core = shared.lock();
        let core = &mut *core;
        let closing;
        let response = match frame {
            Ok(Frame::Request(req)) => {
                let response = core.rtsp.handle_request(
                    now,
                    ConnId(id),
                    c.peer,
                    c.local,
                    &req,
                    &mut core.backend,
                );
                if log_request(c.peer, &req, &response) {
                    shared.credentials_refused.fetch_add(1, Ordering::Relaxed);
                }
                // A response that says `Connection: close` (too many wrong credentials) ends it.
                closing = response
                    .header(&rtsp_types::headers::CONNECTION)
                    .is_some_and(|v| v.as_str().eq_ignore_ascii_case("close"));
                response
            }
            Ok(Frame::Data { channel, payload }) => {
                if !core.backend.interleaved_in(ConnId(id), channel, &payload) {
                    shared.unrouted.fetch_add(1, Ordering::Relaxed);
                }
                continue;
            }
            Err(e) => {
                shared.bad_requests.fetch_add(1, Ordering::Relaxed);
                closing = e.closes_connection();
                core.rtsp.error_response(&e)
            }
        };
        wire.clear();
        if response.write(wire).is_err() || !c.out.send_message(wire) {
            return Err("it does not read what it is sent");
        }
        answered += 1;
        if closing {
            // The answer is queued; the connection ends once it is written.
            c.closing = Some(if u16::from(response.status()) == 401 {
                "too many wrong credentials"
            } else {
                "its request's length could not be trusted"
            });
            c.out.close();
            break;
        }
    }
    Ok(answered)
}

/// A line for what a client did that changes what is sent: PLAY, PAUSE, TEARDOWN (and SETUP
/// at debug level), with the answer's status; and a warning for credentials refused (what
/// fail2ban-like tools watch), which is what it returns.
fn log_request(
    peer: SocketAddr,
    req: &rtsp_types::Request<Vec<u8>>,
    response: &rtsp_types::Response<Vec<u8>>,
) -> bool {
    let status = u16::from(response.status());
    let uri = || req.request_uri().map_or("*".into(), |u| u.to_string());
    let credentials = req.header(&rtsp_types::headers::AUTHORIZATION).is_some();
    let reason = || {
        rtsp_types::HeaderName::from_static_str(REASON_HEADER)
            .ok()
            .and_then(|h| response.header(&h).map(|v| v.as_str().to_string()))
            .unwrap_or_default()
    };
    if matches!(status, 401 | 403) && credentials {
        let reason = reason();
        tracing::warn!(target: "metronome::rtsp", "client {peer}: credentials refused for {}: {status}, {reason}", uri());
        return true;
    }
    let method = match req.method() {
        rtsp_types::Method::Play => "plays",
        rtsp_types::Method::Pause => "pauses",
        rtsp_types::Method::Teardown => "tears down",
        rtsp_types::Method::Setup => {
            tracing::debug!(target: "metronome::rtsp", "client {peer} sets up {}: {status}", uri());
            return false;
        }
        _ => return false,
    };
    let uri = uri();
    let session = req
        .header(&rtsp_types::headers::SESSION)
        .map(|v| v.as_str().split(';').next().unwrap_or("").to_string())
        .unwrap_or_default();
    if (200..300).contains(&status) {
        tracing::info!(target: "metronome::rtsp", "client {peer} {method} {uri} (session {session})");
    } else {
        let why = reason();
        let sep = if why.is_empty() { "" } else { ": " };
        tracing::info!(target: "metronome::rtsp", "client {peer} {method} {uri}: refused, {status}{sep}{why}");
    }
    false
}
