//! RTP retransmission packets (RFC 4588 §4): the repair of a lost packet, sent in a stream of
//! its own (its own SSRC, payload type and sequence numbers) so that receivers' statistics of the
//! original stream stay true. Its payload is the original sequence number (OSN, two bytes) and
//! then the original payload.
//!
//! [`wrap`] makes a retransmission packet from an original; [`unwrap`] gives the original back.
//! Both copy bytes into a caller's buffer and never allocate; neither panics on any input.

use crate::rtp::RtpView;
use crate::{PayloadType, SeqNo, Ssrc};

/// Bytes the OSN adds to a retransmission packet beyond the original.
pub const OSN_LEN: usize = 2;

/// Why a packet could not be wrapped or unwrapped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RtxError {
    /// The input is not a well-formed RTP packet.
    #[error("not an RTP packet: {0}")]
    Parse(String),
    /// A retransmission packet too short to hold the original sequence number.
    #[error("retransmission packet without its 2-byte original sequence number")]
    NoOsn,
    /// The caller's buffer cannot hold the result.
    #[error("output buffer of {have} bytes is too small for a {need}-byte packet")]
    BufferTooSmall {
        /// Bytes the result takes.
        need: usize,
        /// Bytes the buffer has.
        have: usize,
    },
}

/// The header fields of the stream a packet is rewritten into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamIds {
    /// Its SSRC.
    pub ssrc: Ssrc,
    /// Its payload type (for a retransmission stream, the `rtx` payload type of the SDP, whose
    /// `apt` names the original's).
    pub payload_type: PayloadType,
}

/// The parts of an RTP packet, as offsets into it.
struct Parts {
    /// Fixed header, CSRCs and extension: bytes before the payload.
    header: usize,
    /// The payload's length, padding excluded.
    payload: usize,
    sequence: SeqNo,
}

fn parts(packet: &[u8]) -> Result<Parts, RtxError> {
    let view = RtpView::parse(packet).map_err(|e| RtxError::Parse(e.to_string()))?;
    let payload = view.payload();
    // The payload is a slice of `packet`: its offset is the header's length.
    let header = (payload.as_ptr() as usize).saturating_sub(packet.as_ptr() as usize);
    Ok(Parts {
        header,
        payload: payload.len(),
        sequence: view.sequence(),
    })
}

/// Copies `header` into `out` with the stream's ids and `sequence`, padding bit cleared.
fn rewrite_header(header: &[u8], out: &mut [u8], ids: StreamIds, sequence: SeqNo) {
    out[..header.len()].copy_from_slice(header);
    out[0] &= !0x20;
    out[1] = (out[1] & 0x80) | (ids.payload_type.get() & 0x7f);
    out[2..4].copy_from_slice(&sequence.to_be_bytes());
    out[8..12].copy_from_slice(&ids.ssrc.to_be_bytes());
}

/// Writes the retransmission of `original` into `out`: the original's header (timestamp,
/// marker, CSRCs, extension) under the retransmission stream's `ids` and `sequence`, then the
/// original's sequence number and payload (its padding dropped). Returns the length.
pub fn wrap(
    original: &[u8],
    ids: StreamIds,
    sequence: SeqNo,
    out: &mut [u8],
) -> Result<usize, RtxError> {
    let p = parts(original)?;
    let need = p.header + OSN_LEN + p.payload;
    if out.len() < need {
        return Err(RtxError::BufferTooSmall {
            need,
            have: out.len(),
        });
    }
    rewrite_header(&original[..p.header], out, ids, sequence);
    out[p.header..p.header + OSN_LEN].copy_from_slice(&p.sequence.to_be_bytes());
    out[p.header + OSN_LEN..need].copy_from_slice(&original[p.header..p.header + p.payload]);
    Ok(need)
}

/// Writes the original packet that `rtx` repairs into `out`, under the original stream's `ids`
/// (the SSRC the retransmission stream is associated with, the payload type its `apt` names).
/// Returns the length and the original sequence number.
pub fn unwrap(rtx: &[u8], ids: StreamIds, out: &mut [u8]) -> Result<(usize, SeqNo), RtxError> {
    let p = parts(rtx)?;
    if p.payload < OSN_LEN {
        return Err(RtxError::NoOsn);
    }
    let osn = SeqNo::from_be_bytes([rtx[p.header], rtx[p.header + 1]]);
    let need = p.header + p.payload - OSN_LEN;
    if out.len() < need {
        return Err(RtxError::BufferTooSmall {
            need,
            have: out.len(),
        });
    }
    rewrite_header(&rtx[..p.header], out, ids, osn);
    out[p.header..need].copy_from_slice(&rtx[p.header + OSN_LEN..p.header + p.payload]);
    Ok((need, osn))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtp_types::{RtpPacket, RtpPacketBuilder};

    const MEDIA: StreamIds = StreamIds {
        ssrc: Ssrc(0x1111_2222),
        payload_type: PayloadType(33),
    };
    const RTX: StreamIds = StreamIds {
        ssrc: Ssrc(0x3333_4444),
        payload_type: PayloadType(97),
    };

    fn original(padding: Option<u8>) -> Vec<u8> {
        let mut b = RtpPacketBuilder::<&[u8], &[u8]>::new()
            .payload_type(MEDIA.payload_type.get())
            .sequence_number(65_535)
            .timestamp(90_000)
            .ssrc(MEDIA.ssrc.get())
            .marker_bit(true)
            .add_csrc(7)
            .extension(0xBEDE, &[0x10, 0xAA, 0, 0])
            .payload(b"payload bytes".as_slice());
        if let Some(p) = padding {
            b = b.padding(p);
        }
        b.write_vec().unwrap()
    }

    #[test]
    fn a_retransmission_carries_the_osn_and_gives_back_the_original() {
        let orig = original(None);
        let mut rtx = [0u8; 1500];
        let n = wrap(&orig, RTX, SeqNo(12), &mut rtx).unwrap();
        assert_eq!(n, orig.len() + OSN_LEN);
        let p = RtpPacket::parse(&rtx[..n]).unwrap();
        assert_eq!(
            (p.ssrc(), p.payload_type(), p.sequence_number()),
            (RTX.ssrc.get(), RTX.payload_type.get(), 12)
        );
        assert_eq!((p.timestamp(), p.marker_bit()), (90_000, true));
        assert_eq!(p.csrc().collect::<Vec<_>>(), vec![7]);
        assert_eq!(&p.payload()[..2], &65_535u16.to_be_bytes());
        assert_eq!(&p.payload()[2..], b"payload bytes");

        let mut back = [0u8; 1500];
        let (m, osn) = unwrap(&rtx[..n], MEDIA, &mut back).unwrap();
        assert_eq!((osn, &back[..m]), (SeqNo(65_535), orig.as_slice()));
    }

    #[test]
    fn the_originals_padding_is_not_retransmitted() {
        let orig = original(Some(4));
        let mut rtx = [0u8; 1500];
        let n = wrap(&orig, RTX, SeqNo(1), &mut rtx).unwrap();
        assert_eq!(n, orig.len() - 4 + OSN_LEN);
        let p = RtpPacket::parse(&rtx[..n]).unwrap();
        assert_eq!(p.padding(), None);
        let mut back = [0u8; 1500];
        let (m, _) = unwrap(&rtx[..n], MEDIA, &mut back).unwrap();
        assert_eq!(&back[..m], original(None).as_slice());
    }

    #[test]
    fn bad_input_is_an_error_never_a_panic() {
        let mut out = [0u8; 64];
        assert!(matches!(
            wrap(&[0x80, 1, 2], RTX, SeqNo(1), &mut out),
            Err(RtxError::Parse(_))
        ));
        let no_osn = RtpPacketBuilder::<&[u8], &[u8]>::new()
            .payload_type(RTX.payload_type.get())
            .payload(b"x".as_slice())
            .write_vec()
            .unwrap();
        assert_eq!(unwrap(&no_osn, MEDIA, &mut out), Err(RtxError::NoOsn));
        let orig = original(None);
        let mut small = [0u8; 20];
        assert!(matches!(
            wrap(&orig, RTX, SeqNo(1), &mut small),
            Err(RtxError::BufferTooSmall { .. })
        ));
        for len in 0..orig.len() {
            let _ = wrap(&orig[..len], RTX, SeqNo(1), &mut out);
            let _ = unwrap(&orig[..len], MEDIA, &mut out);
        }
    }
}
