//! The RTSP 1.0 server state machine (RFC 2326 §10, Appendix A.2), shared by all connections.
//!
//! A session is created by a successful SETUP (Ready), PLAY makes it Playing, PAUSE brings it
//! back to Ready; without a Session header a request is in the Init state. Sessions belong to
//! the connection that created them and end by TEARDOWN, by timeout (RFC 2326 §12.37: no
//! request and no [`RtspServer::touch`] for `session_timeout`) or when that connection closes;
//! `Backend::teardown` is called exactly once for each, whatever ended it.
//!
//! Choices where RFC 2326 leaves room:
//! - One track per mount, so one SETUP per session. A second SETUP into a session is refused
//!   with 455 (§10.4 lets a server refuse to change a session's transport); the client does
//!   TEARDOWN and SETUP again. A SETUP for another mount into a session is 459.
//! - PLAY or PAUSE without a Session header is 455 (the Init state); TEARDOWN without one is 200
//!   (Appendix A: TEARDOWN is valid in Init and changes nothing).
//! - OPTIONS and DESCRIBE with an unknown Session header ignore it; other methods answer 454.
//! - With users configured ([`RtspConfig::auth`]), every request whose URL names a mount that
//!   is not public needs credentials (`server/authorize.rs`), OPTIONS excepted; a session
//!   belongs to the user who set it up.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use metronome_time::Timestamp;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rtsp_types::headers::{self, CSeq, HeaderName};
use rtsp_types::{Method, Request, Response, StatusCode, Version};

use super::auth::Authenticator;
use super::request;
use super::{Backend, ConnId, Delivery, FrameError, PlayInfo, Refusal, SessionId};

mod authorize;
mod methods;

/// The methods this server implements, for `Public` (OPTIONS) and `Allow` (405).
pub const PUBLIC_METHODS: &str =
    "OPTIONS, DESCRIBE, SETUP, PLAY, PAUSE, TEARDOWN, GET_PARAMETER, SET_PARAMETER";

/// The header that carries the human-readable reason of an error response (the status line
/// keeps the standard reason phrase).
pub const REASON_HEADER: &str = "X-Metronome-Reason";

/// Limits, identity and access rules of an [`RtspServer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtspConfig {
    /// A session with no request and no `touch` for this long is torn down (RFC 2326 §12.37).
    pub session_timeout: Duration,
    /// More sessions than this: SETUP gets 503.
    pub max_sessions: usize,
    /// More sessions than this from one client address: SETUP gets 503 (one address cannot
    /// take every session).
    pub max_sessions_per_address: usize,
    /// The `Server` header.
    pub server_name: String,
    /// The key of the session-id generator (ChaCha20). Session ids are what stands between a
    /// client and another's session, so the driver fills this from the operating system's
    /// entropy; a fixed value replays a test.
    pub seed: [u8; 32],
    /// Users and what they may play; `None`: anyone plays anything.
    pub auth: Option<Authenticator>,
    /// The driver's connections are TLS (RTSPS): Basic credentials are accepted.
    pub secure: bool,
}

impl Default for RtspConfig {
    fn default() -> Self {
        RtspConfig {
            session_timeout: Duration::from_secs(60),
            max_sessions: 256,
            max_sessions_per_address: 64,
            server_name: "metronome".to_owned(),
            seed: [0; 32],
            auth: None,
            secure: false,
        }
    }
}

/// Appendix A.2 states of a session that exists (Init is "no session").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// Set up, not sending.
    Ready,
    /// Sending.
    Playing,
}

/// A session as the driver sees it (status pages, interleaved delivery).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session's id, as its Session header carries it.
    pub id: SessionId,
    /// The connection that owns it: interleaved RTP goes there.
    pub conn: ConnId,
    /// The client's address on the owning connection.
    pub peer: SocketAddr,
    /// The mount it plays.
    pub mount: String,
    /// The URL the client used in SETUP (the RTP-Info url).
    pub url: String,
    /// Ready or Playing.
    pub state: SessionState,
    /// How its media goes to the client, as the backend set it up.
    pub delivery: Delivery,
    /// What the last PLAY started.
    pub last_play: Option<PlayInfo>,
    /// Where PAUSE stopped (files resume there).
    pub paused_at: Option<Duration>,
    /// When it times out unless it hears from the client.
    pub expires: Timestamp,
    /// The user who set it up (`None` without authentication, or on a public mount).
    pub user: Option<String>,
}

#[derive(Debug)]
struct Session {
    conn: ConnId,
    peer: SocketAddr,
    mount: String,
    url: String,
    duration: Option<Duration>,
    delivery: Delivery,
    state: SessionState,
    last_play: Option<PlayInfo>,
    paused_at: Option<Duration>,
    last_seen: Timestamp,
    user: Option<String>,
}

/// The RTSP server: every session of every connection. One per server, behind the driver's lock.
#[derive(Debug)]
pub struct RtspServer {
    cfg: RtspConfig,
    server: String,
    rng: ChaCha20Rng,
    sessions: BTreeMap<SessionId, Session>,
    /// Wrong credentials per connection since its last right ones (entries go with it).
    auth_failures: BTreeMap<ConnId, u32>,
}

/// A response being built.
struct Reply {
    status: u16,
    headers: Vec<(HeaderName, String)>,
    body: Vec<u8>,
    session: Option<SessionId>,
    reason: Option<String>,
}

impl Reply {
    fn ok() -> Self {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: Vec::new(),
            session: None,
            reason: None,
        }
    }
    fn error(status: u16, reason: impl Into<String>) -> Self {
        Reply {
            status,
            reason: Some(reason.into()),
            ..Reply::ok()
        }
    }
    fn refusal(r: Refusal) -> Self {
        let status = match r {
            Refusal::NotFound => 404,
            Refusal::NotEnoughBandwidth(_) => 453,
            Refusal::UnsupportedTransport(_) => 461,
            Refusal::InvalidRange(_) => 457,
            Refusal::Unavailable(_) => 503,
            Refusal::Internal(_) => 500,
        };
        Reply::error(status, r.to_string())
    }
    fn header(mut self, name: HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
    fn session(mut self, id: SessionId) -> Self {
        self.session = Some(id);
        self
    }
}

/// What a request's Session header names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lookup {
    /// No Session header: the Init state.
    Absent,
    /// A session of this connection (now refreshed).
    Found(SessionId),
    /// Unknown, malformed or another connection's: 454.
    NotFound,
}

/// One request with where it came from.
struct Ctx<'a> {
    conn: ConnId,
    peer: SocketAddr,
    local: SocketAddr,
    req: &'a Request<Vec<u8>>,
}

impl RtspServer {
    /// A server with no session yet; session ids come from `cfg.seed`.
    pub fn new(cfg: RtspConfig) -> Self {
        RtspServer {
            server: request::header_text(&cfg.server_name),
            rng: ChaCha20Rng::from_seed(cfg.seed),
            sessions: BTreeMap::new(),
            auth_failures: BTreeMap::new(),
            cfg,
        }
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &RtspConfig {
        &self.cfg
    }

    /// Replaces who may play what (a reloaded config). Sessions already set up stay, each
    /// with the user who set it up; their next requests are checked against the new users.
    pub fn set_auth(&mut self, auth: Option<Authenticator>) {
        self.cfg.auth = auth;
    }

    /// Answers one request from connection `conn` (`peer` is the client's address, `local` the
    /// server's on that connection). Every response has CSeq (when the request had a valid one,
    /// else it is 400) and Server; errors carry their reason in `X-Metronome-Reason`.
    pub fn handle_request(
        &mut self,
        now: Timestamp,
        conn: ConnId,
        peer: SocketAddr,
        local: SocketAddr,
        req: &Request<Vec<u8>>,
        backend: &mut dyn Backend,
    ) -> Response<Vec<u8>> {
        // RFC 2326 §12.17: CSeq is required in every request and echoed in its response.
        let Ok(Some(cseq)) = req.typed_header::<CSeq>() else {
            return self.respond(Reply::error(400, "missing or invalid CSeq"), None);
        };
        let reply = if req.version() != Version::V1_0 {
            Reply::error(505, "only RTSP/1.0 is served")
        } else {
            let ctx = Ctx {
                conn,
                peer,
                local,
                req,
            };
            self.dispatch(now, &ctx, backend)
        };
        self.respond(reply, Some(*cseq))
    }

    /// The response to a framing error: its status, CSeq if it could be read, the reason.
    /// One that closes the connection says so (`Connection: close`, RFC 2326 §12.10).
    pub fn error_response(&self, err: &FrameError) -> Response<Vec<u8>> {
        let mut reply = Reply::error(err.status(), err.to_string());
        if err.closes_connection() {
            reply
                .headers
                .push((headers::CONNECTION, "close".to_string()));
        }
        self.respond(reply, err.cseq())
    }

    /// Tears down every session that has been silent for `session_timeout` at `now`.
    pub fn handle_timeout(&mut self, now: Timestamp, backend: &mut dyn Backend) -> Vec<SessionId> {
        let timeout = self.cfg.session_timeout;
        self.end_sessions(backend, |s| now >= s.last_seen + timeout)
    }

    /// When the next session times out, if any.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let last = self.sessions.values().map(|s| s.last_seen).min()?;
        Some(last + self.cfg.session_timeout)
    }

    /// The client of `session` is alive (its RTCP receiver report arrived).
    pub fn touch(&mut self, session: SessionId, now: Timestamp) {
        if let Some(s) = self.sessions.get_mut(&session) {
            s.last_seen = s.last_seen.max(now);
        }
    }

    /// The connection closed: every session it created is torn down.
    pub fn connection_closed(&mut self, conn: ConnId, backend: &mut dyn Backend) -> Vec<SessionId> {
        self.auth_failures.remove(&conn);
        self.end_sessions(backend, |s| s.conn == conn)
    }

    /// Number of sessions.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// One session, for the driver.
    pub fn session_info(&self, id: SessionId) -> Option<SessionInfo> {
        self.sessions.get(&id).map(|s| self.info(id, s))
    }

    /// Every session, in id order.
    pub fn session_infos(&self) -> impl Iterator<Item = SessionInfo> + '_ {
        self.sessions.iter().map(|(id, s)| self.info(*id, s))
    }

    fn info(&self, id: SessionId, s: &Session) -> SessionInfo {
        SessionInfo {
            id,
            conn: s.conn,
            peer: s.peer,
            mount: s.mount.clone(),
            url: s.url.clone(),
            state: s.state,
            delivery: s.delivery,
            last_play: s.last_play,
            paused_at: s.paused_at,
            expires: s.last_seen + self.cfg.session_timeout,
            user: s.user.clone(),
        }
    }

    fn end_sessions(
        &mut self,
        backend: &mut dyn Backend,
        ends: impl Fn(&Session) -> bool,
    ) -> Vec<SessionId> {
        let ended: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| ends(s))
            .map(|(id, _)| *id)
            .collect();
        for id in &ended {
            self.sessions.remove(id);
            backend.teardown(*id);
        }
        ended
    }

    fn dispatch(&mut self, now: Timestamp, ctx: &Ctx<'_>, backend: &mut dyn Backend) -> Reply {
        let req = ctx.req;
        // RFC 2326 §12.32: no option tags are supported, so any Require gets 551 + Unsupported.
        if let Some(required) = req.header(&headers::REQUIRE) {
            return Reply::error(551, "no option tags are supported").header(
                headers::UNSUPPORTED,
                request::header_text(required.as_str()),
            );
        }
        let session = self.lookup(now, ctx);
        let user = match self.authorize(now, ctx, session) {
            Ok(user) => user,
            Err(reply) => return reply,
        };
        match req.method() {
            Method::Options => {
                let reply = Reply::ok().header(headers::PUBLIC, PUBLIC_METHODS);
                match session {
                    Lookup::Found(id) => reply.session(id),
                    _ => reply,
                }
            }
            Method::Describe => self.describe(ctx, backend),
            Method::Setup => self.setup(now, ctx, session, user, backend),
            Method::Play => self.play(ctx, session, backend),
            Method::Pause => self.pause(ctx, session, backend),
            Method::Teardown => self.teardown(session, backend),
            Method::GetParameter | Method::SetParameter => match session {
                Lookup::NotFound => not_found(),
                // No parameters are known (RFC 2326 §10.8, §10.9); an empty body is a keep-alive.
                _ if !request::is_blank(req.body()) => {
                    Reply::error(451, "no parameters are supported")
                }
                Lookup::Found(id) => Reply::ok().session(id),
                Lookup::Absent => Reply::ok(),
            },
            Method::Announce | Method::Record | Method::Redirect | Method::PlayNotify => {
                Reply::error(405, "this server only plays").header(headers::ALLOW, PUBLIC_METHODS)
            }
            Method::Extension(_) => Reply::error(501, "method not implemented"),
        }
    }

    /// Resolves the Session header; a session of this connection is refreshed.
    fn lookup(&mut self, now: Timestamp, ctx: &Ctx<'_>) -> Lookup {
        let Some(value) = ctx.req.header(&headers::SESSION) else {
            return Lookup::Absent;
        };
        match request::session_id(value.as_str()) {
            Some(id) => match self.sessions.get_mut(&id) {
                Some(s) if s.conn == ctx.conn => {
                    s.last_seen = s.last_seen.max(now);
                    Lookup::Found(id)
                }
                _ => Lookup::NotFound,
            },
            None => Lookup::NotFound,
        }
    }

    /// A fresh random 128-bit id (RFC 2326 §3.4: session identifiers should be hard to guess).
    fn new_id(&mut self) -> SessionId {
        loop {
            let id = (u128::from(self.rng.next_u64()) << 64) | u128::from(self.rng.next_u64());
            let id = SessionId(id);
            if !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }

    fn respond(&self, reply: Reply, cseq: Option<u32>) -> Response<Vec<u8>> {
        let mut b = Response::builder(Version::V1_0, StatusCode::from(reply.status))
            .reason_phrase(request::reason_phrase(reply.status));
        if let Some(cseq) = cseq {
            b = b.header(headers::CSEQ, cseq.to_string());
        }
        b = b.header(headers::SERVER, self.server.clone());
        if let Some(id) = reply.session {
            let secs = self.cfg.session_timeout.as_secs().max(1);
            b = b.header(headers::SESSION, format!("{id};timeout={secs}"));
        }
        for (name, value) in reply.headers {
            b = b.header(name, value);
        }
        if let (Some(reason), Ok(name)) = (reply.reason, HeaderName::from_static_str(REASON_HEADER))
        {
            b = b.header(name, request::header_text(&reason));
        }
        b.build(reply.body)
    }
}

fn not_found() -> Reply {
    Reply::error(454, "no such session on this connection")
}
