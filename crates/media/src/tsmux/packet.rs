//! Writers for the pieces of a TS packet: header (§2.4.3.2), adaptation field (§2.4.3.4),
//! PES header (§2.4.3.6) and the PTS field (§2.4.3.7). Each writes into a caller buffer.

use metronome_wire::ts::{encode_pcr, TS_PACKET_LEN, TS_SYNC_BYTE};

/// Size of the TS packet header.
pub(crate) const HEADER_LEN: usize = 4;
/// Bytes a packet has after its header.
pub(crate) const BODY_LEN: usize = TS_PACKET_LEN - HEADER_LEN;
/// The PES header this muxer writes: start code, stream_id, PES_packet_length, two flag bytes,
/// PES_header_data_length and a PTS.
pub const PES_HEADER_LEN: usize = 14;
/// An access unit delimiter NAL (H.264 §7.3.2.4) with a 4-byte start code; primary_pic_type 7
/// ("any slice type"), then the RBSP stop bit.
pub const AUD: [u8; 6] = [0, 0, 0, 1, 0x09, 0xf0];
/// stream_id of the first video stream (Table 2-22).
pub const STREAM_ID_VIDEO: u8 = 0xe0;

/// adaptation_field_control values (Table 2-5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Afc {
    PayloadOnly = 0b01,
    AdaptationOnly = 0b10,
    Both = 0b11,
}

/// Writes the 4-byte header (§2.4.3.2): no transport error, priority 0, not scrambled.
pub(crate) fn write_header(out: &mut [u8; TS_PACKET_LEN], pid: u16, pusi: bool, afc: Afc, cc: u8) {
    out[0] = TS_SYNC_BYTE;
    out[1] = ((pusi as u8) << 6) | ((pid >> 8) as u8 & 0x1f);
    out[2] = pid as u8;
    out[3] = ((afc as u8) << 4) | (cc & 0x0f);
}

/// What goes into an adaptation field.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AdaptationField {
    pub pcr: Option<u64>,
    pub random_access: bool,
    pub discontinuity: bool,
}

impl AdaptationField {
    /// Bytes the field needs without stuffing, counting its length byte; 0 when nothing is set.
    pub(crate) fn min_len(&self) -> usize {
        if self.pcr.is_none() && !self.random_access && !self.discontinuity {
            0
        } else {
            2 + if self.pcr.is_some() { 6 } else { 0 }
        }
    }
}

/// Writes an adaptation field of exactly `total` bytes (length byte included) at `out[4..]`,
/// padding with 0xFF stuffing (§2.4.3.5). `total` must be ≥ `af.min_len()` and ≥ 1; a
/// 1-byte field is `adaptation_field_length` = 0, the one-byte stuffing case.
pub(crate) fn write_adaptation_field(
    out: &mut [u8; TS_PACKET_LEN],
    af: &AdaptationField,
    total: usize,
) {
    debug_assert!(total >= af.min_len().max(1) && total <= BODY_LEN);
    out[4] = (total - 1) as u8;
    if total == 1 {
        return;
    }
    out[5] = ((af.discontinuity as u8) << 7)
        | ((af.random_access as u8) << 6)
        | ((af.pcr.is_some() as u8) << 4);
    let mut pos = 6;
    if let Some(pcr) = af.pcr {
        out[pos..pos + 6].copy_from_slice(&encode_pcr(pcr));
        pos += 6;
    }
    out[pos..HEADER_LEN + total].fill(0xff);
}

/// Encodes a 33-bit timestamp in the 5-byte PTS/DTS layout of §2.4.3.7 with the 4-bit `prefix`
/// ('0010' for a lone PTS).
pub(crate) fn encode_timestamp(prefix: u8, ts: u64) -> [u8; 5] {
    let ts = ts & ((1 << 33) - 1);
    [
        (prefix << 4) | ((ts >> 29) as u8 & 0x0e) | 1,
        (ts >> 22) as u8,
        ((ts >> 14) as u8 & 0xfe) | 1,
        (ts >> 7) as u8,
        ((ts << 1) as u8 & 0xfe) | 1,
    ]
}

/// Decodes the 5-byte PTS/DTS field of §2.4.3.7.
pub fn decode_timestamp(b: &[u8; 5]) -> u64 {
    (((b[0] >> 1) & 0x07) as u64) << 30
        | (b[1] as u64) << 22
        | ((b[2] >> 1) as u64) << 15
        | (b[3] as u64) << 7
        | (b[4] >> 1) as u64
}

/// A video PES header with a PTS and no DTS (§2.4.3.6, §2.4.3.7). DTS equals PTS because the
/// stream has no B-frames, and a DTS equal to the PTS is left out (PTS_DTS_flags '10').
/// `payload_len` is the elementary-stream bytes that follow; PES_packet_length is 0
/// ("unbounded", allowed for video in TS) when the packet would exceed 65535 bytes.
pub(crate) fn pes_header(pts_90k: u64, payload_len: usize) -> [u8; PES_HEADER_LEN] {
    let after_length = 3 + 5 + payload_len;
    let pes_len = if after_length <= 0xffff {
        after_length as u16
    } else {
        0
    };
    let mut h = [0u8; PES_HEADER_LEN];
    h[..3].copy_from_slice(&[0, 0, 1]);
    h[3] = STREAM_ID_VIDEO;
    h[4..6].copy_from_slice(&pes_len.to_be_bytes());
    h[6] = 0x84; // '10', not scrambled, priority 0, data_alignment_indicator 1, not copyrighted, copy
    h[7] = 0x80; // PTS_DTS_flags '10', no other optional fields
    h[8] = 5; // PES_header_data_length
    h[9..14].copy_from_slice(&encode_timestamp(0b0010, pts_90k));
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_wire::ts::TsPacket;

    #[test]
    fn timestamp_round_trip() {
        for ts in [0, 1, 90_000, (1 << 32) + 12345, (1 << 33) - 1] {
            assert_eq!(decode_timestamp(&encode_timestamp(2, ts)), ts);
        }
    }

    #[test]
    fn adaptation_field_reads_back() {
        let mut p = [0u8; TS_PACKET_LEN];
        write_header(&mut p, 0x100, true, Afc::Both, 9);
        let af = AdaptationField {
            pcr: Some(27_000_000 * 5 + 17),
            random_access: true,
            discontinuity: false,
        };
        write_adaptation_field(&mut p, &af, 20);
        let v = TsPacket::parse(&p).unwrap();
        assert_eq!((v.pid(), v.continuity_counter()), (0x100, 9));
        assert_eq!(v.pcr(), af.pcr);
        assert_eq!(v.payload().len(), BODY_LEN - 20);
        assert_eq!(p[5] & 0x40, 0x40);
    }
}
