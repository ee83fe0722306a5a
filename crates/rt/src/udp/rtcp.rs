//! RTCP: [`RtcpSocket`], for either side, unicast or multicast.

use super::recv::recv_meta;
use super::send::send_to;
use super::socket::{
    bind, bind_multicast, bind_multicast_at, local_addr, local_any, new_udp, probe_route,
    set_recv_options, set_send_options,
};
use super::{RecvMeta, SocketOptions, UdpError};
use crate::url::RtpUrl;
use socket2::Socket;
use std::io;
use std::net::SocketAddr;

/// RTCP for a sender or a receiver (see the [module documentation](super)).
#[derive(Debug)]
pub struct RtcpSocket {
    socket: Socket,
    peer: Option<SocketAddr>,
    rxq_ovfl: bool,
}

impl RtcpSocket {
    /// RTCP for a sender to `dest`: sends to `dest.rtcp_addr()` and receives the reports.
    /// For a group, the socket is bound to the RTCP port on any address and joins the group:
    /// it takes the receivers' reports sent to the group and those sent to the sender by
    /// unicast (RFC 5760's unicast feedback, for receivers whose reports cannot reach the
    /// group, as in source-specific multicast).
    pub fn open_for_sender(dest: &RtpUrl, o: &SocketOptions) -> Result<RtcpSocket, UdpError> {
        let to = dest.rtcp_addr();
        if dest.is_multicast() {
            let socket = new_udp(&to)?;
            let any = SocketAddr::new(
                match to {
                    SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
                    SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
                },
                to.port(),
            );
            bind_multicast_at(&socket, dest, to, any)?;
            set_send_options(&socket, dest)?;
            return Self::finish(socket, Some(to), dest, o);
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

    /// A socket already bound and set up (see [`super::bind_pair`]).
    pub(super) fn from_bound(socket: Socket, peer: Option<SocketAddr>, rxq_ovfl: bool) -> Self {
        RtcpSocket {
            socket,
            peer,
            rxq_ovfl,
        }
    }

    /// Where [`RtcpSocket::send`] sends: the destination's or group's RTCP address, or for a
    /// unicast receiver whatever was set with [`RtcpSocket::set_peer`].
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// Sets where [`send`](Self::send) goes: for a unicast receiver, the source address of the
    /// sender reports it heard.
    pub fn set_peer(&mut self, peer: SocketAddr) {
        self.peer = Some(peer);
    }

    /// Sends one RTCP compound packet to the [`peer`](Self::peer); returns the bytes sent.
    /// Fails with [`UdpError::NoPeer`] when no peer is known yet.
    pub fn send(&self, packet: &[u8]) -> Result<usize, UdpError> {
        send_to(&self.socket, packet, self.peer.ok_or(UdpError::NoPeer)?)
    }

    /// Sends one RTCP compound packet to `to`, whatever the peer; returns the bytes sent.
    pub fn send_to(&self, packet: &[u8], to: SocketAddr) -> Result<usize, UdpError> {
        send_to(&self.socket, packet, to)
    }

    /// Receives one report. A read timeout shows as an error with
    /// [`is_timeout`](super::is_timeout).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<RecvMeta> {
        recv_meta(&self.socket, buf, self.rxq_ovfl)
    }

    /// The address the socket is bound to (its port is where reports to it must go).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        local_addr(&self.socket)
    }

    /// The underlying socket, for options not wrapped here.
    pub fn socket(&self) -> &Socket {
        &self.socket
    }
}
