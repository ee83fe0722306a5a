//! The local HTTP/JSON control API of `metronome serve`: list, inspect, add and remove streams
//! while the server runs.
//!
//! Every request but `GET /health` needs the operator's bearer token, and no web page can
//! drive it: `Host` and `Origin` are checked, bodies must be JSON, and streams added here go
//! only to the destination allow-list (`access.rs`).
//!
//! | route | method | answer |
//! |---|---|---|
//! | `/` | GET | 200, an index of the routes |
//! | `/health` | GET | 200 `{"ok":true}` |
//! | `/streams` | GET | 200, the streams ([`StreamControl::list`]) |
//! | `/streams` | POST | 201 + `Location`, a JSON [`StreamSpec`] body ([`StreamControl::add`]) |
//! | `/streams/NAME` | GET | 200 or 404 ([`StreamControl::get`]) |
//! | `/streams/NAME` | DELETE | 200 ([`StreamControl::remove`]) |
//!
//! | `/metrics` | GET | 200, the figures in Prometheus's text format |
//!
//! Errors are JSON: `{"error": "<kind>", "message": "<what happened and what to do>"}`; 401
//! `unauthorized` (no token, or another), 403 `forbidden_host`, `forbidden_origin` or
//! `forbidden_destination`.
//!
//! The server is one event loop (mio) for every connection and four workers that run the
//! routes (`server.rs`); the framing is sans-IO (`http.rs`). At [`ControlLimits::max_connections`]
//! (or the per-address cap) a connection that holds its place without using it is closed to make
//! room, else a client is answered 503. Every request and write has a deadline, every buffer a
//! bound (see [`ControlLimits`]), and no input makes it panic.

mod access;
mod http;
pub use http::parse_request;
pub mod metrics;
mod router;
mod server;
#[cfg(test)]
mod tests;

pub use access::{load_or_create_token, ControlAccess, MIN_TOKEN_CHARS};
pub use server::ControlServer;

use crate::streams::StreamSpec;
use std::fmt;
use std::time::Duration;

/// What the control API drives: the set of running streams. Implementations should be quick
/// (they run on one of four workers, with the client waiting) and must not panic (a panic is answered
/// 500, but state may be left half-changed).
pub trait StreamControl: Send + Sync + 'static {
    /// All streams, as one JSON value (answered to `GET /streams`).
    fn list(&self) -> serde_json::Value;
    /// One stream's status, or `None` if there is no stream of that name.
    fn get(&self, name: &str) -> Option<serde_json::Value>;
    /// Starts a stream. The spec has passed [`StreamSpec::validate`]. Returns the new stream's
    /// status (answered with 201).
    fn add(&self, spec: StreamSpec) -> Result<serde_json::Value, ControlError>;
    /// Stops and removes a stream; returns its final status.
    fn remove(&self, name: &str) -> Result<serde_json::Value, ControlError>;
    /// Turns a running stream's rate knob to `bitrate_bps` (MPEG-TS bit/s); returns its status.
    fn set_rate(&self, name: &str, bitrate_bps: u64) -> Result<serde_json::Value, ControlError>;
    /// The figures in Prometheus's text format (answered to `GET /metrics`).
    fn metrics(&self) -> String {
        String::new()
    }
}

/// Why a control request failed; each variant maps to an HTTP status and an `error` kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlError {
    /// The request is wrong (400, `"invalid"`).
    Invalid(String),
    /// No such stream (404, `"not_found"`).
    NotFound(String),
    /// A stream of that name already exists (409, `"exists"`).
    Exists(String),
    /// Admission control refused the stream: it would not meet its deadlines (409, `"refused"`).
    Refused(String),
    /// The server failed (500, `"internal"`).
    Internal(String),
}

impl ControlError {
    /// The HTTP status code this error is answered with.
    pub fn status(&self) -> u16 {
        match self {
            ControlError::Invalid(_) => 400,
            ControlError::NotFound(_) => 404,
            ControlError::Exists(_) | ControlError::Refused(_) => 409,
            ControlError::Internal(_) => 500,
        }
    }

    /// The `error` field of the JSON answer.
    pub fn kind(&self) -> &'static str {
        match self {
            ControlError::Invalid(_) => "invalid",
            ControlError::NotFound(_) => "not_found",
            ControlError::Exists(_) => "exists",
            ControlError::Refused(_) => "refused",
            ControlError::Internal(_) => "internal",
        }
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        match self {
            ControlError::Invalid(m)
            | ControlError::NotFound(m)
            | ControlError::Exists(m)
            | ControlError::Refused(m)
            | ControlError::Internal(m) => m,
        }
    }
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind(), self.message())
    }
}

impl std::error::Error for ControlError {}

/// The most headers one request may carry.
pub const MAX_HEADERS: usize = 32;

/// Bounds on what one client can make the server hold or wait for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlLimits {
    /// Connections at once. At the cap, one that holds its place without using it (trickling
    /// a request, silent, idle between requests) is closed to make room; else a newcomer is
    /// answered 503 and closed.
    pub max_connections: usize,
    /// Connections from one address at once (the same rule beyond): one client cannot take
    /// every place from the others.
    pub max_per_address: usize,
    /// Request line plus headers, bytes (431 beyond).
    pub max_head_bytes: usize,
    /// Request body, bytes, as declared by `Content-Length` (413 beyond).
    pub max_body_bytes: usize,
    /// How long a whole request (first byte to last) may take to arrive; also how long a new
    /// connection may stay silent before its first request.
    pub read_timeout: Duration,
    /// How long writing one response may block.
    pub write_timeout: Duration,
    /// How long a kept-alive connection may wait, idle, for its next request.
    pub idle_timeout: Duration,
    /// Requests served on one connection before it is closed.
    pub max_requests_per_connection: usize,
}

impl Default for ControlLimits {
    /// 16 connections, 8 from one address, 8 KiB heads, 64 KiB bodies, 5 s to read or write
    /// (a whole request), 10 s idle, 100 requests per connection.
    fn default() -> Self {
        ControlLimits {
            max_connections: 16,
            max_per_address: 8,
            max_head_bytes: 8 * 1024,
            max_body_bytes: 64 * 1024,
            read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(10),
            max_requests_per_connection: 100,
        }
    }
}
