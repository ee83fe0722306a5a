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
//! - **The CLR (§4.5)** answers once per RTT, outside the rounds, never suppressed, while data
//!   arrives (§3.3: with no data it falls silent, so that the sender notices).
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
    /// Arrivals (time, bytes) of the last two RTTs (and the last two packets, however old),
    /// for `X_recv`.
    recent: VecDeque<(Timestamp, u32)>,
    recent_bytes: u64,
    /// The first packet (arrival, bytes) of the current spell of listening: since joining,
    /// or since data came back after a silence ([`TfmccReceiver::silence`]).
    listen_start: Option<(Timestamp, u32)>,
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
            listen_start: None,
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
        self.receive_rate(now, self.recv_span())
    }

    /// The sender's `R_max` as last announced (500 ms before any announcement, §3.1): never
    /// shorter than its gap between packets (§3.2).
    fn r_max(&self) -> Duration {
        self.info.map_or(Duration::from_millis(500), |i| i.r_max)
    }

    fn recv_span(&self) -> Duration {
        (self.rtt() * 2).max(Duration::from_millis(10))
    }

    /// Bytes/s received over the `span` before the last arrival (§4.3.4): the bytes that
    /// arrived in `(last − span, last]` over `span`, the window half-open so that evenly
    /// spaced packets give their rate. It holds between arrivals: a report between sparse
    /// packets tells the rate they came at, not a figure that decays until the next one (the
    /// CLR reports once per RTT, and a decaying figure, reported many times per gap, held
    /// slow start at its first rates). When data stops, [silence](Self::silence) ends the
    /// CLR's reports. Where RFC 4654 gives no rule:
    /// - packets sparser than the span (slow start's one packet per `R_max` beside an RTT
    ///   of 100 ms): the window reaches back to the arrival before the last, so it holds one
    ///   gap;
    /// - a receiver that has listened for less than `span` (since it joined, or since data
    ///   came back after a [silence](Self::silence)) counts what came after its first packet
    ///   over the time to the last (at least half the span, so that a burst reads at most
    ///   twice what the span would give); with that one packet only, it is spread over the
    ///   span or `R_max`, or over the time since it came if that is longer;
    /// - two packets at one instant are one arrival.
    fn receive_rate(&self, now: Timestamp, span: Duration) -> f64 {
        let (Some((first, first_size)), Some(&(last, _))) = (self.listen_start, self.recent.back())
        else {
            return 0.0;
        };
        let after_first = self.bytes_after(first);
        if after_first == 0 {
            let over = span.max(self.r_max()).max(now.saturating_since(first));
            return f64::from(first_size) / over.as_secs_f64().max(1e-3);
        }
        let window = last.saturating_sub(span);
        if first > window {
            let since = last.saturating_since(first).max(span / 2);
            return after_first as f64 / since.as_secs_f64().max(1e-3);
        }
        // The latest arrival before the last one's time (two at one instant are one arrival).
        let before_last = self
            .recent
            .iter()
            .rev()
            .map(|(t, _)| *t)
            .find(|t| *t < last);
        let from = before_last.map_or(window, |t| t.min(window));
        let over = last.saturating_since(from).max(Duration::from_millis(1));
        self.bytes_after(from) as f64 / over.as_secs_f64()
    }

    /// Bytes of the packets kept that arrived after `t`.
    fn bytes_after(&self, t: Timestamp) -> u64 {
        let before: u64 = self
            .recent
            .iter()
            .take_while(|(at, _)| *at <= t)
            .map(|(_, b)| u64::from(*b))
            .sum();
        self.recent_bytes.saturating_sub(before)
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
        self.receive_rate(now, self.rtt())
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
        let keep = now.saturating_sub(self.recv_span());
        if self
            .recent
            .back()
            .is_none_or(|(t, _)| now.saturating_since(*t) > self.silence())
        {
            // Silence before this packet (longer than the sender's gaps, one lost packet
            // among them): a new spell of listening.
            self.listen_start = Some((now, size as u32));
        }
        self.recent.push_back((now, size as u32));
        self.recent_bytes += size as u64;
        // The last two arrival times stay, whatever their age: the rate of sparse packets
        // is their gap.
        let last = self.recent.back().map(|(t, _)| *t);
        while self.recent.len() > MAX_RECENT
            || (self.recent.front().is_some_and(|(t, _)| *t <= keep)
                && self.recent.get(1).is_some_and(|(t, _)| Some(*t) < last))
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

    /// Whether data still arrives: a packet within [`Self::silence`]. "When receivers stop
    /// receiving data packets, they will stop sending feedback" (§3.3), so that the sender's
    /// rules for a silent CLR lower its rate when the path to it fails; the CLR's
    /// once-per-RTT reports wait for data to come back.
    fn receiving(&self, now: Timestamp) -> bool {
        self.last_sent
            .is_some_and(|(_, at)| now.saturating_since(at) <= self.silence())
    }

    /// How long without a data packet counts as silence: three times the longer of the
    /// sender's `R_max` (never shorter than its gap between packets, §3.2) and the RTT, so
    /// that one packet lost, with jitter, is not silence, nor a new spell of listening.
    fn silence(&self) -> Duration {
        3 * self.r_max().max(self.rtt())
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
        if clr {
            self.clr_due = Some(now + self.rtt());
        }
        let clr = clr && (self.leaving || self.receiving(now));
        if !timer && !clr {
            return None;
        }
        if timer {
            self.cancel_timer();
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
mod tests;
