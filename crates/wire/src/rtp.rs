//! RTP packets (RFC 3550 §5.1) and the send-time header extension (RFC 8285 §4.2).

use crate::{PayloadType, SeqNo, Ssrc};
use metronome_time::{NtpTime, RtpTime};
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
/// Bytes the 8-byte send-time extension adds to a packet: 4 (profile, length) + 1 (element
/// header) + 8 (NTP time) + 3 (padding to a 32-bit word).
pub const SEND_TIME_EXT_LEN: usize = 16;
/// Offset of the send time's bytes (either form) in a packet without CSRCs that carries it.
pub const SEND_TIME_OFFSET: usize = RTP_HEADER_LEN + 4 + 1;
/// The URI an SDP `a=extmap` line names for the 3-byte form: WebRTC's abs-send-time.
pub const ABS_SEND_TIME_URI: &str = "http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time";

/// Which send-time element a sender's packets carry (RFC 8285 §4.2 one-byte form, id
/// [`SEND_TIME_EXT_ID`], always the extension's first element). The driver writes the time
/// with [`patch_send_time`] as the packet leaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SendTimeExt {
    /// No header extension: packets are 12 bytes of header plus the payload.
    #[default]
    None,
    /// A 64-bit NTP time (16 bytes per packet): receivers with a synchronized clock read
    /// one-way delay from it.
    Ntp64,
    /// WebRTC's abs-send-time: 24 bits, NTP seconds in 6.18 fixed point, wrapping every 64 s
    /// (8 bytes per packet). Enough for a receiver to place packets on the sender's clock, as
    /// TFRC's and TFMCC's receivers need (RFC 5348 §3.2.1, RFC 4654 §2.2.1).
    Abs24,
}

impl SendTimeExt {
    /// The 64-bit form if `on`, else none (streams that carry the NTP time or nothing).
    pub fn ntp64_if(on: bool) -> Self {
        if on {
            SendTimeExt::Ntp64
        } else {
            SendTimeExt::None
        }
    }
    /// Bytes the extension adds to a packet.
    pub fn bytes(self) -> usize {
        match self {
            SendTimeExt::None => 0,
            SendTimeExt::Ntp64 => SEND_TIME_EXT_LEN,
            SendTimeExt::Abs24 => 8,
        }
    }
    /// Whether packets carry no send-time element (and so no header extension at all).
    pub fn is_none(self) -> bool {
        self == SendTimeExt::None
    }
    /// The extension as written before the driver stamps it: element header, zeroed time,
    /// padding to a 32-bit word.
    fn data(self) -> &'static [u8] {
        const NTP64: [u8; 12] = [(SEND_TIME_EXT_ID << 4) | 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        const ABS24: [u8; 4] = [(SEND_TIME_EXT_ID << 4) | 2, 0, 0, 0];
        match self {
            SendTimeExt::None => &[],
            SendTimeExt::Ntp64 => &NTP64,
            SendTimeExt::Abs24 => &ABS24,
        }
    }
}

/// A send time as a packet carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendStamp {
    /// The full 64-bit NTP time of [`SendTimeExt::Ntp64`], on the sender's wall clock.
    Ntp64(NtpTime),
    /// abs-send-time's 24 bits.
    Abs24(u32),
}

impl SendStamp {
    /// The time in abs-send-time's 24 bits (an NTP time's bits 14 to 37).
    pub fn abs24(self) -> u32 {
        match self {
            SendStamp::Ntp64(t) => abs_send_time(t),
            SendStamp::Abs24(v) => v,
        }
    }
}

/// An NTP time as abs-send-time carries it: seconds modulo 64 in 6.18 fixed point.
pub fn abs_send_time(t: NtpTime) -> u32 {
    ((t.0 >> 14) & 0xFF_FFFF) as u32
}

/// Why an RTP packet could not be read or written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RtpError {
    /// The bytes are not a valid RTP packet (wrong version, truncated header, CSRC list or
    /// extension, bad padding); the text is `rtp-types`' reason. A receiver counts and drops it.
    #[error("not an RTP packet: {0}")]
    Parse(String),
    /// `rtp-types` refused to build the packet from these header fields (for example a
    /// payload type above 127); the text is its reason. A caller bug, not a network event.
    #[error("cannot write the RTP packet: {0}")]
    Write(String),
    /// The caller's buffer cannot hold the packet; nothing was written.
    #[error("output buffer of {have} bytes is too small for a {need}-byte RTP packet")]
    BufferTooSmall {
        /// Bytes the packet takes: header, send-time extension and payload.
        need: usize,
        /// Bytes the buffer has.
        have: usize,
    },
}

/// The header fields a sender chooses for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtpHeader {
    /// Payload type, 0 to 127 (7 bits): 33 for MPEG-TS (RFC 3551), a dynamic 96–127 for
    /// others such as RFC 4175 video.
    pub payload_type: PayloadType,
    /// Sequence number, incremented by one per packet sent and wrapping at 2^16 (RFC 3550 §5.1).
    pub sequence: SeqNo,
    /// RTP timestamp in media-clock ticks (90 kHz for video), wrapping at 2^32.
    pub timestamp: RtpTime,
    /// Synchronization source identifier of the stream.
    pub ssrc: Ssrc,
    /// The marker bit; its meaning is the payload format's (for video: last packet of a frame).
    pub marker: bool,
}

/// Writes an RTP packet into `buf` and returns its length. With a `send_time` form, the packet
/// carries that one-byte-header element with a zero time; the driver fills it in with
/// [`patch_send_time`] at the moment it sends.
pub fn write_packet(
    buf: &mut [u8],
    hdr: &RtpHeader,
    send_time: SendTimeExt,
    payload: &[u8],
) -> Result<usize, RtpError> {
    let mut b = RtpPacketBuilder::<&[u8], &[u8]>::new()
        .payload_type(hdr.payload_type.get())
        .sequence_number(hdr.sequence.get())
        .timestamp(hdr.timestamp.get())
        .ssrc(hdr.ssrc.get())
        .marker_bit(hdr.marker)
        .payload(payload);
    if !send_time.is_none() {
        b = b.extension(ONE_BYTE_EXT_PROFILE, send_time.data());
    }
    let need = RTP_HEADER_LEN + payload.len() + send_time.bytes();
    if buf.len() < need {
        return Err(RtpError::BufferTooSmall {
            need,
            have: buf.len(),
        });
    }
    b.write_into(buf)
        .map_err(|e| RtpError::Write(format!("{e:?}")))
}

/// Writes the send time into a packet written by [`write_packet`] with a send-time element, in
/// the form the element's header says. Does nothing to a packet without one (no extension, no
/// CSRCs, profile 0xBEDE, element [`SEND_TIME_EXT_ID`] first, of 8 or 3 bytes).
pub fn patch_send_time(packet: &mut [u8], t: NtpTime) {
    let Some(head) = packet.get(..SEND_TIME_OFFSET) else {
        return;
    };
    // X set, no CSRCs (V, P, X, CC = 2, any, 1, 0).
    let plain_with_ext = head[0] & 0xDF == 0x90;
    let profile = u16::from_be_bytes([head[12], head[13]]);
    if !plain_with_ext || profile != ONE_BYTE_EXT_PROFILE || head[16] >> 4 != SEND_TIME_EXT_ID {
        return;
    }
    let (bytes, len) = match head[16] & 0x0f {
        7 => (t.0.to_be_bytes(), 8),
        2 => ((abs_send_time(t) as u64).to_be_bytes(), 3),
        _ => return,
    };
    if let Some(dst) = packet.get_mut(SEND_TIME_OFFSET..SEND_TIME_OFFSET + len) {
        dst.copy_from_slice(&bytes[8 - len..]);
    }
}

/// Moves a packet's sequence number back by `by` (mod 2^16). A sender that dropped `by`
/// packets before they were sent renumbers the ones after them, so that receivers see no gap
/// for packets that never left (RFC 3550 §5.1: the number increments by one for each RTP data
/// packet sent). Does nothing to a packet shorter than an RTP header.
pub fn shift_sequence(packet: &mut [u8], by: u16) {
    if let Some(b) = packet.get_mut(2..4) {
        let seq = SeqNo::from_be_bytes([b[0], b[1]]).sub(by);
        b.copy_from_slice(&seq.to_be_bytes());
    }
}

/// A packet's sequence number as written (0 for a packet shorter than an RTP header).
pub fn sequence_of(packet: &[u8]) -> SeqNo {
    packet
        .get(2..4)
        .map_or(SeqNo(0), |b| SeqNo::from_be_bytes([b[0], b[1]]))
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
    /// The 7-bit payload type.
    pub fn payload_type(&self) -> PayloadType {
        PayloadType(self.pkt.payload_type())
    }
    /// The 16-bit sequence number as written (extend it with [`SeqNo::extend_near`] or a
    /// [`crate::SeqUnwrapper`]).
    pub fn sequence(&self) -> SeqNo {
        SeqNo(self.pkt.sequence_number())
    }
    /// The 32-bit RTP timestamp, in media-clock ticks.
    pub fn timestamp(&self) -> RtpTime {
        RtpTime(self.pkt.timestamp())
    }
    /// The synchronization source identifier.
    pub fn ssrc(&self) -> Ssrc {
        Ssrc(self.pkt.ssrc())
    }
    /// Whether the marker bit is set.
    pub fn marker(&self) -> bool {
        self.pkt.marker_bit()
    }
    /// The payload: the bytes after the header, CSRCs and extension, without any padding.
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
    /// The send time in either form, if the packet carries element `id` of 8 or 3 bytes.
    pub fn send_stamp(&self, id: u8) -> Option<SendStamp> {
        let (profile, data) = self.pkt.extension()?;
        if profile != ONE_BYTE_EXT_PROFILE {
            return None;
        }
        match one_byte_element(data, id)? {
            &[a, b, c] => Some(SendStamp::Abs24(u32::from_be_bytes([0, a, b, c]))),
            v => <[u8; 8]>::try_from(v)
                .ok()
                .map(|b| SendStamp::Ntp64(NtpTime(u64::from_be_bytes(b)))),
        }
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

    fn header(payload_type: u8, sequence: u16, timestamp: u32, marker: bool) -> RtpHeader {
        RtpHeader {
            payload_type: PayloadType(payload_type),
            sequence: SeqNo(sequence),
            timestamp: RtpTime(timestamp),
            ssrc: Ssrc(0x1234_5678),
            marker,
        }
    }

    #[test]
    fn write_parse_with_send_time() {
        let hdr = header(33, 65_535, 0xdead_beef, false);
        let payload = [0x47u8; 1316];
        let mut buf = [0u8; 1500];
        let n = write_packet(&mut buf, &hdr, SendTimeExt::Ntp64, &payload).unwrap();
        assert_eq!(n, 12 + SEND_TIME_EXT_LEN + 1316);
        patch_send_time(&mut buf[..n], NtpTime(0x0102_0304_0506_0708));
        let v = RtpView::parse(&buf[..n]).unwrap();
        assert_eq!(v.sequence(), SeqNo(65_535));
        assert_eq!(v.timestamp(), RtpTime(0xdead_beef));
        assert_eq!(v.payload().len(), 1316);
        assert_eq!(
            v.send_time(SEND_TIME_EXT_ID),
            Some(NtpTime(0x0102_0304_0506_0708))
        );
        assert_eq!(v.send_time(2), None);

        // Without the extension: the paper's 1328-byte packet.
        let n = write_packet(&mut buf, &hdr, SendTimeExt::None, &payload).unwrap();
        assert_eq!(n, 1328);
        assert_eq!(RtpView::parse(&buf[..n]).unwrap().send_time(1), None);
        // Nothing is written into a packet without the element.
        let before = buf;
        patch_send_time(&mut buf[..n], NtpTime(0x0102_0304_0506_0708));
        assert_eq!(buf, before);
    }

    #[test]
    fn abs_send_time_is_three_bytes_of_the_ntp_time() {
        let hdr = header(96, 7, 90_000, true);
        let payload = [0xAAu8; 970];
        let mut buf = [0u8; 1500];
        let n = write_packet(&mut buf, &hdr, SendTimeExt::Abs24, &payload).unwrap();
        // Seed 002's 1018-byte packets less IPv4 and UDP: 12 + 8 + 970.
        assert_eq!(n, 990);
        // 70.25 s past an NTP second that is a multiple of 64: 6.25 s in the 6.18 form.
        let t = NtpTime(((64 * 1000 + 70) << 32) | (1 << 30));
        patch_send_time(&mut buf[..n], t);
        let v = RtpView::parse(&buf[..n]).unwrap();
        assert_eq!(
            v.send_stamp(SEND_TIME_EXT_ID),
            Some(SendStamp::Abs24(6 << 18 | 1 << 16))
        );
        assert_eq!(v.send_time(SEND_TIME_EXT_ID), None);
        assert_eq!(v.payload(), &payload[..]);
        // The 8-byte form gives the same 24 bits.
        assert_eq!(SendStamp::Ntp64(t).abs24(), 6 << 18 | 1 << 16);
    }

    #[test]
    fn too_small_buffer_is_an_error() {
        let hdr = header(33, 1, 1, false);
        let mut buf = [0u8; 100];
        assert!(matches!(
            write_packet(&mut buf, &hdr, SendTimeExt::None, &[0u8; 200]),
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
