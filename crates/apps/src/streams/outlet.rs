//! Where a stream's packets go. A stream declared with `rtp://` destinations gets one UDP
//! socket per destination; a stream an RTSP session started gets the session's transport instead:
//! the UDP port pair its SETUP bound, or channels interleaved on its RTSP connection.

use crate::interleaved::{ConnOut, Inbox};
use metronome_rt::udp::{RtcpSocket, UdpSender};
use metronome_time::RtpTime;
use metronome_wire::{SeqNo, Ssrc};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The media side of a destination.
/// Sockets are shared (`Arc`) so that an RTSP session keeps its server ports across PAUSE and
/// PLAY, which stop and start the stream.
pub enum MediaOut {
    Udp(Arc<UdpSender>),
    Interleaved { conn: Arc<ConnOut>, channel: u8 },
}

impl MediaOut {
    /// Sends one RTP packet; false if it could not be sent (counted by the caller).
    pub fn send(&self, packet: &[u8]) -> bool {
        match self {
            MediaOut::Udp(s) => s.send(packet).is_ok(),
            MediaOut::Interleaved { conn, channel } => conn.send_data(*channel, packet),
        }
    }
}

/// The RTCP side of a destination.
pub enum RtcpOut {
    Udp(Arc<RtcpSocket>),
    Interleaved {
        conn: Arc<ConnOut>,
        channel: u8,
        /// The client's RTCP, read off the connection by its reader.
        inbox: Arc<Inbox>,
        /// The client's address, for the reports' bookkeeping.
        peer: SocketAddr,
    },
}

/// One report that came in.
pub struct RtcpIn {
    pub len: usize,
    pub src: SocketAddr,
    /// Kernel receive time, where the transport gives one.
    pub kernel_rx_realtime_ns: Option<u64>,
}

impl RtcpOut {
    pub fn send(&self, packet: &[u8]) {
        match self {
            RtcpOut::Udp(s) => {
                let _ = s.send(packet);
            }
            RtcpOut::Interleaved { conn, channel, .. } => {
                conn.send_data(*channel, packet);
            }
        }
    }

    /// The next report waiting, without blocking.
    pub fn recv(&self, buf: &mut [u8]) -> Option<RtcpIn> {
        match self {
            RtcpOut::Udp(s) => s.recv(buf).ok().map(|m| RtcpIn {
                len: m.len,
                src: m.src,
                kernel_rx_realtime_ns: m.kernel_rx_realtime_ns,
            }),
            RtcpOut::Interleaved { inbox, peer, .. } => inbox.pop(buf).map(|len| RtcpIn {
                len,
                src: *peer,
                kernel_rx_realtime_ns: None,
            }),
        }
    }
}

/// What an RTSP session gives the stream it starts, in place of `rtp://` destinations.
pub struct SessionOutlet {
    pub media: MediaOut,
    pub rtcp: RtcpOut,
    /// Start this far into a file (PLAY with `Range: npt=FROM-`).
    pub from: Duration,
    /// The first packet's sequence number: after a PAUSE, the one after the last packet sent,
    /// so receivers see no gap (RFC 3550 §5.1 asks for a random start only for a new source).
    pub next_seq: Option<SeqNo>,
    /// After a PAUSE, the sender reports of the stream this one continues (its SSRC), oldest
    /// first ([`crate::streams::Stopped`]): the client's first receiver reports echo one of
    /// them.
    pub sent_reports: Vec<u32>,
}

/// Where a started stream's first packet is, for RTSP's RTP-Info header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StartInfo {
    pub ssrc: Ssrc,
    pub seq: SeqNo,
    pub rtptime: RtpTime,
    /// The stream's time zero (its source's timeline) on the wall clock, Unix ns: a packet
    /// due at `d` on the timeline is released at this plus `d`.
    pub epoch_unix_ns: u64,
}
