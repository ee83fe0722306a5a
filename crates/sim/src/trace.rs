//! A trace of every packet: sent, queued on a link, dropped (and why), delivered.
//!
//! Rows are kept in memory in the order they happened. Tracing costs a row per packet per hop,
//! so large runs (thousands of receivers) turn it off ([`TraceLevel::Off`]) and keep the
//! per-flow figures only.

use super::packet::FlowId;
use metronome_link::topology::{LinkId, NodeId};
use metronome_time::Timestamp;
use std::fmt::Write as _;

/// How much the simulator records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TraceLevel {
    /// No per-packet rows.
    #[default]
    Off,
    /// A row for every packet event.
    Packets,
    /// Every packet each host sent and received, with its bytes ([`Capture`]), for capture
    /// files (`pcap.rs`).
    Captures,
    /// Both.
    PacketsAndCaptures,
}

impl TraceLevel {
    /// The level that records rows, captures, both or neither.
    pub fn of(rows: bool, captures: bool) -> TraceLevel {
        match (rows, captures) {
            (false, false) => TraceLevel::Off,
            (true, false) => TraceLevel::Packets,
            (false, true) => TraceLevel::Captures,
            (true, true) => TraceLevel::PacketsAndCaptures,
        }
    }

    /// Whether it records a row per packet event.
    pub fn rows(self) -> bool {
        matches!(self, TraceLevel::Packets | TraceLevel::PacketsAndCaptures)
    }

    /// Whether it keeps the packets hosts send and receive.
    pub fn captures(self) -> bool {
        matches!(self, TraceLevel::Captures | TraceLevel::PacketsAndCaptures)
    }
}

/// A packet as a host's capture sees it: sent by its application, or delivered to one.
#[derive(Clone, Debug)]
pub struct Capture {
    /// Virtual time it left or arrived.
    pub at: Timestamp,
    /// The host.
    pub node: NodeId,
    /// Sent by the host (else received).
    pub sent: bool,
    /// The packet, its bytes shared with the network's copy.
    pub packet: super::packet::Packet,
}

/// What happened to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketEvent {
    /// An application handed it to the network at its node.
    Sent,
    /// A link accepted it; it waits `queue_delay` before its serialization starts.
    Queued {
        /// The link that accepted it.
        link: LinkId,
        /// The link's queueing delay when it arrived, in nanoseconds.
        queue_delay_ns: u64,
    },
    /// A link or router did not pass it on.
    Dropped {
        /// The link that dropped it; `None` when a node did (no route, a pruned branch).
        link: Option<LinkId>,
        /// Why it was dropped.
        why: DropReason,
    },
    /// It reached an application at its node.
    Delivered,
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The link's loss model picked it.
    Loss,
    /// The link's queue (or netem's `limit`) was full.
    QueueFull,
    /// No route from this node to its destination.
    NoRoute,
    /// A group's packet reached a branch pruned while it was on its way (its receivers left).
    Pruned,
}

impl DropReason {
    /// The reason as written in the trace's CSV `reason` column (`loss`, `queue-full`,
    /// `no-route`, `pruned`).
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Loss => "loss",
            DropReason::QueueFull => "queue-full",
            DropReason::NoRoute => "no-route",
            DropReason::Pruned => "pruned",
        }
    }
}

/// One row of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRow {
    /// Virtual time of the event.
    pub at: Timestamp,
    /// What happened (with the link and queueing delay or drop reason, where there is one).
    pub event: PacketEvent,
    /// Where it happened.
    pub node: NodeId,
    /// The flow the packet belongs to.
    pub flow: FlowId,
    /// The packet's id ([`Packet::id`](super::packet::Packet::id)); multicast copies share it.
    pub packet: u64,
    /// The packet's size on the wire, bytes (IP header included).
    pub size: u32,
}

/// The rows of a run.
#[derive(Clone, Debug, Default)]
pub struct PacketTrace {
    /// The rows, in the order the events happened.
    pub rows: Vec<TraceRow>,
    /// With [`TraceLevel::Captures`]: each host's packets, sent and received, in order.
    pub captures: Vec<Capture>,
}

impl PacketTrace {
    /// The CSV header of [`PacketTrace::write_csv`].
    pub const CSV_HEADER: &'static str =
        "time_ns,event,node,flow,packet,size_bytes,link,queue_delay_ns,reason";

    /// One line per row, header first. Columns: `time_ns` (virtual time of the event),
    /// `event` (`sent`, `queued`, `dropped`, `delivered`), `node` (where), `flow`, `packet` (its
    /// id; multicast copies share one), `size_bytes` (on the wire), `link` (the link that queued
    /// or dropped it, else empty), `queue_delay_ns` (`queued` only: its wait before
    /// serialization), `reason` (`dropped` only: `loss`, `queue-full`, `no-route`, `pruned`).
    /// Node, flow and link are numbers; the summary names them.
    pub fn write_csv(&self, out: &mut String) {
        out.push_str(Self::CSV_HEADER);
        out.push('\n');
        for r in &self.rows {
            let (event, link, qd, reason) = match r.event {
                PacketEvent::Sent => ("sent", None, None, ""),
                PacketEvent::Queued {
                    link,
                    queue_delay_ns,
                } => ("queued", Some(link), Some(queue_delay_ns), ""),
                PacketEvent::Dropped { link, why } => ("dropped", link, None, why.as_str()),
                PacketEvent::Delivered => ("delivered", None, None, ""),
            };
            let _ = write!(
                out,
                "{},{event},{},{},{},{},",
                r.at.as_nanos(),
                r.node.0,
                r.flow.0,
                r.packet,
                r.size
            );
            if let Some(l) = link {
                let _ = write!(out, "{}", l.0);
            }
            out.push(',');
            if let Some(q) = qd {
                let _ = write!(out, "{q}");
            }
            out.push(',');
            out.push_str(reason);
            out.push('\n');
        }
    }

    /// The CSV of [`PacketTrace::write_csv`] as a new string.
    pub fn to_csv(&self) -> String {
        let mut s = String::with_capacity(self.rows.len() * 48 + 80);
        self.write_csv(&mut s);
        s
    }
}
