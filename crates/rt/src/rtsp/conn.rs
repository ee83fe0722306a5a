//! One RTSP connection: a reader thread (this one) that frames requests and interleaved data
//! and answers through the connection's [`ConnOut`], and a writer thread that drains it.

use super::service::Shared;
use crate::interleaved::ConnOut;
use metronome_session::rtsp::{ConnId, Frame, FrameError, Framer, FramerLimits};
use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often a blocked read wakes to look at the stop flag and the idle timer.
const READ_TURN: Duration = Duration::from_millis(200);
/// Bytes of `$` frames queued for a slow reader before frames are dropped.
const OUT_QUEUE: usize = 4 << 20;

/// A connection thread's stack: its work is parsing and answering one request at a time
/// (the 2 MiB default is reserved for nothing; issue 16 measured megabytes per idle client).
pub(super) const CONN_STACK: usize = 256 << 10;

/// Serves one connection until the client closes it, it idles out, or the service stops.
pub(super) fn serve(shared: Arc<Shared>, stream: TcpStream, conn: ConnId) {
    let (Ok(peer), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else {
        return;
    };
    let out = Arc::new(ConnOut::new(OUT_QUEUE));
    let writer = match stream.try_clone() {
        Ok(s) => {
            let (out, timeout) = (out.clone(), shared.cfg.write_timeout);
            std::thread::Builder::new()
                .name(format!("rtsp-w{}", conn.0))
                .stack_size(CONN_STACK)
                .spawn(move || out.run_writer(s, timeout))
                .ok()
        }
        Err(_) => None,
    };
    if writer.is_none() {
        return;
    }
    shared.lock().backend.connection_opened(conn, out.clone());
    crate::streams::stream::lock(&shared.conns).insert(
        conn,
        super::service::ConnState {
            ip: peer.ip(),
            out: out.clone(),
            partial_since: None,
            last_active: shared.clock.now(),
            served: false,
            evicted: false,
        },
    );
    let _ = stream.set_read_timeout(Some(READ_TURN));
    let _ = stream.set_nodelay(true);
    tracing::info!(target: "metronome::rtsp", "client {peer} connected (connection {})", conn.0);
    let why = read_loop(&shared, &stream, conn, peer, local, &out);
    let why = if out.is_closed() && why == "the server closed it" {
        "closed to make room for another client"
    } else {
        why
    };
    tracing::info!(target: "metronome::rtsp", "client {peer} left (connection {}): {why}", conn.0);
    crate::streams::stream::lock(&shared.conns).remove(&conn);
    {
        let mut core = shared.lock();
        let core = &mut *core;
        core.rtsp.connection_closed(conn, &mut core.backend);
        core.backend.connection_gone(conn);
    }
    out.close();
    if let Some(w) = writer {
        let _ = w.join();
    }
}

fn read_loop(
    shared: &Shared,
    mut stream: &TcpStream,
    conn: ConnId,
    peer: std::net::SocketAddr,
    local: std::net::SocketAddr,
    out: &ConnOut,
) -> &'static str {
    let mut framer = Framer::new(FramerLimits::default());
    let mut buf = vec![0u8; 16 << 10];
    let mut idle = Duration::ZERO;
    let mut wire = Vec::with_capacity(4096);
    // When the request being read began (its first byte), if one is.
    let mut partial_since: Option<metronome_time::Timestamp> = None;
    while !shared.stop.load(Ordering::Acquire) && !out.is_closed() {
        if let Some(t) = partial_since {
            if shared.clock.now().saturating_since(t) >= shared.cfg.request_timeout {
                // A whole request takes at most request_timeout, however its bytes trickle.
                let e = FrameError::Timeout {
                    seconds: shared.cfg.request_timeout.as_secs(),
                    cseq: None,
                };
                shared.bad_requests.fetch_add(1, Ordering::Relaxed);
                let response = shared.lock().rtsp.error_response(&e);
                wire.clear();
                if response.write(&mut wire).is_ok() {
                    out.send_message(&wire);
                }
                return "its request did not arrive whole in time (408)";
            }
        }
        let room = framer.buffer_space().min(buf.len());
        let n = match stream.read(&mut buf[..room.max(1)]) {
            Ok(0) => return "it closed the connection",
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                idle += READ_TURN;
                // A connection with no session lives as long as the idle timeout; one with
                // sessions as long as they do (the session timer tears them down).
                if idle >= shared.cfg.idle_timeout && shared.lock().backend.sessions_on(conn) == 0 {
                    return "idle without a session";
                }
                continue;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return "the connection failed",
        };
        idle = Duration::ZERO;
        if room == 0 {
            // The framer is full and produced nothing: it cannot happen with its limits, but
            // a connection that gets here is cut rather than looped on.
            return "its framing could not go on";
        }
        framer.push(&buf[..n]);
        let mut closing = false;
        while let Some(frame) = framer.next_frame() {
            let mut core = shared.lock();
            let core = &mut *core;
            let response = match frame {
                Ok(Frame::Request(req)) => {
                    let now = shared.clock.now();
                    let response =
                        core.rtsp
                            .handle_request(now, conn, peer, local, &req, &mut core.backend);
                    log_request(peer, &req, &response);
                    response
                }
                Ok(Frame::Data { channel, payload }) => {
                    if !core.backend.interleaved_in(conn, channel, &payload) {
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
            if response.write(&mut wire).is_err() || !out.send_message(&wire) {
                return "it does not read what it is sent";
            }
            if closing {
                // The answer is queued; the connection ends after it (the writer drains it).
                return "its request's length could not be trusted";
            }
        }
        // Between requests, or in the middle of one: what the deadline and the choice of a
        // connection to close (when full) go by.
        let now = shared.clock.now();
        let waiting = framer.mid_message();
        if waiting != partial_since.is_some() {
            partial_since = waiting.then_some(now);
            if let Some(c) = crate::streams::stream::lock(&shared.conns).get_mut(&conn) {
                c.partial_since = partial_since;
                if !waiting {
                    c.last_active = now;
                    c.served = true;
                }
            }
        }
    }
    "the server closed it"
}

/// A line for what a client did that changes what is sent: PLAY, PAUSE, TEARDOWN (and SETUP
/// at debug level), with the answer's status.
fn log_request(
    peer: std::net::SocketAddr,
    req: &rtsp_types::Request<Vec<u8>>,
    response: &rtsp_types::Response<Vec<u8>>,
) {
    let method = match req.method() {
        rtsp_types::Method::Play => "plays",
        rtsp_types::Method::Pause => "pauses",
        rtsp_types::Method::Teardown => "tears down",
        rtsp_types::Method::Setup => {
            tracing::debug!(target: "metronome::rtsp", "client {peer} sets up {}: {}",
                req.request_uri().map_or("*".into(), |u| u.to_string()),
                u16::from(response.status()));
            return;
        }
        _ => return,
    };
    let uri = req.request_uri().map_or("*".into(), |u| u.to_string());
    let status = u16::from(response.status());
    let session = req
        .header(&rtsp_types::headers::SESSION)
        .map(|v| v.as_str().split(';').next().unwrap_or("").to_string())
        .unwrap_or_default();
    if (200..300).contains(&status) {
        tracing::info!(target: "metronome::rtsp", "client {peer} {method} {uri} (session {session})");
    } else {
        tracing::info!(target: "metronome::rtsp", "client {peer} {method} {uri}: refused, {status}");
    }
}
