//! What a controller (the HTTP API, `control/`) may ask of the stream server, and why the server
//! refuses: the trait the server implements (`server/control.rs`) and the error every refusal
//! is. The HTTP status and `error` kind of each refusal are part of it, so that every
//! controller answers the same.

use metronome_config::stream::StreamSpec;
use std::fmt;

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
    /// No such stream (404, `"not-found"`).
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
            ControlError::NotFound(_) => "not-found",
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
