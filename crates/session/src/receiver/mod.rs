//! The sans-IO RTP receiver: measures what arrived and when, and answers with receiver reports.
//!
//! Drive it with [`ReceiverSession::handle_rtp`] and [`ReceiverSession::handle_rtcp`] for every
//! datagram, [`ReceiverSession::poll_timeout`] / [`ReceiverSession::poll_transmit`] for its reports,
//! and [`ReceiverSession::poll_event`] for what changed. Any bytes are acceptable input: what is not
//! valid RTP or RTCP is counted in [`Counters`] and dropped, never a panic.

mod config;
mod members;
mod outputs;
mod repair;
mod rtcp_in;
mod sender_clock;
mod source;
mod summary;
#[cfg(test)]
mod tests;

pub use config::{PayloadKind, ReceiverConfig};
use outputs::MAX_EVENTS;
pub use outputs::{Counters, Dropped, PacketRecord, ReceiverEvent, ReceiverTimer};
pub use repair::{ReceiverRepair, RepairStats, FEC_MAX_PACKET};
pub use source::{SeqVerdict, Source, MAX_DROPOUT, MAX_MISORDER};
pub use summary::{ReceiverSummary, SourceSummary};

use crate::interval::{rtcp_bandwidth_octets, rtcp_interval, update_avg_rtcp_size, IntervalInputs};
use metronome_cc::receiver::Agent;
pub use metronome_cc::receiver::AgentKind;
use metronome_time::{NtpTime, RtpTime, Timestamp};
use metronome_wire::mp2t;
use metronome_wire::rtcp::{self, ReportHead};
use metronome_wire::rtp::{RtpView, SendStamp};
use metronome_wire::Ssrc;
use metronome_wire::{PayloadType, SeqNo};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sender_clock::{PacketTimes, SenderClock};
use std::collections::VecDeque;
use std::time::Duration;

/// The rate controller's receiving end, bound to one source.
struct CcAgent {
    ssrc: Ssrc,
    agent: Agent,
    /// When the source's packets and announcements left, on its clock.
    clock: SenderClock,
    /// The last packet's extended sequence number: the echo of TFMCC's and TFRC's reports.
    last_seq: u64,
}

/// Bytes of a generic NACK before its entries.
const NACK_HEAD: usize = 12;
/// Sequence numbers one NACK asks for at most (what a sender answers of one: 64).
const MAX_ASKS: usize = 64;
/// Sequence numbers taken from another receiver's NACK at most.
const MAX_PEER_ASKS: usize = 1024;

/// Bytes of IPv4 and UDP headers: rates on the wire count them, as the sender's do.
const IP_UDP_OVERHEAD: usize = metronome_time::IPV4_UDP_OVERHEAD;

/// The sans-IO receiving side of one RTP session: per-source statistics, RTCP in, receiver
/// reports (with the rate controller's feedback) out. See the module docs for how to drive it.
pub struct ReceiverSession {
    cfg: ReceiverConfig,
    cc: Option<CcAgent>,
    sources: Vec<Source>,
    members: members::Members,
    counters: Counters,
    events: VecDeque<ReceiverEvent>,
    next_report: Option<Timestamp>,
    last_interval: Duration,
    reports_sent: u64,
    avg_rtcp_size: f64,
    rng: ChaCha8Rng,
    /// Left the session ([`ReceiverSession::leave`]): its BYE went out, nothing more does.
    left: bool,
    /// Asking for repairs and taking them, if configured.
    repair: Option<repair::Repairing>,
    /// The sequence numbers of the NACK being written (kept to reuse its allocation).
    asks: Vec<SeqNo>,
    /// The rate controller's latest announcement heard before the stream's first packet.
    early_announce: Option<EarlyAnnounce>,
}

/// A rate controller's announcement that came before the stream's first packet (a sender
/// announces at once, RFC 4654 §3.1, and its compound can overtake its first packet): given
/// to the controller's end when that packet starts it, not lost for a whole `R_max`.
#[derive(Clone, Copy, Debug)]
struct EarlyAnnounce {
    at: Timestamp,
    ssrc: Ssrc,
    announce: metronome_cc::Announce,
    sr: Option<(NtpTime, RtpTime)>,
}

impl EarlyAnnounce {
    /// How long it stays news: a TFMCC round's length `T` (a later packet would start a
    /// timer for a round long gone; the sender announces again meanwhile).
    fn max_age(&self) -> std::time::Duration {
        match self.announce {
            metronome_cc::Announce::Tfmcc(i) => i.feedback_delay,
            metronome_cc::Announce::TfrcRtt(_) => std::time::Duration::from_secs(1),
        }
    }
}

impl ReceiverSession {
    /// A receiver that has heard nothing yet; its first report is scheduled with the first source.
    pub fn new(cfg: ReceiverConfig) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let repair = (cfg.repair.clone()).map(|mut r| {
            // Receivers of one group configured alike draw their dithers apart (by seed and
            // by SSRC: `recv`s started alike differ in their SSRC).
            r.nack.seed ^= cfg.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(cfg.ssrc.get());
            repair::Repairing::new(r, cfg.clock)
        });
        ReceiverSession {
            cc: None,
            sources: Vec::with_capacity(cfg.max_sources.min(64)),
            cfg,
            members: members::Members::default(),
            counters: Counters::default(),
            events: VecDeque::with_capacity(MAX_EVENTS),
            next_report: None,
            last_interval: Duration::ZERO,
            reports_sent: 0,
            avg_rtcp_size: 100.0,
            rng,
            left: false,
            repair,
            asks: Vec::new(),
            early_announce: None,
        }
    }

    /// The configuration the receiver was made with.
    pub fn config(&self) -> &ReceiverConfig {
        &self.cfg
    }
    /// Datagram-level counters so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    /// The sources being tracked, at most `max_sources`, in no particular order.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }
    /// The stream being watched: the source heard most recently.
    pub fn main_source(&self) -> Option<&Source> {
        self.sources
            .iter()
            .max_by_key(|s| (s.last_arrival, s.packets))
    }

    fn push_event(&mut self, e: ReceiverEvent) {
        if self.events.len() == MAX_EVENTS {
            self.events.pop_front();
            self.counters.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    /// The oldest event not yet polled (at most 256 wait; older ones are dropped and counted).
    pub fn poll_event(&mut self) -> Option<ReceiverEvent> {
        self.events.pop_front()
    }

    /// One RTP datagram that arrived at `now` (and at wall-clock `wall`, if the driver knows it,
    /// for one-way delay).
    pub fn handle_rtp(
        &mut self,
        now: Timestamp,
        wall: Option<NtpTime>,
        data: &[u8],
    ) -> Result<PacketRecord, Dropped> {
        self.counters.datagrams += 1;
        self.counters.bytes += data.len() as u64;
        let Ok(pkt) = RtpView::parse(data) else {
            self.counters.not_rtp += 1;
            return Err(Dropped::NotRtp);
        };
        if self
            .repair
            .as_ref()
            .is_some_and(|r| r.is_rtx(pkt.payload_type()))
        {
            return self.handle_rtx(now, data, pkt.ssrc());
        }
        self.check_payload(&pkt)?;
        let idx = self.source_index(pkt.ssrc(), pkt.sequence(), now)?;
        let clock = self.cfg.clock;
        let jump_ticks = clock.ticks(self.cfg.ts_jump_threshold).min(u32::MAX as u64) as u32;
        let stamp = self.cfg.send_time_ext_id.and_then(|id| pkt.send_stamp(id));
        let sent = match stamp {
            Some(SendStamp::Ntp64(t)) => Some(t),
            _ => None,
        };
        let src = &mut self.sources[idx];
        let (verdict, ext_seq) = src.update_seq(pkt.sequence());
        match verdict {
            SeqVerdict::JumpSuspect => {
                self.counters.jump_suspects += 1;
                return Err(Dropped::JumpSuspect);
            }
            SeqVerdict::Resync => {
                let ssrc = src.ssrc;
                if let Some(r) = self.repair.as_mut() {
                    r.restart();
                }
                self.push_event(ReceiverEvent::SequenceJump {
                    ssrc,
                    to_seq: pkt.sequence(),
                    at: now,
                });
            }
            _ => {}
        }
        self.counters.rtp_packets += 1;
        let src = &mut self.sources[idx];
        src.packets += 1;
        let payload_len = pkt.payload().len();
        let payload_start = data.len() - payload_len - padding_len(data);
        let (interarrival_ns, one_way_delay_ns, transit_ticks) =
            if matches!(verdict, SeqVerdict::Duplicate | SeqVerdict::TooLate) {
                (None, None, 0)
            } else {
                src.payload_bytes += payload_len as u64;
                let arrival_ticks = clock.ticks(now.saturating_since(Timestamp::ZERO)) as u32;
                let transit = src.update_jitter(arrival_ticks, pkt.timestamp(), jump_ticks);
                let (gap, owd) = src.record_arrival(now, wall, sent);
                (gap, owd, transit)
            };
        let ssrc = src.ssrc;
        if !matches!(verdict, SeqVerdict::Duplicate | SeqVerdict::TooLate) {
            if let Some(r) = self.repair.as_mut() {
                r.on_media(now, &pkt, data, ext_seq, verdict);
            }
            let sent = PacketTimes {
                stamp: stamp.map(SendStamp::abs24),
                rtp_ts: pkt.timestamp(),
            };
            self.feed_agent(now, ssrc, ext_seq, sent, data.len());
        }
        let verdict = self.verdict_for_application(verdict, ext_seq);
        let src = &self.sources[idx];
        Ok(PacketRecord {
            ssrc: src.ssrc,
            seq: pkt.sequence(),
            ext_seq,
            rtp_ts: pkt.timestamp(),
            marker: pkt.marker(),
            arrival: now,
            size: data.len(),
            payload: payload_start..payload_start + payload_len,
            verdict,
            transit_ticks,
            jitter_ticks: src.jitter_ticks(),
            interarrival_ns,
            one_way_delay_ns,
            repaired: false,
        })
    }

    /// What the application is told of a packet the statistics took as `verdict`: an
    /// original after its repair counts as received (the network delivered it, late), but the
    /// application has it already.
    fn verdict_for_application(&self, verdict: SeqVerdict, ext_seq: u64) -> SeqVerdict {
        let repaired = |r: &repair::Repairing| r.was_repaired(ext_seq);
        match verdict {
            SeqVerdict::Reordered if self.repair.as_ref().is_some_and(repaired) => {
                SeqVerdict::Duplicate
            }
            v => v,
        }
    }

    /// Whether the packet's payload is what the receiver accepts (MP2T: payload type 33,
    /// whole TS packets); counted if not.
    fn check_payload(&mut self, pkt: &RtpView<'_>) -> Result<(), Dropped> {
        if self.cfg.payload != PayloadKind::Mp2t {
            return Ok(());
        }
        if pkt.payload_type() != PayloadType::MP2T {
            self.counters.wrong_payload_type += 1;
            return Err(Dropped::WrongPayloadType(pkt.payload_type()));
        }
        mp2t::check_payload(pkt.payload()).map(|_| ()).map_err(|e| {
            self.counters.bad_payload += 1;
            Dropped::BadPayload(e)
        })
    }

    /// A retransmission (RFC 4588) of the repaired stream: given back as the packet it
    /// repairs, if the receiver did not have it; it counts in none of the stream's statistics.
    fn handle_rtx(
        &mut self,
        now: Timestamp,
        data: &[u8],
        ssrc: Ssrc,
    ) -> Result<PacketRecord, Dropped> {
        let Some(r) = self.repair.as_mut() else {
            return Err(Dropped::Retransmission);
        };
        let Some(osn) = r.unwrap(data, ssrc) else {
            return Err(Dropped::Retransmission);
        };
        self.take_repair(now, osn, repair::Via::Rtx)
    }

    /// A SMPTE 2022-1 FEC packet of the repaired stream (from the media's port + 2 or + 4):
    /// what it lets the receiver rebuild comes from [`ReceiverSession::poll_rebuilt`]. Ignored
    /// unless [`ReceiverRepair::fec_max_packet`] is set.
    pub fn handle_fec(&mut self, data: &[u8]) {
        if let Some(r) = self.repair.as_mut() {
            r.on_fec(data);
        }
    }

    /// The next packet FEC rebuilt (after [`ReceiverSession::handle_fec`] or
    /// [`ReceiverSession::handle_rtp`]), as a retransmission's: `repaired`, its payload in
    /// [`ReceiverSession::repaired_packet`]. `Some(Err)`: one rebuilt but of no use (the
    /// receiver had it, or it is not what the stream accepts); `None`: none waits.
    pub fn poll_rebuilt(&mut self, now: Timestamp) -> Option<Result<PacketRecord, Dropped>> {
        let r = self.repair.as_mut()?;
        let ssrc = r.media().map(|m| m.ssrc);
        let src = self.sources.iter().find(|s| Some(s.ssrc) == ssrc);
        let seq = r.next_rebuilt(|seq| src.is_some_and(|s| s.is_ahead(seq)))?;
        Some(self.take_repair(now, seq, repair::Via::Fec))
    }

    /// The repair of packet `osn` (in [`repair::Repairing::packet`]) arrived at `now`: given
    /// back as the packet it repairs, if the receiver did not have it.
    fn take_repair(
        &mut self,
        now: Timestamp,
        osn: SeqNo,
        via: repair::Via,
    ) -> Result<PacketRecord, Dropped> {
        let (Some(r), sources) = (self.repair.as_mut(), &mut self.sources) else {
            return Err(Dropped::Retransmission);
        };
        let ssrc = r.media().map(|m| m.ssrc);
        let src = sources.iter().find(|s| Some(s.ssrc) == ssrc);
        let pkt = RtpView::parse(r.packet()).ok();
        let (Some(src), Some(pkt)) = (src, pkt) else {
            r.unusable(via);
            return Err(Dropped::Retransmission);
        };
        if self.cfg.payload == PayloadKind::Mp2t {
            if let Err(e) = mp2t::check_payload(pkt.payload()) {
                self.counters.bad_payload += 1;
                r.unusable(via);
                return Err(Dropped::BadPayload(e));
            }
        }
        let packet = r.packet();
        let payload_len = pkt.payload().len();
        let payload_start = packet.len() - payload_len - padding_len(packet);
        let (rtp_ts, marker, size) = (pkt.timestamp(), pkt.marker(), packet.len());
        let (fresh, jitter_ticks) = (src.repair_of(osn), src.jitter_ticks());
        let ssrc = src.ssrc;
        let ext_seq = r
            .on_repair(now, fresh, rtp_ts, via)
            .ok_or(Dropped::Retransmission)?;
        Ok(PacketRecord {
            ssrc,
            seq: osn,
            ext_seq,
            rtp_ts,
            marker,
            arrival: now,
            size,
            payload: payload_start..payload_start + payload_len,
            verdict: SeqVerdict::Reordered,
            transit_ticks: 0,
            jitter_ticks,
            interarrival_ns: None,
            one_way_delay_ns: None,
            repaired: true,
        })
    }

    /// The packet the last retransmission repaired (see [`PacketRecord::repaired`]); empty
    /// when repairs are off.
    pub fn repaired_packet(&self) -> &[u8] {
        self.repair.as_ref().map_or(&[], |r| r.packet())
    }

    /// What the receiver asked for and what came of it, when repairs are on.
    pub fn repair_stats(&self) -> Option<RepairStats> {
        self.repair.as_ref().map(repair::Repairing::stats)
    }

    /// The rate controller's receiving end, once the stream has started (TFRC, TFMCC).
    pub fn cc_agent(&self) -> Option<&Agent> {
        self.cc.as_ref().map(|c| &c.agent)
    }

    /// Gives the rate controller's receiving end a packet of the stream, `sent` what it says
    /// of when it left.
    fn feed_agent(
        &mut self,
        now: Timestamp,
        ssrc: Ssrc,
        ext_seq: u64,
        sent: PacketTimes,
        len: usize,
    ) {
        if self.cc.is_none() {
            let Some(agent) = Agent::new(self.cfg.cc, self.cfg.ssrc.get(), self.cfg.seed) else {
                return;
            };
            let mut cc = CcAgent {
                ssrc,
                agent,
                clock: SenderClock::new(sent, self.cfg.clock),
                last_seq: ext_seq,
            };
            let fresh =
                |e: &EarlyAnnounce| e.ssrc == ssrc && now.saturating_since(e.at) <= e.max_age();
            if let Some(e) = self.early_announce.take().filter(fresh) {
                let at = cc.clock.report(e.sr);
                cc.agent.on_announce(e.at, &e.announce, at);
            }
            self.cc = Some(cc);
        }
        let Some(cc) = self.cc.as_mut().filter(|c| c.ssrc == ssrc) else {
            return;
        };
        let sent = cc.clock.data(sent);
        cc.last_seq = ext_seq;
        cc.agent
            .on_packet(now, ext_seq, sent, len + IP_UDP_OVERHEAD);
    }

    fn source_index(&mut self, ssrc: Ssrc, seq: SeqNo, now: Timestamp) -> Result<usize, Dropped> {
        if let Some(i) = self.sources.iter().position(|s| s.ssrc == ssrc) {
            return Ok(i);
        }
        if self.sources.len() >= self.cfg.max_sources {
            // Make room by forgetting the source that left (BYE) or has been silent longest.
            let timeout = self.cfg.source_timeout;
            let gone = self
                .sources
                .iter()
                .enumerate()
                .filter(|(_, s)| s.said_bye || now.saturating_since(s.last_arrival) >= timeout)
                .min_by_key(|(_, s)| (!s.said_bye, s.last_arrival))
                .map(|(i, _)| i);
            let Some(i) = gone else {
                self.counters.too_many_sources += 1;
                return Err(Dropped::TooManySources(ssrc));
            };
            self.sources.swap_remove(i);
            self.counters.sources_evicted += 1;
        }
        if !self.sources.is_empty() {
            self.counters.ssrc_changes += 1;
        }
        self.sources
            .push(Source::new(ssrc, seq, now, self.cfg.histogram_digits));
        self.push_event(ReceiverEvent::NewSource { ssrc, at: now });
        if self.next_report.is_none() {
            self.schedule_report(now);
        }
        Ok(self.sources.len() - 1)
    }

    /// Members of the session other than us and the sources (other receivers of a group).
    pub fn other_members(&self) -> usize {
        self.members.len()
    }

    fn schedule_report(&mut self, now: Timestamp) {
        // RFC 3550 §6.3.5: members not heard for five intervals have left.
        let td = self.last_interval.max(self.cfg.rtcp_min_interval);
        self.members.expire(now, td * 5);
        let inputs = IntervalInputs {
            members: (self.sources.len() + self.members.len()) as u32 + 1,
            senders: self.sources.len() as u32,
            rtcp_bw_octets: rtcp_bandwidth_octets(self.cfg.session_bw_bps),
            we_sent: false,
            avg_rtcp_size: self.avg_rtcp_size,
            initial: self.reports_sent == 0,
            min: self.cfg.rtcp_min_interval,
        };
        let u: f64 = self.rng.random();
        self.last_interval = rtcp_interval(&inputs, u);
        self.next_report = Some(now + self.last_interval);
    }

    /// When the receiver next wants [`ReceiverSession::poll_transmit`] called, and why; `None`
    /// before the first source or after leaving.
    pub fn poll_timeout(&self) -> Option<(Timestamp, ReceiverTimer)> {
        if self.left {
            return None;
        }
        let report = self.next_report.map(|t| (t, ReceiverTimer::ReceiverReport));
        let cc = self
            .cc
            .as_ref()
            .and_then(|c| c.agent.poll_timeout())
            .map(|t| (t, ReceiverTimer::RateFeedback));
        let nack = self
            .repair
            .as_ref()
            .and_then(repair::Repairing::next_due)
            .map(|t| (t, ReceiverTimer::Nack));
        [report, cc, nack]
            .into_iter()
            .flatten()
            .min_by_key(|(t, _)| *t)
    }

    /// Writes a receiver report into `buf` if one is due at `now` (a regular one, or one that
    /// carries the rate controller's feedback or a NACK, which go out of turn); returns its
    /// length.
    pub fn poll_transmit(&mut self, now: Timestamp, buf: &mut [u8]) -> Option<usize> {
        if self.left {
            return None;
        }
        let regular = self.next_report.is_some_and(|t| now >= t);
        // Room for RFC 8888 reports, 2 bytes each, after the RR's blocks, the SDES and the
        // feedback packet's own 20 bytes (with some to spare).
        let blocks = self
            .sources
            .iter()
            .filter(|s| s.packets > 0)
            .count()
            .min(31);
        let rrtr = self.repair.as_ref().is_some_and(|r| r.wants_rrtr());
        let mut used =
            8 + 24 * blocks + 16 + self.cfg.cname.len() + 20 + 16 + 20 * usize::from(rrtr);
        let mut asks = std::mem::take(&mut self.asks);
        if let Some(r) = self.repair.as_mut() {
            // One 4-byte entry per number at worst, after the NACK's 12 bytes.
            let max = buf.len().saturating_sub(used + NACK_HEAD) / 4;
            r.asks(now, max.min(MAX_ASKS), &mut asks);
            used += NACK_HEAD + 4 * asks.len();
        }
        let room = buf.len().saturating_sub(used) / 2;
        let out = self.cc.as_mut().and_then(|c| {
            let r = c.agent.poll_report(now, room)?;
            Some(crate::cc_app::report_out(&r, c.ssrc, c.last_seq))
        });
        if !regular && out.is_none() && asks.is_empty() {
            self.asks = asks;
            return None;
        }
        // A NACK alone goes out early without report blocks (RFC 4585 §3.5.2 allows it): a
        // block restarts the fraction-lost interval and would feed the sender's controller a
        // report taken at each loss.
        let blocks = regular || out.is_some();
        let n = self.write_report(now, buf, None, out.as_ref(), blocks);
        let n = n.map(|n| n + self.write_nack(&mut buf[n..], &asks));
        // A group member's reference time, for the sender's DLRR answer (RFC 3611 §4.4): its
        // clock is this session's own, which the answer comes back in.
        let n = n.map(|n| n + self.write_rrtr(now, &mut buf[n..], rrtr));
        self.asks = asks;
        let n = n?;
        if regular {
            self.schedule_report(now);
        } else if out.is_some() {
            self.counters.cc_reports += 1;
        }
        Some(n)
    }

    /// Writes a final receiver report with a BYE (RFC 3550 §6.6), for when the receiver stops.
    pub fn bye(&mut self, now: Timestamp, buf: &mut [u8]) -> Option<usize> {
        self.next_report = None;
        self.write_report(now, buf, Some("receiver stopped"), None, true)
    }

    /// The receiver leaves the session, as when it leaves a multicast group: a last compound
    /// with its receiver report, the rate controller's leaving report if it has not sent it
    /// (TFMCC, RFC 4654 §4.4: the sender stops counting on it) and a BYE (RFC 3550 §6.6);
    /// after it, nothing is sent. `None` if it has already left (or `buf` is too small).
    pub fn leave(&mut self, now: Timestamp, buf: &mut [u8]) -> Option<usize> {
        if self.left {
            return None;
        }
        self.left = true;
        self.next_report = None;
        let out = self.cc.as_mut().and_then(|c| {
            c.agent.leave(now);
            let r = c.agent.poll_report(now, 0)?;
            Some(crate::cc_app::report_out(&r, c.ssrc, c.last_seq))
        });
        self.write_report(now, buf, Some("left the group"), out.as_ref(), true)
    }

    /// The receiver wishes to leave the group: `true` if it may at once (then call
    /// [`ReceiverSession::leave`]); `false` while its rate controller needs it to stay, TFMCC's
    /// CLR flagging its reports until its round ends (RFC 4654 §4.2): it keeps receiving and
    /// reporting, and leaves once [`ReceiverSession::controller_left`].
    pub fn wish_to_leave(&mut self, now: Timestamp) -> bool {
        let Some(c) = self.cc.as_mut() else {
            return true;
        };
        c.agent.leave(now);
        !c.agent.leave_pending()
    }

    /// Whether the receiver, having wished to leave, stays for its rate controller
    /// ([`ReceiverSession::wish_to_leave`]).
    pub fn leave_pending(&self) -> bool {
        !self.left && self.cc.as_ref().is_some_and(|c| c.agent.leave_pending())
    }

    /// Whether the receiver has left ([`ReceiverSession::leave`]).
    pub fn has_left(&self) -> bool {
        self.left
    }

    /// Whether every source heard from has said BYE (RFC 3550 §6.6), and there was one: in a
    /// unicast RTSP session, the stream is over.
    pub fn every_source_said_bye(&self) -> bool {
        !self.sources.is_empty() && self.sources.iter().all(|s| s.said_bye)
    }

    /// Whether the rate controller's receiving end has said its last: of its own accord
    /// (TFMCC's rule, RFC 4654 §4.4: its rate stayed below the lowest it may report for
    /// 120 s), or at the end of the round a leaving CLR had to stay for
    /// ([`ReceiverSession::wish_to_leave`], §4.2): the application should now leave the group,
    /// calling [`ReceiverSession::leave`].
    pub fn controller_left(&self) -> bool {
        self.cc.as_ref().is_some_and(|c| c.agent.has_left())
    }

    fn write_report(
        &mut self,
        now: Timestamp,
        buf: &mut [u8],
        bye: Option<&str>,
        cc: Option<&crate::cc_app::ReportOut>,
        with_blocks: bool,
    ) -> Option<usize> {
        let mut blocks = [metronome_wire::rtcp::Block {
            ssrc: Ssrc(0),
            fraction_lost: 0,
            cumulative_lost: 0,
            extended_highest_seq: 0,
            jitter: 0,
            lsr: 0,
            dlsr: 0,
        }; 31];
        let mut n = 0;
        let reported = if with_blocks { 31 } else { 0 };
        for src in self
            .sources
            .iter_mut()
            .filter(|s| s.packets > 0)
            .take(reported)
        {
            blocks[n] = src.report_block(now);
            n += 1;
        }
        let head = ReportHead::Receiver {
            ssrc: self.cfg.ssrc,
            blocks: &blocks[..n],
        };
        let (apps, ccfb) = match cc {
            Some(crate::cc_app::ReportOut::App(a)) => (std::slice::from_ref(a), None),
            Some(crate::cc_app::ReportOut::Ccfb(f)) => (&[][..], Some(f)),
            None => (&[][..], None),
        };
        let len = rtcp::write_compound_with(buf, head, &self.cfg.cname, apps, ccfb, bye).ok()?;
        self.reports_sent += 1;
        self.avg_rtcp_size = update_avg_rtcp_size(self.avg_rtcp_size, len);
        Some(len)
    }

    /// Appends a generic NACK for `asks` of the repaired stream (RFC 4585 §6.2.1); its length.
    fn write_nack(&mut self, buf: &mut [u8], asks: &[SeqNo]) -> usize {
        let Some(r) = self.repair.as_mut() else {
            return 0;
        };
        let Some(media) = r.media().filter(|_| !asks.is_empty()) else {
            return 0;
        };
        let n = rtcp::write_nack(buf, self.cfg.ssrc, media.ssrc, asks);
        if n > 0 {
            r.nack_sent();
        }
        n
    }

    /// Appends an RFC 3611 RRTR of `now` if `rrtr`, and remembers it for its answer; its
    /// length. Its clock is this session's own, which the sender's answer comes back in.
    fn write_rrtr(&mut self, now: Timestamp, buf: &mut [u8], rrtr: bool) -> usize {
        let Some(r) = self.repair.as_mut().filter(|_| rrtr) else {
            return 0;
        };
        let ntp = NtpTime::from_unix_nanos(now.as_nanos());
        let n = rtcp::write_rrtr(buf, self.cfg.ssrc, ntp.0);
        if n > 0 {
            r.rrtr_sent(ntp.compact());
        }
        n
    }

    /// Receiver reports (and BYEs) written so far.
    pub fn reports_written(&self) -> u64 {
        self.reports_sent
    }
}

/// The RTP padding length (RFC 3550 §5.1), which rtp-types has already validated.
fn padding_len(data: &[u8]) -> usize {
    if data.first().is_some_and(|b| b & 0x20 != 0) {
        data.last().copied().unwrap_or(0) as usize
    } else {
        0
    }
}
