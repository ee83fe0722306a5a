//! SDP session descriptions (RFC 8866) for RTP sessions, built on `sdp-types`.
//!
//! Only what Metronome needs of a session is kept: the origin, the name, the session-level
//! connection, `a=control`, `a=range` and `a=tool`, and for each RTP media its port, its first
//! payload type with the encoding and clock rate that `a=rtpmap` (or the RFC 3551 static table)
//! gives it, `a=fmtp`, `a=control`, a media-level `c=` and `b=AS:`.
//!
//! - [`SessionDescription::to_sdp`] writes RFC 8866 text with CRLF line ends, in the order the
//!   RFC gives (`v o s c t a` then `m c b a` for each media), as ffprobe, VLC and GStreamer's
//!   `sdpdemux`/`rtspsrc` read it.
//! - [`SessionDescription::parse`] reads what ffmpeg, GStreamer, live555 and cameras write. It
//!   refuses input over [`MAX_SDP_BYTES`] and never panics; every error says what is wrong and
//!   where.
//!
//! ```
//! use metronome_wire::sdp::{Connection, MediaDescription, SessionDescription};
//! let mut s = SessionDescription::new("127.0.0.1".parse().unwrap(), 1, "test");
//! s.connection = Some(Connection::new("239.255.0.1".parse().unwrap(), Some(1)));
//! s.media.push(MediaDescription::mp2t(5004));
//! let text = s.to_sdp();
//! assert!(text.contains("m=video 5004 RTP/AVP 33\r\n"));
//! assert_eq!(SessionDescription::parse(&text).unwrap(), s);
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Largest SDP accepted by [`SessionDescription::parse`]: 64 KiB.
pub const MAX_SDP_BYTES: usize = 64 << 10;

/// RTP payload type of MPEG-TS (RFC 3551 §6, RFC 2250).
pub const MP2T_PAYLOAD_TYPE: u8 = 33;
/// RTP clock rate of MPEG-TS and video (RFC 2250, RFC 3551).
pub const VIDEO_CLOCK_RATE: u32 = 90_000;

/// A connection address (`c=`): unicast or multicast, with the IPv4 multicast TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Connection {
    pub addr: IpAddr,
    /// IPv4 multicast time-to-live (`c=IN IP4 239.1.2.3/16`). RFC 8866 §5.7 requires one for
    /// IPv4 multicast: [`SessionDescription::to_sdp`] writes `/1` if it is `None`.
    pub ttl: Option<u8>,
}

impl Connection {
    pub fn new(addr: IpAddr, ttl: Option<u8>) -> Connection {
        Connection { addr, ttl }
    }

    /// The unspecified address of `origin`'s family (`0.0.0.0` or `::`), which an RTSP DESCRIBE
    /// answer gives as its connection (RFC 2326 C.1.7: the address comes with SETUP).
    pub fn unspecified_like(origin: IpAddr) -> Connection {
        let addr = match origin {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        Connection { addr, ttl: None }
    }

    pub fn is_multicast(&self) -> bool {
        self.addr.is_multicast()
    }

    fn to_sdp_types(self) -> sdp_types::Connection {
        let ttl = match (self.addr, self.ttl) {
            (IpAddr::V4(a), None) if a.is_multicast() => Some(1),
            (IpAddr::V4(a), ttl) if a.is_multicast() => ttl,
            _ => None,
        };
        sdp_types::Connection::from_ip_addr_ttl(self.addr, ttl)
    }
}

/// One RTP media stream (`m=` and its lines).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaDescription {
    /// `video`, `audio`, `application`, ...
    pub media: String,
    /// 0 in an RTSP DESCRIBE (unicast), the group port for multicast, the RTP port for a plain
    /// RTP session.
    pub port: u16,
    /// The first payload type of the `m=` line (33 for MP2T).
    pub payload_type: u8,
    /// Encoding name from `a=rtpmap` or the static table (`MP2T`).
    pub encoding: String,
    /// RTP clock rate (90000).
    pub clock_rate: u32,
    /// What follows `a=fmtp:PT ` for this payload type.
    pub fmtp: Option<String>,
    /// Media-level `a=control` (`trackID=0`, `stream=0`, or an absolute URL).
    pub control: Option<String>,
    /// Media-level `c=`.
    pub connection: Option<Connection>,
    /// `b=AS:` (application-specific maximum, kbit/s).
    pub bitrate_kbps: Option<u64>,
    /// `a=extmap:ID URI` (RFC 8285 §8): the header extension the packets carry (the first
    /// one named, when reading).
    pub extmap: Option<(u8, String)>,
}

impl MediaDescription {
    /// A media with nothing optional set.
    pub fn new(
        media: impl Into<String>,
        port: u16,
        payload_type: u8,
        encoding: impl Into<String>,
        clock_rate: u32,
    ) -> MediaDescription {
        MediaDescription {
            media: media.into(),
            port,
            payload_type,
            encoding: encoding.into(),
            clock_rate,
            fmtp: None,
            control: None,
            connection: None,
            bitrate_kbps: None,
            extmap: None,
        }
    }

    /// MPEG-TS over RTP (RFC 2250): `m=video PORT RTP/AVP 33`, `a=rtpmap:33 MP2T/90000`.
    pub fn mp2t(port: u16) -> MediaDescription {
        Self::new("video", port, MP2T_PAYLOAD_TYPE, "MP2T", VIDEO_CLOCK_RATE)
    }

    /// Sets `a=control` (for RTSP: `trackID=0`).
    pub fn with_control(mut self, control: impl Into<String>) -> MediaDescription {
        self.control = Some(control.into());
        self
    }

    /// Whether this media is MPEG-TS (`MP2T`, whatever its payload type number).
    pub fn is_mp2t(&self) -> bool {
        self.encoding.eq_ignore_ascii_case("MP2T")
    }

    /// The connection that applies to this media: its own `c=`, else the session's.
    pub fn connection_or<'a>(&'a self, session: &'a SessionDescription) -> Option<&'a Connection> {
        self.connection.as_ref().or(session.connection.as_ref())
    }

    fn to_sdp_types(&self) -> sdp_types::Media {
        let pt = self.payload_type;
        let mut m = sdp_types::Media {
            media: self.media.clone(),
            port: self.port,
            num_ports: None,
            proto: "RTP/AVP".to_string(),
            fmt: pt.to_string(),
            media_title: None,
            connections: self.connection.iter().map(|c| c.to_sdp_types()).collect(),
            bandwidths: self
                .bitrate_kbps
                .iter()
                .map(|&kbps| sdp_types::Bandwidth {
                    bwtype: "AS".to_string(),
                    bandwidth: kbps,
                })
                .collect(),
            key: None,
            attributes: Vec::new(),
        };
        let rtpmap = format!("{pt} {}/{}", self.encoding, self.clock_rate);
        m.add_attribute_with_value("rtpmap", rtpmap);
        if let Some(f) = &self.fmtp {
            m.add_attribute_with_value("fmtp", format!("{pt} {f}"));
        }
        if let Some(c) = &self.control {
            m.add_attribute_with_value("control", c);
        }
        if let Some((id, uri)) = &self.extmap {
            m.add_attribute_with_value("extmap", format!("{id} {uri}"));
        }
        m
    }
}

/// A session description: what Metronome writes for RTSP DESCRIBE and `.sdp` files, and what it
/// reads from them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionDescription {
    /// `o=` unicast address of the originating host. An `o=` whose address is a name rather
    /// than an IP literal (or a missing `o=`) reads as `0.0.0.0`: the origin is informational.
    pub origin: IpAddr,
    /// `o=` session id. One that is not a decimal number below 2^64 reads as 0.
    pub session_id: u64,
    /// `s=`
    pub name: String,
    /// Session-level `c=` (`0.0.0.0` for RTSP unicast).
    pub connection: Option<Connection>,
    /// Session-level `a=control` (`*` for RTSP).
    pub control: Option<String>,
    /// `a=range` (`npt=0-` live, `npt=0-12.5` files).
    pub range: Option<String>,
    /// `a=tool`
    pub tool: Option<String>,
    pub media: Vec<MediaDescription>,
}

/// What `a=tool` says in the descriptions Metronome writes.
pub const TOOL: &str = concat!("metronome ", env!("CARGO_PKG_VERSION"));

impl SessionDescription {
    /// A session with no connection, attribute or media yet.
    pub fn new(origin: IpAddr, session_id: u64, name: impl Into<String>) -> SessionDescription {
        SessionDescription {
            origin,
            session_id,
            name: name.into(),
            connection: None,
            control: None,
            range: None,
            tool: None,
            media: Vec::new(),
        }
    }

    /// The answer to an RTSP DESCRIBE of one MPEG-TS stream: `c=IN IP4 0.0.0.0`,
    /// `a=control:*`, `a=range:RANGE` (`npt=0-` live, `npt=0-12.5` a file) and one
    /// `m=video 0 RTP/AVP 33` with `a=control:trackID=0`.
    pub fn rtsp_mp2t(
        origin: IpAddr,
        session_id: u64,
        name: impl Into<String>,
        range: impl Into<String>,
    ) -> SessionDescription {
        Self::rtsp(origin, session_id, name, range, MediaDescription::mp2t(0))
    }

    /// An RTSP DESCRIBE answer of one track, `media` (port 0, the control `trackID=0`).
    pub fn rtsp(
        origin: IpAddr,
        session_id: u64,
        name: impl Into<String>,
        range: impl Into<String>,
        media: MediaDescription,
    ) -> SessionDescription {
        let mut s = Self::new(origin, session_id, name);
        s.connection = Some(Connection::unspecified_like(origin));
        s.control = Some("*".to_string());
        s.range = Some(range.into());
        s.tool = Some(TOOL.to_string());
        s.media.push(media.with_control("trackID=0"));
        s
    }

    /// A plain RTP session of one MPEG-TS stream sent to `dest` (a unicast receiver or a
    /// multicast group, with its TTL), as a `.sdp` file for ffplay, VLC or GStreamer.
    pub fn rtp_mp2t(
        origin: IpAddr,
        session_id: u64,
        name: impl Into<String>,
        dest: std::net::SocketAddr,
        ttl: Option<u8>,
    ) -> SessionDescription {
        Self::rtp(
            origin,
            session_id,
            name,
            dest,
            ttl,
            MediaDescription::mp2t(0),
        )
    }

    /// A plain RTP session of one stream, `media`, sent to `dest` (a unicast receiver or a
    /// multicast group, with its TTL): the media's port becomes `dest`'s.
    pub fn rtp(
        origin: IpAddr,
        session_id: u64,
        name: impl Into<String>,
        dest: std::net::SocketAddr,
        ttl: Option<u8>,
        media: MediaDescription,
    ) -> SessionDescription {
        let mut s = Self::new(origin, session_id, name);
        s.connection = Some(Connection::new(dest.ip(), ttl));
        s.tool = Some(TOOL.to_string());
        s.media.push(MediaDescription {
            port: dest.port(),
            ..media
        });
        s
    }

    /// RFC 8866 text, CRLF line ends.
    pub fn to_sdp(&self) -> String {
        let o = sdp_types::Origin {
            username: None,
            sess_id: self.session_id.to_string(),
            sess_version: 1,
            nettype: sdp_types::NetType::In,
            addrtype: self.origin.into(),
            unicast_address: self.origin.to_string(),
        };
        // RFC 8866 §5.3: "s= " (one space) when a session has no meaningful name.
        let name = if self.name.trim().is_empty() {
            " ".to_string()
        } else {
            self.name.clone()
        };
        let mut s = sdp_types::Session::new(o, name);
        s.connection = self.connection.map(Connection::to_sdp_types);
        s.add_time(sdp_types::Time::new(0, 0));
        if let Some(t) = &self.tool {
            s.add_attribute_with_value("tool", t);
        }
        if let Some(c) = &self.control {
            s.add_attribute_with_value("control", c);
        }
        if let Some(r) = &self.range {
            s.add_attribute_with_value("range", r);
        }
        s.add_medias(self.media.iter().map(MediaDescription::to_sdp_types));
        let mut out = Vec::with_capacity(512);
        // Writing into a Vec cannot fail.
        let _ = s.write(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

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

impl std::fmt::Display for SessionDescription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_sdp())
    }
}

impl std::str::FromStr for SessionDescription {
    type Err = SdpError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
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
    #[error("the SDP is {len} bytes, more than the {} KiB accepted; is this really a session description?", MAX_SDP_BYTES >> 10)]
    TooLarge { len: usize },
    #[error(
        "not a valid SDP: {detail} (RFC 8866: it starts with v=0 and has one key=value per line)"
    )]
    Syntax { detail: String },
    #[error("{where_} c=IN {addrtype} {value}: {problem}; expected an IP address, with /TTL for IPv4 multicast (c=IN IP4 239.1.2.3/16)")]
    BadConnection {
        where_: String,
        addrtype: String,
        value: String,
        problem: String,
    },
    #[error("{at}: transport '{proto}' is not RTP; Metronome reads RTP/AVP media (RTP/AVPF, RTP/SAVP, RTP/AVP/TCP too)")]
    NotRtp { at: MediaAt, proto: String },
    #[error("{at}: payload type '{fmt}' is not a number from 0 to 127")]
    BadPayloadType { at: MediaAt, fmt: String },
    #[error("{at}: dynamic payload type {payload_type} has no a=rtpmap; add one, e.g. a=rtpmap:{payload_type} H264/90000")]
    NoRtpmap { at: MediaAt, payload_type: u8 },
    #[error("{at}: a=rtpmap:{value}: {problem}; expected a=rtpmap:PT ENCODING/CLOCKRATE, e.g. a=rtpmap:33 MP2T/90000")]
    BadRtpmap {
        at: MediaAt,
        value: String,
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
    let of_pt = |name: &str| {
        m.attributes
            .iter()
            .filter(|a| a.attribute.eq_ignore_ascii_case(name))
            .filter_map(|a| a.value.as_deref())
            .find_map(|v| {
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
    let extmap = m
        .attributes
        .iter()
        .filter(|a| a.attribute.eq_ignore_ascii_case("extmap"))
        .filter_map(|a| a.value.as_deref())
        .find_map(|v| {
            let mut words = v.split_whitespace();
            let id = words.next()?.split('/').next()?.parse::<u8>().ok()?;
            Some((id, words.next()?.to_string()))
        });
    Ok(MediaDescription {
        media: m.media.clone(),
        port: m.port,
        payload_type,
        encoding,
        clock_rate,
        fmtp,
        control: attr(&m.attributes, "control"),
        connection,
        bitrate_kbps,
        extmap,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `ffmpeg -f lavfi -i testsrc -c:v libx264 -f rtp rtp://127.0.0.1:5006 -sdp_file x.sdp`
    /// (ffmpeg 5.1, Debian 12; "LIBAVFORMAT_VERSION" is what that build writes).
    const FFMPEG_H264: &str = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=No Name\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\na=tool:libavformat LIBAVFORMAT_VERSION\r\nm=video 5006 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1\r\n";

    /// The same to `rtp://239.1.2.3:5008?ttl=16`.
    const FFMPEG_MULTICAST: &str = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=No Name\r\nc=IN IP4 239.1.2.3/16\r\nt=0 0\r\na=tool:libavformat LIBAVFORMAT_VERSION\r\nm=video 5008 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1\r\n";

    /// GStreamer 1.22 rtsp-server's DESCRIBE answer for
    /// `videotestsrc ! openh264enc ! h264parse ! mpegtsmux ! rtpmp2tpay pt=33`.
    const GST_RTSP_MP2T: &str = "v=0\r\no=- 15515255537852121363 1 IN IP4 127.0.0.1\r\ns=Session streamed with GStreamer\r\ni=rtsp-server\r\nt=0 0\r\na=tool:GStreamer\r\na=type:broadcast\r\na=control:*\r\na=range:npt=now-\r\nm=video 0 RTP/AVP 33\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:33 MP2T/90000\r\na=control:stream=0\r\na=ts-refclk:local\r\na=mediaclk:sender\r\na=ssrc:3655766253 cname:user2634205943@host-467390c7\r\n";

    /// GStreamer 1.22 rtsp-server's DESCRIBE answer for `... ! rtph264pay pt=96`.
    const GST_RTSP_H264: &str = "v=0\r\no=- 14980620447037535051 1 IN IP4 127.0.0.1\r\ns=Session streamed with GStreamer\r\ni=rtsp-server\r\nt=0 0\r\na=tool:GStreamer\r\na=type:broadcast\r\na=control:*\r\na=range:npt=now-\r\nm=video 0 RTP/AVP 96\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:96 H264/90000\r\na=framerate:30\r\na=fmtp:96 packetization-mode=1;sprop-parameter-sets=Z0LADYyNQKD5APCIRqA=,aM48gA==;profile-level-id=42c00d;level-asymmetry-allowed=1\r\na=control:stream=0\r\na=ts-refclk:local\r\na=mediaclk:sender\r\na=ssrc:3627088133 cname:user3441882376@host-513aa9fc\r\n";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ffmpeg_unicast_h264() {
        let s = SessionDescription::parse(FFMPEG_H264).unwrap();
        assert_eq!(s.origin, ip("127.0.0.1"));
        assert_eq!(s.session_id, 0);
        assert_eq!(s.name, "No Name");
        assert_eq!(s.connection, Some(Connection::new(ip("127.0.0.1"), None)));
        assert_eq!(s.tool.as_deref(), Some("libavformat LIBAVFORMAT_VERSION"));
        assert_eq!(s.control, None);
        assert_eq!(s.media.len(), 1);
        let m = &s.media[0];
        assert_eq!(
            (m.media.as_str(), m.port, m.payload_type),
            ("video", 5006, 96)
        );
        assert_eq!((m.encoding.as_str(), m.clock_rate), ("H264", 90_000));
        assert_eq!(m.fmtp.as_deref(), Some("packetization-mode=1"));
        assert!(!m.is_mp2t());
        assert_eq!(m.connection_or(&s).unwrap().addr, ip("127.0.0.1"));
    }

    #[test]
    fn ffmpeg_multicast_with_ttl() {
        let s = SessionDescription::parse(FFMPEG_MULTICAST).unwrap();
        let c = s.media[0].connection_or(&s).unwrap();
        assert_eq!(*c, Connection::new(ip("239.1.2.3"), Some(16)));
        assert!(c.is_multicast());
        assert_eq!(s.media[0].port, 5008);
        // Written back with its TTL.
        assert!(s.to_sdp().contains("c=IN IP4 239.1.2.3/16\r\n"));
    }

    #[test]
    fn gstreamer_rtsp_describe_mp2t() {
        let s = SessionDescription::parse(GST_RTSP_MP2T).unwrap();
        assert_eq!(s.session_id, 15_515_255_537_852_121_363);
        assert_eq!(s.name, "Session streamed with GStreamer");
        assert_eq!(s.control.as_deref(), Some("*"));
        assert_eq!(s.range.as_deref(), Some("npt=now-"));
        assert_eq!(s.connection, None);
        let m = &s.media[0];
        assert_eq!(*m, {
            let mut m = MediaDescription::mp2t(0).with_control("stream=0");
            m.connection = Some(Connection::new(ip("0.0.0.0"), None));
            m
        });
        assert!(m.is_mp2t());
    }

    #[test]
    fn gstreamer_rtsp_describe_h264_fmtp() {
        let s = SessionDescription::parse(GST_RTSP_H264).unwrap();
        let m = &s.media[0];
        assert_eq!(m.encoding, "H264");
        assert_eq!(
            m.fmtp.as_deref(),
            Some("packetization-mode=1;sprop-parameter-sets=Z0LADYyNQKD5APCIRqA=,aM48gA==;profile-level-id=42c00d;level-asymmetry-allowed=1")
        );
        let again = SessionDescription::parse(&s.to_sdp()).unwrap();
        assert_eq!(again, s);
    }

    #[test]
    fn rtsp_mp2t_text() {
        let s = SessionDescription::rtsp_mp2t(ip("192.0.2.1"), 42, "live", "npt=0-");
        let text = s.to_sdp();
        let want = [
            "v=0",
            "o=- 42 1 IN IP4 192.0.2.1",
            "s=live",
            "c=IN IP4 0.0.0.0",
            "t=0 0",
            concat!("a=tool:metronome ", env!("CARGO_PKG_VERSION")),
            "a=control:*",
            "a=range:npt=0-",
            "m=video 0 RTP/AVP 33",
            "a=rtpmap:33 MP2T/90000",
            "a=control:trackID=0",
            "",
        ]
        .join("\r\n");
        assert_eq!(text, want);
        assert_eq!(SessionDescription::parse(&text).unwrap(), s);
    }

    #[test]
    fn round_trip_everything() {
        let mut s = SessionDescription::new(ip("2001:db8::1"), u64::MAX, "all fields");
        s.connection = Some(Connection::new(ip("ff15::1"), None));
        s.control = Some("rtsp://[2001:db8::1]:8554/live/".into());
        s.range = Some("npt=0-12.5".into());
        s.tool = Some("t".into());
        let mut m = MediaDescription::new("audio", 5004, 97, "opus", 48_000);
        m.fmtp = Some("minptime=10;useinbandfec=1".into());
        m.control = Some("trackID=1".into());
        m.connection = Some(Connection::new(ip("239.0.0.9"), Some(32)));
        m.bitrate_kbps = Some(5_000);
        m.extmap = Some((1, crate::rtp::ABS_SEND_TIME_URI.into()));
        s.media.push(MediaDescription::mp2t(5006));
        s.media.push(m);
        let text = s.to_sdp();
        assert!(text.contains("c=IN IP6 ff15::1\r\n"), "{text}");
        assert!(text.contains("m=audio 5004 RTP/AVP 97\r\nc=IN IP4 239.0.0.9/32\r\nb=AS:5000\r\na=rtpmap:97 opus/48000\r\na=fmtp:97 minptime=10;useinbandfec=1\r\na=control:trackID=1\r\na=extmap:1 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time\r\n"), "{text}");
        // A direction after the id (RFC 8285 §8) is read past.
        let with_dir = text.replace("a=extmap:1 ", "a=extmap:1/sendonly ");
        assert_eq!(SessionDescription::parse(&with_dir).unwrap(), s);
        assert!(text.ends_with("\r\n") && !text.replace("\r\n", "").contains('\n'));
        assert_eq!(SessionDescription::parse(&text).unwrap(), s);
    }

    #[test]
    fn ipv4_multicast_without_ttl_is_written_with_one() {
        let s = SessionDescription::rtp_mp2t(
            ip("10.0.0.1"),
            7,
            "m",
            "239.255.0.1:5004".parse().unwrap(),
            None,
        );
        assert!(s.to_sdp().contains("c=IN IP4 239.255.0.1/1\r\n"));
        let u = SessionDescription::rtp_mp2t(
            ip("10.0.0.1"),
            7,
            "u",
            "127.0.0.1:5004".parse().unwrap(),
            Some(4),
        );
        // A TTL means nothing for unicast: not written.
        assert!(u.to_sdp().contains("c=IN IP4 127.0.0.1\r\n"));
    }

    #[test]
    fn static_payload_type_needs_no_rtpmap() {
        let text = "v=0\no=- 1 1 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=video 5004 RTP/AVP 33\n";
        let s = SessionDescription::parse(text).unwrap();
        assert_eq!(s.media[0], MediaDescription::mp2t(5004));
    }

    #[test]
    fn first_payload_type_is_taken() {
        let text = "v=0\r\ns=x\r\nm=video 5004 RTP/AVP 96 33\r\na=rtpmap:33 MP2T/90000\r\na=rtpmap:96 H265/90000\r\na=fmtp:33 x=1\r\n";
        let s = SessionDescription::parse(text).unwrap();
        assert_eq!(s.media[0].encoding, "H265");
        assert_eq!(s.media[0].fmtp, None);
        // No o=: the origin reads as 0.0.0.0.
        assert_eq!(s.origin, ip("0.0.0.0"));
    }

    #[test]
    fn rtpmap_without_clock_rate_is_an_error() {
        let text = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\nm=video 5004 RTP/AVP 96\r\na=rtpmap:96 H264\r\n";
        let e = SessionDescription::parse(text).unwrap_err();
        assert!(matches!(e, SdpError::BadRtpmap { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("line 5 (m=video 5004 RTP/AVP 96)"), "{msg}");
        assert!(msg.contains("no clock rate after 'H264'"), "{msg}");
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let head = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\n";
        let cases: &[(&str, &str)] = &[
            (
                "m=video 5004 RTP/AVP 96\r\n",
                "dynamic payload type 96 has no a=rtpmap",
            ),
            (
                "m=video 5004 RTP/AVP 200\r\n",
                "payload type '200' is not a number from 0 to 127",
            ),
            (
                "m=application 9 TCP/BFCP *\r\n",
                "transport 'TCP/BFCP' is not RTP",
            ),
            (
                "m=video 5004 RTP/AVP 96\r\na=rtpmap:96 H264/fast\r\n",
                "clock rate 'fast'",
            ),
            (
                "m=video 5004 RTP/AVP 33\r\nc=IN IP4 example.com\r\n",
                "invalid connection address 'example.com'",
            ),
            (
                "m=video 5004 RTP/AVP 33\r\nc=IN IP4 239.1.1.1/999\r\n",
                "time-to-live",
            ),
            (
                "m=video 5004 RTP/AVP 33\r\nc=IN IP6 127.0.0.1\r\n",
                "IPv4 address marked IP6",
            ),
            ("m=video port RTP/AVP 33\r\n", "not a valid SDP"),
        ];
        for (tail, want) in cases {
            let e = SessionDescription::parse(&format!("{head}{tail}")).unwrap_err();
            assert!(e.to_string().contains(want), "{tail:?}: {e}");
        }
        let e = SessionDescription::parse("hello").unwrap_err();
        assert!(e.to_string().contains("not a valid SDP"), "{e}");
        let e = SessionDescription::parse(&"a".repeat(MAX_SDP_BYTES + 1)).unwrap_err();
        assert_eq!(
            e,
            SdpError::TooLarge {
                len: MAX_SDP_BYTES + 1
            }
        );
    }

    #[test]
    fn free_text_cannot_inject_lines() {
        let mut s =
            SessionDescription::rtsp_mp2t(ip("127.0.0.1"), 1, "a\r\nm=audio 1 RTP/AVP 0", "npt=0-");
        s.media[0].control = Some("x\nc=IN IP4 1.2.3.4".into());
        let p = SessionDescription::parse(&s.to_sdp()).unwrap();
        assert_eq!(p.media.len(), 1);
        assert_eq!(p.media[0].connection, None);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn token() -> impl Strategy<Value = String> {
            "[A-Za-z0-9][A-Za-z0-9=;,.:/_-]{0,20}"
        }

        fn conn() -> impl Strategy<Value = Option<Connection>> {
            prop_oneof![
                Just(None),
                (any::<[u8; 4]>(), proptest::option::of(any::<u8>())).prop_map(|(a, ttl)| {
                    let addr = IpAddr::from(a);
                    // A TTL is only kept for IPv4 multicast; a multicast without one gets /1.
                    let ttl = match addr.is_multicast() {
                        true => Some(ttl.unwrap_or(1)),
                        false => None,
                    };
                    Some(Connection::new(addr, ttl))
                }),
                any::<[u8; 16]>().prop_map(|a| Some(Connection::new(IpAddr::from(a), None))),
            ]
        }

        fn media() -> impl Strategy<Value = MediaDescription> {
            (
                "(video|audio|application)",
                any::<u16>(),
                0u8..=127,
                "[A-Za-z0-9-]{1,10}",
                1u32..,
                proptest::option::of(token()),
                proptest::option::of(token()),
                conn(),
                proptest::option::of(any::<u64>()),
                proptest::option::of((1u8..=14, token())),
            )
                .prop_map(|(media, port, pt, enc, rate, fmtp, control, c, b, x)| {
                    MediaDescription {
                        media,
                        port,
                        payload_type: pt,
                        encoding: enc,
                        clock_rate: rate,
                        fmtp,
                        control,
                        connection: c,
                        bitrate_kbps: b,
                        extmap: x,
                    }
                })
        }

        proptest! {
            #[test]
            fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
                let _ = SessionDescription::parse(&text);
            }

            #[test]
            fn sdp_like_text_never_panics(
                lines in proptest::collection::vec(
                    ("[vosctmabk]", "[ -~]{0,40}").prop_map(|(k, v)| format!("{k}={v}")), 0..20),
                cut in any::<bool>(),
            ) {
                let mut text = String::from("v=0\r\n");
                text.push_str(&lines.join(if cut { "\n" } else { "\r\n" }));
                let _ = SessionDescription::parse(&text);
            }

            #[test]
            fn round_trip(
                origin in any::<[u8; 4]>(),
                id in any::<u64>(),
                name in "[A-Za-z0-9][A-Za-z0-9 ._-]{0,20}[A-Za-z0-9]",
                c in conn(),
                control in proptest::option::of(token()),
                range in proptest::option::of(token()),
                tool in proptest::option::of(token()),
                media in proptest::collection::vec(media(), 0..4),
            ) {
                let s = SessionDescription {
                    origin: IpAddr::from(origin), session_id: id, name, connection: c,
                    control, range, tool, media,
                };
                prop_assert_eq!(SessionDescription::parse(&s.to_sdp()).unwrap(), s);
            }
        }
    }
}
