//! MPEG-TS into RTP/MP2T (RFC 2250 §2), each packet stamped with its release time.

use metronome_time::{MediaClock, RtpTime, Timestamp};
use metronome_wire::mp2t::{MP2T_PAYLOAD_LEN, TS_PER_RTP};
use metronome_wire::rtp::{self, RtpError, RtpHeader, SendTimeExt};
use metronome_wire::ts::TS_PACKET_LEN;
use metronome_wire::{PayloadType, SeqNo, Ssrc};
use std::time::Duration;

/// How an [`Mp2tPacketizer`] numbers and stamps its RTP packets.
#[derive(Clone, Copy, Debug)]
pub struct PacketizerConfig {
    /// The stream's RTP SSRC.
    pub ssrc: Ssrc,
    /// The RTP payload type (33 for MP2T, RFC 3551).
    pub payload_type: PayloadType,
    /// The RTP timestamp clock (90 kHz for MP2T, RFC 2250 §2).
    pub clock: MediaClock,
    /// TS packets per RTP packet (1..=7); 7 makes the paper's 1316-byte payload.
    pub ts_per_packet: usize,
    /// Carry the send-time header extension (RFC 8285), filled in by the pacer at send time.
    pub send_time_ext: bool,
    /// The first packet's RTP sequence number (RFC 3550 §5.1: random).
    pub initial_seq: SeqNo,
    /// The RTP timestamp of the stream's epoch (RFC 3550 §5.1: random).
    pub rtp_ts_base: RtpTime,
}

impl PacketizerConfig {
    /// RTP/MP2T defaults: payload type 33, the 90 kHz clock, 7 TS packets per RTP packet, no
    /// send-time extension.
    pub fn mp2t(ssrc: Ssrc, initial_seq: SeqNo, rtp_ts_base: RtpTime) -> Self {
        PacketizerConfig {
            ssrc,
            payload_type: PayloadType::MP2T,
            clock: MediaClock::VIDEO_90K,
            ts_per_packet: TS_PER_RTP,
            send_time_ext: false,
            initial_seq,
            rtp_ts_base,
        }
    }
}

/// A finished RTP packet, written into the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtpOut {
    /// Bytes written to the buffer (the whole RTP packet).
    pub len: usize,
    /// When it is due to leave: the stream epoch plus the time of its last TS packet (a packet
    /// can leave once all of its content exists).
    pub release: Timestamp,
    /// The packet's RTP sequence number.
    pub seq: SeqNo,
    /// The packet's RTP timestamp: its release time on the configured clock (RFC 2250 §2).
    pub rtp_ts: RtpTime,
    /// Payload octets (for the sender report's octet count, RFC 3550 §6.4.1).
    pub payload_len: usize,
}

/// Groups TS packets into RTP packets. No allocation after construction.
pub struct Mp2tPacketizer {
    cfg: PacketizerConfig,
    epoch: Timestamp,
    pending: [u8; MP2T_PAYLOAD_LEN],
    n_pending: usize,
    last_due: Duration,
    seq: SeqNo,
}

impl Mp2tPacketizer {
    /// A packetizer whose stream time zero is `epoch`.
    pub fn new(mut cfg: PacketizerConfig, epoch: Timestamp) -> Self {
        cfg.ts_per_packet = cfg.ts_per_packet.clamp(1, TS_PER_RTP);
        Mp2tPacketizer {
            seq: cfg.initial_seq,
            cfg,
            epoch,
            pending: [0; MP2T_PAYLOAD_LEN],
            n_pending: 0,
            last_due: Duration::ZERO,
        }
    }

    /// The configuration in use (`ts_per_packet` clamped to 1..=7).
    pub fn config(&self) -> &PacketizerConfig {
        &self.cfg
    }
    /// The instant of stream time zero: due times are offsets from it.
    pub fn epoch(&self) -> Timestamp {
        self.epoch
    }
    /// TS packets waiting for the RTP packet they will complete.
    pub fn pending(&self) -> usize {
        self.n_pending
    }

    /// The RTP timestamp that corresponds to instant `t` (RFC 2250: the transmission time).
    pub fn rtp_timestamp_at(&self, t: Timestamp) -> RtpTime {
        self.cfg
            .clock
            .rtp_timestamp(self.cfg.rtp_ts_base, self.epoch, t)
    }

    /// Adds one TS packet due at `due` on the stream timeline; when it completes an RTP packet,
    /// writes that packet into `out` and returns it.
    pub fn push(
        &mut self,
        ts: &[u8; TS_PACKET_LEN],
        due: Duration,
        out: &mut [u8],
    ) -> Result<Option<RtpOut>, RtpError> {
        let off = self.n_pending * TS_PACKET_LEN;
        self.pending[off..off + TS_PACKET_LEN].copy_from_slice(ts);
        self.n_pending += 1;
        self.last_due = self.last_due.max(due);
        if self.n_pending < self.cfg.ts_per_packet {
            return Ok(None);
        }
        self.emit(out).map(Some)
    }

    /// Emits what is pending as a (shorter) packet, at the end of a stream.
    pub fn flush(&mut self, out: &mut [u8]) -> Result<Option<RtpOut>, RtpError> {
        if self.n_pending == 0 {
            return Ok(None);
        }
        self.emit(out).map(Some)
    }

    fn emit(&mut self, out: &mut [u8]) -> Result<RtpOut, RtpError> {
        let release = self.epoch + self.last_due;
        let rtp_ts = self.rtp_timestamp_at(release);
        let hdr = RtpHeader {
            payload_type: self.cfg.payload_type,
            sequence: self.seq,
            timestamp: rtp_ts,
            ssrc: self.cfg.ssrc,
            marker: false,
        };
        let payload_len = self.n_pending * TS_PACKET_LEN;
        let payload = &self.pending[..payload_len];
        let len = rtp::write_packet(
            out,
            &hdr,
            SendTimeExt::ntp64_if(self.cfg.send_time_ext),
            payload,
        )?;
        self.n_pending = 0;
        let seq = self.seq;
        self.seq = self.seq.next();
        Ok(RtpOut {
            len,
            release,
            seq,
            rtp_ts,
            payload_len,
        })
    }
}
