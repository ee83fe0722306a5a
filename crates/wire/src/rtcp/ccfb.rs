//! RTCP congestion control feedback (RFC 8888): a receiver's report of every packet in a
//! range of sequence numbers, whether it arrived and when. GCC's sender reads it
//! (`metronome_cc::gcc`). Carried in a transport-layer feedback packet (RFC 4585, PT 205)
//! with FMT 11, through `rtcp-types`' feedback framing:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |V=2|P| FMT=11  |   PT = 205    |          length               |
//! |                 SSRC of RTCP packet sender                    |
//! |                   SSRC of 1st RTP Stream                      |
//! |          begin_seq            |          num_reports          |
//! |R|ECN|  Arrival time offset    | ...                           .
//! .                                                               .
//! |                   SSRC of nth RTP Stream                      |
//! |          begin_seq            |          num_reports          |
//! |R|ECN|  Arrival time offset    | ...                           |
//! |                        Report Timestamp                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Each stream's reports are padded to 32 bits. The report timestamp is the middle 32 bits of
//! the receiver's NTP clock when it wrote the report; an arrival time offset (ATO) is how long
//! before that the packet arrived, in 1/1024 s (0x1FFE: that long or longer; 0x1FFF:
//! unknown). A packet not received has R = 0 and ECN and ATO 0. `num_reports` is the number of
//! reports that follow (RFC 8888 as corrected by erratum 8166; the first reading, the last
//! report's offset, is one less).

use crate::{SeqNo, Ssrc};
use rtcp_types::{
    FciBuilder, FciFeedbackPacketType, RtcpPacketWriter, RtcpWriteError, TransportFeedback,
};

/// The FMT of RFC 8888's feedback.
pub const FMT: u8 = 11;
/// At most this many reports per stream (RFC 8888 §3.1: a range of up to 2^14 packets).
pub const MAX_REPORTS: usize = 16_384;
/// The largest ATO that says a time: 0x1FFE × 1/1024 s (about 8 s) "or longer".
pub const ATO_MAX: u16 = 0x1FFE;
/// The ATO that says the packet arrived at an unknown time.
pub const ATO_UNKNOWN: u16 = 0x1FFF;

/// One packet's report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcfbReport {
    /// R: the packet arrived. When false, `ecn` and `ato` are 0.
    pub received: bool,
    /// The ECN bits it arrived with (0 if not received).
    pub ecn: u8,
    /// Arrival time offset before the report timestamp, 1/1024 s (see the module).
    pub ato: u16,
}

impl CcfbReport {
    /// How long before the report timestamp the packet arrived, 1/1024 s: only for a packet
    /// received with an exact time (not "unknown", not "that long or longer").
    pub fn offset(self) -> Option<u16> {
        (self.received && self.ato < ATO_MAX).then_some(self.ato)
    }

    fn word(self) -> u16 {
        if !self.received {
            return 0;
        }
        0x8000 | (u16::from(self.ecn & 3) << 13) | self.ato.min(ATO_UNKNOWN)
    }

    fn of(w: u16) -> CcfbReport {
        let received = w & 0x8000 != 0;
        CcfbReport {
            received,
            ecn: if received { ((w >> 13) & 3) as u8 } else { 0 },
            ato: if received { w & 0x1FFF } else { 0 },
        }
    }
}

/// A parsed feedback packet, borrowing its bytes. Only [`Ccfb::parse`] makes one, and it has
/// checked every block's length: the iterators cannot fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ccfb<'a> {
    /// SSRC of the receiver that sent the feedback.
    pub sender_ssrc: Ssrc,
    first_ssrc: Ssrc,
    /// The blocks after the header's first SSRC, without the report timestamp.
    blocks: &'a [u8],
    /// The receiver's clock when it wrote the report: the middle 32 bits of an NTP time
    /// (16.16 fixed-point seconds). Arrival time offsets count back from it.
    pub report_timestamp: u32,
}

/// One stream's reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcfbBlock<'a> {
    /// SSRC of the RTP stream these reports are about.
    pub media_ssrc: Ssrc,
    /// RTP sequence number of the first packet reported; the others follow one by one
    /// (wrapping at 2^16).
    pub begin_seq: SeqNo,
    words: &'a [u8],
}

impl<'a> CcfbBlock<'a> {
    /// Number of packets reported on (`num_reports`), at most [`MAX_REPORTS`].
    pub fn len(&self) -> usize {
        self.words.len() / 2
    }

    /// Whether the block reports on no packet at all.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// `(sequence number, report)` for each packet of the range, in order.
    pub fn reports(&self) -> impl Iterator<Item = (SeqNo, CcfbReport)> + 'a {
        let begin = self.begin_seq;
        self.words.chunks_exact(2).enumerate().map(move |(i, w)| {
            (
                begin.add(i as u16),
                CcfbReport::of(u16::from_be_bytes([w[0], w[1]])),
            )
        })
    }
}

/// `(begin_seq, num_reports, bytes the block's reports take with their padding)` at `at`.
fn block_head(data: &[u8], at: usize) -> Result<(SeqNo, usize, usize), String> {
    let head = data
        .get(at..at + 4)
        .ok_or("an RFC 8888 block is cut short before its begin_seq and num_reports")?;
    let begin = SeqNo::from_be_bytes([head[0], head[1]]);
    let n = usize::from(u16::from_be_bytes([head[2], head[3]]));
    if n > MAX_REPORTS {
        return Err(format!(
            "an RFC 8888 block reports {n} packets (at most {MAX_REPORTS})"
        ));
    }
    let words = (2 * n).div_ceil(4) * 4;
    if at + 4 + words > data.len() {
        return Err(format!(
            "an RFC 8888 block of {n} reports runs past its packet"
        ));
    }
    Ok((begin, n, words))
}

impl<'a> Ccfb<'a> {
    /// The feedback in `fb`, or why it is not RFC 8888's (`Ok(None)`: another FMT).
    pub fn parse(fb: &TransportFeedback<'a>) -> Result<Option<Ccfb<'a>>, String> {
        let Some(data) = super::transport_fci::<FMT>(fb, "an RFC 8888 packet")? else {
            return Ok(None);
        };
        // The header names the first stream: its range and the report timestamp must follow.
        if data.len() < 8 {
            return Err(
                "an RFC 8888 packet without its first stream's range or its report timestamp"
                    .into(),
            );
        }
        let body_len = data.len() - 4;
        let (body, ts) = data.split_at(body_len);
        // Every block fits.
        let first_ssrc = fb.media_ssrc();
        walk(body, Ssrc(first_ssrc)).try_for_each(|b| b.map(drop))?;
        Ok(Some(Ccfb {
            sender_ssrc: Ssrc(fb.sender_ssrc()),
            first_ssrc: Ssrc(first_ssrc),
            blocks: body,
            report_timestamp: u32::from_be_bytes([ts[0], ts[1], ts[2], ts[3]]),
        }))
    }

    /// Each stream's block, in order.
    pub fn blocks(&self) -> impl Iterator<Item = CcfbBlock<'a>> + 'a {
        // `parse` walked them all without an error.
        walk(self.blocks, self.first_ssrc).map_while(Result::ok)
    }
}

/// The blocks of `data` (without the report timestamp), the first one's SSRC in the header
/// (`first_ssrc`), the others' before their ranges; an error ends the walk.
fn walk<'a>(
    data: &'a [u8],
    first_ssrc: Ssrc,
) -> impl Iterator<Item = Result<CcfbBlock<'a>, String>> + 'a {
    let mut at = 0;
    let mut first = true;
    let mut failed = false;
    std::iter::from_fn(move || {
        if at >= data.len() || failed {
            return None;
        }
        let block = (|| {
            let ssrc = if first {
                first_ssrc
            } else {
                let s = data
                    .get(at..at + 4)
                    .ok_or("an RFC 8888 block is cut short before its SSRC")?;
                at += 4;
                Ssrc::from_be_bytes([s[0], s[1], s[2], s[3]])
            };
            first = false;
            let (begin_seq, n, words) = block_head(data, at)?;
            let block = CcfbBlock {
                media_ssrc: ssrc,
                begin_seq,
                words: &data[at + 4..at + 4 + 2 * n],
            };
            at += 4 + words;
            Ok(block)
        })();
        failed = block.is_err();
        Some(block)
    })
}

/// RFC 8888 feedback about one stream, to write (`rtcp_types::TransportFeedback::builder`,
/// with [`CcfbWriter::media_ssrc`] as the header's media SSRC).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CcfbWriter {
    media_ssrc: Ssrc,
    begin_seq: SeqNo,
    reports: Vec<CcfbReport>,
    report_timestamp: u32,
}

impl CcfbWriter {
    /// The reports of the packets from `begin_seq` on: the first [`MAX_REPORTS`] of them (a
    /// caller with more sends the rest in another packet).
    pub fn new(
        media_ssrc: Ssrc,
        begin_seq: SeqNo,
        mut reports: Vec<CcfbReport>,
        report_timestamp: u32,
    ) -> CcfbWriter {
        reports.truncate(MAX_REPORTS);
        CcfbWriter {
            media_ssrc,
            begin_seq,
            reports,
            report_timestamp,
        }
    }

    /// SSRC of the stream reported on, for the feedback packet's media-SSRC header field.
    pub fn media_ssrc(&self) -> Ssrc {
        self.media_ssrc
    }
}

impl RtcpPacketWriter for CcfbWriter {
    fn calculate_size(&self) -> Result<usize, RtcpWriteError> {
        Ok(4 + (2 * self.reports.len()).div_ceil(4) * 4 + 4)
    }

    fn write_into_unchecked(&self, buf: &mut [u8]) -> usize {
        buf[..2].copy_from_slice(&self.begin_seq.to_be_bytes());
        buf[2..4].copy_from_slice(&(self.reports.len() as u16).to_be_bytes());
        let mut at = 4;
        for r in &self.reports {
            buf[at..at + 2].copy_from_slice(&r.word().to_be_bytes());
            at += 2;
        }
        if at % 4 != 0 {
            buf[at..at + 2].fill(0);
            at += 2;
        }
        buf[at..at + 4].copy_from_slice(&self.report_timestamp.to_be_bytes());
        at + 4
    }

    fn get_padding(&self) -> Option<u8> {
        None
    }
}

impl FciBuilder<'_> for CcfbWriter {
    fn format(&self) -> u8 {
        FMT
    }
    fn supports_feedback_type(&self) -> FciFeedbackPacketType {
        FciFeedbackPacketType::TRANSPORT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtcp_types::{Compound, Packet, RtcpPacketWriterExt};

    fn written(w: &CcfbWriter) -> Vec<u8> {
        let fb = TransportFeedback::builder(w)
            .sender_ssrc(0xAAAA)
            .media_ssrc(w.media_ssrc.get());
        let mut buf = vec![0u8; 65_536];
        let n = fb.write_into(&mut buf).unwrap();
        buf.truncate(n);
        buf
    }

    /// Sender SSRC, report timestamp, and every (media SSRC, sequence number, report).
    type Parsed = (Ssrc, u32, Vec<(Ssrc, u16, CcfbReport)>);

    fn parsed(bytes: &[u8]) -> Result<Option<Parsed>, String> {
        let mut out = None;
        for p in Compound::parse(bytes).map_err(|e| e.to_string())? {
            if let Packet::TransportFeedback(fb) = p.map_err(|e| e.to_string())? {
                out = Ccfb::parse(&fb)?.map(|c| {
                    let reports = c
                        .blocks()
                        .flat_map(|b| b.reports().map(move |(s, r)| (b.media_ssrc, s.get(), r)))
                        .collect();
                    (c.sender_ssrc, c.report_timestamp, reports)
                });
            }
        }
        Ok(out)
    }

    #[test]
    fn reports_round_trip_with_padding_and_wrapping_sequence_numbers() {
        let reports = vec![
            CcfbReport {
                received: true,
                ecn: 0,
                ato: 5,
            },
            CcfbReport {
                received: false,
                ecn: 0,
                ato: 0,
            },
            CcfbReport {
                received: true,
                ecn: 2,
                ato: ATO_UNKNOWN,
            },
        ];
        let w = CcfbWriter::new(Ssrc(0x1234), SeqNo(65_535), reports.clone(), 0x0102_0304);
        let bytes = written(&w);
        // Header 12, begin/num 4, three reports padded to 8, the timestamp 4.
        assert_eq!(bytes.len(), 28);
        assert_eq!(bytes[0] & 0x1f, FMT);
        assert_eq!(bytes[1], 205);
        let (sender, ts, got) = parsed(&bytes).unwrap().unwrap();
        assert_eq!((sender, ts), (Ssrc(0xAAAA), 0x0102_0304));
        let want: Vec<_> = [65_535u16, 0, 1]
            .into_iter()
            .zip(reports)
            .map(|(s, r)| (Ssrc(0x1234), s, r))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_packet_laid_out_by_hand_from_the_rfc_reads_as_it_should() {
        // V=2, FMT 11, PT 205, length 6; sender 0x5678, stream 0x1234; begin_seq 10, three
        // reports: R=1 ATO 5; R=0; R=1 ECN 2 ATO unknown; two bytes of padding; the report
        // timestamp 1.0 s (16.16). (The fuzz corpus's rtcp/ccfb holds the same packet.)
        let bytes = [
            0x8b, 205, 0, 6, 0, 0, 0x56, 0x78, 0, 0, 0x12, 0x34, 0, 10, 0, 3, 0x80, 0x05, 0, 0,
            0xdf, 0xff, 0, 0, 0, 1, 0, 0,
        ];
        let (sender, ts, got) = parsed(&bytes).unwrap().unwrap();
        assert_eq!((sender, ts), (Ssrc(0x5678), 0x0001_0000));
        let r = |received, ecn, ato| CcfbReport { received, ecn, ato };
        assert_eq!(
            got,
            vec![
                (Ssrc(0x1234), 10, r(true, 0, 5)),
                (Ssrc(0x1234), 11, r(false, 0, 0)),
                (Ssrc(0x1234), 12, r(true, 2, ATO_UNKNOWN)),
            ]
        );
    }

    #[test]
    fn a_block_that_claims_more_than_its_packet_is_refused() {
        let r = CcfbReport {
            received: true,
            ecn: 0,
            ato: 1,
        };
        let w = CcfbWriter::new(Ssrc(1), SeqNo(0), vec![r; 4], 9);
        let mut bytes = written(&w);
        // num_reports 4 → 400.
        bytes[14..16].copy_from_slice(&400u16.to_be_bytes());
        let e = parsed(&bytes).unwrap_err();
        assert!(e.contains("runs past its packet"), "{e}");
        // Over the RFC's range.
        bytes[14..16].copy_from_slice(&20_000u16.to_be_bytes());
        assert!(parsed(&bytes).unwrap_err().contains("at most"));
        // No room for the report timestamp.
        let cut = &mut written(&CcfbWriter::new(Ssrc(1), SeqNo(0), vec![], 9))[..];
        cut[3] = 3; // length 3 words: header + SSRCs + begin/num, no timestamp
        let short = &cut[..16];
        assert!(parsed(short).is_err());
    }

    #[test]
    fn another_transport_feedback_is_not_misread() {
        let nack = rtcp_types::TransportFeedback::builder_owned(
            rtcp_types::Nack::builder().add_rtp_sequence(7),
        )
        .sender_ssrc(1)
        .media_ssrc(2);
        let mut buf = vec![0u8; 64];
        let n = nack.write_into(&mut buf).unwrap();
        assert_eq!(parsed(&buf[..n]).unwrap(), None);
    }

    #[test]
    fn at_most_the_rfc_range_is_written() {
        let r = CcfbReport {
            received: false,
            ecn: 0,
            ato: 0,
        };
        let w = CcfbWriter::new(Ssrc(1), SeqNo(0), vec![r; MAX_REPORTS + 1], 0);
        assert_eq!(w.reports.len(), MAX_REPORTS);
        let (_, _, got) = parsed(&written(&w)).unwrap().unwrap();
        assert_eq!(got.len(), MAX_REPORTS);
    }
}
