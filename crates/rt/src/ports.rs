//! Choosing ports that a program will bind later (a receiver and a sender started apart, as
//! `demo` and the benches do; a server started as another process, as the tests do), outside
//! the kernel's ephemeral range.
//!
//! A port found free by binding port 0 lies in the ephemeral range
//! (`net.ipv4.ip_local_port_range`, 32768–60999 by default). Between the probe and the real bind,
//! any other socket on the host that binds port 0 may be handed the same port, and on a busy host
//! (a test suite, a media server) that happens. Ports below the ephemeral range are handed out
//! only to those who ask for them by number, so a probe there stays true unless someone else
//! chose the same number.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::io;
use std::net::{Ipv4Addr, TcpListener, UdpSocket};

/// The lowest port chosen: above the registered services that sit low (5004 RTP, 8554 RTSP,
/// 9000s), inside what SIP/RTP servers commonly reserve for media (16384–32767).
const LOWEST: u16 = 16384;

/// Ports tried before giving up.
const ATTEMPTS: usize = 256;

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

/// Where to choose from: `[start, end)`, below the ephemeral range if there is room there,
/// otherwise above it.
fn candidates(n: u16) -> (u16, u16) {
    let (lo, hi) = ephemeral_range();
    if lo >= LOWEST.saturating_add(1024) {
        (LOWEST, lo)
    } else if hi <= u16::MAX - 1024 {
        (hi + 1, u16::MAX - n)
    } else {
        (1024, lo.max(1024 + 2 * n))
    }
}

/// True if UDP `port` is free on every address: bound on `0.0.0.0`, a probe conflicts with
/// any socket on that port, whatever address it is bound to.
fn udp_free(port: u16) -> bool {
    UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok()
}

/// True if TCP `port` is free on every address.
fn tcp_free(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok()
}

/// An even port `p` with `p .. p + n` all free for UDP on every IPv4 address right now, chosen
/// at random below the kernel's ephemeral range (see the module documentation). `n = 2` gives
/// an RTP/RTCP pair (RFC 3550 §11).
pub fn free_udp_run(n: u16) -> io::Result<u16> {
    free_run(n, "UDP", udp_free)
}

/// A TCP port free on every IPv4 address right now, for a server that another process will
/// start (chosen as [`free_udp_run`] chooses).
pub fn free_tcp_port() -> io::Result<u16> {
    free_run(1, "TCP", tcp_free)
}

fn free_run(n: u16, proto: &str, free: fn(u16) -> bool) -> io::Result<u16> {
    let n = n.max(1);
    let (start, end) = candidates(n);
    let span = u64::from(end.saturating_sub(start).saturating_sub(n) / 2).max(1);
    let random = RandomState::new();
    for attempt in 0..ATTEMPTS {
        let r = random.hash_one((std::process::id(), attempt));
        let p = start + 2 * (r % span) as u16;
        if (p..p + n).all(free) {
            return Ok(p);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("no {n} free {proto} ports in a row between {start} and {end}: close some sockets"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_even_free_and_outside_the_ephemeral_range() {
        let (lo, hi) = ephemeral_range();
        for _ in 0..20 {
            let p = free_udp_run(2).unwrap();
            assert_eq!(p % 2, 0);
            assert!(
                !(lo..=hi).contains(&p) && !(lo..=hi).contains(&(p + 1)),
                "{p}"
            );
            let _a = UdpSocket::bind((Ipv4Addr::LOCALHOST, p)).unwrap();
            let _b = UdpSocket::bind((Ipv4Addr::LOCALHOST, p + 1)).unwrap();
        }
    }

    #[test]
    fn a_taken_port_is_never_chosen() {
        let p = free_udp_run(2).unwrap();
        let _held = UdpSocket::bind((Ipv4Addr::LOCALHOST, p)).unwrap();
        for _ in 0..200 {
            assert_ne!(free_udp_run(2).unwrap(), p);
        }
    }

    #[test]
    fn a_tcp_port_is_free_and_outside_the_ephemeral_range() {
        let (lo, hi) = ephemeral_range();
        let p = free_tcp_port().unwrap();
        assert!(!(lo..=hi).contains(&p), "{p}");
        let _held = TcpListener::bind((Ipv4Addr::LOCALHOST, p)).unwrap();
        for _ in 0..200 {
            assert_ne!(free_tcp_port().unwrap(), p);
        }
    }
}
