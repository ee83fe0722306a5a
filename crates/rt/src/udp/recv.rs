//! Media in: [`UdpReceiver`], and `recvmsg` with the kernel's receive timestamp (SCM_TIMESTAMPNS)
//! and drop counter (SO_RXQ_OVFL) parsed from the control messages.

use super::socket::{bind, bind_multicast, local_addr, new_udp, set_recv_options, socket_drops};
use super::{RecvMeta, SocketOptions, UdpError};
use crate::url::RtpUrl;
use socket2::Socket;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

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

    /// Receives one datagram into `buf`. A read timeout shows as an error with
    /// [`is_timeout`](super::is_timeout).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<RecvMeta> {
        recv_meta(&self.socket, buf, self.rxq_ovfl)
    }

    /// SO_RCVBUF as granted (kernel-doubled).
    pub fn recv_buffer(&self) -> usize {
        self.recv_buffer
    }

    /// Datagrams the kernel dropped on this socket since it was opened, read from the socket
    /// now (`SO_MEMINFO`). [`RecvMeta::dropped_total`] gives the same count, but only as of
    /// the last datagram accepted: drops after it show here alone. `None` where the kernel
    /// does not say.
    pub fn drops(&self) -> Option<u64> {
        socket_drops(&self.socket)
    }

    /// The address the socket is bound to: the actual port when it was opened with port 0.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        local_addr(&self.socket)
    }

    /// The underlying socket, for options not wrapped here.
    pub fn socket(&self) -> &Socket {
        &self.socket
    }
}

/// Room for SCM_TIMESTAMPNS (CMSG_SPACE(16) = 32) and SO_RXQ_OVFL (CMSG_SPACE(4) = 24), and spare.
#[repr(C, align(8))]
struct CmsgBuf([u8; 128]);

pub(super) fn recv_meta(s: &Socket, buf: &mut [u8], rxq_ovfl: bool) -> io::Result<RecvMeta> {
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
    // SAFETY: recvmsg succeeded and filled `msg`, whose control buffer `cmsg` is still live.
    let control = unsafe { super::cmsg::parse(&msg) };
    meta.kernel_rx_realtime_ns = control.kernel_rx_realtime_ns;
    if control.dropped_total.is_some() {
        meta.dropped_total = control.dropped_total;
    }
    Ok(meta)
}

pub(super) fn sockaddr_to_std(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
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
