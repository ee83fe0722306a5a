//! Raw video frames into RTP packets (RFC 4175 §4), one packet at a time into caller buffers.
//!
//! A frame's data is in payload order, so each packet's sample data is one contiguous slice of
//! it. Packets are filled greedily: while more than a header and one pgroup fit (the rule of
//! GStreamer's rtpvrawpay, so both cut a frame into the same packets), another segment
//! starts (§4.1: several segments per packet when lines are short), and a line that does not fit
//! goes on in the next packet at a later Offset. All packets of a frame carry the RTP timestamp
//! of its sampling instant at 90 kHz (§4.1) and the last one the marker bit (§4.1, progressive).

use metronome_time::{MediaClock, RtpTime};
use metronome_video::{RawFrame, VideoFormat};
use metronome_wire::rfc4175::{
    write_rtp_header, RawHeaderExt, SegmentHeader, EXT_SEQ_LEN, SEGMENT_HEADER_LEN,
};
use metronome_wire::rtp::{RtpHeader, RTP_HEADER_LEN};
use metronome_wire::{PayloadType, SeqNo, Ssrc};

/// The dynamic payload type used unless configured otherwise.
pub const DEFAULT_PAYLOAD_TYPE: PayloadType = PayloadType(96);
/// RTP payload bytes for a 1500-byte MTU: 1500 − 20 (IPv4) − 8 (UDP) − 12 (RTP) − 32 (room for
/// header extensions).
pub const MTU_1500_MAX_PAYLOAD: usize = 1428;
/// The largest payload: a 65 507-byte UDP datagram minus the RTP header and the largest
/// extension. Datagrams this big are fragmented by the kernel.
pub const MAX_PAYLOAD_LIMIT: usize = 65_507 - RTP_HEADER_LEN - 24;
/// The RTP clock of video (RFC 4175 §6.1).
pub const CLOCK_RATE: u64 = MediaClock::VIDEO_90K.rate() as u64;

/// Why a payloader could not be made, or could not packetise a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RawPayError {
    /// The video format is invalid, or the configured frame rate has a zero term; the message
    /// says which.
    #[error("{0}")]
    Format(String),
    /// `max_payload` cannot hold the payload header, a segment header and more than one
    /// pgroup, or is over [`MAX_PAYLOAD_LIMIT`].
    #[error("max payload {have} is out of range: it must hold the payload header, one segment header and more than one {pgroup}-byte pixel group ({min}) and be at most {max}")]
    MaxPayload {
        /// The configured maximum payload, bytes.
        have: usize,
        /// The smallest usable maximum payload for this format, bytes.
        min: usize,
        /// The largest allowed, bytes ([`MAX_PAYLOAD_LIMIT`]).
        max: usize,
        /// Bytes of one pixel group of the format.
        pgroup: usize,
    },
    /// The payload type does not fit RTP's 7 bits.
    #[error("payload type {0} is not 0..=127")]
    PayloadType(PayloadType),
    /// The frame given is not of the payloader's format (or its data is not the format's size).
    #[error("frame of {got} is not the payloader's {want}")]
    FrameFormat {
        /// The frame's format and data size, as text.
        got: String,
        /// The payloader's format and frame size, as text.
        want: String,
    },
    /// The caller's buffer is smaller than [`RawPayloader::packet_capacity`].
    #[error("output buffer of {have} bytes is smaller than a packet ({need})")]
    BufferTooSmall {
        /// Bytes a packet may take.
        need: usize,
        /// Bytes of the buffer given.
        have: usize,
    },
}

/// How a [`RawPayloader`] numbers, stamps and cuts its packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawPayloaderConfig {
    /// The stream's RTP SSRC.
    pub ssrc: Ssrc,
    /// The RTP payload type, 0..=127 (a dynamic one, 96..=127, in practice; RFC 4175 §6).
    pub payload_type: PayloadType,
    /// The first 32-bit extended sequence number: the low 16 bits go in the RTP header, the high
    /// 16 bits in the RFC 4175 payload header (§4.1).
    pub initial_seq: u32,
    /// The RTP timestamp of frame 0 (RFC 3550 §5.1: random).
    pub rtp_ts_base: RtpTime,
    /// Bytes of RTP payload (RFC 4175 payload header, segment headers and data) per packet.
    pub max_payload: usize,
    /// The frame rate giving each frame's 90 kHz timestamp: `base + index × 90000 × den / num`.
    pub fps_num: u32,
    /// Denominator of the frame rate (`fps_num / fps_den` frames per second); both nonzero.
    pub fps_den: u32,
    /// Leave room for the send-time element, which the pacer fills in (`rtp::patch_send_time`).
    pub send_time_ext: bool,
    /// Carry the frame's capture time (`RawFrame::capture_ns`) in element
    /// `CAPTURE_TIME_EXT_ID` (layouts: `wire::rfc4175::RawHeaderExt`).
    pub capture_time_ext: bool,
}

impl RawPayloaderConfig {
    /// Defaults for `format`: payload type 96, a 1500-byte MTU, the format's frame rate, no
    /// extensions.
    pub fn new(ssrc: Ssrc, format: &VideoFormat) -> RawPayloaderConfig {
        RawPayloaderConfig {
            ssrc,
            payload_type: DEFAULT_PAYLOAD_TYPE,
            initial_seq: 0,
            rtp_ts_base: RtpTime(0),
            max_payload: MTU_1500_MAX_PAYLOAD,
            fps_num: format.fps_num,
            fps_den: format.fps_den,
            send_time_ext: false,
            capture_time_ext: false,
        }
    }
}

/// What [`FramePackets::next_packet`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    /// Bytes written to the buffer (the whole RTP packet).
    pub len: usize,
    /// Last packet of the frame (the RTP marker bit).
    pub marker: bool,
    /// The 32-bit extended sequence number.
    pub seq: u32,
    /// The frame's RTP timestamp (90 kHz clock).
    pub rtp_ts: RtpTime,
    /// Line No and Offset of the first segment.
    pub first_line: u16,
    /// Offset (in pixels) of the first segment in its line.
    pub first_offset: u16,
    /// Sample row segments in the packet (one header each, RFC 4175 §4.1).
    pub segments: usize,
    /// RTP payload bytes (for the sender report's octet count, RFC 3550 §6.4.1).
    pub payload_len: usize,
    /// Position of this packet in its frame (0-based).
    pub index_in_frame: usize,
}

/// Pgroup geometry as byte counts.
#[derive(Clone, Copy, Debug)]
struct Geom {
    pgb: usize,
    xinc: usize,
    yinc: usize,
    row_bytes: usize,
    frame_bytes: usize,
}

impl Geom {
    fn of(f: &VideoFormat) -> Geom {
        let pg = f.pgroup();
        Geom {
            pgb: pg.bytes as usize,
            xinc: pg.xinc as usize,
            yinc: pg.yinc as usize,
            row_bytes: f.row_bytes(),
            frame_bytes: f.frame_bytes(),
        }
    }

    /// Plans one packet's segments starting at byte `pos` of the frame; returns where the next
    /// packet starts. `seg` sees each segment header (C is left for the writer).
    fn plan(&self, pos: usize, max_payload: usize, mut seg: impl FnMut(SegmentHeader)) -> usize {
        let max_seg = usize::from(u16::MAX) / self.pgb * self.pgb;
        let mut space = max_payload.saturating_sub(EXT_SEQ_LEN);
        let mut pos = pos;
        while pos < self.frame_bytes && space > SEGMENT_HEADER_LEN + self.pgb {
            space -= SEGMENT_HEADER_LEN;
            let (row, in_row) = (pos / self.row_bytes, pos % self.row_bytes);
            let n = (self.row_bytes - in_row)
                .min(space / self.pgb * self.pgb)
                .min(max_seg);
            seg(SegmentHeader {
                length: n as u16,
                field: false,
                line: (row * self.yinc) as u16,
                offset: (in_row / self.pgb * self.xinc) as u16,
                cont: false,
            });
            space -= n;
            pos += n;
        }
        pos
    }
}

fn check_max_payload(format: &VideoFormat, max_payload: usize) -> Result<(), RawPayError> {
    let pgroup = format.pgroup().bytes as usize;
    let min = EXT_SEQ_LEN + SEGMENT_HEADER_LEN + pgroup + 1;
    if max_payload < min || max_payload > MAX_PAYLOAD_LIMIT {
        return Err(RawPayError::MaxPayload {
            have: max_payload,
            min,
            max: MAX_PAYLOAD_LIMIT,
            pgroup,
        });
    }
    Ok(())
}

/// Packets a frame of `format` takes with `max_payload` bytes of RTP payload each (the pacing
/// models need it before the frame exists). Errors as [`RawPayloader::new`] does.
pub fn packets_for(format: &VideoFormat, max_payload: usize) -> Result<usize, RawPayError> {
    format
        .validate()
        .map_err(|e| RawPayError::Format(e.to_string()))?;
    check_max_payload(format, max_payload)?;
    let g = Geom::of(format);
    let (mut pos, mut n) = (0, 0);
    while pos < g.frame_bytes {
        pos = g.plan(pos, max_payload, |_| {});
        n += 1;
    }
    Ok(n)
}

/// The RFC 4175 payloader of one stream. Allocates nothing after construction.
#[derive(Clone, Debug)]
pub struct RawPayloader {
    cfg: RawPayloaderConfig,
    format: VideoFormat,
    geom: Geom,
    next_seq: u32,
    packets_per_frame: usize,
}

impl RawPayloader {
    /// A payloader for frames of `format`. Errors if the payload type is over 127, the frame rate
    /// has a zero term, the format is invalid, or `cfg.max_payload` cannot hold one pgroup or is
    /// over [`MAX_PAYLOAD_LIMIT`].
    pub fn new(cfg: RawPayloaderConfig, format: VideoFormat) -> Result<RawPayloader, RawPayError> {
        if !cfg.payload_type.is_valid() {
            return Err(RawPayError::PayloadType(cfg.payload_type));
        }
        if cfg.fps_num == 0 || cfg.fps_den == 0 {
            return Err(RawPayError::Format(format!(
                "frame rate {}/{} for the RTP timestamps must be positive",
                cfg.fps_num, cfg.fps_den
            )));
        }
        let packets_per_frame = packets_for(&format, cfg.max_payload)?;
        Ok(RawPayloader {
            cfg,
            format,
            geom: Geom::of(&format),
            next_seq: cfg.initial_seq,
            packets_per_frame,
        })
    }

    /// The configuration the payloader was made with.
    pub fn config(&self) -> &RawPayloaderConfig {
        &self.cfg
    }
    /// The video format of the frames it takes.
    pub fn format(&self) -> VideoFormat {
        self.format
    }
    /// Packets in every frame.
    pub fn packets_per_frame(&self) -> usize {
        self.packets_per_frame
    }
    /// The extended sequence number of the next packet.
    pub fn next_seq(&self) -> u32 {
        self.next_seq
    }
    fn ext(&self, capture_ns: u64) -> RawHeaderExt {
        RawHeaderExt {
            send_time: self.cfg.send_time_ext,
            capture_ns: self.cfg.capture_time_ext.then_some(capture_ns),
        }
    }
    /// The buffer size [`FramePackets::next_packet`] needs: RTP header, extension, max payload.
    pub fn packet_capacity(&self) -> usize {
        RTP_HEADER_LEN + self.ext(0).len() + self.cfg.max_payload
    }
    /// The RTP timestamp of frame `index`: its sampling instant at 90 kHz (RFC 4175 §4.1).
    pub fn rtp_timestamp(&self, index: u64) -> RtpTime {
        let ticks = MediaClock::VIDEO_90K.frame_ticks(index, self.cfg.fps_num, self.cfg.fps_den);
        self.cfg.rtp_ts_base.add(ticks as u32)
    }

    /// Starts packetising `frame`; its packets come from the returned iterator-like value.
    pub fn begin_frame<'p, 'f>(
        &'p mut self,
        frame: &'f RawFrame,
    ) -> Result<FramePackets<'p, 'f>, RawPayError> {
        if frame.format != self.format || frame.data.len() != self.geom.frame_bytes {
            return Err(RawPayError::FrameFormat {
                got: format!("{} ({} bytes)", frame.format, frame.data.len()),
                want: format!("{} ({} bytes)", self.format, self.geom.frame_bytes),
            });
        }
        let rtp_ts = self.rtp_timestamp(frame.index);
        Ok(FramePackets {
            pay: self,
            frame,
            pos: 0,
            rtp_ts,
            sent: 0,
        })
    }
}

/// The packets of one frame, produced one by one.
pub struct FramePackets<'p, 'f> {
    pay: &'p mut RawPayloader,
    frame: &'f RawFrame,
    pos: usize,
    rtp_ts: RtpTime,
    sent: usize,
}

impl FramePackets<'_, '_> {
    /// The RTP timestamp every packet of this frame carries (90 kHz clock).
    pub fn rtp_ts(&self) -> RtpTime {
        self.rtp_ts
    }
    /// Packets still to come.
    pub fn remaining(&self) -> usize {
        self.pay.packets_per_frame.saturating_sub(self.sent)
    }

    /// Writes the next packet into `buf` (at least [`RawPayloader::packet_capacity`] bytes).
    /// `Ok(None)` once the frame is done.
    pub fn next_packet(&mut self, buf: &mut [u8]) -> Result<Option<PacketInfo>, RawPayError> {
        let g = self.pay.geom;
        if self.pos >= g.frame_bytes {
            return Ok(None);
        }
        let need = self.pay.packet_capacity();
        if buf.len() < need {
            return Err(RawPayError::BufferTooSmall {
                need,
                have: buf.len(),
            });
        }
        let ext = self.pay.ext(self.frame.capture_ns);
        let hdr_len = RTP_HEADER_LEN + ext.len();
        let (_, payload) = buf.split_at_mut(hdr_len);
        // Segment headers go straight into the buffer; each new one sets the previous one's C.
        let mut nseg = 0;
        let mut first = SegmentHeader::default();
        let start = self.pos;
        let end = g.plan(start, self.pay.cfg.max_payload, |h| {
            let at = EXT_SEQ_LEN + nseg * SEGMENT_HEADER_LEN;
            if nseg == 0 {
                first = h;
            } else {
                payload[at - 2] |= 0x80; // C of the previous header (RFC 4175 §4.1)
            }
            // Line and offset fit 15 bits: validated sizes are at most 8192.
            if let Ok(b) = h.to_bytes() {
                payload[at..at + SEGMENT_HEADER_LEN].copy_from_slice(&b);
            }
            nseg += 1;
        });
        let seq = self.pay.next_seq;
        payload[..EXT_SEQ_LEN].copy_from_slice(&((seq >> 16) as u16).to_be_bytes());
        let data_at = EXT_SEQ_LEN + nseg * SEGMENT_HEADER_LEN;
        let n = end - start;
        payload[data_at..data_at + n].copy_from_slice(&self.frame.data[start..end]);
        let marker = end >= g.frame_bytes;
        let hdr = RtpHeader {
            payload_type: self.pay.cfg.payload_type,
            sequence: SeqNo::of_extended(u64::from(seq)),
            timestamp: self.rtp_ts,
            ssrc: self.pay.cfg.ssrc,
            marker,
        };
        write_rtp_header(buf, &hdr, ext).map_err(|_| RawPayError::BufferTooSmall {
            need,
            have: hdr_len,
        })?;
        self.pos = end;
        self.pay.next_seq = seq.wrapping_add(1);
        let info = PacketInfo {
            len: hdr_len + data_at + n,
            marker,
            seq,
            rtp_ts: self.rtp_ts,
            first_line: first.line,
            first_offset: first.offset,
            segments: nseg,
            payload_len: data_at + n,
            index_in_frame: self.sent,
        };
        self.sent += 1;
        Ok(Some(info))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_video::{Depth, Sampling};
    use metronome_wire::rfc4175::Rfc4175View;
    use metronome_wire::rtp::RtpView;

    fn fmt(w: u32, h: u32, s: Sampling) -> VideoFormat {
        VideoFormat::new(w, h, s, Depth::Eight, 25, 1).unwrap()
    }

    #[test]
    fn matches_gstreamer_packing_for_uyvy_64x48_mtu_400() {
        // rtpvrawpay mtu=400 (388 bytes of payload) sends 128 + 128 + 112 bytes of lines 0, 1, 2
        // in its first packet; the same greedy rule gives the same segments.
        let f = fmt(64, 48, Sampling::Ycbcr422);
        let mut cfg = RawPayloaderConfig::new(Ssrc(1), &f);
        cfg.max_payload = 388;
        let mut p = RawPayloader::new(cfg, f).unwrap();
        let frame = RawFrame::new(f);
        let mut pk = p.begin_frame(&frame).unwrap();
        let mut buf = vec![0u8; 400];
        let info = pk.next_packet(&mut buf).unwrap().unwrap();
        assert_eq!(info.len, 400);
        let v = RtpView::parse(&buf[..info.len]).unwrap();
        let segs: Vec<_> = Rfc4175View::parse(v.payload())
            .unwrap()
            .segments()
            .map(|s| (s.header.length, s.header.line, s.header.offset))
            .collect();
        assert_eq!(segs, [(128, 0, 0), (128, 1, 0), (112, 2, 0)]);
        let info = pk.next_packet(&mut buf).unwrap().unwrap();
        assert_eq!((info.first_line, info.first_offset), (2, 56));
    }

    #[test]
    fn a_frame_is_counted_marked_and_timestamped() {
        let f = fmt(720, 576, Sampling::Ycbcr420);
        let mut cfg = RawPayloaderConfig::new(Ssrc(9), &f);
        cfg.initial_seq = 0x0001_fffe;
        cfg.rtp_ts_base = RtpTime(u32::MAX - 10);
        let mut p = RawPayloader::new(cfg, f).unwrap();
        let n = p.packets_per_frame();
        let mut frame = RawFrame::new(f);
        frame.index = 1;
        let mut pk = p.begin_frame(&frame).unwrap();
        let mut buf = vec![0u8; MTU_1500_MAX_PAYLOAD + 12];
        let mut infos = Vec::new();
        while let Some(i) = pk.next_packet(&mut buf).unwrap() {
            assert!(i.len <= buf.len());
            infos.push(i);
        }
        assert_eq!(infos.len(), n);
        assert!(infos[..n - 1].iter().all(|i| !i.marker) && infos[n - 1].marker);
        assert!(infos
            .iter()
            .all(|i| i.rtp_ts == RtpTime(u32::MAX - 10).add(3600)));
        assert_eq!(infos[2].seq, 0x0002_0000);
        assert_eq!(p.next_seq(), 0x0001_fffe + n as u32);
        // 4:2:0 rows are line pairs: Line No steps by 2.
        assert!(infos.iter().all(|i| i.first_line % 2 == 0));
    }

    #[test]
    fn config_errors() {
        let f = fmt(64, 48, Sampling::Rgb);
        let mut cfg = RawPayloaderConfig::new(Ssrc(1), &f);
        cfg.max_payload = 11;
        assert!(matches!(
            RawPayloader::new(cfg, f),
            Err(RawPayError::MaxPayload { min: 12, .. })
        ));
        cfg.max_payload = 12;
        assert_eq!(packets_for(&f, 12).unwrap(), 64 * 48);
        cfg.max_payload = 70_000;
        assert!(RawPayloader::new(cfg, f).is_err());
        cfg.max_payload = 1000;
        cfg.payload_type = PayloadType(200);
        assert!(RawPayloader::new(cfg, f).is_err());
        cfg.payload_type = PayloadType(96);
        let mut p = RawPayloader::new(cfg, f).unwrap();
        let other = RawFrame::new(fmt(64, 46, Sampling::Rgb));
        assert!(p.begin_frame(&other).is_err());
        let frame = RawFrame::new(f);
        let mut pk = p.begin_frame(&frame).unwrap();
        assert!(matches!(
            pk.next_packet(&mut [0u8; 100]),
            Err(RawPayError::BufferTooSmall { need: 1012, .. })
        ));
    }
}
