//! HTTP/1.1 framing for the control API, sans-IO: the bytes a connection has sent so far
//! ([`Inbox`]), framed into requests (heads parsed with `httparse`), and responses as bytes.
//! Everything is bounded: an inbox holds at most a head and a body of the limits' sizes, and
//! every error is an answer. The event loop (`server.rs`) does the reading, writing and timing.

use super::{ControlLimits, MAX_HEADERS};

/// A complete request.
#[derive(Debug)]
pub(crate) struct Request {
    /// The method, as sent (`GET`, `POST`, ...).
    pub method: String,
    /// The path, without the query string.
    pub path: String,
    /// Whether the client wants the connection kept open.
    pub keep_alive: bool,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The `Host` header, if any.
    pub host: Option<String>,
    /// The `Origin` header, if any (browsers send it).
    pub origin: Option<String>,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// Whether the request declared a `Content-Length` (a POST without one gets 411).
    pub has_length: bool,
    /// The body (at most `max_body_bytes`).
    pub body: Vec<u8>,
}

/// A response: JSON, or text where a route says so (`/metrics`).
#[derive(Debug)]
pub(crate) struct Response {
    pub status: u16,
    /// The one `Content-Type` it is sent with.
    pub content_type: &'static str,
    /// Headers besides `Content-Type`, `Content-Length`, `Connection` and `Cache-Control`.
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON response.
    pub(crate) fn json(status: u16, value: &impl serde::Serialize) -> Self {
        // Floats with six decimals at most, as every JSON document of Metronome's.
        let body = metronome_time::json::rounded(value).and_then(|v| serde_json::to_vec(&v));
        let mut body = body.unwrap_or_else(|_| b"{}".to_vec());
        body.push(b'\n');
        Response {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body,
        }
    }

    /// A plain-text response of `content_type`.
    pub(crate) fn text(status: u16, content_type: &'static str, body: String) -> Self {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into_bytes(),
        }
    }

    /// `{"error": kind, "message": message}`.
    pub(crate) fn error(status: u16, kind: &str, message: impl Into<String>) -> Self {
        let message: String = message.into();
        let error = kind.to_string();
        Self::json(status, &super::openapi::ErrorBody { error, message })
    }

    /// Adds a header.
    pub(crate) fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// The whole response, head and body, as bytes.
    pub(crate) fn to_bytes(&self, keep_alive: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(160 + self.body.len());
        let reason = reason(self.status);
        let connection = if keep_alive { "keep-alive" } else { "close" };
        out.extend_from_slice(format!("HTTP/1.1 {} {reason}\r\n", self.status).as_bytes());
        out.extend_from_slice(format!("Content-Type: {}\r\n", self.content_type).as_bytes());
        out.extend_from_slice(format!("Content-Length: {}\r\n", self.body.len()).as_bytes());
        out.extend_from_slice(format!("Connection: {connection}\r\n").as_bytes());
        out.extend_from_slice(b"Cache-Control: no-store\r\n");
        for (name, value) in &self.headers {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// What an [`Inbox`] holds now.
#[derive(Debug)]
pub(crate) enum Taken {
    /// A complete request.
    Request(Request),
    /// The request cannot be served: answer this, then close.
    Reply(Response),
    /// The head asks for `100 Continue` before it sends its body: send it, then wait.
    Continue,
    /// Not a whole request yet.
    Incomplete,
}

/// What the head says about framing and the connection.
struct Head {
    method: String,
    path: String,
    http10: bool,
    content_length: Option<usize>,
    chunked: bool,
    close: bool,
    keep_alive: bool,
    content_type: Option<String>,
    host: Option<String>,
    origin: Option<String>,
    authorization: Option<String>,
    expect_continue: bool,
}

/// The bytes a connection has sent and not yet made into requests. It grows with what arrives,
/// up to one head and one body of the limits' sizes, and shrinks back between requests.
#[derive(Default)]
pub(crate) struct Inbox {
    buf: Vec<u8>,
    continue_sent: bool,
}

impl Inbox {
    /// How many more bytes may be read now (0 only while a request is ready to be taken).
    pub(super) fn room(&self, limits: &ControlLimits) -> usize {
        limits
            .max_head_bytes
            .saturating_add(limits.max_body_bytes)
            .saturating_sub(self.buf.len())
    }

    pub(super) fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Whether nothing of a next request has arrived.
    pub(super) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The next request, if it is all there.
    pub(super) fn take(&mut self, limits: &ControlLimits) -> Taken {
        let (head_len, head) = match parse_head(&self.buf, limits) {
            Ok(Some(parsed)) => parsed,
            Ok(None) => return Taken::Incomplete,
            Err(reply) => return Taken::Reply(reply),
        };
        let length = match framing(&head, limits) {
            Ok(length) => length,
            Err(reply) => return Taken::Reply(reply),
        };
        let end = head_len + length;
        if self.buf.len() < end {
            if head.expect_continue && !self.continue_sent {
                self.continue_sent = true;
                return Taken::Continue;
            }
            return Taken::Incomplete;
        }
        let body = self.buf[head_len..end].to_vec();
        self.buf.drain(..end);
        if self.buf.is_empty() {
            // An idle connection keeps no buffer.
            self.buf = Vec::new();
        }
        self.continue_sent = false;
        let keep_alive = !head.close && (!head.http10 || head.keep_alive);
        Taken::Request(Request {
            method: head.method,
            path: head.path,
            keep_alive,
            content_type: head.content_type,
            host: head.host,
            origin: head.origin,
            authorization: head.authorization,
            has_length: head.content_length.is_some(),
            body,
        })
    }
}

/// The interim answer to `Expect: 100-continue`.
pub(crate) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Parses the head at the start of `buf`: `Ok(None)` if it is incomplete, else its length and
/// what it says; an answer if it is unacceptable.
fn parse_head(buf: &[u8], limits: &ControlLimits) -> Result<Option<(usize, Head)>, Response> {
    let max = limits.max_head_bytes;
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let too_large = || {
        Response::error(
            431,
            "header-too-large",
            format!("the request line and headers exceed {max} bytes; send a shorter request"),
        )
    };
    match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n > max => Err(too_large()),
        Ok(httparse::Status::Complete(n)) => read_head(&req).map(|h| Some((n, h))),
        Ok(httparse::Status::Partial) if buf.len() >= max => Err(too_large()),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(Response::error(
            431,
            "header-too-large",
            format!("the request has more than {MAX_HEADERS} headers; send fewer"),
        )),
        Err(e) => Err(Response::error(
            400,
            "bad-request",
            format!("malformed HTTP request ({e}); send HTTP/1.1, e.g. 'GET /streams HTTP/1.1'"),
        )),
    }
}

/// The body length a head declares, if it is acceptable.
fn framing(head: &Head, limits: &ControlLimits) -> Result<usize, Response> {
    if head.chunked {
        return Err(Response::error(
            411,
            "length-required",
            "chunked request bodies are not supported; send the body with a Content-Length",
        ));
    }
    let max = limits.max_body_bytes;
    match head.content_length {
        Some(n) if n > max => Err(Response::error(
            413,
            "body-too-large",
            format!("the request body is {n} bytes; at most {max} are accepted"),
        )),
        Some(n) => Ok(n),
        None => Ok(0),
    }
}

/// What the control API makes of the bytes at the start of `buf`, without a connection (for
/// the fuzzer, and for whatever reads requests from a buffer): `Ok(None)` if more are needed,
/// `Ok(Some(n))` if a whole request of `n` bytes is there, `Err(status)` if it is answered with
/// that error status.
pub fn parse_request(buf: &[u8], limits: &ControlLimits) -> Result<Option<usize>, u16> {
    let (head_len, head) = match parse_head(buf, limits) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => return Ok(None),
        Err(r) => return Err(r.status),
    };
    let length = framing(&head, limits).map_err(|r| r.status)?;
    let end = head_len.saturating_add(length);
    Ok((buf.len() >= end).then_some(end))
}

pub(crate) fn timeout() -> Response {
    Response::error(
        408,
        "timeout",
        "the request did not arrive in time; send the whole request at once",
    )
}

/// Extracts what the server needs from a parsed head.
fn read_head(req: &httparse::Request<'_, '_>) -> Result<Head, Response> {
    let bad = |m: String| Response::error(400, "bad-request", m);
    let method = req.method.unwrap_or("").to_string();
    let target = req.path.unwrap_or("");
    let path = target.split(['?', '#']).next().unwrap_or("").to_string();
    let mut head = Head {
        method,
        path,
        http10: req.version == Some(0),
        content_length: None,
        chunked: false,
        close: false,
        keep_alive: false,
        content_type: None,
        host: None,
        origin: None,
        authorization: None,
        expect_continue: false,
    };
    for h in req.headers.iter() {
        let value = String::from_utf8_lossy(h.value);
        let value = value.trim();
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let n = value
                .parse::<usize>()
                .ok()
                .filter(|_| value.bytes().all(|b| b.is_ascii_digit()));
            match (n, head.content_length) {
                (None, _) => {
                    return Err(bad(format!(
                        "Content-Length '{}' is not a byte count",
                        value.escape_debug()
                    )))
                }
                (Some(n), Some(seen)) if n != seen => {
                    return Err(bad("conflicting Content-Length headers".to_string()))
                }
                (Some(n), _) => head.content_length = Some(n),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked = true;
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                head.close |= token.eq_ignore_ascii_case("close");
                head.keep_alive |= token.eq_ignore_ascii_case("keep-alive");
            }
        } else if name.eq_ignore_ascii_case("content-type") {
            head.content_type = Some(value.to_string());
        } else if let Some(slot) = [
            ("host", &mut head.host),
            ("origin", &mut head.origin),
            ("authorization", &mut head.authorization),
        ]
        .into_iter()
        .find_map(|(n, slot)| name.eq_ignore_ascii_case(n).then_some(slot))
        {
            // One of each: two Hosts (RFC 9112 §3.2) or two tokens make the request ambiguous.
            if slot.replace(value.to_string()).is_some() {
                return Err(bad(format!("more than one {name} header; send one")));
            }
        } else if name.eq_ignore_ascii_case("expect") {
            head.expect_continue = value.eq_ignore_ascii_case("100-continue");
        }
    }
    Ok(head)
}

/// How much of a client-supplied path or name is echoed back in a message.
const ECHO_CHARS: usize = 100;

/// A client-supplied string, shortened for a message.
pub(crate) fn echo(s: &str) -> String {
    let mut out: String = s.chars().take(ECHO_CHARS).collect();
    if out.len() < s.len() {
        out.push_str("...");
    }
    out
}
