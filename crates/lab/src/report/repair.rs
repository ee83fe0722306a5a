//! The report's loss-repair table: per viewer of a flow that repairs (`repair = "rtx"`,
//! `"fec"`), what the network lost, what came back in time (retransmitted or rebuilt from FEC),
//! and what the repairs cost the sender.

use super::esc;
use crate::results::PointResult;
use metronome_link::report::{FlowReport, ReceiverReport, RepairFigures};
use std::fmt::Write as _;

/// Viewers shown at most (a crowd's are all in summary.json).
const MAX_ROWS: usize = 80;

/// The point's repair tables, or nothing if no flow repairs: the viewers' side, then the
/// senders' (one row per flow; two tables, so that neither is wider than the page).
pub(super) fn repair_table(p: &PointResult) -> String {
    let rows: Vec<_> = p
        .flows
        .iter()
        .flat_map(|f| f.receivers.iter().map(move |r| (f, r)))
        .filter_map(|(f, r)| r.repair.map(|v| (f, r, v)))
        .take(MAX_ROWS)
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<div class=\"side\"><table><caption>Loss repair at the viewers: NACK and retransmission, \
         FEC (SMPTE 2022-1)</caption>\
         <tr><th>flow</th><th>receiver</th><th>lost by the network</th>\
         <th>repaired: retransmitted / FEC</th><th>lost after repair</th>\
         <th>came after the play-out time: retransmitted / FEC</th><th>given up</th>\
         <th>NACKs (numbers asked)</th><th>retransmissions received (redundant)</th>\
         <th>FEC received (unusable)</th><th>RTT ms</th></tr>",
    );
    for (f, r, v) in rows {
        h.push_str(&viewer_row(f, r, &v));
    }
    h.push_str("</table>");
    h.push_str(&sender_table(p));
    h.push_str(
        "</div>\n<p class=\"note\">Viewers ask only for what a repair can still bring before \
         the play-out time; the sender sends only what can still make it, within a quarter of \
         the stream's rate. FEC rebuilds a packet when its row or column misses only it, \
         in either direction in turn. Receiver reports keep what the network lost \
         (RFC 4588).</p>\n",
    );
    h
}

/// What each repairing flow's sender sent and held back.
fn sender_table(p: &PointResult) -> String {
    let mut h = String::from(
        "<table><caption>Loss repair at the sender</caption><tr><th>flow</th>\
         <th>retransmissions (overhead %)</th><th>not sent: too late / over budget / \
         expired / left at the end</th><th>losses told to the group: numbers (TLLEIs)</th>\
         <th>FEC (overhead %)</th></tr>",
    );
    let senders: Vec<_> = p
        .flows
        .iter()
        .filter_map(|f| f.repair.map(|s| (f, s)))
        .collect();
    if senders.is_empty() {
        return String::new();
    }
    for (f, s) in senders {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{} ({:.1} %)</td><td>{} / {} / {} / {}</td><td>{} ({})</td>\
             <td>{} ({:.1} %)</td></tr>",
            esc(&f.name),
            s.sent_packets,
            s.overhead_percent,
            s.too_late,
            s.over_budget,
            s.expired,
            s.left_at_end,
            s.noticed,
            s.loss_notices,
            s.fec_packets,
            s.fec_overhead_percent
        );
    }
    h.push_str("</table>");
    h
}

fn viewer_row(f: &FlowReport, r: &ReceiverReport, v: &RepairFigures) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<tr><td>{}</td><td>{}</td><td>{} ({:.2} %)</td><td>{} / {}</td><td>{} ({:.2} %)</td>\
         <td>{} / {}</td><td>{}</td><td>{} ({})</td><td>{} ({})</td><td>{} ({})</td>\
         <td>{:.1}</td></tr>",
        esc(&f.name),
        esc(&r.node),
        r.lost,
        r.loss_percent,
        v.repaired,
        v.fec_repaired,
        v.lost_after,
        v.lost_after_percent,
        v.too_late,
        v.fec_too_late,
        v.given_up,
        v.nack_packets,
        v.asked,
        v.retransmissions,
        v.redundant,
        v.fec_received,
        v.fec_unrecoverable,
        v.rtt_us.as_millis_f64(),
    );
    h
}
