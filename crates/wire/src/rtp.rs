//! RTP packets (RFC 3550 §5.1) and the send-time header extension (RFC 8285 §4.2).

use metronome_time::NtpTime;
use rtp_types::{RtpPacket, RtpPacketBuilder};

/// Length of the fixed RTP header without CSRCs.
pub const RTP_HEADER_LEN: usize = 12;
/// RFC 8285 §4.2 "defined by profile" value of the one-byte header form.
pub const ONE_BYTE_EXT_PROFILE: u16 = 0xBEDE;
/// The extension id (1..=14) Metronome uses for its send time unless negotiated otherwise.
pub const SEND_TIME_EXT_ID: u8 = 1;
/// The URI an SDP `a=extmap` line names for the send-time element: a 64-bit NTP timestamp of the
/// moment the packet left the sender. (RFC 6051's `ntp-64` carries the sampling instant instead.)
pub const SEND_TIME_EXT_URI: &str = "urn:x-metronome:rtp-hdrext:send-time-ntp64";
/// Bytes the send-time extension adds to a packet: 4 (profile, length) + 1 (element header)
/// + 8 (NTP time) + 3 (padding to a 32-bit word).
pub const SEND_TIME_EXT_LEN: usize = 16;
/// Offset of the 8 NTP bytes in a packet without CSRCs that carries the send-time extension.
pub const SEND_TIME_OFFSET: usize = RTP_HEADER_LEN + 4 + 1;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RtpError {
    #[error("not an RTP packet: {0}")]
    Parse(String),
    #[error("cannot write the RTP packet: {0}")]
    Write(String),
    #[error("output buffer of {have} bytes is too small for a {need}-byte RTP packet")]
    BufferTooSmall { need: usize, have: usize },
}

/// The header fields a sender chooses for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtpHeader {
    pub payload_type: u8,
    pub sequence: u16,
    pub timestamp: u32,
    pub ssrc: u32,
    pub marker: bool,
}

/// Writes an RTP packet into `buf` and returns its length. With `send_time_ext`, the packet carries
/// the one-byte-header extension with a zero send time; the driver fills it in with
/// [`patch_send_time`] at the moment it sends.
pub fn write_packet(
    buf: &mut [u8],
    hdr: &RtpHeader,
    send_time_ext: bool,
    payload: &[u8],
) -> Result<usize, RtpError> {
    const EXT_DATA: [u8; 12] = [(SEND_TIME_EXT_ID << 4) | 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut b = RtpPacketBuilder::<&[u8], &[u8]>::new()
        .payload_type(hdr.payload_type)
        .sequence_number(hdr.sequence)
        .timestamp(hdr.timestamp)
        .ssrc(hdr.ssrc)
        .marker_bit(hdr.marker)
        .payload(payload);
    if send_time_ext {
        b = b.extension(ONE_BYTE_EXT_PROFILE, &EXT_DATA[..]);
    }
    let need = RTP_HEADER_LEN + payload.len() + if send_time_ext { SEND_TIME_EXT_LEN } else { 0 };
    if buf.len() < need {
        return Err(RtpError::BufferTooSmall {
            need,
            have: buf.len(),
        });
    }
    b.write_into(buf)
        .map_err(|e| RtpError::Write(format!("{e:?}")))
}

/// Writes the send time into a packet written by [`write_packet`] with the extension. Does nothing
/// to a packet too short to hold it.
pub fn patch_send_time(packet: &mut [u8], t: NtpTime) {
    if let Some(dst) = packet.get_mut(SEND_TIME_OFFSET..SEND_TIME_OFFSET + 8) {
        dst.copy_from_slice(&t.0.to_be_bytes());
    }
}

/// Moves a packet's sequence number back by `by` (mod 2^16). A sender that dropped `by`
/// packets before they were sent renumbers the ones after them, so that receivers see no gap
/// for packets that never left (RFC 3550 §5.1: the number increments by one for each RTP data
/// packet sent). Does nothing to a packet shorter than an RTP header.
pub fn shift_sequence(packet: &mut [u8], by: u16) {
    if let Some(b) = packet.get_mut(2..4) {
        let seq = u16::from_be_bytes([b[0], b[1]]).wrapping_sub(by);
        b.copy_from_slice(&seq.to_be_bytes());
    }
}

/// A packet's sequence number as written (0 for a packet shorter than an RTP header).
pub fn sequence_of(packet: &[u8]) -> u16 {
    packet
        .get(2..4)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
}

/// A parsed view of one RTP packet.
#[derive(Debug)]
pub struct RtpView<'a> {
    pkt: RtpPacket<'a>,
    data: &'a [u8],
}

impl<'a> RtpView<'a> {
    /// Parses `data`. Errors are for the caller to count; nothing here panics on any input.
    pub fn parse(data: &'a [u8]) -> Result<Self, RtpError> {
        RtpPacket::parse(data)
            .map(|pkt| RtpView { pkt, data })
            .map_err(|e| RtpError::Parse(format!("{e:?}")))
    }
    pub fn payload_type(&self) -> u8 {
        self.pkt.payload_type()
    }
    pub fn sequence(&self) -> u16 {
        self.pkt.sequence_number()
    }
    pub fn timestamp(&self) -> u32 {
        self.pkt.timestamp()
    }
    pub fn ssrc(&self) -> u32 {
        self.pkt.ssrc()
    }
    pub fn marker(&self) -> bool {
        self.pkt.marker_bit()
    }
    pub fn payload(&self) -> &'a [u8] {
        let off = self.pkt.payload_offset();
        let len = self.pkt.payload_len();
        // rtp-types has validated offset and length against the buffer in `parse`.
        &self.data[off..off + len]
    }
    /// The send time, if the packet carries the RFC 8285 one-byte element with id `id` and 8 bytes.
    pub fn send_time(&self, id: u8) -> Option<NtpTime> {
        let (profile, data) = self.pkt.extension()?;
        if profile != ONE_BYTE_EXT_PROFILE {
            return None;
        }
        one_byte_element(data, id)
            .and_then(|v| <[u8; 8]>::try_from(v).ok())
            .map(|b| NtpTime(u64::from_be_bytes(b)))
    }
}

/// Finds element `id` in RFC 8285 §4.2 one-byte-header extension data.
pub fn one_byte_element(mut data: &[u8], id: u8) -> Option<&[u8]> {
    while let Some((&first, rest)) = data.split_first() {
        let elem_id = first >> 4;
        if elem_id == 0 {
            // Padding byte.
            data = rest;
            continue;
        }
        if elem_id == 15 {
            // Reserved: stop processing (RFC 8285 §4.2).
            return None;
        }
        let len = (first & 0x0f) as usize + 1;
        let value = rest.get(..len)?;
        if elem_id == id {
            return Some(value);
        }
        data = &rest[len..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_parse_with_send_time() {
        let hdr = RtpHeader {
            payload_type: 33,
            sequence: 65_535,
            timestamp: 0xdead_beef,
            ssrc: 0x1234_5678,
            marker: false,
        };
        let payload = [0x47u8; 1316];
        let mut buf = [0u8; 1500];
        let n = write_packet(&mut buf, &hdr, true, &payload).unwrap();
        assert_eq!(n, 12 + SEND_TIME_EXT_LEN + 1316);
        patch_send_time(&mut buf[..n], NtpTime(0x0102_0304_0506_0708));
        let v = RtpView::parse(&buf[..n]).unwrap();
        assert_eq!(v.sequence(), 65_535);
        assert_eq!(v.timestamp(), 0xdead_beef);
        assert_eq!(v.payload().len(), 1316);
        assert_eq!(
            v.send_time(SEND_TIME_EXT_ID),
            Some(NtpTime(0x0102_0304_0506_0708))
        );
        assert_eq!(v.send_time(2), None);

        // Without the extension: the paper's 1328-byte packet.
        let n = write_packet(&mut buf, &hdr, false, &payload).unwrap();
        assert_eq!(n, 1328);
        assert_eq!(RtpView::parse(&buf[..n]).unwrap().send_time(1), None);
    }

    #[test]
    fn too_small_buffer_is_an_error() {
        let hdr = RtpHeader {
            payload_type: 33,
            sequence: 1,
            timestamp: 1,
            ssrc: 1,
            marker: false,
        };
        let mut buf = [0u8; 100];
        assert!(matches!(
            write_packet(&mut buf, &hdr, false, &[0u8; 200]),
            Err(RtpError::BufferTooSmall { .. })
        ));
    }

    #[test]
    fn one_byte_elements_with_padding_and_truncation() {
        assert_eq!(
            one_byte_element(&[0, 0, 0x21, 9, 8, 0x10, 7], 1),
            Some(&[7u8][..])
        );
        assert_eq!(one_byte_element(&[0x27, 1, 2], 2), None); // truncated value
        assert_eq!(one_byte_element(&[0xf0, 0x10, 7], 1), None); // reserved id stops parsing
    }
}
