//! Asking for lost packets and taking their repairs, for the stream a [`super::ReceiverSession`]
//! follows (the first source heard): generic NACKs out (RFC 4585 §6.2.1, planned by
//! [`NackPlanner`]: only what can still arrive before its play-out deadline), retransmissions in
//! (RFC 4588, recognized by their payload type and given back as the original packets), and
//! packets rebuilt from SMPTE 2022-1 FEC ([`FecDecoder`], given the FEC packets the driver
//! received on the media's port + 2 and + 4).
//!
//! A repair does not count in the original stream's statistics (RFC 4588 §1: the receiver
//! reports say what the network lost) nor in the rate controller's (a loss is congestion even
//! when it is repaired); the application gets it as the packet it repairs.

use super::SeqVerdict;
use crate::repair::{FecDecoder, FecReceiveCounters, NackConfig, NackCounters, NackPlanner};
use metronome_time::Micros;
use metronome_time::{MediaClock, RtpTime, Timestamp};
use metronome_wire::rtp::RtpView;
use metronome_wire::rtx::{self, StreamIds};
use metronome_wire::{PayloadType, SeqNo, Ssrc};
use std::collections::VecDeque;
use std::time::Duration;

/// How a receiver asks for repairs and knows them.
#[derive(Clone, Debug, PartialEq)]
pub struct ReceiverRepair {
    /// When and how often missing packets are asked for.
    pub nack: NackConfig,
    /// The retransmission stream's payload type (SDP `a=rtpmap:<pt> rtx/<clock>` whose `apt`
    /// is the media's); its packets carry the original's sequence number first (RFC 4588 §4).
    /// `None`: nothing is asked for (FEC alone).
    pub rtx_payload_type: Option<PayloadType>,
    /// The retransmission stream's SSRC, where the SDP pairs it with the media's
    /// (`a=ssrc-group:FID MEDIA RTX`, RFC 5576): retransmissions from any other SSRC are
    /// dropped, counted in `rtx_malformed`. `None`: whatever SSRC carries the payload type.
    pub rtx_ssrc: Option<Ssrc>,
    /// Rebuild lost packets from SMPTE 2022-1 FEC, of media packets of at most this many
    /// bytes; `None`: no FEC.
    pub fec_max_packet: Option<usize>,
    /// How long after the earliest a packet could have arrived it is still of use: the
    /// receiver's play-out delay (a fixed-latency jitter buffer, as GStreamer's
    /// `rtpjitterbuffer latency`). A packet's deadline is its RTP timestamp on the clock of the
    /// fastest packet so far, plus this.
    pub playout_delay: Duration,
    /// The round trip assumed until a repair measures one.
    pub initial_rtt: Duration,
}

impl ReceiverRepair {
    /// Repairs with payload type `rtx_payload_type` for a viewer that plays out
    /// `playout_delay` after the fastest packet; unicast asking ([`NackConfig::default`]),
    /// 100 ms round trip until measured.
    pub fn new(rtx_payload_type: PayloadType, playout_delay: Duration) -> ReceiverRepair {
        ReceiverRepair {
            nack: NackConfig::default(),
            rtx_payload_type: Some(rtx_payload_type),
            rtx_ssrc: None,
            fec_max_packet: None,
            playout_delay,
            initial_rtt: Duration::from_millis(100),
        }
    }

    /// Repairs from SMPTE 2022-1 FEC alone (nothing asked for), for a viewer that plays out
    /// `playout_delay` after the fastest packet; media packets of at most 1500 bytes.
    pub fn fec(playout_delay: Duration) -> ReceiverRepair {
        ReceiverRepair {
            rtx_payload_type: None,
            fec_max_packet: Some(FEC_MAX_PACKET),
            ..ReceiverRepair::new(PayloadType(0), playout_delay)
        }
    }

    /// These repairs and FEC too.
    pub fn with_fec(self) -> ReceiverRepair {
        ReceiverRepair {
            fec_max_packet: Some(FEC_MAX_PACKET),
            ..self
        }
    }
}

/// The largest media packet FEC rebuilds where nothing else is said: an Ethernet MTU's.
pub const FEC_MAX_PACKET: usize = 1500;

/// How a repair came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    Rtx,
    Fec,
}

/// What the receiver asked for and what came of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct RepairStats {
    /// The NACK planner's counts: missing, asked, recovered (in time), given up, ...
    pub nack: NackCounters,
    /// Feedback packets with a NACK sent.
    pub nack_packets: u64,
    /// Retransmission packets received.
    pub rtx_packets: u64,
    /// Retransmissions that repaired a packet the receiver did not have, before its play-out
    /// time (or of a packet not followed, whose time is unknown).
    pub rtx_useful: u64,
    /// Retransmissions of a packet the receiver did not have, after its play-out time.
    pub rtx_late: u64,
    /// Retransmissions of a packet it had already (or too old to tell).
    pub rtx_redundant: u64,
    /// Retransmission packets that did not parse, carried what the stream does not accept,
    /// came before the stream's first packet, or came from another SSRC than the one the SDP
    /// pairs with the media (`a=ssrc-group:FID`). `rtx_packets` is `rtx_useful + rtx_late +
    /// rtx_redundant + rtx_malformed`.
    pub rtx_malformed: u64,
    /// The round-trip estimate now: ask to repair; in a group, from the sender's answers to
    /// this receiver's RFC 3611 RRTRs (or the longest of its last 16 samples until one comes).
    pub rtt_us: Micros,
    /// Packets rebuilt from FEC that the receiver did not have, before their play-out time.
    pub fec_useful: u64,
    /// Packets rebuilt from FEC after their play-out time.
    pub fec_late: u64,
    /// Packets rebuilt from FEC that the receiver had by then (the original came first).
    pub fec_redundant: u64,
    /// Packets rebuilt from FEC and not given to the application: not what the stream
    /// accepts, or more than 16 waiting ahead of the highest packet received.
    pub fec_dropped: u64,
    /// What the FEC decoder did, if FEC is on.
    pub fec: Option<FecReceiveCounters>,
}

/// When each RTP timestamp plays out: timestamps unwrapped, and the earliest arrival relative
/// to them so far (the fastest packet sets the clock, as a jitter buffer's does).
#[derive(Debug)]
struct Playout {
    clock: MediaClock,
    delay: Duration,
    /// The highest in-order packet's timestamp, and its unwrapped value in ticks.
    last_ts: RtpTime,
    last_ext: i64,
    /// Least (arrival − media time) so far, ns.
    offset_ns: i128,
}

impl Playout {
    fn new(clock: MediaClock, delay: Duration, ts: RtpTime, now: Timestamp) -> Playout {
        Playout {
            clock,
            delay,
            last_ts: ts,
            last_ext: 0,
            offset_ns: i128::from(now.as_nanos()),
        }
    }

    fn ext(&self, ts: RtpTime) -> i64 {
        self.last_ext + i64::from(ts.delta(self.last_ts))
    }

    fn media_ns(&self, ext: i64) -> i128 {
        i128::from(ext) * 1_000_000_000 / i128::from(self.clock.rate())
    }

    /// A packet of timestamp `ts` arrived at `now`; `in_order`: it is the highest so far.
    fn arrived(&mut self, ts: RtpTime, now: Timestamp, in_order: bool) {
        let ext = self.ext(ts);
        let offset = i128::from(now.as_nanos()) - self.media_ns(ext);
        self.offset_ns = self.offset_ns.min(offset);
        if in_order {
            (self.last_ts, self.last_ext) = (ts, ext);
        }
    }

    /// When a packet of timestamp `ts` plays out.
    fn deadline(&self, ts: RtpTime) -> Timestamp {
        let at = self.media_ns(self.ext(ts)) + self.offset_ns + self.delay.as_nanos() as i128;
        Timestamp::from_nanos(at.clamp(0, i128::from(u64::MAX)) as u64)
    }

    /// The deadline of packets missing before the one just arrived: those of the highest
    /// packet before it (they may belong to its frame, the earlier).
    fn gap_deadline(&self) -> Timestamp {
        self.deadline(self.last_ts)
    }
}

/// A receiver's repair state for the stream it follows.
#[derive(Debug)]
pub(crate) struct Repairing {
    cfg: ReceiverRepair,
    clock: MediaClock,
    planner: NackPlanner,
    /// The repaired stream's SSRC and payload type (the first source's first packet's).
    media: Option<StreamIds>,
    playout: Option<Playout>,
    /// The smoothed round trip, once a repair has measured one (`cfg.initial_rtt` until then).
    measured: Option<Duration>,
    /// The last round-trip samples, at most [`RECENT_SAMPLES`].
    recent: VecDeque<Duration>,
    /// In a group, the round trip the sender's DLRR blocks gave (RFC 3611), smoothed as
    /// `measured`.
    from_sender: Option<Duration>,
    /// The middle 32 bits of the last [`RRTRS_KEPT`] RRTRs sent, not yet answered: a DLRR is
    /// taken only as the answer to one of them, once.
    rrtrs: VecDeque<u32>,
    stats: RepairStats,
    /// The last repaired packet, as the original stream's.
    packet: Vec<u8>,
    /// Rebuilds packets from FEC, if on.
    fec: Option<Box<FecDecoder>>,
    /// Packets FEC rebuilt ahead of the highest received (the last of a row, lost): each
    /// waits for a later packet, so that the stream's numbering stays the network's.
    early: VecDeque<Vec<u8>>,
    /// Extended numbers repaired lately, each at its number modulo [`REPAIRED_WINDOW`]: an
    /// original that comes after its repair is not handed to the application again.
    repaired: Vec<u64>,
    /// Packets FEC rebuilt after this receiver's only ask for them, with the ask's time: the
    /// retransmission that answers the ask still measures a round trip (Karn's rule), at most
    /// [`FEC_ASKED`].
    fec_asked: VecDeque<(u64, Timestamp)>,
}

/// RRTRs remembered for their answer.
const RRTRS_KEPT: usize = 4;

/// Round-trip samples a group member's estimate is the longest of.
const RECENT_SAMPLES: usize = 16;

/// Packets FEC rebuilt after an ask, remembered for their retransmission's round trip.
const FEC_ASKED: usize = 64;

/// Rebuilt packets that wait for a later packet at most.
const EARLY: usize = 16;

/// Repaired packets remembered (as the source's duplicate window).
const REPAIRED_WINDOW: usize = 2048;

impl Repairing {
    /// Repairs for a stream whose timestamps run at `clock`.
    pub(crate) fn new(cfg: ReceiverRepair, clock: MediaClock) -> Repairing {
        Repairing {
            clock,
            planner: NackPlanner::new(cfg.nack),
            fec: cfg.fec_max_packet.map(|m| Box::new(FecDecoder::new(m))),
            cfg,
            media: None,
            playout: None,
            measured: None,
            recent: VecDeque::with_capacity(RECENT_SAMPLES),
            from_sender: None,
            rrtrs: VecDeque::with_capacity(RRTRS_KEPT),
            stats: RepairStats::default(),
            packet: Vec::new(),
            early: VecDeque::new(),
            repaired: vec![u64::MAX; REPAIRED_WINDOW],
            fec_asked: VecDeque::with_capacity(FEC_ASKED),
        }
    }

    pub(crate) fn stats(&self) -> RepairStats {
        RepairStats {
            nack: self.planner.counters(),
            rtt_us: Micros::from(self.rtt()),
            fec: self.fec.as_ref().map(|f| f.counters()),
            ..self.stats
        }
    }

    /// Whether a packet of payload type `pt` is a retransmission.
    pub(crate) fn is_rtx(&self, pt: PayloadType) -> bool {
        self.cfg.rtx_payload_type == Some(pt)
    }

    /// A FEC packet arrived: given to the decoder (what it rebuilds waits for
    /// [`Repairing::next_rebuilt`]).
    pub(crate) fn on_fec(&mut self, data: &[u8]) {
        if let Some(f) = self.fec.as_mut() {
            f.on_fec(data);
            // With retransmissions too: a loss is asked for once its row's FEC has had its
            // chance (the row's packets and the FEC after them have come).
            if let Some(l) = f.row_length() {
                self.planner.hold_for(u64::from(l));
            }
        }
    }

    /// The next packet FEC rebuilt, into [`Repairing::packet`]: its sequence number. One
    /// that `ahead` says is ahead of the highest received waits (at most [`EARLY`]; the
    /// oldest goes) and comes first once it is not.
    pub(crate) fn next_rebuilt(&mut self, ahead: impl Fn(SeqNo) -> bool) -> Option<SeqNo> {
        let seq = |p: &[u8]| SeqNo::from_be_bytes([p[2], p[3]]);
        if let Some(i) = self.early.iter().position(|p| !ahead(seq(p))) {
            let p = self.early.remove(i)?;
            self.packet.clear();
            self.packet.extend_from_slice(&p);
            return Some(seq(&p));
        }
        let f = self.fec.as_mut()?;
        while f.poll_recovered(&mut self.packet) {
            if !ahead(seq(&self.packet)) {
                return Some(seq(&self.packet));
            }
            if self.early.len() == EARLY {
                self.early.pop_front();
                self.stats.fec_dropped += 1;
            }
            self.early.push_back(self.packet.clone());
        }
        None
    }

    /// The stream repaired: SSRC and payload type, once its first packet came.
    pub(crate) fn media(&self) -> Option<StreamIds> {
        self.media
    }

    /// The last repaired packet's bytes.
    pub(crate) fn packet(&self) -> &[u8] {
        &self.packet
    }

    /// A packet of the media stream arrived at `now`, taken as `verdict` with extended
    /// sequence number `ext_seq`. A packet of another SSRC than the first is not followed.
    pub(crate) fn on_media(
        &mut self,
        now: Timestamp,
        pkt: &RtpView<'_>,
        data: &[u8],
        ext_seq: u64,
        verdict: SeqVerdict,
    ) {
        let ids = StreamIds {
            ssrc: pkt.ssrc(),
            payload_type: pkt.payload_type(),
        };
        if *self.media.get_or_insert(ids) != ids {
            return;
        }
        if let Some(f) = self.fec.as_mut() {
            f.on_media(data);
        }
        let ts = pkt.timestamp();
        let in_order = matches!(verdict, SeqVerdict::InOrder | SeqVerdict::Resync);
        let (cfg, clock) = (&self.cfg, self.clock);
        let playout = self
            .playout
            .get_or_insert_with(|| Playout::new(clock, cfg.playout_delay, ts, now));
        let gap_deadline = playout.gap_deadline();
        playout.arrived(ts, now, in_order);
        // An original that comes late gives no round-trip sample: it was not asked for.
        self.planner.set_rtt(self.rtt());
        self.planner.on_packet(ext_seq, now, gap_deadline);
    }

    /// Whether packet `ext_seq` was repaired lately (the application has it).
    pub(crate) fn was_repaired(&self, ext_seq: u64) -> bool {
        self.repaired[ext_seq as usize % REPAIRED_WINDOW] == ext_seq
    }

    /// A repair the receiver could not use (counted).
    pub(crate) fn unusable(&mut self, via: Via) {
        match via {
            Via::Rtx => self.stats.rtx_malformed += 1,
            Via::Fec => self.stats.fec_dropped += 1,
        }
    }

    /// Unwraps retransmission `data`, sent by `ssrc`, into the original packet
    /// ([`Repairing::packet`]); its original sequence number, or `None` (counted) if it is
    /// malformed, from another SSRC than the paired one, or nothing is followed yet.
    pub(crate) fn unwrap(&mut self, data: &[u8], ssrc: Ssrc) -> Option<SeqNo> {
        self.stats.rtx_packets += 1;
        let paired = self.cfg.rtx_ssrc.is_none_or(|want| want == ssrc);
        let Some(ids) = self.media.filter(|_| paired) else {
            self.stats.rtx_malformed += 1;
            return None;
        };
        // The original is two bytes shorter than its retransmission.
        self.packet.resize(data.len(), 0);
        match rtx::unwrap(data, ids, &mut self.packet) {
            Ok((n, osn)) => {
                self.packet.truncate(n);
                Some(osn)
            }
            Err(_) => {
                self.stats.rtx_malformed += 1;
                None
            }
        }
    }

    /// The repair of a packet of timestamp `ts` arrived at `now`: `ext_seq` its extended
    /// number if the receiver did not have it, `None` if it did.
    /// Returns `ext_seq` if the repair is one the application should have: a packet it
    /// lacked (and had not been repaired already).
    pub(crate) fn on_repair(
        &mut self,
        now: Timestamp,
        ext_seq: Option<u64>,
        ts: RtpTime,
        via: Via,
    ) -> Option<u64> {
        let Some(ext_seq) = ext_seq.filter(|e| !self.was_repaired(*e)) else {
            match via {
                Via::Rtx => {
                    self.stats.rtx_redundant += 1;
                    self.answered_after_fec(ext_seq, now);
                }
                Via::Fec => self.stats.fec_redundant += 1,
            }
            return None;
        };
        if via == Via::Rtx {
            if let Some(f) = self.fec.as_mut() {
                f.on_media(&self.packet);
            }
        }
        self.repaired[ext_seq as usize % REPAIRED_WINDOW] = ext_seq;
        // The packet's own play-out time, now that its timestamp is known (the planner had
        // only its gap's, the earlier of the packet before it).
        let deadline = self.playout.as_ref().map(|p| p.deadline(ts));
        if let Some(p) = self.playout.as_mut() {
            p.arrived(ts, now, false);
        }
        // Older than the highest: it opens no gap, so the gap's deadline is not used.
        let followed = self.planner.on_packet(ext_seq, now, now);
        match (via, followed.and_then(|f| f.since_ask)) {
            (Via::Rtx, since) => self.sample(since),
            (Via::Fec, Some(since)) => {
                if self.fec_asked.len() == FEC_ASKED {
                    self.fec_asked.pop_front();
                }
                self.fec_asked
                    .push_back((ext_seq, now.saturating_sub(since)));
            }
            (Via::Fec, None) => {}
        }
        // In time by the packet's own play-out time; a packet the planner no longer follows
        // (given up) may still be answered by an earlier ask.
        let in_time = match (deadline, &followed) {
            (Some(d), _) => now <= d,
            (None, Some(f)) => f.in_time,
            (None, None) => true,
        };
        let s = &mut self.stats;
        match (via, in_time) {
            (Via::Rtx, true) => s.rtx_useful += 1,
            (Via::Rtx, false) => s.rtx_late += 1,
            (Via::Fec, true) => s.fec_useful += 1,
            (Via::Fec, false) => s.fec_late += 1,
        }
        Some(ext_seq)
    }

    /// A retransmission of `ext_seq` came at `now` after FEC had rebuilt it: if FEC did so
    /// after this receiver's only ask, the retransmission answers that ask (a round trip).
    /// Without it, a receiver whose every loss FEC rebuilds first would never measure one.
    fn answered_after_fec(&mut self, ext_seq: Option<u64>, now: Timestamp) {
        let Some(e) = ext_seq else { return };
        if let Some(i) = self.fec_asked.iter().position(|&(s, _)| s == e) {
            if let Some((_, asked)) = self.fec_asked.remove(i) {
                self.sample(Some(now.saturating_since(asked)));
            }
        }
    }

    /// A round-trip sample (ask to repair): smoothed as TCP's SRTT (RFC 6298, gain 1/8),
    /// the first taken as it is.
    fn sample(&mut self, rtt: Option<Duration>) {
        let Some(rtt) = rtt else { return };
        self.measured = Some(self.measured.map_or(rtt, |m| (m * 7 + rtt) / 8));
        if self.recent.len() == RECENT_SAMPLES {
            self.recent.pop_front();
        }
        self.recent.push_back(rtt);
    }

    /// The round trip: measured, or as assumed until then. In a group
    /// ([`NackConfig::dither_share`] above zero) it is the longest of the last
    /// [`RECENT_SAMPLES`] samples: a repair may answer another receiver's earlier ask, which
    /// this one did not hear of, so a sample can only be shorter than the way there and back.
    fn rtt(&self) -> Duration {
        if self.in_group() {
            if let Some(rtt) = self.from_sender.or(self.recent.iter().max().copied()) {
                return rtt;
            }
        }
        self.measured.unwrap_or(self.cfg.initial_rtt)
    }

    /// Whether it asks as a member of a group ([`NackConfig::group`]).
    fn in_group(&self) -> bool {
        self.cfg.nack.dither_share > 0.0
    }

    /// Whether its reports should carry an RFC 3611 RRTR: a group member asking for
    /// retransmissions measures its round trip from the sender's DLRR answer, since one
    /// measured from ask to repair may be another's.
    pub(crate) fn wants_rrtr(&self) -> bool {
        self.in_group() && self.cfg.rtx_payload_type.is_some()
    }

    /// An RRTR went out with `ntp`'s middle 32 bits.
    pub(crate) fn rrtr_sent(&mut self, lrr: u32) {
        if self.rrtrs.len() == RRTRS_KEPT {
            self.rrtrs.pop_front();
        }
        self.rrtrs.push_back(lrr);
    }

    /// The sender `sender` answered this receiver's RRTR `lrr` with a round trip of `rtt` (its
    /// DLRR); whether it was taken. Only the followed stream's answer to an RRTR sent and not
    /// yet answered counts, and a round trip is taken as at most the play-out delay (a longer
    /// one leaves nothing to repair either): a forged or replayed DLRR cannot make this
    /// receiver give up every loss.
    pub(crate) fn on_sender_rtt(&mut self, sender: Ssrc, lrr: u32, rtt: Duration) -> bool {
        if self.media.is_none_or(|m| m.ssrc != sender) {
            return false;
        }
        let Some(i) = self.rrtrs.iter().position(|&l| l == lrr) else {
            return false;
        };
        self.rrtrs.remove(i);
        let rtt = rtt.min(self.cfg.playout_delay);
        self.from_sender = Some(self.from_sender.map_or(rtt, |m| (m * 7 + rtt) / 8));
        true
    }

    /// The stream's sequence numbers restarted (a confirmed jump): what FEC kept is of the
    /// old numbering, and goes.
    pub(crate) fn restart(&mut self) {
        self.planner.restart();
        if let Some(max) = self.cfg.fec_max_packet {
            self.fec = Some(Box::new(FecDecoder::new(max)));
        }
        self.early.clear();
        self.fec_asked.clear();
        // Its timestamps may have restarted too: the play-out clock is set again.
        self.playout = None;
        self.repaired.fill(u64::MAX);
    }

    /// Another receiver of the group asked for `sequences` of stream `media_ssrc` at `now`;
    /// whether it is the stream followed here (else the NACK is not for us).
    pub(crate) fn on_peer_nack(
        &mut self,
        media_ssrc: Ssrc,
        sequences: Vec<SeqNo>,
        now: Timestamp,
    ) -> bool {
        if self.media.is_none_or(|m| m.ssrc != media_ssrc) {
            return false;
        }
        self.planner.on_peer_nack(sequences, now, self.rtt());
        true
    }

    /// When a NACK may be due (or a missing packet given up).
    pub(crate) fn next_due(&self) -> Option<Timestamp> {
        self.cfg.rtx_payload_type?;
        self.planner.next_due(self.rtt())
    }

    /// The sequence numbers to ask for now, at most `max`, into `out`.
    pub(crate) fn asks(&mut self, now: Timestamp, max: usize, out: &mut Vec<SeqNo>) {
        out.clear();
        if self.cfg.rtx_payload_type.is_none() {
            return;
        }
        let rtt = self.rtt();
        self.planner.poll(now, rtt, max, out);
    }

    /// A NACK went out.
    pub(crate) fn nack_sent(&mut self) {
        self.stats.nack_packets += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn the_fastest_packet_sets_the_playout_clock() {
        // 90 kHz: 9 000 ticks are 100 ms; 200 ms of play-out delay.
        let mut p = Playout::new(
            MediaClock::VIDEO_90K,
            Duration::from_millis(200),
            RtpTime(1000),
            at(50),
        );
        assert_eq!(p.deadline(RtpTime(1000)), at(250));
        // A later packet that was quicker on the way moves the clock earlier...
        p.arrived(RtpTime(1000 + 9000), at(140), true);
        assert_eq!(p.deadline(RtpTime(1000 + 9000)), at(340));
        // ...a slower one does not; timestamps unwrap across 2^32.
        p.arrived(RtpTime(1000 + 18_000), at(400), true);
        assert_eq!(p.deadline(RtpTime(1000 + 18_000)), at(440));
        let mut w = Playout::new(
            MediaClock::VIDEO_90K,
            Duration::ZERO,
            RtpTime(u32::MAX - 99),
            at(0),
        );
        w.arrived(RtpTime(8900), at(100), true);
        assert_eq!(w.deadline(RtpTime(8900)), at(100));
        assert_eq!(w.gap_deadline(), at(100));
    }
}
