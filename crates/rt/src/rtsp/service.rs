//! The RTSP listener: accepts connections up to a limit, runs the session timer, and shuts
//! everything down cleanly.

use super::backend::MediaBackend;
use super::mounts::Mounts;
use crate::clock::Clock;
use crate::streams::stream::lock;
use crate::streams::StreamServer;
use metronome_session::rtsp::{ConnId, RtspConfig, RtspServer};
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct RtspServiceConfig {
    pub addr: SocketAddr,
    /// Most connections at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// Most sessions at once (SETUP beyond it: 503).
    pub max_sessions: usize,
    /// A session with no request and no receiver report for this long is torn down.
    pub session_timeout: Duration,
    /// A connection with no session and no bytes for this long is closed.
    pub idle_timeout: Duration,
    /// A client that does not read what we send for this long is cut off.
    pub write_timeout: Duration,
    /// A request must arrive whole within this long of its first byte (not reset by each
    /// byte: a client trickling bytes is closed, 408).
    pub request_timeout: Duration,
    /// Most connections from one address at once.
    pub max_per_address: usize,
}

impl RtspServiceConfig {
    pub fn new(addr: SocketAddr) -> Self {
        RtspServiceConfig {
            addr,
            max_connections: 64,
            max_sessions: 256,
            session_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            max_per_address: 16,
        }
    }
}

/// What the accept loop knows of a live connection, to choose one to close when full.
pub(super) struct ConnState {
    pub ip: std::net::IpAddr,
    pub out: Arc<crate::interleaved::ConnOut>,
    /// Since when part of a request has been waiting for the rest, if it has.
    pub partial_since: Option<metronome_time::Timestamp>,
    /// When it last completed a request (or connected).
    pub last_active: metronome_time::Timestamp,
    /// Whether it has completed a request at all.
    pub served: bool,
    /// Closed to make room; its thread is on its way out.
    pub evicted: bool,
}

/// The protocol state and the media side, locked together (a request touches both).
pub(super) struct Core {
    pub rtsp: RtspServer,
    pub backend: MediaBackend,
}

pub(super) struct Shared {
    pub cfg: RtspServiceConfig,
    pub clock: Clock,
    core: Mutex<Core>,
    pub stop: AtomicBool,
    pub connections: AtomicUsize,
    /// Every live connection's state (see [`ConnState`]).
    pub conns: Mutex<std::collections::HashMap<ConnId, ConnState>>,
    /// Connections closed to make room for new ones, and refused (503).
    pub evicted: AtomicU64,
    pub refused: AtomicU64,
    pub bad_requests: AtomicU64,
    /// Interleaved frames on a channel no session uses.
    pub unrouted: AtomicU64,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }
}

/// A running RTSP server.
pub struct RtspService {
    shared: Arc<Shared>,
    local: SocketAddr,
    threads: Vec<JoinHandle<()>>,
}

impl RtspService {
    /// Binds the listener and starts serving `mounts` from `server`.
    pub fn start(
        cfg: RtspServiceConfig,
        server: Arc<StreamServer>,
        mounts: Mounts,
    ) -> io::Result<RtspService> {
        let listener = TcpListener::bind(cfg.addr).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot listen for RTSP on {}: {e}; pick another address with --rtsp",
                    cfg.addr
                ),
            )
        })?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let rtsp = RtspServer::new(RtspConfig {
            session_timeout: cfg.session_timeout,
            max_sessions: cfg.max_sessions,
            server_name: format!("metronome/{}", env!("CARGO_PKG_VERSION")),
            seed: os_entropy()?,
        });
        let shared = Arc::new(Shared {
            core: Mutex::new(Core {
                rtsp,
                backend: MediaBackend::new(server.clone(), Arc::new(mounts)),
            }),
            cfg,
            clock: Clock::new(),
            stop: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            conns: Mutex::new(std::collections::HashMap::new()),
            evicted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            bad_requests: AtomicU64::new(0),
            unrouted: AtomicU64::new(0),
        });
        let accept = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("rtsp-accept".into())
                .spawn(move || accept_loop(&shared, listener))?
        };
        let timer = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("rtsp-timer".into())
                .spawn(move || timer_loop(&shared))?
        };
        {
            // GET /metrics on the control address: this service's connections and sessions.
            let weak = Arc::downgrade(&shared);
            server.add_metrics(Arc::new(move || {
                weak.upgrade()
                    .map_or_else(String::new, |s| rtsp_metrics(&s))
            }));
        }
        Ok(RtspService {
            shared,
            local,
            threads: vec![accept, timer],
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Sessions open now.
    pub fn sessions(&self) -> usize {
        self.shared.lock().rtsp.sessions()
    }

    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// Requests answered with an error status because they could not be parsed or broke a
    /// limit.
    pub fn bad_requests(&self) -> u64 {
        self.shared.bad_requests.load(Ordering::Relaxed)
    }

    /// Stops accepting, closes every connection and tears every session down.
    pub fn shutdown(mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // Connection threads see the flag within a read turn.
        for _ in 0..100 {
            if self.shared.connections.load(Ordering::Acquire) == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.shared.lock().backend.teardown_all();
    }
}

/// 256 bits from the kernel's random number generator (getrandom(2)), for session ids.
fn os_entropy() -> io::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    let mut filled = 0;
    while filled < key.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `key`, which lives
        // across the call.
        let n =
            unsafe { libc::getrandom(key[filled..].as_mut_ptr().cast(), key.len() - filled, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io::Error::new(
                e.kind(),
                format!("cannot read random bytes for RTSP session ids: {e}"),
            ));
        }
        filled += n as usize;
    }
    Ok(key)
}

fn accept_loop(shared: &Arc<Shared>, listener: TcpListener) {
    let mut next = 1u64;
    while !shared.stop.load(Ordering::Acquire) {
        let (stream, _) = match listener.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(_) => {
                // Out of file descriptors and the like: wait, do not spin.
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let _ = stream.set_nonblocking(false);
        let Ok(peer) = stream.peer_addr() else {
            continue;
        };
        if !make_room(shared, peer.ip()) {
            shared.refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(target: "metronome::rtsp", "refused {peer} (503): every connection is in use");
            refuse(stream);
            continue;
        }
        shared.connections.fetch_add(1, Ordering::AcqRel);
        let conn = ConnId(next);
        next += 1;
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("rtsp-c{}", conn.0))
            .stack_size(super::conn::CONN_STACK)
            .spawn(move || {
                super::conn::serve(s.clone(), stream, conn);
                s.connections.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            shared.connections.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Whether a new connection from `ip` may be served, by the connection table's rule
/// (`metronome_session::rtsp::room`): this applies it, closing the connection it names.
fn make_room(shared: &Shared, ip: std::net::IpAddr) -> bool {
    use metronome_session::rtsp::room::{admit, Admit, Holder};
    let now = shared.clock.now();
    let mut conns = lock(&shared.conns);
    let holders: Vec<Holder> = {
        let core = shared.lock();
        conns
            .iter()
            .map(|(id, c)| Holder {
                id: *id,
                ip: c.ip,
                partial_since: c.partial_since,
                last_active: c.last_active,
                served: c.served,
                sessions: core.backend.sessions_on(*id),
                closing: c.evicted,
            })
            .collect()
    };
    let max = shared.cfg.max_connections;
    match admit(&holders, ip, now, max, shared.cfg.max_per_address) {
        Admit::Serve => true,
        Admit::Refuse => false,
        Admit::CloseFirst(id) => {
            if let Some(c) = conns.get_mut(&id) {
                c.evicted = true;
                c.out.close();
                tracing::debug!(target: "metronome::rtsp", "closing connection {} of {} to make room", id.0, c.ip);
            }
            shared.evicted.fetch_add(1, Ordering::Relaxed);
            true
        }
    }
}

/// The RTSP service's figures in Prometheus's text format.
fn rtsp_metrics(shared: &Shared) -> String {
    let sessions = shared.lock().rtsp.sessions();
    let families: [(&str, &str, &str, f64); 6] = [
        (
            "metronome_rtsp_connections",
            "gauge",
            "RTSP connections open now.",
            shared.connections.load(Ordering::Relaxed) as f64,
        ),
        (
            "metronome_rtsp_sessions",
            "gauge",
            "RTSP sessions now.",
            sessions as f64,
        ),
        (
            "metronome_rtsp_bad_requests_total",
            "counter",
            "Requests answered with a framing error (400, 408, 413, 414, 505).",
            shared.bad_requests.load(Ordering::Relaxed) as f64,
        ),
        (
            "metronome_rtsp_connections_closed_for_room_total",
            "counter",
            "Connections closed to make room for another (slow or idle, without a session).",
            shared.evicted.load(Ordering::Relaxed) as f64,
        ),
        (
            "metronome_rtsp_connections_refused_total",
            "counter",
            "Connections refused with 503 (every place in use).",
            shared.refused.load(Ordering::Relaxed) as f64,
        ),
        (
            "metronome_rtsp_unrouted_frames_total",
            "counter",
            "Interleaved frames on a channel no session uses.",
            shared.unrouted.load(Ordering::Relaxed) as f64,
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, v) in families {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"
        ));
    }
    out
}

/// Over the connection limit: one 503 and close (RFC 2326 §11.5.3 lets a server say so).
fn refuse(mut stream: TcpStream) {
    let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
    let _ = stream
        .write_all(b"RTSP/1.0 503 Service Unavailable\r\nCSeq: 0\r\nContent-Length: 0\r\n\r\n");
}

fn timer_loop(shared: &Shared) {
    while !shared.stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(250));
        let now = shared.clock.now();
        let mut core = shared.lock();
        let core = &mut *core;
        for id in core.backend.reporting_sessions() {
            core.rtsp.touch(id, now);
        }
        for id in core.rtsp.handle_timeout(now, &mut core.backend) {
            tracing::info!(
                target: "metronome::rtsp",
                "session {id} timed out: no request or receiver report for {:?}",
                shared.cfg.session_timeout
            );
        }
    }
}
