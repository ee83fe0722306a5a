//! Socket set-up shared by the media and RTCP sockets: creation, binding, multicast join, send
//! and receive options, buffer sizes.

use super::{SocketOptions, UdpError};
use crate::url::RtpUrl;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;

pub(super) fn new_udp(addr: &SocketAddr) -> Result<Socket, UdpError> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    Socket::new(domain, Type::DGRAM, Some(Protocol::UDP)).map_err(UdpError::Socket)
}

fn opt<T>(option: &'static str, addr: SocketAddr, r: io::Result<T>) -> Result<T, UdpError> {
    r.map_err(|source| UdpError::Option {
        option,
        addr,
        source,
    })
}

pub(super) fn bind(s: &Socket, addr: SocketAddr) -> Result<(), UdpError> {
    s.bind(&addr.into())
        .map_err(|source| UdpError::Bind { addr, source })
}

/// The local address to send from: the interface for IPv4 if given, else any.
pub(super) fn local_any(url: &RtpUrl) -> SocketAddr {
    match (url.addr, url.iface) {
        (SocketAddr::V4(_), Some(i)) if !url.is_multicast() => SocketAddr::from((i, 0)),
        (SocketAddr::V4(_), _) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        (SocketAddr::V6(_), _) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    }
}

/// TTL / hop limit, and for multicast the outgoing interface and loopback.
pub(super) fn set_send_options(s: &Socket, url: &RtpUrl) -> Result<(), UdpError> {
    let a = url.addr;
    match (a.ip().is_multicast(), a.is_ipv4()) {
        (true, true) => {
            opt(
                "IP_MULTICAST_TTL",
                a,
                s.set_multicast_ttl_v4(url.ttl.unwrap_or(1)),
            )?;
            opt("IP_MULTICAST_LOOP", a, s.set_multicast_loop_v4(true))?;
            if let Some(i) = url.iface {
                opt("IP_MULTICAST_IF", a, s.set_multicast_if_v4(&i))?;
            }
        }
        (true, false) => {
            opt(
                "IPV6_MULTICAST_HOPS",
                a,
                s.set_multicast_hops_v6(url.ttl.unwrap_or(1)),
            )?;
            opt("IPV6_MULTICAST_LOOP", a, s.set_multicast_loop_v6(true))?;
        }
        (false, true) => {
            if let Some(ttl) = url.ttl {
                opt("IP_TTL", a, s.set_ttl_v4(ttl))?;
            }
        }
        (false, false) => {
            if let Some(ttl) = url.ttl {
                opt("IPV6_UNICAST_HOPS", a, s.set_unicast_hops_v6(ttl))?;
            }
        }
    }
    Ok(())
}

/// Checks at open that `url` is routable from a socket set up like the real one (a UDP connect
/// does the route lookup without sending anything).
pub(super) fn probe_route(url: &RtpUrl, to: SocketAddr) -> Result<(), UdpError> {
    let probe = new_udp(&to)?;
    bind(&probe, local_any(url))?;
    set_send_options(&probe, url)?;
    probe
        .connect(&to.into())
        .map_err(|source| UdpError::Unreachable { addr: to, source })
}

/// Sets a socket buffer, forced if permitted; returns the size the kernel reports (it doubles the
/// request to account for its bookkeeping).
pub(super) fn set_buffer(s: &Socket, bytes: usize, recv: bool) -> usize {
    let (force, plain) = if recv {
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF)
    } else {
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)
    };
    let v = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    if setsockopt_int(s, libc::SOL_SOCKET, force, v).is_err() {
        let _ = setsockopt_int(s, libc::SOL_SOCKET, plain, v);
    }
    let got = if recv {
        s.recv_buffer_size()
    } else {
        s.send_buffer_size()
    };
    got.unwrap_or(0)
}

pub(super) fn setsockopt_int(
    s: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `v` is a c_int that outlives the call; its size is passed.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The datagrams the kernel dropped on socket `s` since it was opened (the socket's drop
/// count, `SO_MEMINFO`'s `SK_MEMINFO_DROPS`, Linux 4.6 and later); `None` where the kernel
/// does not say.
pub(super) fn socket_drops(s: &impl AsRawFd) -> Option<u64> {
    let mut info = [0u32; 16];
    let mut len = size_of_val(&info) as libc::socklen_t;
    // SAFETY: `info` outlives the call and `len` is its size; the kernel writes at most that.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let at = libc::SK_MEMINFO_DROPS as usize;
    (r == 0 && len as usize >= (at + 1) * size_of::<u32>()).then(|| u64::from(info[at]))
}

/// Receive-side options: timestamps, drop counter, buffer, timeout. Returns (rxq_ovfl on, buffer).
pub(super) fn set_recv_options(
    s: &Socket,
    addr: SocketAddr,
    o: &SocketOptions,
) -> Result<(bool, usize), UdpError> {
    opt(
        "SO_TIMESTAMPNS",
        addr,
        setsockopt_int(s, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1),
    )?;
    let ovfl = setsockopt_int(s, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1).is_ok();
    let granted = set_buffer(s, o.buffer_bytes, true);
    opt("SO_RCVTIMEO", addr, s.set_read_timeout(o.read_timeout))?;
    Ok((ovfl, granted))
}

/// Binds `GROUP:port` shared (SO_REUSEADDR/SO_REUSEPORT), joins the group, and receives only that
/// group (IP_MULTICAST_ALL off).
pub(super) fn bind_multicast(s: &Socket, url: &RtpUrl, at: SocketAddr) -> Result<(), UdpError> {
    bind_multicast_at(s, url, at, at)
}

/// [`bind_multicast`], bound to `bind_to` (the group's port on any address, to take unicast
/// datagrams too) while joining `at`'s group.
pub(super) fn bind_multicast_at(
    s: &Socket,
    url: &RtpUrl,
    at: SocketAddr,
    bind_to: SocketAddr,
) -> Result<(), UdpError> {
    opt("SO_REUSEADDR", at, s.set_reuse_address(true))?;
    opt("SO_REUSEPORT", at, s.set_reuse_port(true))?;
    bind(s, bind_to)?;
    let iface = url.iface.unwrap_or(Ipv4Addr::UNSPECIFIED);
    let joined = match at.ip() {
        IpAddr::V4(g) => {
            opt("IP_MULTICAST_ALL", at, s.set_multicast_all_v4(false))?;
            s.join_multicast_v4(&g, &iface)
        }
        IpAddr::V6(g) => s.join_multicast_v6(&g, 0),
    };
    joined.map_err(|source| UdpError::Join {
        group: at.ip(),
        iface,
        source,
    })
}

pub(super) fn local_addr(s: &Socket) -> io::Result<SocketAddr> {
    s.local_addr()?
        .as_socket()
        .ok_or_else(|| io::ErrorKind::InvalidData.into())
}
