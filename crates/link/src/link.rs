//! A sans-IO link: one direction, one bottleneck, in virtual or real time.
//!
//! A packet handed to [`Link::send`] goes through, in order:
//!
//! 1. **loss**, decided per packet by the [`LossModel`](crate::LossModel). As in netem
//!    (`netem_enqueue()` in Linux `sch_netem.c` decides loss before the queue), a lost packet takes
//!    no room in the queue and no time on the wire.
//! 2. **netem's limit** (`netem_limit`): dropped if the link already holds that many packets,
//!    counting every one accepted and not yet delivered (`sch->q.qlen >= sch->limit` in
//!    `netem_enqueue()`).
//! 3. **drop-tail queue**: with a rate and a `queue_limit_bytes`, the packet is dropped if the bytes
//!    accepted but not yet fully serialized, plus its own, would exceed the limit (the arriving
//!    packet is the one dropped, as in ns-2's `DropTail`, `queue/drop-tail.cc`). Unlike ns-2, whose
//!    limit counts packets waiting behind the one on the wire, ours counts bytes and includes the
//!    packet being serialized until its last bit has left, so a limit of `L` holds `L / size`
//!    back-to-back packets of equal size. `queue_limit_packets` counts the same packets.
//! 4. **serialization**: `departure = max(now, previous departure) + size·8 / rate`, one packet
//!    after another; the queue feeds the wire only when it is free (ns-2 `LinkDelay::recv()`,
//!    `link/delay.cc`: the transmission time is `8·size / bandwidth_`, after which the queue resumes).
//! 5. **propagation**: `arrival = departure + delay + U[0, jitter]` (ns-2 schedules the receive at
//!    `txtime + delay_`), then raised to the previous in-order arrival, so jitter never reorders.
//! 6. **reordering**: a packet picked with probability `reorder` gets `reorder_delay` on top and
//!    does not raise the floor for later packets, which may then overtake it.
//! 7. **duplication**: with probability `duplicate` a copy arrives right after the original. The copy
//!    is made past the bottleneck (as when a link-layer ACK is lost), so it costs no queue room or
//!    wire time; netem instead puts the copy through the qdisc again.
//!
//! ## Randomness
//!
//! Every `send` draws the same five numbers from a `ChaCha8Rng` seeded with the link's seed,
//! whatever the configuration and whatever happens to the packet. Packet `n` thus sees the same
//! variates in every run with that seed, so changing one impairment does not reshuffle another
//! (common random numbers): turning on duplication leaves the loss pattern as it was.

use crate::config::{JitterModel, LinkConfig};
use crate::delivery::TraceCursor;
use crate::event::EventQueue;
use crate::jitter;
use crate::loss::LossProcess;
use crate::schedule::LinkSchedule;
use metronome_time::Timestamp;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

/// What became of a packet handed to [`Link::send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// Accepted: it will come out of [`Link::poll_deliver`] (twice if duplicated).
    Queued,
    /// Dropped at the tail of a full queue.
    DroppedQueueFull,
    /// Lost by the loss model.
    Lost,
}

/// Counters since the link was made. Once nothing is in flight,
/// `delivered + lost + dropped_queue == sent + duplicated`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets handed to `send`.
    pub sent: u64,
    /// Bytes of the packets handed to `send` (the sizes given, whatever became of them).
    pub bytes_sent: u64,
    /// Packets handed out by `poll_deliver`, duplicates included.
    pub delivered: u64,
    /// Bytes of the packets counted in `delivered`.
    pub bytes_delivered: u64,
    /// Packets the loss model discarded ([`SendOutcome::Lost`]).
    pub lost: u64,
    /// Packets refused with [`SendOutcome::DroppedQueueFull`]: by `netem_limit`, a byte or
    /// packet queue limit, or a token bucket smaller than the packet.
    pub dropped_queue: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Packets given the reorder delay (whether or not a later packet then overtook them).
    pub reordered: u64,
    /// Longest wait of an accepted packet before its serialization started (zero on an idle link).
    pub max_queue_delay: Duration,
}

/// One direction of a link carrying payloads of type `T` (see the module docs for the model).
#[derive(Clone, Debug)]
pub struct Link<T> {
    cfg: LinkConfig,
    rng: ChaCha8Rng,
    loss: LossProcess,
    /// When the last accepted packet's last bit leaves.
    busy_until: Timestamp,
    /// `bits·10⁹ mod rate` left over by the previous packet, carried so that a busy period takes
    /// exactly `total bits / rate` despite nanosecond resolution.
    carry: u64,
    /// Token bucket (`burst_bytes`): tokens, in bit·10⁹ (so that accrual, `rate · ns`, is exact),
    /// as of `busy_until`.
    tokens: u128,
    /// Accepted packets not yet fully serialized, as (departure, size), earliest first.
    on_queue: VecDeque<(Timestamp, usize)>,
    queued_bytes: usize,
    /// Arrival of the last packet not picked for reordering: no later packet arrives before it.
    last_in_order: Timestamp,
    in_flight: EventQueue<(usize, T)>,
    /// Arrival times of the packets accepted and not yet arrived (for `netem_limit`).
    held: BinaryHeap<Reverse<Timestamp>>,
    stats: LinkStats,
    /// How the configuration changes over time, and when it next does.
    schedule: Option<LinkSchedule>,
    next_change: Option<Timestamp>,
    /// Where a delivery-trace link is in its trace.
    cursor: TraceCursor,
}

impl<T> Link<T> {
    /// A link with configuration `cfg` whose randomness comes from `seed` alone.
    pub fn new(cfg: LinkConfig, seed: u64) -> Self {
        let tokens = full_bucket(&cfg);
        Link {
            loss: LossProcess::new(cfg.loss),
            cfg,
            rng: ChaCha8Rng::seed_from_u64(seed),
            busy_until: Timestamp::ZERO,
            carry: 0,
            tokens,
            on_queue: VecDeque::new(),
            queued_bytes: 0,
            last_in_order: Timestamp::ZERO,
            in_flight: EventQueue::new(),
            held: BinaryHeap::new(),
            stats: LinkStats::default(),
            schedule: None,
            next_change: None,
            cursor: TraceCursor::default(),
        }
    }

    /// A link that follows `schedule` (see [`crate::schedule`]): it starts with the first
    /// step's configuration and puts each next one in force itself, at its time.
    pub fn with_schedule(schedule: LinkSchedule, seed: u64) -> Self {
        let (first, next) = schedule.at(Timestamp::ZERO);
        let mut link = Link::new(first.clone(), seed);
        link.next_change = next;
        link.schedule = Some(schedule);
        link
    }

    /// Puts in force the scheduled configuration of `now`, if it changed.
    fn follow_schedule(&mut self, now: Timestamp) {
        if self.next_change.is_none_or(|t| now < t) {
            return;
        }
        let Some(s) = self.schedule.take() else {
            return;
        };
        let (cfg, next) = s.at(now);
        let cfg = cfg.clone();
        self.next_change = next;
        self.schedule = Some(s);
        self.set_config(cfg);
    }

    /// The configuration in force now (the latest scheduled step or [`Link::set_config`]).
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Changes the configuration for packets sent from now on (a bandwidth trace, a handover).
    /// Packets already accepted keep their times. The Gilbert-Elliott state is kept unless the loss
    /// model changes.
    pub fn set_config(&mut self, cfg: LinkConfig) {
        if cfg.loss != self.cfg.loss {
            self.loss = LossProcess::new(cfg.loss);
        }
        if cfg.rate_bps != self.cfg.rate_bps {
            self.carry = 0;
        }
        self.cfg = cfg;
    }

    /// When the next packet arrives, if any is in flight: when the driver should call
    /// [`poll_deliver`](Self::poll_deliver).
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.in_flight.peek_time()
    }

    /// The next packet whose arrival is at or before `now`, with its arrival time. Packets come out
    /// in arrival order; packets arriving at the same instant come out in the order they were sent.
    pub fn poll_deliver(&mut self, now: Timestamp) -> Option<(Timestamp, T)> {
        let (at, (size, item)) = self.in_flight.pop_due(now)?;
        self.stats.delivered += 1;
        self.stats.bytes_delivered += size as u64;
        Some((at, item))
    }

    /// How long a packet sent at `now` would wait before its serialization starts.
    pub fn queue_delay(&self, now: Timestamp) -> Duration {
        self.busy_until.saturating_since(now)
    }

    /// Packets (and copies) accepted but not yet delivered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The counters since the link was made.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }
}

impl<T: Clone> Link<T> {
    /// Offers a packet of `size_bytes` to the link at `now`. `T` is cloned only for duplicates.
    pub fn send(&mut self, now: Timestamp, size_bytes: usize, item: T) -> SendOutcome {
        self.follow_schedule(now);
        self.stats.sent += 1;
        self.stats.bytes_sent += size_bytes as u64;
        let draws = Draws::draw(&mut self.rng);
        if self.loss.is_lost(draws.transition, draws.loss) {
            self.stats.lost += 1;
            return SendOutcome::Lost;
        }
        if let Some(limit) = self.cfg.netem_limit {
            while self.held.peek().is_some_and(|Reverse(t)| *t <= now) {
                self.held.pop();
            }
            if self.held.len() >= limit {
                self.stats.dropped_queue += 1;
                return SendOutcome::DroppedQueueFull;
            }
        }
        let Some(departure) = self.serialize(now, size_bytes) else {
            self.stats.dropped_queue += 1;
            return SendOutcome::DroppedQueueFull;
        };
        let arrival = self.arrival(departure, &draws);
        if self.cfg.netem_limit.is_some() {
            self.held.push(Reverse(arrival));
        }
        if draws.duplicate < self.cfg.duplicate {
            self.stats.duplicated += 1;
            let copy = item.clone();
            self.in_flight.push(arrival, (size_bytes, item));
            self.in_flight.push(arrival, (size_bytes, copy));
        } else {
            self.in_flight.push(arrival, (size_bytes, item));
        }
        SendOutcome::Queued
    }
}

impl<T> Link<T> {
    /// Steps 2 and 3: the drop-tail queue and the serializer. `None` if the queue is full.
    fn serialize(&mut self, now: Timestamp, size: usize) -> Option<Timestamp> {
        let scheduled_rate = self
            .schedule
            .as_ref()
            .is_some_and(LinkSchedule::rate_changes);
        let limited = self.cfg.rate_bps.is_some() || self.cfg.delivery.is_some();
        if !limited && !scheduled_rate {
            return Some(now);
        }
        while let Some(&(departure, bytes)) = self.on_queue.front() {
            if departure > now {
                break;
            }
            self.on_queue.pop_front();
            self.queued_bytes -= bytes;
        }
        if let Some(limit) = self.cfg.queue_limit_bytes {
            if self.queued_bytes.saturating_add(size) > limit {
                return None;
            }
        }
        if let Some(limit) = self.cfg.queue_limit_packets {
            if self.on_queue.len() >= limit {
                return None;
            }
        }
        if let Some(trace) = self.cfg.delivery.clone() {
            let from = self.busy_until.max(now);
            let departure = trace.finish(&mut self.cursor, from, size);
            return Some(self.accept(now, from, departure, size));
        }
        if scheduled_rate {
            let from = self.busy_until.max(now);
            let schedule = self.schedule.as_ref().expect("checked above");
            let departure = schedule.finish(from, size);
            return Some(self.accept(now, from, departure, size));
        }
        let Some(rate) = self.cfg.rate_bps else {
            return Some(now);
        };
        if let Some(burst) = self.cfg.burst_bytes {
            if size > burst {
                // It would never find enough tokens: tbf drops it too.
                return None;
            }
            let departure = self.bucket(now, rate, burst, size);
            self.on_queue.push_back((departure, size));
            self.queued_bytes += size;
            let wait = departure.saturating_since(now);
            self.stats.max_queue_delay = self.stats.max_queue_delay.max(wait);
            return Some(departure);
        }
        let start = if self.busy_until < now {
            self.carry = 0; // the link went idle: no fraction of a nanosecond is owed
            now
        } else {
            self.busy_until
        };
        let departure = start + self.transmission_time(rate, size);
        self.busy_until = departure;
        self.on_queue.push_back((departure, size));
        self.queued_bytes += size;
        let wait = start.saturating_since(now);
        self.stats.max_queue_delay = self.stats.max_queue_delay.max(wait);
        Some(departure)
    }

    /// Queues a packet whose serialization starts at `from` and ends at `departure`.
    fn accept(
        &mut self,
        now: Timestamp,
        from: Timestamp,
        departure: Timestamp,
        size: usize,
    ) -> Timestamp {
        self.busy_until = departure;
        self.on_queue.push_back((departure, size));
        self.queued_bytes += size;
        let wait = from.saturating_since(now);
        self.stats.max_queue_delay = self.stats.max_queue_delay.max(wait);
        departure
    }

    /// The token bucket: when a packet of `size` bytes offered at `now` leaves, behind the
    /// packets before it, and takes its tokens. Exact in integers: tokens are bit·10⁹ and
    /// accrue `rate` per ns.
    fn bucket(&mut self, now: Timestamp, rate: u64, burst: usize, size: usize) -> Timestamp {
        let cap = burst as u128 * 8 * 1_000_000_000;
        let need = size as u128 * 8 * 1_000_000_000;
        let from = self.busy_until.max(now);
        let idle = from.saturating_since(self.busy_until).as_nanos();
        let mut tokens = (self.tokens + idle * rate as u128).min(cap);
        let mut departure = from;
        if tokens < need {
            if rate == 0 {
                return Timestamp::MAX;
            }
            let wait = (need - tokens).div_ceil(rate as u128);
            departure = from + Duration::from_nanos(u64::try_from(wait).unwrap_or(u64::MAX));
            tokens += wait * rate as u128;
        }
        self.tokens = tokens.min(cap).saturating_sub(need);
        self.busy_until = departure;
        departure
    }

    /// `size·8 / rate` seconds, in whole nanoseconds, carrying the remainder to the next packet.
    /// A zero rate never finishes (the time saturates at `Timestamp::MAX`).
    fn transmission_time(&mut self, rate: u64, size: usize) -> Duration {
        if rate == 0 {
            return Duration::from_nanos(u64::MAX);
        }
        let numer = size as u128 * 8 * 1_000_000_000 + self.carry as u128;
        // The remainder is below `rate`, a u64.
        self.carry = (numer % rate as u128) as u64;
        Duration::from_nanos(u64::try_from(numer / rate as u128).unwrap_or(u64::MAX))
    }

    /// Steps 4 and 5: propagation, order-preserving jitter, reordering.
    fn arrival(&mut self, departure: Timestamp, draws: &Draws) -> Timestamp {
        let jitter_ns = u64::try_from(self.cfg.jitter.as_nanos()).unwrap_or(u64::MAX);
        let (delay, keep_order) = match self.cfg.jitter_model {
            JitterModel::Uniform => {
                let j = Duration::from_nanos(uniform_inclusive(draws.jitter, jitter_ns));
                (self.cfg.delay + j, true)
            }
            model => {
                // The variate's top 53 bits, moved off 0 so that every quantile is finite.
                let u = ((draws.jitter >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                let d = self.cfg.delay.as_nanos() as f64 + jitter_ns as f64 * jitter::z(model, u);
                (Duration::from_nanos(d.max(0.0) as u64), !model.reorders())
            }
        };
        let floor = if keep_order {
            self.last_in_order
        } else {
            Timestamp::ZERO
        };
        let base = (departure + delay).max(floor);
        if draws.reorder < self.cfg.reorder {
            self.stats.reordered += 1;
            base + self.cfg.reorder_delay
        } else {
            self.last_in_order = base;
            base
        }
    }
}

/// A token bucket's tokens when full (tc-tbf starts full), in bit·10⁹.
fn full_bucket(cfg: &LinkConfig) -> u128 {
    cfg.burst_bytes.map_or(0, |b| b as u128 * 8 * 1_000_000_000)
}

/// The variates one packet consumes, always all of them, always in this order.
struct Draws {
    transition: f64,
    loss: f64,
    jitter: u64,
    reorder: f64,
    duplicate: f64,
}

impl Draws {
    fn draw(rng: &mut ChaCha8Rng) -> Self {
        Draws {
            transition: unit(rng.next_u64()),
            loss: unit(rng.next_u64()),
            jitter: rng.next_u64(),
            reorder: unit(rng.next_u64()),
            duplicate: unit(rng.next_u64()),
        }
    }
}

/// A uniform `f64` in `[0, 1)` from the top 53 bits.
fn unit(r: u64) -> f64 {
    (r >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// `r` mapped onto `0..=max` by multiply-shift (Lemire, "Fast Random Integer Generation in an
/// Interval", 2019, without its rejection step, so it always takes one draw; the bias is below
/// `(max + 1) / 2^64`).
fn uniform_inclusive(r: u64, max: u64) -> u64 {
    ((r as u128 * (max as u128 + 1)) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variate_helpers_cover_their_ranges() {
        assert_eq!(unit(0), 0.0);
        assert!(unit(u64::MAX) < 1.0);
        assert_eq!(uniform_inclusive(0, 10), 0);
        assert_eq!(uniform_inclusive(u64::MAX, 10), 10);
        assert_eq!(uniform_inclusive(u64::MAX, 0), 0);
        assert_eq!(uniform_inclusive(u64::MAX, u64::MAX), u64::MAX);
    }

    #[test]
    fn serialization_carries_the_fraction() {
        // 1 byte at 3 Gbit/s is 8/3 ns: back to back, the departures are 2, 5, 8 ns, and three
        // bytes take exactly 8 ns.
        let cfg = LinkConfig {
            rate_bps: Some(3_000_000_000),
            ..LinkConfig::default()
        };
        let mut link = Link::new(cfg, 1);
        for _ in 0..3 {
            assert_eq!(link.send(Timestamp::ZERO, 1, ()), SendOutcome::Queued);
        }
        let arrivals: Vec<_> = std::iter::from_fn(|| link.poll_deliver(Timestamp::MAX))
            .map(|(t, ())| t.as_nanos())
            .collect();
        assert_eq!(arrivals, [2, 5, 8]);
    }
}
