//! Coded video frames into RTP packets, as a player's depayloader expects them: MPEG-4 Visual
//! as RFC 6416's MP4V-ES, H.264 as RFC 6184 (packetization mode 1). A frame leaves as it is,
//! cut into packets of at most the payload size asked for, with no padding; its packets share
//! its RTP timestamp (its presentation time, RFC 6416 §5.1, RFC 6184 §5.1), and the last
//! carries the marker bit.
//!
//! - MPEG-4: the frame's bytes in order (configuration headers before an I-VOP included), cut
//!   every `max_payload` bytes, as Evalvid cuts them ("without taking notice of macro-block
//!   boundaries"); RFC 6416 §5.2 asks that a fragment not split a header, and the headers are
//!   a few dozen bytes at the start of the frame, so the first packet always holds them.
//! - H.264: each NAL unit of the access unit (Annex B start codes removed) in a packet of its
//!   own when it fits (§5.6), else in FU-A fragments (§5.8).

pub mod depay;
mod h264;
pub mod sdp;

use crate::decode::VideoCodec;
use metronome_time::RtpTime;
use metronome_wire::rtp::{self, RtpError, RtpHeader, SendTimeExt};
use metronome_wire::{PayloadType, SeqNo};

/// How packets are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PayloaderConfig {
    /// The SSRC every packet carries (RFC 3550 §5.1).
    pub ssrc: metronome_wire::Ssrc,
    /// The RTP payload type, 0 to 127: a dynamic one (96 in the lab) that the SDP's
    /// `rtpmap` names.
    pub payload_type: PayloadType,
    /// RTP payload bytes per packet at most.
    pub max_payload: usize,
    /// The first packet's sequence number; later ones count up from it, wrapping.
    pub initial_seq: SeqNo,
    /// The send-time header extension packets carry (filled in when they leave).
    pub send_time: SendTimeExt,
}

/// A packet written into the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketOut {
    /// The whole packet written, bytes: RTP header, extension and payload.
    pub len: usize,
    /// Of which RTP payload, bytes (at most `max_payload`).
    pub payload_len: usize,
    /// Its RTP sequence number.
    pub seq: SeqNo,
    /// The frame's last packet.
    pub marker: bool,
}

/// One stream's payloader: a frame at a time.
pub struct FramePayloader {
    codec: VideoCodec,
    cfg: PayloaderConfig,
    seq: SeqNo,
    /// The frame in hand: its pieces (whole NAL units or the whole MPEG-4 frame) as byte
    /// ranges, which piece is next and how far into it.
    pieces: Vec<(usize, usize)>,
    piece: usize,
    offset: usize,
    rtp_ts: RtpTime,
    scratch: Vec<u8>,
}

impl FramePayloader {
    /// A payloader for `codec`; a `max_payload` under 3 bytes is taken as 3 (an FU-A's two
    /// header bytes and one of data).
    pub fn new(codec: VideoCodec, cfg: PayloaderConfig) -> Self {
        FramePayloader {
            codec,
            seq: cfg.initial_seq,
            scratch: Vec::with_capacity(cfg.max_payload.max(3)),
            cfg: PayloaderConfig {
                max_payload: cfg.max_payload.max(3),
                ..cfg
            },
            pieces: Vec::new(),
            piece: 0,
            offset: 0,
            rtp_ts: RtpTime(0),
        }
    }

    /// Its settings, `max_payload` as taken.
    pub fn config(&self) -> &PayloaderConfig {
        &self.cfg
    }

    /// The next packet's sequence number.
    pub fn next_seq(&self) -> SeqNo {
        self.seq
    }

    /// Takes `frame` (its coded bytes), to be sent with RTP timestamp `rtp_ts`; returns how
    /// many packets it makes.
    pub fn begin(&mut self, frame: &[u8], rtp_ts: RtpTime) -> usize {
        self.pieces.clear();
        match self.codec {
            VideoCodec::Mpeg4Part2 => self.pieces.push((0, frame.len())),
            VideoCodec::H264 => self.pieces.extend(h264::nal_ranges(frame)),
        }
        self.piece = 0;
        self.offset = 0;
        self.rtp_ts = rtp_ts;
        let max = self.cfg.max_payload;
        self.pieces
            .iter()
            .map(|&(a, b)| match self.codec {
                VideoCodec::Mpeg4Part2 => (b - a).div_ceil(max).max(1),
                VideoCodec::H264 => h264::packets_for(b - a, max),
            })
            .sum()
    }

    /// Writes the frame's next packet into `out`; `None` once the frame is all sent.
    pub fn next(&mut self, frame: &[u8], out: &mut [u8]) -> Result<Option<PacketOut>, RtpError> {
        let Some(&(a, b)) = self.pieces.get(self.piece) else {
            return Ok(None);
        };
        let max = self.cfg.max_payload;
        let unit = &frame[a..b];
        let done = match self.codec {
            VideoCodec::Mpeg4Part2 => {
                let end = (self.offset + max).min(unit.len());
                self.scratch.clear();
                self.scratch.extend_from_slice(&unit[self.offset..end]);
                self.offset = end;
                end >= unit.len()
            }
            VideoCodec::H264 => {
                h264::fragment(unit, &mut self.offset, max, &mut self.scratch);
                self.offset >= unit.len()
            }
        };
        if done {
            self.piece += 1;
            self.offset = 0;
        }
        let marker = self.piece >= self.pieces.len();
        let hdr = RtpHeader {
            payload_type: self.cfg.payload_type,
            sequence: self.seq,
            timestamp: self.rtp_ts,
            ssrc: self.cfg.ssrc,
            marker,
        };
        let len = rtp::write_packet(out, &hdr, self.cfg.send_time, &self.scratch)?;
        let seq = self.seq;
        self.seq = self.seq.next();
        Ok(Some(PacketOut {
            len,
            payload_len: self.scratch.len(),
            seq,
            marker,
        }))
    }
}

#[cfg(test)]
mod tests;
