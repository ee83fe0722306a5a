//! The control server's threads: one accepting, at most `max_connections` serving, and one that
//! answers 503 to the clients beyond that.

use super::http::{linger_close, Conn, Next, Response};
use super::{router, ControlLimits, StreamControl};
use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Clients waiting for their 503; beyond this they are closed without an answer.
const REJECT_QUEUE: usize = 64;
/// How long the 503 thread lingers on each rejected client.
const REJECT_LINGER: Duration = Duration::from_millis(200);
/// How long [`ControlServer::shutdown`] waits for connection threads to finish.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(1);

/// A running control API server. Dropping it stops it, like [`ControlServer::shutdown`].
pub struct ControlServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// Shared with the accept thread; closed once both let go.
    listener: Option<Arc<TcpListener>>,
    accept: Option<JoinHandle<()>>,
}

struct Shared {
    stop: AtomicBool,
    limits: ControlLimits,
    control: Arc<dyn StreamControl>,
    conns: Mutex<Conns>,
    changed: Condvar,
    panicked: AtomicUsize,
}

/// The open connections, so that shutdown can close them, and their clients' addresses.
struct Conns {
    next_id: u64,
    open: HashMap<u64, TcpStream>,
    from: HashMap<u64, IpAddr>,
}

impl Shared {
    fn conns(&self) -> MutexGuard<'_, Conns> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ControlServer {
    /// Binds `addr` (port 0 picks a free port), starts serving `control` with the default
    /// [`ControlLimits`], and returns at once.
    pub fn start(addr: SocketAddr, control: Arc<dyn StreamControl>) -> io::Result<ControlServer> {
        Self::start_with(addr, control, ControlLimits::default())
    }

    /// Like [`ControlServer::start`], with explicit limits.
    pub fn start_with(
        addr: SocketAddr,
        control: Arc<dyn StreamControl>,
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
        let listener = Arc::new(TcpListener::bind(addr)?);
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            limits,
            control,
            conns: Mutex::new(Conns {
                next_id: 0,
                open: HashMap::new(),
                from: HashMap::new(),
            }),
            changed: Condvar::new(),
            panicked: AtomicUsize::new(0),
        });
        let (reject_tx, reject_rx) = sync_channel(REJECT_QUEUE);
        let for_rejecter = Arc::clone(&shared);
        let rejecter = thread::Builder::new()
            .name("control-503".into())
            .spawn(move || reject_loop(&for_rejecter, reject_rx))?;
        let for_accept = Arc::clone(&shared);
        let accept_listener = Arc::clone(&listener);
        let accept = thread::Builder::new()
            .name("control-accept".into())
            .spawn(move || {
                accept_loop(&for_accept, &accept_listener, reject_tx);
                let _ = rejecter.join();
            })?;
        Ok(ControlServer {
            addr,
            shared,
            listener: Some(listener),
            accept: Some(accept),
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

    /// Connection threads that ended in a panic (tests check that none do).
    #[cfg(test)]
    pub(crate) fn panicked(&self) -> usize {
        self.shared.panicked.load(Ordering::SeqCst)
    }

    fn stop_and_join(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocked accept: connect to ourselves; failing that, shut the listening socket
        // down, which wakes `accept` on Linux.
        let ip = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let wake = SocketAddr::new(ip, self.addr.port());
        if TcpStream::connect_timeout(&wake, Duration::from_millis(200)).is_err() {
            if let Some(listener) = &self.listener {
                // SAFETY: the listener is open (we hold an `Arc` to it); shutdown on a valid
                // socket descriptor has no memory effects.
                unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
            }
        }
        let _ = accept.join();
        // The accept thread has let go of its handle: this closes the listening socket.
        self.listener = None;
        let mut conns = self.shared.conns();
        for stream in conns.open.values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let mut waited = Duration::ZERO;
        while !conns.open.is_empty() && waited < SHUTDOWN_WAIT {
            let step = Duration::from_millis(50);
            conns = match self.shared.changed.wait_timeout(conns, step) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
            waited += step;
        }
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

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener, reject: SyncSender<TcpStream>) {
    loop {
        let accepted = listener.accept();
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        match accepted {
            Ok((stream, _)) => admit(shared, stream, &reject),
            Err(e) => match e.kind() {
                io::ErrorKind::Interrupted
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::ConnectionReset => {}
                // Out of descriptors or memory: back off rather than spin.
                _ => thread::sleep(Duration::from_millis(20)),
            },
        }
    }
}

/// Gives a new connection a thread, or, when all are busy, hands it to the 503 thread.
fn admit(shared: &Arc<Shared>, stream: TcpStream, reject: &SyncSender<TcpStream>) {
    let id = {
        let mut conns = shared.conns();
        let ip = stream.peer_addr().map(|a| a.ip()).ok();
        let from_ip = conns.from.values().filter(|a| Some(**a) == ip).count();
        if conns.open.len() >= shared.limits.max_connections
            || from_ip >= shared.limits.max_per_address
        {
            drop(conns);
            // A full queue means a flood: close without an answer.
            let _ = reject.try_send(stream);
            return;
        }
        let Ok(registered) = stream.try_clone() else {
            return;
        };
        let id = conns.next_id;
        conns.next_id += 1;
        conns.open.insert(id, registered);
        if let Some(ip) = ip {
            conns.from.insert(id, ip);
        }
        id
    };
    // Created before the spawn so that a failed spawn (which drops the closure) unregisters.
    let guard = Registered {
        shared: Arc::clone(shared),
        id,
    };
    let _ = thread::Builder::new()
        .name("control-conn".into())
        .spawn(move || {
            serve(&guard.shared, &stream);
            drop(guard);
        });
}

/// Unregisters a connection when its thread ends, even by a panic.
struct Registered {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        if thread::panicking() {
            self.shared.panicked.fetch_add(1, Ordering::SeqCst);
        }
        let mut conns = self.shared.conns();
        conns.open.remove(&self.id);
        conns.from.remove(&self.id);
        drop(conns);
        self.shared.changed.notify_all();
    }
}

/// Serves requests on one connection until it closes, errs, idles out or reaches its quota.
fn serve(shared: &Shared, stream: &TcpStream) {
    let limits = &shared.limits;
    let Ok(mut conn) = Conn::new(stream, limits) else {
        return;
    };
    let mut served = 0;
    loop {
        let wait = if served == 0 {
            limits.read_timeout
        } else {
            limits.idle_timeout
        };
        match conn.next_request(wait) {
            Next::Closed => return,
            Next::Reply(response) => {
                let _ = conn.respond(&response, false);
                linger_close(stream, limits.read_timeout.min(Duration::from_millis(500)));
                return;
            }
            Next::Request(request) => {
                served += 1;
                let keep_alive = request.keep_alive
                    && served < limits.max_requests_per_connection
                    && !shared.stop.load(Ordering::SeqCst);
                let response = router::route(&request, &*shared.control);
                if conn.respond(&response, keep_alive).is_err() {
                    return;
                }
                if !keep_alive {
                    linger_close(stream, limits.read_timeout.min(Duration::from_millis(500)));
                    return;
                }
            }
        }
    }
}

/// Answers 503 to the clients that found every connection thread busy.
fn reject_loop(shared: &Shared, queue: Receiver<TcpStream>) {
    let busy = Response::error(
        503,
        "busy",
        format!(
            "the control API is already serving {} connections; retry in a moment",
            shared.limits.max_connections
        ),
    )
    .with_header("Retry-After", "1")
    .to_bytes(false);
    for stream in queue {
        if shared.stop.load(Ordering::SeqCst) {
            continue;
        }
        let _ = stream.set_write_timeout(Some(REJECT_LINGER));
        if (&stream).write_all(&busy).is_ok() {
            linger_close(&stream, REJECT_LINGER);
        }
    }
}
