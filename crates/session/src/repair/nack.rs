//! [`NackPlanner`]: the receiver's side of NACK and retransmission. It notes the sequence
//! numbers missing from a stream, and says which to ask for in a generic NACK (RFC 4585
//! §6.2.1) and when: only packets a repair can still bring before their play-out deadline
//! (one round trip and a margin), each at most a few times, a round trip apart. In a group a
//! receiver waits a random time first (RFC 4585 §3.4, `T_dither_max`) and does not ask for
//! what another receiver's NACK already asked (§3.5), so that one loss upstream of many
//! viewers causes few NACKs.
//!
//! It never reads a clock: `now` comes with every call, and [`NackPlanner::next_due`] tells the
//! driver when to call [`NackPlanner::poll`] next.

use metronome_time::Timestamp;
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
    /// The random wait before a first NACK, at most (`T_dither_max`): zero for a unicast
    /// stream, about half a round trip in a group.
    pub dither_max: Duration,
    /// Round trips between two NACKs for one packet.
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
            retry_rtts: 1.5,
            seed: 0,
        }
    }
}

/// What the planner saw and did, packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct NackCounters {
    /// Packets found missing (a gap in sequence numbers).
    pub missing: u64,
    /// Sequence numbers put in NACKs (a packet asked for twice counts twice).
    pub asked: u64,
    /// Missing packets that came (late, or repaired) before their deadline.
    pub recovered: u64,
    /// Missing packets that came after their deadline (of no use to the viewer).
    pub recovered_late: u64,
    /// Missing packets given up: their deadline came, or a repair could no longer make it.
    pub given_up: u64,
    /// First NACKs not sent because another receiver's NACK asked for the packet first.
    pub suppressed: u64,
    /// Missing packets never followed (beyond `max_tracked`).
    pub untracked: u64,
}

#[derive(Clone, Copy, Debug)]
struct Missing {
    /// Extended sequence number.
    seq: u64,
    deadline: Timestamp,
    asks: u8,
    next_ask: Timestamp,
}

/// A receiver's NACK scheduler for one stream; see the module's documentation.
#[derive(Debug)]
pub struct NackPlanner {
    cfg: NackConfig,
    /// In sequence order, at most `cfg.max_tracked`.
    missing: VecDeque<Missing>,
    highest: Option<u64>,
    rng: ChaCha8Rng,
    counters: NackCounters,
}

impl NackPlanner {
    /// A planner for one stream.
    pub fn new(cfg: NackConfig) -> NackPlanner {
        NackPlanner {
            missing: VecDeque::with_capacity(cfg.max_tracked.min(4096)),
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            highest: None,
            counters: NackCounters::default(),
        }
    }

    /// What it saw and did so far.
    pub fn counters(&self) -> NackCounters {
        self.counters
    }

    /// Packets missing now.
    pub fn missing(&self) -> usize {
        self.missing.len()
    }

    fn dither(&mut self) -> Duration {
        let max = self.cfg.dither_max.as_nanos() as u64;
        Duration::from_nanos(if max == 0 {
            0
        } else {
            self.rng.random_range(0..=max)
        })
    }

    /// A packet arrived at `now` with extended sequence number `seq`. Packets it shows missing
    /// (between the highest before and it) are due by `gap_deadline`: the caller's play-out
    /// deadline for them (the earlier frame's, when they may belong to either).
    pub fn on_packet(&mut self, seq: u64, now: Timestamp, gap_deadline: Timestamp) {
        let Some(highest) = self.highest else {
            self.highest = Some(seq);
            return;
        };
        if seq > highest {
            let gap = seq - highest - 1;
            self.counters.missing += gap;
            let tracked = gap.min(self.cfg.max_tracked as u64);
            self.counters.untracked += gap - tracked;
            for s in seq - tracked..seq {
                if self.missing.len() == self.cfg.max_tracked {
                    self.missing.pop_front();
                    self.counters.untracked += 1;
                }
                let next_ask = now + self.dither();
                self.missing.push_back(Missing {
                    seq: s,
                    deadline: gap_deadline,
                    asks: 0,
                    next_ask,
                });
            }
            self.highest = Some(seq);
        } else if let Ok(i) = self.missing.binary_search_by_key(&seq, |m| m.seq) {
            match self.missing.remove(i) {
                Some(m) if now <= m.deadline => self.counters.recovered += 1,
                Some(_) => self.counters.recovered_late += 1,
                None => {}
            }
        }
    }

    /// The extended number nearest the highest seen for a 16-bit one.
    fn extend(&self, seq: u16) -> Option<u64> {
        let highest = self.highest?;
        let base = highest & !0xffff;
        [
            base.checked_sub(0x1_0000),
            Some(base),
            base.checked_add(0x1_0000),
        ]
        .into_iter()
        .flatten()
        .map(|b| b | u64::from(seq))
        .min_by_key(|c| c.abs_diff(highest))
    }

    /// Another receiver of the group asked for `sequences` at `now` (its NACK, seen on the
    /// group): those not asked for here yet are counted as asked, next asked a retry later.
    pub fn on_peer_nack(
        &mut self,
        sequences: impl IntoIterator<Item = u16>,
        now: Timestamp,
        rtt: Duration,
    ) {
        let retry = rtt.mul_f64(self.cfg.retry_rtts.max(1.0));
        for seq in sequences.into_iter().take(self.cfg.max_tracked) {
            let Some(ext) = self.extend(seq) else { return };
            if let Ok(i) = self.missing.binary_search_by_key(&ext, |m| m.seq) {
                let m = &mut self.missing[i];
                if m.asks == 0 {
                    self.counters.suppressed += 1;
                }
                m.asks = m.asks.saturating_add(1);
                m.next_ask = now + retry;
            }
        }
    }

    /// The sequence numbers to put in a NACK now (at most `max`, into `out`), given the round
    /// trip time to the sender. Packets whose repair could no longer arrive in time are given
    /// up.
    pub fn poll(&mut self, now: Timestamp, rtt: Duration, max: usize, out: &mut Vec<u16>) {
        let retry = rtt
            .mul_f64(self.cfg.retry_rtts.max(1.0))
            .max(Duration::from_millis(1));
        let (cfg, counters) = (&self.cfg, &mut self.counters);
        self.missing.retain_mut(|m| {
            let arrives = now + rtt + cfg.margin;
            if arrives > m.deadline || (m.asks >= cfg.max_asks && now > m.next_ask) {
                counters.given_up += 1;
                return false;
            }
            if m.next_ask <= now && m.asks < cfg.max_asks && out.len() < max {
                out.push(m.seq as u16);
                counters.asked += 1;
                m.asks += 1;
                m.next_ask = now + retry;
            }
            true
        });
    }

    /// When [`NackPlanner::poll`] has something to do next (a NACK or a packet to give up),
    /// if anything is missing.
    pub fn next_due(&self, rtt: Duration) -> Option<Timestamp> {
        let late = rtt + self.cfg.margin;
        self.missing
            .iter()
            .map(|m| {
                let give_up = m.deadline.checked_sub(late).unwrap_or(Timestamp::ZERO);
                if m.asks < self.cfg.max_asks {
                    m.next_ask.min(give_up)
                } else {
                    give_up
                }
            })
            .min()
    }
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
        out
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
        assert_eq!(poll(&mut p, at(92)), Vec::<u16>::new());
        assert_eq!(
            (p.missing(), p.counters().given_up, p.counters().asked),
            (0, 1, 4)
        );
    }

    #[test]
    fn it_does_not_ask_for_what_cannot_arrive_before_the_deadline() {
        let mut p = NackPlanner::new(NackConfig::default());
        p.on_packet(1, at(0), at(100));
        // Due at 100 ms; a repair asked at 80 ms arrives at 100 + 5 ms margin: too late.
        p.on_packet(3, at(80), at(100));
        assert_eq!(poll(&mut p, at(80)), Vec::<u16>::new());
        assert_eq!(p.counters().given_up, 1);
        // It comes anyway, after its deadline: of no use.
        p.on_packet(2, at(120), at(200));
        assert_eq!(
            p.counters().recovered_late,
            0,
            "given up: no longer followed"
        );
    }

    #[test]
    fn in_a_group_it_waits_and_leaves_asking_to_whoever_asked_first() {
        let cfg = NackConfig {
            dither_max: Duration::from_millis(10),
            seed: 7,
            ..NackConfig::default()
        };
        let mut p = NackPlanner::new(cfg);
        p.on_packet(65_534, at(0), at(500));
        p.on_packet(65_537, at(0) + Duration::from_micros(1), at(500));
        // 65 535 and 0 are missing across the wrap; nothing is asked before the dither ends.
        assert_eq!(p.missing(), 2);
        // Another receiver asks for 0 (16-bit, extended across the wrap) within the dither.
        p.on_peer_nack([0u16], at(1), RTT);
        assert_eq!(p.counters().suppressed, 1);
        let asked: Vec<u16> = (0..=10).flat_map(|ms| poll(&mut p, at(ms))).collect();
        assert_eq!(asked, vec![65_535]);
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
        assert_eq!((c.missing, c.untracked), (999_999, 999_983));
        assert_eq!(poll(&mut p, at(1)).len(), 16);
        assert!(poll(&mut p, at(1)).is_empty());
    }
}
