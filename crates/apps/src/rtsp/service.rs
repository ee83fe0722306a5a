//! The RTSP service: its configuration, the state its event loop shares with the pacing side
//! (the protocol and the media backend, under one lock), its metrics, and a clean shutdown.

use super::backend::MediaBackend;
use super::mounts::Mounts;
use super::state::{Core, Shared};
pub use super::state::{RtspServiceConfig, TlsFiles};
use crate::interleaved::Doorbell;
use crate::streams::StreamServer;
use metronome_config::rtsp_auth::RtspAuthSpec;
use metronome_rt::clock::Clock;
use metronome_session::rtsp::auth::Authenticator;
use metronome_session::rtsp::{RtspConfig, RtspServer};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

/// A running RTSP server.
pub struct RtspService {
    shared: Arc<Shared>,
    local: SocketAddr,
    bell: Arc<Doorbell>,
    event_loop: Option<JoinHandle<()>>,
}

impl RtspService {
    /// Binds the listener and starts serving `mounts` from `server`.
    pub fn start(
        cfg: RtspServiceConfig,
        server: Arc<StreamServer>,
        mounts: Mounts,
    ) -> io::Result<RtspService> {
        let auth = authenticator(&cfg, &mounts)?;
        srtp_needs_tls(&cfg, &mounts)?;
        let tls = cfg
            .tls
            .as_ref()
            .map(|f| super::tls::server_config(&f.cert, &f.key))
            .transpose()?;
        let listener = std::net::TcpListener::bind(cfg.addr).map_err(|e| {
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
        // A descriptor per connection, two per UDP session (its port pair), and some to spare.
        raise_descriptor_limit((cfg.max_connections + 2 * cfg.max_sessions) as u64 + 256);
        separate_large_allocations();
        let listener = mio::net::TcpListener::from_std(listener);
        let poll = mio::Poll::new()?;
        let bell = Arc::new(Doorbell::new(poll.registry(), super::event_loop::BELL)?);
        let rtsp = RtspServer::new(RtspConfig {
            session_timeout: cfg.session_timeout,
            max_sessions: cfg.max_sessions,
            max_sessions_per_address: cfg.max_sessions_per_address,
            server_name: format!("metronome/{}", env!("CARGO_PKG_VERSION")),
            seed: metronome_rt::entropy::os_random::<32>("RTSP session ids")?,
            auth,
            secure: tls.is_some(),
        });
        let core = Core {
            rtsp,
            backend: MediaBackend::new(server.clone(), Arc::new(mounts), cfg.share_live),
        };
        let shared = Arc::new(Shared::new(cfg, Clock::new(), core));
        let event_loop = {
            let l =
                super::event_loop::Loop::new(shared.clone(), poll, listener, bell.clone(), tls)?;
            std::thread::Builder::new()
                .name("rtsp-io".into())
                .spawn(move || l.run())?
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
            bell,
            event_loop: Some(event_loop),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// `rtsps` when its connections are TLS, else `rtsp`: the scheme of its URLs.
    pub fn scheme(&self) -> &'static str {
        if self.shared.cfg.tls.is_some() {
            "rtsps"
        } else {
            "rtsp"
        }
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

    /// Serves `mounts` with `auth` from now on (the config read again on SIGHUP), checked as
    /// at the start: beyond loopback it needs users, their mounts must exist, SRTP only over
    /// TLS. Connections and sessions stay: a session playing goes on, also on a mount gone;
    /// the next requests are checked against the new users (the nonces handed out stay valid).
    /// Refused, nothing changes.
    pub fn reload(&self, mounts: Mounts, auth: Option<RtspAuthSpec>) -> io::Result<()> {
        check_auth(self.shared.cfg.addr, auth.as_ref(), &mounts)?;
        srtp_needs_tls(&self.shared.cfg, &mounts)?;
        let mut core = self.shared.lock();
        let authenticator = match (auth, core.rtsp.config().auth.as_ref()) {
            (None, _) => None,
            (Some(spec), Some(old)) => Some(old.with_spec(spec)),
            (Some(spec), None) => Some(Authenticator::new(
                spec,
                metronome_rt::entropy::os_random::<32>("RTSP nonces")?,
            )),
        };
        core.rtsp.set_auth(authenticator);
        core.backend.set_mounts(mounts);
        Ok(())
    }

    /// The mounts served now, by name.
    pub fn mount_names(&self) -> Vec<String> {
        let core = self.shared.lock();
        core.backend.mounts().names().map(String::from).collect()
    }

    /// Stops accepting, closes every connection and tears every session down.
    pub fn shutdown(mut self) {
        self.stop_serving();
        self.shared.lock().backend.teardown_all();
    }

    /// [`RtspService::shutdown`] as the whole server stops, its stream server right after
    /// ([`crate::streams::StreamServer::shutdown`]): the streams of sessions played over UDP,
    /// unicast or to a group, are left to it, so they answer their viewers' last NACKs before
    /// their BYE, as every stream of a stopping server does (docs/repair.md). Sessions over
    /// their connection, which closes now, and raw sessions are torn down.
    pub fn shutdown_with_server(mut self) {
        self.stop_serving();
        self.shared.lock().backend.leave_to_server();
    }

    fn stop_serving(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.bell.wake();
        if let Some(t) = self.event_loop.take() {
            let _ = t.join();
        }
    }
}

/// An SRTP mount's key goes to its clients in DESCRIBE's SDP: only over TLS.
fn srtp_needs_tls(cfg: &RtspServiceConfig, mounts: &Mounts) -> io::Result<()> {
    if cfg.tls.is_some() {
        return Ok(());
    }
    match mounts
        .names()
        .find(|n| mounts.get(n).is_some_and(|m| m.spec.srtp_key.is_some()))
    {
        None => Ok(()),
        Some(name) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "mount '{name}' sends SRTP, and its key would cross the network in clear in \
                 DESCRIBE: serve RTSPS (--rtsp-tls-cert and --rtsp-tls-key), or drop its srtp_key"
            ),
        )),
    }
}

/// The users' check, after making sure that a server reachable beyond loopback has one and
/// that every mount it names exists (a misspelt one would lock its users out).
fn authenticator(cfg: &RtspServiceConfig, mounts: &Mounts) -> io::Result<Option<Authenticator>> {
    check_auth(cfg.addr, cfg.auth.as_ref(), mounts)?;
    let Some(spec) = &cfg.auth else {
        return Ok(None);
    };
    let key = metronome_rt::entropy::os_random::<32>("RTSP nonces")?;
    Ok(Some(Authenticator::new(spec.clone(), key)))
}

/// A server on `addr` beyond loopback has users (`auth`), and every mount they name exists.
fn check_auth(addr: SocketAddr, auth: Option<&RtspAuthSpec>, mounts: &Mounts) -> io::Result<()> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    let Some(spec) = auth else {
        if addr.ip().is_loopback() {
            return Ok(());
        }
        return Err(invalid(format!(
            "RTSP on {addr} would let anyone who reaches it play every mount: add an \
             [rtsp_auth] table to the --config file (users made by `metronome passwd`, or \
             public = [...] for mounts anyone may play), or listen on 127.0.0.1"
        )));
    };
    if let Some((mount, whose)) = spec.named_mounts().find(|(m, _)| mounts.get(m).is_none()) {
        let known: Vec<&str> = mounts.names().collect();
        return Err(invalid(format!(
            "[rtsp_auth]: {whose} names mount '{mount}', which is not served (mounts: {})",
            known.join(", ")
        )));
    }
    Ok(())
}

/// Raises the soft limit on open descriptors towards `want` (up to the hard limit), as servers
/// do: each connection holds one, and the soft default (often 1024) would refuse connections
/// well under `--rtsp-max-connections`. Short of it, a warning says what to change.
fn raise_descriptor_limit(want: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the one struct passed, which lives across
    // the calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 || lim.rlim_cur >= want {
            return;
        }
        let raised = libc::rlimit {
            rlim_cur: want.min(lim.rlim_max),
            rlim_max: lim.rlim_max,
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
            lim = raised;
        }
    }
    if lim.rlim_cur < want {
        tracing::warn!(target: "metronome::rtsp",
            "at most {} descriptors may be open, fewer than the RTSP connection limit needs ({want}); \
             raise it (ulimit -n, or LimitNOFILE= in the systemd unit) or lower --rtsp-max-connections",
            lim.rlim_cur);
    }
}

/// Makes every allocation of 128 KiB or more a mapping of its own (glibc's default raises that
/// threshold to the largest block freed so far): a session's packet ring and its connection's
/// media queue then go back to the system when it ends, instead of staying in the heap with
/// small, long-lived allocations scattered between them. A server that played a thousand
/// sessions one after another keeps the memory of the ones still playing.
fn separate_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two integers and changes a malloc tunable.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// The RTSP service's figures in Prometheus's text format.
fn rtsp_metrics(shared: &Shared) -> String {
    let sessions = shared.lock().rtsp.sessions();
    let families: [(&str, &str, &str, f64); 7] = [
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
        (
            "metronome_rtsp_credentials_refused_total",
            "counter",
            "Requests whose credentials were wrong, or whose user may not play the mount (401, 403).",
            shared.credentials_refused.load(Ordering::Relaxed) as f64,
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, v) in families {
        crate::streams::server::metrics::family(&mut out, name, kind, help, &[(String::new(), v)]);
    }
    out
}
