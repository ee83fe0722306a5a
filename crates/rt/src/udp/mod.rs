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

mod batch;
mod cmsg;
mod pair;
mod recv;
mod rtcp;
mod send;
mod socket;
#[cfg(test)]
mod tests;
mod tuning;

pub use batch::{
    BatchError, BatchReceiver, BatchSender, Datagram, Datagrams, GsoStatus, RecvBufs, SendPath,
    GSO_MAX_SEGMENTS, RECV_BATCH_MAX,
};
pub use pair::bind_pair;
pub use recv::UdpReceiver;
pub use rtcp::RtcpSocket;
pub use send::{FanOut, UdpSender, FANOUT_BATCH};
pub use tuning::{
    classify, limit_sysctl, read_limit, sysctl_command, tune_buffers, wanted_for, BufferReport,
    MAX_SOCKET_BUFFER,
};

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
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

/// What one received datagram came with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes written into the buffer.
    pub len: usize,
    /// The sender's address and port, as the kernel reports it (`recvmsg`'s `msg_name`).
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
    /// `socket(2)` failed (out of file descriptors, or the address family is not supported),
    /// or the address of a just-bound socket could not be read.
    #[error("cannot create a UDP socket: {}", explain(.0))]
    Socket(io::Error),
    /// The local address could not be bound: the port is taken (`EADDRINUSE`), the address is
    /// not on this host, or a port below 1024 needs privileges. [`bind_pair`] also returns it
    /// when no free even/odd port pair was found.
    #[error("cannot bind {addr}: {}", explain(.source))]
    Bind {
        /// The local address asked for (port 0: any free port).
        addr: SocketAddr,
        /// The kernel's error.
        source: io::Error,
    },
    /// No route to the destination: found when the socket is opened (a route probe) or when a
    /// send fails with a routing error (see [`UdpError::from_send`]). Retrying will not help
    /// until the address or the interface is fixed.
    #[error("cannot reach {addr}: {}", explain(.source))]
    Unreachable {
        /// The destination.
        addr: SocketAddr,
        /// The kernel's error (`ENETUNREACH`, `EHOSTUNREACH`, `EINVAL`, `EADDRNOTAVAIL`, ...).
        source: io::Error,
    },
    /// The multicast group could not be joined (`IP_ADD_MEMBERSHIP` / `IPV6_JOIN_GROUP`):
    /// usually no such interface (`iface=` names no address of this host) or no multicast
    /// route.
    #[error("cannot join multicast group {group} on interface {iface}: {}", explain(.source))]
    Join {
        /// The group address.
        group: IpAddr,
        /// The IPv4 interface address it was joined on; `0.0.0.0` lets the kernel choose
        /// (always so for an IPv6 group, joined on the default interface).
        iface: Ipv4Addr,
        /// The kernel's error.
        source: io::Error,
    },
    /// A socket option could not be set (TTL, multicast loop or interface, SO_TIMESTAMPNS,
    /// SO_REUSEADDR, the read timeout...).
    #[error("cannot set {option} on the socket for {addr}: {}", explain(.source))]
    Option {
        /// The option's name as in the kernel headers, e.g. `IP_MULTICAST_TTL`.
        option: &'static str,
        /// The address the socket is for (destination of a sender, bound address of a
        /// receiver).
        addr: SocketAddr,
        /// The kernel's error.
        source: io::Error,
    },
    /// A send failed for another reason than routing: a full send buffer (`ENOBUFS`,
    /// `EAGAIN`: usually transient, the next packet may go), a datagram too large
    /// (`EMSGSIZE`), a firewall (`EPERM`), or an invalid request such as a GSO segment size
    /// of 0.
    #[error("sending to {addr} failed: {}", explain(.source))]
    Send {
        /// The destination.
        addr: SocketAddr,
        /// The kernel's error.
        source: io::Error,
    },
    /// An RTCP socket was asked to reply with no peer known: it has neither been given a
    /// destination nor received a report yet.
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
