//! One stream in virtual time: the unchanged [`SenderSession`] and [`ReceiverSession`] over a
//! forward [`Link`] (media and sender reports) and a back link (receiver reports).
//!
//! The loop plays the real-time driver's part with a perfect clock: it holds the packet bytes in
//! slots (the session holds their ids), runs the producer ahead of time as far as the slots
//! allow, wakes the sender exactly when [`SenderSession::poll_timeout`] says, and moves packets
//! over the links. A sender can be *stalled* for a while (a preempted pacing thread): it does
//! nothing until the stall ends, and then the session's late policy decides what happens.
//!
//! Everything is a function of the configuration and the seed: the same [`PairConfig`] gives
//! the same [`Trace`], byte for byte ([`Trace::to_csv`]). The lab's simulator grows from this.

use crate::{Link, LinkConfig, LinkStats, SendOutcome};
use metronome_cc::RateController;
use metronome_session::receiver::{ReceiverConfig, ReceiverSession};
use metronome_session::sender::{
    Input, Mp2tPacketizer, PacketizerConfig, Queued, SenderSession, SenderSessionConfig, Transmit,
};
use metronome_time::{NtpTime, Timestamp};
use metronome_wire::rtp::{patch_send_time, shift_sequence};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

/// Where the simulated sender's packets come from.
pub trait PacketSource {
    /// Writes the next packet into `buf` and says what it is; `None` when the source has ended.
    fn next_packet(&mut self, buf: &mut [u8]) -> Option<SourcePacket>;
}

/// A packet a [`PacketSource`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourcePacket {
    pub len: usize,
    /// Its size on the link (usually `len`; a test may make it larger or smaller).
    pub wire_len: usize,
    pub due: Timestamp,
    pub payload_len: usize,
}

/// A constant-rate MPEG-TS stream: `count` RTP packets of seven TS packets, one TS packet every
/// `ts_interval` (300.8 µs is 5 Mbit/s of TS), stamped with the send-time extension.
pub struct CbrTs {
    packetizer: Mp2tPacketizer,
    ts_interval: Duration,
    i: u64,
    left: usize,
    /// Each packet's size on the link, by index: real length if `None`.
    wire_size: Option<Box<dyn Fn(usize) -> usize>>,
    made: usize,
}

impl CbrTs {
    pub fn new(
        cfg: PacketizerConfig,
        epoch: Timestamp,
        ts_interval: Duration,
        count: usize,
    ) -> Self {
        CbrTs {
            packetizer: Mp2tPacketizer::new(cfg, epoch),
            ts_interval,
            i: 0,
            left: count,
            wire_size: None,
            made: 0,
        }
    }

    /// Gives packet `k` the size `f(k)` on the link.
    pub fn with_wire_size(mut self, f: impl Fn(usize) -> usize + 'static) -> Self {
        self.wire_size = Some(Box::new(f));
        self
    }
}

impl PacketSource for CbrTs {
    fn next_packet(&mut self, buf: &mut [u8]) -> Option<SourcePacket> {
        if self.left == 0 {
            return None;
        }
        let mut ts = [0u8; 188];
        ts[0] = 0x47;
        loop {
            let due = self.ts_interval * u32::try_from(self.i).unwrap_or(u32::MAX);
            self.i += 1;
            // The slot is sized for the largest packet, so writing cannot fail.
            if let Ok(Some(out)) = self.packetizer.push(&ts, due, buf) {
                self.left -= 1;
                let k = self.made;
                self.made += 1;
                return Some(SourcePacket {
                    len: out.len,
                    wire_len: self.wire_size.as_ref().map_or(out.len, |f| f(k)),
                    due: out.release,
                    payload_len: out.payload_len,
                });
            }
        }
    }
}

pub struct PairConfig {
    pub session: SenderSessionConfig,
    pub receiver: ReceiverConfig,
    pub forward: LinkConfig,
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceRow {
    Sent {
        at: Timestamp,
        id: u32,
        due: Timestamp,
    },
    Dropped {
        at: Timestamp,
        id: u32,
        due: Timestamp,
    },
    LinkLost {
        at: Timestamp,
        queue_full: bool,
    },
    Delivered {
        at: Timestamp,
        ext_seq: u64,
        rtp_ts: u32,
    },
    SenderReport {
        at: Timestamp,
    },
    ReceiverReport {
        at: Timestamp,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
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
    pub sender: SenderSession,
    pub receiver: ReceiverSession,
    pub forward: LinkStats,
    pub back: LinkStats,
    pub trace: Trace,
}

/// Both sides share the wall clock of one host: 2026-01-01 plus virtual time.
pub fn wall(t: Timestamp) -> NtpTime {
    NtpTime::from_unix_nanos(1_767_225_600_000_000_000 + t.as_nanos())
}

/// The address receiver reports come from, as the sender sees it.
const RECEIVER_ADDR: &str = "192.0.2.2:5005";

/// Runs `source` through a sender session with `controller`, over the links, to a receiver,
/// until the source has ended and nothing is in flight.
pub fn run_pair(
    cfg: PairConfig,
    mut source: impl PacketSource,
    controller: Box<dyn RateController>,
) -> PairOutcome {
    let slots_n = cfg.session.queue_capacity.max(1);
    let mut slots: Vec<Vec<u8>> = vec![vec![0u8; cfg.slot_size]; slots_n];
    let mut lens = vec![(0usize, 0usize); slots_n];
    let mut free: Vec<u32> = (0..slots_n as u32).rev().collect();
    let mut sender = SenderSession::new(cfg.session, cfg.epoch, controller);
    let mut receiver = ReceiverSession::new(cfg.receiver);
    let mut fwd: Link<Vec<u8>> = Link::new(cfg.forward, cfg.seed);
    let mut back: Link<Vec<u8>> = Link::new(cfg.back, cfg.seed.wrapping_add(1));
    let from: SocketAddr = RECEIVER_ADDR.parse().expect("a valid address");
    let mut trace = Trace::default();
    let mut source_done = false;
    let mut rtcp = [0u8; 1500];
    let mut now = Timestamp::ZERO;
    let stalled_until = |t: Timestamp| {
        cfg.stalls
            .iter()
            .find(|(s, d)| *s <= t && t < *s + *d)
            .map(|(s, d)| *s + *d)
    };
    loop {
        let sender_runs = stalled_until(now).is_none();
        if sender_runs {
            // The producer runs ahead as far as the slots allow.
            while !source_done {
                let Some(id) = free.pop() else { break };
                match source.next_packet(&mut slots[id as usize]) {
                    Some(p) => {
                        lens[id as usize] = (p.len, p.wire_len);
                        let q = Queued {
                            id,
                            packets: 1,
                            due: p.due,
                            wire_len: p.wire_len as u32,
                            payload_len: p.payload_len as u32,
                        };
                        // At most one packet per free slot, in due order: cannot be refused.
                        let _ = sender.handle_input(now, Input::Packet(q));
                    }
                    None => {
                        free.push(id);
                        source_done = true;
                        let _ = sender.handle_input(now, Input::SourceEnded);
                    }
                }
            }
            sender.handle_timeout(now);
            while let Some(t) = sender.poll_transmit(now) {
                let id = t.id();
                match t {
                    Transmit::Send { due, renumber, .. } => {
                        let (len, wire_len) = lens[id as usize];
                        let pkt = &mut slots[id as usize][..len];
                        // Dropped packets never left and take no sequence number.
                        if renumber != 0 {
                            shift_sequence(pkt, renumber as u16);
                        }
                        if cfg.send_time_ext {
                            patch_send_time(pkt, wall(now));
                        }
                        trace.rows.push(TraceRow::Sent { at: now, id, due });
                        let outcome = fwd.send(now, wire_len, pkt.to_vec());
                        if outcome != SendOutcome::Queued {
                            trace.rows.push(TraceRow::LinkLost {
                                at: now,
                                queue_full: outcome == SendOutcome::DroppedQueueFull,
                            });
                        }
                    }
                    Transmit::Drop { due, .. } => {
                        trace.rows.push(TraceRow::Dropped { at: now, id, due })
                    }
                }
                free.push(id);
            }
            if let Some(n) = sender.poll_rtcp(now, wall(now), &mut rtcp) {
                trace.rows.push(TraceRow::SenderReport { at: now });
                fwd.send(now, n, rtcp[..n].to_vec());
            }
            while sender.poll_event().is_some() {}
        }
        while let Some((at, pkt)) = fwd.poll_deliver(now) {
            if (200..=204).contains(&pkt.get(1).copied().unwrap_or(0)) {
                receiver.handle_rtcp(at, &pkt);
            } else if let Ok(rec) = receiver.handle_rtp(at, Some(wall(at)), &pkt) {
                let rtp_ts = u32::from_be_bytes([pkt[4], pkt[5], pkt[6], pkt[7]]);
                trace.rows.push(TraceRow::Delivered {
                    at,
                    ext_seq: rec.ext_seq,
                    rtp_ts,
                });
            }
        }
        let active = !sender.is_finished() || fwd.in_flight() > 0;
        if active {
            if let Some(n) = receiver.poll_transmit(now, &mut rtcp) {
                trace.rows.push(TraceRow::ReceiverReport { at: now });
                back.send(now, n, rtcp[..n].to_vec());
            }
        }
        while let Some((at, pkt)) = back.poll_deliver(now) {
            let input = Input::Rtcp {
                wall: wall(at),
                from,
                data: &pkt,
            };
            let _ = sender.handle_input(at, input);
        }
        while receiver.poll_event().is_some() {}

        // The next thing to happen, in virtual time.
        let mut next = Timestamp::MAX;
        for t in [fwd.poll_timeout(), back.poll_timeout()]
            .into_iter()
            .flatten()
        {
            next = next.min(t);
        }
        if active {
            let sender_next = match stalled_until(now) {
                Some(end) => Some(end),
                None => sender.poll_timeout().map(|(t, _)| t),
            };
            let receiver_next = receiver.poll_timeout().map(|(t, _)| t);
            for t in [sender_next, receiver_next].into_iter().flatten() {
                next = next.min(t);
            }
        }
        if next == Timestamp::MAX {
            break;
        }
        // A time in the past (a timer that fell due while the sender was stalled) is now.
        now = now.max(next);
    }
    PairOutcome {
        sender,
        receiver,
        forward: fwd.stats().clone(),
        back: back.stats().clone(),
        trace,
    }
}
