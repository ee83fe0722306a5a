//! An RTSP 1.0 client (RFC 2326) for receivers: OPTIONS, DESCRIBE, SETUP, PLAY, keep-alive and
//! TEARDOWN over one blocking `TcpStream` (through rustls for `rtsps://`: `tls.rs`), messages
//! built and parsed with `rtsp-types`.
//!
//! ```text
//! let mut c = RtspClient::connect("rtsp://127.0.0.1:8554/live", &RtspClientConfig::default())?;
//! c.options()?;
//! let d = c.describe()?;                         // the SDP, and where its controls point
//! let reply = c.setup(&d.media_url(0)?, TransportRequest::Udp { rtp_port: 5004 })?;
//! c.play(&d.aggregate_url())?;
//! ...receive on the ports...; c.keep_alive() every c.keep_alive_interval()
//! c.teardown()?;                                 // or drop it
//! ```
//!
//! - Transports: UDP unicast to ports the caller has bound (`client_port=P-(P+1)`), multicast
//!   (the server chooses the group; [`Transport::Multicast`] says which), and TCP interleaved
//!   (`interleaved=0-1`; after PLAY, [`RtspClient::read_interleaved`] gives the `$` frames).
//! - Controls (RFC 2326 C.1.1): the base is `Content-Base`, else `Content-Location`, else the
//!   request URL; `a=control:*` or none is the base itself, an absolute URL is used as is, and a
//!   relative one is appended to the base with one `/` between them (what ffmpeg, GStreamer and
//!   live555 do, rather than RFC 3986 resolution, which would drop the base's last segment).
//! - Keep-alive: `GET_PARAMETER`, or `OPTIONS` if the server's `Public` does not list
//!   `GET_PARAMETER` (or it answers 405/501), every half of the `Session` timeout (60 s when it
//!   gives none).
//! - Everything read is bounded: a response head up to [`MAX_HEAD_BYTES`], a body up to
//!   [`MAX_BODY_BYTES`]; an interleaved frame is at most 64 KiB by construction.
//! - Authentication: the URL's user name and password (`rtsp://user:password@host/...`)
//!   answer a 401's challenge (`metronome_session::rtsp::auth_client`: Digest, SHA-256 or
//!   MD5; Basic only over TLS), and every later request carries the answer; they never go
//!   in a request line. A 401 without them, or to them, is an error that says which.
//! - A client that has set up a session and is dropped sends TEARDOWN (without waiting for the
//!   answer).
//!
//! Time is read through [`metronome_rt::clock::mono_ns`] only.

use crate::receiver::{DatagramSource, Incoming, SourceError};
use metronome_rt::clock::mono_ns;
use metronome_wire::sdp::{SdpError, SessionDescription};
use metronome_wire::Ssrc;
use rtsp_types::{headers, HeaderName, Message, Method, Request, Response, Url, Version};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Largest response head (status line and headers) accepted.
pub const MAX_HEAD_BYTES: usize = 16 << 10;
/// Largest response body accepted.
pub const MAX_BODY_BYTES: usize = 64 << 10;
/// The session timeout when the server's `Session` header gives none (RFC 2326 §12.37).
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(60);
/// RTSP's registered port.
pub const DEFAULT_PORT: u16 = 554;
/// The port of `rtsps://` URLs that name none (RFC 2326 §3.2).
pub const DEFAULT_TLS_PORT: u16 = 322;

/// How long a read blocks before the client looks at its deadlines again.
const POLL: Duration = Duration::from_millis(50);

#[derive(Clone, Debug)]
pub struct RtspClientConfig {
    /// Longest wait for the TCP connection.
    pub connect_timeout: Duration,
    /// Longest wait for the answer to a request.
    pub response_timeout: Duration,
    pub user_agent: String,
    /// `rtsps://`: the CA certificates (PEM) to trust the server's certificate by, instead of
    /// the system's.
    pub tls_ca: Option<std::path::PathBuf>,
}

impl Default for RtspClientConfig {
    fn default() -> Self {
        RtspClientConfig {
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(10),
            user_agent: concat!("metronome/", env!("CARGO_PKG_VERSION")).to_string(),
            tls_ca: None,
        }
    }
}

/// The transport asked for in SETUP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportRequest {
    /// `RTP/AVP;unicast;client_port=P-(P+1)`: the caller has bound RTP on `rtp_port` (even) and
    /// RTCP on the port above.
    Udp { rtp_port: u16 },
    /// `RTP/AVP;multicast`: the server chooses the group and ports.
    Multicast,
    /// `RTP/AVP/TCP;unicast;interleaved=0-1`: RTP and RTCP on this connection.
    Tcp,
}

impl TransportRequest {
    fn header(self) -> String {
        match self {
            TransportRequest::Udp { rtp_port } => format!(
                "RTP/AVP;unicast;client_port={rtp_port}-{}",
                rtp_port.saturating_add(1)
            ),
            TransportRequest::Multicast => "RTP/AVP;multicast".to_string(),
            TransportRequest::Tcp => "RTP/AVP/TCP;unicast;interleaved=0-1".to_string(),
        }
    }

    /// `udp`, `multicast` or `tcp`.
    pub fn name(self) -> &'static str {
        match self {
            TransportRequest::Udp { .. } => "udp",
            TransportRequest::Multicast => "multicast",
            TransportRequest::Tcp => "tcp",
        }
    }
}

/// The transport the server chose, from its SETUP answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// RTP to `client_rtp_port` (RTCP to the port above), from the server's `server_port`.
    Udp {
        client_rtp_port: u16,
        server_rtp_port: Option<u16>,
        /// `source=`, if the server named where the media comes from.
        source: Option<IpAddr>,
    },
    /// RTP to `group:rtp_port`, RTCP to `group:rtp_port+1`.
    Multicast {
        group: IpAddr,
        rtp_port: u16,
        ttl: Option<u8>,
        source: Option<IpAddr>,
    },
    /// `$` frames on the RTSP connection.
    Interleaved { rtp_channel: u8, rtcp_channel: u8 },
}

/// What SETUP established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupReply {
    /// The `Session` id sent with every later request.
    pub session: String,
    /// The session timeout (the `Session` header's, else 60 s).
    pub timeout: Duration,
    pub transport: Transport,
    /// `ssrc=` of the Transport header, if given.
    pub ssrc: Option<Ssrc>,
    /// The Transport header as the server wrote it.
    pub transport_header: String,
}

/// The answer to DESCRIBE.
#[derive(Clone, Debug)]
pub struct Described {
    pub sdp: SessionDescription,
    /// The base URL of the controls (Content-Base, Content-Location, or the request URL).
    pub base: Url,
    /// The SDP as received.
    pub text: String,
}

impl Described {
    /// The URL to SETUP media `index` with.
    pub fn media_url(&self, index: usize) -> Result<Url, RtspClientError> {
        let m = self
            .sdp
            .media
            .get(index)
            .ok_or_else(|| RtspClientError::Protocol {
                url: display_url(&self.base),
                problem: format!(
                    "the SDP has {} media descriptions, no media #{index}",
                    self.sdp.media.len()
                ),
            })?;
        resolve_control(&self.base, m.control.as_deref()).map_err(|problem| {
            RtspClientError::Protocol {
                url: display_url(&self.base),
                problem,
            }
        })
    }

    /// The URL of the whole session, for PLAY, keep-alives and TEARDOWN: the session-level
    /// `a=control`, resolved, or the base.
    pub fn aggregate_url(&self) -> Url {
        resolve_control(&self.base, self.sdp.control.as_deref())
            .unwrap_or_else(|_| self.base.clone())
    }
}

/// Resolves an SDP `a=control` against `base` (see the [module documentation](self)).
pub fn resolve_control(base: &Url, control: Option<&str>) -> Result<Url, String> {
    let c = control.map(str::trim).unwrap_or("");
    if c.is_empty() || c == "*" {
        return Ok(base.clone());
    }
    let bad =
        |e: <Url as std::str::FromStr>::Err| format!("a=control:{c} does not make a URL: {e}");
    if has_scheme(c) {
        return Url::parse(c).map_err(bad);
    }
    if c.starts_with('/') {
        return base.join(c).map_err(bad);
    }
    let mut s = base.as_str().to_string();
    if !s.ends_with('/') {
        s.push('/');
    }
    s.push_str(c);
    Url::parse(&s).map_err(bad)
}

fn has_scheme(s: &str) -> bool {
    match s.split_once(':') {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && s.contains("://")
        }
        None => false,
    }
}

/// What went wrong, with the URL, what happened and what to do.
#[derive(Debug, thiserror::Error)]
pub enum RtspClientError {
    #[error("bad RTSP URL '{url}': {problem}; expected rtsp://HOST[:PORT]/PATH, e.g. rtsp://127.0.0.1:8554/live")]
    BadUrl { url: String, problem: String },
    #[error(
        "{url}: cannot connect to {addr}: {source}. Is the server running, and is the port right?"
    )]
    Connect {
        url: String,
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("{url}: {during}: {source}")]
    Io {
        url: String,
        during: String,
        #[source]
        source: io::Error,
    },
    #[error("{url}: no answer to {method} within {} s; the server may be overloaded or not an RTSP server", .waited.as_secs_f64())]
    Timeout {
        url: String,
        method: String,
        waited: Duration,
    },
    #[error("{url}: the server closed the connection {during}")]
    Closed { url: String, during: String },
    #[error("{url}: server answered {code} {reason} to {method}{}. {hint}", detail_suffix(.detail))]
    Status {
        url: String,
        method: String,
        code: u16,
        reason: String,
        /// A `Location`, `Unsupported` or similar header that explains it.
        detail: Option<String>,
        hint: &'static str,
    },
    #[error("{url}: {problem}")]
    Protocol { url: String, problem: String },
    #[error("{url}: the SDP of DESCRIBE: {source}")]
    Sdp {
        url: String,
        #[source]
        source: Box<SdpError>,
    },
}

fn detail_suffix(d: &Option<String>) -> String {
    d.as_ref().map(|d| format!(" ({d})")).unwrap_or_default()
}

impl RtspClientError {
    /// The RTSP status code, if the server answered with an error.
    pub fn status(&self) -> Option<u16> {
        match self {
            RtspClientError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }
}

fn hint(code: u16) -> &'static str {
    match code {
        401 | 407 => "The server asks for a user name and password: give them in the URL (rtsp://USER:PASSWORD@HOST/PATH); if you did, they are wrong",
        403 => "The server refuses this client; check its access rules",
        404 => "Check the path of the URL: the server has no such mount",
        405 | 501 => "The server does not support this request",
        453 => "The server has no bandwidth left for another session; try later or ask for less",
        454 => "The session has expired on the server; start again",
        455 => "The server is not in a state to do this now",
        459 => "The server wants SETUP on the aggregate URL",
        460 => "The server only does aggregate control of this session",
        461 => "The server does not offer this transport; try --rtsp-transport udp, tcp or multicast",
        500..=599 => "The server failed; see its log",
        300..=399 => "The server redirects; use the URL it gives",
        _ => "See RFC 2326 §11 for what the code means",
    }
}

/// The URL as shown in messages: without credentials.
fn display_url(u: &Url) -> String {
    let mut u = u.clone();
    let _ = u.set_password(None);
    let _ = u.set_username("");
    u.to_string()
}

/// A bound, connected RTSP 1.0 client.
pub struct RtspClient {
    url: Url,
    shown: String,
    cfg: RtspClientConfig,
    stream: ClientStream,
    /// Bytes read and not yet taken; `rpos` is where the next message starts.
    rbuf: Vec<u8>,
    rpos: usize,
    cseq: u32,
    session: Option<String>,
    timeout: Duration,
    /// Whether keep-alives use GET_PARAMETER (else OPTIONS).
    get_parameter: bool,
    /// The aggregate URL of the session (for PLAY, keep-alives and TEARDOWN).
    aggregate: Option<Url>,
    /// CSeq of a keep-alive sent without waiting for its answer.
    pending_keep_alive: Option<u32>,
    /// The URL's user name and password, and the answer to the server's challenge once it
    /// has made one.
    credentials: Option<(String, String)>,
    auth: Option<metronome_session::rtsp::auth_client::ClientAuth>,
    torn_down: bool,
}

/// One message from the server.
enum Frame {
    Response(Response<Vec<u8>>),
    /// An interleaved frame: channel, and where its payload is in `rbuf`.
    Data(u8, std::ops::Range<usize>),
    /// A request from the server (RFC 2326 allows ANNOUNCE, SET_PARAMETER...): ignored.
    Request,
}

mod client;
mod parse;
mod source;
#[cfg(test)]
mod tests;
mod tls;

use tls::ClientStream;

pub use source::InterleavedSource;
