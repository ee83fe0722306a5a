//! Generic NACK (RFC 4585 §6.2.1): a receiver's request for lost RTP packets, in a
//! transport-layer feedback packet (PT 205, FMT 1). Each 4-byte FCI entry names a packet (PID)
//! and, in a 16-bit mask (BLP), which of the 16 after it are lost too.
//!
//! The same FCI with FMT 7 is a Transport-Layer Third-Party Loss Early Indication (TLLEI,
//! RFC 6642 §4.1): the feedback target (here the stream's sender) tells a group that it knows
//! of these losses, so that the group's receivers do not ask for them too (§3).
//!
//! ```text
//!  0                   1                   2                   3
//! |V=2|P|  FMT=1  |   PT = 205    |          length               |
//! |                  SSRC of packet sender                        |
//! |                  SSRC of media source                         |
//! |            PID                |             BLP               |  (one or more)
//! ```

use crate::{SeqNo, Ssrc};
use rtcp_types::TransportFeedback;

/// The FMT of a generic NACK.
pub const FMT: u8 = 1;
/// The FMT of a TLLEI (RFC 6642 §4.1).
pub const TLLEI_FMT: u8 = 7;
/// PT of a transport-layer feedback packet.
const RTPFB: u8 = 205;
/// Bytes before the first FCI entry: header, sender SSRC, media SSRC.
const HEAD: usize = 12;

/// A parsed generic NACK or TLLEI, borrowing its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nack<'a> {
    /// SSRC of the receiver that sent it (of the feedback target, for a TLLEI).
    pub sender_ssrc: Ssrc,
    /// SSRC of the stream whose packets it asks for.
    pub media_ssrc: Ssrc,
    /// The FCI entries, padding removed (a multiple of 4 bytes).
    entries: &'a [u8],
}

impl<'a> Nack<'a> {
    /// The NACK in `fb`, `Ok(None)` for another FMT, or why it is malformed.
    pub fn parse(fb: &TransportFeedback<'a>) -> Result<Option<Nack<'a>>, String> {
        let data = super::transport_fci::<FMT>(fb, "a generic NACK")?;
        Self::of(fb, data, "a generic NACK")
    }

    /// The TLLEI in `fb`, `Ok(None)` for another FMT, or why it is malformed.
    pub fn parse_tllei(fb: &TransportFeedback<'a>) -> Result<Option<Nack<'a>>, String> {
        let data = super::transport_fci::<TLLEI_FMT>(fb, "a TLLEI")?;
        Self::of(fb, data, "a TLLEI")
    }

    fn of(
        fb: &TransportFeedback<'a>,
        data: Option<&'a [u8]>,
        what: &str,
    ) -> Result<Option<Nack<'a>>, String> {
        let Some(data) = data else {
            return Ok(None);
        };
        if data.is_empty() || data.len() % 4 != 0 {
            return Err(format!(
                "{what}'s FCI is {} bytes, not a whole number of 4-byte entries",
                data.len()
            ));
        }
        Ok(Some(Nack {
            sender_ssrc: Ssrc(fb.sender_ssrc()),
            media_ssrc: Ssrc(fb.media_ssrc()),
            entries: data,
        }))
    }

    /// Its FCI entries (at most 17 sequence numbers each).
    pub fn entries(&self) -> usize {
        self.entries.len() / 4
    }

    /// The sequence numbers asked for, entry by entry (PID, then BLP's bits from the least
    /// significant: PID + 1 … PID + 16, wrapping).
    pub fn sequences(&self) -> impl Iterator<Item = SeqNo> + 'a {
        self.entries.chunks_exact(4).flat_map(|e| {
            let pid = SeqNo::from_be_bytes([e[0], e[1]]);
            let blp = u16::from_be_bytes([e[2], e[3]]);
            std::iter::once(pid).chain(
                (1..=16u16)
                    .filter(move |i| blp & (1 << (i - 1)) != 0)
                    .map(move |i| pid.add(i)),
            )
        })
    }
}

/// Writes a generic NACK from `sender_ssrc` about `media_ssrc` asking for `sequences` (in the
/// order they go, each entry starting at the first number not yet covered and taking the 16
/// after it that follow) into `buf`; returns its length. Writes as many entries as `buf`
/// holds; `sequences` that did not fit are left out (the caller asks for them next time).
pub fn write_nack(
    buf: &mut [u8],
    sender_ssrc: Ssrc,
    media_ssrc: Ssrc,
    sequences: &[SeqNo],
) -> usize {
    write_fb(FMT, buf, sender_ssrc, media_ssrc, sequences)
}

/// Writes a TLLEI (RFC 6642 §4.1) from the feedback target `sender_ssrc` telling the group
/// that `sequences` of `media_ssrc` are known lost, as [`write_nack`] writes a NACK.
pub fn write_tllei(
    buf: &mut [u8],
    sender_ssrc: Ssrc,
    media_ssrc: Ssrc,
    sequences: &[SeqNo],
) -> usize {
    write_fb(TLLEI_FMT, buf, sender_ssrc, media_ssrc, sequences)
}

fn write_fb(
    fmt: u8,
    buf: &mut [u8],
    sender_ssrc: Ssrc,
    media_ssrc: Ssrc,
    sequences: &[SeqNo],
) -> usize {
    if buf.len() < HEAD + 4 || sequences.is_empty() {
        return 0;
    }
    let room = (buf.len() - HEAD) / 4;
    let mut at = HEAD;
    let mut rest = sequences;
    while let Some((&pid, tail)) = rest.split_first() {
        if (at - HEAD) / 4 == room {
            break;
        }
        let mut blp = 0u16;
        let mut used = 0;
        for &s in tail {
            match s.since(pid) {
                d @ 1..=16 => blp |= 1 << (d - 1),
                _ => break,
            }
            used += 1;
        }
        buf[at..at + 2].copy_from_slice(&pid.to_be_bytes());
        buf[at + 2..at + 4].copy_from_slice(&blp.to_be_bytes());
        at += 4;
        rest = &tail[used..];
    }
    buf[0] = 0x80 | fmt;
    buf[1] = RTPFB;
    buf[2..4].copy_from_slice(&((at / 4 - 1) as u16).to_be_bytes());
    buf[4..8].copy_from_slice(&sender_ssrc.to_be_bytes());
    buf[8..12].copy_from_slice(&media_ssrc.to_be_bytes());
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtcp::{parse_compound, RtcpItem};

    fn parsed(packet: &[u8]) -> Vec<(Ssrc, Ssrc, Vec<u16>)> {
        let mut out = Vec::new();
        parse_compound(packet, |item| {
            if let RtcpItem::Nack(n) = item {
                out.push((
                    n.sender_ssrc,
                    n.media_ssrc,
                    n.sequences().map(u16::from).collect(),
                ));
            }
        })
        .unwrap();
        out
    }

    #[test]
    fn it_writes_and_reads_back_the_numbers_asked_for() {
        let mut buf = [0u8; 64];
        // 65 535 and 0..=3 fit one entry across the wrap; 40 starts another; 58 a third.
        let asked = [65_535, 0, 1, 3, 40, 56, 58];
        let n = write_nack(&mut buf, Ssrc(7), Ssrc(9), &asked.map(SeqNo));
        assert_eq!(n, 12 + 3 * 4);
        assert_eq!(parsed(&buf[..n]), vec![(Ssrc(7), Ssrc(9), asked.to_vec())]);
        // rtcp-types reads it the same way.
        let p = rtcp_types::Compound::parse(&buf[..n])
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        let rtcp_types::Packet::TransportFeedback(fb) = p else {
            panic!("not a transport feedback packet")
        };
        let theirs: Vec<u16> = fb
            .parse_fci::<rtcp_types::Nack>()
            .unwrap()
            .entries()
            .collect();
        assert_eq!(theirs, asked.to_vec());
    }

    #[test]
    fn a_tllei_reads_back_as_one_and_not_as_a_nack() {
        let mut buf = [0u8; 64];
        let known = [100, 101, 117, 300].map(SeqNo);
        let n = write_tllei(&mut buf, Ssrc(9), Ssrc(9), &known);
        assert_eq!(buf[0] & 0x1f, TLLEI_FMT);
        assert!(parsed(&buf[..n]).is_empty());
        let mut seen = Vec::new();
        parse_compound(&buf[..n], |item| {
            if let RtcpItem::Tllei(t) = item {
                seen.push((
                    t.media_ssrc,
                    t.sequences().map(u16::from).collect::<Vec<_>>(),
                ));
            }
        })
        .unwrap();
        assert_eq!(seen, vec![(Ssrc(9), vec![100, 101, 117, 300])]);
        // Without whole entries it refuses the compound, as a NACK does.
        let empty = [0x87, 205, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2];
        assert!(parse_compound(&empty, |_| {}).is_err());
    }

    #[test]
    fn what_does_not_fit_is_left_out() {
        let mut buf = [0u8; 12 + 8];
        let asked: Vec<SeqNo> = (0..100).map(|i| SeqNo(i * 20)).collect();
        let n = write_nack(&mut buf, Ssrc(1), Ssrc(2), &asked);
        assert_eq!(n, 20);
        assert_eq!(parsed(&buf[..n])[0].2, vec![0, 20]);
        assert_eq!(write_nack(&mut [0u8; 15], Ssrc(1), Ssrc(2), &asked), 0);
        assert_eq!(write_nack(&mut buf, Ssrc(1), Ssrc(2), &[]), 0);
    }

    #[test]
    fn a_nack_without_entries_or_with_bad_padding_refuses_the_compound() {
        // Header and the two SSRCs only: length 2.
        let empty = [0x81, 205, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2];
        assert!(parse_compound(&empty, |_| {}).is_err());
        // Padding (P set) of 8 bytes claimed on a 4-byte FCI.
        let mut padded = [0x81 | 0x20, 205, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 5, 0, 8];
        assert!(parse_compound(&padded, |_| {}).is_err());
        padded[15] = 4;
        // All of the FCI is padding: no entries.
        assert!(parse_compound(&padded, |_| {}).is_err());
    }
}
