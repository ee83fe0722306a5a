//! A TFMCC receiver (RFC 4654 §4): its own TCP-friendly rate, its round-trip time, and when it
//! answers the sender's feedback rounds.
//!
//! - **Rate (§4.3.4, §4.4):** before any loss `X_r = 2 X_recv` (the rate received over the
//!   last two RTTs, slow start's limit); after, the throughput equation with the loss event
//!   rate of a [`LossHistory`] (RFC 5348 §5, as RFC 4654 §5 takes it) and the receiver's RTT,
//!   or `R_max` until it has one; never below one packet per 8 s.
//! - **RTT (§4.3.2–3):** `R_sample = now − (ts_echo + t_delay)` when the sender echoes this
//!   receiver's timestamp; `R = q R + (1 − q) R_sample`, q = 0.9 for the CLR and 0.5 for the
//!   others. Between echoes the one-way delay keeps it current: at a measurement
//!   `D_r = R_sample − (now − ts_i)` (`ts_i` the sender's clock when it sent the echo), and
//!   for a data packet j, `R' = max(D_r + now − ts_j, 1 ms)`; no clock synchronisation is
//!   needed, the offsets cancel.
//! - **Rounds (§4.5):** a new round number starts a timer
//!   `t = max(T (1 + ln x / ln N), 0)`, x uniform in (0, 1], N the bound on the group's size;
//!   with a bias `γ > 0` (Metronome's option, after the SIGCOMM 2001 paper's idea of biasing
//!   feedback to low rates; RFC 4654 has none), `t = max(T (γ r + (1 − γ)(1 + ln x / ln N)), 0)`,
//!   `r = X_r / X` clamped to [0, 1]: receivers below the sending rate answer earlier.
//!   The timer is cancelled when the sender's suppression rate `X_supp` falls below the
//!   receiver's rate (and its `R_max` covers the receiver's RTT), or below `X_fbr`, the rate at
//!   the round's start; a newer round cancels an older one's timer.
//! - **The CLR (§4.5)** answers once per RTT, outside the rounds, never suppressed.

use super::{ReceiverFeedback, SenderInfo};
use crate::tfrc::equation::throughput_bytes_per_s;
use crate::tfrc::loss::LossHistory;
use metronome_time::Timestamp;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::time::Duration;

/// A receiver's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TfmccReceiverConfig {
    /// The receiver's id (its RTCP SSRC).
    pub id: u32,
    /// N, the bound on the group's size the feedback timers are spread for (RFC: 10 000).
    pub group_bound: u32,
    /// γ, the timer's bias towards low rates (0: RFC 4654's timer).
    pub bias: f64,
    /// Seed of the timers' randomness.
    pub seed: u64,
}

impl TfmccReceiverConfig {
    pub fn new(id: u32, seed: u64) -> Self {
        TfmccReceiverConfig {
            id,
            group_bound: 10_000,
            bias: 0.25,
            seed,
        }
    }
}

/// Packets kept for the receive rate (a bound whatever the rate).
const MAX_RECENT: usize = 65_536;

#[derive(Clone, Debug)]
pub struct TfmccReceiver {
    cfg: TfmccReceiverConfig,
    rng: ChaCha8Rng,
    history: LossHistory,
    /// The smoothed RTT, once measured.
    rtt: Option<Duration>,
    /// `D_r`, ns (signed: mixed clocks), from the last measurement.
    d_r: Option<i128>,
    /// The RTT between echoes (`R'`), from the last data packet.
    rtt_now: Option<Duration>,
    /// The last sender information, and when it came.
    info: Option<SenderInfo>,
    round: Option<u16>,
    /// The rate at the start of the round (`X_fbr`), and when this round's feedback is due.
    x_fbr: f64,
    timer: Option<Timestamp>,
    /// The CLR's next once-per-RTT report.
    clr_due: Option<Timestamp>,
    /// Arrivals (time, bytes) of the last few RTTs, for `X_recv`.
    recent: VecDeque<(Timestamp, u32)>,
    recent_bytes: u64,
    s: f64,
    /// The last data packet's sender time and arrival (echoed in reports).
    last_sent: Option<(Timestamp, Timestamp)>,
    leaving: bool,
    sent_reports: u64,
}

impl TfmccReceiver {
    pub fn new(cfg: TfmccReceiverConfig) -> Self {
        TfmccReceiver {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            history: LossHistory::new(),
            rtt: None,
            d_r: None,
            rtt_now: None,
            info: None,
            round: None,
            x_fbr: f64::INFINITY,
            timer: None,
            clr_due: None,
            recent: VecDeque::new(),
            recent_bytes: 0,
            s: 0.0,
            last_sent: None,
            leaving: false,
            sent_reports: 0,
        }
    }

    pub fn id(&self) -> u32 {
        self.cfg.id
    }

    pub fn history(&self) -> &LossHistory {
        &self.history
    }

    /// Reports sent so far.
    pub fn reports(&self) -> u64 {
        self.sent_reports
    }

    /// The RTT in use: the one-way-adjusted value, the smoothed one, else the sender's `R_max`
    /// (500 ms before anything is heard, RFC 4654 §3.1).
    pub fn rtt(&self) -> Duration {
        self.rtt_now
            .or(self.rtt)
            .or(self.info.map(|i| i.r_max))
            .unwrap_or(Duration::from_millis(500))
    }

    pub fn has_rtt(&self) -> bool {
        self.rtt.is_some()
    }

    fn is_clr(&self) -> bool {
        self.info.is_some_and(|i| i.clr == Some(self.cfg.id))
    }

    /// `X_recv`, bytes/s: what arrived over the last two RTTs (RFC 4654 §4.3.4: k = 2).
    pub fn x_recv(&self, now: Timestamp) -> f64 {
        let span = self.recv_span();
        let first = self.recent.front().map_or(now, |(t, _)| *t);
        // A receiver that joined less than two RTTs ago divides by the time it has listened.
        let listened = now.saturating_since(first).max(self.rtt() / 2);
        self.recent_bytes as f64 / span.min(listened).as_secs_f64().max(1e-3)
    }

    fn recv_span(&self) -> Duration {
        (self.rtt() * 2).max(Duration::from_millis(10))
    }

    /// `X_r`, bytes/s: the rate this receiver would allow.
    pub fn rate(&self, now: Timestamp) -> f64 {
        let s = self.s.max(1.0);
        let floor = s / 8.0;
        let p = self.history.loss_event_rate();
        let x = if p > 0.0 {
            throughput_bytes_per_s(s, self.rtt(), p)
        } else {
            2.0 * self.x_recv(now)
        };
        x.max(floor)
    }

    /// A data packet: `seq` extended, `sent` on the sender's clock (from its RTP timestamp),
    /// `size` bytes, arrived at `now`.
    pub fn on_packet(&mut self, now: Timestamp, seq: u64, sent: Timestamp, size: usize) {
        self.s = if self.s == 0.0 {
            size as f64
        } else {
            0.9 * self.s + 0.1 * size as f64
        };
        self.last_sent = Some((sent, now));
        if let Some(d) = self.d_r {
            let r = d + now.as_nanos() as i128 - sent.as_nanos() as i128;
            self.rtt_now = Some(Duration::from_nanos(r.max(1_000_000) as u64));
        }
        self.recent.push_back((now, size as u32));
        self.recent_bytes += size as u64;
        let keep = now.saturating_sub(self.recv_span());
        while self.recent.len() > MAX_RECENT || self.recent.front().is_some_and(|(t, _)| *t < keep)
        {
            if let Some((_, b)) = self.recent.pop_front() {
                self.recent_bytes -= b as u64;
            }
        }
        let x = self.x_recv(now);
        self.history.set_receive_rate(x, self.s.max(1.0));
        self.history.on_packet(seq, sent, self.rtt());
    }

    /// The sender's fields arrived at `now`; `sent` is when it sent them, on its clock.
    pub fn on_sender_info(&mut self, now: Timestamp, info: &SenderInfo, sent: Timestamp) {
        let was_clr = self.is_clr();
        self.info = Some(*info);
        if let Some(echo) = info.echo.filter(|e| e.receiver == self.cfg.id) {
            // Our timestamp (µs of our clock, 32 bits) echoed, plus the sender's holding time.
            let ours = (now.as_nanos() / 1000) as u32;
            let ago_us = ours.wrapping_sub(echo.ts_us);
            if ago_us < 1 << 31 {
                let sample = Duration::from_micros(ago_us as u64)
                    .saturating_sub(echo.delay)
                    .max(Duration::from_millis(1));
                let q = if self.is_clr() { 0.9 } else { 0.5 };
                self.rtt = Some(match self.rtt {
                    None => sample,
                    Some(r) => r.mul_f64(q) + sample.mul_f64(1.0 - q),
                });
                // D_r: the return path's share, in mixed clocks.
                self.d_r = Some(
                    sample.as_nanos() as i128 - now.as_nanos() as i128 + sent.as_nanos() as i128,
                );
                self.rtt_now = None;
            }
        }
        if self.is_clr() {
            if !was_clr || self.clr_due.is_none() {
                self.clr_due = Some(now);
            }
            self.timer = None;
        } else {
            self.clr_due = None;
        }
        let new_round = match self.round {
            None => true,
            // Newer, also across a wrap (RFC 4654 §4.5).
            Some(r) => r != info.round && info.round.wrapping_sub(r) < 1 << 15,
        };
        if new_round {
            self.round = Some(info.round);
            self.x_fbr = self.rate(now);
            self.timer = if self.is_clr() {
                None
            } else {
                Some(now + self.feedback_delay(now, info))
            };
        } else if self.timer.is_some() && self.suppressed(now, info) {
            self.timer = None;
        }
    }

    /// Whether the round's feedback from others makes ours unneeded (§4.5).
    fn suppressed(&self, now: Timestamp, info: &SenderInfo) -> bool {
        let x = self.rate(now);
        (info.x_supp < x && info.r_max >= self.rtt()) || info.x_supp < self.x_fbr
    }

    /// The feedback timer for a round of feedback delay `T`.
    fn feedback_delay(&mut self, now: Timestamp, info: &SenderInfo) -> Duration {
        let u: f64 = 1.0 - self.rng.random::<f64>(); // (0, 1]
        let n = (self.cfg.group_bound.max(2) as f64).ln();
        let exp = 1.0 + u.ln() / n;
        let g = self.cfg.bias.clamp(0.0, 1.0);
        let r = if info.x_send > 0.0 && info.x_send.is_finite() {
            (self.rate(now) / info.x_send).clamp(0.0, 1.0)
        } else {
            1.0
        };
        let f = (g * r + (1.0 - g) * exp).max(0.0);
        info.feedback_delay.mul_f64(f)
    }

    /// This receiver leaves the group: its next report says so (§4.4), and is sent at once.
    pub fn leave(&mut self, now: Timestamp) {
        self.leaving = true;
        self.timer = Some(now);
    }

    /// When a report is due.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        match (self.timer, self.clr_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The report due by `now`, if any.
    pub fn poll_report(&mut self, now: Timestamp) -> Option<ReceiverFeedback> {
        let timer = self.timer.is_some_and(|t| t <= now);
        let clr = self.clr_due.is_some_and(|t| t <= now);
        if !timer && !clr {
            return None;
        }
        if timer {
            self.timer = None;
        }
        if clr {
            self.clr_due = Some(now + self.rtt());
        }
        // Nothing heard yet: nothing to say.
        let round = self.round?;
        self.sent_reports += 1;
        Some(ReceiverFeedback {
            ts_us: (now.as_nanos() / 1000) as u32,
            rtt: self.rtt,
            x_r: self.rate(now),
            x_recv: self.x_recv(now),
            p: self.history.loss_event_rate(),
            echo: self
                .last_sent
                .map(|(sent, at)| (sent, now.saturating_since(at))),
            round,
            have_loss: self.history.counts().0 > 0,
            leaving: self.leaving,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tfmcc::Echo;

    fn info(round: u16, x_supp: f64, clr: Option<u32>, echo: Option<Echo>) -> SenderInfo {
        SenderInfo {
            round,
            slow_start: false,
            x_supp,
            r_max: Duration::from_millis(200),
            feedback_delay: Duration::from_millis(1200),
            clr,
            echo,
            x_send: 100_000.0,
        }
    }

    fn ms(v: u64) -> Timestamp {
        Timestamp::from_millis(v)
    }

    #[test]
    fn rtt_from_the_echo_then_kept_current_by_the_one_way_delay() {
        let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        // Before anything: 500 ms; then the sender's R_max.
        assert_eq!(r.rtt(), Duration::from_millis(500));
        r.on_sender_info(ms(20), &info(0, f64::INFINITY, None, None), ms(0));
        assert_eq!(r.rtt(), Duration::from_millis(200));
        // Our report stamped at 1000 ms (µs of our clock), held 5 ms by the sender, echoed in
        // a packet sent at 1020 ms (sender clock; the sender's clock is 500 ms behind ours),
        // arriving at 1080 ms: RTT 75 ms.
        let echo = Echo {
            receiver: 5,
            ts_us: 1_000_000,
            delay: Duration::from_millis(5),
        };
        r.on_sender_info(ms(1080), &info(0, f64::INFINITY, None, Some(echo)), ms(520));
        assert_eq!(r.rtt(), Duration::from_millis(75));
        assert!(r.has_rtt());
        // The path gets 10 ms longer one way: a data packet sent at 600 (sender clock) that
        // arrives at 1170 took 10 ms more than the echo's packet: R' = 85 ms, no echo needed.
        r.on_packet(ms(1170), 1, ms(600), 1000);
        assert_eq!(r.rtt(), Duration::from_millis(85));
    }

    #[test]
    fn a_round_starts_a_timer_within_t_and_a_lower_suppression_rate_cancels_it() {
        let mut fired = Vec::new();
        for seed in 0..200 {
            let mut cfg = TfmccReceiverConfig::new(5, seed);
            cfg.bias = 0.0;
            let mut r = TfmccReceiver::new(cfg);
            r.on_sender_info(ms(0), &info(3, f64::INFINITY, None, None), ms(0));
            let t = r.poll_timeout().unwrap();
            assert!(t <= ms(1200));
            fired.push(t.as_secs_f64());
            // X_supp below our rate (and R_max covering our RTT): suppressed.
            for k in 0..50 {
                r.on_packet(ms(10 * k), k, ms(10 * k), 1000);
            }
            r.on_sender_info(ms(600), &info(3, 1.0, None, None), ms(600));
            assert_eq!(r.poll_timeout(), None);
            assert_eq!(r.poll_report(ms(5000)), None);
        }
        // RFC 4654's timer: P(t = 0) = 1/N; most timers late in the interval (t ≥ T/2 with
        // probability 1 − N^(−1/2) = 0.99).
        let late = fired.iter().filter(|t| **t >= 0.6).count();
        assert!(late >= 190, "{late} of 200");
    }

    #[test]
    fn the_clr_reports_once_per_rtt_and_a_lower_rate_answers_earlier_with_the_bias() {
        let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        r.on_sender_info(ms(0), &info(0, f64::INFINITY, Some(5), None), ms(0));
        let mut at = Vec::new();
        for k in 0..100 {
            let now = ms(10 * k);
            r.on_packet(now, k, now, 1000);
            if r.poll_report(now).is_some() {
                at.push(k * 10);
            }
        }
        // Every R_max (no RTT measured: 200 ms).
        assert_eq!(at, vec![0, 200, 400, 600, 800]);
        // With the bias, a receiver at a tenth of the sending rate answers before one at it.
        let timer = |x_recv_pkts: u64| {
            let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(6, 9));
            for k in 0..x_recv_pkts {
                r.on_packet(ms(k * 1000 / x_recv_pkts), k, ms(0), 1000);
            }
            r.on_sender_info(ms(1000), &info(1, f64::INFINITY, None, None), ms(1000));
            r.poll_timeout().unwrap()
        };
        assert!(timer(5) < timer(50), "{:?} {:?}", timer(5), timer(50));
    }
}
