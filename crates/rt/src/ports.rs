//! Choosing ports that a program will bind later (a receiver and a sender started apart, as
//! `demo` and the benches do; a server started as another process, as the tests do), outside
//! the kernel's ephemeral range, and seeing whether another process has bound one yet.
//!
//! A port found free by binding port 0 lies in the ephemeral range
//! (`net.ipv4.ip_local_port_range`, 32768–60999 by default). Between the probe and the real bind,
//! any other socket on the host that binds port 0 may be handed the same port, and on a busy host
//! (a test suite, a media server) that happens. Ports outside the ephemeral range are handed out
//! only to those who ask for them by number: a probe there stays true unless another program
//! chose the same number in between. Within this process, [`free_udp_run`] and
//! [`free_tcp_port`] hand a port out again only after [`REMEMBERED`] others.

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::io;
use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::sync::Mutex;

/// The lowest port chosen below the ephemeral range: above the registered services that sit
/// low (5004 RTP, 8554 RTSP, 9000s), inside what SIP/RTP servers commonly reserve for media
/// (16384–32767).
const LOWEST: u32 = 16384;

/// The fewest ports a range outside the ephemeral one must hold to be chosen from.
const MIN_RANGE: u32 = 1024;

/// The longest run of ports asked for at once.
pub const MAX_RUN: u16 = 64;

/// Ports tried before giving up.
const ATTEMPTS: usize = 256;

/// How many of the ports this process handed out are not handed out again.
pub const REMEMBERED: usize = 4096;

/// The ports handed out lately, oldest first.
static GIVEN: Mutex<VecDeque<u16>> = Mutex::new(VecDeque::new());

/// The kernel's ephemeral range, `(low, high)`; the Linux default if it cannot be read.
fn ephemeral_range() -> (u16, u16) {
    let text =
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut it = text.split_whitespace().map(str::parse::<u16>);
    match (it.next(), it.next()) {
        (Some(Ok(lo)), Some(Ok(hi))) if lo <= hi => (lo, hi),
        _ => (32768, 60999),
    }
}

/// Where to choose from, `[start, end)` with `start` even, for an ephemeral range of `lo..=hi`:
/// below it from [`LOWEST`] if at least [`MIN_RANGE`] ports are there, else above it, else below
/// it from 1024; `None` if no range outside it holds [`MIN_RANGE`] ports.
fn candidates_for(lo: u16, hi: u16) -> Option<(u32, u32)> {
    let (lo, hi) = (u32::from(lo), u32::from(hi));
    [(LOWEST, lo), (hi + 1, 65536), (1024, lo)]
        .into_iter()
        .find(|&(start, end)| end >= start + MIN_RANGE)
        .map(|(start, end)| ((start + 1) & !1, end))
}

/// True if UDP `port` is free on every address: bound on `0.0.0.0` without `SO_REUSEADDR`, a
/// probe conflicts with any socket on that port, whatever address it is bound to.
fn udp_free(port: u16) -> bool {
    UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok()
}

/// True if no listening TCP socket holds `port` on any address. The standard library's
/// listener sets `SO_REUSEADDR`, so a port held only by connections in `TIME_WAIT` counts as
/// free (a server that sets it too, as most do, can bind it).
fn tcp_free(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok()
}

/// An even port `p` with `p .. p + n` all free for UDP on every IPv4 address right now, chosen
/// at random outside the kernel's ephemeral range (see the module documentation); `n = 2` gives
/// an RTP/RTCP pair (RFC 3550 §11), `n` is at most [`MAX_RUN`].
pub fn free_udp_run(n: u16) -> io::Result<u16> {
    free_run(n, "UDP", udp_free)
}

/// A TCP port free on every IPv4 address right now, for a server that another process will
/// start (chosen as [`free_udp_run`] chooses).
pub fn free_tcp_port() -> io::Result<u16> {
    free_run(1, "TCP", tcp_free)
}

fn free_run(n: u16, proto: &str, free: fn(u16) -> bool) -> io::Result<u16> {
    if n == 0 || n > MAX_RUN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a run of {n} ports: ask for 1 to {MAX_RUN}"),
        ));
    }
    let (lo, hi) = ephemeral_range();
    let Some((start, end)) = candidates_for(lo, hi) else {
        return Err(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!(
                "the ephemeral port range (net.ipv4.ip_local_port_range = {lo} {hi}) leaves \
                 fewer than {MIN_RANGE} ports outside it to choose from: narrow it"
            ),
        ));
    };
    let n32 = u32::from(n);
    let slots = u64::from((end - start - n32) / 2 + 1);
    let random = RandomState::new();
    let mut given = crate::sync::lock(&GIVEN);
    for attempt in 0..ATTEMPTS {
        let p = start + 2 * (random.hash_one(attempt) % slots) as u32;
        let run = (p..p + n32).map(|q| q as u16);
        if run.clone().all(|q| !given.contains(&q) && free(q)) {
            given.extend(run);
            let over = given.len().saturating_sub(REMEMBERED);
            given.drain(..over);
            return Ok(p as u16);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "no run of {n} free {proto} port(s) in {ATTEMPTS} random tries in [{start}, {end}): \
             the range is nearly full"
        ),
    ))
}

/// Whether a UDP socket of any process is bound to `port` now, on any IPv4 or IPv6 address
/// (from `/proc/net/udp` and `/proc/net/udp6`), without binding it: a probe by binding would
/// itself take the port from a program about to bind it.
pub fn udp_port_bound(port: u16) -> bool {
    let suffix = format!(":{port:04X}");
    ["/proc/net/udp", "/proc/net/udp6"].iter().any(|table| {
        std::fs::read_to_string(table).is_ok_and(|t| {
            t.lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().nth(1))
                .any(|local| local.ends_with(&suffix))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_lie_outside_the_ephemeral_one_and_start_even() {
        // Linux's default: below it.
        assert_eq!(candidates_for(32768, 60999), Some((16384, 32768)));
        // Little room below: above it, from an even port.
        assert_eq!(candidates_for(10000, 60000), Some((60002, 65536)));
        assert_eq!(candidates_for(16384, 60999), Some((61000, 65536)));
        // Room only low down.
        assert_eq!(candidates_for(8000, 65535), Some((1024, 8000)));
        // No room anywhere: an error, not a port inside the range.
        assert_eq!(candidates_for(1024, 65535), None);
        assert_eq!(candidates_for(1500, 65000), None);
    }

    #[test]
    fn a_run_is_even_free_and_outside_the_ephemeral_range() {
        let (lo, hi) = ephemeral_range();
        for n in [1, 2, 6, MAX_RUN] {
            let p = free_udp_run(n).unwrap();
            assert_eq!(p % 2, 0);
            let last = u32::from(p) + u32::from(n) - 1;
            assert!(last <= 65535, "{p}+{n}");
            let inside = |q: u32| (u32::from(lo)..=u32::from(hi)).contains(&q);
            assert!(!inside(p.into()) && !inside(last), "{p}+{n}");
            let _a = UdpSocket::bind((Ipv4Addr::LOCALHOST, p)).unwrap();
        }
        assert!(free_udp_run(0).is_err());
        assert!(free_udp_run(MAX_RUN + 1).is_err());
    }

    #[test]
    fn runs_handed_out_in_one_process_never_overlap() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let p = free_udp_run(6).unwrap();
            assert!((p..p + 6).all(|q| seen.insert(q)), "{p} given again");
        }
    }

    #[test]
    fn a_port_held_on_any_address_is_not_free() {
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = udp.local_addr().unwrap().port();
        assert!(!udp_free(port), "held on 127.0.0.1, probed on 0.0.0.0");
        assert!(udp_port_bound(port));
        let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        assert!(!tcp_free(tcp.local_addr().unwrap().port()));
    }
}
