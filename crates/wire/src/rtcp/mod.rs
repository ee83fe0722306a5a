//! RTCP compound packets (RFC 3550 §6): what Metronome sends and what it reads, via `rtcp-types`.
//!
//! Building allocates a little (rtcp-types boxes each packet of a compound); RTCP is sent a few
//! times a second at most, off the per-packet path.

pub mod cc;
pub mod ccfb;
pub mod nack;
pub mod xr;

use crate::Ssrc;
pub use cc::{CcApp, TfmccFeedback, TfmccSender, TfrcFeedback, TfrcRtt};
pub use ccfb::{Ccfb, CcfbReport, CcfbWriter};
use metronome_time::RtpTime;
pub use nack::{write_nack, write_tllei, Nack};
use rtcp_types::{
    App, Bye, Compound, Packet, ReceiverReport, ReportBlock, RtcpPacketParserExt,
    RtcpPacketWriterExt, Sdes, SdesChunk, SdesItem, SenderReport, TransportFeedback,
};
pub use xr::{write_dlrr, write_rrtr, XrItem};

/// Why an RTCP compound packet could not be read or written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RtcpError {
    /// Reading: the compound is invalid (bad version, length, padding, an APP packet whose
    /// padding exceeds its data, an RFC 8888 block running past its packet) and nothing was
    /// visited; a receiver counts and drops it. Writing: `rtcp-types` refused the content
    /// (for example a CNAME over 255 bytes). The text says which.
    #[error("malformed RTCP: {0}")]
    Malformed(String),
    /// The output buffer is too small; carries the bytes the compound needs.
    #[error("RTCP output buffer too small: needs {0} bytes")]
    BufferTooSmall(usize),
}

/// Sender information of an SR (RFC 3550 §6.4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderInfo {
    /// SSRC of the sender this report is from.
    pub ssrc: Ssrc,
    /// Wall-clock time the report was sent, as a 64-bit NTP timestamp (the bits of an
    /// `NtpTime`: 32.32 fixed-point seconds since 1900).
    pub ntp: u64,
    /// The same instant as `ntp` on the stream's RTP media clock, for lip sync and delay.
    pub rtp_timestamp: RtpTime,
    /// RTP data packets sent since the start of transmission (wraps at 2^32).
    pub packet_count: u32,
    /// Payload octets sent since the start (RTP headers and padding excluded; wraps at 2^32).
    pub octet_count: u32,
}

/// One report block (RFC 3550 §6.4.1): what `reporter` says about source `ssrc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// SSRC of the source this block reports on.
    pub ssrc: Ssrc,
    /// Fraction lost since the last report, in 1/256.
    pub fraction_lost: u8,
    /// Cumulative packets lost (24-bit signed on the wire).
    pub cumulative_lost: i32,
    /// Highest sequence number received: the 16-bit number in the low half, the count of
    /// its wraps in the high half.
    pub extended_highest_seq: u32,
    /// Interarrival jitter in RTP timestamp units.
    pub jitter: u32,
    /// Middle 32 bits of the NTP time of the last SR received, or 0.
    pub lsr: u32,
    /// Delay since that SR in 1/65536 s.
    pub dlsr: u32,
}

/// One thing found in a compound packet, handed to the visitor of [`parse_compound`].
#[derive(Debug, PartialEq, Eq)]
pub enum RtcpItem<'a> {
    /// The sender information of an SR; its report blocks follow as separate
    /// [`RtcpItem::ReportBlock`] items.
    SenderReport(SenderInfo),
    /// One report block of an SR or RR.
    ReportBlock {
        /// SSRC of the participant that sent the SR or RR.
        reporter: Ssrc,
        /// What it says about one source.
        block: Block,
    },
    /// An SDES CNAME item (RFC 3550 §6.5.1): the persistent name of a participant.
    Cname {
        /// SSRC of the chunk that carries the CNAME.
        ssrc: Ssrc,
        /// The CNAME's bytes as sent (UTF-8 by the RFC, not checked here).
        cname: &'a [u8],
    },
    /// A BYE (RFC 3550 §6.6): the source is leaving; one item per SSRC listed.
    Bye {
        /// SSRC of the departing source.
        ssrc: Ssrc,
    },
    /// A congestion-control APP packet ([`cc`]) from `ssrc`.
    Cc {
        /// SSRC of the APP packet's sender.
        ssrc: Ssrc,
        /// The decoded TFRC or TFMCC fields.
        app: CcApp,
    },
    /// RFC 8888 feedback ([`ccfb`]).
    Ccfb(Ccfb<'a>),
    /// A generic NACK (RFC 4585 §6.2.1, [`nack`]): lost packets a receiver asks for.
    Nack(Nack<'a>),
    /// A TLLEI (RFC 6642 §4.1, [`nack`]): losses the stream's sender already knows of, told
    /// to the group so that its receivers do not ask for them.
    Tllei(Nack<'a>),
    /// An RFC 3611 RRTR or DLRR block ([`xr`]): a receiver's reference time, or the sender's
    /// answer to one.
    Xr(XrItem),
    /// A packet type Metronome does not act on (another APP, feedback, XR, unknown), or a
    /// congestion-control APP packet of another length or subtype: counted by the caller.
    Other {
        /// The RTCP packet type (PT field: 204 APP, 205 transport feedback, 207 XR, ...).
        packet_type: u8,
    },
}

/// A transport-layer feedback packet's FCI of format `F`, as rtcp-types hands it over:
/// everything after the header's two SSRCs.
struct Fci<'a, const F: u8>(&'a [u8]);

impl<'a, const F: u8> rtcp_types::FciParser<'a> for Fci<'a, F> {
    const PACKET_TYPE: rtcp_types::FciFeedbackPacketType =
        rtcp_types::FciFeedbackPacketType::TRANSPORT;
    const FCI_FORMAT: u8 = F;

    fn parse(data: &'a [u8]) -> Result<Self, rtcp_types::RtcpParseError> {
        Ok(Fci(data))
    }
}

/// The FCI of `fb` without its padding if its FMT is `F`; `Ok(None)` for another FMT; an
/// error naming `what` when the padding runs past the data.
fn transport_fci<'a, const F: u8>(
    fb: &rtcp_types::TransportFeedback<'a>,
    what: &str,
) -> Result<Option<&'a [u8]>, String> {
    let data = match fb.parse_fci::<Fci<'a, F>>() {
        Ok(Fci(d)) => d,
        Err(rtcp_types::RtcpParseError::WrongImplementation) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let pad = usize::from(fb.padding().unwrap_or(0));
    data.len()
        .checked_sub(pad)
        .map(|n| Some(&data[..n]))
        .ok_or_else(|| format!("{what}'s padding runs past its data"))
}

/// What a transport-layer feedback packet that passed the first pass is.
fn transport_item<'a>(fb: &TransportFeedback<'a>) -> RtcpItem<'a> {
    if let Ok(Some(c)) = Ccfb::parse(fb) {
        RtcpItem::Ccfb(c)
    } else if let Ok(Some(n)) = Nack::parse(fb) {
        RtcpItem::Nack(n)
    } else if let Ok(Some(t)) = Nack::parse_tllei(fb) {
        RtcpItem::Tllei(t)
    } else {
        RtcpItem::Other {
            packet_type: fb.type_(),
        }
    }
}

/// An APP packet's header, SSRC and name, before its data.
const APP_HEADER: usize = 12;

/// Walks a compound RTCP packet and hands each item to `visit`. The whole compound is validated
/// (lengths, version, padding) before any item is visited, so a bad packet changes nothing.
pub fn parse_compound(data: &[u8], mut visit: impl FnMut(RtcpItem<'_>)) -> Result<(), RtcpError> {
    let bad = |e: rtcp_types::RtcpParseError| RtcpError::Malformed(e.to_string());
    // First pass: every packet parses.
    for p in Compound::parse(data).map_err(bad)? {
        // rtcp-types 0.3 does not check an APP packet's padding against its data, and
        // `App::data` then panics (the fuzzer found it: crates/fuzz/regressions/rtcp/).
        match p.map_err(bad)? {
            Packet::App(app) => {
                let pad = usize::from(app.padding().unwrap_or(0));
                if APP_HEADER + pad > app.length() {
                    return Err(RtcpError::Malformed(format!(
                        "an APP packet of {} bytes claims {pad} bytes of padding",
                        app.length()
                    )));
                }
            }
            // An RFC 8888 block that runs past its packet, or a NACK without whole entries,
            // refuses the compound.
            Packet::TransportFeedback(fb) => {
                Ccfb::parse(&fb).map_err(RtcpError::Malformed)?;
                Nack::parse(&fb).map_err(RtcpError::Malformed)?;
                Nack::parse_tllei(&fb).map_err(RtcpError::Malformed)?;
            }
            _ => {}
        }
    }
    for p in Compound::parse(data).map_err(bad)? {
        match p.map_err(bad)? {
            Packet::Sr(sr) => {
                visit(RtcpItem::SenderReport(SenderInfo {
                    ssrc: Ssrc(sr.ssrc()),
                    ntp: sr.ntp_timestamp(),
                    rtp_timestamp: RtpTime(sr.rtp_timestamp()),
                    packet_count: sr.packet_count(),
                    octet_count: sr.octet_count(),
                }));
                for b in sr.report_blocks() {
                    visit(RtcpItem::ReportBlock {
                        reporter: Ssrc(sr.ssrc()),
                        block: block_of(&b),
                    });
                }
            }
            Packet::Rr(rr) => {
                for b in rr.report_blocks() {
                    visit(RtcpItem::ReportBlock {
                        reporter: Ssrc(rr.ssrc()),
                        block: block_of(&b),
                    });
                }
            }
            Packet::Sdes(sdes) => {
                for chunk in sdes.chunks() {
                    for item in chunk.items() {
                        if item.type_() == SdesItem::CNAME {
                            visit(RtcpItem::Cname {
                                ssrc: Ssrc(chunk.ssrc()),
                                cname: item.value(),
                            });
                        }
                    }
                }
            }
            Packet::Bye(bye) => {
                for ssrc in bye.ssrcs() {
                    visit(RtcpItem::Bye { ssrc: Ssrc(ssrc) });
                }
            }
            Packet::App(app) => match CcApp::decode(app.name(), app.count(), app.data()) {
                Some(cc) => visit(RtcpItem::Cc {
                    ssrc: Ssrc(app.ssrc()),
                    app: cc,
                }),
                None => visit(RtcpItem::Other {
                    packet_type: app.type_(),
                }),
            },
            Packet::TransportFeedback(fb) => visit(transport_item(&fb)),
            // Read from its bytes below.
            Packet::Xr(_) => {}
            other => visit(RtcpItem::Other {
                packet_type: other.type_(),
            }),
        }
    }
    visit_xr(data, &mut visit);
    Ok(())
}

/// The RRTR and DLRR items of a validated compound's XR packets; an XR packet with neither is
/// one `Other` item.
fn visit_xr(data: &[u8], visit: &mut impl FnMut(RtcpItem<'_>)) {
    for packet in raw_packets(data).filter(|p| p[1] == xr::XR) {
        let mut any = false;
        xr::parse_xr(packet, |item| {
            any = true;
            visit(RtcpItem::Xr(item))
        });
        if !any {
            visit(RtcpItem::Other {
                packet_type: xr::XR,
            });
        }
    }
}

/// The packets of a compound that has been validated, each from its header to its end.
fn raw_packets(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let head = data.get(at..at + 4)?;
        let len = (usize::from(u16::from_be_bytes([head[2], head[3]])) + 1) * 4;
        let packet = data.get(at..at + len)?;
        at += len;
        Some(packet)
    })
}

fn block_of(b: &ReportBlock<'_>) -> Block {
    // The cumulative loss is a 24-bit two's complement value (RFC 3550 §6.4.1).
    let raw = b.cumulative_lost() & 0x00ff_ffff;
    let cumulative_lost = ((raw << 8) as i32) >> 8;
    Block {
        ssrc: Ssrc(b.ssrc()),
        fraction_lost: b.fraction_lost(),
        cumulative_lost,
        extended_highest_seq: b.extended_sequence_number(),
        jitter: b.interarrival_jitter(),
        lsr: b.last_sender_report_timestamp(),
        dlsr: b.delay_since_last_sender_report_timestamp(),
    }
}

fn block_builder(b: &Block) -> rtcp_types::ReportBlockBuilder {
    // Clamp to the 24-bit signed range before encoding (RFC 3550 §6.4.1).
    let lost = b.cumulative_lost.clamp(-0x80_0000, 0x7f_ffff) as u32 & 0x00ff_ffff;
    ReportBlock::builder(b.ssrc.get())
        .fraction_lost(b.fraction_lost)
        .cumulative_lost(lost)
        .extended_sequence_number(b.extended_highest_seq)
        .interarrival_jitter(b.jitter)
        .last_sender_report_timestamp(b.lsr)
        .delay_since_last_sender_report_timestamp(b.dlsr)
}

/// What a compound packet starts with: an SR when we have sent media, an RR otherwise.
#[derive(Clone, Copy, Debug)]
pub enum ReportHead<'b> {
    /// An SR: the sender information, then report blocks on the sources we receive
    /// (at most 31 are written).
    Sender(SenderInfo, &'b [Block]),
    /// An RR, for a participant that has sent no media.
    Receiver {
        /// Our own SSRC, also used for the SDES chunk, APP packets and BYE.
        ssrc: Ssrc,
        /// Report blocks on the sources we receive (at most 31 are written).
        blocks: &'b [Block],
    },
}

/// Writes `SR|RR + SDES(CNAME) [+ BYE]` into `buf` (RFC 3550 §6.1: every compound starts with a
/// report and carries a CNAME). At most 31 report blocks fit one report; extra ones are left out.
pub fn write_compound(
    buf: &mut [u8],
    head: ReportHead<'_>,
    cname: &str,
    bye_reason: Option<&str>,
) -> Result<usize, RtcpError> {
    write_compound_with(buf, head, cname, &[], None, bye_reason)
}

/// [`write_compound`], with congestion-control APP packets after the CNAME and RFC 8888
/// feedback after them (before a BYE).
pub fn write_compound_with(
    buf: &mut [u8],
    head: ReportHead<'_>,
    cname: &str,
    apps: &[CcApp],
    ccfb: Option<&CcfbWriter>,
    bye_reason: Option<&str>,
) -> Result<usize, RtcpError> {
    // rtcp-types' APP builder borrows its data: encode every packet's first.
    let data: Vec<(&str, u8, Vec<u8>)> = apps
        .iter()
        .map(|a| {
            let (name, subtype) = a.name_and_subtype();
            let bytes = a.words().iter().flat_map(|w| w.to_be_bytes()).collect();
            (name, subtype, bytes)
        })
        .collect();
    let (ssrc, compound) = match head {
        ReportHead::Sender(info, blocks) => {
            let mut sr = SenderReport::builder(info.ssrc.get())
                .ntp_timestamp(info.ntp)
                .rtp_timestamp(info.rtp_timestamp.get())
                .packet_count(info.packet_count)
                .octet_count(info.octet_count);
            for b in blocks.iter().take(31) {
                sr = sr.add_report_block(block_builder(b));
            }
            (info.ssrc, Compound::builder().add_packet(sr))
        }
        ReportHead::Receiver { ssrc, blocks } => {
            let mut rr = ReceiverReport::builder(ssrc.get());
            for b in blocks.iter().take(31) {
                rr = rr.add_report_block(block_builder(b));
            }
            (ssrc, Compound::builder().add_packet(rr))
        }
    };
    let sdes = Sdes::builder().add_chunk(
        SdesChunk::builder(ssrc.get()).add_item(SdesItem::builder(SdesItem::CNAME, cname)),
    );
    let mut compound = compound.add_packet(sdes);
    for (name, subtype, bytes) in &data {
        compound =
            compound.add_packet(App::builder(ssrc.get(), name).subtype(*subtype).data(bytes));
    }
    if let Some(fb) = ccfb {
        compound = compound.add_packet(
            TransportFeedback::builder(fb)
                .sender_ssrc(ssrc.get())
                .media_ssrc(fb.media_ssrc().get()),
        );
    }
    if let Some(reason) = bye_reason {
        compound = compound.add_packet(Bye::builder().add_source(ssrc.get()).reason(reason));
    }
    compound.write_into(buf).map_err(|e| match e {
        rtcp_types::RtcpWriteError::OutputTooSmall(n) => RtcpError::BufferTooSmall(n),
        e => RtcpError::Malformed(e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block() -> Block {
        Block {
            ssrc: Ssrc(7),
            fraction_lost: 64,
            cumulative_lost: -3,
            extended_highest_seq: 0x1_0005,
            jitter: 90,
            lsr: 0xb705_2000,
            dlsr: 0x0005_4000,
        }
    }

    #[test]
    fn sr_sdes_bye_round_trip() {
        let info = SenderInfo {
            ssrc: Ssrc(42),
            ntp: 0x1122_3344_5566_7788,
            rtp_timestamp: RtpTime(9000),
            packet_count: 10,
            octet_count: 13_160,
        };
        let mut buf = [0u8; 1500];
        let n = write_compound(
            &mut buf,
            ReportHead::Sender(info, &[block()]),
            "metronome@host",
            Some("bye"),
        )
        .unwrap();
        let mut items = Vec::new();
        parse_compound(&buf[..n], |i| items.push(format!("{i:?}"))).unwrap();
        assert_eq!(items.len(), 4, "{items:?}");
        assert!(items[0].contains("packet_count: 10"));
        assert!(items[1].contains("cumulative_lost: -3"));
        assert!(items[2].contains("Cname"));
        assert_eq!(items[3], "Bye { ssrc: Ssrc(0x0000002a) }");
    }

    #[test]
    fn an_app_packet_padded_past_its_data_is_refused_not_a_panic() {
        // An RR, then an APP packet of 12 bytes (no data) whose padding bit is set and whose
        // last byte claims 0xc9 bytes of padding (found by the fuzzer).
        let mut pkt = vec![0x80, 201, 0, 1, 0, 0, 0, 1];
        pkt.extend([0xa0, 204, 0, 2, 0, 0, 0, 1, b'T', b'F', b'M', 0xc9]);
        let e = parse_compound(&pkt, |_| panic!("nothing is visited")).unwrap_err();
        assert!(e.to_string().contains("padding"), "{e}");
    }

    #[test]
    fn rr_round_trip_and_garbage_rejected_whole() {
        let mut buf = [0u8; 1500];
        let n = write_compound(
            &mut buf,
            ReportHead::Receiver {
                ssrc: Ssrc(5),
                blocks: &[block()],
            },
            "r",
            None,
        )
        .unwrap();
        let mut got = None;
        parse_compound(&buf[..n], |i| {
            if let RtcpItem::ReportBlock { reporter, block } = i {
                got = Some((reporter, block));
            }
        })
        .unwrap();
        assert_eq!(got, Some((Ssrc(5), block())));

        // Truncating the compound anywhere but at the RR/SDES boundary (32 bytes) makes it an
        // error, and then nothing at all is visited.
        for cut in 0..n {
            let mut visited = 0;
            let r = parse_compound(&buf[..cut], |_| visited += 1);
            if cut == 32 {
                assert_eq!((r, visited), (Ok(()), 1));
            } else {
                assert!(r.is_err(), "cut {cut}");
                assert_eq!(visited, 0, "cut {cut}");
            }
        }
    }

    #[test]
    fn congestion_control_apps_round_trip_and_other_apps_are_left_alone() {
        let fb = TfrcFeedback {
            media_ssrc: Ssrc(0xdead_beef),
            echo_seq: 90_000,
            t_delay_us: 1234,
            x_recv_bytes_per_s: 125_000,
            p_fraction: TfrcFeedback::fraction_of(0.01),
        };
        let apps = [
            CcApp::TfrcFeedback(fb),
            CcApp::TfrcRtt(TfrcRtt { rtt_us: 41_000 }),
            CcApp::TfmccSender(TfmccSender {
                round: 65_535,
                flags: TfmccSender::SLOW_START,
                x_supp: u32::MAX,
                r_max_us: 80_000,
                feedback_delay_us: 480_000,
                clr: Ssrc(7),
                echo_ssrc: Ssrc(8),
                echo_ts_us: 0xffff_fff0,
                echo_delay_us: 12,
                x_send: 500_000,
            }),
            CcApp::TfmccFeedback(TfmccFeedback {
                media_ssrc: Ssrc(42),
                ts_us: 1,
                rtt_us: 2,
                x_calc: 3,
                x_recv: 4,
                p_fraction: cc::fraction_of(0.5),
                round: 9,
                flags: TfmccFeedback::HAVE_RTT | TfmccFeedback::LEAVING,
                echo_seq: 90_000,
                echo_delay_us: 77,
            }),
        ];
        let mut buf = [0u8; 1500];
        let head = ReportHead::Receiver {
            ssrc: Ssrc(5),
            blocks: &[block()],
        };
        let n = write_compound_with(&mut buf, head, "r", &apps, None, Some("bye")).unwrap();
        let mut got = Vec::new();
        parse_compound(&buf[..n], |i| {
            if let RtcpItem::Cc { ssrc, app } = i {
                got.push((ssrc, app));
            }
        })
        .unwrap();
        assert_eq!(got, apps.iter().map(|a| (Ssrc(5), *a)).collect::<Vec<_>>());
        assert!((fb.p() - 0.01).abs() < 1e-9, "{}", fb.p());
        // The TFRC report: name TFRC, subtype 0, 20 bytes of data, 32 bytes in all (length 7).
        let app = &buf[..n]
            .windows(4)
            .position(|w| w == b"TFRC")
            .map(|at| &buf[at - 8..at + 24])
            .unwrap();
        assert_eq!(
            (app[0] & 0x1f, app[1], u16::from_be_bytes([app[2], app[3]])),
            (0, 204, 7)
        );
        // Another APP, one of these names cut short or of another subtype, is counted as
        // other, not misread.
        let other = App::builder(9, "ABCD").data(&[0u8; 20]);
        let short = App::builder(9, "TFRC").data(&[0u8; 8]);
        let subtype = App::builder(9, "TFMC").subtype(5).data(&[0u8; 36]);
        for p in [other, short, subtype] {
            let mut b = [0u8; 200];
            let rr = ReceiverReport::builder(9);
            let n = Compound::builder()
                .add_packet(rr)
                .add_packet(p)
                .write_into(&mut b)
                .unwrap();
            let mut kinds = Vec::new();
            parse_compound(&b[..n], |i| kinds.push(format!("{i:?}"))).unwrap();
            assert_eq!(kinds, vec!["Other { packet_type: 204 }".to_string()]);
        }
    }
}
