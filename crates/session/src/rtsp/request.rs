//! Reading the parts of a request the server needs (Request-URI, Session, Range, Accept) and
//! writing the values of its responses. Hand-written and panic-free on any input.

use std::time::Duration;

use rtsp_types::Url;

use super::SessionId;

/// What a Request-URI names: a mount, and maybe its one track.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Target {
    pub mount: String,
    /// `trackID=N`, `streamid=N` or `stream=N` as the last path segment.
    pub track: Option<u32>,
}

/// `rtsp://host[:port]/MOUNT[/]` or `rtsp://host[:port]/MOUNT/trackID=N` (also `streamid=N`, and
/// `stream=N` as VLC's SAT>IP client writes it).
/// `None` if the path names no mount, or its track segment has no number.
pub(super) fn target(url: &Url) -> Option<Target> {
    let path = url.path().trim_matches('/');
    let (rest, last) = match path.rsplit_once('/') {
        Some((rest, last)) => (rest, last),
        None => ("", path),
    };
    let track = last.split_once('=').and_then(|(key, n)| {
        let key = key.to_ascii_lowercase();
        (key == "trackid" || key == "streamid" || key == "stream").then_some(n)
    });
    let (mount, track) = match track {
        Some(n) => (rest.trim_end_matches('/'), Some(n.parse().ok()?)),
        None => (path, None),
    };
    (!mount.is_empty()).then(|| Target {
        mount: mount.to_owned(),
        track,
    })
}

/// The presentation URL with a trailing slash, for Content-Base (RFC 2326 §12.11): relative
/// control URLs in the SDP (`trackID=0`) resolve against it.
pub(super) fn content_base(url: &Url, mount: &str) -> String {
    let mut base = url.clone();
    base.set_query(None);
    base.set_fragment(None);
    base.set_path(&format!("/{mount}/"));
    base.to_string()
}

/// The id in a `Session: ID[;timeout=N]` header (RFC 2326 §12.37), as this server writes ids.
pub(super) fn session_id(value: &str) -> Option<SessionId> {
    let id = value.split(';').next()?.trim();
    if id.is_empty() || id.len() > 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u128::from_str_radix(id, 16).ok().map(SessionId)
}

/// A PLAY `Range` header (RFC 2326 §12.29, §3.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RangeStart {
    /// `npt=X-[Y]`: start at X.
    At(Duration),
    /// `npt=now-`, `npt=-Y` or `npt`: no start position.
    Unspecified,
    /// `clock=`, `smpte=` or anything else: not supported here.
    OtherUnit,
    /// Not a valid npt range.
    Invalid,
}

/// The start of a `Range` value; the end (Y) is not used: play runs to the end of the file.
pub(super) fn range_start(value: &str) -> RangeStart {
    // `;time=` (when to start) may follow; it is ignored.
    let value = value.split(';').next().unwrap_or("").trim();
    let Some(rest) = value.strip_prefix("npt") else {
        return RangeStart::OtherUnit;
    };
    let rest = rest.trim_start();
    if rest.is_empty() {
        return RangeStart::Unspecified;
    }
    let Some((start, end)) = rest
        .strip_prefix('=')
        .and_then(|r| r.split_once('-'))
        .map(|(s, e)| (s.trim(), e.trim()))
    else {
        return RangeStart::Invalid;
    };
    if !end.is_empty() && end != "now" && npt_time(end).is_none() {
        return RangeStart::Invalid;
    }
    match start {
        "" | "now" if !(start.is_empty() && end.is_empty()) => RangeStart::Unspecified,
        "" | "now" => RangeStart::Invalid,
        s => npt_time(s).map_or(RangeStart::Invalid, RangeStart::At),
    }
}

/// `npt-sec` (`123.45`) or `npt-hhmmss` (`1:02:03.5`), RFC 2326 §3.6.
fn npt_time(s: &str) -> Option<Duration> {
    let (whole, frac) = match s.split_once('.') {
        Some((w, f)) => (w, f),
        None => (s, ""),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !(frac.is_empty() || digits(frac)) {
        return None;
    }
    let fields: Vec<&str> = whole.split(':').collect();
    let secs: u64 = match fields[..] {
        [sec] if digits(sec) => sec.parse().ok()?,
        [h, m, sec] if digits(h) && digits(m) && digits(sec) => {
            let (h, m, sec): (u64, u64, u64) =
                (h.parse().ok()?, m.parse().ok()?, sec.parse().ok()?);
            if m > 59 || sec > 59 {
                return None;
            }
            h.checked_mul(3600)?.checked_add(m * 60 + sec)?
        }
        _ => return None,
    };
    let nanos = frac
        .bytes()
        .take(9)
        .chain(std::iter::repeat(b'0'))
        .take(9)
        .fold(0u32, |acc, b| acc * 10 + u32::from(b - b'0'));
    Some(Duration::new(secs, nanos))
}

/// `npt` seconds with millisecond precision, as the Range of a PLAY response.
pub(super) fn npt(d: Duration) -> String {
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

/// Whether an `Accept` header (RFC 2326 §12.1) allows `application/sdp`.
pub(super) fn accepts_sdp(value: &str) -> bool {
    value.split(',').any(|range| {
        let mut params = range.split(';');
        let media = params.next().unwrap_or("").trim().to_ascii_lowercase();
        let refused = params.any(|p| {
            p.split_once('=').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("q")
                    && v.trim().parse::<f32>().is_ok_and(|q| q <= 0.0)
            })
        });
        !refused && matches!(media.as_str(), "application/sdp" | "application/*" | "*/*")
    })
}

/// Whether a GET_PARAMETER/SET_PARAMETER body names nothing (only blank lines).
pub(super) fn is_blank(body: &[u8]) -> bool {
    body.iter().all(|b| b.is_ascii_whitespace())
}

/// The reason phrases of RFC 2326 §7.1.1.
pub(super) fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        413 => "Request Entity Too Large",
        414 => "Request-URI Too Large",
        451 => "Parameter Not Understood",
        453 => "Not Enough Bandwidth",
        454 => "Session Not Found",
        455 => "Method Not Valid in This State",
        457 => "Invalid Range",
        459 => "Aggregate Operation Not Allowed",
        461 => "Unsupported Transport",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "RTSP Version Not Supported",
        551 => "Option not supported",
        _ => "Error",
    }
}

/// Text safe in a header value: no control characters (so no CR/LF), at most 400 characters.
pub(super) fn header_text(s: &str) -> String {
    s.chars()
        .take(400)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}
