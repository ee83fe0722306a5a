//! The receiving session's tests, by what they check: `sources.rs` its RFC 3550
//! statistics (sequence, loss, jitter, bad input), `reports.rs` its reports and who is in the
//! session, `repair.rs` asking for lost packets and taking their repairs (NACK, RTX, FEC, groups).

use super::*;
use metronome_time::RtpTime;
use metronome_wire::rtcp::RtcpItem;
use metronome_wire::rtp::{write_packet, RtpHeader, SendTimeExt};
use proptest::prelude::*;
use std::time::Duration;

mod repair;
mod reports;
mod sources;

fn ts_payload() -> [u8; 1316] {
    let mut p = [0u8; 1316];
    for c in p.chunks_exact_mut(188) {
        c[0] = 0x47;
    }
    p
}

fn rtp(seq: u16, ts: u32, ssrc: u32) -> Vec<u8> {
    let mut buf = vec![0u8; 1500];
    let hdr = RtpHeader {
        payload_type: PayloadType(33),
        sequence: SeqNo(seq),
        timestamp: RtpTime(ts),
        ssrc: Ssrc(ssrc),
        marker: false,
    };
    let n = write_packet(&mut buf, &hdr, SendTimeExt::None, &ts_payload()).unwrap();
    buf.truncate(n);
    buf
}

fn session() -> ReceiverSession {
    ReceiverSession::new(ReceiverConfig::default())
}

fn rtcp_sr(ssrc: u32, cname: &str) -> Vec<u8> {
    let mut buf = [0u8; 1500];
    let info = metronome_wire::rtcp::SenderInfo {
        ssrc: Ssrc(ssrc),
        ntp: 0x1234_5678u64 << 16,
        rtp_timestamp: RtpTime(0),
        packet_count: 1,
        octet_count: 1316,
    };
    let n =
        metronome_wire::rtcp::write_compound(&mut buf, ReportHead::Sender(info, &[]), cname, None)
            .unwrap();
    buf[..n].to_vec()
}

fn rtcp_rr_bye(ssrc: u32, bye: bool) -> Vec<u8> {
    let mut buf = [0u8; 1500];
    let head = ReportHead::Receiver {
        ssrc: Ssrc(ssrc),
        blocks: &[],
    };
    let n = metronome_wire::rtcp::write_compound(&mut buf, head, "other", bye.then_some("bye"))
        .unwrap();
    buf[..n].to_vec()
}
