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
//! - **Rounds (§4.5):** a new round number starts a feedback timer (`feedback_timer.rs`) (its draw, rescaling
//!   and idle rule are there). The timer is cancelled when the sender's `R_max` covers the
//!   receiver's RTT and its suppression rate `X_supp` is below the receiver's rate or below
//!   `X_fbr`, the rate at the round's start, checked at each data packet and each
//!   announcement; a newer round cancels an older one's timer.
//! - **The CLR (§4.5)** answers once per RTT, outside the rounds, never suppressed.
//! - **`have_loss` (§4.3.1)** is cleared after 10 RTTs without a data packet, and the
//!   receiver reports `2 X_recv` again (§4.4), until it sees a new loss event.
//! - **The first loss interval (§5.6)** inverts the simplified equation
//!   `X = sqrt(3/2) s / (R sqrt(1/l_0))` at `X_recv` over the last RTT:
//!   `l_0 = (X_recv R / (sqrt(3/2) s))²`; made with `R_max` for want of an RTT, it is scaled
//!   by `(R / R_max)²` at the first RTT measured, if the history still holds it.
//! - **Leaving (§4.4):** a receiver whose calculated rate has stayed below the one packet
//!   per 8 s it reports instead, with the sender sending faster than it calculates, for more
//!   than 120 s leaves: its last report says so ([`TfmccReceiver::leave`]), then it is silent
//!   ([`TfmccReceiver::has_left`]; the application leaves the group). So does one that
//!   leaves of its own accord, with one flagged report at once.
//! - **A leaving CLR (§4.2)** flags every report of the feedback round before the leave
//!   takes effect: it stays, answering once per RTT with the flag set, until the sender
//!   begins a new round or names another CLR (at most `2T = 12 R_max`, the longest a round
//!   lasts, §3.4), and only then has left ([`TfmccReceiver::leave_pending`] until then).

use super::feedback_timer::FeedbackTimer;
use super::{ReceiverFeedback, SenderInfo};
use crate::tfrc::equation::throughput_bytes_per_s;
use crate::tfrc::loss::LossHistory;
use metronome_time::Timestamp;
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
    /// The settings of receiver `id` with timer randomness from `seed`: RFC 4654 §4.5's
    /// timer, N = 10 000 and no bias (γ = 0; `bias` opts into one towards low rates).
    pub fn new(id: u32, seed: u64) -> Self {
        TfmccReceiverConfig {
            id,
            group_bound: 10_000,
            bias: 0.0,
            seed,
        }
    }
}

/// Packets kept for the receive rate (a bound whatever the rate).
const MAX_RECENT: usize = 65_536;

/// How long a receiver may calculate less than the lowest rate it reports before it leaves
/// (RFC 4654 §4.4).
pub const LEAVE_AFTER: Duration = Duration::from_secs(120);

/// One TFMCC receiver's state (see the module docs): its loss history, RTT, receive rate and
/// feedback timer; fed data packets and the sender's announcements, it tells when to report
/// and what.
#[derive(Clone, Debug)]
pub struct TfmccReceiver {
    cfg: TfmccReceiverConfig,
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
    /// The rate at the start of the round (`X_fbr`).
    x_fbr: f64,
    /// When this round's feedback is due.
    timer: FeedbackTimer,
    /// Loss events counted when `have_loss` was last cleared by an idle spell (§4.3.1).
    idle_cleared_at_events: Option<u64>,
    /// The CLR's next once-per-RTT report.
    clr_due: Option<Timestamp>,
    /// Arrivals (time, bytes) of the last few RTTs, for `X_recv`.
    recent: VecDeque<(Timestamp, u32)>,
    recent_bytes: u64,
    s: f64,
    /// The last data packet's sender time and arrival (echoed in reports).
    last_sent: Option<(Timestamp, Timestamp)>,
    leaving: bool,
    /// A leaving CLR's last moment in the group (§4.2: the round's end, at most 2T away).
    leave_by: Option<Timestamp>,
    /// Reports sent with the leave flag: a leave takes effect only after one.
    flagged: u32,
    /// It was the CLR when it wished to leave: it stays until its round ends (§4.2).
    clr_leaving: bool,
    /// The leaving report went out: nothing more is sent.
    left: bool,
    /// Since when the calculated rate has been below the reported floor, the sender faster.
    below_floor_since: Option<Timestamp>,
    /// `R_max` the first loss interval was made with, until the first RTT corrects it.
    first_interval_r_max: Option<Duration>,
    sent_reports: u64,
}

impl TfmccReceiver {
    /// A receiver that has heard nothing yet: no RTT, no loss, no round.
    pub fn new(cfg: TfmccReceiverConfig) -> Self {
        TfmccReceiver {
            timer: FeedbackTimer::new(cfg.seed, cfg.group_bound, cfg.bias),
            cfg,
            history: LossHistory::new(),
            rtt: None,
            d_r: None,
            rtt_now: None,
            info: None,
            round: None,
            x_fbr: f64::INFINITY,
            idle_cleared_at_events: None,
            clr_due: None,
            recent: VecDeque::new(),
            recent_bytes: 0,
            s: 0.0,
            last_sent: None,
            leaving: false,
            leave_by: None,
            flagged: 0,
            clr_leaving: false,
            left: false,
            below_floor_since: None,
            first_interval_r_max: None,
            sent_reports: 0,
        }
    }

    /// The receiver's id (its RTCP SSRC), as the sender names it in the CLR and echoes.
    pub fn id(&self) -> u32 {
        self.cfg.id
    }

    /// The loss history its loss event rate comes from.
    pub fn history(&self) -> &LossHistory {
        &self.history
    }

    /// Reports sent so far.
    pub fn reports(&self) -> u64 {
        self.sent_reports
    }

    /// The RTT in use: the one-way-adjusted value, the smoothed one, else the sender's `R_max`
    /// (500 ms before anything is heard, RFC 4654 §3.1); never below 1 ms, as RFC 4654's
    /// samples (§4.3.2), whatever an announcement says (one of `R_max` 0 would have the CLR
    /// report in a loop).
    pub fn rtt(&self) -> Duration {
        self.rtt_now
            .or(self.rtt)
            .or(self.info.map(|i| i.r_max))
            .unwrap_or(Duration::from_millis(500))
            .max(Duration::from_millis(1))
    }

    /// Whether an echo has given it a measured RTT (`have_RTT`); until then it uses `R_max`.
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

    /// `X_r`, bytes/s: the rate this receiver would allow, and reports.
    pub fn rate(&self, now: Timestamp) -> f64 {
        self.calculated_rate(now).max(self.floor())
    }

    /// The lowest rate reported: one packet per 8 s (§4.4).
    fn floor(&self) -> f64 {
        self.s.max(1.0) / 8.0
    }

    /// The rate calculated, before the floor.
    fn calculated_rate(&self, now: Timestamp) -> f64 {
        let p = self.history.loss_event_rate();
        if p > 0.0 && self.have_loss() {
            throughput_bytes_per_s(self.s.max(1.0), self.rtt(), p)
        } else {
            2.0 * self.x_recv(now)
        }
    }

    /// `have_loss` (§4.3.1): a loss event seen, and none cleared by an idle spell since.
    pub fn have_loss(&self) -> bool {
        let events = self.history.counts().0;
        events > 0 && self.idle_cleared_at_events.is_none_or(|at| events > at)
    }

    /// §4.3.1: no data packet for 10 RTTs clears `have_loss`, so that the sender may slow
    /// start again; the next loss event sets it.
    fn clear_loss_after_idle(&mut self, now: Timestamp) {
        let idle = self
            .last_sent
            .is_some_and(|(_, at)| now.saturating_since(at) >= self.rtt() * 10);
        if idle && self.have_loss() {
            self.idle_cleared_at_events = Some(self.history.counts().0);
        }
    }

    /// Whether this receiver has sent its leaving report (and so is silent).
    pub fn has_left(&self) -> bool {
        self.left
    }

    /// `X_recv` over the last RTT only, bytes/s (§5.6's).
    fn x_recv_last_rtt(&self, now: Timestamp) -> f64 {
        let rtt = self.rtt();
        let from = now.saturating_sub(rtt);
        let bytes: u64 = self
            .recent
            .iter()
            .rev()
            .take_while(|(t, _)| *t >= from)
            .map(|(_, b)| u64::from(*b))
            .sum();
        let first = self.recent.front().map_or(now, |(t, _)| *t);
        let listened = now.saturating_since(first).max(rtt / 2).min(rtt);
        bytes as f64 / listened.as_secs_f64().max(1e-3)
    }

    /// §5.6: the interval before the first loss event, from the simplified equation.
    fn make_first_interval(&mut self, now: Timestamp) {
        let (s, r) = (self.s.max(1.0), self.rtt().as_secs_f64());
        let l0 = (self.x_recv_last_rtt(now) * r / (1.5f64.sqrt() * s)).powi(2);
        self.history.set_first_interval(l0.round().max(1.0) as u64);
        self.first_interval_r_max = (!self.has_rtt()).then(|| self.rtt());
    }

    /// §5.6: the first RTT measured corrects an interval made with `R_max`.
    fn correct_first_interval(&mut self) {
        let (Some(r_max), Some(r)) = (self.first_interval_r_max.take(), self.rtt) else {
            return;
        };
        if let Some(l0) = self.history.first_interval() {
            let f = (r.as_secs_f64() / r_max.as_secs_f64().max(1e-9)).powi(2);
            self.history
                .set_first_interval((l0 as f64 * f).round().max(1.0) as u64);
        }
    }

    /// §4.4: below the floor for more than [`LEAVE_AFTER`], the sender faster: leave.
    fn check_floor(&mut self, now: Timestamp) {
        let calc = self.calculated_rate(now);
        let sender_faster = self.info.is_some_and(|i| i.x_send > calc);
        if calc >= self.floor() || !sender_faster {
            self.below_floor_since = None;
            return;
        }
        let since = *self.below_floor_since.get_or_insert(now);
        if now.saturating_since(since) > LEAVE_AFTER && !self.leaving {
            self.leave(now);
        }
    }

    /// A data packet: `seq` extended, `sent` on the sender's clock (from its RTP timestamp),
    /// `size` bytes, arrived at `now`.
    pub fn on_packet(&mut self, now: Timestamp, seq: u64, sent: Timestamp, size: usize) {
        self.s = if self.s == 0.0 {
            size as f64
        } else {
            0.9 * self.s + 0.1 * size as f64
        };
        self.clear_loss_after_idle(now);
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
        let events = self.history.counts().0;
        self.history.on_packet(seq, sent, self.rtt());
        if events == 0 && self.history.counts().0 > 0 {
            self.make_first_interval(now);
        }
        self.check_floor(now);
        // §4.5: each data packet may carry what suppresses this round's feedback.
        if let Some(info) = self
            .info
            .filter(|_| self.timer.is_running() && !self.leaving)
        {
            if self.suppressed(now, &info) {
                self.cancel_timer();
            }
        }
    }

    fn cancel_timer(&mut self) {
        self.timer.cancel();
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
                self.correct_first_interval();
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
            if !self.leaving {
                self.cancel_timer();
            }
        } else {
            self.clr_due = None;
        }
        let new_round = match self.round {
            None => true,
            // Newer, also across a wrap (RFC 4654 §4.5).
            Some(r) => r != info.round && info.round.wrapping_sub(r) < 1 << 15,
        };
        if self.leaving {
            if self.leave_by.is_some() && (new_round || !self.is_clr()) {
                self.end_leave(now);
            }
            return;
        }
        if new_round {
            self.round = Some(info.round);
            self.x_fbr = self.rate(now);
            self.cancel_timer();
            if !self.is_clr() {
                let rate = self.rate(now);
                self.timer.start(now, info, rate);
            }
        } else if self.timer.is_running() && self.suppressed(now, info) {
            self.cancel_timer();
        } else {
            self.timer.rescale(info.r_max);
        }
    }

    /// Whether the round's feedback from others makes ours unneeded (§4.5): the sender's
    /// `R_max` covers our RTT, and its suppression rate is below our rate now or at the
    /// round's start. A receiver whose RTT is above `R_max` is never suppressed (§3.4).
    fn suppressed(&self, now: Timestamp, info: &SenderInfo) -> bool {
        info.r_max >= self.rtt() && (info.x_supp < self.rate(now) || info.x_supp < self.x_fbr)
    }

    /// §4.5: a timer due with no data packet for more than `R_max` waits longer.
    fn put_off_while_idle(&mut self, now: Timestamp) -> bool {
        let (Some((_, at)), Some(info)) = (self.last_sent, self.info) else {
            return false;
        };
        !self.leaving && self.timer.put_off_while_idle(now, at, info.r_max)
    }

    /// This receiver wishes to leave the group: its next report says so, and is due at once.
    /// A receiver that is not the CLR has left after it; the CLR flags every report until the
    /// round ends (§4.2), [`TfmccReceiver::leave_pending`] until then. Calling it again
    /// changes nothing.
    pub fn leave(&mut self, now: Timestamp) {
        if self.leaving {
            return;
        }
        self.leaving = true;
        // One that is named CLR only later has gone by then, after its one flagged report:
        // the sender's case 3 replaces it.
        match self.info.filter(|_| self.is_clr()) {
            Some(info) => {
                // 2T, the longest a round lasts (§3.4), as the sender announces T.
                let t = info.feedback_delay.max(Duration::from_millis(1));
                self.leave_by = Some(now + 2 * t);
                self.clr_leaving = true;
                self.clr_due = Some(now);
            }
            None => self.timer.fire_at(now),
        }
    }

    /// Whether this receiver is the CLR on its way out (§4.2): it still receives, and reports
    /// with the leave flag, until the round ends; then [`TfmccReceiver::has_left`].
    pub fn leave_pending(&self) -> bool {
        self.clr_leaving && !self.left
    }

    /// The round is over (§4.2): the leave takes effect, nothing more is sent; or, if no
    /// flagged report has gone yet, after one, due at once.
    fn end_leave(&mut self, now: Timestamp) {
        self.leave_by = None;
        self.clr_due = None;
        if self.flagged > 0 {
            self.left = true;
            self.timer.cancel();
        } else {
            self.timer.fire_at(now);
        }
    }

    /// When a report is due.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        if self.left {
            return None;
        }
        [self.timer.due(), self.clr_due, self.leave_by]
            .into_iter()
            .flatten()
            .min()
    }

    /// The report due by `now`, if any.
    pub fn poll_report(&mut self, now: Timestamp) -> Option<ReceiverFeedback> {
        if self.left {
            return None;
        }
        if self.leave_by.is_some_and(|t| t <= now) {
            // No new round announced in 2T: the round is over all the same.
            self.end_leave(now);
            if self.left {
                return None;
            }
        }
        let timer = self.timer.due().is_some_and(|t| t <= now) && !self.put_off_while_idle(now);
        let clr = self.clr_due.is_some_and(|t| t <= now);
        if !timer && !clr {
            return None;
        }
        if timer {
            self.cancel_timer();
        }
        if clr {
            self.clr_due = Some(now + self.rtt());
        }
        // Nothing heard yet: nothing to say.
        let round = self.round?;
        self.sent_reports += 1;
        self.flagged = self.flagged.saturating_add(u32::from(self.leaving));
        self.left = self.leaving && self.leave_by.is_none();
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
            have_loss: self.have_loss(),
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

    /// Receiver 5's report stamped at 1000 ms (µs of its clock), held 5 ms by the sender,
    /// echoed in a packet sent at 1020 ms (sender clock; the sender's clock is 500 ms behind
    /// the receiver's), arriving at 1080 ms: RTT 75 ms.
    fn measure_75_ms(r: &mut TfmccReceiver) {
        let echo = Echo {
            receiver: 5,
            ts_us: 1_000_000,
            delay: Duration::from_millis(5),
        };
        r.on_sender_info(ms(1080), &info(0, f64::INFINITY, None, Some(echo)), ms(520));
        assert_eq!(r.rtt(), Duration::from_millis(75));
    }

    #[test]
    fn rtt_from_the_echo_then_kept_current_by_the_one_way_delay() {
        let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        // Before anything: 500 ms; then the sender's R_max.
        assert_eq!(r.rtt(), Duration::from_millis(500));
        r.on_sender_info(ms(20), &info(0, f64::INFINITY, None, None), ms(0));
        assert_eq!(r.rtt(), Duration::from_millis(200));
        measure_75_ms(&mut r);
        assert!(r.has_rtt());
        // The path gets 10 ms longer one way: a data packet sent at 600 (sender clock) that
        // arrives at 1170 took 10 ms more than the echo's packet: R' = 85 ms, no echo needed.
        r.on_packet(ms(1170), 1, ms(600), 1000);
        assert_eq!(r.rtt(), Duration::from_millis(85));
    }

    #[test]
    fn the_timer_is_rfc_4654s_by_default() {
        // §4.5: t = max(T (1 + ln x / ln N), 0), x uniform in (0, 1]: P(t ≤ τT) = N^(τ − 1).
        // 4000 draws: the empirical distribution is within 0.035 of it everywhere with
        // probability above 99.9 % (Dvoretzky–Kiefer–Wolfowitz).
        let t = Duration::from_millis(1200).as_secs_f64();
        let draws: Vec<f64> = (0..4000)
            .map(|seed| {
                let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, seed));
                r.on_sender_info(ms(0), &info(3, f64::INFINITY, None, None), ms(0));
                r.poll_timeout().unwrap().as_secs_f64() / t
            })
            .collect();
        for tau in [0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0] {
            let empirical = draws.iter().filter(|d| **d <= tau + 1e-9).count() as f64 / 4000.0;
            let rfc = 10_000f64.powf(tau - 1.0);
            assert!(
                (empirical - rfc).abs() < 0.035,
                "P(t ≤ {tau} T) = {empirical:.3}, RFC 4654: {rfc:.3}"
            );
        }
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

    /// A non-CLR receiver without bias, in round 3 from 0 ms with `x_supp`, whose timer
    /// comes due after `after` ms.
    fn waiting(x_supp: f64, after: u64) -> TfmccReceiver {
        (0..1000)
            .map(|seed| {
                let mut cfg = TfmccReceiverConfig::new(5, seed);
                cfg.bias = 0.0;
                let mut r = TfmccReceiver::new(cfg);
                r.on_sender_info(ms(0), &info(3, x_supp, None, None), ms(0));
                r
            })
            .find(|r| r.poll_timeout().is_some_and(|t| t > ms(after)))
            .expect("a seed with a late timer")
    }

    #[test]
    fn a_data_packet_alone_can_suppress_the_rounds_feedback() {
        // X_supp 150 kB/s is above the rate at the round's start (nothing received yet);
        // packets of 1000 bytes every 10 ms take X_r = 2 X_recv to 200 kB/s, over X_supp,
        // with no new announcement: the timer goes at a data packet (§4.5).
        let mut r = waiting(150_000.0, 400);
        for k in 0..30 {
            r.on_packet(ms(10 * k), k, ms(10 * k), 1000);
        }
        assert!(r.rate(ms(290)) > 150_000.0);
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn a_receiver_whose_rtt_is_above_r_max_is_not_suppressed() {
        let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        measure_75_ms(&mut r);
        // A new round whose R_max (50 ms) is below our RTT (75), X_supp below everything:
        // we answer all the same (§3.4: "or those with a higher RTT than R_max").
        let short = SenderInfo {
            r_max: Duration::from_millis(50),
            ..info(1, 0.01, None, None)
        };
        r.on_sender_info(ms(1100), &short, ms(540));
        assert!(r.poll_timeout().is_some());
        // With R_max covering it, the same X_supp suppresses.
        r.on_sender_info(ms(1110), &info(1, 0.01, None, None), ms(550));
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn a_change_of_r_max_rescales_the_timer_and_silence_puts_it_off() {
        let mut r = waiting(f64::INFINITY, 300);
        let due = r.poll_timeout().unwrap();
        // R_max 200 → 400 ms in the same round: t doubles, counted from the round's start.
        let longer = SenderInfo {
            r_max: Duration::from_millis(400),
            ..info(3, f64::INFINITY, None, None)
        };
        r.on_sender_info(ms(10), &longer, ms(10));
        let t = due.saturating_since(ms(0));
        assert_eq!(r.poll_timeout(), Some(ms(0) + t * 2));
        // The last data packet came at 20 ms: when the timer comes due, it waits
        // now − 20 ms − R_max more (§4.5), and fires once packets come again.
        r.on_packet(ms(20), 1, ms(20), 1000);
        let due = r.poll_timeout().unwrap();
        assert!(due > ms(420));
        assert_eq!(r.poll_report(due), None);
        let gap = due.saturating_since(ms(20)) - Duration::from_millis(400);
        assert_eq!(r.poll_timeout(), Some(due + gap));
        let later = due + gap;
        r.on_packet(later, 2, later, 1000);
        assert!(r.poll_report(later).is_some());
    }

    #[test]
    fn ten_rtts_without_data_clear_have_loss_until_the_next_loss_event() {
        // No RTT measured: R_max (200 ms) is the RTT; a loss at packet 50.
        let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        r.on_sender_info(ms(0), &info(0, f64::INFINITY, None, None), ms(0));
        feed(&mut r, (0, 0), 100, &[50]);
        assert!(r.have_loss());
        let equation = r.rate(ms(1000));
        // 2 s without a packet, then packets again: X_r is 2 X_recv, have_loss clear.
        feed(&mut r, (3000, 0), 20, &[]);
        let now = ms(3190);
        assert!(!r.have_loss());
        assert_eq!(r.rate(now), 2.0 * r.x_recv(now));
        assert_ne!(r.rate(now), equation);
        // 1.9 s of silence is not 10 RTTs.
        let mut r2 = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        r2.on_sender_info(ms(0), &info(0, f64::INFINITY, None, None), ms(0));
        feed(&mut r2, (0, 0), 100, &[50]);
        r2.on_packet(ms(2890), 100, ms(2890), 1000);
        assert!(r2.have_loss());
        // A new loss event sets it again.
        for k in 20..40u64 {
            if k != 30 {
                r.on_packet(ms(3000 + 10 * k), 1000 + k, ms(3000 + 10 * k), 1000);
            }
        }
        assert!(r.have_loss());
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
        // With a bias (not RFC 4654's, opted into), a receiver at a tenth of the sending rate
        // answers before one at it.
        let timer = |x_recv_pkts: u64| {
            let mut cfg = TfmccReceiverConfig::new(6, 9);
            cfg.bias = 0.25;
            let mut r = TfmccReceiver::new(cfg);
            for k in 0..x_recv_pkts {
                r.on_packet(ms(k * 1000 / x_recv_pkts), k, ms(0), 1000);
            }
            r.on_sender_info(ms(1000), &info(1, f64::INFINITY, None, None), ms(1000));
            r.poll_timeout().unwrap()
        };
        assert!(timer(5) < timer(50), "{:?} {:?}", timer(5), timer(50));
    }

    /// Packets of 1000 bytes every 10 ms from `start` ms (sequence k at `start` + 10 k ms),
    /// each sent `lag` ms before it arrives by the sender's clock, `lost` missing.
    fn feed(r: &mut TfmccReceiver, (start, lag): (u64, u64), until: u64, lost: &[u64]) {
        for k in 0..until {
            if !lost.contains(&k) {
                let at = start + 10 * k;
                r.on_packet(ms(at), k, ms(at - lag), 1000);
            }
        }
    }

    #[test]
    fn the_first_loss_interval_inverts_the_simplified_equation_at_the_last_rtts_rate() {
        // RTT 75 ms from an echo (as above), then 100 kB/s: 100 packets a second.
        let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        measure_75_ms(&mut r);
        // The echo's packet took 560 ms by the mixed clocks: so do these, keeping R' = 75 ms.
        feed(&mut r, (1100, 560), 300, &[200]);
        assert_eq!(r.rtt(), Duration::from_millis(75));
        // Packet 200 is known lost when 203 arrives; X_recv over the last 75 ms then: packets
        // 196 to 203 but 200, 7 kB in 75 ms; l_0 = (X R / (sqrt(3/2) s))²
        // = (93 333 × 0.075 / (1.2247 × 1000))² = 32.7.
        assert_eq!(r.history().counts().0, 1);
        let l0 = r.history().first_interval().unwrap() as f64;
        let want = (7000.0 / 0.075 * 0.075 / (1.5f64.sqrt() * 1000.0)).powi(2);
        assert!((l0 - want).abs() <= 0.5, "l_0 {l0} against {want}");
    }

    #[test]
    fn a_first_interval_made_with_r_max_is_scaled_at_the_first_rtt() {
        // No RTT yet: R_max (200 ms) stands in.
        let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        r.on_sender_info(ms(0), &info(0, f64::INFINITY, None, None), ms(0));
        feed(&mut r, (0, 0), 300, &[250]);
        let made = r.history().first_interval().unwrap() as f64;
        let want = (100_000.0 * 0.2 / (1.5f64.sqrt() * 1000.0)).powi(2);
        assert!(
            (made - want).abs() <= 0.05 * want,
            "l_0 {made} against {want}"
        );
        // The first echo measures 50 ms: l_0 × (50 / 200)².
        let echo = Echo {
            receiver: 5,
            ts_us: 2_950_000,
            delay: Duration::ZERO,
        };
        r.on_sender_info(
            ms(3000),
            &info(0, f64::INFINITY, None, Some(echo)),
            ms(3000),
        );
        assert_eq!(r.rtt(), Duration::from_millis(50));
        let scaled = r.history().first_interval().unwrap() as f64;
        assert!(
            (scaled - made / 16.0).abs() <= 1.0,
            "{scaled} against {made} / 16"
        );
        // Only once: a later echo changes nothing.
        let echo = Echo {
            ts_us: 3_940_000,
            ..echo
        };
        r.on_sender_info(
            ms(4000),
            &info(0, f64::INFINITY, None, Some(echo)),
            ms(4000),
        );
        assert_eq!(r.history().first_interval().unwrap() as f64, scaled);
    }

    #[test]
    fn a_receiver_below_one_packet_per_8_s_for_120_s_leaves_and_falls_silent() {
        // R_max 2 s, no RTT; a packet every 4 s, every other one lost: each loss its own
        // event, intervals of 2 packets, p near 1/2, and the equation well under s/8.
        let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        let slow = SenderInfo {
            r_max: Duration::from_secs(2),
            ..info(0, f64::INFINITY, None, None)
        };
        r.on_sender_info(ms(0), &slow, ms(0));
        let mut below_from = None;
        let mut left_at = None;
        for k in 0..200u64 {
            let now = ms(4000 * k);
            if (k % 2 == 0 || k < 10) && left_at.is_none() {
                r.on_packet(now, k, now, 1000);
                // As the receiver judges it: on each packet.
                if r.calculated_rate(now) >= r.floor() {
                    below_from = None;
                } else if below_from.is_none() {
                    below_from = Some(now);
                }
            }
            while let Some(t) = r.poll_timeout().filter(|t| *t <= now) {
                let Some(fb) = r.poll_report(t) else { break };
                if fb.leaving {
                    assert_eq!(fb.x_r, r.floor(), "it reports the floor, not less");
                    left_at = Some(now);
                }
            }
        }
        let (from, left) = (
            below_from.expect("the rate fell"),
            left_at.expect("it left"),
        );
        let after = left.saturating_since(from);
        assert!(
            after > LEAVE_AFTER && after <= LEAVE_AFTER + Duration::from_secs(8),
            "left {after:?} after the rate fell below the floor"
        );
        assert!(r.has_left());
        assert_eq!(
            (r.poll_timeout(), r.poll_report(ms(10_000_000))),
            (None, None)
        );
    }

    /// §4.2: the CLR that wishes to leave flags every report of the round, once per RTT,
    /// and has left when the next round begins; nothing after.
    #[test]
    fn a_leaving_clr_flags_every_report_of_its_round_then_leaves() {
        let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        measure_75_ms(&mut r);
        r.on_sender_info(ms(1100), &info(0, f64::INFINITY, Some(5), None), ms(540));
        assert!(r.poll_report(ms(1100)).is_some_and(|f| !f.leaving));
        r.leave(ms(1120));
        assert!(r.leave_pending() && !r.has_left());
        let mut flagged = 0;
        for k in 0..10u64 {
            // The sender's clock and the path as in `measure_75_ms`: 560 ms between them.
            let (now, sent) = (ms(1120 + 40 * k), ms(560 + 40 * k));
            r.on_packet(now, k, sent, 1000);
            r.on_sender_info(now, &info(0, f64::INFINITY, Some(5), None), sent);
            while let Some(f) = r.poll_timeout().filter(|t| *t <= now) {
                let fb = r.poll_report(f).expect("the CLR's report");
                assert!(fb.leaving);
                flagged += 1;
            }
        }
        // 360 ms at one report per 75 ms RTT, the first at once.
        assert!((5..=6).contains(&flagged), "{flagged} flagged reports");
        assert!(r.leave_pending());
        r.on_sender_info(ms(1500), &info(1, f64::INFINITY, Some(5), None), ms(940));
        assert!(r.has_left() && !r.leave_pending());
        assert_eq!((r.poll_timeout(), r.poll_report(ms(9000))), (None, None));
    }

    /// A leaving CLR replaced before its round ends has left then; one that hears of no new
    /// round has left after 2T, the longest a round lasts; one that is not the CLR leaves with
    /// its one flagged report.
    #[test]
    fn a_leaving_clr_leaves_when_replaced_or_after_two_rounds_and_others_at_once() {
        let clr = || {
            let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
            r.on_sender_info(ms(0), &info(0, f64::INFINITY, Some(5), None), ms(0));
            r.leave(ms(10));
            assert!(r.poll_report(ms(10)).is_some_and(|f| f.leaving));
            r
        };
        let mut replaced = clr();
        replaced.on_sender_info(ms(50), &info(0, f64::INFINITY, Some(6), None), ms(50));
        assert!(replaced.has_left());
        let mut unheard = clr();
        // Flagged reports once per R_max (no RTT measured), until 2T = 12 R_max = 2.4 s
        // after the wish.
        let mut last = None;
        while let Some(t) = unheard.poll_timeout() {
            match unheard.poll_report(t) {
                Some(fb) => assert!(fb.leaving),
                None => last = Some(t),
            }
        }
        assert_eq!(last, Some(ms(2410)));
        assert!(unheard.has_left());
        let mut other = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        other.on_sender_info(ms(0), &info(0, f64::INFINITY, Some(6), None), ms(0));
        other.leave(ms(10));
        assert!(!other.leave_pending());
        assert!(other.poll_report(ms(10)).is_some_and(|f| f.leaving));
        assert!(other.has_left());
    }

    /// A leaving CLR whose round ends before its first flagged report went still sends one
    /// (the sender would otherwise take its silence for a crash and halve); so does one told
    /// of a round of no length (a malformed announcement).
    #[test]
    fn a_leaving_clr_sends_one_flagged_report_however_soon_its_round_ends() {
        let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        r.on_sender_info(ms(0), &info(0, f64::INFINITY, Some(5), None), ms(0));
        let _ = r.poll_report(ms(0));
        r.leave(ms(100));
        r.on_sender_info(ms(101), &info(1, f64::INFINITY, Some(5), None), ms(101));
        assert!(!r.has_left() && r.leave_pending());
        assert!(r.poll_report(ms(101)).is_some_and(|f| f.leaving));
        assert!(r.has_left() && !r.leave_pending());
        let mut z = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        let zero = SenderInfo {
            r_max: Duration::ZERO,
            feedback_delay: Duration::ZERO,
            ..info(0, f64::INFINITY, Some(5), None)
        };
        z.on_sender_info(ms(0), &zero, ms(0));
        let _ = z.poll_report(ms(0));
        z.leave(ms(50));
        let mut flagged = 0;
        while let Some(t) = z.poll_timeout() {
            flagged += usize::from(z.poll_report(t).is_some_and(|f| f.leaving));
        }
        assert!(flagged >= 1 && z.has_left(), "{flagged}");
    }

    #[test]
    fn a_receiver_below_the_floor_stays_while_the_sender_is_no_faster() {
        let mut r = TfmccReceiver::new(TfmccReceiverConfig::new(5, 1));
        let slow = SenderInfo {
            r_max: Duration::from_secs(2),
            x_send: 1.0,
            ..info(0, f64::INFINITY, None, None)
        };
        r.on_sender_info(ms(0), &slow, ms(0));
        for k in 0..200u64 {
            let now = ms(4000 * k);
            if k % 2 == 0 || k < 10 {
                r.on_packet(now, k, now, 1000);
            }
        }
        assert!(!r.leaving && !r.has_left());
    }
}
