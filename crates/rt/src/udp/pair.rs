//! An RTP/RTCP port pair bound together, as RTSP SETUP hands out in `server_port=P-(P+1)`
//! (RFC 2326 §12.39: the server's ports; RFC 3550 §11: RTP on an even port, RTCP on the next).

use super::socket::{bind, new_udp, set_buffer, set_recv_options, set_send_options};
use super::{RtcpSocket, SocketOptions, UdpError, UdpSender};
use crate::url::RtpUrl;
use std::net::{IpAddr, SocketAddr};

/// Attempts at finding a free even/odd pair before giving up.
const ATTEMPTS: usize = 64;

/// Binds RTP on an even port of `local` and RTCP on the port above it. The RTP socket sends to
/// `to_rtp`, the RTCP socket to `to_rtcp` (and hears the reports sent back to it).
pub fn bind_pair(
    local: IpAddr,
    to_rtp: SocketAddr,
    to_rtcp: SocketAddr,
    o: &SocketOptions,
) -> Result<(UdpSender, RtcpSocket), UdpError> {
    let dest = RtpUrl::unicast(to_rtp);
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let rtp = new_udp(&to_rtp)?;
        bind(&rtp, SocketAddr::new(local, 0))?;
        let port = super::socket::local_addr(&rtp)
            .map_err(UdpError::Socket)?
            .port();
        // An odd port, or an even one whose neighbour is taken: try another.
        if port % 2 == 1 || port == u16::MAX {
            continue;
        }
        let rtcp = new_udp(&to_rtcp)?;
        let rtcp_at = SocketAddr::new(local, port + 1);
        if let Err(e) = bind(&rtcp, rtcp_at) {
            last = Some(e);
            continue;
        }
        set_send_options(&rtp, &dest)?;
        let send_buffer = set_buffer(&rtp, o.buffer_bytes, false);
        set_send_options(&rtcp, &RtpUrl::unicast(to_rtcp))?;
        let (rxq_ovfl, _) = set_recv_options(&rtcp, rtcp_at, o)?;
        return Ok((
            UdpSender::from_bound(rtp, dest, send_buffer),
            RtcpSocket::from_bound(rtcp, Some(to_rtcp), rxq_ovfl),
        ));
    }
    Err(last.unwrap_or_else(|| UdpError::Bind {
        addr: SocketAddr::new(local, 0),
        source: std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!("no free even/odd port pair found in {ATTEMPTS} tries"),
        ),
    }))
}
