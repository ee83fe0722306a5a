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
//! | `/openapi.json` | GET | 200, the API described in OpenAPI 3.0 (`openapi.rs`) |
//! | `/health` | GET | 200 `{"ok":true}` |
//! | `/streams` | GET | 200, the streams ([`StreamControl::list`]) |
//! | `/streams` | POST | 201 + `Location`, a JSON [`StreamSpec`](crate::streams::StreamSpec) body ([`StreamControl::add`]) |
//! | `/streams/NAME` | GET | 200 or 404 ([`StreamControl::get`]) |
//! | `/streams/NAME` | PATCH | 200, `{"bitrate": "2mbit"}` ([`StreamControl::set_rate`]) |
//! | `/streams/NAME` | DELETE | 200 ([`StreamControl::remove`]) |
//! | `/metrics` | GET | 200, the figures in Prometheus's text format |
//!
//! Errors are JSON: `{"error": "<kind>", "message": "<what happened and what to do>"}`; 401
//! `unauthorized` (no token, or another), 403 `forbidden-host`, `forbidden-origin` or
//! `forbidden-destination`.
//!
//! The server is one event loop (mio) for every connection and four workers that run the
//! routes (`server.rs`); the framing is sans-IO (`http.rs`). At [`ControlLimits::max_connections`]
//! (or the per-address cap) a connection that holds its place without using it is closed to make
//! room, else a client is answered 503. Every request and write has a deadline, every buffer a
//! bound (see [`ControlLimits`]), and no input makes it panic.

mod access;
mod http;
pub use http::parse_request;
mod openapi;
pub use openapi::{document as openapi, plain_descriptions};
mod router;
mod server;
#[cfg(test)]
mod tests;

pub use access::{load_or_create_token, ControlAccess, MIN_TOKEN_CHARS};
pub use server::ControlServer;
// What the API asks of the stream server, and why the server refuses: the server's own
// vocabulary (`streams::control`), named here too because the API answers in it.
pub use crate::streams::control::{ControlError, StreamControl};

use std::time::Duration;

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
