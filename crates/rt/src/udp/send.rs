//! Media out: [`UdpSender`], one datagram at a time or fanned out with `sendmmsg`.

use super::socket::{
    bind, local_addr, local_any, new_udp, probe_route, set_buffer, set_send_options,
};
use super::{SocketOptions, UdpError};
use crate::url::RtpUrl;
use socket2::{SockAddr, Socket};
use std::io;
use std::mem::zeroed;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

/// Most destinations per `sendmmsg` call; longer lists are sent in several calls.
pub const FANOUT_BATCH: usize = 32;

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

    /// The socket and its destination, to hand the port to another sender
    /// ([`crate::udp::BatchSender::from_socket`]).
    pub fn into_socket(self) -> (Socket, RtpUrl) {
        (self.socket, self.dest)
    }

    /// A socket already bound and set up (see [`super::bind_pair`]).
    pub(super) fn from_bound(socket: Socket, dest: RtpUrl, send_buffer: usize) -> UdpSender {
        UdpSender {
            socket,
            dest,
            send_buffer,
        }
    }

    /// The destination [`send`](Self::send) sends to.
    pub fn destination(&self) -> &RtpUrl {
        &self.dest
    }

    /// SO_SNDBUF as granted (kernel-doubled).
    pub fn send_buffer(&self) -> usize {
        self.send_buffer
    }

    /// The address and port the datagrams leave from (the source address a receiver sees).
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

    /// Sends one datagram to `to` instead of the destination; returns the bytes sent.
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
    /// Destinations the packet was handed to the kernel for.
    pub sent: usize,
    /// Destinations whose send failed and were skipped; `sent + failed` is the number of
    /// destinations.
    pub failed: usize,
    /// The first failure, naming its destination.
    pub first_error: Option<UdpError>,
}

pub(super) fn send_to(s: &Socket, packet: &[u8], to: SocketAddr) -> Result<usize, UdpError> {
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
