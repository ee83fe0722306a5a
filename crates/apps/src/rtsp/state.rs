//! What the RTSP server's threads share: its configuration, the protocol state and the media
//! side under one lock (a request touches both), and the counters its metrics show. The service
//! (`service.rs`) makes it and starts the event loop (`event_loop.rs`), which serves from it.

use super::backend::MediaBackend;
use metronome_config::rtsp_auth::RtspAuthSpec;
use metronome_rt::clock::Clock;
use metronome_rt::sync::lock;
use metronome_session::rtsp::RtspServer;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Mutex, MutexGuard};
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
    /// Most sessions from one address at once (SETUP beyond it: 503).
    pub max_sessions_per_address: usize,
    /// Users and what they may play (the config's `[rtsp_auth]`). Required to listen beyond
    /// loopback.
    pub auth: Option<RtspAuthSpec>,
    /// Serve RTSPS (RTSP over TLS) with this certificate and key.
    pub tls: Option<TlsFiles>,
    /// Sessions of a live test-source mount read one encoder (else each has its own).
    pub share_live: bool,
}

/// A PEM certificate chain and its PEM private key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

impl RtspServiceConfig {
    pub fn new(addr: SocketAddr) -> Self {
        RtspServiceConfig {
            addr,
            max_connections: 1024,
            max_sessions: 256,
            session_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            max_per_address: 64,
            max_sessions_per_address: 64,
            auth: None,
            tls: None,
            share_live: true,
        }
    }
}

/// The protocol state and the media side, locked together (a request touches both).
pub(super) struct Core {
    pub rtsp: RtspServer,
    pub backend: MediaBackend,
}

impl Core {
    /// Shrinks the media side's tables to what they hold (after many clients have gone; the
    /// protocol's session table is a B-tree, which shrinks as it empties).
    pub(super) fn shrink_to_fit(&mut self) {
        self.backend.shrink_to_fit();
    }
}

pub(super) struct Shared {
    pub cfg: RtspServiceConfig,
    pub clock: Clock,
    core: Mutex<Core>,
    pub stop: AtomicBool,
    /// Connections open now (the event loop keeps it).
    pub connections: AtomicUsize,
    /// Connections closed to make room for new ones, and refused (503).
    pub evicted: AtomicU64,
    pub refused: AtomicU64,
    pub bad_requests: AtomicU64,
    /// Interleaved frames on a channel no session uses.
    pub unrouted: AtomicU64,
    /// Requests with credentials answered 401 or 403.
    pub credentials_refused: AtomicU64,
}

impl Shared {
    pub(super) fn new(cfg: RtspServiceConfig, clock: Clock, core: Core) -> Self {
        Shared {
            cfg,
            clock,
            core: Mutex::new(core),
            stop: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            evicted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            bad_requests: AtomicU64::new(0),
            unrouted: AtomicU64::new(0),
            credentials_refused: AtomicU64::new(0),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }
}
