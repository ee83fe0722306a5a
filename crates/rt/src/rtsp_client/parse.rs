//! Reading what the server sends: `$` frames versus responses, Session and Transport headers.

use super::*;

/// How the next bytes of the stream split.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Split {
    /// CR/LF between messages.
    Skip(usize),
    /// `$`, channel, length: a frame of `4 + len` bytes.
    Data { channel: u8, len: usize },
    /// A text message (head and body) of this many bytes.
    Message(usize),
}

/// Finds the next whole message at the start of `b`: `Ok(None)` if more bytes are needed.
pub(super) fn split_frame(b: &[u8]) -> Result<Option<Split>, String> {
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
    let Some(end) = b.windows(4).position(|w| w == b"\r\n\r\n") else {
        if b.len() > MAX_HEAD_BYTES {
            return Err(format!(
                "a response head longer than {} KiB",
                MAX_HEAD_BYTES >> 10
            ));
        }
        return Ok(None);
    };
    let head = end + 4;
    if head > MAX_HEAD_BYTES {
        return Err(format!(
            "a response head longer than {} KiB",
            MAX_HEAD_BYTES >> 10
        ));
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
    if body > MAX_BODY_BYTES {
        return Err(format!(
            "a {body}-byte body, more than the {} KiB accepted,",
            MAX_BODY_BYTES >> 10
        ));
    }
    Ok((b.len() >= head + body).then_some(Split::Message(head + body)))
}

pub(super) fn header<'a>(r: &'a Response<Vec<u8>>, name: &HeaderName) -> Option<&'a str> {
    r.header(name).map(|v| v.as_str())
}

pub(super) fn cseq_of(r: &Response<Vec<u8>>) -> Option<u32> {
    header(r, &headers::CSEQ).and_then(|v| v.trim().parse().ok())
}

/// `Session: ID[;timeout=N]` → (id, timeout).
pub(super) fn parse_session(v: &str) -> Option<(String, Duration)> {
    let mut parts = v.split(';');
    let id = parts.next()?.trim();
    if id.is_empty() {
        return None;
    }
    let mut timeout = DEFAULT_SESSION_TIMEOUT;
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

/// The parameters of a Transport answer that matter here.
///
/// Parsed here rather than with `rtsp_types::headers::Transports`, whose parser panics on some
/// malformed `dest_addr` values: a server's header must not crash the receiver.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct TransportParams {
    pub(super) multicast: bool,
    pub(super) destination: Option<IpAddr>,
    pub(super) source: Option<IpAddr>,
    pub(super) client_port: Option<(u16, Option<u16>)>,
    pub(super) server_port: Option<(u16, Option<u16>)>,
    pub(super) port: Option<(u16, Option<u16>)>,
    pub(super) ttl: Option<u8>,
    pub(super) interleaved: Option<(u8, Option<u8>)>,
    pub(super) ssrc: Option<u32>,
}

pub(super) fn parse_transport(v: &str) -> TransportParams {
    // The first transport of a list is the one the server chose.
    let first = v.split(',').next().unwrap_or("");
    let mut t = TransportParams::default();
    fn range<T: std::str::FromStr>(v: &str) -> Option<(T, Option<T>)> {
        let (a, b) = match v.split_once('-') {
            Some((a, b)) => (a, Some(b)),
            None => (v, None),
        };
        Some((
            a.trim().parse().ok()?,
            b.and_then(|b| b.trim().parse().ok()),
        ))
    }
    for p in first.split(';').skip(1) {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        let v = v.trim().trim_matches('"');
        match k.trim().to_ascii_lowercase().as_str() {
            "multicast" => t.multicast = true,
            "destination" => t.destination = v.parse().ok(),
            "source" => t.source = v.parse().ok(),
            "client_port" => t.client_port = range(v),
            "server_port" => t.server_port = range(v),
            "port" => t.port = range(v),
            "ttl" => t.ttl = v.parse().ok(),
            "interleaved" => t.interleaved = range(v),
            "ssrc" => t.ssrc = u32::from_str_radix(v, 16).ok(),
            _ => {}
        }
    }
    t
}
