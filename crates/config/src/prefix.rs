//! IP address prefixes (`10.0.0.0/8`, `239.0.0.0/8`, `::1/128`, or a bare address), as the
//! control API's destination allow-list is written (`--allow-destination`,
//! `allow_destinations` in the config file).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An address and how many of its leading bits a matching address shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpPrefix {
    addr: IpAddr,
    len: u8,
}

impl IpPrefix {
    /// The prefix `addr/len`; `None` if `len` is longer than the address (32 or 128 bits).
    pub fn new(addr: IpAddr, len: u8) -> Option<IpPrefix> {
        (len <= max_len(addr)).then_some(IpPrefix { addr, len })
    }

    /// Whether `ip` is in the prefix. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is
    /// matched as the IPv4 address it carries, so a v4 prefix cannot be stepped around.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                same_bits(u32::from(p) as u128, u32::from(a) as u128, 32, self.len)
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                same_bits(u128::from(p), u128::from(a), 128, self.len)
            }
            _ => false,
        }
    }

    /// The prefixes a control API client may send to when the operator lists none: this
    /// machine's loopback (`127.0.0.0/8`, `::1`) and the administratively scoped multicast
    /// groups (`239.0.0.0/8`, RFC 2365; `ff05::/16`, site-local), which stay inside the
    /// operator's own network.
    pub fn default_destinations() -> Vec<IpPrefix> {
        vec![
            IpPrefix {
                addr: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)),
                len: 8,
            },
            IpPrefix {
                addr: IpAddr::V6(Ipv6Addr::LOCALHOST),
                len: 128,
            },
            IpPrefix {
                addr: IpAddr::V4(Ipv4Addr::new(239, 0, 0, 0)),
                len: 8,
            },
            IpPrefix {
                addr: IpAddr::V6(Ipv6Addr::new(0xff05, 0, 0, 0, 0, 0, 0, 0)),
                len: 16,
            },
        ]
    }
}

fn max_len(addr: IpAddr) -> u8 {
    if addr.is_ipv4() {
        32
    } else {
        128
    }
}

/// Whether the first `len` of the `width` low bits of `a` and `b` agree.
fn same_bits(a: u128, b: u128, width: u32, len: u8) -> bool {
    if len == 0 {
        return true;
    }
    let shift = width - u32::from(len);
    (a >> shift) == (b >> shift)
}

impl FromStr for IpPrefix {
    type Err = String;

    fn from_str(s: &str) -> Result<IpPrefix, String> {
        let t = s.trim();
        let bad = || {
            format!(
                "'{}' is not an address prefix: write it like 10.0.0.0/8, 239.1.2.3 or fd00::/8",
                t.escape_debug()
            )
        };
        let (addr, len) = match t.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (t, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let len = match len {
            Some(l) if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) => {
                l.parse::<u8>().map_err(|_| bad())?
            }
            Some(_) => return Err(bad()),
            None => max_len(addr),
        };
        IpPrefix::new(addr, len).ok_or_else(|| {
            format!(
                "'{}': a prefix of {len} bits is longer than the address ({} bits)",
                t.escape_debug(),
                max_len(addr)
            )
        })
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl Serialize for IpPrefix {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IpPrefix {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IpPrefix {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_match_their_leading_bits() {
        assert!(p("10.0.0.0/8").contains(ip("10.200.3.4")));
        assert!(!p("10.0.0.0/8").contains(ip("11.0.0.1")));
        assert!(p("192.168.1.0/24").contains(ip("192.168.1.255")));
        assert!(!p("192.168.1.0/24").contains(ip("192.168.2.0")));
        assert!(p("0.0.0.0/0").contains(ip("8.8.8.8")));
        assert!(!p("0.0.0.0/0").contains(ip("::1")));
        assert!(p("127.0.0.3").contains(ip("127.0.0.3")));
        assert!(!p("127.0.0.3").contains(ip("127.0.0.4")));
        assert!(p("fd00::/8").contains(ip("fd12::1")));
        assert!(!p("fd00::/8").contains(ip("fe80::1")));
        assert!(p("::/0").contains(ip("2001:db8::1")));
    }

    #[test]
    fn a_v4_mapped_v6_address_is_judged_as_its_v4_address() {
        assert!(p("127.0.0.0/8").contains(ip("::ffff:127.0.0.1")));
        assert!(!p("127.0.0.0/8").contains(ip("::ffff:10.0.0.1")));
    }

    #[test]
    fn the_default_allows_loopback_and_scoped_multicast_only() {
        let d = IpPrefix::default_destinations();
        let allowed = |s: &str| d.iter().any(|p| p.contains(ip(s)));
        for ok in ["127.0.0.1", "127.0.0.3", "::1", "239.255.0.1", "ff05::1:3"] {
            assert!(allowed(ok), "{ok}");
        }
        for no in [
            "10.0.0.1",
            "8.8.8.8",
            "224.0.0.1",
            "233.1.1.1",
            "ff0e::1",
            "2001:db8::1",
        ] {
            assert!(!allowed(no), "{no}");
        }
    }

    #[test]
    fn bad_prefixes_say_how_to_write_one() {
        for bad in [
            "",
            "10.0.0.0/",
            "10.0.0.0/33",
            "::/129",
            "10.0.0/8",
            "x/8",
            "10.0.0.0/-1",
        ] {
            let e = bad.parse::<IpPrefix>().unwrap_err();
            assert!(e.contains("prefix"), "{bad}: {e}");
        }
        assert_eq!(p(" 10.1.0.0/16 ").to_string(), "10.1.0.0/16");
        assert_eq!(p("::1").to_string(), "::1/128");
    }
}
