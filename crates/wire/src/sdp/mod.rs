//! SDP session descriptions (RFC 8866) for RTP sessions, built on `sdp-types`.
//!
//! Only what Metronome needs of a session is kept: the origin, the name, the session-level
//! connection, `a=control`, `a=range` and `a=tool`, and for each RTP media its port, its first
//! payload type with the encoding and clock rate that `a=rtpmap` (or the RFC 3551 static table)
//! gives it, `a=fmtp`, `a=control`, a media-level `c=`, `b=AS:`, the first `a=extmap`, an
//! RFC 4588 retransmission payload type (`rtx` with `apt=` the first), and the sources by SSRC
//! (RFC 5576: `a=ssrc:ID cname:NAME`, the retransmission's paired by `a=ssrc-group:FID`).
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

mod parse;

use crate::{PayloadType, Ssrc};
pub use parse::{static_payload_type, MediaAt, SdpError};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Largest SDP accepted by [`SessionDescription::parse`]: 64 KiB.
pub const MAX_SDP_BYTES: usize = 64 << 10;

/// RTP clock rate of MPEG-TS and video (RFC 2250, RFC 3551).
pub const VIDEO_CLOCK_RATE: u32 = 90_000;

/// A connection address (`c=`): unicast or multicast, with the IPv4 multicast TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Connection {
    /// The address, IPv4 or IPv6: a multicast group, a unicast host, or unspecified
    /// (`0.0.0.0`) when the address comes later (RTSP SETUP).
    pub addr: IpAddr,
    /// IPv4 multicast time-to-live (`c=IN IP4 239.1.2.3/16`). RFC 8866 §5.7 requires one for
    /// IPv4 multicast: [`SessionDescription::to_sdp`] writes `/1` if it is `None`.
    pub ttl: Option<u8>,
}

impl Connection {
    /// A connection to `addr`; `ttl` matters only for IPv4 multicast and is dropped from
    /// the text otherwise.
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

    /// Whether the address is a multicast group (IPv4 224.0.0.0/4 or IPv6 ff00::/8).
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
    pub payload_type: PayloadType,
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
    /// `a=crypto:TAG SUITE inline:KEY` (RFC 4568): the media is SRTP (`RTP/SAVP`), keyed so
    /// (the first one given, when reading).
    pub crypto: Option<String>,
    /// RFC 4588 retransmission with RFC 4585 NACKs: `a=rtpmap:PT rtx/CLOCK`, `a=fmtp:PT
    /// apt=MEDIA;rtx-time=MS` and `a=rtcp-fb:MEDIA nack`, the profile `RTP/AVPF` (`RTP/SAVPF`
    /// with `crypto`), the retransmission payload type second on the `m=` line.
    pub retransmission: Option<Retransmission>,
    /// The media's RTP source, where it is known before the first packet (RFC 5576 §4.1:
    /// `a=ssrc:SSRC cname:CNAME`). With it, a retransmission's [`Retransmission::ssrc`] is
    /// written too, paired with the media's by `a=ssrc-group:FID MEDIA RTX` (RFC 5576 §4.2,
    /// RFC 5888's flow identification, as WebRTC pairs an RTX stream).
    pub source: Option<Source>,
}

/// An RTP source as an SDP names it (RFC 5576 §4.1): its SSRC and its RTCP CNAME, which
/// RFC 5576 §6.1 requires of every source it lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The SSRC, written in decimal.
    pub ssrc: Ssrc,
    /// The CNAME its RTCP SDES packets carry.
    pub cname: String,
}

/// A media's retransmission stream, as its SDP announces it (see
/// [`MediaDescription::retransmission`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retransmission {
    /// The retransmission packets' payload type (`a=rtpmap:PT rtx/...`).
    pub payload_type: PayloadType,
    /// `rtx-time`: how long the sender keeps a packet to retransmit, ms (RFC 4588 §8.6).
    pub rtx_time_ms: Option<u32>,
    /// The retransmission stream's SSRC: its own, in the media's session (RFC 4588's SSRC
    /// multiplexing), with the media's CNAME. Written only beside the media's
    /// [`MediaDescription::source`]; read from `a=ssrc-group:FID`.
    pub ssrc: Option<Ssrc>,
    /// The sender tells a group which losses a repair is on its way for (RFC 6642's TLLEI,
    /// §5: `a=rtcp-fb:MEDIA nack tllei`), so that its receivers do not ask for them too.
    pub tllei: bool,
}

impl MediaDescription {
    /// A media with nothing optional set.
    pub fn new(
        media: impl Into<String>,
        port: u16,
        payload_type: PayloadType,
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
            crypto: None,
            retransmission: None,
            source: None,
        }
    }

    /// MPEG-TS over RTP (RFC 2250): `m=video PORT RTP/AVP 33`, `a=rtpmap:33 MP2T/90000`.
    pub fn mp2t(port: u16) -> MediaDescription {
        Self::new("video", port, PayloadType::MP2T, "MP2T", VIDEO_CLOCK_RATE)
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
            proto: match (self.crypto.is_some(), self.retransmission.is_some()) {
                (false, false) => "RTP/AVP",
                (true, false) => "RTP/SAVP",
                (false, true) => "RTP/AVPF",
                (true, true) => "RTP/SAVPF",
            }
            .to_string(),
            fmt: match self.retransmission {
                Some(r) => format!("{pt} {}", r.payload_type),
                None => pt.to_string(),
            },
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
        if let Some(r) = self.retransmission {
            m.add_attribute_with_value("rtcp-fb", format!("{pt} nack"));
            if r.tllei {
                m.add_attribute_with_value("rtcp-fb", format!("{pt} nack tllei"));
            }
            let rpt = r.payload_type;
            m.add_attribute_with_value("rtpmap", format!("{rpt} rtx/{}", self.clock_rate));
            let time = r.rtx_time_ms.map(|t| format!(";rtx-time={t}"));
            m.add_attribute_with_value(
                "fmtp",
                format!("{rpt} apt={pt}{}", time.unwrap_or_default()),
            );
        }
        if let Some(c) = &self.control {
            m.add_attribute_with_value("control", c);
        }
        if let Some((id, uri)) = &self.extmap {
            m.add_attribute_with_value("extmap", format!("{id} {uri}"));
        }
        if let Some(c) = &self.crypto {
            m.add_attribute_with_value("crypto", c);
        }
        self.add_sources(&mut m);
        m
    }

    /// `a=ssrc-group:FID MEDIA RTX` (when both are known), then `a=ssrc:ID cname:NAME` for
    /// the media and its retransmission, in the order WebRTC writes them.
    fn add_sources(&self, m: &mut sdp_types::Media) {
        let Some(src) = &self.source else {
            return;
        };
        let rtx = self.retransmission.and_then(|r| r.ssrc);
        if let Some(rtx) = rtx {
            m.add_attribute_with_value(
                "ssrc-group",
                format!("FID {} {}", src.ssrc.get(), rtx.get()),
            );
        }
        for ssrc in std::iter::once(src.ssrc).chain(rtx) {
            m.add_attribute_with_value("ssrc", format!("{} cname:{}", ssrc.get(), src.cname));
        }
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
    /// The `m=` sections in order. Reading refuses an SDP with a non-RTP media, so every
    /// entry here is an RTP stream.
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

#[cfg(test)]
mod tests;
