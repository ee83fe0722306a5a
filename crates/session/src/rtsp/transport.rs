//! The `Transport` header of SETUP (RFC 2326 §12.39), parsed here rather than with
//! `rtsp_types::headers::Transports`: that parser can panic on network input (an `assert!` and
//! slicing in its `dest_addr`/`src_addr`/`mode` handling, e.g. `dest_addr="\"` or `mode="`), and
//! it rejects RTSP 1.0 values it does not know (an IPv6 `destination`). This one only splits
//! strings, so no input can make it panic.

use metronome_wire::Ssrc;
use std::net::IpAddr;

use super::{Delivery, Requested};

/// One alternative of a Transport header (`transport-protocol/profile[/lower-transport]
/// *(;parameter)`), as its parameters say: the one representation both the server (what a
/// client asks for) and the client (what the server chose) read. Parsing only splits strings:
/// no input makes it panic. A parameter whose value does not parse is left out and said in
/// `errors`; whether that matters is the reader's call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransportSpec {
    /// `RTP/AVP`, `RTP/AVP/UDP`, `RTP/AVP/TCP`, ... as written.
    pub protocol: String,
    /// The `unicast` parameter was present.
    pub unicast: bool,
    /// The `multicast` parameter was present.
    pub multicast: bool,
    /// As written, brackets and quotes removed.
    pub destination: Option<String>,
    /// `source`, as written, brackets and quotes removed.
    pub source: Option<String>,
    /// `client_port`: the RTP port, and the RTCP port if a range (ascending) was written.
    pub client_port: Option<(u16, Option<u16>)>,
    /// `server_port`: the RTP port, and the RTCP port if a range was written.
    pub server_port: Option<(u16, Option<u16>)>,
    /// `port` (multicast): the RTP port, and the RTCP port if a range was written.
    pub port: Option<(u16, Option<u16>)>,
    /// `interleaved`: the RTP channel, and the RTCP channel if a range was written.
    pub interleaved: Option<(u8, Option<u8>)>,
    /// `ttl`: the multicast time-to-live.
    pub ttl: Option<u8>,
    /// `ssrc`, read as hexadecimal (RFC 2326 §12.39).
    pub ssrc: Option<Ssrc>,
    /// `mode`, its quotes removed.
    pub mode: Option<String>,
    /// An RTSP 2.0 parameter (`dest_addr`, `src_addr`) was present.
    pub rtsp2_parameter: Option<&'static str>,
    /// Parameters that did not parse, in order, as a person would be told.
    pub errors: Vec<String>,
}

impl TransportSpec {
    /// Parses one alternative.
    pub fn parse(alternative: &str) -> TransportSpec {
        let mut parts = split_outside_quotes(alternative, ';').into_iter();
        let mut t = TransportSpec {
            protocol: parts.next().unwrap_or("").trim().to_owned(),
            ..TransportSpec::default()
        };
        for param in parts {
            let (name, value) = match param.split_once('=') {
                Some((n, v)) => (n.trim(), Some(v.trim())),
                None => (param.trim(), None),
            };
            let lower = name.to_ascii_lowercase();
            let Some(v) = value else {
                match lower.as_str() {
                    "unicast" => t.unicast = true,
                    "multicast" => t.multicast = true,
                    "client_port" | "server_port" | "port" | "interleaved" | "destination"
                    | "mode" | "ttl" | "ssrc" | "source" => {
                        t.errors.push(format!("{name} needs a value"))
                    }
                    "dest_addr" => t.rtsp2_parameter = Some("dest_addr"),
                    "src_addr" => t.rtsp2_parameter = Some("src_addr"),
                    _ => {}
                }
                continue;
            };
            let unquoted = v.trim_matches('"');
            let address = || unquoted.trim_matches(|c| c == '[' || c == ']').to_owned();
            match lower.as_str() {
                "unicast" => t.unicast = true,
                "multicast" => t.multicast = true,
                "client_port" => t.client_port = t.note(pair(v, "client_port")),
                "server_port" => t.server_port = t.note(pair(v, "server_port")),
                "port" => t.port = t.note(pair(v, "port")),
                "interleaved" => t.interleaved = t.note(pair(v, "interleaved")),
                "ttl" => t.ttl = t.note(unquoted.parse().map_err(|_| bad("ttl", v))),
                "ssrc" => {
                    t.ssrc = t.note(
                        u32::from_str_radix(unquoted, 16)
                            .map(Ssrc)
                            .map_err(|_| bad("ssrc", v)),
                    )
                }
                "destination" => t.destination = Some(address()),
                "source" => t.source = Some(address()),
                "mode" => t.mode = Some(unquoted.to_owned()),
                "dest_addr" => t.rtsp2_parameter = Some("dest_addr"),
                "src_addr" => t.rtsp2_parameter = Some("src_addr"),
                // layers, RTCP-mux, append, ...: nothing either side acts on.
                _ => {}
            }
        }
        t
    }

    /// The first alternative of a header: the one a server's answer chose.
    pub fn first(header: &str) -> TransportSpec {
        TransportSpec::parse(alternatives(header).first().copied().unwrap_or(""))
    }

    fn note<T>(&mut self, r: Result<T, String>) -> Option<T> {
        r.map_err(|e| self.errors.push(e)).ok()
    }

    /// `destination` as an address, if it is one.
    pub fn destination_ip(&self) -> Option<IpAddr> {
        self.destination.as_deref()?.parse().ok()
    }

    /// `source` as an address, if it is one.
    pub fn source_ip(&self) -> Option<IpAddr> {
        self.source.as_deref()?.parse().ok()
    }
}

/// The alternatives of a Transport header, in the client's order of preference.
pub fn alternatives(header: &str) -> Vec<&str> {
    split_outside_quotes(header, ',')
}

fn bad(name: &str, value: &str) -> String {
    format!("bad {name} {:?}", printable(value))
}

/// What SETUP may choose from, besides the header.
pub(super) struct Offer<'a> {
    /// The RTSP client's address: unicast `destination` must be this.
    pub peer: IpAddr,
    /// The mount has a multicast group.
    pub multicast: bool,
    /// Interleaved channels already used by other sessions on this connection.
    pub used_channels: &'a [u8],
    /// The mount sends SRTP: `RTP/SAVP` may be asked for (and `RTP/AVP`, as FFmpeg asks for
    /// media its SDP says is SAVP).
    pub srtp: bool,
    /// The mount answers RTCP feedback (NACKs with retransmissions): `RTP/AVPF` (RFC 4585,
    /// `RTP/SAVPF` with SRTP) may be asked for, as well as the profile without feedback.
    pub feedback: bool,
}

/// What SETUP chose: the transport, and whether the client asked for the feedback profile
/// (`RTP/AVPF`), which the answer then names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Chosen {
    pub requested: Requested,
    pub feedback: bool,
}

/// The first acceptable alternative of a Transport header (RFC 2326 §12.39: the client lists
/// them in order of preference), or why none was: the reason for the first one.
pub(super) fn choose(header: &str, offer: &Offer<'_>) -> Result<Chosen, String> {
    let mut first_reason = None;
    for alternative in alternatives(header) {
        match evaluate(&TransportSpec::parse(alternative), offer) {
            Ok(requested) => return Ok(requested),
            Err(reason) => {
                first_reason.get_or_insert(reason);
            }
        }
    }
    Err(first_reason.unwrap_or_else(|| "empty Transport header".to_owned()))
}

/// The profile and lower transport of a Transport alternative (`RTP/SAVPF/TCP`): secure,
/// feedback, TCP; `None` for anything but RTP's four profiles over UDP or TCP.
fn profile(protocol: &str) -> Option<(bool, bool, bool)> {
    let p = protocol.to_ascii_uppercase();
    let (base, tcp) = match p.rsplit_once('/') {
        Some((b, "TCP")) => (b, true),
        Some((b, "UDP")) => (b, false),
        _ => (p.as_str(), false),
    };
    match base {
        "RTP/AVP" => Some((false, false, tcp)),
        "RTP/SAVP" => Some((true, false, tcp)),
        "RTP/AVPF" => Some((false, true, tcp)),
        "RTP/SAVPF" => Some((true, true, tcp)),
        _ => None,
    }
}

/// Whether one alternative can be served, and how.
fn evaluate(t: &TransportSpec, offer: &Offer<'_>) -> Result<Chosen, String> {
    let Some((secure, feedback, tcp)) = profile(&t.protocol) else {
        return Err(format!(
            "transport {:?} is not supported: only RTP/AVP, RTP/AVP/UDP and RTP/AVP/TCP \
             (RTP/SAVP for an SRTP mount, RTP/AVPF for one that repairs)",
            printable(&t.protocol)
        ));
    };
    if secure && !offer.srtp {
        return Err("this mount sends plain RTP: ask for RTP/AVP".to_owned());
    }
    if feedback && !offer.feedback {
        return Err("this mount takes no RTCP feedback: ask for RTP/AVP".to_owned());
    }
    let requested = requested(t, offer, tcp)?;
    Ok(Chosen {
        requested,
        feedback,
    })
}

/// The transport one alternative asks for, checked.
fn requested(t: &TransportSpec, offer: &Offer<'_>, tcp: bool) -> Result<Requested, String> {
    if let Some(e) = t.errors.first() {
        return Err(e.clone());
    }
    if let Some(m) = t.mode.as_deref().and_then(|modes| {
        modes
            .split(',')
            .find(|m| !m.trim().eq_ignore_ascii_case("play"))
    }) {
        return Err(format!(
            "mode {:?} is not supported: only PLAY",
            printable(m)
        ));
    }
    if let Some(name) = t.rtsp2_parameter {
        return Err(format!("{name} is an RTSP 2.0 parameter, not supported"));
    }
    let (unicast, multicast) = (t.unicast, t.multicast);
    if unicast && multicast {
        return Err("both unicast and multicast".to_owned());
    }
    if multicast {
        if tcp {
            return Err("multicast over TCP".to_owned());
        }
        if !offer.multicast {
            return Err("this mount has no multicast group".to_owned());
        }
        // A client-chosen group, port or ttl is ignored: the mount's group is the one served.
        return Ok(Requested::Multicast);
    }
    // Unicast (RFC 2326 makes multicast the default, but every client says `unicast` or TCP).
    if let Some(dest) = &t.destination {
        let ip = t.destination_ip();
        if ip.map(|ip| ip.to_canonical()) != Some(offer.peer.to_canonical()) {
            return Err(format!(
                "destination {:?} is not the client's own address",
                printable(dest)
            ));
        }
    }
    if tcp {
        let (rtp_channel, rtcp_channel) = match t.interleaved {
            Some((a, b)) => {
                let b = b
                    .or_else(|| a.checked_add(1))
                    .ok_or("no channel after 255")?;
                if a == b || offer.used_channels.contains(&a) || offer.used_channels.contains(&b) {
                    return Err(format!("interleaved channels {a}-{b} are not free"));
                }
                (a, b)
            }
            None => (0..=254u8)
                .step_by(2)
                .map(|a| (a, a + 1))
                .find(|(a, b)| !offer.used_channels.contains(a) && !offer.used_channels.contains(b))
                .ok_or("no free interleaved channels on this connection")?,
        };
        return Ok(Requested::Interleaved {
            rtp_channel,
            rtcp_channel,
        });
    }
    let (rtp, rtcp) = t.client_port.ok_or("RTP/AVP unicast needs client_port")?;
    let rtcp = rtcp
        .or_else(|| rtp.checked_add(1))
        .ok_or("no RTCP port after 65535")?;
    if rtp == 0 || rtcp == 0 {
        return Err("client_port 0".to_owned());
    }
    Ok(Requested::Udp {
        client_rtp: rtp,
        client_rtcp: rtcp,
    })
}

/// `a` or `a-b`, a range that ascends (RFC 2326 §12.39: `port = port-number "-"
/// port-number`, the RTCP port or channel after the RTP one).
fn pair<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
    value: &str,
    name: &str,
) -> Result<(T, Option<T>), String> {
    let bad = || format!("bad {name} {:?}", printable(value));
    let (a, b) = match value.split_once('-') {
        Some((a, b)) => (a, Some(b)),
        None => (value, None),
    };
    let a: T = a.trim().parse().map_err(|_| bad())?;
    let b: Option<T> = b.map(|b| b.trim().parse().map_err(|_| bad())).transpose()?;
    if let Some(b) = &b {
        if *b <= a {
            return Err(format!(
                "{name} {a}-{b} does not ascend: write the RTP one first, then the RTCP one after it"
            ));
        }
    }
    Ok((a, b))
}

/// Splits at `sep` where it is not inside a double-quoted string (RFC 2326 §15 quoted-string).
fn split_outside_quotes(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == sep && !quoted {
            out.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    out.push(&s[start..]);
    out
}

/// At most 64 characters of `s`, control characters replaced: safe in a reason header.
pub(super) fn printable(s: &str) -> String {
    s.chars()
        .take(64)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The SETUP response's Transport header for what the backend set up (RFC 2326 §12.39): the
/// profile sent (`SAVP` for an SRTP mount, with `F` for a client that asked for feedback).
pub(super) fn describe(delivery: &Delivery, srtp: bool, feedback: bool) -> String {
    let plain = describe_plain(delivery);
    let Some(rest) = plain.strip_prefix("RTP/AVP") else {
        return plain;
    };
    let profile = match (srtp, feedback) {
        (false, false) => "RTP/AVP",
        (true, false) => "RTP/SAVP",
        (false, true) => "RTP/AVPF",
        (true, true) => "RTP/SAVPF",
    };
    format!("{profile}{rest}")
}

fn describe_plain(delivery: &Delivery) -> String {
    match *delivery {
        Delivery::Udp {
            client_rtp,
            client_rtcp,
            server_rtp,
            server_rtcp,
            ssrc,
        } => format!(
            "RTP/AVP;unicast;client_port={client_rtp}-{client_rtcp};\
             server_port={server_rtp}-{server_rtcp};ssrc={ssrc:08X}"
        ),
        Delivery::Multicast {
            group,
            port,
            rtcp_port,
            ttl,
            ssrc,
        } => format!(
            "RTP/AVP;multicast;destination={group};port={port}-{rtcp_port};ttl={ttl};\
             ssrc={ssrc:08X}"
        ),
        Delivery::Interleaved {
            rtp_channel,
            rtcp_channel,
            ssrc,
        } => {
            format!("RTP/AVP/TCP;unicast;interleaved={rtp_channel}-{rtcp_channel};ssrc={ssrc:08X}")
        }
    }
}

#[cfg(test)]
mod spec_tests {
    use super::*;

    #[test]
    fn one_representation_reads_what_clients_ask_and_what_servers_answer() {
        let asked = TransportSpec::parse("RTP/AVP/TCP;unicast;interleaved=4-5;mode=\"PLAY\"");
        assert_eq!(asked.protocol, "RTP/AVP/TCP");
        assert!(asked.unicast && !asked.multicast);
        assert_eq!(asked.interleaved, Some((4, Some(5))));
        assert_eq!(asked.mode.as_deref(), Some("PLAY"));
        let answered = TransportSpec::first(
            "RTP/AVP;multicast;destination=[ff15::1];port=5000-5001;ttl=4;ssrc=0A0B0C0D,RTP/AVP",
        );
        assert_eq!(answered.destination_ip(), Some("ff15::1".parse().unwrap()));
        assert_eq!(
            (answered.port, answered.ttl),
            (Some((5000, Some(5001))), Some(4))
        );
        assert_eq!(answered.ssrc, Some(Ssrc(0x0a0b_0c0d)));
        let reversed = TransportSpec::parse("RTP/AVP;unicast;client_port=5001-5000");
        assert_eq!(reversed.client_port, None);
        assert!(
            reversed.errors[0].contains("does not ascend"),
            "{:?}",
            reversed.errors
        );
        let same = TransportSpec::parse("RTP/AVP/TCP;unicast;interleaved=3-3");
        assert!(
            same.errors[0].contains("interleaved 3-3 does not ascend"),
            "{:?}",
            same.errors
        );
        let bad = TransportSpec::parse("RTP/AVP;client_port;ttl=many;src_addr=\"x\"");
        assert_eq!(
            bad.errors,
            vec!["client_port needs a value", "bad ttl \"many\""]
        );
        assert_eq!(bad.rtsp2_parameter, Some("src_addr"));
    }
}
