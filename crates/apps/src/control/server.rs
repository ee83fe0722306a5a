//! The control server: one event loop thread (readiness I/O through mio) for every connection,
//! and a few workers that run the routes (a route may take a while: opening a source, stopping
//! a stream), so that a slow route never holds up other clients' bytes.
//!
//! - Accepting applies the connection table's rule (`metronome_session::rtsp::room`, the same
//!   as RTSP's): under the caps (in all, and per address) a client is served; at a cap, a
//!   connection that holds its place without using it (trickling a request, silent, or idle
//!   between requests) is closed to make room; else the newcomer is answered 503 at once.
//! - A connection reads into its [`Inbox`]; a whole request goes to a worker; the response is
//!   written when the socket takes it. Kept alive, the connection waits for its next request.
//! - A sweep every [`TICK`] applies the deadlines: a whole request within the read timeout
//!   (408), the first request within it too and the next within the idle timeout (closed
//!   without an answer), a response written within the write timeout.
//! - A connection that ends after an answer lingers a moment, reading what the client still
//!   sends, so that the client reads the answer rather than a reset.

use super::http::{timeout, Inbox, Response, Taken, CONTINUE};
use super::{router, ControlAccess, ControlLimits, StreamControl};
use metronome_rt::clock::mono_ns;
use metronome_session::rtsp::room::{Admit, Deadlines, Expiry, Room};
use metronome_session::rtsp::ConnId;
use metronome_time::Timestamp;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::HashMap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONN: u64 = 2;
/// How often deadlines are checked (and the longest `poll` waits).
const TICK: Duration = Duration::from_millis(25);
/// Routes run at once at most.
const WORKERS: usize = 4;
/// Refused clients lingering for their 503 at most; beyond, they are closed without it.
const REFUSED_LINGERING: usize = 64;
/// How long a refused client lingers, and the most a closing connection waits while lingering.
const REJECT_LINGER: Duration = Duration::from_millis(200);
const LINGER: Duration = Duration::from_millis(500);
/// The most a closing connection discards while lingering.
const LINGER_BYTES: usize = 256 * 1024;
/// How long [`ControlServer::shutdown`] waits for the workers' routes to finish.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(1);

/// A running control API server. Dropping it stops it, like [`ControlServer::shutdown`].
pub struct ControlServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    waker: Arc<Waker>,
    event_loop: Option<JoinHandle<()>>,
}

struct Shared {
    stop: AtomicBool,
    limits: ControlLimits,
    control: Arc<dyn StreamControl>,
    access: ControlAccess,
    /// Responses the workers have made: connection, response, keep the connection.
    done: Mutex<Vec<(u64, Response, bool)>>,
    /// Routes that panicked past the router's own guard (tests check that none do).
    panicked: AtomicUsize,
}

/// A request handed to a worker.
struct Job {
    conn: u64,
    request: super::http::Request,
    keep_alive: bool,
}

impl ControlServer {
    /// Binds `addr` (port 0 picks a free port), starts serving `control` to the clients
    /// `access` lets in, with the default [`ControlLimits`], and returns at once.
    pub fn start(
        addr: SocketAddr,
        control: Arc<dyn StreamControl>,
        access: ControlAccess,
    ) -> io::Result<ControlServer> {
        Self::start_with(addr, control, access, ControlLimits::default())
    }

    /// Like [`ControlServer::start`], with explicit limits.
    pub fn start_with(
        addr: SocketAddr,
        control: Arc<dyn StreamControl>,
        access: ControlAccess,
        limits: ControlLimits,
    ) -> io::Result<ControlServer> {
        let usable = limits.max_connections >= 1
            && limits.max_per_address >= 1
            && limits.max_head_bytes >= 64
            && limits.max_requests_per_connection >= 1
            && !limits.read_timeout.is_zero()
            && !limits.write_timeout.is_zero()
            && !limits.idle_timeout.is_zero();
        if !usable {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "control API limits must allow at least one connection, a 64-byte head, \
                 one request per connection and non-zero timeouts",
            ));
        }
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let room = Room::new(limits.max_connections, limits.max_per_address);
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            limits,
            control,
            access,
            done: Mutex::new(Vec::new()),
            panicked: AtomicUsize::new(0),
        });
        let (jobs, queue) = channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let mut workers = Vec::new();
        for i in 0..WORKERS {
            let (shared, queue, waker) = (shared.clone(), queue.clone(), waker.clone());
            workers.push(
                thread::Builder::new()
                    .name(format!("control-w{i}"))
                    .spawn(move || work(&shared, &queue, &waker))?,
            );
        }
        let mut l = Loop {
            shared: shared.clone(),
            poll,
            listener,
            jobs: Some(jobs),
            conns: HashMap::new(),
            room,
            next: FIRST_CONN,
            input: vec![0; 16 << 10],
        };
        let event_loop = thread::Builder::new()
            .name("control-io".into())
            .spawn(move || {
                l.run();
                // The workers end when the job queue closes, after their current route.
                drop(l);
                let deadline = mono_ns() + SHUTDOWN_WAIT.as_nanos() as u64;
                for w in workers {
                    while !w.is_finished() && mono_ns() < deadline {
                        thread::sleep(Duration::from_millis(10));
                    }
                    if w.is_finished() {
                        let _ = w.join();
                    }
                }
            })?;
        Ok(ControlServer {
            addr,
            shared,
            waker,
            event_loop: Some(event_loop),
        })
    }

    /// The address the server listens on (with the port chosen, if 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes every connection, and waits (about a second at most) for the
    /// server's threads to finish.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    /// Routes that ended in a panic the router did not catch (tests check that none do).
    #[cfg(test)]
    pub(crate) fn panicked(&self) -> usize {
        self.shared.panicked.load(Ordering::SeqCst)
    }

    fn stop_and_join(&mut self) {
        let Some(t) = self.event_loop.take() else {
            return;
        };
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        let _ = t.join();
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

impl std::fmt::Debug for ControlServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// A worker: runs routes until the job queue closes.
fn work(shared: &Shared, queue: &Mutex<Receiver<Job>>, waker: &Waker) {
    loop {
        let job = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(job) = job else {
            return;
        };
        let routed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            router::route(&job.request, &*shared.control, &shared.access)
        }));
        let response = routed.unwrap_or_else(|_| {
            shared.panicked.fetch_add(1, Ordering::SeqCst);
            Response::error(500, "internal", "the request could not be served")
        });
        shared
            .done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((job.conn, response, job.keep_alive));
        let _ = waker.wake();
    }
}

/// Where a connection is in its exchange.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// Waiting for (the rest of) a request.
    Reading,
    /// A worker runs its request.
    Routing,
    /// Writing a response; then reading again, or lingering.
    Writing { keep_alive: bool },
    /// Answered and closing: reading and discarding until the client closes or `until`.
    Lingering { until: u64 },
}

struct Conn {
    stream: TcpStream,
    inbox: Inbox,
    phase: Phase,
    out: Vec<u8>,
    written: usize,
    /// Requests taken on this connection.
    served: usize,
    /// When the answer being written began, ns.
    since: u64,
    discarded: usize,
    /// Refused (503): not counted against the caps.
    refused: bool,
}

struct Loop {
    shared: Arc<Shared>,
    poll: Poll,
    listener: TcpListener,
    jobs: Option<Sender<Job>>,
    conns: HashMap<u64, Conn>,
    /// Their places, timing and caps (sans-IO, the same table as RTSP's); refused clients
    /// lingering for their 503 are not in it.
    room: Room,
    next: u64,
    input: Vec<u8>,
}

impl Loop {
    fn run(&mut self) {
        let mut events = Events::with_capacity(256);
        let mut last_sweep = mono_ns();
        while !self.shared.stop.load(Ordering::SeqCst) {
            if let Err(e) = self.poll.poll(&mut events, Some(TICK)) {
                if e.kind() != ErrorKind::Interrupted {
                    thread::sleep(TICK);
                }
                continue;
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    WAKER => {}
                    Token(id) => {
                        let id = id as u64;
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.readable(id);
                        }
                        if ev.is_writable() {
                            self.flush(id);
                        }
                    }
                }
            }
            let done = std::mem::take(
                &mut *self
                    .shared
                    .done
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            for (id, response, keep_alive) in done {
                self.respond(id, &response, keep_alive);
            }
            let now = mono_ns();
            if now.saturating_sub(last_sweep) >= TICK.as_nanos() as u64 {
                last_sweep = now;
                self.sweep(now);
            }
        }
        for (_, c) in self.conns.drain() {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => self.admit(stream, peer.ip()),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Out of descriptors, say: the next sweep tries again.
                Err(_) => return,
            }
        }
    }

    fn admit(&mut self, mut stream: TcpStream, ip: IpAddr) {
        let shared = self.shared.clone();
        let limits = &shared.limits;
        let now = mono_ns();
        // A connection whose request is with a worker, or whose answer is being written, is
        // using its place.
        let busy = |ConnId(id)| {
            self.conns
                .get(&id)
                .map_or(0, |c| usize::from(c.phase != Phase::Reading))
        };
        let refuse = match self.room.admit(ip, Timestamp::from_nanos(now), busy) {
            Admit::Serve => false,
            Admit::CloseFirst(ConnId(id)) => {
                self.close(id);
                false
            }
            // The API's few clients are its operator's: one that finds every place held
            // by newcomers is told at once rather than held.
            Admit::Wait(_) | Admit::Refuse => true,
        };
        let id = self.next;
        self.next += 1;
        let interest = Interest::READABLE | Interest::WRITABLE;
        if self
            .poll
            .registry()
            .register(&mut stream, Token(id as usize), interest)
            .is_err()
        {
            return;
        }
        let _ = stream.set_nodelay(true);
        let mut c = Conn {
            stream,
            inbox: Inbox::default(),
            phase: Phase::Reading,
            out: Vec::new(),
            written: 0,
            served: 0,
            since: now,
            discarded: 0,
            refused: refuse,
        };
        if refuse {
            if self.conns.values().filter(|c| c.refused).count() >= REFUSED_LINGERING {
                // A flood: closed without an answer.
                let _ = self.poll.registry().deregister(&mut c.stream);
                return;
            }
            let busy = Response::error(
                503,
                "busy",
                format!(
                    "the control API is already serving {} connections; retry in a moment",
                    limits.max_connections
                ),
            )
            .with_header("Retry-After", "1");
            c.out = busy.to_bytes(false);
            c.phase = Phase::Writing { keep_alive: false };
        } else {
            self.room.enter(ConnId(id), ip, Timestamp::from_nanos(now));
        }
        self.conns.insert(id, c);
        self.flush(id);
    }

    /// Reads what `id` sent: request bytes while reading, discarded bytes while lingering.
    fn readable(&mut self, id: u64) {
        let shared = self.shared.clone();
        let limits = &shared.limits;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let mut heard = false;
        loop {
            let room = match c.phase {
                Phase::Reading => c.inbox.room(limits).min(self.input.len()),
                Phase::Lingering { .. } => self.input.len(),
                // Pipelined bytes wait in the socket until the answer is out.
                Phase::Routing | Phase::Writing { .. } => return,
            };
            if room == 0 {
                break;
            }
            match c.stream.read(&mut self.input[..room]) {
                Ok(0) => return self.close(id),
                Ok(n) => match c.phase {
                    Phase::Lingering { .. } => {
                        c.discarded += n;
                        if c.discarded >= LINGER_BYTES {
                            return self.close(id);
                        }
                    }
                    _ => {
                        c.inbox.push(&self.input[..n]);
                        heard = true;
                    }
                },
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.close(id),
            }
        }
        self.take(id);
        if heard {
            // Part of a request waits while the connection reads with bytes in its inbox.
            let mid = self
                .conns
                .get(&id)
                .is_some_and(|c| c.phase == Phase::Reading && !c.inbox.is_empty());
            self.room
                .heard(ConnId(id), Timestamp::from_nanos(mono_ns()), mid);
        }
    }

    /// Takes the next whole request `id` holds, if it is reading.
    fn take(&mut self, id: u64) {
        let shared = self.shared.clone();
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.phase != Phase::Reading {
            return;
        }
        match c.inbox.take(&shared.limits) {
            Taken::Incomplete => {}
            Taken::Continue => {
                c.out = CONTINUE.to_vec();
                c.written = 0;
                // Written at once if the socket takes it; a client that cannot take 25
                // bytes gets no interim answer and sends its body anyway.
                let _ = c.stream.write(&c.out);
                c.out.clear();
            }
            Taken::Reply(response) => self.respond(id, &response, false),
            Taken::Request(request) => {
                c.served += 1;
                c.phase = Phase::Routing;
                self.room
                    .request_done(ConnId(id), Timestamp::from_nanos(mono_ns()));
                let keep_alive = request.keep_alive
                    && c.served < shared.limits.max_requests_per_connection
                    && !shared.stop.load(Ordering::SeqCst);
                let job = Job {
                    conn: id,
                    request,
                    keep_alive,
                };
                if self.jobs.as_ref().is_none_or(|j| j.send(job).is_err()) {
                    self.close(id);
                }
            }
        }
    }

    /// Starts writing `response` on `id`.
    fn respond(&mut self, id: u64, response: &Response, keep_alive: bool) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.out = response.to_bytes(keep_alive);
        c.written = 0;
        c.phase = Phase::Writing { keep_alive };
        c.since = mono_ns();
        self.flush(id);
    }

    /// Writes what `id` has to write; then reads on, or lingers.
    fn flush(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let Phase::Writing { keep_alive } = c.phase else {
            return;
        };
        while c.written < c.out.len() {
            match c.stream.write(&c.out[c.written..]) {
                Ok(0) => return self.close(id),
                Ok(n) => c.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.close(id),
            }
        }
        c.out = Vec::new();
        let now = mono_ns();
        if keep_alive {
            c.phase = Phase::Reading;
            self.room.answered(ConnId(id), Timestamp::from_nanos(now));
            // A pipelined request may be waiting, in the inbox or in the socket.
            self.readable(id);
        } else {
            let _ = c.stream.shutdown(Shutdown::Write);
            let linger = if c.refused {
                REJECT_LINGER
            } else {
                self.shared.limits.read_timeout.min(LINGER)
            };
            c.phase = Phase::Lingering {
                until: now + linger.as_nanos() as u64,
            };
            self.room.closing(ConnId(id));
            self.readable(id);
        }
    }

    /// Applies the deadlines.
    fn sweep(&mut self, now: u64) {
        let limits = self.shared.limits.clone();
        let ns = |d: Duration| d.as_nanos() as u64;
        let mut closed: Vec<u64> = Vec::new();
        for (&id, c) in &self.conns {
            match c.phase {
                Phase::Writing { .. } => {
                    if now.saturating_sub(c.since) >= ns(limits.write_timeout) {
                        closed.push(id);
                    }
                }
                Phase::Lingering { until } => {
                    if now >= until {
                        closed.push(id);
                    }
                }
                Phase::Reading | Phase::Routing => {}
            }
        }
        // A whole request within the read timeout (408), the first within it too and the
        // next within the idle timeout (closed without an answer).
        let deadlines = Deadlines {
            request: limits.read_timeout,
            first_request: limits.read_timeout,
            idle: limits.idle_timeout,
        };
        let busy = |ConnId(id)| {
            self.conns
                .get(&id)
                .map_or(0, |c| usize::from(c.phase != Phase::Reading))
        };
        let mut late: Vec<u64> = Vec::new();
        for (ConnId(id), expiry) in self
            .room
            .expired(Timestamp::from_nanos(now), deadlines, busy)
        {
            match expiry {
                Expiry::Request => late.push(id),
                Expiry::Idle => closed.push(id),
            }
        }
        for id in late {
            self.respond(id, &timeout(), false);
        }
        for id in closed {
            self.close(id);
        }
        self.accept_all();
    }

    fn close(&mut self, id: u64) {
        self.room.leave(ConnId(id));
        if let Some(mut c) = self.conns.remove(&id) {
            let _ = self.poll.registry().deregister(&mut c.stream);
            let _ = c.stream.shutdown(Shutdown::Both);
        }
    }
}
