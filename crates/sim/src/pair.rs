//! One stream in virtual time: the unchanged [`SenderSession`] and [`ReceiverSession`] over a
//! forward link (media and sender reports) and a back link (receiver reports).
//!
//! A two-node run of the simulator ([`crate::Sim`]) with one [`RtpFlow`]: everything is a
//! function of the configuration and the seed, so the same [`PairConfig`] gives the same
//! [`Trace`], byte for byte ([`Trace::to_csv`]). A sender can be *stalled* for a while (a
//! preempted pacing thread): it does nothing until the stall ends, and then the session's late
//! policy decides what happens.

use crate::flows::rtp::{RtpFlow, RtpFlowConfig, RtpLogRow};
use crate::trace::{DropReason, PacketEvent, TraceLevel};
use crate::Sim;
use metronome_cc::RateController;
use metronome_link::topology::LinkId;
use metronome_link::{LinkConfig, LinkStats};
use metronome_session::receiver::{ReceiverConfig, ReceiverSession};
use metronome_session::sender::{SenderSession, SenderSessionConfig};
use metronome_time::{RtpTime, Timestamp};
use std::fmt::Write as _;
use std::time::Duration;

pub use crate::flows::rtp::source::wall;
pub use metronome_session::sender::{CbrTs, RtpSource, SourcePacket};

/// Everything a [`run_pair`] run is made from: both sessions' configurations, both links,
/// the seed, the sender's stalls and the stream's timing.
pub struct PairConfig {
    /// The sender session's configuration.
    pub session: SenderSessionConfig,
    /// The receiver session's configuration.
    pub receiver: ReceiverConfig,
    /// The link from sender to receiver: media and sender reports. Packets are sized as RTP
    /// datagrams, with no IP/UDP overhead added.
    pub forward: LinkConfig,
    /// The link from receiver to sender: receiver reports.
    pub back: LinkConfig,
    /// Seeds both links (the back link with `seed + 1`).
    pub seed: u64,
    /// Spans of virtual time in which the sender cannot run: (start, length).
    pub stalls: Vec<(Timestamp, Duration)>,
    /// The stream's epoch (its first due time).
    pub epoch: Timestamp,
    /// Patch the send time into every packet (the packets must have room for it).
    pub send_time_ext: bool,
    /// Largest packet the source makes.
    pub slot_size: usize,
}

/// What happened, in order; one row per event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceRow {
    /// The sender session sent an RTP packet.
    Sent {
        /// When it left (virtual time).
        at: Timestamp,
        /// The slot (the session's packet id) it was held in; slots are reused.
        id: u32,
        /// When it was due by the schedule; `at − due` is its lateness.
        due: Timestamp,
    },
    /// The sender session dropped a packet for being late (its late policy).
    Dropped {
        /// When it was dropped (virtual time).
        at: Timestamp,
        /// The slot (the session's packet id) it was held in.
        id: u32,
        /// When it was due by the schedule.
        due: Timestamp,
    },
    /// The forward link dropped a packet (RTP or RTCP). Drops on the back link are not traced.
    LinkLost {
        /// When the link dropped it (virtual time).
        at: Timestamp,
        /// True: its queue was full; false: its loss model picked the packet.
        queue_full: bool,
    },
    /// An RTP packet reached the receiver and its session took it.
    Delivered {
        /// When it arrived (virtual time).
        at: Timestamp,
        /// Its sequence number as the receiver session extended it.
        ext_seq: u64,
        /// Its RTP timestamp.
        rtp_ts: RtpTime,
    },
    /// The sender sent an RTCP sender report.
    SenderReport {
        /// When it was sent (virtual time).
        at: Timestamp,
    },
    /// The receiver sent an RTCP receiver report.
    ReceiverReport {
        /// When it was sent (virtual time).
        at: Timestamp,
    },
}

/// The rows of a pair run, in time order (see [`Trace::to_csv`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The rows, in the order the events happened.
    pub rows: Vec<TraceRow>,
}

impl Trace {
    /// One line per row: `time_ns,event,a,b` (header first). Fields: `sent,id,due_ns`;
    /// `dropped,id,due_ns`; `link_lost,queue_full(0/1),`; `delivered,ext_seq,rtp_ts`;
    /// `sender_report,,`; `receiver_report,,`.
    pub fn to_csv(&self) -> String {
        let mut s = String::from("time_ns,event,a,b\n");
        for r in &self.rows {
            let _ = match *r {
                TraceRow::Sent { at, id, due } => {
                    writeln!(s, "{},sent,{id},{}", at.as_nanos(), due.as_nanos())
                }
                TraceRow::Dropped { at, id, due } => {
                    writeln!(s, "{},dropped,{id},{}", at.as_nanos(), due.as_nanos())
                }
                TraceRow::LinkLost { at, queue_full } => {
                    writeln!(s, "{},link_lost,{},", at.as_nanos(), u8::from(queue_full))
                }
                TraceRow::Delivered {
                    at,
                    ext_seq,
                    rtp_ts,
                } => writeln!(s, "{},delivered,{ext_seq},{rtp_ts}", at.as_nanos()),
                TraceRow::SenderReport { at } => writeln!(s, "{},sender_report,,", at.as_nanos()),
                TraceRow::ReceiverReport { at } => {
                    writeln!(s, "{},receiver_report,,", at.as_nanos())
                }
            };
        }
        s
    }

    /// (arrival, extended sequence number) of every delivered RTP packet, in arrival order.
    pub fn delivered(&self) -> Vec<(Timestamp, u64)> {
        self.rows
            .iter()
            .filter_map(|r| match *r {
                TraceRow::Delivered { at, ext_seq, .. } => Some((at, ext_seq)),
                _ => None,
            })
            .collect()
    }
}

/// What a run leaves behind: both sessions, as they ended, and what the links did.
pub struct PairOutcome {
    /// The sender session as it ended (its statistics, its pacing and rate figures).
    pub sender: SenderSession,
    /// The receiver session as it ended.
    pub receiver: ReceiverSession,
    /// What the forward link carried, queued and dropped.
    pub forward: LinkStats,
    /// What the back link carried, queued and dropped.
    pub back: LinkStats,
    /// The sessions' decisions and the forward link's drops, in time order.
    pub trace: Trace,
}

/// Runs `source` through a sender session with `controller`, over the links, to a receiver,
/// until the source has ended and nothing is in flight.
pub fn run_pair(
    cfg: PairConfig,
    source: impl RtpSource + 'static,
    controller: Box<dyn RateController>,
) -> PairOutcome {
    let mut sim = Sim::new(cfg.seed, TraceLevel::Packets);
    let s = sim.add_node("sender");
    let r = sim.add_node("receiver");
    sim.add_link(s, r, cfg.forward, cfg.back);
    let flow = RtpFlow::new(
        RtpFlowConfig {
            name: "pair".into(),
            src: s,
            receivers: vec![r],
            session: cfg.session,
            receiver: cfg.receiver,
            epoch: cfg.epoch,
            send_time_ext: cfg.send_time_ext,
            slot_size: cfg.slot_size,
            stalls: cfg.stalls,
            ip_overhead: 0,
            interval: Duration::ZERO,
            histograms: false,
            log: true,
            track_arrivals: false,
            lookahead: None,
            membership: Vec::new(),
            repair: None,
            fec: None,
        },
        Box::new(source),
        controller,
    );
    let id = sim.add_flow(Box::new(flow));
    // Until the sender has finished and the forward link is empty.
    while sim.step() {
        let done = sim.flow_done(id);
        if done && sim.net().link_in_flight(LinkId(0)) == 0 {
            break;
        }
    }
    let forward = sim.net().link_stats(LinkId(0)).clone();
    let back = sim.net().link_stats(LinkId(1)).clone();
    let (out, flows) = sim.finish_with_flows();
    let flow = flows
        .into_iter()
        .next()
        .and_then(|f| f.into_any().downcast::<RtpFlow>().ok())
        .expect("the pair's one flow is an RtpFlow");
    let flow = *flow;
    let mut rows: Vec<TraceRow> = Vec::with_capacity(flow.log.len());
    let mut drops = out.trace.rows.iter().filter_map(|t| match t.event {
        PacketEvent::Dropped {
            link: Some(LinkId(0)),
            why,
        } => Some(TraceRow::LinkLost {
            at: t.at,
            queue_full: why == DropReason::QueueFull,
        }),
        _ => None,
    });
    let mut next_drop = drops.next();
    for row in &flow.log {
        let row = TraceRow::from(*row);
        while let Some(d) = next_drop.filter(|d| d.at() < row.at()) {
            rows.push(d);
            next_drop = drops.next();
        }
        rows.push(row);
    }
    rows.extend(next_drop);
    rows.extend(drops);
    let (sender, mut receivers) = flow.into_sessions();
    PairOutcome {
        sender,
        receiver: receivers.remove(0),
        forward,
        back,
        trace: Trace { rows },
    }
}

impl TraceRow {
    fn at(&self) -> Timestamp {
        match *self {
            TraceRow::Sent { at, .. }
            | TraceRow::Dropped { at, .. }
            | TraceRow::LinkLost { at, .. }
            | TraceRow::Delivered { at, .. }
            | TraceRow::SenderReport { at }
            | TraceRow::ReceiverReport { at } => at,
        }
    }
}

impl From<RtpLogRow> for TraceRow {
    fn from(r: RtpLogRow) -> Self {
        match r {
            RtpLogRow::Sent { at, id, due } => TraceRow::Sent { at, id, due },
            RtpLogRow::Dropped { at, id, due } => TraceRow::Dropped { at, id, due },
            RtpLogRow::SenderReport { at } => TraceRow::SenderReport { at },
            RtpLogRow::ReceiverReport { at, .. } => TraceRow::ReceiverReport { at },
            RtpLogRow::Delivered {
                at,
                ext_seq,
                rtp_ts,
                ..
            } => TraceRow::Delivered {
                at,
                ext_seq,
                rtp_ts,
            },
        }
    }
}
