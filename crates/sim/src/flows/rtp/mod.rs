//! An RTP stream in the simulator: the engine's unchanged [`SenderSession`] at the source node,
//! an unchanged [`ReceiverSession`] at each receiving node, sender reports along the media's
//! path (the multicast tree, for a group) and receiver reports back to the sender by unicast
//! (RFC 5760's unicast feedback for source-specific multicast).
//!
//! The flow plays the real-time driver's part with a perfect clock: it holds the packet bytes
//! in slots (the session holds their ids), runs the producer ahead as far as the slots allow,
//! wakes the session exactly when [`SenderSession::poll_timeout`] says, and can *stall* the
//! sender for spans of time (a preempted pacing thread), after which the session's late
//! policy decides what happens.

use super::{destination, Flow};
use metronome_time::Micros;
pub mod source;

use crate::net::Net;
use crate::packet::{Body, Dst, FlowId, Packet};
use metronome_cc::RateController;
use metronome_link::meter::Meter;
use metronome_link::report::{FlowReport, ReceiverReport};
use metronome_link::topology::NodeId;
use metronome_session::receiver::{ReceiverConfig, ReceiverSession};
use metronome_session::repair::{FecConfig, Outlet};
use metronome_session::repair_figures::{sender_repair, viewer_repair};
use metronome_session::sender::RtpSource;
use metronome_session::sender::{
    Input, Queued, SenderRepair, SenderSession, SenderSessionConfig, Transmit,
};
use metronome_time::{Bitrate, RtpTime, Timestamp};
use metronome_wire::rtp::{patch_send_time, shift_sequence};
use metronome_wire::Ssrc;
use source::wall;
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

/// How an RTP flow runs: its nodes, the sender's and receivers' session configurations, its
/// stalls, and what it keeps for the report.
pub struct RtpFlowConfig {
    /// The flow's name in reports.
    pub name: String,
    /// The node of the sender session.
    pub src: NodeId,
    /// The receiving nodes, one receiver session each: one is unicast, more a multicast tree.
    pub receivers: Vec<NodeId>,
    /// The sender session's configuration (its queue capacity is also the number of slots).
    pub session: SenderSessionConfig,
    /// Every receiver's configuration (each gets its own seed from it).
    pub receiver: ReceiverConfig,
    /// The stream's epoch (its first due time).
    pub epoch: Timestamp,
    /// Patch the send time into every packet (the packets must have room for it).
    pub send_time_ext: bool,
    /// Largest packet the source makes.
    pub slot_size: usize,
    /// Spans of virtual time in which the sender cannot run: (start, length).
    pub stalls: Vec<(Timestamp, Duration)>,
    /// Bytes each datagram takes on the wire beyond the RTP packet (28: IPv4 and UDP).
    pub ip_overhead: u32,
    /// Bin width of the receivers' per-interval figures.
    pub interval: Duration,
    /// Keep full delay and inter-arrival distributions per receiver.
    pub histograms: bool,
    /// Keep [`RtpFlow::log`], a row per packet sent, dropped and delivered (a pair's trace;
    /// too much for thousands of receivers).
    pub log: bool,
    /// Keep each receiver's arrival time of every packet ([`RtpFlow::arrivals`]), for frame
    /// figures: 8 bytes per packet per receiver.
    pub track_arrivals: bool,
    /// How far ahead of now the producer may run (its packets' due times); `None`: as far as
    /// the slots allow. A source that follows a rate controller needs a bound, as the real
    /// driver's producer has one: what is made is sent at the rate it was made for.
    pub lookahead: Option<Duration>,
    /// When receivers join and leave the group; a receiver not named is a member throughout.
    pub membership: Vec<MemberWindow>,
    /// The sender answers NACKs with retransmissions (the receivers ask when
    /// [`ReceiverConfig::repair`] is set); they go where the stream goes.
    pub repair: Option<SenderRepair>,
    /// The sender sends SMPTE 2022-1 FEC after the packets it protects (the receivers use it
    /// when [`ReceiverConfig::repair`] takes FEC); it goes where the stream goes.
    pub fec: Option<FecConfig>,
}

/// One receiver's time in the group (by its index in [`RtpFlowConfig::receivers`]): it is
/// grafted onto the tree at `join` and, with `leave`, says goodbye then (its last report, with
/// TFMCC's leaving flag, and a BYE) and is pruned. A receiver whose rate controller leaves of
/// its own accord (TFMCC's 120 s rule) leaves the same way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemberWindow {
    /// Index of the receiver in [`RtpFlowConfig::receivers`].
    pub receiver: usize,
    /// When it joins the group (virtual time).
    pub join: Timestamp,
    /// When it leaves, if it does; `None`: it stays to the end.
    pub leave: Option<Timestamp>,
}

/// What the sender did, in order (the trace of the sessions' decisions, beside the network's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtpLogRow {
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
    /// The sender sent an RTCP sender report.
    SenderReport {
        /// When it was sent (virtual time).
        at: Timestamp,
    },
    /// A receiver sent an RTCP receiver report to the sender.
    ReceiverReport {
        /// When it was sent (virtual time).
        at: Timestamp,
        /// The receiver's index in [`RtpFlowConfig::receivers`].
        receiver: u32,
    },
    /// An RTP packet reached receiver `receiver` (by index) and its session took it.
    Delivered {
        /// When it arrived (virtual time).
        at: Timestamp,
        /// The receiver's index in [`RtpFlowConfig::receivers`].
        receiver: u32,
        /// Its sequence number as the receiver session extended it.
        ext_seq: u64,
        /// Its RTP timestamp.
        rtp_ts: RtpTime,
    },
}

/// An RTP stream in the simulator (see the module docs): the sender session and its source
/// at the source node, a receiver session and a meter at each receiving node.
pub struct RtpFlow {
    cfg: RtpFlowConfig,
    id: FlowId,
    dst: Dst,
    source: Box<dyn RtpSource>,
    source_done: bool,
    /// The sender's session, unchanged from the real-time engine's.
    pub sender: SenderSession,
    /// One receiver session per receiving node, in the order of [`RtpFlowConfig::receivers`].
    pub receivers: Vec<ReceiverSession>,
    meters: Vec<Meter>,
    slots: Vec<Vec<u8>>,
    lens: Vec<(usize, usize)>,
    free: Vec<u32>,
    /// When each endpoint's pending wake-up is (`MAX`: none).
    wakes: Vec<Timestamp>,
    sent: u64,
    sent_bytes: u64,
    first_send: Option<Timestamp>,
    last_send: Timestamp,
    /// The sessions' decisions in order, if [`RtpFlowConfig::log`] is set; else empty.
    pub log: Vec<RtpLogRow>,
    rtcp: Vec<u8>,
    /// Per receiver, by packet number (sequence number from the first one sent): when it
    /// arrived, `Timestamp::MAX` if it did not.
    arrivals: Vec<Vec<Timestamp>>,
    first_seq: Option<u64>,
    /// The due time of the last packet made.
    last_due: Timestamp,
    rate_trace: Vec<(Timestamp, u64)>,
    /// Retransmissions and FEC packets made, each with the time it leaves (paced between the
    /// media's packets) and whether it is FEC.
    protection: std::collections::VecDeque<(Timestamp, Protection)>,
    /// Per receiver, whether it is in the group now.
    member: Vec<bool>,
    /// Per receiver, its time in the group ([`RtpFlowConfig::membership`]), if it has one.
    windows: Vec<Option<MemberWindow>>,
    /// Per receiver, when it joined and left (time, packets sent by then): what it could
    /// expect to receive is what was sent in between.
    joined: Vec<Option<(Timestamp, u64)>>,
    left: Vec<Option<(Timestamp, u64)>>,
}

/// A packet that protects the stream, waiting for its time.
enum Protection {
    /// A retransmission (RFC 4588), to the stream's destination.
    Rtx(Rc<[u8]>),
    /// A FEC packet (SMPTE 2022-1), to the destination's FEC port.
    Fec(Rc<[u8]>),
}

impl RtpFlow {
    /// The flow of `cfg`, whose packets `source` makes and whose rate `controller` sets; not
    /// yet bound to a network. Each receiver gets the receiver configuration with its index
    /// added to the seed and SSRC and appended to the CNAME.
    pub fn new(
        cfg: RtpFlowConfig,
        source: Box<dyn RtpSource>,
        controller: Box<dyn RateController>,
    ) -> Self {
        let n = cfg.session.queue_capacity.max(1);
        let mut sender = SenderSession::new(cfg.session.clone(), cfg.epoch, controller);
        if let Some(r) = cfg.repair {
            sender = sender.with_repair(r);
        }
        if let Some(f) = cfg.fec {
            sender = sender.with_fec(f);
        }
        sender = sender.sending_at_rate(source.leaves_at_rate());
        let receivers = (0..cfg.receivers.len())
            .map(|i| {
                // Each receiver is its own RTP participant: its own SSRC and CNAME.
                ReceiverSession::new(ReceiverConfig {
                    seed: cfg.receiver.seed.wrapping_add(i as u64),
                    ssrc: Ssrc(cfg.receiver.ssrc.get().wrapping_add(i as u32)),
                    cname: format!("{}-{i}", cfg.receiver.cname),
                    ..cfg.receiver.clone()
                })
            })
            .collect();
        let meters = cfg
            .receivers
            .iter()
            .map(|_| Meter::new(cfg.interval, cfg.histograms))
            .collect();
        RtpFlow {
            id: FlowId(u32::MAX),
            dst: Dst::Node(cfg.src),
            source,
            source_done: false,
            sender,
            receivers,
            meters,
            slots: vec![vec![0u8; cfg.slot_size]; n],
            lens: vec![(0, 0); n],
            free: (0..n as u32).rev().collect(),
            wakes: vec![Timestamp::MAX; cfg.receivers.len() + 1],
            sent: 0,
            sent_bytes: 0,
            first_send: None,
            last_send: Timestamp::ZERO,
            log: Vec::new(),
            rtcp: vec![0u8; 1500],
            arrivals: vec![Vec::new(); cfg.receivers.len()],
            first_seq: None,
            last_due: Timestamp::ZERO,
            rate_trace: Vec::new(),
            protection: std::collections::VecDeque::new(),
            member: vec![false; cfg.receivers.len()],
            windows: (0..cfg.receivers.len())
                .map(|r| cfg.membership.iter().find(|w| w.receiver == r).copied())
                .collect(),
            joined: vec![None; cfg.receivers.len()],
            left: vec![None; cfg.receivers.len()],
            cfg,
        }
    }

    fn stalled_until(&self, t: Timestamp) -> Option<Timestamp> {
        self.cfg
            .stalls
            .iter()
            .find(|(s, d)| *s <= t && t < *s + *d)
            .map(|(s, d)| *s + *d)
    }

    /// Wakes endpoint `ep` at `at` unless an earlier wake-up is already pending.
    fn wake_at(&mut self, now: Timestamp, ep: u32, at: Option<Timestamp>, net: &mut Net) {
        let Some(at) = at else { return };
        let at = at.max(now);
        let w = &mut self.wakes[ep as usize];
        if *w <= now || at < *w {
            *w = at;
            net.wake(at, self.id, ep);
        }
    }

    fn datagram(&self, net: &mut Net, now: Timestamp, dst: Dst, data: &[u8]) -> Packet {
        Packet {
            id: net.packet_id(),
            flow: self.id,
            src: self.cfg.src,
            dst,
            size: data.len() as u32 + self.cfg.ip_overhead,
            sent_at: now,
            body: Body::Datagram(Rc::from(data)),
        }
    }

    /// Takes the retransmission (if the stream's packets have paid for one,
    /// [`metronome_session::sender::SenderSession::poll_repair`]) and the FEC packets the media
    /// packet of `wire_len` bytes just sent made: each leaves the session's spacing after the
    /// one before (`repair_spacing`, `fec_spacing`), between the media's packets, as the real-time
    /// driver sends them (sent back to back with the media, they would find no room in a
    /// queue the media keeps full).
    fn make_protection(&mut self, now: Timestamp, wire_len: usize, net: &mut Net) {
        let mut buf = std::mem::take(&mut self.rtcp);
        let need = self.cfg.slot_size + 64;
        buf.resize(buf.len().max(need), 0);
        let gap = self.sender.repair_spacing(wire_len);
        let mut at = self.take_repairs(now, gap, 1, &mut buf);
        let half = self.sender.fec_spacing(wire_len);
        while let Some((_, n)) = self.sender.poll_fec(&mut buf) {
            at += half;
            let p = Protection::Fec(Rc::from(&buf[..n]));
            self.protection.push_back((at, p));
        }
        self.rtcp = buf;
        let first = self.protection.front().map(|(t, _)| *t);
        self.wake_at(now, 0, first, net);
    }

    /// Takes up to `most` retransmissions the stream's packets have paid for, to leave `gap`
    /// apart after `now` or the last packet waiting; when the last of them leaves.
    fn take_repairs(
        &mut self,
        now: Timestamp,
        gap: Duration,
        most: usize,
        buf: &mut [u8],
    ) -> Timestamp {
        let mut at = self.protection.back().map_or(now, |(t, _)| (*t).max(now));
        if !self.sender.repairs() {
            return at;
        }
        for _ in 0..most {
            let Some(n) = self.sender.poll_repair(now, at + gap, buf).map(|r| r.len) else {
                break;
            };
            at += gap;
            self.protection
                .push_back((at, Protection::Rtx(Rc::from(&buf[..n]))));
        }
        at
    }

    /// While no packet of the stream waits (the source is between frames, or over), what its
    /// packets have paid for leaves now, a repair's spacing apart
    /// ([`metronome_session::sender::SenderSession::repair_spacing`]), rather than wait for a
    /// packet that may not come: when a NACK comes, and after the sender ran.
    fn repair_while_idle(&mut self, now: Timestamp) {
        if !self.sender.repairs() || self.sender.next_send().is_some() {
            return;
        }
        let mut buf = std::mem::take(&mut self.rtcp);
        buf.resize(buf.len().max(self.cfg.slot_size + 64), 0);
        let gap = self.sender.repair_spacing(self.cfg.slot_size);
        self.take_repairs(now, gap, usize::MAX, &mut buf);
        self.rtcp = buf;
    }

    /// Sends the retransmissions and FEC packets due by `now`, where the stream goes.
    fn send_protection(&mut self, now: Timestamp, net: &mut Net) {
        while let Some((at, p)) = self.protection.front() {
            if *at > now {
                return;
            }
            let pkt = match p {
                Protection::Rtx(data) => self.datagram(net, now, self.dst, data),
                Protection::Fec(data) => {
                    let mut pkt = self.datagram(net, now, self.dst, &[]);
                    pkt.size = data.len() as u32 + self.cfg.ip_overhead;
                    pkt.body = Body::Fec(Rc::clone(data));
                    pkt
                }
            };
            self.protection.pop_front();
            net.send(now, self.cfg.src, pkt);
        }
    }

    /// How far ahead the producer is: when the next packet will be due, where the source
    /// knows it, or else when the last one made is due.
    fn ahead_to(&self) -> Timestamp {
        self.source.next_due().unwrap_or(self.last_due)
    }

    /// The producer runs ahead as far as the slots (and the lookahead) allow.
    fn produce(&mut self, now: Timestamp) {
        while !self.source_done {
            if let Some(ahead) = self.cfg.lookahead {
                if self.ahead_to() > now + ahead {
                    break;
                }
            }
            let Some(id) = self.free.pop() else { break };
            match self.source.next_packet(&mut self.slots[id as usize]) {
                Ok(Some(p)) => {
                    self.lens[id as usize] = (p.len, p.wire_len);
                    self.last_due = self.last_due.max(p.due);
                    let q = Queued {
                        id,
                        packets: 1,
                        due: p.due,
                        wire_len: p.wire_len as u32,
                        payload_len: p.payload_len as u32,
                        seq: metronome_wire::rtp::sequence_of(&self.slots[id as usize][..p.len]),
                    };
                    // At most one packet per free slot, in due order: cannot be refused.
                    let _ = self.sender.handle_input(now, Input::Packet(q));
                }
                // A source that fails ends the stream (it keeps the reason for its report).
                Ok(None) | Err(_) => {
                    self.free.push(id);
                    self.source_done = true;
                    let _ = self.sender.handle_input(now, Input::SourceEnded);
                }
            }
        }
    }

    fn run_sender(&mut self, now: Timestamp, net: &mut Net) {
        if let Some(end) = self.stalled_until(now) {
            self.wake_at(now, 0, Some(end), net);
            return;
        }
        self.send_protection(now, net);
        self.produce(now);
        self.sender.handle_timeout(now);
        while let Some(t) = self.sender.poll_transmit(now) {
            let id = t.id();
            match t {
                Transmit::Send { due, renumber, .. } => self.send_slot(now, id, due, renumber, net),
                Transmit::Drop { due, .. } => self.note(RtpLogRow::Dropped { at: now, id, due }),
            }
            self.free.push(id);
        }
        self.produce(now);
        self.repair_while_idle(now);
        let mut rtcp = std::mem::take(&mut self.rtcp);
        if let Some(n) = self.sender.poll_rtcp(now, wall(now), &mut rtcp) {
            self.note(RtpLogRow::SenderReport { at: now });
            let pkt = self.datagram(net, now, self.dst, &rtcp[..n]);
            net.send(now, self.cfg.src, pkt);
        }
        self.rtcp = rtcp;
        self.follow_events(now);
        let mut next = self.sender.poll_timeout().map(|(t, _)| t);
        if self.cfg.lookahead.is_some() && !self.source_done && !self.free.is_empty() {
            // Wake to make more when the lookahead moves past what is made.
            let more = self
                .ahead_to()
                .saturating_sub(self.cfg.lookahead.unwrap_or_default());
            next = Some(next.map_or(more, |t| t.min(more.max(now))));
        }
        if let Some((p, _)) = self.protection.front() {
            next = Some(next.map_or(*p, |t| t.min(*p)));
        }
        self.wake_at(now, 0, next, net);
    }

    /// The session's events; the source follows the rate controller, and hears each report.
    fn follow_events(&mut self, now: Timestamp) {
        use metronome_session::sender::SessionEvent;
        while let Some(e) = self.sender.poll_event() {
            match e {
                SessionEvent::RateChanged { rate, .. } => {
                    self.follow_change(now, rate);
                    self.rate_trace.push((now, rate.as_bps()));
                }
                SessionEvent::RateReported { media, .. } => {
                    // In the source's units, as a change is converted (not kept within the
                    // source's range: a VBR controller caps the mean it takes).
                    let own = media.as_bps() as f64 * self.source.source_per_wire();
                    self.source.note_queue(self.sender.queued_due(now));
                    self.source.rate_reported(own.round() as u64);
                }
                _ => {}
            }
        }
    }

    /// The source follows the controller's change of target to `wire`.
    fn follow_change(&mut self, now: Timestamp, wire: Bitrate) {
        if let Some(rate) = self.source.rate_for_wire(wire) {
            self.source.note_queue(self.sender.queued_due(now));
            // A refusal keeps the source's rate: the flow's rate trace shows the controller's.
            let _ = self.source.follow_rate(rate);
        }
    }

    /// The controller's target rate each time it changed: (when, bit/s on the wire).
    pub fn rate_trace(&self) -> &[(Timestamp, u64)] {
        &self.rate_trace
    }

    fn send_slot(&mut self, now: Timestamp, id: u32, due: Timestamp, renumber: u32, net: &mut Net) {
        let (len, wire_len) = self.lens[id as usize];
        let pkt = &mut self.slots[id as usize][..len];
        // Dropped packets never left and take no sequence number.
        if renumber != 0 {
            shift_sequence(pkt, renumber as u16);
        }
        if self.cfg.send_time_ext {
            patch_send_time(pkt, wall(now));
        }
        self.sender.keep_sent(pkt, due);
        if self.first_seq.is_none() && pkt.len() >= 4 {
            // Receivers extend sequence numbers from 0 cycles: the first one sent is number 0
            // (a sender starting within a few packets of a wrap would number them past it).
            self.first_seq = Some(u64::from(metronome_wire::rtp::sequence_of(pkt).get()));
        }
        if self.cfg.log {
            self.log.push(RtpLogRow::Sent { at: now, id, due });
        }
        let size = wire_len as u32 + self.cfg.ip_overhead;
        let p = Packet {
            id: net.packet_id(),
            flow: self.id,
            src: self.cfg.src,
            dst: self.dst,
            size,
            sent_at: now,
            body: Body::Datagram(Rc::from(&*pkt)),
        };
        self.sent += 1;
        self.sent_bytes += size as u64;
        self.first_send.get_or_insert(now);
        self.last_send = now;
        net.send(now, self.cfg.src, p);
        self.make_protection(now, wire_len, net);
    }

    fn run_receiver(&mut self, now: Timestamp, ep: u32, net: &mut Net) {
        let r = ep as usize - 1;
        self.report_from(now, r, net, |rx, buf| rx.poll_transmit(now, buf));
        while self.receivers[r].poll_event().is_some() {}
        self.leave_if_controller_left(now, r, net);
        let next = self.receivers[r].poll_timeout().map(|(t, _)| t);
        self.wake_at(now, ep, next, net);
    }

    fn receive(&mut self, now: Timestamp, r: usize, pkt: &Packet, data: &[u8], net: &mut Net) {
        let rx = &mut self.receivers[r];
        if (200..=204).contains(&data.get(1).copied().unwrap_or(0)) {
            rx.handle_rtcp(now, data);
        } else if let Ok(rec) = rx.handle_rtp(now, Some(wall(now)), data) {
            use metronome_session::receiver::SeqVerdict;
            self.note(RtpLogRow::Delivered {
                at: now,
                receiver: r as u32,
                ext_seq: rec.ext_seq,
                rtp_ts: rec.rtp_ts,
            });
            if rec.repaired {
                // What the network delivered stays the meter's; the viewer has the packet.
                self.track(r, rec.ext_seq, now);
            } else if !matches!(rec.verdict, SeqVerdict::Duplicate | SeqVerdict::TooLate) {
                self.meters[r].account(now, pkt.size, pkt.sent_at);
                self.track(r, rec.ext_seq, now);
            } else {
                self.meters[r].duplicates += 1;
            }
        }
        self.take_rebuilt(now, r);
        while self.receivers[r].poll_event().is_some() {}
        self.leave_if_controller_left(now, r, net);
        let next = self.receivers[r].poll_timeout().map(|(t, _)| t);
        self.wake_at(now, r as u32 + 1, next, net);
    }

    /// Receiver `r` has the packets FEC rebuilt at `now`.
    fn take_rebuilt(&mut self, now: Timestamp, r: usize) {
        while let Some(rebuilt) = self.receivers[r].poll_rebuilt(now) {
            if let Ok(rec) = rebuilt {
                self.note(RtpLogRow::Delivered {
                    at: now,
                    receiver: r as u32,
                    ext_seq: rec.ext_seq,
                    rtp_ts: rec.rtp_ts,
                });
                self.track(r, rec.ext_seq, now);
            }
        }
    }

    /// Receiver `r` sends to the sender what `write` puts in its RTCP buffer, if anything.
    fn report_from(
        &mut self,
        now: Timestamp,
        r: usize,
        net: &mut Net,
        write: impl FnOnce(&mut ReceiverSession, &mut [u8]) -> Option<usize>,
    ) {
        let mut rtcp = std::mem::take(&mut self.rtcp);
        if let Some(n) = write(&mut self.receivers[r], &mut rtcp) {
            self.note(RtpLogRow::ReceiverReport {
                at: now,
                receiver: r as u32,
            });
            let mut pkt = self.datagram(net, now, Dst::Node(self.cfg.src), &rtcp[..n]);
            pkt.src = self.cfg.receivers[r];
            net.send(now, self.cfg.receivers[r], pkt);
        }
        self.rtcp = rtcp;
    }

    /// The endpoint that wakes at membership changes (after the sender's and receivers').
    fn membership_ep(&self) -> u32 {
        self.cfg.receivers.len() as u32 + 1
    }

    /// Joins and leaves due at `now`; the tree is made again once.
    fn update_membership(&mut self, now: Timestamp, net: &mut Net) {
        let mut changed = false;
        for r in 0..self.windows.len() {
            let Some(w) = self.windows[r] else { continue };
            if self.receivers[r].has_left() || self.left[r].is_some() {
                continue;
            }
            if w.leave.is_some_and(|l| l <= now) {
                changed |= self.leave_when_due(now, r, net);
            } else if w.join <= now && !self.member[r] {
                self.member[r] = true;
                self.joined[r] = Some((now, self.sent));
                changed = true;
            }
        }
        if changed {
            self.retree(net);
        }
    }

    /// Receiver `r`'s leave is due: it goes, unless its controller keeps it a little longer
    /// (TFMCC's CLR until its round ends, RFC 4654 §4.2; then `leave_if_controller_left`).
    /// One that never joined (its leave before its join) just never does. Whether it left.
    fn leave_when_due(&mut self, now: Timestamp, r: usize, net: &mut Net) -> bool {
        if self.receivers[r].leave_pending() {
            return false;
        }
        if self.member[r] {
            if !self.receivers[r].wish_to_leave(now) {
                // Its flagged report goes at once.
                self.run_receiver(now, r as u32 + 1, net);
                return false;
            }
            self.say_goodbye(now, r, net);
        }
        self.left[r] = Some((now, self.sent));
        true
    }

    /// TFMCC's end at receiver `r` left (RFC 4654 §4.4's rule): so does the receiver.
    fn leave_if_controller_left(&mut self, now: Timestamp, r: usize, net: &mut Net) {
        if self.receivers[r].controller_left() && !self.receivers[r].has_left() {
            self.say_goodbye(now, r, net);
            self.retree(net);
        }
    }

    /// Receiver `r` says goodbye to the sender and is no longer a member (the caller makes
    /// the tree again).
    fn say_goodbye(&mut self, now: Timestamp, r: usize, net: &mut Net) {
        self.report_from(now, r, net, |rx, buf| rx.leave(now, buf));
        self.member[r] = false;
        self.left[r] = Some((now, self.sent));
    }

    /// The group's tree follows its members.
    fn retree(&mut self, net: &mut Net) {
        if let Dst::Tree(t) = self.dst {
            let members: Vec<NodeId> = self
                .cfg
                .receivers
                .iter()
                .zip(&self.member)
                .filter(|(_, m)| **m)
                .map(|(n, _)| *n)
                .collect();
            net.set_tree_members(t, &members);
        }
    }

    /// Packets receiver `r` could expect (those sent while it was in the group), and how long
    /// it was in it while the stream was sent; a receiver in it throughout: every packet, over
    /// the stream's `active` time.
    fn expected_and_active(&self, r: usize, active: Duration) -> (u64, Duration) {
        let Some((t0, s0)) = self.joined[r] else {
            return (0, Duration::ZERO);
        };
        let (t1, s1) = self.left[r].unwrap_or((self.last_send, self.sent));
        if t0 == Timestamp::ZERO && self.left[r].is_none() {
            return (self.sent, active);
        }
        let start = self.first_send.unwrap_or(Timestamp::ZERO).max(t0);
        let end = t1.min(self.last_send);
        (s1.saturating_sub(s0), end.saturating_since(start))
    }

    /// Records packet `ext_seq`'s arrival at receiver `r` (numbers bounded by what was sent).
    fn track(&mut self, r: usize, ext_seq: u64, now: Timestamp) {
        if !self.cfg.track_arrivals {
            return;
        }
        let Some(k) = self.first_seq.and_then(|first| ext_seq.checked_sub(first)) else {
            return;
        };
        let k = k as usize;
        if k >= self.sent as usize {
            return;
        }
        let a = &mut self.arrivals[r];
        if a.len() <= k {
            a.resize(k + 1, Timestamp::MAX);
        }
        a[k] = a[k].min(now);
    }

    /// Receiver `r`'s arrival time of each packet, by its number from the first sent
    /// (`Timestamp::MAX`: lost); empty unless `track_arrivals`. Shorter than the packets sent
    /// if the last ones were lost.
    pub fn arrivals(&self, r: usize) -> &[Timestamp] {
        self.arrivals.get(r).map_or(&[], |a| a.as_slice())
    }

    /// Packets sent.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    fn note(&mut self, row: RtpLogRow) {
        if self.cfg.log {
            self.log.push(row);
        }
    }

    /// The sender's and receivers' sessions, as they ended.
    pub fn into_sessions(self) -> (SenderSession, Vec<ReceiverSession>) {
        (self.sender, self.receivers)
    }

    /// The address a receiver's reports come from, as the sender sees it.
    fn receiver_addr(node: NodeId) -> SocketAddr {
        let [_, _, hi, lo] = node.0.to_be_bytes();
        SocketAddr::from((Ipv4Addr::new(10, 0, hi, lo), 5005))
    }
}

impl Flow for RtpFlow {
    fn bind(&mut self, id: FlowId, net: &mut Net) {
        self.id = id;
        self.dst = destination(net, id, self.cfg.src, &self.cfg.receivers);
        net.listen(id, self.cfg.src, 0);
        self.member = self
            .windows
            .iter()
            .map(|w| w.is_none_or(|w| w.join == Timestamp::ZERO))
            .collect();
        for (j, m) in self.joined.iter_mut().zip(&self.member) {
            *j = m.then_some((Timestamp::ZERO, 0));
        }
        if self.member.iter().any(|m| !m) {
            self.retree(net);
        }
    }

    fn start(&mut self, now: Timestamp, net: &mut Net) {
        let rate = self.sender.target_rate();
        self.rate_trace.push((now, rate.as_bps()));
        if self.cfg.lookahead.is_some() {
            // A source that follows the controller starts at its first rate.
            self.follow_change(now, rate);
        }
        let ep = self.membership_ep();
        let times: std::collections::BTreeSet<Timestamp> = self
            .windows
            .iter()
            .flatten()
            .flat_map(|w| [Some(w.join), w.leave])
            .flatten()
            .map(|t| t.max(now))
            .collect();
        for t in times {
            net.wake(t, self.id, ep);
        }
        self.run_sender(now, net);
    }

    fn on_wake(&mut self, now: Timestamp, ep: u32, net: &mut Net) {
        if let Some(w) = self.wakes.get_mut(ep as usize) {
            if *w == now {
                *w = Timestamp::MAX;
            }
        }
        if ep == 0 {
            self.run_sender(now, net);
        } else if (ep as usize) <= self.receivers.len() {
            self.run_receiver(now, ep, net);
        } else if ep == self.membership_ep() {
            self.update_membership(now, net);
        }
    }

    fn on_packet(&mut self, now: Timestamp, ep: u32, pkt: Packet, net: &mut Net) {
        if let Body::Fec(data) = &pkt.body {
            let r = ep as usize;
            if r >= 1 && r <= self.receivers.len() && self.member[r - 1] {
                self.receivers[r - 1].handle_fec(data);
                self.take_rebuilt(now, r - 1);
            }
            return;
        }
        let Body::Datagram(data) = &pkt.body else {
            return;
        };
        let data = Rc::clone(data);
        if ep == 0 {
            let input = Input::Rtcp {
                wall: wall(now),
                from: Self::receiver_addr(pkt.src),
                // One destination: the receiver, or the group's tree.
                outlet: Outlet(0),
                data: &data,
            };
            let _ = self.sender.handle_input(now, input);
            self.repair_while_idle(now);
            self.follow_events(now);
            // The controller may have something to tell the receivers at once.
            self.wake_at(now, 0, Some(now), net);
        } else if (ep as usize) <= self.receivers.len() && self.member[ep as usize - 1] {
            self.receive(now, ep as usize - 1, &pkt, &data, net);
        }
    }

    fn done(&self) -> bool {
        self.sender.is_finished()
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }

    fn report(&mut self, end: Timestamp, net: &Net) -> FlowReport {
        let start = self.first_send.unwrap_or(Timestamp::ZERO);
        let active = self.last_send.saturating_since(start);
        let windows: Vec<(u64, Duration)> = (0..self.cfg.receivers.len())
            .map(|r| self.expected_and_active(r, active))
            .collect();
        let receivers = self
            .cfg
            .receivers
            .iter()
            .zip(&mut self.meters)
            .zip(windows)
            .zip(&self.receivers)
            .map(|(((&n, m), (expected, active)), rx)| {
                let name = net.topology().node_name(n).to_string();
                let mut r = ReceiverReport::from_meter(name, m, expected, active);
                r.repair = rx
                    .repair_stats()
                    .map(|s| viewer_repair(&s, r.lost, expected));
                r
            })
            .collect();
        FlowReport {
            name: self.cfg.name.clone(),
            kind: "rtp".into(),
            src: net.topology().node_name(self.cfg.src).to_string(),
            target_bps: self.sender.target_rate().as_bps(),
            start_us: Micros::from_nanos_u64(start.as_nanos()),
            duration_us: Micros::from(active),
            sent_packets: self.sent,
            sent_bytes: self.sent_bytes,
            receivers,
            rate_control: Some(metronome_link::report::RateControl::new(
                self.sender.controller_name(),
                &self.rate_trace,
                end,
            )),
            repair: sender_repair(
                self.sender.repair_stats().as_ref(),
                self.sender.fec_stats().as_ref(),
                self.cfg.ip_overhead,
                self.sent_bytes,
            ),
        }
    }
}
