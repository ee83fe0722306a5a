//! [`NackPlanner`]: the receiver's side of NACK and retransmission. It notes the sequence
//! numbers missing from a stream, and says which to ask for in a generic NACK (RFC 4585
//! §6.2.1) and when: only packets a repair can still bring before their play-out deadline
//! (one round trip and a margin), each at most a few times, a round trip apart. In a group a
//! receiver waits a random time first, once per loss event (RFC 4585 §3.5.2, `T_dither_max`),
//! and does not ask for what another receiver's NACK already asked, or what the sender said it
//! is repairing (RFC 6642's TLLEI), even one seen before it noticed the loss itself (§3.4,
//! §3.5.2 step 5), so that one loss upstream of many viewers causes few NACKs.
//!
//! The dither of a group deliberately departs from RFC 4585 §3.5.2 step 2b, whose
//! `0.5 · T_rr` is a minimum (another rule "MUST then be specified in a future document", the
//! same at every receiver): half the regular interval is seconds in a large group, longer
//! than a play-out deadline, so asking could never help. Here it is a share of the time left
//! before the loss's last useful ask ([`NackConfig::dither_share`]: its deadline less a round trip and the
//! margin), which a group's receivers know without a round trip of their own (one measured
//! from ask to repair is short when the repair answered another's earlier ask). It is drawn
//! from the truncated exponential that NORM (RFC 5740) uses for its NACK backoff when the
//! group's size is given: most receivers wait long, a few briefly, so that the first NACK's
//! repair and the sender's TLLEI reach the rest before they ask.
//!
//! [`NackPlanner::poll`] counts what it returns as asked: the driver sends it at once (early
//! feedback, RFC 4585 §3.5.2 `allow_early`), or gives it back to the planner by not calling
//! `poll` until it can.
//!
//! It never reads a clock: `now` comes with every call, and [`NackPlanner::next_due`] tells the
//! driver when to call [`NackPlanner::poll`] next.

use metronome_time::Timestamp;
use metronome_wire::SeqNo;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::time::Duration;

/// How a receiver asks for repairs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NackConfig {
    /// Missing packets followed at once; beyond, the oldest are given up (a bound on what a
    /// burst of loss, or a forged jump in sequence numbers, can make the receiver hold).
    pub max_tracked: usize,
    /// Times one packet is asked for at most.
    pub max_asks: u8,
    /// A repair must arrive at least this long before the deadline (to be decoded in time).
    pub margin: Duration,
    /// The random wait before the first NACK of a loss event, at most (`T_dither_max`): zero
    /// for a unicast stream. RFC 4585 §3.5.2 sets half the regular RTCP interval
    /// (`0.5 · T_rr`) as a group's least; [`NackConfig::group`] departs from it on purpose
    /// (see the module's documentation).
    pub dither_max: Duration,
    /// The share of the time left before a loss's last useful ask (its deadline less a round
    /// trip and the margin) added to `dither_max`: zero for a unicast stream.
    pub dither_share: f64,
    /// The group's size the dither is drawn for: 0 or 1 draws it uniformly (RFC 4585); more
    /// draws it from NORM's truncated exponential with `λ = ln(size) + 1`.
    pub group_size: u32,
    /// Round trips between two NACKs for one packet (at least one).
    pub retry_rtts: f64,
    /// Seeds the dither.
    pub seed: u64,
}

impl Default for NackConfig {
    /// Unicast: up to 1 024 missing packets, asked for three times, 1.5 round trips apart,
    /// arriving 5 ms before their deadline.
    fn default() -> Self {
        NackConfig {
            max_tracked: 1024,
            max_asks: 3,
            margin: Duration::from_millis(5),
            dither_max: Duration::ZERO,
            dither_share: 0.0,
            group_size: 0,
            retry_rtts: 1.5,
            seed: 0,
        }
    }
}

impl NackConfig {
    /// Asking as one of a group of `size` receivers: a dither of up to half the time left
    /// before a loss's last useful ask ([`GROUP_DITHER_SHARE`]), seeded with `seed`;
    /// otherwise as [`NackConfig::default`].
    pub fn group(size: u32, seed: u64) -> NackConfig {
        NackConfig {
            dither_share: GROUP_DITHER_SHARE,
            group_size: size,
            seed,
            ..NackConfig::default()
        }
    }
}

/// A group's dither, as a share of the time left before a loss's last useful ask
/// ([`NackConfig::group`]): the first NACK's repair (or the sender's TLLEI) must reach the
/// others before they ask, and the other half is left for asking again.
pub const GROUP_DITHER_SHARE: f64 = 0.5;

/// What the planner saw and did, packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct NackCounters {
    /// Packets found missing (a gap in sequence numbers).
    pub missing: u64,
    /// Sequence numbers put in NACKs (a packet asked for twice counts twice).
    pub asked: u64,
    /// Missing packets that came (late, or repaired) before their deadline, also after they
    /// were given up (a repair already on its way when asking again could no longer help).
    pub recovered: u64,
    /// Missing packets that came after their deadline (of no use to the viewer); counted for
    /// those followed and the last [`GONE_MEMORY`] given up.
    pub recovered_late: u64,
    /// Missing packets no longer asked for: another ask's repair could no longer make the
    /// deadline, or every ask went unanswered. One may still come in time, and count in
    /// `recovered` too.
    pub given_up: u64,
    /// First NACKs not sent because another receiver's NACK asked for the packet first.
    pub suppressed: u64,
    /// Missing packets never followed (a gap longer than `max_tracked`).
    pub untracked: u64,
    /// Followed packets dropped to make room for newer ones (`max_tracked` reached).
    pub evicted: u64,
}

/// Given-up sequence numbers remembered, to count those that come after all.
pub const GONE_MEMORY: usize = 256;
/// Other receivers' NACKs remembered for packets not yet seen missing here.
pub const PEER_MEMORY: usize = 256;

#[derive(Clone, Copy, Debug)]
struct Missing {
    /// Extended sequence number.
    seq: u64,
    deadline: Timestamp,
    asks: u8,
    next_ask: Timestamp,
    /// When this receiver last asked for it, and how often (peers' asks not counted).
    asked_at: Option<Timestamp>,
    own_asks: u8,
}

/// A missing packet that came after all, as [`NackPlanner::on_packet`] tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filled {
    /// It came before its deadline.
    pub in_time: bool,
    /// The time from this receiver's only ask for it to its arrival: a round-trip sample
    /// (Karn's rule, RFC 6298 §3: none when it was asked for more than once, as which ask it
    /// answers is unknown).
    pub since_ask: Option<Duration>,
}

/// `d` × `factor`, saturating (no panic on a huge or non-finite product).
fn scaled(d: Duration, factor: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * factor).unwrap_or(Duration::MAX)
}

/// Where in the dither a uniform draw `x` in [0, 1) falls for a group of `size`, as a share of
/// it: NORM's truncated exponential (RFC 5740), density rising as `e^(λt)` with `λ = ln(size) +
/// 1`, so that in a group of that size about one receiver draws early.
fn biased(x: f64, size: u32) -> f64 {
    let lambda = f64::from(size).ln() + 1.0;
    ((x * (lambda.exp() - 1.0)).ln_1p() / lambda).clamp(0.0, 1.0)
}

/// A receiver's NACK scheduler for one stream; see the module's documentation.
#[derive(Debug)]
pub struct NackPlanner {
    cfg: NackConfig,
    /// In sequence order, at most `cfg.max_tracked`.
    missing: VecDeque<Missing>,
    highest: Option<u64>,
    /// Given up lately, at most [`GONE_MEMORY`]: a repair asked for before may still come,
    /// and is judged by its deadline.
    gone: VecDeque<Missing>,
    /// Other receivers' NACKs for packets beyond the highest seen here: (extended number, when
    /// to ask if it is still missing then), at most [`PEER_MEMORY`].
    peer: VecDeque<(u64, Timestamp)>,
    rng: ChaCha8Rng,
    counters: NackCounters,
    /// A gap's first ask waits until this many packets past it have come (FEC's row may
    /// rebuild it first): 0, none.
    hold: u64,
    /// The round trip to the sender, as the caller last gave it: what the dither and a gap's
    /// last chance are reckoned from.
    rtt: Option<Duration>,
}

impl NackPlanner {
    /// A planner for one stream.
    pub fn new(cfg: NackConfig) -> NackPlanner {
        NackPlanner {
            missing: VecDeque::with_capacity(cfg.max_tracked.min(4096)),
            gone: VecDeque::with_capacity(GONE_MEMORY),
            peer: VecDeque::with_capacity(PEER_MEMORY),
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            highest: None,
            counters: NackCounters::default(),
            hold: 0,
            rtt: None,
        }
    }

    /// The round trip to the sender is `rtt`: a loss's last useful ask, which bounds a group's
    /// dither, is its deadline less this and the margin.
    pub fn set_rtt(&mut self, rtt: Duration) {
        self.rtt = Some(rtt);
    }

    /// A missing packet is first asked for once `packets` packets past it have come (or when
    /// asking later could not bring its repair in time): FEC over rows of that many packets
    /// may rebuild it first, and a retransmission would be wasted.
    pub fn hold_for(&mut self, packets: u64) {
        self.hold = packets;
    }

    /// What it saw and did so far.
    pub fn counters(&self) -> NackCounters {
        self.counters
    }

    /// The stream's sequence restarted (a confirmed jump, RFC 3550 A.1): what was missing
    /// before is forgotten (not given up: the numbers no longer mean those packets), counts kept.
    pub fn restart(&mut self) {
        self.missing.clear();
        self.gone.clear();
        self.peer.clear();
        self.highest = None;
    }

    /// Packets missing now.
    pub fn missing(&self) -> usize {
        self.missing.len()
    }

    /// Time between two asks for one packet: `retry_rtts` round trips, at least 1 ms.
    fn retry(&self, rtt: Duration) -> Duration {
        scaled(rtt, self.cfg.retry_rtts.max(1.0)).max(Duration::from_millis(1))
    }

    /// When the first NACK of a loss event noticed at `now` goes: with the one already
    /// waiting for its dither if there is one (one feedback packet per event), else after a
    /// dither of its own.
    fn first_ask(&mut self, now: Timestamp, deadline: Timestamp) -> Timestamp {
        let waiting = self
            .missing
            .iter()
            .filter(|m| m.asks == 0 && m.next_ask > now)
            .map(|m| m.next_ask)
            .min();
        waiting.unwrap_or_else(|| now + self.dither(now, deadline))
    }

    /// A loss event's random wait at `now` before its first NACK, for packets due by
    /// `deadline`: `dither_max`, and in a group `dither_share` of the time left until the last
    /// ask whose repair can still make the deadline.
    fn dither(&mut self, now: Timestamp, deadline: Timestamp) -> Duration {
        let late = self.rtt.unwrap_or_default().saturating_add(self.cfg.margin);
        let last = deadline.checked_sub(late).unwrap_or(now);
        let left = last.saturating_since(now);
        let share = self.cfg.dither_share;
        let share = if share.is_finite() {
            share.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let max = self.cfg.dither_max.saturating_add(scaled(left, share));
        let nanos = max.as_nanos().min(u128::from(u64::MAX)) as u64;
        if nanos == 0 {
            return Duration::ZERO;
        }
        if self.cfg.group_size <= 1 {
            return Duration::from_nanos(self.rng.random_range(0..=nanos));
        }
        let x: f64 = self.rng.random();
        scaled(max, biased(x, self.cfg.group_size))
    }

    /// A packet arrived at `now` with extended sequence number `seq`. Packets it shows missing
    /// (between the highest before and it) are due by `gap_deadline`: the caller's play-out
    /// deadline for them (the earlier frame's, when they may belong to either).
    ///
    /// Returns, for a packet that was missing and followed, whether it came in time and the
    /// round-trip sample it gives.
    pub fn on_packet(
        &mut self,
        seq: u64,
        now: Timestamp,
        gap_deadline: Timestamp,
    ) -> Option<Filled> {
        let Some(highest) = self.highest else {
            self.highest = Some(seq);
            return None;
        };
        if seq > highest {
            self.note_gap(highest + 1..seq, now, gap_deadline);
            self.highest = Some(seq);
        } else if let Ok(i) = self.missing.binary_search_by_key(&seq, |m| m.seq) {
            let m = self.missing.remove(i)?;
            return Some(self.filled(m, now));
        } else if let Some(i) = self.gone.iter().position(|g| g.seq == seq) {
            let m = self.gone.remove(i)?;
            return Some(self.filled(m, now));
        }
        None
    }

    /// Missing packet `m` came at `now`: counted in time or late, with a round-trip sample
    /// if it answers this receiver's only ask.
    fn filled(&mut self, m: Missing, now: Timestamp) -> Filled {
        let in_time = now <= m.deadline;
        if in_time {
            self.counters.recovered += 1;
        } else {
            self.counters.recovered_late += 1;
        }
        // Karn's rule: only a packet asked for once in all (another receiver's ask counts: the
        // repair may answer it).
        let since_ask = m.asked_at.filter(|_| m.own_asks == 1 && m.asks == 1);
        Filled {
            in_time,
            since_ask: since_ask.map(|t| now.saturating_since(t)),
        }
    }

    fn note_gap(&mut self, gap: std::ops::Range<u64>, now: Timestamp, deadline: Timestamp) {
        if gap.is_empty() {
            return;
        }
        let len = gap.end - gap.start;
        self.counters.missing += len;
        let tracked = len.min(self.cfg.max_tracked as u64);
        self.counters.untracked += len - tracked;
        let first_ask = self.first_ask(now, deadline);
        for seq in gap.end - tracked..gap.end {
            if self.missing.len() >= self.cfg.max_tracked {
                // Judged by its deadline, as a given-up packet, should its repair still come.
                if let Some(old) = self.missing.pop_front() {
                    remember_gone(&mut self.gone, old);
                }
                self.counters.evicted += 1;
            }
            let mut m = Missing {
                seq,
                deadline,
                asks: 0,
                next_ask: first_ask,
                asked_at: None,
                own_asks: 0,
            };
            if let Some(&(_, retry_at)) = self.peer.iter().find(|(p, t)| *p == seq && *t > now) {
                self.counters.suppressed += 1;
                m.asks = 1;
                m.next_ask = retry_at;
            }
            self.missing.push_back(m);
        }
    }

    /// The extended number nearest the highest seen for a 16-bit one.
    fn extend(&self, seq: SeqNo) -> Option<u64> {
        self.highest.map(|h| seq.extend_near(h))
    }

    /// Another receiver of the group asked for `sequences` at `now` (its NACK, seen on the
    /// group, or the sender's TLLEI): those not asked for here yet count as asked, to be asked
    /// here a retry later if still missing then; also those not yet seen missing here. One
    /// asked within the last retry counts once: repeated (or forged) TLLEIs do not use up
    /// this receiver's asks, nor put off its next one.
    pub fn on_peer_nack(
        &mut self,
        sequences: impl IntoIterator<Item = SeqNo>,
        now: Timestamp,
        rtt: Duration,
    ) {
        let retry_at = now + self.retry(rtt);
        for seq in sequences.into_iter().take(self.cfg.max_tracked) {
            let Some(ext) = self.extend(seq) else { return };
            if let Ok(i) = self.missing.binary_search_by_key(&ext, |m| m.seq) {
                let m = &mut self.missing[i];
                if m.asks > 0 && now < m.next_ask {
                    continue;
                }
                if m.asks == 0 {
                    self.counters.suppressed += 1;
                }
                m.asks = m.asks.saturating_add(1);
                m.next_ask = retry_at;
            } else if Some(ext) > self.highest {
                if self.peer.len() == PEER_MEMORY {
                    self.peer.pop_front();
                }
                self.peer.push_back((ext, retry_at));
            }
        }
    }

    /// The sequence numbers to put in a NACK now (at most `max`, into `out`), given the round
    /// trip time to the sender. Packets whose repair could no longer arrive in time, and those
    /// asked for `max_asks` times a retry ago, are given up.
    pub fn poll(&mut self, now: Timestamp, rtt: Duration, max: usize, out: &mut Vec<SeqNo>) {
        self.rtt = Some(rtt);
        let retry = self.retry(rtt);
        let late = rtt.saturating_add(self.cfg.margin);
        let (highest, hold) = (self.highest, self.hold);
        let (cfg, counters, gone) = (&self.cfg, &mut self.counters, &mut self.gone);
        self.missing.retain_mut(|m| {
            let waits = waits_for_fec(m, highest, hold) && now < last_chance(m, late, retry);
            let too_late = now + late >= m.deadline;
            let unanswered = m.asks >= cfg.max_asks && now >= m.next_ask;
            if too_late || unanswered {
                counters.given_up += 1;
                remember_gone(gone, *m);
                return false;
            }
            if m.next_ask <= now && !waits && out.len() < max {
                out.push(SeqNo::of_extended(m.seq));
                counters.asked += 1;
                m.asks += 1;
                m.next_ask = now + retry;
                m.asked_at = Some(now);
                m.own_asks = m.own_asks.saturating_add(1);
            }
            true
        });
        self.peer.retain(|&(_, t)| t > now);
    }

    /// When [`NackPlanner::poll`] has something to do next (a NACK to send or a packet to
    /// give up), if anything is missing. Polling then always makes progress.
    pub fn next_due(&self, rtt: Duration) -> Option<Timestamp> {
        let late = rtt.saturating_add(self.cfg.margin);
        let retry = self.retry(rtt);
        self.missing
            .iter()
            .map(|m| {
                let give_up = m.deadline.checked_sub(late).unwrap_or(Timestamp::ZERO);
                // A held ask waits for packets (each arrival polls again) or its last chance.
                let ask = if waits_for_fec(m, self.highest, self.hold) {
                    m.next_ask.max(last_chance(m, late, retry))
                } else {
                    m.next_ask
                };
                ask.min(give_up)
            })
            .min()
    }
}

/// Keeps `m`, no longer followed, among the [`GONE_MEMORY`] last given up.
fn remember_gone(gone: &mut VecDeque<Missing>, m: Missing) {
    if gone.len() == GONE_MEMORY {
        gone.pop_front();
    }
    gone.push_back(m);
}

/// Whether `m`'s first ask waits for FEC: it was never asked for, and not `hold` packets past
/// it have come (`highest` the highest so far).
fn waits_for_fec(m: &Missing, highest: Option<u64>, hold: u64) -> bool {
    m.asks == 0 && hold > 0 && highest.is_some_and(|h| h < m.seq + hold)
}

/// The last time `m` can be asked for and still be asked again once before giving up.
fn last_chance(m: &Missing, late: Duration, retry: Duration) -> Timestamp {
    m.deadline
        .checked_sub(late.saturating_add(retry))
        .unwrap_or(Timestamp::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Timestamp {
        Timestamp::ZERO + Duration::from_millis(ms)
    }
    const RTT: Duration = Duration::from_millis(20);

    fn poll(p: &mut NackPlanner, now: Timestamp) -> Vec<u16> {
        let mut out = Vec::new();
        p.poll(now, RTT, 100, &mut out);
        out.into_iter().map(u16::from).collect()
    }

    #[test]
    fn it_asks_for_a_gap_a_round_trip_apart_until_it_arrives() {
        let mut p = NackPlanner::new(NackConfig::default());
        p.on_packet(10, at(0), at(500));
        p.on_packet(13, at(1), at(500));
        assert_eq!(p.counters().missing, 2);
        assert_eq!(poll(&mut p, at(1)), vec![11, 12]);
        // 1.5 round trips later, again.
        assert_eq!(poll(&mut p, at(20)), Vec::<u16>::new());
        assert_eq!(p.next_due(RTT), Some(at(31)));
        p.on_packet(11, at(25), at(500));
        assert_eq!(poll(&mut p, at(31)), vec![12]);
        assert_eq!(p.counters().recovered, 1);
        // Asked three times, then given up once its last ask's retry time has passed.
        assert_eq!(poll(&mut p, at(61)), vec![12]);
        assert_eq!(p.next_due(RTT), Some(at(91)));
        assert_eq!(poll(&mut p, at(91)), Vec::<u16>::new());
        assert_eq!(
            (p.missing(), p.counters().given_up, p.counters().asked),
            (0, 1, 4)
        );
        // It comes after all, before its deadline: of use to the viewer.
        p.on_packet(12, at(95), at(500));
        assert_eq!(p.counters().recovered, 2);
        assert_eq!(p.counters().recovered_late, 0);
    }

    #[test]
    fn a_repair_asked_for_before_giving_up_counts_by_its_deadline_and_gives_a_round_trip() {
        // Due at 100 ms, asked at 50: another ask could not make it after 75 ms, so the packet
        // is given up then, while the first ask's repair is on its way.
        let mut p = NackPlanner::new(NackConfig::default());
        p.on_packet(1, at(50), at(100));
        p.on_packet(3, at(50), at(100));
        assert_eq!(poll(&mut p, at(50)), vec![2]);
        poll(&mut p, at(76));
        assert_eq!((p.missing(), p.counters().given_up), (0, 1));
        let filled = p.on_packet(2, at(90), at(100));
        assert_eq!(
            filled,
            Some(Filled {
                in_time: true,
                since_ask: Some(Duration::from_millis(40))
            })
        );
        assert_eq!(
            (p.counters().recovered, p.counters().recovered_late),
            (1, 0)
        );
        // After its deadline it is of no use.
        p.on_packet(5, at(91), at(120));
        assert_eq!(poll(&mut p, at(91)), vec![4]);
        poll(&mut p, at(110));
        p.on_packet(4, at(130), at(140));
        assert_eq!(
            (p.counters().recovered, p.counters().recovered_late),
            (1, 1)
        );
    }

    #[test]
    fn with_fec_rows_a_loss_is_asked_for_once_its_row_has_passed_or_at_its_last_chance() {
        let mut p = NackPlanner::new(NackConfig::default());
        p.hold_for(4);
        p.on_packet(10, at(0), at(500));
        p.on_packet(12, at(1), at(500));
        // Held: FEC over rows of 4 may rebuild 11 once 12, 13 and 14 (and the FEC) came.
        assert_eq!(poll(&mut p, at(1)), Vec::<u16>::new());
        p.on_packet(13, at(2), at(500));
        p.on_packet(14, at(3), at(500));
        assert_eq!(poll(&mut p, at(3)), Vec::<u16>::new());
        p.on_packet(15, at(4), at(500));
        assert_eq!(poll(&mut p, at(4)), vec![11]);
        p.on_packet(11, at(5), at(500));
        // No more packets: asked at its last chance, when one more retry (30 ms) and the
        // repair's trip (20 ms and 5 ms of margin) still make the deadline.
        p.on_packet(17, at(10), at(100));
        assert_eq!(p.next_due(RTT), Some(at(45)));
        assert_eq!(poll(&mut p, at(44)), Vec::<u16>::new());
        assert_eq!(poll(&mut p, at(45)), vec![16]);
    }

    #[test]
    fn it_does_not_ask_for_what_cannot_arrive_before_the_deadline() {
        let mut p = NackPlanner::new(NackConfig::default());
        p.on_packet(1, at(0), at(100));
        // Due at 100 ms; a repair asked at 80 ms arrives at 100 + 5 ms margin: too late.
        p.on_packet(3, at(80), at(100));
        assert_eq!(poll(&mut p, at(80)), Vec::<u16>::new());
        assert_eq!(p.counters().given_up, 1);
    }

    #[test]
    fn polling_when_it_says_always_moves_on() {
        // Due at 100 ms, asked at 50 (next at 80): giving up is due at 75 ms, and polling
        // then gives up.
        let mut p = NackPlanner::new(NackConfig::default());
        p.on_packet(1, at(50), at(100));
        p.on_packet(3, at(50), at(100));
        assert_eq!(poll(&mut p, at(50)), vec![2]);
        let mut now = at(50);
        for _ in 0..10 {
            let Some(t) = p.next_due(RTT) else { break };
            assert!(t > now, "{t:?} is not after {now:?}");
            now = t;
            poll(&mut p, now);
        }
        assert_eq!((now, p.missing()), (at(75), 0));
    }

    /// A group planner whose dither for its first loss event comes out at 2 ms or more.
    fn group_planner() -> (NackPlanner, Timestamp) {
        for seed in 0.. {
            let cfg = NackConfig {
                dither_max: Duration::from_millis(10),
                seed,
                ..NackConfig::default()
            };
            let mut p = NackPlanner::new(cfg);
            p.on_packet(65_534, at(0), at(500));
            p.on_packet(65_537, at(0), at(500));
            let first = p.next_due(RTT).unwrap();
            if first >= at(2) {
                return (p, first);
            }
        }
        unreachable!()
    }

    #[test]
    fn in_a_group_it_waits_once_per_loss_and_leaves_asking_to_whoever_asked_first() {
        let (mut p, first) = group_planner();
        assert!(first <= at(10));
        // 65 535 and 0 are missing across the wrap; nothing is asked before the dither ends.
        assert_eq!(p.missing(), 2);
        assert!(poll(&mut p, at(0)).is_empty());
        // Another receiver asks for 0 (16-bit, extended across the wrap) at 1 ms.
        p.on_peer_nack([SeqNo(0)], at(1), RTT);
        assert_eq!(p.counters().suppressed, 1);
        // A loss noticed during the dither joins the NACK already waiting.
        p.on_packet(65_539, at(1), at(500));
        assert_eq!(p.next_due(RTT), Some(first));
        let asked: Vec<(u64, Vec<u16>)> = (1..=10)
            .map(|ms| (ms, poll(&mut p, at(ms))))
            .filter(|(_, a)| !a.is_empty())
            .collect();
        assert_eq!(asked.len(), 1, "one NACK for the event: {asked:?}");
        assert_eq!(asked[0].1, vec![65_535, 2]);
        assert!(at(asked[0].0) >= first);
    }

    #[test]
    fn a_peers_nack_seen_before_the_loss_is_noticed_still_suppresses() {
        let mut p = NackPlanner::new(NackConfig::default());
        p.on_packet(3, at(0), at(500));
        // Another receiver asks for 5 before 4..=5 are seen missing here.
        p.on_peer_nack([SeqNo(5)], at(0), RTT);
        p.on_packet(6, at(1), at(500));
        assert_eq!(p.counters().suppressed, 1);
        assert_eq!(poll(&mut p, at(1)), vec![4]);
        // Still missing a retry after the peer's NACK: asked here.
        assert_eq!(poll(&mut p, at(30)), vec![5]);
    }

    #[test]
    fn a_jump_in_sequence_numbers_is_bounded() {
        let cfg = NackConfig {
            max_tracked: 16,
            ..NackConfig::default()
        };
        let mut p = NackPlanner::new(cfg);
        p.on_packet(0, at(0), at(500));
        p.on_packet(1_000_000, at(1), at(500));
        assert_eq!(p.missing(), 16);
        let c = p.counters();
        assert_eq!((c.missing, c.untracked, c.evicted), (999_999, 999_983, 0));
        assert_eq!(poll(&mut p, at(1)).len(), 16);
        assert!(poll(&mut p, at(1)).is_empty());
        // The next gap makes room by dropping the oldest.
        p.on_packet(1_000_005, at(2), at(500));
        assert_eq!((p.missing(), p.counters().evicted), (16, 4));
    }

    #[test]
    fn absurd_settings_do_not_panic() {
        let cfg = NackConfig {
            retry_rtts: f64::INFINITY,
            margin: Duration::MAX,
            dither_max: Duration::MAX,
            ..NackConfig::default()
        };
        let mut p = NackPlanner::new(cfg);
        p.on_packet(1, at(0), at(500));
        p.on_packet(3, at(0), at(500));
        p.on_peer_nack([SeqNo(2)], at(0), Duration::MAX);
        assert!(poll(&mut p, at(0)).is_empty());
        let _ = p.next_due(Duration::MAX);
    }

    /// In a group of 45 the first ask of a loss waits at most half the time left before its
    /// last useful ask, and most receivers draw late in it (NORM's exponential): few ask
    /// before the first one's repair can come back.
    #[test]
    fn a_group_dither_ends_by_half_the_time_left_and_is_mostly_drawn_late() {
        let rtt = Duration::from_millis(50);
        // Deadline 600 ms after the gap: last useful ask at 545 ms, dither at most 272.5 ms.
        let asks: Vec<Duration> = (0..450u64)
            .map(|seed| {
                let mut p = NackPlanner::new(NackConfig::group(45, seed));
                p.set_rtt(rtt);
                p.on_packet(10, at(0), at(600));
                p.on_packet(12, at(0), at(600));
                p.next_due(rtt).unwrap().saturating_since(at(0))
            })
            .collect();
        let max = Duration::from_micros(272_500);
        assert!(asks.iter().all(|d| *d <= max), "{asks:?}");
        // Within one round trip of the dither's start: about 0.5 in 45 (F(0.18) = 0.012 of
        // F(u) = (e^(λu) - 1) / (e^λ - 1), λ = ln 45 + 1); uniformly it would be 8.
        let early = asks.iter().filter(|d| **d < rtt).count();
        assert!(early <= 20, "{early} of 450 within a round trip");
        // Unicast (and a group without its size, as RFC 4585 draws): at once, or uniformly.
        let mut p = NackPlanner::new(NackConfig::default());
        p.set_rtt(rtt);
        p.on_packet(10, at(0), at(600));
        p.on_packet(12, at(0), at(600));
        assert_eq!(p.next_due(rtt), Some(at(0)));
    }
}
