//! GCC's delay-based detector (draft-ietf-rmcat-gcc-02 §5): packets grouped by send time, the
//! variation of the groups' one-way delay, a Kalman filter's estimate of its trend, and an
//! over-use detector with an adaptive threshold.
//!
//! All of it works on differences: arrival times are on the receiver's clock (an unknown
//! offset from the sender's), send times on the sender's.

use metronome_time::Timestamp;
use std::time::Duration;

/// What the detector says of the path (§5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    /// The queue is growing: the sender sends more than the path carries.
    Overuse,
    /// The delay trend is within the threshold either way: the queue is steady.
    Normal,
    /// The queue is draining.
    Underuse,
}

/// The detector's constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DelayConfig {
    /// Packets sent within this time of a group's first packet belong to its group (§5.2:
    /// `burst_time`, 5 ms).
    pub burst: Duration,
    /// The Kalman filter's state noise `q` (§5.3: 10^-3), ms².
    pub state_noise: f64,
    /// `chi` of the measurement noise's forgetting factor (§5.3: in [0.1, 0.001]).
    pub chi: f64,
    /// The threshold's start, ms (§5.4: 12.5).
    pub threshold_initial_ms: f64,
    /// The lowest the adaptive threshold goes, ms (§5.4: 6).
    pub threshold_min_ms: f64,
    /// The highest the adaptive threshold goes, ms (§5.4: 600).
    pub threshold_max_ms: f64,
    /// How fast the threshold follows the estimate up, when the estimate's magnitude is above
    /// it (§5.4: `K_u` 0.01), per ms.
    pub k_up: f64,
    /// How fast the threshold follows the estimate down, when the estimate's magnitude is
    /// below it (§5.4: `K_d` 0.00018), per ms.
    pub k_down: f64,
    /// An over-use counts once the estimate has stayed above the threshold this long (§5.4:
    /// `overuse_time_th`, 10 ms).
    pub overuse_time: Duration,
    /// The estimate is compared with the threshold after scaling by the number of groups it
    /// has seen, up to this many (an assumption taken from libwebrtc's published detector:
    /// the filter's estimate is a per-group gradient, the draft's threshold is in ms).
    pub max_gain: f64,
}

impl Default for DelayConfig {
    fn default() -> Self {
        DelayConfig {
            burst: Duration::from_millis(5),
            state_noise: 1e-3,
            chi: 0.01,
            threshold_initial_ms: 12.5,
            threshold_min_ms: 6.0,
            threshold_max_ms: 600.0,
            k_up: 0.01,
            k_down: 0.00018,
            overuse_time: Duration::from_millis(10),
            max_gain: 60.0,
        }
    }
}

/// A group of packets sent together: its last packet's send and arrival times.
#[derive(Clone, Copy, Debug)]
struct Group {
    first_sent: Timestamp,
    last_sent: Timestamp,
    first_arrival: Timestamp,
    last_arrival: Timestamp,
}

impl Group {
    fn of(sent: Timestamp, arrived: Timestamp) -> Group {
        Group {
            first_sent: sent,
            last_sent: sent,
            first_arrival: arrived,
            last_arrival: arrived,
        }
    }
}

/// A burst merged by its arrivals spans at most this long (as libwebrtc bounds it).
const MAX_BURST: Duration = Duration::from_millis(100);

/// The detector, fed every packet that arrived, in send order.
#[derive(Clone, Debug)]
pub struct DelayDetector {
    cfg: DelayConfig,
    current: Option<Group>,
    previous: Option<Group>,
    /// The Kalman filter: the estimate `m` (ms per group), its variance `p`, the measurement
    /// noise's variance (ms²).
    m: f64,
    p: f64,
    var_v: f64,
    /// Groups seen (the gain, up to `max_gain`).
    groups: u64,
    /// The last 5 groups' send spacing, ms, for `f_max` (§5.3).
    gaps: [f64; 5],
    gap_count: usize,
    threshold: f64,
    last_threshold_update: Option<Timestamp>,
    /// Since when the estimate has been above the threshold, and the estimate before.
    over_since: Option<Timestamp>,
    prev_trend: f64,
    usage: Usage,
}

impl DelayDetector {
    /// A detector that has seen no packet: usage normal, the threshold at its initial value.
    pub fn new(cfg: DelayConfig) -> Self {
        DelayDetector {
            current: None,
            previous: None,
            m: 0.0,
            p: 0.1,
            var_v: 50.0,
            groups: 0,
            gaps: [0.0; 5],
            gap_count: 0,
            threshold: cfg.threshold_initial_ms,
            last_threshold_update: None,
            over_since: None,
            prev_trend: 0.0,
            usage: Usage::Normal,
            cfg,
        }
    }

    /// What the detector says of the path after the last group.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// The filter's estimate of the delay gradient, ms per group.
    pub fn estimate_ms(&self) -> f64 {
        self.m
    }

    /// The adaptive over-use threshold `del_var_th` now, ms, within
    /// `threshold_min_ms..=threshold_max_ms`.
    pub fn threshold_ms(&self) -> f64 {
        self.threshold
    }

    /// A packet sent at `sent` (sender's clock) arrived at `arrived` (receiver's clock). The
    /// detector's own timing (how long over-use lasts, how fast the threshold moves) runs on
    /// the arrivals, as the groups arrived, not on when their reports reached the sender.
    pub fn on_packet(&mut self, sent: Timestamp, arrived: Timestamp) {
        let Some(g) = self.current.as_mut() else {
            self.current = Some(Group::of(sent, arrived));
            return;
        };
        if sent < g.first_sent {
            // Reordered into an older group: its timing says nothing of the trend.
            return;
        }
        // §5.2: a packet sent within the burst time of its group's first belongs to it; so
        // does one that arrived within the burst time of the group's last and earlier than
        // its send spacing says (a burst let out of a queue, d < 0).
        let in_burst = sent.saturating_since(g.first_sent) <= self.cfg.burst
            || (arrived.saturating_since(g.last_arrival) < self.cfg.burst
                && arrived.signed_nanos_since(g.last_arrival)
                    < sent.signed_nanos_since(g.last_sent)
                && arrived.saturating_since(g.first_arrival) < MAX_BURST);
        if in_burst {
            g.last_sent = g.last_sent.max(sent);
            g.last_arrival = g.last_arrival.max(arrived);
            return;
        }
        // A new group starts: the finished one is compared with the one before it.
        let done = *g;
        self.current = Some(Group::of(sent, arrived));
        if let Some(prev) = self.previous {
            let send_gap = done.last_sent.signed_nanos_since(prev.last_sent) as f64 / 1e6;
            let arrival_gap = done.last_arrival.signed_nanos_since(prev.last_arrival) as f64 / 1e6;
            self.update(done.last_arrival, arrival_gap - send_gap, send_gap);
        }
        self.previous = Some(done);
    }

    /// One inter-group delay variation `d` (ms), of a group that arrived at `at` (receiver's
    /// clock), sent `send_gap` ms after the one before.
    fn update(&mut self, at: Timestamp, d: f64, send_gap: f64) {
        self.groups += 1;
        // f_max: the highest group rate of the last 5, in groups per ms (§5.3).
        self.gaps[self.gap_count % 5] = send_gap.max(0.1);
        self.gap_count += 1;
        let shortest = self.gaps[..self.gap_count.min(5)]
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let f_max = 1.0 / shortest;
        let alpha = (1.0 - self.cfg.chi).powf(30.0 / (1000.0 * f_max));
        let z = d - self.m;
        // An outlier (a burst behind a cross-traffic spike) enters the noise estimate as three
        // deviations at most (§5.3); the estimate itself takes it whole.
        let bound = 3.0 * self.var_v.sqrt();
        let zc = z.clamp(-bound, bound);
        self.var_v = (alpha * self.var_v + (1.0 - alpha) * zc * zc).max(1.0);
        let k = (self.p + self.cfg.state_noise) / (self.var_v + self.p + self.cfg.state_noise);
        self.m += k * z;
        self.p = (1.0 - k) * (self.p + self.cfg.state_noise);
        self.detect(at);
    }

    /// §5.4: the estimate against the adaptive threshold, at `now` on the receiver's clock.
    fn detect(&mut self, now: Timestamp) {
        let trend = self.m * (self.groups as f64).min(self.cfg.max_gain);
        if trend > self.threshold {
            let since = *self.over_since.get_or_insert(now);
            if now.saturating_since(since) >= self.cfg.overuse_time && trend >= self.prev_trend {
                self.usage = Usage::Overuse;
            }
        } else {
            self.over_since = None;
            self.usage = if trend < -self.threshold {
                Usage::Underuse
            } else {
                Usage::Normal
            };
        }
        self.prev_trend = trend;
        // The threshold follows |trend|, fast up, slowly down; a spike far above it is not
        // followed (§5.4).
        let dt_ms = self
            .last_threshold_update
            .map_or(0.0, |t| now.saturating_since(t).as_secs_f64() * 1e3)
            .min(100.0);
        self.last_threshold_update = Some(now);
        if trend.abs() - self.threshold <= 15.0 {
            let k = if trend.abs() < self.threshold {
                self.cfg.k_down
            } else {
                self.cfg.k_up
            };
            self.threshold += dt_ms * k * (trend.abs() - self.threshold);
            self.threshold = self
                .threshold
                .clamp(self.cfg.threshold_min_ms, self.cfg.threshold_max_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` packets `gap_us` µs apart from `start` µs; packet `i` arrives `delay(i)` µs after
    /// it was sent.
    fn feed(d: &mut DelayDetector, start: u64, n: u64, gap_us: u64, delay: impl Fn(u64) -> u64) {
        for i in 0..n {
            let sent = Timestamp::from_micros(start + i * gap_us);
            let arrived = sent + Duration::from_micros(delay(i));
            d.on_packet(sent, arrived);
        }
    }

    #[test]
    fn a_steady_path_is_normal_and_a_growing_queue_is_overuse() {
        let mut d = DelayDetector::new(DelayConfig::default());
        // 2 s at 500 packets/s, constant 20 ms delay with ±0.5 ms of noise.
        feed(&mut d, 0, 1000, 2000, |i| 20_000 + (i * 7919 % 1000));
        assert_eq!(d.usage(), Usage::Normal, "m {}", d.estimate_ms());
        // Then the queue grows by 0.2 ms per packet (the sender 10 % above the path).
        feed(&mut d, 2_000_000, 200, 2000, |i| 20_000 + i * 200);
        assert_eq!(
            d.usage(),
            Usage::Overuse,
            "m {} th {}",
            d.estimate_ms(),
            d.threshold_ms()
        );
        assert!((6.0..=600.0).contains(&d.threshold_ms()));
    }

    #[test]
    fn a_draining_queue_is_underuse() {
        let mut d = DelayDetector::new(DelayConfig::default());
        feed(&mut d, 0, 1000, 2000, |_| 95_000);
        // 75 ms of queue drains over 3 s, 0.05 ms per packet: the packets of a draining
        // queue arrive as bursts (§5.2), and the groups' delay falls from one to the next.
        let mut under = false;
        for i in 0..1500u64 {
            let sent = Timestamp::from_micros(2_000_000 + i * 2000);
            let arrived = sent + Duration::from_micros(95_000 - 50 * i);
            d.on_packet(sent, arrived);
            under |= d.usage() == Usage::Underuse;
        }
        assert!(under, "m {} th {}", d.estimate_ms(), d.threshold_ms());
        assert!(d.estimate_ms() < 0.0);
    }

    #[test]
    fn packets_within_the_burst_time_are_one_group() {
        let mut d = DelayDetector::new(DelayConfig::default());
        // 10 packets 0.1 ms apart arrive spread (a burst queued behind each other): one group,
        // no update.
        feed(&mut d, 0, 10, 100, |i| 20_000 + i * 1000);
        assert_eq!(d.groups, 0);
    }
}
