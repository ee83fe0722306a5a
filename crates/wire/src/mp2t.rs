//! The RTP payload format for MPEG-TS (RFC 2250 §2): whole 188-byte TS packets, payload type 33,
//! a 90 kHz timestamp of the packet's transmission time.

use crate::ts::{TS_PACKET_LEN, TS_SYNC_BYTE};

/// TS packets per RTP packet: 7 × 188 = 1316 bytes, the largest that fits a 1500-byte MTU.
pub const TS_PER_RTP: usize = 7;
/// The payload of a full RTP/MP2T packet.
pub const MP2T_PAYLOAD_LEN: usize = TS_PER_RTP * TS_PACKET_LEN;

/// Why an RTP/MP2T payload is not acceptable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Mp2tError {
    /// The payload is empty or its length (carried, in bytes) is not a multiple of 188.
    #[error("payload of {0} bytes is not a whole number of 188-byte TS packets")]
    NotWholePackets(usize),
    /// The TS packet at this index (0-based) in the payload lacks the 0x47 sync byte.
    #[error("TS packet {0} of the payload does not start with the 0x47 sync byte")]
    LostSync(usize),
}

/// Checks an RTP/MP2T payload and returns the number of TS packets it holds.
pub fn check_payload(payload: &[u8]) -> Result<usize, Mp2tError> {
    if payload.is_empty() || payload.len() % TS_PACKET_LEN != 0 {
        return Err(Mp2tError::NotWholePackets(payload.len()));
    }
    for (i, p) in payload.chunks_exact(TS_PACKET_LEN).enumerate() {
        if p[0] != TS_SYNC_BYTE {
            return Err(Mp2tError::LostSync(i));
        }
    }
    Ok(payload.len() / TS_PACKET_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_checks() {
        let mut p = [0u8; MP2T_PAYLOAD_LEN];
        for c in p.chunks_exact_mut(188) {
            c[0] = 0x47;
        }
        assert_eq!(check_payload(&p), Ok(7));
        assert_eq!(
            check_payload(&p[..100]),
            Err(Mp2tError::NotWholePackets(100))
        );
        assert_eq!(check_payload(&[]), Err(Mp2tError::NotWholePackets(0)));
        p[188 * 3] = 0;
        assert_eq!(check_payload(&p), Err(Mp2tError::LostSync(3)));
    }
}
