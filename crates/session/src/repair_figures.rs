//! What loss repair did, as a report gives it: a viewer's figures from its receiver session's
//! counts, the sender's from its session's. The simulator's flows and the lab's emu mode both
//! report through these, into the link crate's report types, without either depending on the
//! other.

use crate::receiver::RepairStats;
use crate::repair::FecSendCounters;
use crate::sender::ResendStats;
use metronome_link::report::{percent, RepairFigures, SenderRepairFigures};

/// A viewer's repair figures: `lost` is what the network lost of the `expected` packets.
pub fn viewer_repair(s: &RepairStats, lost: u64, expected: u64) -> RepairFigures {
    let lost_after = lost.saturating_sub(s.rtx_useful + s.fec_useful);
    let fec = s.fec.unwrap_or_default();
    RepairFigures {
        fec_repaired: s.fec_useful,
        fec_too_late: s.fec_late,
        fec_received: fec.packets,
        fec_unrecoverable: fec.unrecoverable,
        lost_after,
        lost_after_percent: percent(lost_after, expected),
        repaired: s.rtx_useful,
        too_late: s.rtx_late,
        given_up: s.nack.given_up,
        nack_packets: s.nack_packets,
        asked: s.nack.asked,
        retransmissions: s.rtx_packets,
        redundant: s.rtx_redundant,
        rtt_us: s.rtt_us,
    }
}

/// The sender's repair figures: its retransmissions and FEC packets on the wire (each with
/// `ip_overhead` bytes of IP and UDP headers) beside the stream's `stream_bytes`; `None` if it
/// makes neither.
pub fn sender_repair(
    rtx: Option<&ResendStats>,
    fec: Option<&FecSendCounters>,
    ip_overhead: u32,
    stream_bytes: u64,
) -> Option<SenderRepairFigures> {
    if rtx.is_none() && fec.is_none() {
        return None;
    }
    let s = rtx.copied().unwrap_or_default();
    let fec = fec.copied().unwrap_or_default();
    let bytes = s.bytes + u64::from(ip_overhead) * s.packets;
    let fec_packets = fec.rows + fec.columns;
    let fec_bytes = fec.bytes + u64::from(ip_overhead) * fec_packets;
    Some(SenderRepairFigures {
        asked: s.repairer.asked,
        sent_packets: s.packets,
        sent_bytes: bytes,
        overhead_percent: percent(bytes, stream_bytes),
        too_late: s.repairer.too_late,
        over_budget: s.repairer.over_budget,
        duplicate: s.repairer.duplicate,
        unknown: s.repairer.unknown,
        expired: s.expired,
        left_at_end: s.waiting,
        loss_notices: s.loss_notices,
        noticed: s.noticed,
        fec_packets,
        fec_bytes,
        fec_overhead_percent: percent(fec_bytes, stream_bytes),
    })
}
