//! ASMP, the Adaptive Smooth Multicast Protocol (Bouras, Gkamas, Kioumourtzis: SPECTS 2008,
//! MASCOTS 2008, Int. J. Communication Systems 2010), as seed 002 describes it: a single-rate
//! multicast congestion control that needs nothing but RTCP's sender and receiver reports.
//!
//! The papers' formulas are not public in full; what seed 002 and the abstracts say, and what
//! is assumed here (every constant is in [`AsmpConfig`]):
//!
//! | rule | source | here |
//! |---|---|---|
//! | feedback is RTCP SR/RR only, at RTCP's own interval | seed 002 §II.B | every receiver report block about the stream ([`Feedback`]); nothing else is read |
//! | a TCP-friendly rate per receiver | seed 002 §II.B ("long term TCP-friendliness") | RFC 5348's equation with the receiver's RTT (LSR/DLSR) and its loss rate: RR's fraction lost, smoothed per receiver by an EWMA (`loss_weight`), RTT by TCP's 7/8 EWMA |
//! | the rate follows the worst receiver | single-rate multicast (seed 002 §II) | the lowest TCP-friendly rate among receivers heard within `receiver_timeout` |
//! | the rate is smoothed by a smoothness factor | seed 002 §II.B; NGI 2008 ("the TCP-friendly rate is filtered") | a decrease goes `sf` of the way to the TCP-friendly rate at each update: `X ← X − sf (X − X_tcp)` |
//! | congestion indicators tune the smoothness factor | seed 002 §II.B | three indicators, each seen in a report: loss (fraction lost > 0), a growing queue (RTT above `delay_factor` × the smallest RTT seen), and rising jitter (above `jitter_factor` × its smoothed value); each present raises `sf` by `sf_step` towards `sf_max`; a report with none lowers it by `sf_step` towards `sf_min` |
//! | an increase of one packet per RTT, no slow start | seed 002 §V.C | the rate grows by at most `s / RTT` per RTT (`s·Δt/RTT²` over Δt), and never past the TCP-friendly rate; it starts at `initial_rate` |
//! | a loss indicator the sender cannot miss | assumption | a report with fraction lost above `heavy_loss` sets `sf = sf_max` at once |
//!
//! Receivers without loss have no TCP-friendly rate from the equation (p = 0): only the
//! additive increase bounds the rate then, as for TCP in congestion avoidance.

use crate::tfrc::equation::throughput_bytes_per_s;
use crate::{Feedback, RateController};
use metronome_time::{Bitrate, Timestamp};
use std::collections::BTreeMap;
use std::time::Duration;

/// ASMP's constants (see the module's table for where each comes from).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AsmpConfig {
    /// The packet size `s` on the wire, bytes.
    pub segment_bytes: u32,
    /// Where the rate starts (no slow start).
    pub initial_rate: Bitrate,
    pub min_rate: Bitrate,
    pub max_rate: Bitrate,
    /// Weight of a new fraction-lost figure in a receiver's smoothed loss rate.
    pub loss_weight: f64,
    /// The smoothness factor's range, its start, and its step per report.
    pub sf_min: f64,
    pub sf_max: f64,
    pub sf_initial: f64,
    pub sf_step: f64,
    /// The delay indicator: RTT above this multiple of the smallest RTT seen.
    pub delay_factor: f64,
    /// The jitter indicator: jitter above this multiple of its smoothed value.
    pub jitter_factor: f64,
    /// Fraction lost above which the smoothness factor goes to `sf_max` at once.
    pub heavy_loss: f64,
    /// A receiver not heard for this long no longer counts.
    pub receiver_timeout: Duration,
    /// The RTT assumed for a receiver until LSR/DLSR give one.
    pub initial_rtt: Duration,
    /// At most this many receivers are remembered (a bound whatever arrives).
    pub max_receivers: usize,
}

impl AsmpConfig {
    pub fn new(segment_bytes: u32, initial_rate: Bitrate, max_rate: Bitrate) -> Self {
        AsmpConfig {
            segment_bytes,
            initial_rate,
            min_rate: Bitrate::kbps(16),
            max_rate,
            loss_weight: 0.25,
            sf_min: 0.1,
            sf_max: 1.0,
            sf_initial: 0.5,
            sf_step: 0.2,
            delay_factor: 1.5,
            jitter_factor: 2.0,
            heavy_loss: 0.1,
            receiver_timeout: Duration::from_secs(15),
            initial_rtt: Duration::from_millis(500),
            max_receivers: 100_000,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Receiver {
    loss: f64,
    rtt: Option<Duration>,
    jitter_avg: Option<f64>,
    heard: Timestamp,
}

/// Which congestion indicators the last report showed (for traces and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Indicators {
    pub loss: bool,
    pub delay: bool,
    pub jitter: bool,
}

/// ASMP's sender: all its state, fed by receiver reports.
#[derive(Clone, Debug)]
pub struct AsmpSender {
    cfg: AsmpConfig,
    /// The sending rate, bytes/s.
    x: f64,
    sf: f64,
    receivers: BTreeMap<u32, Receiver>,
    min_rtt: Option<Duration>,
    last_update: Option<Timestamp>,
    last_indicators: Indicators,
}

impl AsmpSender {
    pub fn new(cfg: AsmpConfig) -> Self {
        AsmpSender {
            x: cfg.initial_rate.as_bps() as f64 / 8.0,
            sf: cfg.sf_initial.clamp(cfg.sf_min, cfg.sf_max),
            cfg,
            receivers: BTreeMap::new(),
            min_rtt: None,
            last_update: None,
            last_indicators: Indicators::default(),
        }
    }

    pub fn smoothness_factor(&self) -> f64 {
        self.sf
    }

    pub fn indicators(&self) -> Indicators {
        self.last_indicators
    }

    pub fn rate_bytes_per_s(&self) -> f64 {
        self.x
    }

    fn s(&self) -> f64 {
        self.cfg.segment_bytes.max(1) as f64
    }

    /// The lowest TCP-friendly rate of the receivers heard lately (bytes/s; infinite when
    /// none has lost anything), and the RTT that goes with it (the largest, when none lost).
    fn worst(&self, now: Timestamp) -> (f64, Duration) {
        let mut x_tcp = f64::INFINITY;
        let mut rtt_of_worst = None;
        let mut max_rtt = Duration::ZERO;
        for r in self.receivers.values() {
            if now.saturating_since(r.heard) > self.cfg.receiver_timeout {
                continue;
            }
            let rtt = r.rtt.unwrap_or(self.cfg.initial_rtt);
            max_rtt = max_rtt.max(rtt);
            if r.loss > 0.0 {
                let x = throughput_bytes_per_s(self.s(), rtt, r.loss);
                if x < x_tcp {
                    x_tcp = x;
                    rtt_of_worst = Some(rtt);
                }
            }
        }
        let rtt = rtt_of_worst.unwrap_or(if max_rtt.is_zero() {
            self.cfg.initial_rtt
        } else {
            max_rtt
        });
        (x_tcp, rtt)
    }

    /// A receiver report block about the stream arrived at `now`.
    pub fn on_report(&mut self, now: Timestamp, fb: &Feedback) {
        let cfg = self.cfg;
        if !self.receivers.contains_key(&fb.receiver) && self.receivers.len() >= cfg.max_receivers {
            // Make room: forget the receiver heard least recently.
            if let Some((&k, _)) = self.receivers.iter().min_by_key(|(_, r)| r.heard) {
                self.receivers.remove(&k);
            }
        }
        let r = self.receivers.entry(fb.receiver).or_insert(Receiver {
            loss: 0.0,
            rtt: None,
            jitter_avg: None,
            heard: now,
        });
        r.heard = now;
        let lost = fb.fraction_lost.clamp(0.0, 1.0);
        r.loss = (1.0 - cfg.loss_weight) * r.loss + cfg.loss_weight * lost;
        if r.loss < 1e-9 {
            r.loss = 0.0;
        }
        let mut ind = Indicators {
            loss: lost > 0.0,
            ..Indicators::default()
        };
        if let Some(sample) = fb.rtt {
            r.rtt = Some(match r.rtt {
                None => sample,
                Some(old) => old.mul_f64(0.875) + sample.mul_f64(0.125),
            });
            let min = self.min_rtt.map_or(sample, |m| m.min(sample));
            self.min_rtt = Some(min);
            ind.delay = sample.as_secs_f64() > cfg.delay_factor * min.as_secs_f64();
        }
        let j = fb.jitter.as_secs_f64();
        match r.jitter_avg {
            None => r.jitter_avg = Some(j),
            Some(avg) => {
                ind.jitter = avg > 0.0 && j > cfg.jitter_factor * avg;
                r.jitter_avg = Some(0.875 * avg + 0.125 * j);
            }
        }
        self.sf = if lost > cfg.heavy_loss {
            cfg.sf_max
        } else if ind.loss || ind.delay || ind.jitter {
            let n = [ind.loss, ind.delay, ind.jitter]
                .iter()
                .filter(|b| **b)
                .count();
            self.sf + cfg.sf_step * n as f64
        } else {
            self.sf - cfg.sf_step
        }
        .clamp(cfg.sf_min, cfg.sf_max);
        self.last_indicators = ind;
        self.update(now);
    }

    /// Moves the rate towards the worst receiver's TCP-friendly rate.
    fn update(&mut self, now: Timestamp) {
        let (x_tcp, rtt) = self.worst(now);
        let dt = self
            .last_update
            .map_or(Duration::ZERO, |t| now.saturating_since(t));
        self.last_update = Some(now);
        if x_tcp < self.x {
            self.x -= self.sf * (self.x - x_tcp);
        } else {
            // One packet per RTT, per RTT.
            let r = rtt.as_secs_f64().max(1e-3);
            let step = self.s() * dt.as_secs_f64() / (r * r);
            self.x = (self.x + step).min(x_tcp);
        }
        let lo = self.cfg.min_rate.as_bps() as f64 / 8.0;
        let hi = self.cfg.max_rate.as_bps() as f64 / 8.0;
        self.x = self.x.clamp(lo.min(hi), hi);
    }
}

impl RateController for AsmpSender {
    fn name(&self) -> &'static str {
        "asmp"
    }
    fn target_rate(&self) -> Bitrate {
        Bitrate::bps((self.x * 8.0) as u64)
    }
    fn on_feedback(&mut self, now: Timestamp, feedback: &Feedback) {
        // Only receiver reports: TFRC/TFMCC fields ride other packets.
        if feedback.tfrc.is_none() && feedback.tfmcc.is_none() {
            self.on_report(now, feedback);
        }
    }
    fn set_rate(&mut self, rate: Bitrate) {
        self.cfg.max_rate = rate;
        self.x = self.x.min(rate.as_bps() as f64 / 8.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rr(receiver: u32, lost: f64, rtt_ms: u64, jitter_ms: u64) -> Feedback {
        Feedback {
            receiver,
            from: "10.0.0.1:5005".parse().unwrap(),
            fraction_lost: lost,
            cumulative_lost: 0,
            extended_highest_seq: 0,
            jitter: Duration::from_millis(jitter_ms),
            rtt: Some(Duration::from_millis(rtt_ms)),
            tfrc: None,
            tfmcc: None,
        }
    }

    fn asmp() -> AsmpSender {
        AsmpSender::new(AsmpConfig::new(1000, Bitrate::kbps(400), Bitrate::mbps(10)))
    }

    #[test]
    fn without_loss_it_grows_one_packet_per_rtt_per_rtt_and_has_no_slow_start() {
        let mut a = asmp();
        let ms = Timestamp::from_millis;
        a.on_report(ms(0), &rr(1, 0.0, 100, 1));
        assert_eq!(a.rate_bytes_per_s(), 50_000.0);
        // One second later, RTT 100 ms: 10 RTTs, one packet (1000 B) per RTT each:
        // + 1000 B / 0.1 s × 10 = +100 kB/s.
        a.on_report(ms(1000), &rr(1, 0.0, 100, 1));
        assert!((a.rate_bytes_per_s() - 150_000.0).abs() < 1e-6);
        a.on_report(ms(2000), &rr(1, 0.0, 100, 1));
        assert!((a.rate_bytes_per_s() - 250_000.0).abs() < 1e-6);
        assert_eq!(a.indicators(), Indicators::default());
    }

    #[test]
    fn loss_pulls_the_rate_to_the_worst_receivers_tcp_friendly_rate_smoothly() {
        let mut a = AsmpSender::new(AsmpConfig::new(1000, Bitrate::mbps(4), Bitrate::mbps(10)));
        let ms = Timestamp::from_millis;
        a.on_report(ms(0), &rr(1, 0.0, 100, 1));
        a.on_report(ms(0), &rr(2, 0.0, 100, 1));
        let sf0 = a.smoothness_factor();
        // Receiver 2 loses 4 %: its smoothed loss is 1 %, TCP-friendly rate 112 kB/s at 100 ms.
        a.on_report(ms(1000), &rr(2, 0.04, 100, 1));
        let x_tcp = throughput_bytes_per_s(1000.0, Duration::from_millis(100), 0.01);
        assert!(a.indicators().loss);
        let sf = a.smoothness_factor();
        assert!((sf - (sf0 + 0.2)).abs() < 1e-9, "{sf}");
        let want = 500_000.0 - sf * (500_000.0 - x_tcp);
        assert!((a.rate_bytes_per_s() - want).abs() < 1e-6);
        // Repeated loss: the rate reaches the TCP-friendly rate, never below it.
        for k in 2..10 {
            a.on_report(ms(1000 * k), &rr(2, 0.01, 100, 1));
        }
        assert!(a.rate_bytes_per_s() >= x_tcp * 0.999);
        assert!(
            a.rate_bytes_per_s() < x_tcp * 1.05,
            "{}",
            a.rate_bytes_per_s()
        );
    }

    #[test]
    fn congestion_indicators_raise_the_smoothness_factor_and_calm_lowers_it() {
        let mut a = asmp();
        let ms = Timestamp::from_millis;
        a.on_report(ms(0), &rr(1, 0.0, 40, 2));
        let sf0 = a.smoothness_factor();
        // RTT doubled (a queue growing) and jitter tripled: two indicators.
        a.on_report(ms(1000), &rr(1, 0.0, 80, 6));
        assert_eq!(
            a.indicators(),
            Indicators {
                loss: false,
                delay: true,
                jitter: true
            }
        );
        assert!((a.smoothness_factor() - (sf0 + 0.4)).abs() < 1e-9);
        // Calm reports lower it step by step to its floor.
        for k in 2..20 {
            a.on_report(ms(1000 * k), &rr(1, 0.0, 40, 2));
        }
        assert!((a.smoothness_factor() - 0.1).abs() < 1e-9);
        // Heavy loss: at once to the top.
        a.on_report(ms(30_000), &rr(1, 0.2, 40, 2));
        assert_eq!(a.smoothness_factor(), 1.0);
    }

    #[test]
    fn a_silent_receiver_stops_counting_and_the_receiver_table_is_bounded() {
        let mut cfg = AsmpConfig::new(1000, Bitrate::mbps(1), Bitrate::mbps(10));
        cfg.max_receivers = 3;
        let mut a = AsmpSender::new(cfg);
        let s = Timestamp::from_secs;
        a.on_report(s(0), &rr(9, 0.5, 100, 1));
        let low = a.rate_bytes_per_s();
        // Receiver 9 falls silent; 15 s later only 1's reports count and the rate grows.
        for k in 16..20 {
            a.on_report(s(k), &rr(1, 0.0, 100, 1));
        }
        assert!(a.rate_bytes_per_s() > low);
        for id in 100..200 {
            a.on_report(s(30), &rr(id, 0.0, 100, 1));
        }
        assert!(a.receivers.len() <= 3);
    }
}
