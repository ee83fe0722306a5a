//! Reading an SDP: what ffmpeg, GStreamer, live555 and cameras write, into a
//! [`SessionDescription`], never panicking, every error saying what is wrong and where.

use super::{
    Connection, MediaDescription, Retransmission, SessionDescription, Source, MAX_SDP_BYTES,
};
use crate::Ssrc;
use std::net::{IpAddr, Ipv4Addr};

impl SessionDescription {
    /// Reads an SDP. Input over [`MAX_SDP_BYTES`] is refused; any input returns (never panics).
    pub fn parse(text: &str) -> Result<SessionDescription, SdpError> {
        if text.len() > MAX_SDP_BYTES {
            return Err(SdpError::TooLarge { len: text.len() });
        }
        let s = sdp_types::Session::parse(text.as_bytes()).map_err(|e| SdpError::Syntax {
            detail: e.to_string(),
        })?;
        let origin = s
            .origin
            .try_parse_unicast_ip_address()
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let session_id = s.origin.sess_id.trim().parse::<u64>().unwrap_or(0);
        let connection = s
            .connection
            .as_ref()
            .map(|c| connection(c, "session-level"))
            .transpose()?;
        // The line numbers of the m= lines, for messages (sdp-types keeps none).
        let m_lines: Vec<usize> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.starts_with("m="))
            .map(|(i, _)| i + 1)
            .collect();
        let media = s
            .medias
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let at = MediaAt {
                    line: m_lines.get(i).copied().unwrap_or(0),
                    text: format!("m={} {} {} {}", m.media, m.port, m.proto, m.fmt),
                };
                media(m, &at)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SessionDescription {
            origin,
            session_id,
            name: s.session_name.trim().to_string(),
            connection,
            control: attr(&s.attributes, "control"),
            range: attr(&s.attributes, "range"),
            tool: attr(&s.attributes, "tool"),
            media,
        })
    }
}

/// Where a media description is, for messages: "line 7 (m=video 5004 RTP/AVP 96)".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaAt {
    /// 1-based line number of the `m=` line.
    pub line: usize,
    /// The `m=` line.
    pub text: String,
}

impl std::fmt::Display for MediaAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {} ({})", self.line, self.text)
    }
}

/// What is wrong in an SDP.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SdpError {
    /// The text is over [`MAX_SDP_BYTES`]; nothing was parsed.
    #[error("the SDP is {len} bytes, more than the {} KiB accepted; is this really a session description?", MAX_SDP_BYTES >> 10)]
    TooLarge {
        /// Length of the text given, bytes.
        len: usize,
    },
    /// `sdp-types` could not read the text as SDP at all (missing `v=`, a line that is not
    /// `key=value`, a required line missing or malformed).
    #[error(
        "not a valid SDP: {detail} (RFC 8866: it starts with v=0 and has one key=value per line)"
    )]
    Syntax {
        /// `sdp-types`' description of the problem.
        detail: String,
    },
    /// A `c=` line whose address does not parse, or whose address family contradicts its
    /// `IP4`/`IP6` tag.
    #[error("{where_} c=IN {addrtype} {value}: {problem}; expected an IP address, with /TTL for IPv4 multicast (c=IN IP4 239.1.2.3/16)")]
    BadConnection {
        /// Which `c=`: `session-level`, or the media's position as [`MediaAt`] text.
        where_: String,
        /// The address type as written (`IP4`, `IP6`, or something else).
        addrtype: String,
        /// The connection address as written (`239.1.2.3/16`).
        value: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A media whose transport is not `RTP/...` (for example `UDP` or `TCP/RTP/AVP`).
    #[error("{at}: transport '{proto}' is not RTP; Metronome reads RTP/AVP media (RTP/AVPF, RTP/SAVP, RTP/AVP/TCP too)")]
    NotRtp {
        /// Which media.
        at: MediaAt,
        /// The transport (proto) field as written.
        proto: String,
    },
    /// The first format of an `m=` line is not a payload type from 0 to 127.
    #[error("{at}: payload type '{fmt}' is not a number from 0 to 127")]
    BadPayloadType {
        /// Which media.
        at: MediaAt,
        /// The format as written.
        fmt: String,
    },
    /// The payload type is not in the RFC 3551 static table and no `a=rtpmap` names its
    /// encoding and clock rate.
    #[error("{at}: dynamic payload type {payload_type} has no a=rtpmap; add one, e.g. a=rtpmap:{payload_type} H264/90000")]
    NoRtpmap {
        /// Which media.
        at: MediaAt,
        /// The payload type lacking a mapping.
        payload_type: u8,
    },
    /// The payload type's `a=rtpmap` lacks an encoding name or a positive whole clock rate.
    #[error("{at}: a=rtpmap:{value}: {problem}; expected a=rtpmap:PT ENCODING/CLOCKRATE, e.g. a=rtpmap:33 MP2T/90000")]
    BadRtpmap {
        /// Which media.
        at: MediaAt,
        /// The attribute's value as written (`96 H264/90000`).
        value: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// The first value of attribute `name` (case-insensitive), trimmed; `None` if absent or empty.
fn attr(attrs: &[sdp_types::Attribute], name: &str) -> Option<String> {
    attrs
        .iter()
        .find(|a| a.attribute.eq_ignore_ascii_case(name))
        .and_then(|a| a.value.as_deref())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

fn connection(c: &sdp_types::Connection, where_: &str) -> Result<Connection, SdpError> {
    let bad = |problem: String| SdpError::BadConnection {
        where_: where_.to_string(),
        addrtype: c.addrtype.as_str().to_string(),
        value: c.connection_address.clone(),
        problem,
    };
    let a = c.try_address().map_err(|e| bad(e.to_string()))?;
    match (c.addrtype.as_str(), a.ip) {
        ("IP4", IpAddr::V6(_)) => return Err(bad("an IPv6 address marked IP4".into())),
        ("IP6", IpAddr::V4(_)) => return Err(bad("an IPv4 address marked IP6".into())),
        _ => {}
    }
    Ok(Connection {
        addr: a.ip,
        ttl: a.ttl,
    })
}

/// Encoding and clock rate of the static payload types (RFC 3551 §6, Tables 4 and 5).
pub fn static_payload_type(pt: u8) -> Option<(&'static str, u32)> {
    Some(match pt {
        0 => ("PCMU", 8000),
        3 => ("GSM", 8000),
        4 => ("G723", 8000),
        5 => ("DVI4", 8000),
        6 => ("DVI4", 16000),
        7 => ("LPC", 8000),
        8 => ("PCMA", 8000),
        9 => ("G722", 8000),
        10 | 11 => ("L16", 44100),
        12 => ("QCELP", 8000),
        13 => ("CN", 8000),
        14 => ("MPA", 90000),
        15 => ("G728", 8000),
        16 => ("DVI4", 11025),
        17 => ("DVI4", 22050),
        18 => ("G729", 8000),
        25 => ("CelB", 90000),
        26 => ("JPEG", 90000),
        28 => ("nv", 90000),
        31 => ("H261", 90000),
        32 => ("MPV", 90000),
        33 => ("MP2T", 90000),
        34 => ("H263", 90000),
        _ => return None,
    })
}

fn media(m: &sdp_types::Media, at: &MediaAt) -> Result<MediaDescription, SdpError> {
    if !m.proto.to_ascii_uppercase().starts_with("RTP/") {
        return Err(SdpError::NotRtp {
            at: at.clone(),
            proto: m.proto.clone(),
        });
    }
    let fmt = m.fmt.split_whitespace().next().unwrap_or("");
    let payload_type = fmt
        .parse::<u8>()
        .ok()
        .filter(|pt| *pt <= 127)
        .ok_or_else(|| SdpError::BadPayloadType {
            at: at.clone(),
            fmt: fmt.to_string(),
        })?;
    // The a=rtpmap and a=fmtp lines of this payload type ("PT rest").
    let of_pt = |name: &'static str| {
        values(m, name).find_map(|v| {
            let v = v.trim();
            let (pt, rest) = v.split_once([' ', '\t']).unwrap_or((v, ""));
            (pt.parse::<u8>().ok() == Some(payload_type)).then(|| (v, rest.trim()))
        })
    };
    let (encoding, clock_rate) = match of_pt("rtpmap") {
        Some((value, rest)) => rtpmap(rest).map_err(|problem| SdpError::BadRtpmap {
            at: at.clone(),
            value: value.to_string(),
            problem,
        })?,
        None => match static_payload_type(payload_type) {
            Some((e, r)) => (e.to_string(), r),
            None => {
                return Err(SdpError::NoRtpmap {
                    at: at.clone(),
                    payload_type,
                })
            }
        },
    };
    let fmtp = of_pt("fmtp")
        .map(|(_, rest)| rest.to_string())
        .filter(|f| !f.is_empty());
    let connection = m
        .connections
        .first()
        .map(|c| connection(c, &at.to_string()))
        .transpose()?;
    let bitrate_kbps = m
        .bandwidths
        .iter()
        .find(|b| b.bwtype.eq_ignore_ascii_case("AS"))
        .map(|b| b.bandwidth);
    // `a=extmap:ID[/DIRECTION] URI[ ATTRIBUTES]`; ids 1-14 are the one-byte form's.
    let extmap = values(m, "extmap").find_map(|v| {
        let mut words = v.split_whitespace();
        let id = words.next()?.split('/').next()?.parse::<u8>().ok()?;
        Some((id, words.next()?.to_string()))
    });
    let (source, rtx_ssrc) = sources(m);
    let retransmission = retransmission(m, payload_type).map(|r| Retransmission {
        ssrc: rtx_ssrc,
        ..r
    });
    Ok(MediaDescription {
        media: m.media.clone(),
        port: m.port,
        payload_type: crate::PayloadType(payload_type),
        encoding,
        clock_rate,
        fmtp,
        control: attr(&m.attributes, "control"),
        connection,
        bitrate_kbps,
        extmap,
        crypto: attr(&m.attributes, "crypto"),
        retransmission,
        source,
    })
}

/// The media's source and its retransmission's SSRC (RFC 5576): the first
/// `a=ssrc-group:FID MEDIA RTX` names both; without one, the first `a=ssrc` line with a
/// `cname` is the media's. The media's source is kept only with its `cname` (RFC 5576 §6.1
/// requires one), the retransmission's SSRC only beside it (its own `a=ssrc` line is not
/// needed). Lines whose SSRCs are not plain decimal numbers below 2^32 are passed over.
fn sources(m: &sdp_types::Media) -> (Option<Source>, Option<Ssrc>) {
    let fid = values(m, "ssrc-group").find_map(|v| {
        let mut words = v.split_whitespace();
        (words.next()? == "FID").then_some(())?;
        let mut id = || ssrc_id(words.next()?);
        Some((id()?, id()))
    });
    // `ID cname:NAME` → (ID, NAME); other source attributes are not kept.
    let mut cnames = values(m, "ssrc").filter_map(|v| {
        let (id, attr) = v.trim().split_once([' ', '\t'])?;
        let name = attr.trim().strip_prefix("cname:")?;
        Some((ssrc_id(id)?, name.to_string()))
    });
    let source = match fid {
        Some((media, _)) => cnames.find(|(id, _)| *id == media),
        None => cnames.next(),
    }
    .map(|(ssrc, cname)| Source { ssrc, cname });
    let rtx = fid.and_then(|(_, rtx)| rtx).filter(|_| source.is_some());
    (source, rtx)
}

/// The `m=` line's RFC 4588 retransmission payload type for `media_pt`: a dynamic one (96 to
/// 127, not the media's) whose `a=rtpmap` says `rtx` and whose `a=fmtp` says `apt=MEDIA_PT`
/// (GStreamer, WebRTC); an `rtx-time` that is not a number is left out.
fn retransmission(m: &sdp_types::Media, media_pt: u8) -> Option<Retransmission> {
    // `PT rest` → (PT, rest).
    let by_pt = |name: &'static str| {
        values(m, name).filter_map(|v| {
            let (pt, rest) = v.trim().split_once([' ', '\t'])?;
            Some((pt.parse::<u8>().ok()?, rest.trim()))
        })
    };
    let listed = |pt: u8| m.fmt.split_whitespace().any(|f| f.parse() == Ok(pt));
    // A dynamic payload type other than the media's (a retransmission on the media's own
    // would make every packet of it look like one).
    let dynamic = |pt: u8| pt != media_pt && crate::PayloadType(pt).is_dynamic();
    by_pt("rtpmap")
        .filter(|(pt, rest)| {
            dynamic(*pt)
                && listed(*pt)
                && rest
                    .split('/')
                    .next()
                    .is_some_and(|e| e.eq_ignore_ascii_case("rtx"))
        })
        .find_map(|(pt, _)| {
            let params = by_pt("fmtp").find(|(p, _)| *p == pt)?.1;
            let param = |key: &str| {
                params.split(';').find_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    k.trim().eq_ignore_ascii_case(key).then(|| v.trim())
                })
            };
            (param("apt")?.parse::<u8>().ok()? == media_pt).then(|| Retransmission {
                payload_type: crate::PayloadType(pt),
                rtx_time_ms: param("rtx-time").and_then(|t| t.parse().ok()),
                ssrc: None,
                tllei: tllei(m, media_pt),
            })
        })
}

/// Whether media `media_pt` of `m` announces RFC 6642's TLLEI (`a=rtcp-fb:PT nack tllei`, or
/// `*` for every payload type).
fn tllei(m: &sdp_types::Media, media_pt: u8) -> bool {
    values(m, "rtcp-fb").any(|v| {
        let mut words = v.split_whitespace();
        let pt = words.next();
        (pt == Some("*") || pt.and_then(|p| p.parse::<u8>().ok()) == Some(media_pt))
            && words.next().is_some_and(|w| w.eq_ignore_ascii_case("nack"))
            && words
                .next()
                .is_some_and(|w| w.eq_ignore_ascii_case("tllei"))
            && words.next().is_none()
    })
}

/// The values of the media's `a=NAME:VALUE` lines, in order (names case-insensitive).
fn values<'a>(m: &'a sdp_types::Media, name: &'static str) -> impl Iterator<Item = &'a str> {
    m.attributes
        .iter()
        .filter(move |a| a.attribute.eq_ignore_ascii_case(name))
        .filter_map(|a| a.value.as_deref())
}

/// RFC 5576's `ssrc-id`: a decimal number from 0 to 2^32 - 1, digits only.
fn ssrc_id(text: &str) -> Option<Ssrc> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| text.parse::<u32>().ok().map(Ssrc)).flatten()
}

/// `ENCODING/CLOCKRATE[/PARAMS]` → (encoding, clock rate).
fn rtpmap(rest: &str) -> Result<(String, u32), String> {
    let mut parts = rest.splitn(3, '/');
    let encoding = parts.next().unwrap_or("").trim();
    if encoding.is_empty() {
        return Err("no encoding name".to_string());
    }
    let Some(rate) = parts.next() else {
        return Err(format!("no clock rate after '{encoding}'"));
    };
    let rate = rate.trim();
    match rate.parse::<u32>() {
        Ok(r) if r > 0 => Ok((encoding.to_string(), r)),
        _ => Err(format!(
            "clock rate '{rate}' is not a positive whole number"
        )),
    }
}
