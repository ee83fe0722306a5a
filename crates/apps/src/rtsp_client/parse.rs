//! Reading what the server sends: the sans-IO protocol (`metronome_session::rtsp::client`,
//! `TransportSpec`) bound to this client's limits, and header look-ups on `rtsp-types` responses.

use super::*;

pub(super) use metronome_session::rtsp::client::Split;
use metronome_session::rtsp::client::{self as protocol, ClientLimits};
pub(super) use metronome_session::rtsp::TransportSpec;

/// What this client reads at most: see [`MAX_HEAD_BYTES`] and [`MAX_BODY_BYTES`].
const LIMITS: ClientLimits = ClientLimits {
    head_bytes: MAX_HEAD_BYTES,
    body_bytes: MAX_BODY_BYTES,
};

/// Finds the next whole message at the start of `b` (the sans-IO framing, with our limits).
pub(super) fn split_frame(b: &[u8]) -> Result<Option<Split>, String> {
    protocol::split_frame(b, LIMITS)
}

/// `Session: ID[;timeout=N]` → (id, timeout), [`DEFAULT_SESSION_TIMEOUT`] when absent.
pub(super) fn parse_session(v: &str) -> Option<(String, Duration)> {
    protocol::parse_session(v, DEFAULT_SESSION_TIMEOUT)
}

/// The transport a server's SETUP answer chose (the first alternative of its header), read
/// as the server reads a client's.
pub(super) fn parse_transport(v: &str) -> TransportSpec {
    TransportSpec::first(v)
}

pub(super) fn header<'a>(r: &'a Response<Vec<u8>>, name: &HeaderName) -> Option<&'a str> {
    r.header(name).map(|v| v.as_str())
}

pub(super) fn cseq_of(r: &Response<Vec<u8>>) -> Option<u32> {
    header(r, &headers::CSEQ).and_then(|v| v.trim().parse().ok())
}

/// Takes the user name and password out of `url` (they never go in a request line): both,
/// percent-decoded, when it has a user name.
pub(super) fn credentials_of(url: &mut Url) -> Option<(String, String)> {
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let user = decode(url.username());
    let password = decode(url.password().unwrap_or(""));
    let _ = url.set_password(None);
    let _ = url.set_username("");
    (!user.is_empty()).then_some((user, password))
}
