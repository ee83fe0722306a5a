//! The RTP payload format for uncompressed video (RFC 4175 §4): the payload header and its
//! sample row data headers, as a view that checks every bound and a builder into caller buffers;
//! plus the RTP header with Metronome's header extensions (RFC 8285) that raw video uses.
//!
//! RFC 4175 §4.1 payload layout:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   Extended Sequence Number    |            Length             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |F|          Line No            |C|           Offset            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |            Length             |F|          Line No            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |C|           Offset            |                               .
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               .
//! .            sample data of each segment, in header order       .
//! ```
//!
//! Length counts octets of one segment, Line No its scan line, Offset the pixel position of its
//! first sample in the line; C says another sample row header follows (§4.1: it is about
//! headers in this packet, not about the line going on in the next packet).

use crate::rtp::{RtpError, RtpHeader, ONE_BYTE_EXT_PROFILE, RTP_HEADER_LEN, SEND_TIME_EXT_ID};
use crate::SeqNo;

/// The extended sequence number field (RFC 4175 §4.1).
pub const EXT_SEQ_LEN: usize = 2;
/// One sample row data header: Length, F + Line No, C + Offset (RFC 4175 §4.1).
pub const SEGMENT_HEADER_LEN: usize = 6;
/// Line No and Offset are 15-bit fields: the largest line number, 32767.
pub const MAX_LINE: u16 = 0x7fff;
/// The largest pixel offset in a line, 32767 (15 bits).
pub const MAX_OFFSET: u16 = 0x7fff;
/// The one-byte-header element id of the capture-time extension (8 bytes: the frame's capture
/// time, ns on the sender's clock, big-endian).
pub const CAPTURE_TIME_EXT_ID: u8 = 2;

/// [`crate::rtp::shift_sequence`] for RFC 4175, whose 32-bit extended sequence number keeps its
/// high half in the payload header: both halves move back by `by` (mod 2^32). Returns false,
/// changing nothing, for a packet that does not parse as RTP with room for the field.
pub fn shift_sequence(packet: &mut [u8], by: u32) -> bool {
    let offset = match crate::rtp::RtpView::parse(packet) {
        Ok(v) => v.payload().as_ptr() as usize - packet.as_ptr() as usize,
        Err(_) => return false,
    };
    if packet.len() < offset + EXT_SEQ_LEN {
        return false;
    }
    let low = u16::from_be_bytes([packet[2], packet[3]]);
    let high = u16::from_be_bytes([packet[offset], packet[offset + 1]]);
    let seq = ((u32::from(high) << 16) | u32::from(low)).wrapping_sub(by);
    packet[2..4].copy_from_slice(&(seq as u16).to_be_bytes());
    packet[offset..offset + 2].copy_from_slice(&((seq >> 16) as u16).to_be_bytes());
    true
}

/// Why a payload is not a well-formed RFC 4175 payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rfc4175Error {
    /// The payload (length carried, in bytes) is under 8 bytes: it cannot hold the extended
    /// sequence number and one sample row header.
    #[error("payload of {0} bytes is shorter than the extended sequence number and one header")]
    TooShort(usize),
    /// Every sample row header in the payload has its C bit set, so the chain never ends.
    #[error("the continuation bit of the last sample row header is set: the header chain runs off the payload")]
    Unterminated,
    /// The payload is truncated: the headers' Length fields add up to more bytes than follow.
    #[error("the sample row headers declare {declared} data bytes but {have} follow")]
    DataTooShort {
        /// Sum of the headers' Length fields, in bytes.
        declared: usize,
        /// Bytes of sample data after the last header.
        have: usize,
    },
    /// A header to write has a line number above [`MAX_LINE`] or an offset above
    /// [`MAX_OFFSET`].
    #[error("a line number or offset does not fit in 15 bits")]
    FieldRange,
    /// The buffer given to [`write_headers`] cannot hold the extended sequence number and
    /// the headers; also returned, with `need` of one header, when the header list is empty.
    #[error("buffer of {have} bytes is too small for {need}")]
    BufferTooSmall {
        /// Bytes the headers take: 2 + 6 per header.
        need: usize,
        /// Bytes the buffer has.
        have: usize,
    },
}

/// One sample row data header (RFC 4175 §4.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Octets of sample data in this segment.
    pub length: u16,
    /// F: the field (false for progressive video and the first field).
    pub field: bool,
    /// Line No (15 bits).
    pub line: u16,
    /// Offset of the first pixel in the line (15 bits).
    pub offset: u16,
    /// C: another header follows.
    pub cont: bool,
}

impl SegmentHeader {
    /// Decodes the six header bytes; every bit pattern is a valid header.
    pub fn parse(b: [u8; SEGMENT_HEADER_LEN]) -> SegmentHeader {
        SegmentHeader {
            length: u16::from_be_bytes([b[0], b[1]]),
            field: b[2] & 0x80 != 0,
            line: u16::from_be_bytes([b[2] & 0x7f, b[3]]),
            cont: b[4] & 0x80 != 0,
            offset: u16::from_be_bytes([b[4] & 0x7f, b[5]]),
        }
    }
    /// Encodes the header, big-endian as §4.1 lays it out; [`Rfc4175Error::FieldRange`] if
    /// `line` or `offset` needs more than 15 bits.
    pub fn to_bytes(self) -> Result<[u8; SEGMENT_HEADER_LEN], Rfc4175Error> {
        if self.line > MAX_LINE || self.offset > MAX_OFFSET {
            return Err(Rfc4175Error::FieldRange);
        }
        let [l0, l1] = self.length.to_be_bytes();
        let [n0, n1] = self.line.to_be_bytes();
        let [o0, o1] = self.offset.to_be_bytes();
        Ok([
            l0,
            l1,
            n0 | if self.field { 0x80 } else { 0 },
            n1,
            o0 | if self.cont { 0x80 } else { 0 },
            o1,
        ])
    }
}

/// A checked view of an RFC 4175 payload: the header chain ends inside the payload and the data
/// that follows covers every declared length. Bytes after the last segment are ignored.
#[derive(Clone, Copy, Debug)]
pub struct Rfc4175View<'a> {
    ext_seq: u16,
    headers: &'a [u8],
    data: &'a [u8],
}

impl<'a> Rfc4175View<'a> {
    /// Checks an RTP payload (the bytes after the RTP header): the header chain ends inside
    /// it and enough data follows. Never panics on any input.
    pub fn parse(payload: &'a [u8]) -> Result<Rfc4175View<'a>, Rfc4175Error> {
        if payload.len() < EXT_SEQ_LEN + SEGMENT_HEADER_LEN {
            return Err(Rfc4175Error::TooShort(payload.len()));
        }
        let ext_seq = u16::from_be_bytes([payload[0], payload[1]]);
        let rest = &payload[EXT_SEQ_LEN..];
        let mut declared = 0usize;
        let mut n = 0;
        loop {
            let Some(h) = rest.get(n * SEGMENT_HEADER_LEN..(n + 1) * SEGMENT_HEADER_LEN) else {
                return Err(Rfc4175Error::Unterminated);
            };
            declared += usize::from(u16::from_be_bytes([h[0], h[1]]));
            n += 1;
            if h[4] & 0x80 == 0 {
                break;
            }
        }
        let (headers, data) = rest.split_at(n * SEGMENT_HEADER_LEN);
        if data.len() < declared {
            return Err(Rfc4175Error::DataTooShort {
                declared,
                have: data.len(),
            });
        }
        Ok(Rfc4175View {
            ext_seq,
            headers,
            data: &data[..declared],
        })
    }

    /// The high 16 bits of the sender's 32-bit sequence number (RFC 4175 §4.1).
    pub fn ext_seq(&self) -> u16 {
        self.ext_seq
    }
    /// The 32-bit extended sequence number given the RTP header's low 16 bits.
    pub fn extended_sequence(&self, rtp_seq: SeqNo) -> u32 {
        (u32::from(self.ext_seq) << 16) | u32::from(rtp_seq.get())
    }
    /// Number of sample row headers (segments) in the payload; at least one.
    pub fn segment_count(&self) -> usize {
        self.headers.len() / SEGMENT_HEADER_LEN
    }
    /// Sample data octets declared (and present).
    pub fn data_len(&self) -> usize {
        self.data.len()
    }
    /// The segments in order, each with its data.
    pub fn segments(&self) -> Segments<'a> {
        Segments {
            headers: self.headers,
            data: self.data,
        }
    }
}

/// A sample row data header with its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment<'a> {
    /// Where the samples go: line, pixel offset, field and length.
    pub header: SegmentHeader,
    /// The segment's sample data: `header.length` octets of pgroups.
    pub data: &'a [u8],
}

/// Iterator over the segments of an [`Rfc4175View`].
#[derive(Clone, Debug)]
pub struct Segments<'a> {
    headers: &'a [u8],
    data: &'a [u8],
}

impl<'a> Iterator for Segments<'a> {
    type Item = Segment<'a>;
    fn next(&mut self) -> Option<Segment<'a>> {
        let (h, rest) = self.headers.split_first_chunk::<SEGMENT_HEADER_LEN>()?;
        self.headers = rest;
        let header = SegmentHeader::parse(*h);
        // The view checked that the data covers every length; `min` keeps this total anyway.
        let n = usize::from(header.length).min(self.data.len());
        let (data, rest) = self.data.split_at(n);
        self.data = rest;
        Some(Segment { header, data })
    }
}

/// Writes the extended sequence number and `headers` at the start of `buf`, setting each C bit
/// by position (all but the last), and returns the offset where sample data starts.
pub fn write_headers(
    buf: &mut [u8],
    ext_seq: u16,
    headers: &[SegmentHeader],
) -> Result<usize, Rfc4175Error> {
    let need = EXT_SEQ_LEN + SEGMENT_HEADER_LEN * headers.len();
    if buf.len() < need || headers.is_empty() {
        return Err(Rfc4175Error::BufferTooSmall {
            need: need.max(EXT_SEQ_LEN + SEGMENT_HEADER_LEN),
            have: buf.len(),
        });
    }
    buf[..EXT_SEQ_LEN].copy_from_slice(&ext_seq.to_be_bytes());
    for (i, h) in headers.iter().enumerate() {
        let h = SegmentHeader {
            cont: i + 1 < headers.len(),
            ..*h
        };
        let at = EXT_SEQ_LEN + i * SEGMENT_HEADER_LEN;
        buf[at..at + SEGMENT_HEADER_LEN].copy_from_slice(&h.to_bytes()?);
    }
    Ok(need)
}

/// Which RFC 8285 one-byte-header elements a raw-video RTP packet carries.
///
/// Layouts (after the 12-byte fixed header; `0xBEDE`, then the length in 32-bit words):
/// - send time only: exactly [`crate::rtp::write_packet`]'s: id 1, 8 bytes NTP, 3 pad (16 bytes);
/// - capture time only: id 2, 8 bytes capture ns, 3 pad (16 bytes);
/// - both: id 1 + 8 bytes, id 2 + 8 bytes, 2 pad (24 bytes).
///
/// The send time is always first, at [`crate::rtp::SEND_TIME_OFFSET`], so the pacer's
/// [`crate::rtp::patch_send_time`] works unchanged. A receiver reads the capture time with
/// `RtpView::send_time(CAPTURE_TIME_EXT_ID)` (an 8-byte element of that id, as a raw u64).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawHeaderExt {
    /// Whether to carry the 8-byte NTP send-time element (id [`SEND_TIME_EXT_ID`]), written
    /// zero here and stamped by the pacer.
    pub send_time: bool,
    /// The frame's capture time to carry (id [`CAPTURE_TIME_EXT_ID`]), in nanoseconds on the
    /// sender's clock; `None` leaves the element out.
    pub capture_ns: Option<u64>,
}

impl RawHeaderExt {
    /// Bytes the extension adds to the RTP header.
    pub fn len(&self) -> usize {
        match (self.send_time, self.capture_ns.is_some()) {
            (false, false) => 0,
            (true, true) => 24,
            _ => 16,
        }
    }
    /// Whether the packet carries no header extension at all (X bit clear).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Writes a 12-byte RTP header (RFC 3550 §5.1, no CSRC, no padding) and the extension into
/// `buf`; returns where the payload starts. The send-time value is left zero for the pacer.
pub fn write_rtp_header(
    buf: &mut [u8],
    hdr: &RtpHeader,
    ext: RawHeaderExt,
) -> Result<usize, RtpError> {
    let need = RTP_HEADER_LEN + ext.len();
    if buf.len() < need {
        return Err(RtpError::BufferTooSmall {
            need,
            have: buf.len(),
        });
    }
    let x = if ext.is_empty() { 0 } else { 0x10 };
    buf[0] = 0x80 | x;
    buf[1] = (hdr.payload_type.get() & 0x7f) | if hdr.marker { 0x80 } else { 0 };
    buf[2..4].copy_from_slice(&hdr.sequence.to_be_bytes());
    buf[4..8].copy_from_slice(&hdr.timestamp.to_be_bytes());
    buf[8..12].copy_from_slice(&hdr.ssrc.to_be_bytes());
    if ext.is_empty() {
        return Ok(need);
    }
    let e = &mut buf[RTP_HEADER_LEN..need];
    e.fill(0);
    e[..2].copy_from_slice(&ONE_BYTE_EXT_PROFILE.to_be_bytes());
    e[2..4].copy_from_slice(&(((ext.len() - 4) / 4) as u16).to_be_bytes());
    let mut at = 4;
    if ext.send_time {
        e[at] = (SEND_TIME_EXT_ID << 4) | 7;
        at += 9;
    }
    if let Some(ns) = ext.capture_ns {
        e[at] = (CAPTURE_TIME_EXT_ID << 4) | 7;
        e[at + 1..at + 9].copy_from_slice(&ns.to_be_bytes());
    }
    Ok(need)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtp::{patch_send_time, RtpView};
    use crate::PayloadType;
    use metronome_time::NtpTime;

    #[test]
    fn header_fields_round_trip() {
        let h = SegmentHeader {
            length: 1440,
            field: true,
            line: 0x7fff,
            offset: 0x1234,
            cont: true,
        };
        let b = h.to_bytes().unwrap();
        assert_eq!(b, [0x05, 0xa0, 0xff, 0xff, 0x92, 0x34]);
        assert_eq!(SegmentHeader::parse(b), h);
        let big = SegmentHeader { line: 0x8000, ..h };
        assert_eq!(big.to_bytes(), Err(Rfc4175Error::FieldRange));
    }

    #[test]
    fn writes_and_views_several_segments() {
        let hs = [
            SegmentHeader {
                length: 4,
                line: 0,
                offset: 0,
                ..Default::default()
            },
            SegmentHeader {
                length: 2,
                line: 1,
                offset: 6,
                cont: false,
                ..Default::default()
            },
        ];
        let mut buf = [0u8; 32];
        let at = write_headers(&mut buf, 0xabcd, &hs).unwrap();
        assert_eq!(at, 14);
        buf[at..at + 6].copy_from_slice(b"ABCDEF");
        let v = Rfc4175View::parse(&buf[..at + 6]).unwrap();
        assert_eq!(v.ext_seq(), 0xabcd);
        assert_eq!(v.extended_sequence(SeqNo(7)), 0xabcd_0007);
        assert_eq!(v.segment_count(), 2);
        let segs: Vec<_> = v.segments().collect();
        assert!(segs[0].header.cont && !segs[1].header.cont);
        assert_eq!((segs[0].data, segs[1].data), (&b"ABCD"[..], &b"EF"[..]));
        assert_eq!((segs[1].header.line, segs[1].header.offset), (1, 6));
        // Trailing bytes are ignored.
        assert_eq!(Rfc4175View::parse(&buf).unwrap().data_len(), 6);
    }

    #[test]
    fn malformed_payloads_are_errors() {
        assert_eq!(
            Rfc4175View::parse(&[0; 7]).unwrap_err(),
            Rfc4175Error::TooShort(7)
        );
        // C set on the only header.
        let p = [0, 0, 0, 2, 0, 0, 0x80, 0, 1, 2];
        assert_eq!(
            Rfc4175View::parse(&p).unwrap_err(),
            Rfc4175Error::Unterminated
        );
        let p = [0, 0, 0, 4, 0, 0, 0, 0, 1, 2];
        assert_eq!(
            Rfc4175View::parse(&p).unwrap_err(),
            Rfc4175Error::DataTooShort {
                declared: 4,
                have: 2
            }
        );
        assert!(write_headers(&mut [0u8; 7], 0, &[SegmentHeader::default()]).is_err());
        assert!(write_headers(&mut [0u8; 64], 0, &[]).is_err());
    }

    #[test]
    fn shifting_the_sequence_moves_both_halves_with_the_borrow() {
        let hdr = RtpHeader {
            payload_type: PayloadType(96),
            sequence: SeqNo(0x0001),
            timestamp: metronome_time::RtpTime(90_000),
            ssrc: crate::Ssrc(7),
            marker: false,
        };
        let ext = RawHeaderExt {
            send_time: true,
            capture_ns: Some(5),
        };
        let mut buf = [0u8; 64];
        let at = write_rtp_header(&mut buf, &hdr, ext).unwrap();
        let seg = SegmentHeader {
            length: 4,
            ..Default::default()
        };
        let end = at + write_headers(&mut buf[at..], 0x0002, &[seg]).unwrap() + 4;
        let pkt = &mut buf[..end];
        // 0x0002_0001 − 3 = 0x0001_fffe: the borrow crosses into the payload header.
        assert!(shift_sequence(pkt, 3));
        let v = RtpView::parse(pkt).unwrap();
        assert_eq!(v.sequence(), SeqNo(0xfffe));
        let r = Rfc4175View::parse(v.payload()).unwrap();
        assert_eq!(r.extended_sequence(v.sequence()), 0x0001_fffe);
        assert_eq!(r.segment_count(), 1, "the rest of the packet is untouched");
        assert!(!shift_sequence(&mut [0u8; 5], 1), "not RTP: left alone");
    }

    #[test]
    fn rtp_header_with_both_extensions_parses() {
        let hdr = RtpHeader {
            payload_type: PayloadType(96),
            sequence: SeqNo(0xfffe),
            timestamp: metronome_time::RtpTime(90_000),
            ssrc: crate::Ssrc(7),
            marker: true,
        };
        for ext in [
            RawHeaderExt::default(),
            RawHeaderExt {
                send_time: true,
                capture_ns: None,
            },
            RawHeaderExt {
                send_time: false,
                capture_ns: Some(0x1122_3344_5566_7788),
            },
            RawHeaderExt {
                send_time: true,
                capture_ns: Some(0x1122_3344_5566_7788),
            },
        ] {
            let mut buf = [0xeeu8; 64];
            let at = write_rtp_header(&mut buf, &hdr, ext).unwrap();
            assert_eq!(at, 12 + ext.len());
            buf[at..at + 8].copy_from_slice(b"payload!");
            let pkt = &mut buf[..at + 8];
            if ext.send_time {
                patch_send_time(pkt, NtpTime(99));
            }
            let v = RtpView::parse(pkt).unwrap();
            assert_eq!(
                (v.sequence(), v.timestamp(), v.ssrc()),
                (
                    SeqNo(0xfffe),
                    metronome_time::RtpTime(90_000),
                    crate::Ssrc(7)
                )
            );
            assert!(v.marker());
            assert_eq!(v.payload_type(), PayloadType(96));
            assert_eq!(v.payload(), b"payload!");
            assert_eq!(v.send_time(SEND_TIME_EXT_ID).is_some(), ext.send_time);
            if ext.send_time {
                assert_eq!(v.send_time(SEND_TIME_EXT_ID), Some(NtpTime(99)));
            }
            assert_eq!(
                v.send_time(CAPTURE_TIME_EXT_ID).map(|t| t.0),
                ext.capture_ns
            );
        }
    }
}
