//! Where a raw sender's packets go: a UDP socket with GSO (an `rtp://` destination, or the
//! server port an RTSP session's SETUP bound), or `$` frames interleaved on an RTSP connection.

use super::report::BufferInfo;
use crate::interleaved::ConnOut;
use metronome_rt::udp::{BatchError, BatchSender, GsoStatus, SendPath, UdpError};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

/// The media side of a raw sender.
pub enum RawOut {
    Udp(Box<BatchSender>),
    /// RTP over the RTSP connection (RFC 2326 §10.12). Frames the connection's queue cannot
    /// take are dropped there and counted (`ConnOut::dropped`); the pacer never blocks.
    Interleaved {
        conn: Arc<ConnOut>,
        channel: u8,
        /// The client, for messages.
        peer: SocketAddr,
    },
}

impl RawOut {
    /// Sends `buf` cut into datagrams of `segment_size` bytes (the last one gets the rest).
    pub fn send_segments(&self, buf: &[u8], segment_size: usize) -> Result<usize, BatchError> {
        match self {
            RawOut::Udp(s) => s.send_segments(buf, segment_size),
            RawOut::Interleaved { .. } => {
                let mut sent = 0;
                for p in buf.chunks(segment_size.max(1)) {
                    self.interleave(p, sent)?;
                    sent += 1;
                }
                Ok(sent)
            }
        }
    }

    /// Sends every packet as its own datagram (or frame), in order.
    pub fn send_batch(&self, packets: &[&[u8]]) -> Result<usize, BatchError> {
        match self {
            RawOut::Udp(s) => s.send_batch(packets),
            RawOut::Interleaved { .. } => {
                for (i, p) in packets.iter().enumerate() {
                    self.interleave(p, i)?;
                }
                Ok(packets.len())
            }
        }
    }

    fn interleave(&self, packet: &[u8], sent: usize) -> Result<(), BatchError> {
        let RawOut::Interleaved {
            conn,
            channel,
            peer,
        } = self
        else {
            return Ok(());
        };
        if conn.send_data(*channel, packet) {
            return Ok(());
        }
        // No allocation here: the error kind is a constant, and the caller keeps only the
        // first error's text.
        Err(BatchError {
            sent,
            source: UdpError::Send {
                addr: *peer,
                source: io::Error::from(io::ErrorKind::WouldBlock),
            },
        })
    }

    /// Where packets go, for reports.
    pub fn destination(&self) -> String {
        match self {
            RawOut::Udp(s) => s.destination().to_string(),
            RawOut::Interleaved { channel, peer, .. } => {
                format!("rtsp interleaved channel {channel} to {peer}")
            }
        }
    }

    /// Whether UDP GSO is in use (interleaved: not applicable, shown as unsupported).
    pub fn gso_status(&self) -> GsoStatus {
        match self {
            RawOut::Udp(s) => s.gso_status(),
            RawOut::Interleaved { .. } => GsoStatus::Unsupported,
        }
    }

    /// Whether batches go out with one GSO call each.
    pub fn uses_gso(&self) -> bool {
        match self {
            RawOut::Udp(s) => {
                matches!(s.gso_status(), GsoStatus::On { .. }) && s.path() == SendPath::Gso
            }
            RawOut::Interleaved { .. } => false,
        }
    }

    /// The send buffer the UDP socket got (interleaved: the connection's queue, which is not
    /// tuned here).
    pub fn buffer(&self) -> BufferInfo {
        match self {
            RawOut::Udp(s) => BufferInfo::from(s.buffer_report()),
            RawOut::Interleaved { .. } => BufferInfo {
                wanted: 0,
                accepted: 0,
                capped: false,
                advice: None,
            },
        }
    }
}
