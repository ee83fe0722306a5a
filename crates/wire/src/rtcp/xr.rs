//! Extended reports (RFC 3611) that let a receiver measure its round trip to the sender: the
//! receiver's Receiver Reference Time block (RRTR, §4.4: BT 4, its NTP time) and the sender's
//! DLRR block (§4.5: BT 5, for each receiver heard, the middle 32 bits of its last RRTR and the
//! delay since, in 1/65 536 s). The receiver's round trip is then `A - LRR - DLRR`, as a
//! sender's from LSR and DLSR (RFC 3550 §6.4.1).
//!
//! rtcp-types 0.3 reads XR packets, but its DLRR reader refuses a block of two sub-blocks and
//! walks past the block's end; these are read here from the packet's bytes.
//!
//! ```text
//! XR:   |V=2|P|reserved |   PT=207      |             length            |
//!       |                              SSRC                             |
//! RRTR: |     BT=4      |   reserved    |       block length = 2        |
//!       |              NTP timestamp, most and least significant words      |
//! DLRR: |     BT=5      |   reserved    |         block length          |
//!       |                 SSRC_1 (SSRC of first receiver)               |  one sub-block
//!       |                         last RR (LRR)                         |  per receiver
//!       |                   delay since last RR (DLRR)                  |
//! ```

use crate::Ssrc;

/// PT of an extended report.
pub const XR: u8 = 207;
const RRTR: u8 = 4;
const DLRR: u8 = 5;

/// What an XR packet says that Metronome acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XrItem {
    /// Receiver `ssrc`'s reference time.
    Rrtr {
        /// The receiver.
        ssrc: Ssrc,
        /// Its NTP time when it sent the block.
        ntp: u64,
    },
    /// The sender `sender`'s answer about receiver `ssrc`'s last RRTR.
    Dlrr {
        /// The packet's sender.
        sender: Ssrc,
        /// The receiver it is about.
        ssrc: Ssrc,
        /// The middle 32 bits of that receiver's last RRTR.
        lrr: u32,
        /// The delay since it arrived, 1/65 536 s.
        dlrr: u32,
    },
}

/// The RRTR and DLRR items of XR packet `packet` (header to end, padding included); other blocks,
/// and a packet or block that runs short, are skipped.
pub fn parse_xr(packet: &[u8], mut visit: impl FnMut(XrItem)) {
    if packet.len() < 8 || packet[1] != XR {
        return;
    }
    let pad = if packet[0] & 0x20 != 0 {
        usize::from(packet[packet.len() - 1])
    } else {
        0
    };
    let Some(end) = packet.len().checked_sub(pad).filter(|&e| e >= 8) else {
        return;
    };
    let sender = Ssrc(u32_at(packet, 4));
    let mut at = 8;
    while at + 4 <= end {
        let len = (usize::from(u16::from_be_bytes([packet[at + 2], packet[at + 3]])) + 1) * 4;
        let Some(block) = packet.get(at..at + len).filter(|_| at + len <= end) else {
            return;
        };
        match block[0] {
            RRTR if len == 12 => visit(XrItem::Rrtr {
                ssrc: sender,
                ntp: u64::from(u32_at(block, 4)) << 32 | u64::from(u32_at(block, 8)),
            }),
            DLRR => {
                for sub in block[4..].chunks_exact(12) {
                    visit(XrItem::Dlrr {
                        sender,
                        ssrc: Ssrc(u32_at(sub, 0)),
                        lrr: u32_at(sub, 4),
                        dlrr: u32_at(sub, 8),
                    });
                }
            }
            _ => {}
        }
        at += len;
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Writes an XR packet from receiver `ssrc` with an RRTR block of `ntp` into `buf` (after a
/// compound's report and SDES); its length, 0 if `buf` is too small.
pub fn write_rrtr(buf: &mut [u8], ssrc: Ssrc, ntp: u64) -> usize {
    let Some(out) = buf.get_mut(..20) else {
        return 0;
    };
    out[..4].copy_from_slice(&[0x80, XR, 0, 4]);
    out[4..8].copy_from_slice(&ssrc.to_be_bytes());
    out[8..12].copy_from_slice(&[RRTR, 0, 0, 2]);
    out[12..20].copy_from_slice(&ntp.to_be_bytes());
    20
}

/// Writes an XR packet from `sender` with a DLRR block of `entries` (receiver, LRR, DLRR) into
/// `buf`: as many as fit, at most 1 000; its length (0 if none fit) and how many went in.
pub fn write_dlrr(buf: &mut [u8], sender: Ssrc, entries: &[(Ssrc, u32, u32)]) -> (usize, usize) {
    let fit = (buf.len().saturating_sub(12) / 12)
        .min(entries.len())
        .min(1000);
    if fit == 0 {
        return (0, 0);
    }
    let len = 12 + 12 * fit;
    let words = (len / 4 - 1) as u16;
    buf[..2].copy_from_slice(&[0x80, XR]);
    buf[2..4].copy_from_slice(&words.to_be_bytes());
    buf[4..8].copy_from_slice(&sender.to_be_bytes());
    buf[8..10].copy_from_slice(&[DLRR, 0]);
    buf[10..12].copy_from_slice(&((3 * fit) as u16).to_be_bytes());
    for (i, (ssrc, lrr, dlrr)) in entries[..fit].iter().enumerate() {
        let at = 12 + 12 * i;
        buf[at..at + 4].copy_from_slice(&ssrc.to_be_bytes());
        buf[at + 4..at + 8].copy_from_slice(&lrr.to_be_bytes());
        buf[at + 8..at + 12].copy_from_slice(&dlrr.to_be_bytes());
    }
    (len, fit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(packet: &[u8]) -> Vec<XrItem> {
        let mut out = Vec::new();
        parse_xr(packet, |i| out.push(i));
        out
    }

    #[test]
    fn an_rrtr_and_a_dlrr_of_several_receivers_read_back() {
        let mut buf = [0u8; 64];
        let n = write_rrtr(&mut buf, Ssrc(7), 0x0102_0304_0506_0708);
        assert_eq!(
            items(&buf[..n]),
            vec![XrItem::Rrtr {
                ssrc: Ssrc(7),
                ntp: 0x0102_0304_0506_0708
            }]
        );
        // rtcp-types reads the packet too.
        assert!(rtcp_types::Compound::parse(&buf[..n])
            .unwrap()
            .all(|p| p.is_ok()));
        let entries = [(Ssrc(1), 10, 20), (Ssrc(2), 30, 40), (Ssrc(3), 50, 60)];
        let (n, fit) = write_dlrr(&mut buf, Ssrc(9), &entries);
        assert_eq!((n, fit), (48, 3));
        let got = items(&buf[..n]);
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[1],
            XrItem::Dlrr {
                sender: Ssrc(9),
                ssrc: Ssrc(2),
                lrr: 30,
                dlrr: 40
            }
        );
        // What does not fit is left out.
        assert_eq!(write_dlrr(&mut buf[..30], Ssrc(9), &entries), (24, 1));
    }

    #[test]
    fn a_short_or_lying_packet_gives_nothing_and_does_not_panic() {
        let mut buf = [0u8; 64];
        let n = write_rrtr(&mut buf, Ssrc(7), 5);
        for cut in 0..n {
            let _ = items(&buf[..cut]);
        }
        // A block claiming more than the packet holds.
        buf[11] = 40;
        assert!(items(&buf[..n]).is_empty());
        // Padding longer than the packet.
        let mut padded = buf;
        padded[0] |= 0x20;
        padded[n - 1] = 200;
        assert!(items(&padded[..n]).is_empty());
    }
}
