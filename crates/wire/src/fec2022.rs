//! SMPTE 2022-1 forward error correction packets (Pro-MPEG COP3, "2-D parity FEC"): the XOR of
//! a row or a column of a matrix of `L` columns by `D` rows of consecutive media packets, sent
//! as RTP packets of their own (column FEC on the media's port + 2, row FEC on port + 4).
//!
//! A FEC packet is a 12-byte RTP header (SSRC 0, its own sequence numbers, the marker the XOR
//! of the protected packets' markers) and a 16-byte FEC header (RFC 2733 §3.2 with SMPTE
//! 2022-1's extension, `E` = 1):
//!
//! ```text
//! |   SNBase low bits (16)  |  Length recovery (16)  |
//! |E| PT recovery (7) |          Mask (24)          |
//! |                 TS recovery (32)                |
//! |N|D|type(3)|index(3)| Offset (8) | NA (8) | SNBase ext (8) |
//! ```
//!
//! then the XOR of the protected packets' bytes after their 12-byte fixed header (CSRCs,
//! header extension, payload and padding: RFC 2733's protected "payload"), each padded with
//! zeros to the longest. `D` is 0 for a column (`Offset` = L, `NA` = D), 1 for a row
//! (`Offset` = 1, `NA` = L).
//!
//! The FEC packet's own P, X and CC are always 0 (any RTP parser reads it); a recovered
//! packet takes them from the packets it was recovered with (a stream's packets share them).
//!
//! GStreamer's `rtpst2022-1-fecenc`/`fecdec` speak this for packets without CSRCs, header
//! extension or padding (MPEG-TS as `rtpmp2tpay` sends it, Metronome's without `send_time`):
//! they XOR the payload alone, and XOR P and X into the FEC packet's own header.
//! [`write()`] and [`parse`] never allocate and never panic on any input.

use crate::rtp::RTP_HEADER_LEN;
use crate::{PayloadType, SeqNo};
use metronome_time::RtpTime;

/// Bytes of the FEC header after the RTP header.
pub const FEC_HEADER_LEN: usize = 16;

/// The payload type of FEC packets where Metronome chooses (GStreamer's default).
pub const FEC_PAYLOAD_TYPE: PayloadType = PayloadType(96);

/// Ports above the media's: column FEC on +2, row FEC on +4 (SMPTE 2022-1 §8).
pub const COLUMN_PORT_OFFSET: u16 = 2;
/// See [`COLUMN_PORT_OFFSET`].
pub const ROW_PORT_OFFSET: u16 = 4;

/// Which packets of the matrix a FEC packet protects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Every `L`-th packet from SNBase, `D` of them (`D` bit 0).
    Column,
    /// `L` consecutive packets from SNBase (`D` bit 1).
    Row,
}

/// Why a datagram is not a FEC packet Metronome can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FecError {
    /// Shorter than an RTP and a FEC header.
    #[error("{0}-byte datagram is too short for a SMPTE 2022-1 FEC packet (28 bytes at least)")]
    TooShort(usize),
    /// Not RTP version 2.
    #[error("not an RTP packet (version {0})")]
    NotRtp(u8),
    /// The `E` bit is clear: an RFC 2733 packet without SMPTE 2022-1's extension.
    #[error("FEC header without SMPTE 2022-1's extension (E = 0)")]
    NotExtended,
    /// Not the XOR code (`type` 0), or the `N` bit set (reserved).
    #[error("FEC type {0} (only 0, XOR, is defined)")]
    NotXor(u8),
    /// Offset or NA zero, or a row whose offset is not 1.
    #[error("FEC geometry offset {offset}, NA {na} does not describe a row or a column")]
    Geometry {
        /// The `Offset` field.
        offset: u8,
        /// The `NA` field.
        na: u8,
    },
    /// The caller's buffer cannot hold the packet.
    #[error("output buffer of {have} bytes is too small for a {need}-byte FEC packet")]
    BufferTooSmall {
        /// Bytes the packet takes.
        need: usize,
        /// Bytes the buffer has.
        have: usize,
    },
}

/// The XOR of a row or a column of media packets: what a FEC packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FecHeader {
    /// The first media packet protected (its sequence number).
    pub sn_base: SeqNo,
    /// The XOR of the protected packets' lengths after their fixed header.
    pub length_recovery: u16,
    /// The XOR of their payload types.
    pub pt_recovery: u8,
    /// The XOR of their timestamps.
    pub ts_recovery: u32,
    /// The XOR of their markers.
    pub marker_recovery: bool,
    /// Row or column.
    pub direction: Direction,
    /// Sequence-number distance between protected packets: 1 for a row, `L` for a column.
    pub offset: u8,
    /// Packets protected: `L` for a row, `D` for a column.
    pub na: u8,
}

impl FecHeader {
    /// The sequence number of the `i`-th packet protected (`i < na`).
    pub fn protected(&self, i: u8) -> SeqNo {
        self.sn_base
            .add(u16::from(i).wrapping_mul(u16::from(self.offset)))
    }

    /// Whether media packet `seq` is one this FEC packet protects.
    pub fn covers(&self, seq: SeqNo) -> bool {
        let d = seq.since(self.sn_base);
        let off = u16::from(self.offset);
        d % off == 0 && d / off < u16::from(self.na)
    }
}

/// A FEC packet read from the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FecView<'a> {
    /// The FEC stream's own sequence number.
    pub sequence: SeqNo,
    /// The FEC stream's timestamp (the last media packet's when it was sent).
    pub timestamp: RtpTime,
    /// The recovery fields.
    pub header: FecHeader,
    /// The XOR of the protected bytes.
    pub payload: &'a [u8],
}

/// Reads a FEC packet; an error says what is wrong with it.
pub fn parse(data: &[u8]) -> Result<FecView<'_>, FecError> {
    if data.len() < RTP_HEADER_LEN + FEC_HEADER_LEN {
        return Err(FecError::TooShort(data.len()));
    }
    if data[0] >> 6 != 2 {
        return Err(FecError::NotRtp(data[0] >> 6));
    }
    // Whatever the FEC packet's own P, X and CC say, its FEC header follows the fixed header
    // (they are written 0; a sender that XORs them in still puts nothing there).
    let f = &data[RTP_HEADER_LEN..];
    if f[4] & 0x80 == 0 {
        return Err(FecError::NotExtended);
    }
    let (n, kind) = (f[12] >> 7, (f[12] >> 3) & 0x07);
    if n != 0 || kind != 0 {
        return Err(FecError::NotXor(kind | n << 3));
    }
    let direction = if f[12] & 0x40 != 0 {
        Direction::Row
    } else {
        Direction::Column
    };
    let (offset, na) = (f[13], f[14]);
    if offset == 0 || na == 0 || (direction == Direction::Row && offset != 1) {
        return Err(FecError::Geometry { offset, na });
    }
    Ok(FecView {
        sequence: SeqNo::from_be_bytes([data[2], data[3]]),
        timestamp: RtpTime::from_be_bytes([data[4], data[5], data[6], data[7]]),
        header: FecHeader {
            sn_base: SeqNo::from_be_bytes([f[0], f[1]]),
            length_recovery: u16::from_be_bytes([f[2], f[3]]),
            pt_recovery: f[4] & 0x7f,
            ts_recovery: u32::from_be_bytes([f[8], f[9], f[10], f[11]]),
            marker_recovery: data[1] & 0x80 != 0,
            direction,
            offset,
            na,
        },
        payload: &f[FEC_HEADER_LEN..],
    })
}

/// The FEC packet's own RTP fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FecStream {
    /// Its payload type ([`FEC_PAYLOAD_TYPE`] where Metronome chooses).
    pub payload_type: PayloadType,
    /// Its sequence number (rows and columns count apart).
    pub sequence: SeqNo,
    /// Its timestamp: the last media packet's when it leaves.
    pub timestamp: RtpTime,
}

/// Writes a FEC packet of `header` and the XORed bytes `payload` into `buf`; its length.
pub fn write(
    buf: &mut [u8],
    stream: &FecStream,
    header: &FecHeader,
    payload: &[u8],
) -> Result<usize, FecError> {
    let need = RTP_HEADER_LEN + FEC_HEADER_LEN + payload.len();
    if buf.len() < need {
        return Err(FecError::BufferTooSmall {
            need,
            have: buf.len(),
        });
    }
    let (rtp, rest) = buf.split_at_mut(RTP_HEADER_LEN);
    rtp[0] = 0x80;
    rtp[1] = (u8::from(header.marker_recovery) << 7) | (stream.payload_type.get() & 0x7f);
    rtp[2..4].copy_from_slice(&stream.sequence.to_be_bytes());
    rtp[4..8].copy_from_slice(&stream.timestamp.to_be_bytes());
    rtp[8..12].fill(0);
    let f = &mut rest[..FEC_HEADER_LEN];
    f[0..2].copy_from_slice(&header.sn_base.to_be_bytes());
    f[2..4].copy_from_slice(&header.length_recovery.to_be_bytes());
    f[4] = 0x80 | (header.pt_recovery & 0x7f);
    f[5..8].fill(0);
    f[8..12].copy_from_slice(&header.ts_recovery.to_be_bytes());
    f[12] = if header.direction == Direction::Row {
        0x40
    } else {
        0
    };
    f[13] = header.offset;
    f[14] = header.na;
    f[15] = 0;
    rest[FEC_HEADER_LEN..FEC_HEADER_LEN + payload.len()].copy_from_slice(payload);
    Ok(need)
}

/// XORs `src` into the start of `dst` (`dst` at least as long).
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> FecHeader {
        FecHeader {
            sn_base: SeqNo(65_534),
            length_recovery: 0x1234,
            pt_recovery: 33,
            ts_recovery: 0xdead_beef,
            marker_recovery: true,
            direction: Direction::Row,
            offset: 1,
            na: 5,
        }
    }

    #[test]
    fn written_packets_read_back_and_say_what_they_protect() {
        let stream = FecStream {
            payload_type: PayloadType(96),
            sequence: SeqNo(7),
            timestamp: RtpTime(42),
        };
        let mut buf = [0u8; 64];
        let n = write(&mut buf, &stream, &row(), &[1, 2, 3]).unwrap();
        assert_eq!(n, 31);
        let v = parse(&buf[..n]).unwrap();
        assert_eq!((v.sequence, v.timestamp.get()), (SeqNo(7), 42));
        assert_eq!(v.header, row());
        assert_eq!(v.payload, &[1, 2, 3]);
        // Any RTP parser reads it: version 2, no padding, extension or CSRCs, SSRC 0.
        let rtp = crate::rtp::RtpView::parse(&buf[..n]).unwrap();
        assert_eq!(
            (rtp.ssrc(), rtp.payload_type()),
            (crate::Ssrc(0), PayloadType(96))
        );
        // A row from 65534 wraps: 65534, 65535, 0, 1, 2.
        assert!(row().covers(SeqNo(2)) && !row().covers(SeqNo(3)) && !row().covers(SeqNo(65_533)));
        assert_eq!(row().protected(4), SeqNo(2));
        let col = FecHeader {
            direction: Direction::Column,
            offset: 4,
            na: 3,
            sn_base: SeqNo(10),
            ..row()
        };
        assert!(col.covers(SeqNo(18)) && !col.covers(SeqNo(22)) && !col.covers(SeqNo(11)));
        assert!(write(&mut [0u8; 30], &stream, &row(), &[1, 2, 3]).is_err());
    }

    #[test]
    fn what_is_not_2022_1_xor_fec_says_why() {
        let stream = FecStream {
            payload_type: PayloadType(96),
            sequence: SeqNo(0),
            timestamp: RtpTime(0),
        };
        let mut buf = [0u8; 40];
        let n = write(&mut buf, &stream, &row(), &[0; 4]).unwrap();
        assert_eq!(parse(&buf[..20]), Err(FecError::TooShort(20)));
        let mut b = buf;
        b[0] = 0x40;
        assert_eq!(parse(&b[..n]), Err(FecError::NotRtp(1)));
        let mut b = buf;
        b[16] &= 0x7f;
        assert_eq!(parse(&b[..n]), Err(FecError::NotExtended));
        let mut b = buf;
        b[24] |= 0x08;
        assert!(matches!(parse(&b[..n]), Err(FecError::NotXor(1))));
        let mut b = buf;
        b[25] = 2; // a row's offset is 1
        assert!(matches!(parse(&b[..n]), Err(FecError::Geometry { .. })));
        let mut b = buf;
        b[26] = 0;
        assert!(matches!(parse(&b[..n]), Err(FecError::Geometry { .. })));
        // Every truncation and every byte value is an answer, not a panic.
        for len in 0..n {
            let _ = parse(&buf[..len]);
        }
        for i in 0..n {
            for v in [0u8, 0x55, 0xff] {
                let mut b = buf;
                b[i] = v;
                let _ = parse(&b[..n]);
            }
        }
    }
}
