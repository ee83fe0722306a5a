//! The RTP socket's datagrams into the session (SRTP undone, kernel times read, FEC's rebuilt
//! packets recorded), and where a unicast receiver's reports go.

use super::output::{record, record_rebuilt, Outputs};
use super::{send_report, RecvError};
use metronome_rt::clock::Clock;
use metronome_rt::udp::{self, RtcpSocket, UdpReceiver};
use metronome_session::receiver::ReceiverSession;
use metronome_session::srtp::ReceiverSrtp;
use metronome_wire::Ssrc;
use std::net::IpAddr;

/// The RTP socket and what the driver counts about its datagrams, beside what the session counts.
pub(super) struct RtpIn {
    pub(super) rtp: UdpReceiver,
    pub(super) without_ts: u64,
    pub(super) overflows: u64,
    pub(super) truncated: u64,
    /// The stream's SRTP, for both sockets' datagrams and the reports sent.
    pub(super) srtp: Option<ReceiverSrtp>,
    /// The host the last accepted RTP packet came from: FEC is taken only from it.
    pub(super) media_from: Option<IpAddr>,
}

impl RtpIn {
    /// Reads up to `max` queued datagrams (fewer once `packets` accepted packets are reached) and
    /// hands each to the session and the outputs.
    pub(super) fn read(
        &mut self,
        clock: &Clock,
        session: &mut ReceiverSession,
        out: &mut Outputs,
        buf: &mut [u8],
        max: usize,
        packets: Option<u64>,
    ) -> Result<(), RecvError> {
        for _ in 0..max {
            if packets.is_some_and(|p| session.counters().rtp_packets >= p) {
                break;
            }
            let meta = match self.rtp.recv(buf) {
                Ok(m) => m,
                Err(e) if udp::is_timeout(&e) => break,
                Err(e) => {
                    let at = self
                        .rtp
                        .local_addr()
                        .map(|a| a.to_string())
                        .unwrap_or_default();
                    return Err(RecvError::Io(at, e));
                }
            };
            self.without_ts += meta.kernel_rx_realtime_ns.is_none() as u64;
            let (arrival, wall) = clock.arrival(meta.kernel_rx_realtime_ns);
            if let Some(d) = meta.dropped_total {
                self.overflows = d as u64;
            }
            self.truncated += meta.truncated as u64;
            let data = match &mut self.srtp {
                None => &buf[..meta.len],
                Some(k) => match k.rtp(&buf[..meta.len]) {
                    Some(plain) => plain,
                    None => continue,
                },
            };
            let rec = session.handle_rtp(arrival, Some(wall), data);
            if rec.is_ok() {
                self.media_from = Some(meta.src.ip());
            }
            // A retransmission is given back as the packet it repairs.
            let data = match &rec {
                Ok(r) if r.repaired => session.repaired_packet(),
                _ => data,
            };
            record(out, arrival, wall.to_unix_nanos(), data, &rec)?;
            // A packet may let FEC rebuild others (or free one rebuilt ahead of it).
            record_rebuilt(session, out, arrival, wall.to_unix_nanos())?;
        }
        Ok(())
    }

    /// An RTCP datagram as the session takes it (decrypted, for SRTP; `None`: rejected).
    pub(super) fn rtcp_in<'a>(&'a mut self, datagram: &'a [u8]) -> Option<&'a [u8]> {
        match &mut self.srtp {
            None => Some(datagram),
            Some(k) => k.rtcp_in(datagram),
        }
    }

    /// Sends one of this receiver's reports (as SRTCP, for SRTP); 1 if it left.
    pub(super) fn send_report(&mut self, rtcp: &RtcpSocket, report: &[u8]) -> u64 {
        match &mut self.srtp {
            None => send_report(rtcp, report),
            Some(k) => k.rtcp_out(report).map_or(0, |p| send_report(rtcp, p)),
        }
    }
}

/// Where a unicast receiver's reports go: back to where the stream's sender reports from
/// (followed when a restarted sender reports from a new port). A sender may report before its
/// first packet arrives (Metronome's sends its first report at the stream's start): the last
/// such report's SSRC and address are kept, and followed once a packet shows the SSRC is the
/// stream's. Nothing else, such as a stray datagram, decides it.
#[derive(Default)]
pub(super) struct PeerFollower {
    pub(super) early: Option<(Ssrc, std::net::SocketAddr)>,
}

impl PeerFollower {
    /// An RTCP datagram from `src`; `from_sender`: the session knows it as the stream's sender's.
    pub(super) fn heard(
        &mut self,
        rtcp: &mut RtcpSocket,
        from_sender: bool,
        data: &[u8],
        src: std::net::SocketAddr,
    ) {
        if from_sender {
            if rtcp.peer() != Some(src) {
                rtcp.set_peer(src);
            }
            self.early = None;
        } else if let Some(ssrc) = sender_report_ssrc(data) {
            self.early = Some((ssrc, src));
        }
    }

    /// Follows a report that came early, once its SSRC is a source of the session.
    pub(super) fn settle(&mut self, rtcp: &mut RtcpSocket, session: &ReceiverSession) {
        let Some((ssrc, src)) = self.early else {
            return;
        };
        if session.sources().iter().any(|s| s.ssrc == ssrc) {
            if rtcp.peer().is_none() {
                rtcp.set_peer(src);
            }
            self.early = None;
        }
    }
}

/// The SSRC of a compound RTCP packet that starts with a sender report (RFC 3550 §6.4.1).
pub(super) fn sender_report_ssrc(data: &[u8]) -> Option<Ssrc> {
    let head: [u8; 8] = data.get(..8)?.try_into().ok()?;
    (head[0] >> 6 == 2 && head[1] == 200)
        .then(|| Ssrc::from_be_bytes([head[4], head[5], head[6], head[7]]))
}
