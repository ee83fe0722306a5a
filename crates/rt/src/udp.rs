//! UDP sockets for RTP and RTCP: unicast and multicast, kernel receive timestamps, fan-out sends.
//!
//! - [`UdpSender`]: media out to one destination (plus [`UdpSender::send_to_many`], one `sendmmsg`
//!   for N destinations). Unconnected; large SO_SNDBUF; multicast TTL/interface/loop set.
//! - [`UdpReceiver`]: media in, with SO_TIMESTAMPNS, SO_RXQ_OVFL, a large receive buffer and a read
//!   timeout so loops can stop.
//! - [`RtcpSocket`]: RTCP for either side (RFC 3550 §11: port+1). Unicast sender: bound to an
//!   ephemeral port, sends SRs to port+1 and hears the RRs receivers send back to that source
//!   address. Unicast receiver: bound to port+1, replies to whoever it heard. Multicast (both sides):
//!   bound to GROUP:port+1 with SO_REUSEADDR/SO_REUSEPORT, joined, loop on: everyone sends to the
//!   group and hears everyone, including itself (filter own reports by SSRC).
//!
//! Nothing here allocates per packet: `recv` uses a stack control buffer, `send_to_many` stack
//! arrays. Timeouts show as `Err` with [`is_timeout`] true.

use crate::url::RtpUrl;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Socket settings common to senders and receivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketOptions {
    /// Requested SO_SNDBUF (senders) or SO_RCVBUF (receivers), in bytes. The *FORCE variants are
    /// tried first (root / CAP_NET_ADMIN), then the plain ones (capped by wmem_max / rmem_max).
    pub buffer_bytes: usize,
    /// Receive timeout; `None` blocks forever.
    pub read_timeout: Option<Duration>,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            buffer_bytes: 4 << 20,
            read_timeout: Some(Duration::from_millis(100)),
        }
    }
}

/// Most destinations per `sendmmsg` call; longer lists are sent in several calls.
pub const FANOUT_BATCH: usize = 32;

/// What one received datagram came with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes written into the buffer.
    pub len: usize,
    pub src: SocketAddr,
    /// Kernel receive time (SCM_TIMESTAMPNS, CLOCK_REALTIME ns); see
    /// [`crate::clock::Clock::timestamp_from_realtime_ns`].
    pub kernel_rx_realtime_ns: Option<u64>,
    /// Datagrams the socket dropped for lack of buffer since it was opened (SO_RXQ_OVFL);
    /// `None` if the option could not be enabled.
    pub dropped_total: Option<u32>,
    /// The datagram was longer than the buffer and was cut (MSG_TRUNC).
    pub truncated: bool,
}

/// True if a `recv` error is the read timeout expiring.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A socket that could not be opened or used, with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum UdpError {
    #[error("cannot create a UDP socket: {}", explain(.0))]
    Socket(io::Error),
    #[error("cannot bind {addr}: {}", explain(.source))]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("cannot reach {addr}: {}", explain(.source))]
    Unreachable { addr: SocketAddr, source: io::Error },
    #[error("cannot join multicast group {group} on interface {iface}: {}", explain(.source))]
    Join {
        group: IpAddr,
        iface: Ipv4Addr,
        source: io::Error,
    },
    #[error("cannot set {option} on the socket for {addr}: {}", explain(.source))]
    Option {
        option: &'static str,
        addr: SocketAddr,
        source: io::Error,
    },
    #[error("sending to {addr} failed: {}", explain(.source))]
    Send { addr: SocketAddr, source: io::Error },
    #[error("no RTCP peer known yet: pass an address to send_to, or receive a report first")]
    NoPeer,
}

impl UdpError {
    /// Classifies a send error: routing errors become [`UdpError::Unreachable`].
    pub fn from_send(addr: SocketAddr, e: io::Error) -> UdpError {
        match e.raw_os_error() {
            Some(libc::ENETUNREACH | libc::EHOSTUNREACH | libc::EINVAL | libc::EADDRNOTAVAIL) => {
                UdpError::Unreachable { addr, source: e }
            }
            _ => UdpError::Send { addr, source: e },
        }
    }
}

/// errno in words, with the remedy.
fn explain(e: &io::Error) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::ENETUNREACH) => "no route (ENETUNREACH); check the address and the interface",
        Some(libc::EHOSTUNREACH) => "host unreachable (EHOSTUNREACH); check the address and that the host is up",
        Some(libc::EINVAL) => "invalid argument (EINVAL); a loopback interface (iface=127.0.0.1) reaches only loopback addresses, and IPv4 and IPv6 do not mix",
        Some(libc::EADDRINUSE) => "address in use (EADDRINUSE); another program or stream uses this port: pick another port",
        Some(libc::EADDRNOTAVAIL) => "address not available (EADDRNOTAVAIL); it is not an address of this host: check iface= and the address",
        Some(libc::EACCES | libc::EPERM) => "permission denied; a firewall rule, a broadcast address, or a port below 1024 without root",
        Some(libc::ENODEV) => "no such interface (ENODEV); check iface=",
        Some(libc::EAFNOSUPPORT) => "address family not supported (EAFNOSUPPORT); IPv4 and IPv6 do not mix on one socket",
        Some(libc::EMSGSIZE) => "datagram too large (EMSGSIZE); keep packets under the path MTU",
        Some(libc::ENOBUFS | libc::EAGAIN) => "send buffer full; the sender outpaces the interface",
        Some(libc::ECONNREFUSED) => "refused (ECONNREFUSED); nothing listens at that port",
        _ => return e.to_string(),
    };
    hint.to_string()
}

fn new_udp(addr: &SocketAddr) -> Result<Socket, UdpError> {
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

fn bind(s: &Socket, addr: SocketAddr) -> Result<(), UdpError> {
    s.bind(&addr.into())
        .map_err(|source| UdpError::Bind { addr, source })
}

/// The local address to send from: the interface for IPv4 if given, else any.
fn local_any(url: &RtpUrl) -> SocketAddr {
    match (url.addr, url.iface) {
        (SocketAddr::V4(_), Some(i)) if !url.is_multicast() => SocketAddr::from((i, 0)),
        (SocketAddr::V4(_), _) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        (SocketAddr::V6(_), _) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    }
}

/// TTL / hop limit, and for multicast the outgoing interface and loopback.
fn set_send_options(s: &Socket, url: &RtpUrl) -> Result<(), UdpError> {
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
fn probe_route(url: &RtpUrl, to: SocketAddr) -> Result<(), UdpError> {
    let probe = new_udp(&to)?;
    bind(&probe, local_any(url))?;
    set_send_options(&probe, url)?;
    probe
        .connect(&to.into())
        .map_err(|source| UdpError::Unreachable { addr: to, source })
}

/// Sets a socket buffer, forced if permitted; returns the size the kernel reports (it doubles the
/// request to account for its bookkeeping).
fn set_buffer(s: &Socket, bytes: usize, recv: bool) -> usize {
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

fn setsockopt_int(
    s: &Socket,
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

/// Receive-side options: timestamps, drop counter, buffer, timeout. Returns (rxq_ovfl on, buffer).
fn set_recv_options(
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
fn bind_multicast(s: &Socket, url: &RtpUrl, at: SocketAddr) -> Result<(), UdpError> {
    opt("SO_REUSEADDR", at, s.set_reuse_address(true))?;
    opt("SO_REUSEPORT", at, s.set_reuse_port(true))?;
    bind(s, at)?;
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

/// Media out to one destination, and fan-out to many.
#[derive(Debug)]
pub struct UdpSender {
    socket: Socket,
    dest: RtpUrl,
    send_buffer: usize,
}

impl UdpSender {
    /// Opens a socket for `dest`: bound to `iface:0` (unicast with iface) or any:0; for multicast,
    /// TTL, IP_MULTICAST_IF = iface and loop on. Fails with [`UdpError::Unreachable`] if the kernel
    /// has no route to `dest`.
    pub fn open(dest: &RtpUrl, o: &SocketOptions) -> Result<UdpSender, UdpError> {
        let socket = new_udp(&dest.addr)?;
        bind(&socket, local_any(dest))?;
        set_send_options(&socket, dest)?;
        let send_buffer = set_buffer(&socket, o.buffer_bytes, false);
        probe_route(dest, dest.addr)?;
        Ok(UdpSender {
            socket,
            dest: *dest,
            send_buffer,
        })
    }

    pub fn destination(&self) -> &RtpUrl {
        &self.dest
    }

    /// SO_SNDBUF as granted (kernel-doubled).
    pub fn send_buffer(&self) -> usize {
        self.send_buffer
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        local_addr(&self.socket)
    }

    /// The underlying socket, for options not wrapped here.
    pub fn socket(&self) -> &Socket {
        &self.socket
    }

    /// Sends one datagram to the destination.
    pub fn send(&self, packet: &[u8]) -> Result<usize, UdpError> {
        self.send_to(packet, self.dest.addr)
    }

    pub fn send_to(&self, packet: &[u8], to: SocketAddr) -> Result<usize, UdpError> {
        send_to(&self.socket, packet, to)
    }

    /// Sends `packet` to every address in `dests`, with one `sendmmsg` per [`FANOUT_BATCH`]
    /// destinations. A destination that fails is skipped and counted; the others still get the
    /// packet. No allocation: the message headers live on the stack.
    pub fn send_to_many(&self, packet: &[u8], dests: &[SocketAddr]) -> FanOut {
        send_to_many(&self.socket, packet, dests)
    }
}

/// The outcome of a fan-out send.
#[derive(Debug, Default)]
pub struct FanOut {
    pub sent: usize,
    pub failed: usize,
    /// The first failure, naming its destination.
    pub first_error: Option<UdpError>,
}

fn send_to(s: &Socket, packet: &[u8], to: SocketAddr) -> Result<usize, UdpError> {
    let sa = SockAddr::from(to);
    loop {
        match s.send_to(packet, &sa) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r.map_err(|e| UdpError::from_send(to, e)),
        }
    }
}

fn send_to_many(s: &Socket, packet: &[u8], dests: &[SocketAddr]) -> FanOut {
    let mut out = FanOut::default();
    // SAFETY (zeroed): sockaddr_storage and mmsghdr are plain C data; all-zero is valid.
    let mut addrs: [libc::sockaddr_storage; FANOUT_BATCH] = unsafe { zeroed() };
    let mut hdrs: [libc::mmsghdr; FANOUT_BATCH] = unsafe { zeroed() };
    let mut iov = libc::iovec {
        iov_base: packet.as_ptr() as *mut libc::c_void,
        iov_len: packet.len(),
    };
    for chunk in dests.chunks(FANOUT_BATCH) {
        for (i, d) in chunk.iter().enumerate() {
            let sa = SockAddr::from(*d);
            // SAFETY: `sa` holds `sa.len()` ≤ sizeof(sockaddr_storage) valid bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    sa.as_ptr().cast::<u8>(),
                    (&mut addrs[i] as *mut libc::sockaddr_storage).cast::<u8>(),
                    sa.len() as usize,
                )
            };
            let h = &mut hdrs[i].msg_hdr;
            h.msg_name = (&mut addrs[i] as *mut libc::sockaddr_storage).cast();
            h.msg_namelen = sa.len();
            h.msg_iov = &mut iov;
            h.msg_iovlen = 1;
        }
        let mut start = 0;
        while start < chunk.len() {
            let n = (chunk.len() - start) as libc::c_uint;
            // SAFETY: hdrs[start..start+n] are initialised above and point at live `addrs` and
            // `iov`; the kernel only reads the packet (the *mut cast is required by the C type).
            let r = unsafe { libc::sendmmsg(s.as_raw_fd(), hdrs[start..].as_mut_ptr(), n, 0) };
            if r > 0 {
                out.sent += r as usize;
                start += r as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            if r < 0 && e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // The message at `start` failed: count it, keep its error, go on with the rest.
            out.failed += 1;
            if out.first_error.is_none() {
                out.first_error = Some(UdpError::from_send(chunk[start], e));
            }
            start += 1;
        }
    }
    out
}

/// Media in: one bound socket with kernel timestamps.
#[derive(Debug)]
pub struct UdpReceiver {
    socket: Socket,
    rxq_ovfl: bool,
    recv_buffer: usize,
}

impl UdpReceiver {
    /// Binds `source.addr`. For multicast: binds GROUP:port shared and joins on `source.iface`
    /// (or the kernel's choice). Port 0 binds a free port (see [`UdpReceiver::local_addr`]).
    pub fn open(source: &RtpUrl, o: &SocketOptions) -> Result<UdpReceiver, UdpError> {
        let socket = new_udp(&source.addr)?;
        if source.is_multicast() {
            bind_multicast(&socket, source, source.addr)?;
        } else {
            bind(&socket, source.addr)?;
        }
        let (rxq_ovfl, recv_buffer) = set_recv_options(&socket, source.addr, o)?;
        Ok(UdpReceiver {
            socket,
            rxq_ovfl,
            recv_buffer,
        })
    }

    /// Receives one datagram into `buf`. A read timeout shows as an error with [`is_timeout`].
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<RecvMeta> {
        recv_meta(&self.socket, buf, self.rxq_ovfl)
    }

    /// SO_RCVBUF as granted (kernel-doubled).
    pub fn recv_buffer(&self) -> usize {
        self.recv_buffer
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        local_addr(&self.socket)
    }

    pub fn socket(&self) -> &Socket {
        &self.socket
    }
}

/// RTCP for a sender or a receiver (see the module documentation).
#[derive(Debug)]
pub struct RtcpSocket {
    socket: Socket,
    peer: Option<SocketAddr>,
    rxq_ovfl: bool,
}

impl RtcpSocket {
    /// RTCP for a sender to `dest`: sends to `dest.rtcp_addr()` and receives the reports.
    pub fn open_for_sender(dest: &RtpUrl, o: &SocketOptions) -> Result<RtcpSocket, UdpError> {
        let to = dest.rtcp_addr();
        if dest.is_multicast() {
            return Self::open_multicast(dest, o);
        }
        let socket = new_udp(&to)?;
        bind(&socket, local_any(dest))?;
        set_send_options(&socket, dest)?;
        probe_route(dest, to)?;
        Self::finish(socket, Some(to), dest, o)
    }

    /// RTCP for a receiver on `source`: unicast binds `source.rtcp_addr()` and has no peer until
    /// the caller names one (reply to the SR's source); multicast joins GROUP:port+1.
    pub fn open_for_receiver(source: &RtpUrl, o: &SocketOptions) -> Result<RtcpSocket, UdpError> {
        if source.is_multicast() {
            return Self::open_multicast(source, o);
        }
        let at = source.rtcp_addr();
        let socket = new_udp(&at)?;
        bind(&socket, at)?;
        Self::finish(socket, None, source, o)
    }

    fn open_multicast(url: &RtpUrl, o: &SocketOptions) -> Result<RtcpSocket, UdpError> {
        let group = url.rtcp_addr();
        let socket = new_udp(&group)?;
        bind_multicast(&socket, url, group)?;
        set_send_options(&socket, url)?;
        Self::finish(socket, Some(group), url, o)
    }

    fn finish(
        socket: Socket,
        peer: Option<SocketAddr>,
        url: &RtpUrl,
        o: &SocketOptions,
    ) -> Result<RtcpSocket, UdpError> {
        let (rxq_ovfl, _) = set_recv_options(&socket, url.rtcp_addr(), o)?;
        Ok(RtcpSocket {
            socket,
            peer,
            rxq_ovfl,
        })
    }

    /// Where [`RtcpSocket::send`] sends: the destination's or group's RTCP address, or for a
    /// unicast receiver whatever was set with [`RtcpSocket::set_peer`].
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    pub fn set_peer(&mut self, peer: SocketAddr) {
        self.peer = Some(peer);
    }

    pub fn send(&self, packet: &[u8]) -> Result<usize, UdpError> {
        send_to(&self.socket, packet, self.peer.ok_or(UdpError::NoPeer)?)
    }

    pub fn send_to(&self, packet: &[u8], to: SocketAddr) -> Result<usize, UdpError> {
        send_to(&self.socket, packet, to)
    }

    /// Receives one report. A read timeout shows as an error with [`is_timeout`].
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<RecvMeta> {
        recv_meta(&self.socket, buf, self.rxq_ovfl)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        local_addr(&self.socket)
    }

    pub fn socket(&self) -> &Socket {
        &self.socket
    }
}

fn local_addr(s: &Socket) -> io::Result<SocketAddr> {
    s.local_addr()?
        .as_socket()
        .ok_or_else(|| io::ErrorKind::InvalidData.into())
}

/// Room for SCM_TIMESTAMPNS (CMSG_SPACE(16) = 32) and SO_RXQ_OVFL (CMSG_SPACE(4) = 24), and spare.
#[repr(C, align(8))]
struct CmsgBuf([u8; 128]);

fn recv_meta(s: &Socket, buf: &mut [u8], rxq_ovfl: bool) -> io::Result<RecvMeta> {
    // SAFETY (zeroed): plain C structs.
    let mut name: libc::sockaddr_storage = unsafe { zeroed() };
    let mut cmsg = CmsgBuf([0; 128]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.0.as_mut_ptr().cast();
    msg.msg_controllen = cmsg.0.len() as _;
    let n = loop {
        // SAFETY: every pointer in `msg` refers to a live local or to `buf`, with its length.
        let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, 0) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut meta = RecvMeta {
        len: n.min(buf.len()),
        src: sockaddr_to_std(&name).ok_or(io::ErrorKind::InvalidData)?,
        kernel_rx_realtime_ns: None,
        dropped_total: rxq_ovfl.then_some(0),
        truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
    };
    // SAFETY: the kernel filled `msg_controllen` bytes of well-formed cmsgs into `cmsg`; the
    // CMSG_* macros stay within it, and data is read unaligned with its length checked.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let h = &*c;
            let data = libc::CMSG_DATA(c);
            let data_len = (h.cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
            if h.cmsg_level == libc::SOL_SOCKET {
                if h.cmsg_type == libc::SCM_TIMESTAMPNS && data_len >= size_of::<libc::timespec>() {
                    let ts = std::ptr::read_unaligned(data.cast::<libc::timespec>());
                    meta.kernel_rx_realtime_ns =
                        Some((ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64);
                } else if h.cmsg_type == libc::SO_RXQ_OVFL && data_len >= 4 {
                    meta.dropped_total = Some(std::ptr::read_unaligned(data.cast::<u32>()));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(meta)
}

fn sockaddr_to_std(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    let p = (s as *const libc::sockaddr_storage).cast::<u8>();
    match s.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in; storage is large enough.
            let a = unsafe { std::ptr::read_unaligned(p.cast::<libc::sockaddr_in>()) };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddrV4::new(ip, u16::from_be(a.sin_port)).into())
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { std::ptr::read_unaligned(p.cast::<libc::sockaddr_in6>()) };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(
                SocketAddrV6::new(
                    ip,
                    u16::from_be(a.sin6_port),
                    a.sin6_flowinfo,
                    a.sin6_scope_id,
                )
                .into(),
            )
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use std::sync::atomic::{AtomicU8, Ordering};

    const LO: Ipv4Addr = Ipv4Addr::LOCALHOST;

    fn opts() -> SocketOptions {
        SocketOptions {
            buffer_bytes: 1 << 20,
            read_timeout: Some(Duration::from_secs(2)),
        }
    }

    fn lo_receiver() -> (UdpReceiver, SocketAddr) {
        let r = UdpReceiver::open(&RtpUrl::unicast((LO, 0).into()), &opts()).unwrap();
        let a = r.local_addr().unwrap();
        (r, a)
    }

    /// A fresh 239.255.77.x group per test, so parallel tests do not hear each other.
    fn group() -> Ipv4Addr {
        static NEXT: AtomicU8 = AtomicU8::new(1);
        Ipv4Addr::new(239, 255, 77, NEXT.fetch_add(1, Ordering::Relaxed))
    }

    #[test]
    fn unicast_round_trip_with_kernel_timestamp() {
        let clock = Clock::new();
        let (rx, at) = lo_receiver();
        assert!(rx.recv_buffer() >= 1 << 20, "granted {}", rx.recv_buffer());
        let tx = UdpSender::open(&RtpUrl::unicast(at), &opts()).unwrap();
        assert_eq!(tx.send(b"hello").unwrap(), 5);
        let mut buf = [0u8; 64];
        let m = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..m.len], b"hello");
        assert_eq!(
            m.src,
            tx.local_addr()
                .map(|a| SocketAddr::new(LO.into(), a.port()))
                .unwrap()
        );
        assert!(!m.truncated);
        assert_eq!(m.dropped_total, Some(0));
        let ts = m
            .kernel_rx_realtime_ns
            .expect("SO_TIMESTAMPNS gave no timestamp");
        let age = clock.realtime_ns() as i128 - ts as i128;
        assert!(
            (0..1_000_000_000).contains(&age),
            "kernel timestamp {age} ns from now"
        );
        assert!(clock.timestamp_from_realtime_ns(ts) <= clock.now());
    }

    #[test]
    fn truncation_and_timeout_are_reported() {
        let (rx, at) = lo_receiver();
        rx.socket()
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let tx = UdpSender::open(&RtpUrl::unicast(at), &opts()).unwrap();
        tx.send(&[7u8; 100]).unwrap();
        let mut small = [0u8; 10];
        let m = rx.recv(&mut small).unwrap();
        assert!(m.truncated && m.len == 10);
        assert!(is_timeout(&rx.recv(&mut small).unwrap_err()));
    }

    #[test]
    fn multicast_round_trip_on_loopback() {
        let g = group();
        let src = RtpUrl::multicast((g, 0).into(), Some(LO));
        let rx = UdpReceiver::open(&src, &opts()).unwrap();
        let port = rx.local_addr().unwrap().port();
        // A second receiver shares the port (SO_REUSEPORT) and hears the same datagrams.
        let rx2 =
            UdpReceiver::open(&RtpUrl::multicast((g, port).into(), Some(LO)), &opts()).unwrap();
        let dest =
            RtpUrl::parse_destination(&format!("rtp://{g}:{port}?ttl=1&iface=127.0.0.1")).unwrap();
        let tx = UdpSender::open(&dest, &opts()).unwrap();
        tx.send(b"group").unwrap();
        let mut buf = [0u8; 64];
        for r in [&rx, &rx2] {
            let m = r.recv(&mut buf).unwrap();
            assert_eq!(&buf[..m.len], b"group");
            assert!(m.kernel_rx_realtime_ns.is_some());
        }
    }

    #[test]
    fn send_to_many_reaches_three_receivers() {
        let rxs: Vec<_> = (0..3).map(|_| lo_receiver()).collect();
        let mut dests: Vec<SocketAddr> = rxs.iter().map(|(_, a)| *a).collect();
        let tx = UdpSender::open(&RtpUrl::unicast(dests[0]), &opts()).unwrap();
        let out = tx.send_to_many(b"fan", &dests);
        assert_eq!((out.sent, out.failed), (3, 0), "{:?}", out.first_error);
        let mut buf = [0u8; 16];
        for (r, _) in &rxs {
            let m = r.recv(&mut buf).unwrap();
            assert_eq!(&buf[..m.len], b"fan");
        }
        // An IPv6 destination on an IPv4 socket fails alone; the others still get the packet.
        dests.insert(1, "[::1]:9".parse().unwrap());
        let out = tx.send_to_many(b"fan2", &dests);
        assert_eq!((out.sent, out.failed), (3, 1));
        assert!(out.first_error.unwrap().to_string().contains("[::1]:9"));
        for (r, _) in &rxs {
            let m = r.recv(&mut buf).unwrap();
            assert_eq!(&buf[..m.len], b"fan2");
        }
        // More destinations than one batch.
        let many = vec![rxs[0].1; FANOUT_BATCH + 5];
        assert_eq!(tx.send_to_many(b"x", &many).sent, FANOUT_BATCH + 5);
    }

    #[test]
    fn unicast_rtcp_round_trip() {
        // The receiver binds port+1 of its source URL; port 0 (a free port) stands in here.
        let mut rx =
            RtcpSocket::open_for_receiver(&RtpUrl::unicast((LO, 0).into()), &opts()).unwrap();
        let rtcp_at = rx.local_addr().unwrap();
        assert!(matches!(rx.send(b"rr"), Err(UdpError::NoPeer)));
        let dest = RtpUrl::unicast(SocketAddr::new(LO.into(), rtcp_at.port() - 1));
        let tx = RtcpSocket::open_for_sender(&dest, &opts()).unwrap();
        assert_eq!(tx.peer(), Some(rtcp_at));
        tx.send(b"SR").unwrap();
        let mut buf = [0u8; 16];
        let m = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..m.len], b"SR");
        rx.set_peer(m.src);
        rx.send(b"RR").unwrap();
        let m = tx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..m.len], b"RR");
        assert_eq!(m.src, rtcp_at);
    }

    #[test]
    fn multicast_rtcp_everyone_hears_everyone() {
        let g = group();
        let probe =
            UdpReceiver::open(&RtpUrl::multicast((g, 0).into(), Some(LO)), &opts()).unwrap();
        let port = probe.local_addr().unwrap().port() & !1;
        let url = RtpUrl::multicast((g, port).into(), Some(LO));
        let tx = RtcpSocket::open_for_sender(&url, &opts()).unwrap();
        let rx = RtcpSocket::open_for_receiver(&url, &opts()).unwrap();
        assert_eq!(tx.peer(), Some(url.rtcp_addr()));
        let mut buf = [0u8; 16];
        tx.send(b"SR").unwrap();
        for s in [&rx, &tx] {
            let m = s.recv(&mut buf).unwrap();
            assert_eq!(&buf[..m.len], b"SR");
        }
        rx.send(b"RR").unwrap();
        for s in [&tx, &rx] {
            let m = s.recv(&mut buf).unwrap();
            assert_eq!(&buf[..m.len], b"RR");
        }
    }

    #[test]
    fn unreachable_destinations_fail_at_open_with_advice() {
        // Loopback interface, external destination: EINVAL from the route lookup.
        let url = RtpUrl::parse_destination("rtp://10.1.2.3:5004?iface=127.0.0.1").unwrap();
        let e = UdpSender::open(&url, &opts()).unwrap_err();
        assert!(matches!(e, UdpError::Unreachable { .. }), "{e}");
        assert!(
            e.to_string().starts_with("cannot reach 10.1.2.3:5004: "),
            "{e}"
        );
        let e = UdpError::from_send(
            "10.1.2.3:5004".parse().unwrap(),
            io::Error::from_raw_os_error(libc::ENETUNREACH),
        );
        assert_eq!(
            e.to_string(),
            "cannot reach 10.1.2.3:5004: no route (ENETUNREACH); check the address and the interface"
        );
        // In a network namespace of its own (no routes, lo down) the kernel says ENETUNREACH.
        let got = std::thread::spawn(|| {
            // SAFETY: unshare affects only this thread, which exits at the end of the closure.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return None; // not root: skip
            }
            let url = RtpUrl::parse_destination("rtp://10.1.2.3:5004").unwrap();
            Some(UdpSender::open(&url, &opts()).unwrap_err().to_string())
        })
        .join()
        .unwrap();
        if let Some(msg) = got {
            assert!(msg.contains("ENETUNREACH"), "{msg}");
        }
    }

    #[test]
    fn bind_conflicts_are_explained() {
        let (_rx, at) = lo_receiver();
        let e = UdpReceiver::open(&RtpUrl::unicast(at), &opts()).unwrap_err();
        assert!(e.to_string().contains("EADDRINUSE"), "{e}");
    }
}
