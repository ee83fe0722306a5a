//! The receiver's loss history and loss event rate (RFC 5348 §5).
//!
//! - A packet is **lost** once [`NDUPACK`] packets with higher sequence numbers have arrived
//!   and it has not (§5.1); a late packet before that is only reordered.
//! - Losses whose (interpolated) send times lie within one round-trip time of the first loss
//!   of a **loss event** belong to it (§5.2): a loss event is what makes TCP halve its window
//!   once.
//! - A **loss interval** runs from the first lost packet of one loss event to the packet before
//!   the first lost packet of the next (§5.3); the open interval `I_0` runs to the highest
//!   sequence number received.
//! - The **average loss interval** weighs the last [`N`] intervals 1, 1, 1, 1, 0.8, 0.6, 0.4,
//!   0.2, with and without the open one, and takes the larger (§5.4); the loss event rate is
//!   its inverse.
//! - The first loss event has no interval before it: the receiver makes one from the rate it
//!   was receiving, the interval at which the equation would allow that rate (§6.3.1).
//!
//! History discounting (§5.5) is not done: it is optional, and without it the rate recovers
//! from an old loss event as the plain average lets it.

use super::equation::loss_rate_for;
use metronome_time::Timestamp;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Later packets that make a missing one lost (RFC 5348 §5.1).
pub const NDUPACK: usize = 3;
/// Loss intervals averaged (RFC 5348 §5.4).
pub const N: usize = 8;
/// Their weights, the most recent first.
pub const WEIGHTS: [f64; N] = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];
/// A gap longer than this (a sender restarted, a wild sequence number) is one loss, not one per
/// missing packet: the work per packet stays bounded whatever arrives.
const MAX_GAP: u64 = 10_000;

/// What the receiver knows of losses, packet by packet.
#[derive(Clone, Debug, Default)]
pub struct LossHistory {
    /// Every packet up to this sequence number is decided (received or lost).
    settled: Option<u64>,
    /// The send time of `settled` (when it was received), for interpolation.
    settled_sent: Option<Timestamp>,
    /// Packets received above `settled`, with their send times.
    held: BTreeMap<u64, Timestamp>,
    highest: Option<u64>,
    /// The first lost packet of the most recent loss event, and its send time.
    event: Option<(u64, Timestamp)>,
    /// Closed loss intervals, the most recent first, at most `N`.
    intervals: VecDeque<u64>,
    /// The rate the receiver was receiving (bytes/s) and the packet size, for the first loss
    /// interval.
    receive_rate: Option<(f64, f64)>,
    /// Loss events so far.
    events: u64,
    lost: u64,
}

impl LossHistory {
    /// An empty history: no packet seen, no loss event, loss event rate 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The rate being received, bytes/s, of packets of `s` bytes: what the first loss interval
    /// is made from (RFC 5348 §6.3.1). Call it as the rate is measured.
    pub fn set_receive_rate(&mut self, bytes_per_s: f64, s: f64) {
        self.receive_rate = Some((bytes_per_s, s));
    }

    /// Packet `seq` (extended, no wrap), sent at `sent` (the sender's clock, as its RTP
    /// timestamp says), arrived. `rtt` is the round-trip time the sender told (loss events
    /// are grouped by it). Duplicates and packets already decided are ignored.
    pub fn on_packet(&mut self, seq: u64, sent: Timestamp, rtt: Duration) {
        if self.settled.is_some_and(|s| seq <= s) {
            return;
        }
        if self.settled.is_none() {
            // The first packet: everything before it is not ours to judge.
            self.settled = Some(seq);
            self.settled_sent = Some(sent);
            self.highest = Some(seq);
            return;
        }
        self.held.insert(seq, sent);
        self.highest = self.highest.max(Some(seq));
        self.settle(rtt);
    }

    /// Decides what can be decided: received packets in order, and a missing one once
    /// `NDUPACK` later packets are held (or memory is full).
    fn settle(&mut self, rtt: Duration) {
        while let (Some(s), Some(&first)) = (self.settled, self.held.keys().next()) {
            if first == s + 1 {
                let sent = self.held.remove(&first);
                self.settled = Some(first);
                self.settled_sent = sent;
                continue;
            }
            if self.held.len() < NDUPACK {
                return;
            }
            if first - s > MAX_GAP {
                // One loss for the whole gap, then on from just before `first`.
                let sent = self.held.get(&first).copied().unwrap_or(Timestamp::ZERO);
                self.on_loss(s + 1, sent, rtt);
                self.settled = Some(first - 1);
                self.settled_sent = Some(sent);
                continue;
            }
            // `s + 1` is lost: its send time between its neighbours', by sequence number.
            let lost = s + 1;
            let (before, after) = (self.settled_sent, self.held.get(&first).copied());
            let sent = match (before, after) {
                (Some(b), Some(a)) if a >= b => {
                    let span = (first - s) as u128;
                    let t = b.as_nanos() as u128 + (a.as_nanos() - b.as_nanos()) as u128 / span;
                    Timestamp::from_nanos(t as u64)
                }
                (Some(b), _) => b,
                (None, Some(a)) => a,
                (None, None) => Timestamp::ZERO,
            };
            self.on_loss(lost, sent, rtt);
            self.settled = Some(lost);
            self.settled_sent = Some(sent);
        }
    }

    fn on_loss(&mut self, seq: u64, sent: Timestamp, rtt: Duration) {
        self.lost += 1;
        match self.event {
            // Within one RTT of the event's first loss: the same loss event.
            Some((_, start)) if sent.as_nanos() <= start.as_nanos() + rtt.as_nanos() as u64 => {}
            Some((first, _)) => {
                self.close_interval(seq - first);
                self.event = Some((seq, sent));
                self.events += 1;
            }
            None => {
                // The first loss event: an interval before it from the rate being received,
                // or (not known) the packets received so far.
                let made = self.receive_rate.map(|(x, s)| {
                    let p = loss_rate_for(s, rtt, x);
                    (1.0 / p).round().max(1.0) as u64
                });
                self.close_interval(made.unwrap_or(seq.max(1)));
                self.event = Some((seq, sent));
                self.events += 1;
            }
        }
    }

    fn close_interval(&mut self, packets: u64) {
        self.intervals.push_front(packets.max(1));
        self.intervals.truncate(N);
    }

    /// The interval made before the first loss event, while the history still holds it
    /// (until the `N`th loss event after it).
    pub fn first_interval(&self) -> Option<u64> {
        let i = (self.events as usize).checked_sub(1)?;
        self.intervals.get(i).copied()
    }

    /// Replaces the interval made before the first loss event (RFC 4654 §5.6 makes it its
    /// own way, and corrects it once the receiver has an RTT); `false`, and nothing changed,
    /// once the history no longer holds it.
    pub fn set_first_interval(&mut self, packets: u64) -> bool {
        let Some(i) = (self.events as usize).checked_sub(1) else {
            return false;
        };
        match self.intervals.get_mut(i) {
            Some(v) => {
                *v = packets.max(1);
                true
            }
            None => false,
        }
    }

    /// Loss events seen, and packets counted lost.
    pub fn counts(&self) -> (u64, u64) {
        (self.events, self.lost)
    }

    /// The open interval `I_0`: packets from the last loss event's first to the highest
    /// received.
    pub fn open_interval(&self) -> Option<u64> {
        let (first, _) = self.event?;
        Some(self.highest?.saturating_sub(first) + 1)
    }

    /// The closed intervals, the most recent first.
    pub fn intervals(&self) -> impl Iterator<Item = u64> + '_ {
        self.intervals.iter().copied()
    }

    /// The loss event rate `p` (RFC 5348 §5.4): 0 before any loss event.
    pub fn loss_event_rate(&self) -> f64 {
        let Some(i0) = self.open_interval() else {
            return 0.0;
        };
        average_loss_interval(i0, self.intervals.iter().copied()).map_or(0.0, |m| 1.0 / m)
    }
}

/// The average loss interval of the open interval `i0` and the closed ones, the most recent
/// first (RFC 5348 §5.4): the larger of the weighted means of `I_0 .. I_(k-1)` and of
/// `I_1 .. I_k`, k the number of closed intervals kept (at most n = 8). `None` without a
/// closed interval.
pub fn average_loss_interval(i0: u64, closed: impl Iterator<Item = u64>) -> Option<f64> {
    // At most N intervals, on the stack: TFMCC's receiver asks on every packet.
    let mut kept = [0u64; N];
    let mut n = 0;
    for (slot, v) in kept.iter_mut().zip(closed) {
        *slot = v;
        n += 1;
    }
    let closed = &kept[..n];
    if closed.is_empty() {
        return None;
    }
    let with_open = std::iter::once(i0).chain(closed.iter().copied()).take(n);
    let (mut tot0, mut w0) = (0.0, 0.0);
    for (i, v) in with_open.enumerate() {
        tot0 += v as f64 * WEIGHTS[i];
        w0 += WEIGHTS[i];
    }
    let (mut tot1, mut w1) = (0.0, 0.0);
    for (i, v) in closed.iter().enumerate() {
        tot1 += *v as f64 * WEIGHTS[i];
        w1 += WEIGHTS[i];
    }
    Some((tot0 / w0).max(tot1 / w1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tfrc::equation::throughput_bytes_per_s;

    const RTT: Duration = Duration::from_millis(100);

    /// Packets 0.. sent every 10 ms, all arriving but `lost`.
    fn run(h: &mut LossHistory, upto: u64, lost: &[u64]) {
        for seq in 0..upto {
            if !lost.contains(&seq) {
                h.on_packet(seq, Timestamp::from_millis(seq * 10), RTT);
            }
        }
    }

    #[test]
    fn the_weighted_average_with_and_without_the_open_interval() {
        // I_0 = 300 (long since the last loss): 840 / 6 = 140 with it, 640 / 6 without.
        let closed = [50, 200, 100, 80, 120, 60, 150, 90];
        assert_eq!(average_loss_interval(300, closed.into_iter()), Some(140.0));
        // I_0 = 10 (a loss just now): the open interval does not drag the mean down.
        let m = average_loss_interval(10, closed.into_iter()).unwrap();
        assert!((m - 640.0 / 6.0).abs() < 1e-9, "{m}");
        // Fewer than N intervals: k closed ones, I_0 .. I_(k-1) against I_1 .. I_k (RFC 5348
        // §5.4), so with one closed interval the larger of I_0 and I_1.
        assert_eq!(average_loss_interval(30, [10].into_iter()), Some(30.0));
        assert_eq!(average_loss_interval(5, [10].into_iter()), Some(10.0));
        let m = average_loss_interval(30, [10, 20, 60].into_iter()).unwrap();
        assert!((m - 30.0).abs() < 1e-9, "{m}");
        assert_eq!(average_loss_interval(30, std::iter::empty()), None);
    }

    #[test]
    fn a_missing_packet_is_lost_after_three_later_ones_and_reordering_is_not_loss() {
        let mut h = LossHistory::new();
        for seq in [0, 1, 3, 4] {
            h.on_packet(seq, Timestamp::from_millis(seq * 10), RTT);
        }
        assert_eq!(h.counts(), (0, 0), "two later packets: not yet lost");
        h.on_packet(2, Timestamp::from_millis(20), RTT);
        h.on_packet(5, Timestamp::from_millis(50), RTT);
        h.on_packet(6, Timestamp::from_millis(60), RTT);
        assert_eq!(h.counts(), (0, 0), "2 came late: reordered");
        for seq in [8, 9, 10] {
            h.on_packet(seq, Timestamp::from_millis(seq * 10), RTT);
        }
        assert_eq!(h.counts(), (1, 1), "7 is lost");
        assert_eq!(h.open_interval(), Some(4), "7 to 10");
    }

    #[test]
    fn losses_within_one_rtt_are_one_loss_event_and_intervals_run_between_events() {
        let mut h = LossHistory::new();
        // Losses at 100, 105 (50 ms later: the same event), 300, 500.
        run(&mut h, 700, &[100, 105, 300, 500]);
        assert_eq!(h.counts(), (3, 4));
        // The first event's interval before it is the packets before it (no rate given).
        assert_eq!(h.intervals().collect::<Vec<_>>(), vec![200, 200, 100]);
        assert_eq!(h.open_interval(), Some(200));
        let p = h.loss_event_rate();
        // Three closed intervals (RFC 5348 §5.4, k = 3): with I_0 (200, 200, 200) / 3 = 200;
        // without (200, 200, 100) / 3.
        assert!((p - 1.0 / 200.0).abs() < 1e-12, "{p}");
    }

    #[test]
    fn the_first_interval_comes_from_the_rate_being_received() {
        let mut h = LossHistory::new();
        // 1000-byte packets at 1 Mbit/s: the equation allows that at p = loss_rate_for(...).
        let x = 125_000.0;
        h.set_receive_rate(x, 1000.0);
        run(&mut h, 60, &[50]);
        let p = h.loss_event_rate();
        let allowed = throughput_bytes_per_s(1000.0, RTT, p);
        assert!((allowed / x - 1.0).abs() < 0.02, "{p}: {allowed}");
        assert_eq!(
            LossHistory::new().loss_event_rate(),
            0.0,
            "no loss, no rate"
        );
    }

    #[test]
    fn work_and_memory_are_bounded_whatever_arrives() {
        let mut h = LossHistory::new();
        h.on_packet(0, Timestamp::ZERO, RTT);
        // A gap of 2^40 packets is one loss, not a loop of 2^40 steps.
        for seq in (1u64 << 40)..(1u64 << 40) + 100 {
            h.on_packet(seq, Timestamp::from_millis(seq % 1000), RTT);
        }
        assert_eq!(h.counts(), (1, 1));
        assert!(h.held.len() < NDUPACK);
        // Many loss events: only the last N intervals are kept (the open one, 40, is shorter
        // than theirs and does not count).
        let lost: Vec<u64> = (1..100).map(|k| k * 50).collect();
        let mut h = LossHistory::new();
        run(&mut h, 4_990, &lost);
        assert_eq!(h.intervals.len(), N);
        assert!((h.loss_event_rate() - 1.0 / 50.0).abs() < 1e-12);
    }
}
