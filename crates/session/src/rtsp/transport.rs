//! The `Transport` header of SETUP (RFC 2326 §12.39), parsed here rather than with
//! `rtsp_types::headers::Transports`: that parser can panic on network input (an `assert!` and
//! slicing in its `dest_addr`/`src_addr`/`mode` handling, e.g. `dest_addr="\"` or `mode="`), and
//! it rejects RTSP 1.0 values it does not know (an IPv6 `destination`). This one only splits
//! strings, so no input can make it panic.

use std::net::IpAddr;

use super::{Delivery, Requested};

/// What SETUP may choose from, besides the header.
pub(super) struct Offer<'a> {
    /// The RTSP client's address: unicast `destination` must be this.
    pub peer: IpAddr,
    /// The mount has a multicast group.
    pub multicast: bool,
    /// Interleaved channels already used by other sessions on this connection.
    pub used_channels: &'a [u8],
}

/// The first acceptable alternative of a Transport header (RFC 2326 §12.39: the client lists
/// them in order of preference), or why none was: the reason for the first one.
pub(super) fn choose(header: &str, offer: &Offer<'_>) -> Result<Requested, String> {
    let mut first_reason = None;
    for alternative in split_outside_quotes(header, ',') {
        match evaluate(alternative, offer) {
            Ok(requested) => return Ok(requested),
            Err(reason) => {
                first_reason.get_or_insert(reason);
            }
        }
    }
    Err(first_reason.unwrap_or_else(|| "empty Transport header".to_owned()))
}

/// One `transport-protocol/profile[/lower-transport] *(;parameter)`.
fn evaluate(alternative: &str, offer: &Offer<'_>) -> Result<Requested, String> {
    let mut parts = split_outside_quotes(alternative, ';').into_iter();
    let spec = parts.next().unwrap_or("").trim();
    let tcp = match spec.to_ascii_uppercase().as_str() {
        "RTP/AVP" | "RTP/AVP/UDP" => false,
        "RTP/AVP/TCP" => true,
        _ => {
            return Err(format!(
                "transport {:?} is not supported: only RTP/AVP, RTP/AVP/UDP and RTP/AVP/TCP",
                printable(spec)
            ))
        }
    };
    let (mut unicast, mut multicast) = (false, false);
    let (mut client_port, mut interleaved, mut destination) = (None, None, None);
    for param in parts {
        let (name, value) = match param.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (param.trim(), None),
        };
        let needed = || format!("{name} needs a value");
        match name.to_ascii_lowercase().as_str() {
            "unicast" => unicast = true,
            "multicast" => multicast = true,
            "client_port" => {
                client_port = Some(pair::<u16>(value.ok_or_else(needed)?, "client_port")?)
            }
            "interleaved" => {
                interleaved = Some(pair::<u8>(value.ok_or_else(needed)?, "interleaved")?)
            }
            "destination" => destination = Some(value.ok_or_else(needed)?),
            "mode" => {
                let modes = value.ok_or_else(needed)?.trim_matches('"');
                if let Some(m) = modes
                    .split(',')
                    .find(|m| !m.trim().eq_ignore_ascii_case("play"))
                {
                    return Err(format!(
                        "mode {:?} is not supported: only PLAY",
                        printable(m)
                    ));
                }
            }
            "dest_addr" | "src_addr" => {
                return Err(format!("{name} is an RTSP 2.0 parameter, not supported"))
            }
            // ttl, port, ssrc, source, layers, RTCP-mux, …: the server chooses these itself.
            _ => {}
        }
    }
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
    if let Some(dest) = destination {
        let ip: Option<IpAddr> = dest.trim_matches(|c| c == '[' || c == ']').parse().ok();
        if ip.map(|ip| ip.to_canonical()) != Some(offer.peer.to_canonical()) {
            return Err(format!(
                "destination {:?} is not the client's own address",
                printable(dest)
            ));
        }
    }
    if tcp {
        let (rtp_channel, rtcp_channel) = match interleaved {
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
    let (rtp, rtcp) = client_port.ok_or("RTP/AVP unicast needs client_port")?;
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

/// `a` or `a-b`.
fn pair<T: std::str::FromStr>(value: &str, name: &str) -> Result<(T, Option<T>), String> {
    let bad = || format!("bad {name} {:?}", printable(value));
    let (a, b) = match value.split_once('-') {
        Some((a, b)) => (a, Some(b)),
        None => (value, None),
    };
    let a = a.trim().parse().map_err(|_| bad())?;
    let b = b.map(|b| b.trim().parse().map_err(|_| bad())).transpose()?;
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

/// The SETUP response's Transport header for what the backend set up (RFC 2326 §12.39).
pub(super) fn describe(delivery: &Delivery) -> String {
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
