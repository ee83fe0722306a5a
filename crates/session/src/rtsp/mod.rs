//! RTSP 1.0 (RFC 2326), sans-IO. The server: request framing with limits, the session state
//! machine (Init → Ready → Playing), session ids and timeouts. Messages are parsed and built with
//! `rtsp-types`; this module never touches a socket or a clock. The driver
//! (`metronome_apps::rtsp`) owns the TCP connections and implements [`Backend`], which does what a
//! request asks of the media side (ports, streams, admission control).
//!
//! ```text
//! bytes ─► Framer ─► Frame::Request ─► RtspServer::handle_request(now, conn, peer, local, req, backend) ─► Response
//!                 └► Frame::Data (interleaved RTCP from the client, `$` framing)
//! now ───► RtspServer::handle_timeout(now, backend)   (sessions that went silent are torn down)
//! ```
//!
//! The client's protocol ([`client`]: response framing, the Session header) is here too, and
//! both sides read the Transport header as one [`TransportSpec`].

pub mod auth;
pub mod auth_client;
pub mod client;
mod framing;
mod request;
pub mod room;
mod server;
#[cfg(test)]
mod tests;
mod transport;

pub use framing::{Frame, FrameError, Framer, FramerLimits};
pub use server::{
    RtspConfig, RtspServer, SessionInfo, SessionState, PUBLIC_METHODS, REASON_HEADER,
};
pub use transport::{alternatives as transport_alternatives, TransportSpec};

use metronome_time::RtpTime;
use metronome_wire::{SeqNo, Ssrc};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// One TCP connection, as the driver numbers them. Sessions are bound to the connection that
/// created them: a request naming a session from another connection gets 454.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// A session id: 128 random bits, written as 32 lowercase hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub u128);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// What the backend says about a mount, for DESCRIBE, SETUP and PLAY.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountInfo {
    /// The SDP for DESCRIBE (one media section, `a=control:trackID=0`).
    pub sdp: String,
    /// Files: the length of the presentation (PLAY Range applies). `None`: live.
    pub duration: Option<Duration>,
    /// The mount has a multicast group a client may SETUP with `multicast`.
    pub multicast: bool,
    /// The mount sends SRTP (its SDP's `a=crypto` has the key): SETUP answers `RTP/SAVP`.
    pub srtp: bool,
    /// The mount answers NACKs with retransmissions (its SDP is `RTP/AVPF` with `rtx`): SETUP
    /// takes `RTP/AVPF` and answers with it.
    pub feedback: bool,
}

/// The transport a client asked for in SETUP, after checks (RTP/AVP only; a `destination` other
/// than the client's own address is refused before the backend sees it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requested {
    /// RTP/AVP(/UDP);unicast;client_port=RTP-RTCP, to the connection's peer address.
    Udp {
        /// The client's UDP port for RTP (nonzero).
        client_rtp: u16,
        /// The client's UDP port for RTCP: the second of `client_port`, or the RTP port + 1.
        client_rtcp: u16,
    },
    /// RTP/AVP;multicast: the server's group, port and ttl for the mount.
    Multicast,
    /// RTP/AVP/TCP;interleaved=RTP-RTCP over the RTSP connection.
    Interleaved {
        /// The `$` channel for RTP, free on this connection.
        rtp_channel: u8,
        /// The `$` channel for RTCP, free on this connection (the next one if not given).
        rtcp_channel: u8,
    },
}

/// A SETUP for the backend to carry out.
#[derive(Clone, Copy, Debug)]
pub struct SetupRequest<'a> {
    /// The session being set up (new, or the one the request's Session header names).
    pub session: SessionId,
    /// The connection the SETUP came on; the session is bound to it.
    pub conn: ConnId,
    /// The mount named by the Request-URI: its path without slashes around it or the
    /// `trackID=N` segment.
    pub mount: &'a str,
    /// The RTSP client's address (streams only ever go to this IP, or to the mount's group).
    pub peer: SocketAddr,
    /// The server's address on this connection.
    pub local: SocketAddr,
    /// The transport the client asked for, already checked.
    pub transport: Requested,
}

/// How the backend set a session's media up, for the SETUP response's Transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Unicast UDP to the client (`client_port` and `server_port` in the answer).
    Udp {
        /// The client's UDP port that RTP goes to.
        client_rtp: u16,
        /// The client's UDP port that RTCP goes to.
        client_rtcp: u16,
        /// The server's UDP port RTP leaves from.
        server_rtp: u16,
        /// The server's UDP port for RTCP.
        server_rtcp: u16,
        /// The SSRC the stream is sent with (8 hex digits in the answer).
        ssrc: Ssrc,
    },
    /// The mount's multicast group (`destination`, `port` and `ttl` in the answer).
    Multicast {
        /// The group address.
        group: IpAddr,
        /// The group's UDP port for RTP.
        port: u16,
        /// The group's UDP port for RTCP.
        rtcp_port: u16,
        /// The IP time-to-live the group's packets are sent with.
        ttl: u8,
        /// The SSRC the stream is sent with.
        ssrc: Ssrc,
    },
    /// Interleaved over the RTSP connection (`interleaved` in the answer).
    Interleaved {
        /// The `$` channel RTP is framed on.
        rtp_channel: u8,
        /// The `$` channel RTCP is framed on (the client's RTCP comes back on it).
        rtcp_channel: u8,
        /// The SSRC the stream is sent with.
        ssrc: Ssrc,
    },
}

/// What PLAY started, for the Range and RTP-Info headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlayInfo {
    /// Sequence number of the first packet sent.
    pub seq: SeqNo,
    /// RTP timestamp that corresponds to `start`.
    pub rtptime: RtpTime,
    /// Where play starts, in normal play time.
    pub start: Duration,
    /// Where it ends (files), `None` for live.
    pub end: Option<Duration>,
}

/// Why the backend could not do what a request asked. Each maps to the standard status.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// 404: no such mount.
    #[error("no such mount")]
    NotFound,
    /// 453 Not Enough Bandwidth: admission control refused the stream (the reason says why).
    #[error("admission refused it: {0}")]
    NotEnoughBandwidth(String),
    /// 461 Unsupported Transport.
    #[error("unsupported transport: {0}")]
    UnsupportedTransport(String),
    /// 457 Invalid Range.
    #[error("invalid range: {0}")]
    InvalidRange(String),
    /// 503 Service Unavailable: a limit (sessions, ports) is reached.
    #[error("service unavailable: {0}")]
    Unavailable(String),
    /// 500: something failed on the server.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The media side of the server. The state machine calls it only for requests that are valid
/// in the session's state; it never calls `play` on a session that `setup` did not accept.
pub trait Backend {
    /// The mount named `name`, described for a client that reached the server at `local`.
    fn mount(&mut self, name: &str, local: SocketAddr) -> Option<MountInfo>;
    /// Prepares delivery for a session (ports bound, group chosen); nothing is sent yet.
    fn setup(&mut self, req: &SetupRequest<'_>) -> Result<Delivery, Refusal>;
    /// Starts sending, from `from` (files) or live. Admission control is applied here.
    fn play(&mut self, session: SessionId, from: Option<Duration>) -> Result<PlayInfo, Refusal>;
    /// Stops sending and returns the position reached (files), so PLAY can resume there.
    fn pause(&mut self, session: SessionId) -> Result<Duration, Refusal>;
    /// Releases everything the session holds. Called once per session, whatever ended it
    /// (TEARDOWN, timeout, its connection closing).
    fn teardown(&mut self, session: SessionId);
}
