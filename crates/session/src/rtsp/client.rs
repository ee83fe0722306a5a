//! The client side of RTSP 1.0, sans-IO: how the bytes a server sends split into `$` frames and
//! responses (with the limits a client keeps), and the `Session` header of a response. The
//! `Transport` header is [`super::TransportSpec`], the same representation the server reads.
//! The driver (`metronome_apps::rtsp_client`) owns the socket.

use std::time::Duration;

/// How the next bytes of the stream split.
#[derive(Debug, PartialEq, Eq)]
pub enum Split {
    /// CR/LF between messages.
    Skip(usize),
    /// `$`, channel, length: a frame of `4 + len` bytes (RFC 2326 §10.12).
    Data {
        /// The interleaved channel (the second byte).
        channel: u8,
        /// Payload bytes after the 4-byte `$` header (the 16-bit big-endian length).
        len: usize,
    },
    /// A text message (head and body) of this many bytes.
    Message(usize),
}

/// What a client accepts at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    /// The longest response head (status line, headers and the empty line), bytes.
    pub head_bytes: usize,
    /// The longest response body (`Content-Length`), bytes.
    pub body_bytes: usize,
}

/// Finds the next whole message at the start of `b`: `Ok(None)` if more bytes are needed, or
/// what is wrong with it in words.
pub fn split_frame(b: &[u8], limits: ClientLimits) -> Result<Option<Split>, String> {
    let blank = b.iter().take_while(|&&c| c == b'\r' || c == b'\n').count();
    if blank > 0 {
        return Ok(Some(Split::Skip(blank)));
    }
    match b.first() {
        None => return Ok(None),
        Some(b'$') => {
            if b.len() < 4 {
                return Ok(None);
            }
            let len = u16::from_be_bytes([b[2], b[3]]) as usize;
            return Ok((b.len() >= 4 + len).then_some(Split::Data { channel: b[1], len }));
        }
        Some(_) => {}
    }
    let too_long = || {
        format!(
            "a response head longer than {} KiB",
            limits.head_bytes >> 10
        )
    };
    let Some(end) = b.windows(4).position(|w| w == b"\r\n\r\n") else {
        if b.len() > limits.head_bytes {
            return Err(too_long());
        }
        return Ok(None);
    };
    let head = end + 4;
    if head > limits.head_bytes {
        return Err(too_long());
    }
    let mut body = 0usize;
    for line in b[..end].split(|&c| c == b'\n').skip(1) {
        let line = String::from_utf8_lossy(line);
        if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                body = value
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| format!("a Content-Length of '{}'", value.trim()))?;
            }
        }
    }
    if body > limits.body_bytes {
        return Err(format!(
            "a {body}-byte body, more than the {} KiB accepted,",
            limits.body_bytes >> 10
        ));
    }
    Ok((b.len() >= head + body).then_some(Split::Message(head + body)))
}

/// `Session: ID[;timeout=N]` (RFC 2326 §12.37) → (id, timeout), `default_timeout` when absent;
/// a timeout is kept within 1 s..24 h.
pub fn parse_session(v: &str, default_timeout: Duration) -> Option<(String, Duration)> {
    let mut parts = v.split(';');
    let id = parts.next()?.trim();
    if id.is_empty() {
        return None;
    }
    let mut timeout = default_timeout;
    for p in parts {
        if let Some((k, v)) = p.split_once('=') {
            if k.trim().eq_ignore_ascii_case("timeout") {
                if let Ok(s) = v.trim().parse::<u64>() {
                    timeout = Duration::from_secs(s.clamp(1, 24 * 3600));
                }
            }
        }
    }
    Some((id.to_string(), timeout))
}
