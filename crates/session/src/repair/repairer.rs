//! [`Repairer`]: the sender's side of NACK and retransmission. It keeps what the stream sent
//! ([`SendHistory`]) and answers a receiver's generic NACK (RFC 4585 §6.2.1) with
//! retransmission packets (RFC 4588), but only those that can still reach the viewer before the
//! packet's play-out deadline, that the stream's repair budget pays for, and that were not
//! repaired less than a round trip ago to where the asker is (then the repair is still on its
//! way: many viewers of a group missing one packet cause one repair, and a viewer whose repair
//! was lost gets another). A repair goes back only where its NACK came from ([`Outlet`]): to
//! a group, or to the one unicast destination that asked, not to a stream's other
//! destinations; unless the stream sends every repair everywhere ([`Path::everywhere`]).

use super::history::SendHistory;
use metronome_time::Timestamp;
use metronome_wire::rtx::{wrap, StreamIds};
use metronome_wire::{SeqNo, Ssrc};
use std::time::Duration;

/// How a stream answers NACKs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RepairConfig {
    /// The retransmission stream's SSRC and payload type (the SDP's `rtx`, `apt` = the media's).
    pub rtx: StreamIds,
    /// The retransmission stream's first sequence number.
    pub initial_sequence: SeqNo,
    /// The share of the stream's rate (see [`Repairer::set_rate`]) repairs may take on
    /// average, 0 to 1: they count against the rate the stream was admitted with.
    pub budget_share: f64,
    /// The most repair bytes that may leave at once (the budget's bucket depth), bytes.
    pub burst_bytes: u64,
    /// Sequence numbers one NACK may ask for; the rest of it is ignored (a NACK's 17 numbers
    /// per entry make a hostile one cheap to send and dear to answer).
    pub max_per_nack: usize,
    /// A packet is not retransmitted again within a round trip of its last repair (the repair
    /// is still on its way to whoever asked); this is the least that counts as a round trip,
    /// whatever the estimate says.
    pub min_repeat_guard: Duration,
}

impl RepairConfig {
    /// Repairs up to `budget_share` of the rate, 64 numbers per NACK, one repair per packet
    /// per round trip (at least 5 ms).
    pub fn new(rtx: StreamIds, initial_sequence: SeqNo, budget_share: f64) -> RepairConfig {
        RepairConfig {
            rtx,
            initial_sequence,
            budget_share,
            burst_bytes: 64 * 1500,
            max_per_nack: 64,
            min_repeat_guard: Duration::from_millis(5),
        }
    }
}

/// Which of a sender's destinations a receiver is behind: the driver's outlets, one per
/// destination (a group is one), numbered from 0. A receiver's reports come in at its outlet,
/// and the repairs it asks for go back there alone. 0 where the driver has one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Outlet(pub usize);

impl Outlet {
    /// Its bit in a set of outlets (outlets from 63 on share the last: a repair to one of
    /// them counts as on its way to all of them).
    pub fn bit(self) -> u64 {
        1 << self.0.min(63)
    }
}

/// Where a receiver is, as the sender estimates it (RTCP round trips, its pacer's queue), and
/// which of its destinations it is behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Path {
    /// How long a repair sent now takes to reach the receiver: the pacer's queue ahead of it
    /// and half the round trip.
    pub to_receiver: Duration,
    /// The round-trip time to the receivers (the longest of a group's).
    pub rtt: Duration,
    /// The destination the receiver asked from, where its repairs go.
    pub outlet: Outlet,
    /// Its repairs go to every destination, not to `outlet` alone: one on its way is on its
    /// way to all of them.
    pub everywhere: bool,
}

/// What the repairer did, packets (NACKs for the last two).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct RepairCounters {
    /// Sequence numbers receivers asked for (within `max_per_nack` of each NACK).
    pub asked: u64,
    /// Retransmissions sent.
    pub sent: u64,
    /// Asked for but no longer of use: they could not reach the viewer before the deadline.
    pub too_late: u64,
    /// Asked for but no longer (or never) in the history.
    pub unknown: u64,
    /// Asked for in time but beyond the repair budget.
    pub over_budget: u64,
    /// Asked for again from a destination a repair of them is still on its way to (within a
    /// round trip).
    pub duplicate: u64,
    /// NACKs longer than `max_per_nack` (their rest ignored).
    pub truncated_nacks: u64,
    /// NACKs about another SSRC than this stream's (ignored).
    pub foreign_nacks: u64,
}

/// A stream's retransmission sender; see the module's documentation.
#[derive(Debug)]
pub struct Repairer {
    cfg: RepairConfig,
    media_ssrc: Ssrc,
    history: SendHistory,
    next_sequence: SeqNo,
    rate_bps: u64,
    /// Repair bytes the budget holds now, and when it was last filled.
    tokens: f64,
    filled: Option<Timestamp>,
    counters: RepairCounters,
    scratch: Vec<u8>,
}

impl Repairer {
    /// The repairer of the stream `media_ssrc` sending at `rate_bps`, keeping `history`.
    pub fn new(
        cfg: RepairConfig,
        media_ssrc: Ssrc,
        history: SendHistory,
        rate_bps: u64,
    ) -> Repairer {
        Repairer {
            next_sequence: cfg.initial_sequence,
            tokens: cfg.burst_bytes as f64,
            cfg,
            media_ssrc,
            scratch: vec![0; history.max_packet() + metronome_wire::rtx::OSN_LEN],
            history,
            rate_bps,
            filled: None,
            counters: RepairCounters::default(),
        }
    }

    /// What it did so far.
    pub fn counters(&self) -> RepairCounters {
        self.counters
    }

    /// The stream's rate now, bit/s (its admitted rate, or its congestion controller's target
    /// if lower): the budget is a share of it.
    pub fn set_rate(&mut self, rate_bps: u64) {
        self.rate_bps = rate_bps;
    }

    /// Numbers one NACK is answered for at most.
    pub fn max_per_nack(&self) -> usize {
        self.cfg.max_per_nack
    }

    /// Whether a repair of `seq` left within the last round trip (`rtt`, at least the repeat
    /// guard) at `now`, to any outlet: one is on its way (to a group: what it is told).
    pub fn on_its_way(&self, seq: SeqNo, now: Timestamp, rtt: Duration) -> bool {
        let guard = rtt.max(self.cfg.min_repeat_guard);
        self.history
            .get(seq)
            .and_then(|k| k.repaired)
            .is_some_and(|t| now.saturating_since(t) < guard)
    }

    /// Keeps a packet the stream sent, for `deadline` (its frame's play-out deadline).
    pub fn sent(&mut self, sequence: SeqNo, packet: &[u8], deadline: Timestamp) {
        self.history.keep(sequence, packet, deadline);
    }

    fn fill(&mut self, now: Timestamp) {
        let since = self
            .filled
            .map_or(Duration::ZERO, |t| now.saturating_since(t));
        // A share that is not a number pays for nothing (NaN would refill the bucket at once).
        let share = self.cfg.budget_share;
        let share = if share.is_finite() {
            share.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let per_s = self.rate_bps as f64 * share / 8.0;
        self.tokens = (self.tokens + per_s * since.as_secs_f64()).min(self.cfg.burst_bytes as f64);
        self.filled = Some(now);
    }

    /// Answers a NACK from a receiver about `media_ssrc` asking for `sequences`, at `now`. A
    /// repair takes `path.to_receiver` to reach the receiver (the pacer's queue and half the
    /// round trip): it is sent only if it arrives before the packet's deadline, and only if
    /// none went to `path.outlet` within the last round trip. Each
    /// retransmission is handed to `emit` with the latest time it may leave and still make
    /// it, to be paced with the stream; `emit` says whether
    /// it took it (a retransmission it has no room for is not made: no budget spent, no
    /// sequence number taken, the packet not marked repaired, the rest of the NACK not read).
    pub fn on_nack(
        &mut self,
        media_ssrc: Ssrc,
        sequences: impl IntoIterator<Item = SeqNo>,
        now: Timestamp,
        path: Path,
        emit: &mut dyn FnMut(&[u8], Timestamp) -> bool,
    ) {
        if media_ssrc != self.media_ssrc {
            self.counters.foreign_nacks += 1;
            return;
        }
        self.fill(now);
        let mut sequences = sequences.into_iter();
        for seq in sequences.by_ref().take(self.cfg.max_per_nack) {
            self.counters.asked += 1;
            if !self.answer(seq, now, path, emit) {
                return;
            }
        }
        if sequences.next().is_some() {
            self.counters.truncated_nacks += 1;
        }
    }

    /// Answers one number; `false` when `emit` had no room (nothing more can be sent now).
    fn answer(
        &mut self,
        seq: SeqNo,
        now: Timestamp,
        path: Path,
        emit: &mut dyn FnMut(&[u8], Timestamp) -> bool,
    ) -> bool {
        let Some(kept) = self.history.get(seq) else {
            self.counters.unknown += 1;
            return true;
        };
        if now + path.to_receiver > kept.deadline {
            self.counters.too_late += 1;
            return true;
        }
        let guard = path.rtt.max(self.cfg.min_repeat_guard);
        // The outlets a repair of it is still on its way to, since the first of them left.
        let (since, on_way) = match kept.repaired {
            Some(t) if now.saturating_since(t) < guard => (t, kept.repaired_to),
            _ => (now, 0),
        };
        if on_way & path.outlet.bit() != 0 {
            self.counters.duplicate += 1;
            return true;
        }
        let reach = if path.everywhere {
            u64::MAX
        } else {
            path.outlet.bit()
        };
        let n = match wrap(
            kept.packet,
            self.cfg.rtx,
            self.next_sequence,
            &mut self.scratch,
        ) {
            Ok(n) => n,
            Err(_) => {
                // Kept packets are ones this stream wrote; one that does not parse is unknown.
                self.counters.unknown += 1;
                return true;
            }
        };
        if self.tokens < n as f64 {
            self.counters.over_budget += 1;
            return true;
        }
        let latest = kept.deadline.checked_sub(path.to_receiver).unwrap_or(now);
        if !emit(&self.scratch[..n], latest) {
            return false;
        }
        self.tokens -= n as f64;
        self.next_sequence = self.next_sequence.next();
        // Its window stays the first repair's: another destination asking within it gets
        // its own repair without holding off this one's next (which may then come early).
        self.history.mark_repaired(seq, since, on_way | reach);
        self.counters.sent += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_wire::rtp::{write_packet, RtpHeader, RtpView, SendTimeExt};
    use metronome_wire::PayloadType;

    const SSRC: Ssrc = Ssrc(0xABCD);
    const RTX: StreamIds = StreamIds {
        ssrc: Ssrc(0x1234),
        payload_type: PayloadType(97),
    };

    fn at(ms: u64) -> Timestamp {
        Timestamp::ZERO + Duration::from_millis(ms)
    }

    /// A repairer that sent packets 0..10 at 1 Mbit/s, each due at 1 s.
    fn repairer(share: f64) -> Repairer {
        let mut r = Repairer::new(
            RepairConfig::new(RTX, SeqNo(500), share),
            SSRC,
            SendHistory::new(64, 1500),
            1_000_000,
        );
        let mut buf = [0u8; 1500];
        for seq in 0..10u16 {
            let hdr = RtpHeader {
                payload_type: PayloadType(33),
                sequence: SeqNo(seq),
                timestamp: metronome_time::RtpTime(0),
                ssrc: SSRC,
                marker: false,
            };
            let n = write_packet(&mut buf, &hdr, SendTimeExt::None, &[seq as u8; 1000]).unwrap();
            r.sent(SeqNo(seq), &buf[..n], at(1000));
        }
        r
    }

    /// A path of `path_ms` to the receiver and a 20 ms round trip.
    fn answer(r: &mut Repairer, seqs: &[u16], now: Timestamp, path_ms: u64) -> Vec<(u16, u16)> {
        let mut out = Vec::new();
        let mut emit = |p: &[u8], _: Timestamp| {
            let v = RtpView::parse(p).unwrap();
            assert_eq!((v.ssrc(), v.payload_type()), (RTX.ssrc, RTX.payload_type));
            let osn = u16::from_be_bytes([v.payload()[0], v.payload()[1]]);
            out.push((v.sequence().get(), osn));
            true
        };
        let path = Path {
            to_receiver: Duration::from_millis(path_ms),
            rtt: Duration::from_millis(20),
            outlet: Outlet(0),
            everywhere: false,
        };
        r.on_nack(SSRC, seqs.iter().copied().map(SeqNo), now, path, &mut emit);
        out
    }

    #[test]
    fn it_repairs_what_can_make_its_deadline_and_nothing_else() {
        let mut r = repairer(1.0);
        // 3 and 4 can arrive by 1 s (at 10 + 20 ms); 77 was never sent.
        assert_eq!(
            answer(&mut r, &[3, 4, 77], at(10), 20),
            vec![(500, 3), (501, 4)]
        );
        // At 990 ms a 20 ms path arrives after the deadline.
        assert_eq!(answer(&mut r, &[5], at(990), 20), vec![]);
        let c = r.counters();
        assert_eq!((c.asked, c.sent, c.unknown, c.too_late), (4, 2, 1, 1));
    }

    #[test]
    fn many_receivers_asking_for_one_packet_cause_one_repair() {
        let mut r = repairer(1.0);
        let mut sent = 0;
        // Their NACKs come within a round trip (20 ms) of the first.
        for receiver in 0..45u64 {
            sent += answer(&mut r, &[6], at(10 + receiver * 2 / 5), 5).len();
        }
        assert_eq!((sent, r.counters().duplicate), (1, 44));
        // A round trip after the repair, a receiver still missing it (the repair was lost)
        // gets another.
        assert_eq!(answer(&mut r, &[6], at(29), 5).len(), 0);
        assert_eq!(answer(&mut r, &[6], at(30), 5).len(), 1);
    }

    #[test]
    fn repairs_stay_within_the_budget() {
        // A full bucket (64 × 1500 bytes) pays for all ten at once.
        let mut r = repairer(0.05);
        assert_eq!(
            answer(&mut r, &(0..10).collect::<Vec<_>>(), at(0), 1).len(),
            10
        );
        // A 2 100-byte bucket pays for two repairs of 1 014 bytes (12 + 2 + 1 000), 72 left.
        let mut r = repairer(0.05);
        r.cfg.burst_bytes = 2_100;
        r.tokens = 2_100.0;
        assert_eq!(answer(&mut r, &[0, 1, 2, 3], at(0), 1).len(), 2);
        assert_eq!(r.counters().over_budget, 2);
        // 5 % of 1 Mbit/s is 6 250 bytes/s: 40 ms later 322 bytes, not a repair's worth;
        // 200 ms after the start 1 322, one repair.
        assert_eq!(answer(&mut r, &[2], at(40), 1).len(), 0);
        assert_eq!(answer(&mut r, &[2, 3], at(200), 1).len(), 1);
        assert_eq!(r.counters().over_budget, 4);
    }

    #[test]
    fn a_share_that_is_not_a_number_pays_for_nothing() {
        let mut r = repairer(f64::NAN);
        r.cfg.burst_bytes = 2_100;
        r.tokens = 0.0;
        assert_eq!(answer(&mut r, &[1], at(500), 1).len(), 0);
        assert_eq!(r.counters().over_budget, 1);
    }

    #[test]
    fn a_hostile_nack_is_bounded_and_a_foreign_one_ignored() {
        let mut r = repairer(1.0);
        let storm = (0..=u16::MAX).cycle().take(1_000_000);
        let sent = answer(&mut r, &storm.collect::<Vec<_>>(), at(1), 1).len();
        let c = r.counters();
        assert_eq!((c.asked, c.truncated_nacks), (64, 1));
        assert_eq!(sent, 10);
        let mut emit =
            |_: &[u8], _: Timestamp| -> bool { panic!("nothing is sent for another SSRC") };
        let path = Path {
            to_receiver: Duration::ZERO,
            rtt: Duration::ZERO,
            outlet: Outlet(0),
            everywhere: false,
        };
        r.on_nack(
            Ssrc(SSRC.get() + 1),
            [1, 2, 3].map(SeqNo),
            at(2),
            path,
            &mut emit,
        );
        assert_eq!(r.counters().foreign_nacks, 1);
    }

    #[test]
    fn a_repair_the_driver_has_no_room_for_costs_nothing_and_can_be_asked_again() {
        let mut r = repairer(1.0);
        let path = Path {
            to_receiver: Duration::ZERO,
            rtt: Duration::from_millis(20),
            outlet: Outlet(0),
            everywhere: false,
        };
        let mut refuse = |_: &[u8], _: Timestamp| false;
        r.on_nack(SSRC, [3, 4].map(SeqNo), at(10), path, &mut refuse);
        assert_eq!((r.counters().asked, r.counters().sent), (1, 0));
        // At once again, with room: not a duplicate, and numbered from the first.
        assert_eq!(answer(&mut r, &[3], at(11), 0), vec![(500, 3)]);
    }
}
