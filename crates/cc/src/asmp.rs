//! ASMP, the Adaptive Smooth Multicast Protocol (Bouras, Gkamas, Kioumourtzis: SPECTS 2008,
//! MASCOTS 2008, Int. J. Communication Systems 2010), as seed 002 describes it: a single-rate
//! multicast congestion control that needs nothing but RTCP's sender and receiver reports.
//!
//! The papers' formulas are not public in full; what seed 002 and the abstracts say, and what
//! is assumed here (every constant is in [`AsmpConfig`]):
//!
//! | rule | source | here |
//! |---|---|---|
//! | feedback is RTCP SR/RR only, at RTCP's own interval | seed 002 §I.B | every receiver report block about the stream ([`Feedback`]); nothing else is read |
//! | the smooth rate is computed by receivers | seed 002 §I.B ("performed by receivers") | each receiver's computation, from its own report blocks, its own state: run at the sender, because a receiver cannot measure its RTT from SR/RR alone (LSR/DLSR give it to the sender) and may send nothing but RTCP's reports (assumption) |
//! | a TCP-friendly rate per receiver | seed 002 §I.B ("long term TCP-friendliness") | RFC 5348's equation with the receiver's RTT (LSR/DLSR, TCP's 7/8 EWMA) and its loss rate: RR's fraction lost smoothed by an EWMA (`loss_weight`) (assumption) |
//! | single-rate: the group gets one rate | seed 002 §I | the lowest rate asked by the receivers heard within `receiver_timeout` (assumption) |
//! | the rate is smoothed by a smoothness factor | seed 002 §I.B; NGI 2008 ("the TCP-friendly rate is filtered") | a receiver's decrease goes `sf` of the way to its TCP-friendly rate at each of its reports: `X_i ← X_i − sf_i (X_i − X_tcp,i)` (assumption) |
//! | congestion indicators tune the smoothness factor | seed 002 §I.B ("warnings of upcoming congestion") | per receiver, three indicators in each of its reports: loss (fraction lost > 0), a queue growing (its RTT sample above `delay_factor` × its smoothed RTT), rising jitter (above `jitter_factor` × its smoothed value); each raises `sf_i` by `sf_step` towards `sf_max`, a report with none lowers it by `sf_step` towards `sf_min` (assumption) |
//! | an increase of one packet per RTT, no slow start | seed 002 §IV.G | a receiver's ask grows by `s / RTT` per RTT (`s·Δt/RTT²` over the Δt since its last report) from the lower of its last ask and what is sent, never past its TCP-friendly rate, not before its RTT is measured; the stream starts at `initial_rate` |
//! | a loss indicator the sender cannot miss | assumption | a report with fraction lost above `heavy_loss` sets that receiver's `sf = sf_max` at once |
//!
//! Receivers without loss have no TCP-friendly rate from the equation (p = 0): only the
//! additive increase bounds their ask then, as for TCP in congestion avoidance.

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
    /// The sending rate never goes below this (16 kbit/s by default), whatever receivers ask.
    pub min_rate: Bitrate,
    /// The sending rate never goes above this; [`RateController::set_rate`] replaces it.
    pub max_rate: Bitrate,
    /// Weight of a new fraction-lost figure in a receiver's smoothed loss rate.
    pub loss_weight: f64,
    /// Lowest smoothness factor (a report without indicators lowers `sf` towards it).
    pub sf_min: f64,
    /// Highest smoothness factor (1: a decrease goes all the way to the TCP-friendly rate).
    pub sf_max: f64,
    /// Smoothness factor of a receiver before its first report.
    pub sf_initial: f64,
    /// How much one congestion indicator raises `sf`, and a quiet report lowers it.
    pub sf_step: f64,
    /// The delay indicator: a receiver's RTT sample above this multiple of its smoothed RTT.
    pub delay_factor: f64,
    /// The jitter indicator: jitter above this multiple of its smoothed value.
    pub jitter_factor: f64,
    /// Fraction lost above which the smoothness factor goes to `sf_max` at once.
    pub heavy_loss: f64,
    /// A receiver not heard for this long no longer counts.
    pub receiver_timeout: Duration,
    /// The RTT a receiver's TCP-friendly rate is computed with until LSR/DLSR give one (its
    /// rate does not increase before).
    pub initial_rtt: Duration,
    /// At most this many receivers are remembered (a bound whatever arrives).
    pub max_receivers: usize,
}

impl AsmpConfig {
    /// The constants for packets of `segment_bytes` on the wire, starting at `initial_rate`
    /// and capped at `max_rate`; the rest take the defaults assumed in the module's table
    /// (loss weight 0.25, `sf` 0.1..=1.0 from 0.5 in steps of 0.2, receiver timeout 15 s,
    /// initial RTT 500 ms, at most 100 000 receivers).
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
    /// Its smoothness factor, tuned by the indicators in its own reports.
    sf: f64,
    /// Its smoothed rate, bytes/s: what it asks the sender for.
    x: f64,
}

/// Which congestion indicators the last report showed (for traces and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Indicators {
    /// The report's fraction lost was above zero.
    pub loss: bool,
    /// Its RTT sample was above `delay_factor` × the receiver's smoothed RTT (a queue growing).
    pub delay: bool,
    /// Its jitter was above `jitter_factor` × the receiver's smoothed jitter.
    pub jitter: bool,
}

/// ASMP's sender: all its state, fed by receiver reports.
#[derive(Clone, Debug)]
pub struct AsmpSender {
    cfg: AsmpConfig,
    /// The sending rate, bytes/s.
    x: f64,
    receivers: BTreeMap<u32, Receiver>,
    last_indicators: Indicators,
}

impl AsmpSender {
    /// A sender at `cfg.initial_rate` that has heard from no receiver yet.
    pub fn new(cfg: AsmpConfig) -> Self {
        AsmpSender {
            x: cfg.initial_rate.as_bps() as f64 / 8.0,
            cfg,
            receivers: BTreeMap::new(),
            last_indicators: Indicators::default(),
        }
    }

    /// The smoothness factor of the receiver that sets the rate (the initial one before any
    /// report).
    pub fn smoothness_factor(&self) -> f64 {
        let latest = self.receivers.values().map(|r| r.heard).max();
        let timeout = self.cfg.receiver_timeout;
        self.receivers
            .values()
            .filter(|r| latest.is_some_and(|t| t.saturating_since(r.heard) <= timeout))
            .min_by(|a, b| a.x.total_cmp(&b.x))
            .map_or(self.cfg.sf_initial, |r| r.sf)
            .clamp(self.cfg.sf_min, self.cfg.sf_max)
    }

    /// The congestion indicators of the last report received (any receiver).
    pub fn indicators(&self) -> Indicators {
        self.last_indicators
    }

    /// The current sending rate in bytes per second (the target rate is this × 8 bit/s).
    pub fn rate_bytes_per_s(&self) -> f64 {
        self.x
    }

    fn s(&self) -> f64 {
        self.cfg.segment_bytes.max(1) as f64
    }

    /// A receiver report block about the stream arrived at `now`: that receiver's state and
    /// smoothed rate move, and the sender sends at the lowest of the rates asked.
    pub fn on_report(&mut self, now: Timestamp, fb: &Feedback) {
        let (cfg, s, x_sent) = (self.cfg, self.s(), self.x);
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
            sf: cfg.sf_initial.clamp(cfg.sf_min, cfg.sf_max),
            x: x_sent,
        });
        let dt = now.saturating_since(r.heard);
        r.heard = now;
        let ind = observe(&cfg, r, fb);
        r.sf = tune(&cfg, r.sf, fb.fraction_lost, ind);
        r.x = smoothed_rate(r, s, x_sent, dt, cfg.initial_rtt);
        self.last_indicators = ind;
        self.follow_receivers(now);
    }

    /// The sending rate: the lowest rate asked by the receivers heard lately.
    fn follow_receivers(&mut self, now: Timestamp) {
        let timeout = self.cfg.receiver_timeout;
        let lowest = self
            .receivers
            .values()
            .filter(|r| now.saturating_since(r.heard) <= timeout)
            .map(|r| r.x)
            .fold(f64::INFINITY, f64::min);
        if lowest.is_finite() {
            self.x = lowest;
        }
        let lo = self.cfg.min_rate.as_bps() as f64 / 8.0;
        let hi = self.cfg.max_rate.as_bps() as f64 / 8.0;
        self.x = self.x.clamp(lo.min(hi), hi);
    }
}

/// A report's figures into its receiver's loss, RTT and jitter; the congestion indicators it
/// shows: loss, an RTT rising above `delay_factor` × the receiver's smoothed RTT (a queue
/// growing), jitter above `jitter_factor` × its smoothed value.
fn observe(cfg: &AsmpConfig, r: &mut Receiver, fb: &Feedback) -> Indicators {
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
        if let Some(old) = r.rtt {
            ind.delay = sample.as_secs_f64() > cfg.delay_factor * old.as_secs_f64();
        }
        r.rtt = Some(
            r.rtt
                .map_or(sample, |old| old.mul_f64(0.875) + sample.mul_f64(0.125)),
        );
    }
    let j = fb.jitter.as_secs_f64();
    if let Some(avg) = r.jitter_avg {
        ind.jitter = avg > 0.0 && j > cfg.jitter_factor * avg;
    }
    r.jitter_avg = Some(r.jitter_avg.map_or(j, |avg| 0.875 * avg + 0.125 * j));
    ind
}

/// The smoothness factor after a report: up a step per indicator, down a step without any, at
/// once to the top on heavy loss.
fn tune(cfg: &AsmpConfig, sf: f64, fraction_lost: f64, ind: Indicators) -> f64 {
    let n = [ind.loss, ind.delay, ind.jitter]
        .iter()
        .filter(|b| **b)
        .count();
    if fraction_lost > cfg.heavy_loss {
        cfg.sf_max
    } else if n > 0 {
        sf + cfg.sf_step * n as f64
    } else {
        sf - cfg.sf_step
    }
    .clamp(cfg.sf_min, cfg.sf_max)
}

/// A receiver's smoothed rate after its report, `dt` after its last: from what it asked, at
/// most what is sent (`x_sent`), a decrease goes `sf` of the way to its TCP-friendly rate
/// (with `rtt_guess` until its RTT is measured: the cautious side); an increase is one packet
/// per RTT per RTT (none until its RTT is measured), never past the TCP-friendly rate.
fn smoothed_rate(r: &Receiver, s: f64, x_sent: f64, dt: Duration, rtt_guess: Duration) -> f64 {
    let x_tcp = if r.loss > 0.0 {
        throughput_bytes_per_s(s, r.rtt.unwrap_or(rtt_guess), r.loss)
    } else {
        f64::INFINITY
    };
    let base = r.x.min(x_sent);
    if x_tcp < base {
        return base - r.sf * (base - x_tcp);
    }
    match r.rtt {
        Some(rtt) => {
            let rtt = rtt.as_secs_f64().max(1e-3);
            (base + s * dt.as_secs_f64() / (rtt * rtt)).min(x_tcp)
        }
        None => base,
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
        if self.reads(feedback) {
            self.on_report(now, feedback);
        }
    }
    /// Only receiver reports: TFRC/TFMCC fields ride other packets.
    fn reads(&self, feedback: &Feedback) -> bool {
        feedback.tfrc.is_none() && feedback.tfmcc.is_none()
    }
    fn on_receiver_left(&mut self, now: Timestamp, receiver: u32) {
        if self.receivers.remove(&receiver).is_some() {
            self.follow_receivers(now);
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

    /// Each receiver's smoothness factor follows its own reports: 44 calm receivers do not
    /// talk down the one that is losing packets, nor does it talk them up.
    #[test]
    fn each_receiver_tunes_its_own_smoothness_factor() {
        let mut a = AsmpSender::new(AsmpConfig::new(1000, Bitrate::mbps(4), Bitrate::mbps(10)));
        let ms = Timestamp::from_millis;
        for k in 0..5 {
            for id in 0..45 {
                let lost = if id == 7 { 0.02 } else { 0.0 };
                a.on_report(ms(1000 * k + 10 * u64::from(id)), &rr(id, lost, 60, 1));
            }
        }
        // The lossy receiver's loss raised its factor a step per report (0.5 → 1.0); the
        // others' calm lowered theirs to the floor.
        assert!(
            (a.receivers[&7].sf - 1.0).abs() < 1e-9,
            "{}",
            a.receivers[&7].sf
        );
        assert!(
            a.receivers
                .values()
                .filter(|r| (r.sf - 0.1).abs() < 1e-9)
                .count()
                == 44
        );
        // It sets the rate, and its factor is the one reported.
        assert_eq!(a.smoothness_factor(), 1.0);
        assert_eq!(a.rate_bytes_per_s(), a.receivers[&7].x);
    }

    /// The delay indicator warns of a queue growing: an RTT above the receiver's usual, not a
    /// queue that stays full beside TCP.
    #[test]
    fn the_delay_indicator_is_a_rising_rtt_not_a_long_one() {
        let mut a = asmp();
        let ms = Timestamp::from_millis;
        a.on_report(ms(0), &rr(1, 0.0, 40, 1));
        a.on_report(ms(1000), &rr(1, 0.0, 120, 1));
        assert!(a.indicators().delay, "40 → 120 ms: rising");
        for k in 2..40 {
            a.on_report(ms(1000 * k), &rr(1, 0.0, 120, 1));
        }
        assert!(!a.indicators().delay, "120 ms for 38 s is the usual now");
    }

    /// A receiver asks for at most a packet per RTT per RTT more than it is sent, and nothing
    /// more before it knows its RTT.
    #[test]
    fn a_receiver_asks_for_a_little_more_than_it_gets_and_only_with_an_rtt() {
        let mut cfg = AsmpConfig::new(1000, Bitrate::kbps(400), Bitrate::mbps(100));
        cfg.max_rate = Bitrate::mbps(100);
        let mut a = AsmpSender::new(cfg);
        let ms = Timestamp::from_millis;
        let mut no_rtt = rr(1, 0.0, 100, 1);
        no_rtt.rtt = None;
        a.on_report(ms(0), &no_rtt);
        a.on_report(ms(1000), &no_rtt);
        assert_eq!(a.rate_bytes_per_s(), 50_000.0, "no increase without an RTT");
        // The sender is held at 60 kB/s (its own limit): the receiver's ask stays within a
        // step of it, however long it has been calm.
        a.set_rate(Bitrate::bps(480_000));
        for k in 2..30 {
            a.on_report(ms(1000 * k), &rr(1, 0.0, 100, 1));
        }
        assert!(
            a.receivers[&1].x <= 60_000.0 + 100_000.0 + 1e-6,
            "{}",
            a.receivers[&1].x
        );
    }

    /// A receiver that says goodbye stops holding the rate down at once, not 15 s later.
    #[test]
    fn a_receiver_that_says_goodbye_no_longer_counts() {
        let mut a = AsmpSender::new(AsmpConfig::new(1000, Bitrate::mbps(1), Bitrate::mbps(10)));
        let ms = Timestamp::from_millis;
        a.on_report(ms(0), &rr(1, 0.0, 100, 1));
        a.on_report(ms(0), &rr(2, 0.0, 100, 1));
        a.on_report(ms(1000), &rr(1, 0.0, 100, 1));
        a.on_report(ms(1000), &rr(2, 0.3, 100, 1));
        let held = a.rate_bytes_per_s();
        assert!(held < 125_000.0, "{held}");
        a.on_receiver_left(ms(1010), 2);
        assert!(a.rate_bytes_per_s() > held, "{}", a.rate_bytes_per_s());
        assert_eq!(a.rate_bytes_per_s(), a.receivers[&1].x);
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
