//! GCC, Google Congestion Control (draft-ietf-rmcat-gcc-02), sender-side: what WebRTC does,
//! for comparison with TFRC, TFMCC and ASMP. A unicast controller.
//!
//! The receiver reports every packet's arrival time (RFC 8888's feedback, written by
//! `metronome_wire::rtcp::ccfb`); the sender session matches the reports with its own send
//! times and hands them over as [`PacketResult`]s. From them:
//! - the delay-based controller ([`delay`]: groups, the Kalman filter, the over-use detector)
//!   drives an AIMD rate `A` (§5.5): in *increase*, `A` grows by 8 % a second, or by half a
//!   packet per response time (RTT + 100 ms; at least 1000 bit/s an update) once the incoming
//!   rate is near the rate at which the path last over-used; on over-use `A` drops to `beta = 0.85` of the incoming rate
//!   `R` (bytes that arrived in the last 500 ms), at most once per response time; on
//!   under-use it holds. `A` never exceeds `1.5 R`.
//! - the loss-based controller (§6) keeps `A_s`: over at least 100 ms and 20 packets, a loss
//!   fraction above 10 % takes it to `A_s (1 − 0.5 p)`, under 2 % raises it by 5 %.
//!
//! The target is `min(A, A_s)`, within `[min_rate, max_rate]`. Assumptions where the draft is
//! silent are in [`GccConfig`]'s fields.

pub mod delay;
pub mod feedback;

use crate::{Feedback, RateController};
use delay::{DelayConfig, DelayDetector, Usage};
use metronome_time::{Bitrate, Timestamp};
use std::collections::VecDeque;
use std::time::Duration;

/// What the receiver said of one packet the sender sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketResult {
    /// The packet's extended RTP sequence number.
    pub seq: u64,
    /// When the sender sent it (its clock).
    pub sent: Timestamp,
    /// Its size on the wire, bytes.
    pub size: u32,
    /// Whether the receiver got it.
    pub received: bool,
    /// When it arrived, on the receiver's clock (only differences count); `None` if it was
    /// not received, or the receiver did not say when (RFC 8888's "unavailable").
    pub arrived: Option<Timestamp>,
}

/// Arrivals the incoming-rate window holds at most, whatever reports say (25,000 packets a
/// second for 500 ms).
pub const MAX_WINDOW: usize = 12_500;

/// GCC's constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GccConfig {
    /// Where both `A` and `A_s` start.
    pub initial_rate: Bitrate,
    /// The target never goes below this (30 kbit/s by default).
    pub min_rate: Bitrate,
    /// The target never goes above this; [`RateController::set_rate`] replaces it.
    pub max_rate: Bitrate,
    /// The constants of the delay-based detector (§5.2 to §5.4).
    pub delay: DelayConfig,
    /// Multiplicative increase per second (§5.5: `eta` 1.08).
    pub eta: f64,
    /// The decrease factor (§5.5: `beta` 0.85).
    pub beta: f64,
    /// The window of the incoming rate `R` (§5.5: 0.5 to 1 s).
    pub rate_window: Duration,
    /// Loss-based: the loss fraction above which `A_s` falls to `A_s (1 − 0.5 p)` (§6: 0.10).
    pub loss_high: f64,
    /// Loss-based: the loss fraction under which `A_s` grows by 5 % (§6: 0.02).
    pub loss_low: f64,
    /// Loss-based: the least time and packets one update looks at (an assumption: the draft
    /// updates at each RTCP report, which here come every 50 ms).
    pub loss_period: Duration,
    /// Loss-based: the least number of packet results one update looks at (20 by default).
    pub loss_min_packets: u32,
    /// The RTT assumed until a receiver report gives one.
    pub initial_rtt: Duration,
    /// The packet size assumed for the additive increase, bytes.
    pub packet_bytes: u32,
}

impl GccConfig {
    /// The constants for a stream starting at `initial_rate` and capped at `max_rate`, the
    /// rest at the draft's values or the defaults documented on each field (min rate 30 kbit/s,
    /// rate window 500 ms, loss period 100 ms and 20 packets, initial RTT 100 ms, packets of
    /// 1200 bytes).
    pub fn new(initial_rate: Bitrate, max_rate: Bitrate) -> Self {
        GccConfig {
            initial_rate,
            min_rate: Bitrate::kbps(30),
            max_rate,
            delay: DelayConfig::default(),
            eta: 1.08,
            beta: 0.85,
            rate_window: Duration::from_millis(500),
            loss_high: 0.10,
            loss_low: 0.02,
            loss_period: Duration::from_millis(100),
            loss_min_packets: 20,
            initial_rtt: Duration::from_millis(100),
            packet_bytes: 1200,
        }
    }
}

/// The AIMD controller's state (§5.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateState {
    /// `A` stays as it is: the detector says under-use, or normal right after a decrease.
    Hold,
    /// `A` grows, multiplicatively or (near the last over-use rate) additively. The start state.
    Increase,
    /// The detector says over-use: `A` drops to `beta × R`, at most once per response time.
    Decrease,
}

/// GCC's counters, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GccCounters {
    /// Packet results received from the receiver (arrived or not).
    pub results: u64,
    /// Of those, packets the receiver reported as not received.
    pub lost: u64,
    /// Rate updates made in the decrease state (the detector said over-use), whether or not
    /// `A` was lowered.
    pub overuse: u64,
    /// Times the delay-based rate `A` was actually lowered to `beta × R`.
    pub decreases: u64,
    /// Times the loss-based rate `A_s` was lowered (loss above `loss_high`).
    pub loss_decreases: u64,
}

/// GCC's sender-side controller (see the module docs): fed the per-packet results and the
/// receiver reports' RTT, it keeps the delay-based rate `A` and the loss-based `A_s`, and its
/// target is the lower of the two.
#[derive(Clone, Debug)]
pub struct GccSender {
    cfg: GccConfig,
    detector: DelayDetector,
    state: RateState,
    /// The delay-based rate `A` and the loss-based `A_s`, bit/s.
    a: f64,
    a_s: f64,
    last_update: Option<Timestamp>,
    last_decrease: Option<Timestamp>,
    /// Arrivals (receiver's clock) and sizes in the rate window, for `R` (at most
    /// [`MAX_WINDOW`]), and the latest arrival seen.
    arrivals: VecDeque<(Timestamp, u32)>,
    window_bytes: u64,
    newest_arrival: Option<Timestamp>,
    /// The incoming rate at past decreases: its mean (kbit/s) and variance, normalised
    /// (§5.5's "average max bitrate").
    max_mean: Option<f64>,
    max_var: f64,
    /// Loss-based: packets and losses since its last update.
    loss_since: Option<Timestamp>,
    loss_packets: u32,
    loss_lost: u32,
    rtt: Duration,
    counters: GccCounters,
}

impl GccSender {
    /// A controller at `cfg.initial_rate`, in the increase state, that has seen no result yet.
    pub fn new(cfg: GccConfig) -> Self {
        let start = cfg.initial_rate.as_bps() as f64;
        GccSender {
            detector: DelayDetector::new(cfg.delay),
            state: RateState::Increase,
            a: start,
            a_s: start,
            last_update: None,
            last_decrease: None,
            arrivals: VecDeque::new(),
            window_bytes: 0,
            newest_arrival: None,
            max_mean: None,
            max_var: 0.4,
            loss_since: None,
            loss_packets: 0,
            loss_lost: 0,
            rtt: cfg.initial_rtt,
            counters: GccCounters::default(),
            cfg,
        }
    }

    /// The AIMD state after the last update.
    pub fn state(&self) -> RateState {
        self.state
    }

    /// What the delay-based detector says of the path now.
    pub fn usage(&self) -> Usage {
        self.detector.usage()
    }

    /// The counters since the controller was made.
    pub fn counters(&self) -> GccCounters {
        self.counters
    }

    /// The delay-based and loss-based rates, bit/s.
    pub fn rates_bps(&self) -> (f64, f64) {
        (self.a, self.a_s)
    }

    /// The incoming rate `R` over the window, bit/s (`None` before a window's worth).
    fn incoming_bps(&self) -> Option<f64> {
        let (first, last) = (self.arrivals.front()?.0, self.newest_arrival?);
        let span = last.saturating_since(first);
        (span >= self.cfg.rate_window / 2)
            .then(|| self.window_bytes as f64 * 8.0 / span.as_secs_f64().max(1e-3))
    }

    /// The receiver's reports of `results` reached the sender at `now`.
    pub fn on_results(&mut self, now: Timestamp, results: &[PacketResult]) {
        for r in results {
            self.counters.results += 1;
            self.loss_packets += 1;
            if !r.received {
                self.counters.lost += 1;
                self.loss_lost += 1;
                continue;
            }
            // Received without a time: it counts against loss, not for delay or rate.
            let Some(at) = r.arrived else { continue };
            self.detector.on_packet(r.sent, at);
            if self.arrivals.len() == MAX_WINDOW {
                if let Some((_, size)) = self.arrivals.pop_front() {
                    self.window_bytes -= u64::from(size);
                }
            }
            self.arrivals.push_back((at, r.size));
            self.window_bytes += u64::from(r.size);
            self.newest_arrival = Some(self.newest_arrival.map_or(at, |n| n.max(at)));
        }
        if let Some(newest) = self.newest_arrival {
            while let Some(&(t, size)) = self.arrivals.front() {
                if newest.saturating_since(t) <= self.cfg.rate_window {
                    break;
                }
                self.arrivals.pop_front();
                self.window_bytes -= u64::from(size);
            }
        }
        self.update_delay_based(now);
        self.update_loss_based(now);
    }

    /// §5.5: the state machine and `A`.
    fn update_delay_based(&mut self, now: Timestamp) {
        let usage = self.detector.usage();
        self.state = match (usage, self.state) {
            (Usage::Overuse, _) => RateState::Decrease,
            (Usage::Underuse, _) => RateState::Hold,
            (Usage::Normal, RateState::Decrease) => RateState::Hold,
            (Usage::Normal, _) => RateState::Increase,
        };
        let dt = self
            .last_update
            .map_or(Duration::ZERO, |t| now.saturating_since(t))
            .min(Duration::from_secs(1));
        self.last_update = Some(now);
        let incoming = self.incoming_bps();
        let response = self.rtt + Duration::from_millis(100);
        match self.state {
            RateState::Increase => {
                let near = match (incoming, self.max_mean) {
                    (Some(r), Some(mean)) => self.near_max(r / 1e3, mean),
                    _ => false,
                };
                if near {
                    // §5.5: half a packet per response time, at least 1000 bit/s an update.
                    let alpha = 0.5 * (dt.as_secs_f64() / response.as_secs_f64()).min(1.0);
                    self.a += (alpha * f64::from(self.cfg.packet_bytes) * 8.0).max(1000.0);
                } else {
                    self.a *= self.cfg.eta.powf(dt.as_secs_f64());
                }
            }
            RateState::Decrease => {
                self.counters.overuse += 1;
                let due = self
                    .last_decrease
                    .is_none_or(|t| now.saturating_since(t) >= response);
                if let (true, Some(r)) = (due, incoming) {
                    self.a = self.cfg.beta * r;
                    self.last_decrease = Some(now);
                    self.counters.decreases += 1;
                    self.note_max(r / 1e3);
                }
            }
            RateState::Hold => {}
        }
        if let Some(r) = incoming {
            self.a = self.a.min(1.5 * r);
        }
        self.a = self.clamp(self.a);
    }

    /// Whether `r_kbps` is within 3 standard deviations of the rate at past over-uses (§5.5).
    /// The variance is kept relative to the mean, in kbit/s, as libwebrtc keeps it: its
    /// bounds (0.4 to 2.5) make the deviation 14 to 35 kbit/s at 500 kbit/s.
    fn near_max(&self, r_kbps: f64, mean_kbps: f64) -> bool {
        (r_kbps - mean_kbps).abs() < 3.0 * (self.max_var * mean_kbps).sqrt()
    }

    /// The incoming rate at a decrease, kbit/s, joins the "average max bitrate".
    fn note_max(&mut self, r: f64) {
        let mean = match self.max_mean {
            Some(m) if self.near_max(r, m) => m,
            // Far from the old mean: the path changed; start again.
            _ => {
                self.max_mean = Some(r);
                return;
            }
        };
        let new_mean = 0.95 * mean + 0.05 * r;
        let norm = mean.max(1.0);
        let err = (r - new_mean) / norm;
        self.max_var = (0.95 * self.max_var + 0.05 * err * err * norm).clamp(0.4, 2.5);
        self.max_mean = Some(new_mean);
    }

    /// §6: the loss-based rate.
    fn update_loss_based(&mut self, now: Timestamp) {
        let since = *self.loss_since.get_or_insert(now);
        if now.saturating_since(since) < self.cfg.loss_period
            || self.loss_packets < self.cfg.loss_min_packets
        {
            return;
        }
        let p = f64::from(self.loss_lost) / f64::from(self.loss_packets);
        if p > self.cfg.loss_high {
            self.a_s *= 1.0 - 0.5 * p;
            self.counters.loss_decreases += 1;
        } else if p < self.cfg.loss_low {
            // Only the ceiling bounds it: the target is the lower of `A` and `A_s`.
            self.a_s *= 1.05;
        }
        self.a_s = self.clamp(self.a_s);
        self.loss_since = Some(now);
        self.loss_packets = 0;
        self.loss_lost = 0;
    }

    fn clamp(&self, bps: f64) -> f64 {
        bps.clamp(
            self.cfg.min_rate.as_bps() as f64,
            self.cfg.max_rate.as_bps() as f64,
        )
    }
}

impl RateController for GccSender {
    fn name(&self) -> &'static str {
        "gcc"
    }
    fn target_rate(&self) -> Bitrate {
        Bitrate::bps(self.a.min(self.a_s) as u64)
    }
    fn on_feedback(&mut self, _now: Timestamp, feedback: &Feedback) {
        // Receiver reports give the RTT (LSR/DLSR), which the response time needs.
        if let Some(rtt) = feedback.rtt {
            self.rtt = rtt.min(Duration::from_secs(5));
        }
    }
    /// Its rate comes from per-packet feedback; receiver reports give only the RTT.
    fn reads(&self, _feedback: &Feedback) -> bool {
        false
    }
    fn wants_packet_feedback(&self) -> bool {
        true
    }
    fn on_packet_results(&mut self, now: Timestamp, results: &[PacketResult]) {
        self.on_results(now, results);
    }
    fn set_rate(&mut self, rate: Bitrate) {
        self.cfg.max_rate = rate.max(self.cfg.min_rate);
        self.a = self.clamp(self.a);
        self.a_s = self.clamp(self.a_s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results(
        from: u64,
        n: u64,
        gap_us: u64,
        delay_us: impl Fn(u64) -> Option<u64>,
    ) -> Vec<PacketResult> {
        (from..from + n)
            .map(|i| {
                let sent = Timestamp::from_micros(i * gap_us);
                let arrived = delay_us(i).map(|d| sent + Duration::from_micros(d));
                PacketResult {
                    seq: i,
                    sent,
                    size: 1200,
                    received: arrived.is_some(),
                    arrived,
                }
            })
            .collect()
    }

    #[test]
    fn without_congestion_the_rate_grows_eight_percent_a_second() {
        let mut g = GccSender::new(GccConfig::new(Bitrate::kbps(500), Bitrate::mbps(50)));
        // 5 s of feedback every 50 ms on a path with constant delay.
        for k in 0..100u64 {
            let now = Timestamp::from_millis(k * 50 + 30);
            g.on_results(now, &results(k * 25, 25, 2000, |_| Some(30_000)));
        }
        let rate = g.target_rate().as_bps() as f64;
        // 500 kbit/s × 1.08^5 = 735 kbit/s (the incoming rate, 1200 B every 2 ms or
        // 4.8 Mbit/s, is far above: 1.5 times it does not cap the rate).
        assert!((700e3..770e3).contains(&rate), "{rate}");
        assert_eq!(g.state(), RateState::Increase);
    }

    #[test]
    fn a_growing_queue_drops_the_rate_to_beta_of_the_incoming_rate() {
        let mut g = GccSender::new(GccConfig::new(Bitrate::mbps(6), Bitrate::mbps(50)));
        for k in 0..40u64 {
            let now = Timestamp::from_millis(k * 50 + 30);
            g.on_results(now, &results(k * 25, 25, 2000, |_| Some(30_000)));
        }
        // The queue then grows 0.3 ms per packet: the path carries less than 4.8 Mbit/s.
        for k in 40..60u64 {
            let now = Timestamp::from_millis(k * 50 + 30);
            g.on_results(
                now,
                &results(k * 25, 25, 2000, |i| Some(30_000 + (i - 1000) * 300)),
            );
        }
        assert!(g.counters().decreases >= 1, "{:?}", g.counters());
        let rate = g.target_rate().as_bps() as f64;
        // The receiver saw 1200 B every 2.3 ms (4.17 Mbit/s): 0.85 of it, and maybe once more.
        assert!(rate < 3.7e6, "{rate}");
    }

    #[test]
    fn heavy_loss_lowers_the_loss_based_rate() {
        let mut g = GccSender::new(GccConfig::new(Bitrate::mbps(2), Bitrate::mbps(50)));
        for k in 0..20u64 {
            let now = Timestamp::from_millis(k * 50 + 30);
            // Every fifth packet lost: 20 %.
            g.on_results(
                now,
                &results(k * 25, 25, 2000, |i| (i % 5 != 0).then_some(30_000)),
            );
        }
        let (_, a_s) = g.rates_bps();
        assert!(a_s < 2e6 * 0.9f64.powi(5), "{a_s}");
        assert!(g.counters().loss_decreases >= 5);
        assert_eq!(g.target_rate().as_bps(), a_s as u64);
    }
}
