//! `rtp://` destination and source URLs.
//!
//! ```text
//! rtp://HOST:PORT                       unicast, e.g. rtp://127.0.0.1:5004, rtp://[::1]:5004
//! rtp://GROUP:PORT?ttl=N&iface=ADDR     multicast, e.g. rtp://239.255.0.1:5004?ttl=1&iface=127.0.0.1
//! udp://...                             a synonym of rtp://
//! rtp://:PORT  rtp://@:PORT             (sources only) listen on all addresses
//! ```
//!
//! HOST is an IP address literal: names are not resolved here. RTCP goes to PORT+1 (RFC 3550
//! §11), so PORT 65535 is refused; an odd PORT is accepted but flagged by
//! [`RtpUrl::port_is_odd`], since RFC 3550 §11 asks for an even RTP port.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// A parsed RTP endpoint.
///
/// Fields are public so that tests and programs can build one directly (port 0 then means "any
/// free port", and its RTCP port is 0 too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtpUrl {
    /// The RTP address: the destination for a sender, the address to bind for a receiver.
    pub addr: SocketAddr,
    /// IP TTL / hop limit: `Some(1)` by default for multicast, `None` (system default) for unicast.
    pub ttl: Option<u32>,
    /// Interface address for multicast (IP_MULTICAST_IF, IP_ADD_MEMBERSHIP) or, for unicast, the
    /// local address to send from. `None`: the kernel's choice.
    pub iface: Option<Ipv4Addr>,
}

impl RtpUrl {
    /// Parses a URL to send to.
    pub fn parse_destination(s: &str) -> Result<RtpUrl, UrlError> {
        parse(s, Role::Destination)
    }

    /// Parses a URL to receive on. Also accepts `rtp://:PORT` and `rtp://@:PORT` (all addresses).
    pub fn parse_source(s: &str) -> Result<RtpUrl, UrlError> {
        parse(s, Role::Source)
    }

    /// A unicast endpoint with no options.
    pub fn unicast(addr: SocketAddr) -> RtpUrl {
        RtpUrl {
            addr,
            ttl: None,
            iface: None,
        }
    }

    /// A multicast endpoint with TTL 1 on `iface`.
    pub fn multicast(addr: SocketAddr, iface: Option<Ipv4Addr>) -> RtpUrl {
        RtpUrl {
            addr,
            ttl: Some(1),
            iface,
        }
    }

    /// The RTCP address: same host, port + 1 (RFC 3550 §11). Port 0 stays 0; port 65535 (never
    /// produced by the parser) maps to 0.
    pub fn rtcp_addr(&self) -> SocketAddr {
        let port = match self.addr.port() {
            0 => 0,
            p => p.checked_add(1).unwrap_or(0),
        };
        SocketAddr::new(self.addr.ip(), port)
    }

    /// The TTL as SDP and RTSP carry it: one byte, 1 when unset.
    pub fn ttl_byte(&self) -> u8 {
        self.ttl.unwrap_or(1).min(255) as u8
    }

    /// Whether the address is a multicast group (IPv4 224.0.0.0/4 or IPv6 ff00::/8).
    pub fn is_multicast(&self) -> bool {
        self.addr.ip().is_multicast()
    }

    /// RFC 3550 §11 wants an even RTP port; an odd one works but deserves a warning.
    pub fn port_is_odd(&self) -> bool {
        self.addr.port() % 2 == 1
    }
}

impl fmt::Display for RtpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rtp://{}", self.addr)?;
        let mut sep = '?';
        if let Some(ttl) = self.ttl {
            write!(f, "{sep}ttl={ttl}")?;
            sep = '&';
        }
        if let Some(iface) = self.iface {
            write!(f, "{sep}iface={iface}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for RtpUrl {
    type Err = UrlError;
    /// Same as [`RtpUrl::parse_destination`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_destination(s)
    }
}

/// Which end a URL names; sets what the parser accepts and the form an error suggests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// An address to send to: a host is required (not `0.0.0.0` or `::`).
    Destination,
    /// An address to receive on: the host may be left out (`rtp://:PORT`, `rtp://@:PORT`),
    /// meaning all IPv4 addresses.
    Source,
}

/// A URL that could not be used: what was wrong, and the expected form.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad {} '{input}': {problem}; expected {}", role_name(*.role), expected(*.role))]
pub struct UrlError {
    /// Whether the URL was parsed as a destination or a source.
    pub role: Role,
    /// The URL as given, untrimmed.
    pub input: String,
    /// What was wrong with it.
    pub problem: UrlProblem,
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Destination => "destination",
        Role::Source => "source",
    }
}

fn expected(r: Role) -> &'static str {
    match r {
        Role::Destination => {
            "rtp://HOST:PORT (for example rtp://127.0.0.1:5004) or rtp://GROUP:PORT?ttl=1&iface=ADDR for multicast"
        }
        Role::Source => {
            "rtp://ADDR:PORT or rtp://:PORT (for example rtp://:5004) or rtp://GROUP:PORT?iface=ADDR for multicast"
        }
    }
}

/// What exactly was wrong with a URL; the text the variant carries is the offending part.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlProblem {
    /// It does not start with `rtp://` or `udp://` (in any case).
    #[error("the scheme must be rtp:// or udp://")]
    Scheme,
    /// No `:PORT` after the host.
    #[error("no port")]
    MissingPort,
    /// The port is not a number from 1 to 65534 (65535 is refused: RTCP needs port + 1).
    #[error("port '{0}' is not a number from 1 to 65534 (RTCP uses port+1)")]
    BadPort(String),
    /// The host is not an IP address literal (names are not resolved), or an IPv6 address
    /// was written without brackets.
    #[error("'{0}' is not an IP address (host names are not resolved; use e.g. 127.0.0.1)")]
    BadHost(String),
    /// A destination named the unspecified address (`0.0.0.0` or `::`), which no packet can
    /// be sent to.
    #[error("a destination needs a host address, not {0}")]
    NoHost(String),
    /// A query option other than `ttl` and `iface`.
    #[error("unknown option '{0}'; allowed: ttl, iface")]
    UnknownKey(String),
    /// `ttl` or `iface` given more than once.
    #[error("option '{0}' given twice")]
    DuplicateKey(String),
    /// The `ttl` value is not a number from 0 to 255.
    #[error("ttl '{0}' is not a number from 0 to 255")]
    BadTtl(String),
    /// The `iface` value is not an IPv4 address.
    #[error("iface '{0}' is not an IPv4 address (for example iface=127.0.0.1)")]
    BadIface(String),
    /// `iface` was given with an IPv6 address: only IPv4 interfaces are supported.
    #[error("iface= is only supported for IPv4")]
    IfaceNeedsIpv4,
    /// Something follows the port other than `/` or a `?` query (a path, or text after an
    /// IPv6 address's closing bracket).
    #[error("junk after the port: '{0}'")]
    Junk(String),
}

fn parse(input: &str, role: Role) -> Result<RtpUrl, UrlError> {
    let err = |problem| UrlError {
        role,
        input: input.to_string(),
        problem,
    };
    let s = input.trim();
    let lower = s.get(..6).map(str::to_ascii_lowercase);
    let rest = match lower.as_deref() {
        Some("rtp://") | Some("udp://") => &s[6..],
        _ => return Err(err(UrlProblem::Scheme)),
    };
    let (authority, query) = match rest.split_once('?') {
        Some((a, q)) => (a, Some(q)),
        None => (rest, None),
    };
    let authority = authority.strip_suffix('/').unwrap_or(authority);
    let authority = match role {
        Role::Source => authority.strip_prefix('@').unwrap_or(authority),
        Role::Destination => authority,
    };
    let (host, port) = split_host_port(authority).map_err(err)?;
    let ip: IpAddr = if host.is_empty() && role == Role::Source {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        host.parse()
            .map_err(|_| err(UrlProblem::BadHost(host.to_string())))?
    };
    if role == Role::Destination && ip.is_unspecified() {
        return Err(err(UrlProblem::NoHost(ip.to_string())));
    }
    let port = match port.parse::<u16>() {
        Ok(p) if (1..=65534).contains(&p) => p,
        _ => return Err(err(UrlProblem::BadPort(port.to_string()))),
    };
    let mut url = RtpUrl {
        addr: SocketAddr::new(ip, port),
        ttl: None,
        iface: None,
    };
    parse_query(query.unwrap_or(""), &mut url).map_err(err)?;
    if url.ttl.is_none() && url.is_multicast() {
        url.ttl = Some(1);
    }
    if url.iface.is_some() && !ip.is_ipv4() {
        return Err(err(UrlProblem::IfaceNeedsIpv4));
    }
    Ok(url)
}

/// `HOST:PORT`, `[V6]:PORT` or `:PORT` into (host, port) strings.
fn split_host_port(a: &str) -> Result<(&str, &str), UrlProblem> {
    if let Some(v6) = a.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| UrlProblem::BadHost(a.to_string()))?;
        return match after.strip_prefix(':') {
            Some(port) => Ok((host, port)),
            None if after.is_empty() => Err(UrlProblem::MissingPort),
            None => Err(UrlProblem::Junk(after.to_string())),
        };
    }
    match a.rsplit_once(':') {
        Some((host, _)) if host.contains(':') => Err(UrlProblem::BadHost(format!(
            "{a} (write IPv6 as [ADDR]:PORT)"
        ))),
        Some((host, port)) => match port.split_once('/') {
            Some((_, junk)) => Err(UrlProblem::Junk(format!("/{junk}"))),
            None => Ok((host, port)),
        },
        None => Err(UrlProblem::MissingPort),
    }
}

fn parse_query(q: &str, url: &mut RtpUrl) -> Result<(), UrlProblem> {
    for pair in q.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "ttl" => {
                if url.ttl.is_some() {
                    return Err(UrlProblem::DuplicateKey(key.into()));
                }
                let ttl = value
                    .parse::<u8>()
                    .map_err(|_| UrlProblem::BadTtl(value.into()))?;
                url.ttl = Some(ttl as u32);
            }
            "iface" => {
                if url.iface.is_some() {
                    return Err(UrlProblem::DuplicateKey(key.into()));
                }
                let a = value
                    .parse::<Ipv4Addr>()
                    .map_err(|_| UrlProblem::BadIface(value.into()))?;
                url.iface = Some(a);
            }
            other => return Err(UrlProblem::UnknownKey(other.into())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(s: &str) -> RtpUrl {
        RtpUrl::parse_destination(s).unwrap_or_else(|e| panic!("{e}"))
    }
    fn problem(s: &str) -> UrlProblem {
        RtpUrl::parse_destination(s).unwrap_err().problem
    }

    #[test]
    fn unicast() {
        let u = dest("rtp://127.0.0.1:5004");
        assert_eq!(u.addr, "127.0.0.1:5004".parse().unwrap());
        assert_eq!(u.rtcp_addr(), "127.0.0.1:5005".parse().unwrap());
        assert!(!u.is_multicast() && !u.port_is_odd());
        assert_eq!((u.ttl, u.iface), (None, None));
        assert_eq!(
            dest("UDP://10.0.0.1:6000/"),
            RtpUrl::unicast("10.0.0.1:6000".parse().unwrap())
        );
        assert!(dest("rtp://127.0.0.1:5005").port_is_odd());
    }

    #[test]
    fn multicast_defaults_and_options() {
        let m = dest("rtp://239.255.0.1:5004");
        assert!(m.is_multicast());
        assert_eq!((m.ttl, m.iface), (Some(1), None));
        let m = dest("rtp://239.255.0.1:5004?ttl=4&iface=127.0.0.1");
        assert_eq!((m.ttl, m.iface), (Some(4), Some(Ipv4Addr::LOCALHOST)));
        assert_eq!(m.rtcp_addr().port(), 5005);
        assert_eq!(
            m.to_string(),
            "rtp://239.255.0.1:5004?ttl=4&iface=127.0.0.1"
        );
        assert_eq!(dest(&m.to_string()), m);
    }

    #[test]
    fn ipv6() {
        let u = dest("rtp://[::1]:5004");
        assert_eq!(u.addr, "[::1]:5004".parse().unwrap());
        assert_eq!(u.rtcp_addr(), "[::1]:5005".parse().unwrap());
        assert!(dest("rtp://[ff0e::1]:5004").is_multicast());
        assert!(matches!(problem("rtp://::1:5004"), UrlProblem::BadHost(_)));
        assert_eq!(
            problem("rtp://[ff0e::1]:5004?iface=127.0.0.1"),
            UrlProblem::IfaceNeedsIpv4
        );
    }

    #[test]
    fn sources() {
        let any = RtpUrl::parse_source("rtp://:5004").unwrap();
        assert_eq!(any.addr, "0.0.0.0:5004".parse().unwrap());
        assert_eq!(RtpUrl::parse_source("rtp://@:5004").unwrap(), any);
        assert_eq!(RtpUrl::parse_source("rtp://0.0.0.0:5004").unwrap(), any);
        let g = RtpUrl::parse_source("rtp://@239.1.2.3:5004?iface=127.0.0.1").unwrap();
        assert!(g.is_multicast());
        assert_eq!(problem("rtp://:5004"), UrlProblem::BadHost(String::new()));
        assert_eq!(
            problem("rtp://0.0.0.0:5004"),
            UrlProblem::NoHost("0.0.0.0".into())
        );
    }

    #[test]
    fn errors_say_what_to_do() {
        let e = RtpUrl::parse_destination("foo").unwrap_err();
        assert_eq!(
            e.to_string(),
            "bad destination 'foo': the scheme must be rtp:// or udp://; expected rtp://HOST:PORT \
             (for example rtp://127.0.0.1:5004) or rtp://GROUP:PORT?ttl=1&iface=ADDR for multicast"
        );
        assert_eq!(problem("http://1.2.3.4:5"), UrlProblem::Scheme);
        assert_eq!(problem("rtp://1.2.3.4"), UrlProblem::MissingPort);
        assert!(matches!(problem("rtp://1.2.3.4:0"), UrlProblem::BadPort(_)));
        assert!(matches!(
            problem("rtp://1.2.3.4:65535"),
            UrlProblem::BadPort(_)
        ));
        assert!(matches!(problem("rtp://1.2.3.4:x"), UrlProblem::BadPort(_)));
        assert!(matches!(
            problem("rtp://localhost:5004"),
            UrlProblem::BadHost(_)
        ));
        assert!(matches!(
            problem("rtp://1.2.3.4:5004/x"),
            UrlProblem::Junk(_)
        ));
        let e = RtpUrl::parse_destination("rtp://239.0.0.1:5004?tll=3").unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown option 'tll'; allowed: ttl, iface"),
            "{e}"
        );
        assert_eq!(
            problem("rtp://239.0.0.1:5004?ttl=1&ttl=2"),
            UrlProblem::DuplicateKey("ttl".into())
        );
        assert_eq!(
            problem("rtp://239.0.0.1:5004?ttl=300"),
            UrlProblem::BadTtl("300".into())
        );
        assert_eq!(
            problem("rtp://239.0.0.1:5004?iface=eth0"),
            UrlProblem::BadIface("eth0".into())
        );
        // No input panics.
        for s in [
            "",
            "rtp://",
            "rtp://[",
            "rtp://[]:",
            "rtp://:",
            "rtp://a:b:c?&&=&",
            "rtpé://x",
            "ü",
        ] {
            let _ = RtpUrl::parse_destination(s);
            let _ = RtpUrl::parse_source(s);
        }
    }
}
