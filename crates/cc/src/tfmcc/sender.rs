//! The TFMCC sender (RFC 4654 §3).
//!
//! - **Start (§3.1):** `R_max` = 500 ms, one packet per `R_max`, slow start.
//! - **`R_max` (§3.2):** from the sender's own sample of each report, `R_r = now − ts_i'`
//!   (the echoed send time of the receiver's last data packet, plus how long it held it): a
//!   larger one raises it at once; at the end of a round without that,
//!   `R_max = max(0.9 R_max, R_peak)`, the round's largest sample; never below
//!   `s/X + 10 ms` (the packet interval and the clock's granularity).
//! - **Rounds (§3.4):** `T = k R_max` (k = 6; §3.4 allows 4 where receivers' feedback is
//!   multicast to the whole group, which RTCP to the sender is not). A round ends
//!   `T` after it began if a non-CLR receiver answered, else at the first non-CLR answer, at
//!   most `2T` after. Each non-CLR answer lowers the suppression rate:
//!   `X_supp = (1 − g) X_r` when `X_supp > X_r`, g = 0.1.
//! - **The rate (§3.3):** a receiver reporting less than the rate becomes the CLR and the
//!   rate drops to its `X_r` at once; each of the CLR's reports (one per its RTT) moves the
//!   rate to `min(X_r, X + s / R_max)` (case 4); with no CLR, the rate rises to a report's
//!   `X_r` by at most one packet per `R_max` every `R_max` (case 1); a CLR that leaves (its report says so, or it is
//!   silent for 10 of its RTTs) is replaced by the next reporter, with no increase for a
//!   round (case 3). A receiver with loss but no RTT computed `X_r`
//!   with `R_max`; for the choice of CLR (not for `X_supp`) the sender scales it by
//!   `R_max / R_r`, `R_r` its own sample from the report's echo (§3.3).
//! - **Slow start (§3.6):** until a receiver reports a loss, receivers report `2 X_recv`;
//!   the receiver that reports the lowest rate becomes the CLR (§3.3 cases 1-2), and each of
//!   its reports (one per its RTT, §4.5) sets the rate to what it reported, without the
//!   one-packet-per-`R_max` limit: the rate about doubles every RTT. The first report of a
//!   loss ends it.
//! - **Silence (§3.3):** no report from the CLR for 4 of its RTTs halves the rate once
//!   (not within 10 RTTs of its choice); after 10 RTTs of silence it is taken to have left.
//!   No report from anyone for 10 `R_max` halves the rate, again every 10 `R_max`, down to
//!   one packet per 8 s.
//! - **Echoes (§3.5):** a new CLR or one without an RTT first, then receivers without an RTT,
//!   then others, then the CLR; the CLR at least once per round.

use super::{Echo, ReceiverFeedback, SenderInfo};
use crate::{Announce, ControllerTimer, Feedback, RateController};
use metronome_time::{Bitrate, Timestamp};
use std::time::Duration;

/// The sender's settings (RFC 4654's values by default).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TfmccConfig {
    /// The packet size `s` on the wire, bytes.
    pub segment_bytes: u32,
    /// The rate never goes above this; [`RateController::set_rate`] replaces it.
    pub max_rate: Bitrate,
    /// The least the application can send (a video's lowest rendition): the rate never goes
    /// below it, whatever the receivers report, since the stream would send that much anyway.
    /// RFC 4654's floor is one packet per 8 s (the default, zero, keeps it).
    pub min_rate: Bitrate,
    /// `k` in `T = k R_max`.
    pub round_factor: f64,
    /// g, the suppression margin.
    pub g: f64,
    /// `R_max` before any report (§3.1: 500 ms); the first rate is one packet per `R_max`.
    pub initial_r_max: Duration,
    /// The longest gap between two announcements of the sender's fields, in multiples of
    /// `R_max` (1.0 by default).
    pub announce_every_r_max: f64,
    /// The shortest gap between two announcements (RFC 4654 §3.7's `ts_gran`).
    pub min_announce_gap: Duration,
}

impl TfmccConfig {
    /// RFC 4654's values for packets of `segment_bytes` capped at `max_rate`: k = 6, g = 0.1,
    /// `R_max` 500 ms at the start, announcements every `R_max` and at least 10 ms apart, no
    /// floor above one packet per 8 s.
    pub fn new(segment_bytes: u32, max_rate: Bitrate) -> Self {
        TfmccConfig {
            segment_bytes,
            max_rate,
            min_rate: Bitrate::bps(0),
            round_factor: 6.0,
            g: 0.1,
            initial_r_max: Duration::from_millis(500),
            announce_every_r_max: 1.0,
            min_announce_gap: Duration::from_millis(10),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Clr {
    id: u32,
    x_r: f64,
    rtt: Option<Duration>,
    selected: Timestamp,
    heard: Timestamp,
    /// When its silence halved the rate.
    halved: Option<Timestamp>,
    leaving: bool,
}

/// Echoes waiting to go out (bounded: one per receiver that answered since).
const MAX_ECHOES: usize = 64;

#[derive(Clone, Copy, Debug)]
struct PendingEcho {
    receiver: u32,
    ts_us: u32,
    at: Timestamp,
    /// Lower goes first (§3.5).
    priority: u8,
    /// The round the report answered: older goes first within a priority (§3.5).
    round: u16,
    x_r: f64,
}

impl PendingEcho {
    /// §3.5's order, most urgent least: the class, then the older round, then the lower
    /// rate; `current` is the sender's round.
    fn urgency(&self, current: u16) -> (u8, std::cmp::Reverse<u16>, f64) {
        let age = current.wrapping_sub(self.round);
        (self.priority, std::cmp::Reverse(age), self.x_r)
    }
}

/// Counters, for summaries and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TfmccCounters {
    /// Feedback rounds ended (new rounds begun after the first).
    pub rounds: u64,
    /// Reports received from receivers.
    pub reports: u64,
    /// Of those, reports answering a round other than the current one.
    pub stale_reports: u64,
    /// Times a receiver was made the CLR (the first choice included).
    pub clr_changes: u64,
    /// Times the rate was halved because the CLR was silent for 4 of its RTTs.
    pub clr_silence_halvings: u64,
    /// Times the rate was halved because no receiver reported for 10 `R_max`.
    pub no_feedback_halvings: u64,
    /// Announcements ([`SenderInfo`]) handed out to be sent.
    pub announcements: u64,
}

/// The TFMCC sender (see the module docs): rounds, suppression, the CLR, `R_max`, slow start
/// and the silence halvings, behind [`RateController`].
#[derive(Clone, Debug)]
pub struct TfmccSender {
    cfg: TfmccConfig,
    x: f64,
    slow_start: bool,
    r_max: Duration,
    r_peak: Duration,
    r_max_raised: bool,
    round: u16,
    round_start: Timestamp,
    non_clr_heard: bool,
    x_supp: f64,
    clr: Option<Clr>,
    no_increase_until: Option<Timestamp>,
    last_increase: Timestamp,
    heard_any: Timestamp,
    no_feedback_halved: Timestamp,
    echoes: Vec<PendingEcho>,
    clr_echoed_round: Option<u16>,
    announce_due: Option<Timestamp>,
    last_announce: Option<Timestamp>,
    counters: TfmccCounters,
}

impl TfmccSender {
    /// A sender starting at `now` in slow start, round 0, at one packet per `R_max` (or the
    /// configured minimum rate, if higher), with an announcement due at once.
    pub fn new(cfg: TfmccConfig, now: Timestamp) -> Self {
        let r_max = cfg.initial_r_max;
        let min = cfg.min_rate.as_bps() as f64 / 8.0;
        TfmccSender {
            x: (cfg.segment_bytes.max(1) as f64 / r_max.as_secs_f64()).max(min),
            slow_start: true,
            r_max,
            r_peak: Duration::ZERO,
            r_max_raised: false,
            round: 0,
            round_start: now,
            non_clr_heard: false,
            x_supp: f64::INFINITY,
            clr: None,
            no_increase_until: None,
            last_increase: now,
            heard_any: now,
            no_feedback_halved: now,
            echoes: Vec::new(),
            clr_echoed_round: None,
            announce_due: Some(now),
            last_announce: None,
            counters: TfmccCounters::default(),
            cfg,
        }
    }

    fn s(&self) -> f64 {
        self.cfg.segment_bytes.max(1) as f64
    }

    fn cap(&self) -> f64 {
        self.cfg.max_rate.as_bps() as f64 / 8.0
    }

    fn floor(&self) -> f64 {
        (self.s() / 8.0).max(self.cfg.min_rate.as_bps() as f64 / 8.0)
    }

    /// The sending rate `X`, bytes per second.
    pub fn rate_bytes_per_s(&self) -> f64 {
        self.x
    }

    /// The current CLR (none once the last one left, until the next report).
    pub fn clr(&self) -> Option<u32> {
        self.current_clr().map(|c| c.id)
    }

    /// The CLR, unless it left: one that left is kept only so that the next reporter takes
    /// its place as §3.3's case 3 says.
    fn current_clr(&self) -> Option<&Clr> {
        self.clr.as_ref().filter(|c| !c.leaving)
    }

    /// `R_max`, the sender's estimate of the largest RTT in the group (§3.2).
    pub fn r_max(&self) -> Duration {
        self.r_max
    }

    /// The current feedback round number (`fb_nr`, wrapping).
    pub fn round(&self) -> u16 {
        self.round
    }

    /// Whether the sender is still in slow start (no receiver has reported a loss).
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    /// The counters since the sender was made.
    pub fn counters(&self) -> TfmccCounters {
        self.counters
    }

    /// `T`, this round's feedback delay.
    pub fn feedback_delay(&self) -> Duration {
        self.r_max.mul_f64(self.cfg.round_factor)
    }

    fn set_x(&mut self, x: f64) {
        let x = x.clamp(self.floor().min(self.cap()), self.cap());
        if (x - self.x).abs() > 0.1 * self.x {
            self.announce_soon();
        }
        self.x = x;
    }

    fn announce_soon(&mut self) {
        let earliest = self
            .last_announce
            .map_or(Timestamp::ZERO, |t| t + self.cfg.min_announce_gap);
        let at = self.announce_due.map_or(earliest, |d| d.min(earliest));
        self.announce_due = Some(at.max(earliest));
    }

    /// §3.3 case 4: the CLR's report raises the rate to `min(X_r, X + s / R_max)`.
    fn increase_by_clr_report(&mut self, now: Timestamp, target: f64) {
        if self.no_increase_until.is_some_and(|t| now < t) {
            return;
        }
        self.last_increase = now;
        if self.slow_start {
            // §3.6: slow start's limit is the receivers' 2 X_recv, not the increase limit.
            self.set_x(target);
            return;
        }
        let step = self.s() / self.r_max.as_secs_f64();
        self.set_x(target.min(self.x + step));
    }

    /// §3.3 case 1: with no CLR, the rate rises towards `target` by at most one packet per
    /// `R_max` every `R_max`.
    fn increase_to(&mut self, now: Timestamp, target: f64) {
        if self.no_increase_until.is_some_and(|t| now < t) {
            return;
        }
        if self.slow_start {
            // §3.6: slow start's limit is the receivers' 2 X_recv, not the increase limit.
            self.last_increase = now;
            self.set_x(target);
            return;
        }
        let r = self.r_max.as_secs_f64();
        let dt = now
            .saturating_since(self.last_increase)
            .as_secs_f64()
            .min(r);
        let step = self.s() / r * (dt / r);
        self.last_increase = now;
        self.set_x(target.min(self.x + step));
    }

    /// A receiver's report arrived at `now`.
    pub fn on_report(&mut self, now: Timestamp, id: u32, fb: &ReceiverFeedback) {
        self.counters.reports += 1;
        self.heard_any = now;
        // The sender's own RTT sample of the receiver (§3.2: `R_r = ts_now − ts_i'`, the
        // echoed send time plus the time the receiver held it); the receiver's own figure
        // only for a report without an echo.
        let sample = fb
            .echo
            .map(|(sent, held)| {
                now.saturating_since(sent)
                    .saturating_sub(held)
                    .max(Duration::from_millis(1))
            })
            .or(fb.rtt);
        // §3.3: a receiver with loss and no RTT computed its rate with R_max; the sender's
        // sample gives the rate it would have computed.
        let unscaled_x_r = fb.x_r;
        let mut scaled = *fb;
        if let Some(r) = sample.filter(|r| fb.have_loss && fb.rtt.is_none() && *r < self.r_max) {
            scaled.x_r = fb.x_r * self.r_max.as_secs_f64() / r.as_secs_f64();
        }
        let fb = &scaled;
        // §3.2: R_max rises at once to a larger sample; R_peak is the round's largest.
        if let Some(rtt) = sample {
            if rtt > self.r_max {
                self.r_max = rtt;
                self.r_max_raised = true;
            }
            self.r_peak = self.r_peak.max(rtt);
        }
        let is_clr = self.current_clr().is_some_and(|c| c.id == id);
        let priority = match (is_clr, fb.rtt.is_some()) {
            (true, false) => 0,
            (false, false) => 1,
            (false, true) => 2,
            (true, true) => 3,
        };
        self.queue_echo(now, id, fb, priority);
        if fb.have_loss && self.slow_start {
            // The first loss anywhere ends slow start (§3.6).
            self.slow_start = false;
            self.announce_soon();
        }
        let stale = fb.round != self.round;
        if stale {
            self.counters.stale_reports += 1;
        }
        if !is_clr && !stale {
            self.non_clr_heard = true;
            if self.x_supp > unscaled_x_r {
                self.x_supp = (1.0 - self.cfg.g) * unscaled_x_r;
                self.announce_soon();
            }
        }
        if fb.leaving {
            if let Some(c) = self.clr.as_mut().filter(|_| is_clr) {
                c.leaving = true;
                c.heard = now;
            }
            return;
        }
        match self.clr {
            Some(mut c) if c.id == id && !c.leaving => {
                c.heard = now;
                c.halved = None;
                c.x_r = fb.x_r;
                c.rtt = fb.rtt.or(c.rtt);
                self.clr = Some(c);
                if fb.x_r < self.x {
                    self.set_x(fb.x_r);
                    self.last_increase = now;
                } else {
                    self.increase_by_clr_report(now, fb.x_r);
                }
            }
            Some(c) if !c.leaving => {
                if fb.x_r < self.x {
                    self.make_clr(now, id, fb);
                    self.set_x(fb.x_r);
                    self.last_increase = now;
                }
            }
            _ => {
                // No CLR, or one that left (even if this is it, back): this receiver takes
                // its place (cases 1 and 3).
                let replaced = self.clr.is_some();
                self.make_clr(now, id, fb);
                if fb.x_r <= self.x {
                    self.set_x(fb.x_r);
                    self.last_increase = now;
                } else if replaced {
                    self.no_increase_until = Some(now + self.feedback_delay());
                } else {
                    self.increase_to(now, fb.x_r);
                }
            }
        }
        self.maybe_end_round(now);
    }

    fn make_clr(&mut self, now: Timestamp, id: u32, fb: &ReceiverFeedback) {
        self.counters.clr_changes += 1;
        self.clr = Some(Clr {
            id,
            x_r: fb.x_r,
            rtt: fb.rtt,
            selected: now,
            heard: now,
            halved: None,
            leaving: false,
        });
        // A new CLR is echoed first.
        if let Some(e) = self.echoes.iter_mut().find(|e| e.receiver == id) {
            e.priority = 0;
        }
        self.announce_soon();
    }

    fn queue_echo(&mut self, now: Timestamp, id: u32, fb: &ReceiverFeedback, priority: u8) {
        self.echoes.retain(|e| e.receiver != id);
        if self.echoes.len() >= MAX_ECHOES {
            // Keep the most urgent: drop the least.
            if let Some(i) = self.echo_by_urgency(std::cmp::Ordering::Greater) {
                self.echoes.swap_remove(i);
            }
        }
        self.echoes.push(PendingEcho {
            receiver: id,
            ts_us: fb.ts_us,
            at: now,
            priority,
            round: fb.round,
            x_r: fb.x_r,
        });
        self.announce_soon();
    }

    fn maybe_end_round(&mut self, now: Timestamp) {
        let t = self.feedback_delay();
        let age = now.saturating_since(self.round_start);
        if (age >= t && self.non_clr_heard) || age >= 2 * t {
            self.new_round(now);
        }
    }

    fn new_round(&mut self, now: Timestamp) {
        if !self.r_max_raised && !self.r_peak.is_zero() {
            self.r_max = self.r_max.mul_f64(0.9).max(self.r_peak);
        }
        let min = Duration::from_secs_f64(self.s() / self.x.max(1e-9)) + Duration::from_millis(10);
        self.r_max = self.r_max.max(min.min(Duration::from_secs(64)));
        self.r_peak = Duration::ZERO;
        self.r_max_raised = false;
        self.round = self.round.wrapping_add(1);
        self.round_start = now;
        self.non_clr_heard = false;
        self.x_supp = f64::INFINITY;
        self.counters.rounds += 1;
        self.announce_due = Some(now);
    }

    /// Timers: the round's end, the CLR's silence, everyone's silence, announcements.
    fn next_timer(&self) -> Timestamp {
        let t = self.feedback_delay();
        let round_end = self.round_start + if self.non_clr_heard { t } else { 2 * t };
        let mut next = round_end;
        if let Some(c) = self.current_clr() {
            next = next.min(self.clr_silence_at(c));
        }
        next = next.min(self.no_feedback_at());
        if let Some(a) = self.announce_due {
            next = next.min(a);
        }
        next
    }

    fn clr_rtt(&self, c: &Clr) -> Duration {
        c.rtt.unwrap_or(self.r_max).max(Duration::from_millis(1))
    }

    /// When the CLR's silence next acts (§3.3): the halving after 4 of its RTTs (not within
    /// 10 of its choice), then taking it to have left after 10.
    fn clr_silence_at(&self, c: &Clr) -> Timestamp {
        let rtt = self.clr_rtt(c);
        // It was chosen before it was last heard: the halving is never after `heard + 10 RTT`.
        match c.halved {
            None => (c.heard + 4 * rtt).max(c.selected + 10 * rtt),
            Some(_) => c.heard + 10 * rtt,
        }
    }

    fn no_feedback_at(&self) -> Timestamp {
        self.heard_any.max(self.no_feedback_halved) + 10 * self.r_max
    }

    fn on_timer(&mut self, now: Timestamp) {
        let t = self.feedback_delay();
        let age = now.saturating_since(self.round_start);
        if age >= 2 * t || (age >= t && self.non_clr_heard) {
            self.new_round(now);
        }
        if let Some(mut c) = self.current_clr().copied() {
            if now >= self.clr_silence_at(&c) {
                let rtt = self.clr_rtt(&c);
                // Silent for 10 RTTs: taken to have left (§3.3); the next report picks a CLR,
                // as case 3.
                c.leaving = now.saturating_since(c.heard) >= 10 * rtt;
                if c.halved.is_none() && !c.leaving {
                    c.halved = Some(now);
                    self.counters.clr_silence_halvings += 1;
                    self.x = (self.x / 2.0).max(self.floor());
                    self.last_increase = now;
                }
                self.clr = Some(c);
                self.announce_soon();
            }
        }
        if now >= self.no_feedback_at() {
            self.counters.no_feedback_halvings += 1;
            self.x = (self.x / 2.0).max(self.floor());
            self.no_feedback_halved = now;
            self.announce_soon();
        }
    }

    /// The pending echo most urgent (`Less`) or least (`Greater`) by §3.5's order.
    fn echo_by_urgency(&self, want: std::cmp::Ordering) -> Option<usize> {
        let round = self.round;
        (0..self.echoes.len()).reduce(|best, i| {
            let (a, b) = (
                self.echoes[i].urgency(round),
                self.echoes[best].urgency(round),
            );
            if a.partial_cmp(&b) == Some(want) {
                i
            } else {
                best
            }
        })
    }

    /// The sender's fields, when an announcement is due at `now`.
    pub fn poll_info(&mut self, now: Timestamp) -> Option<SenderInfo> {
        let due = self.announce_due?;
        if now < due {
            return None;
        }
        // §3.5: the CLR at least once per round; otherwise the most urgent echo.
        let clr_first = self.clr().is_some() && self.clr_echoed_round != Some(self.round);
        let pick = if clr_first {
            let id = self.clr();
            self.echoes.iter().position(|e| Some(e.receiver) == id)
        } else {
            None
        }
        .or_else(|| self.echo_by_urgency(std::cmp::Ordering::Less));
        let echo = pick.map(|i| {
            let e = self.echoes.swap_remove(i);
            if self.clr() == Some(e.receiver) {
                self.clr_echoed_round = Some(self.round);
            }
            Echo {
                receiver: e.receiver,
                ts_us: e.ts_us,
                delay: now.saturating_since(e.at),
            }
        });
        self.last_announce = Some(now);
        self.counters.announcements += 1;
        let gap = self.cfg.min_announce_gap;
        self.announce_due = Some(if self.echoes.is_empty() {
            now + self.r_max.mul_f64(self.cfg.announce_every_r_max).max(gap)
        } else {
            now + gap
        });
        Some(SenderInfo {
            round: self.round,
            slow_start: self.slow_start,
            x_supp: self.x_supp,
            r_max: self.r_max,
            feedback_delay: self.feedback_delay(),
            clr: self.clr(),
            echo,
            x_send: self.x,
        })
    }
}

impl RateController for TfmccSender {
    fn wants_send_times(&self) -> bool {
        true
    }
    fn name(&self) -> &'static str {
        "tfmcc"
    }
    fn target_rate(&self) -> Bitrate {
        Bitrate::bps((self.x * 8.0) as u64)
    }
    fn on_feedback(&mut self, now: Timestamp, feedback: &Feedback) {
        if let Some(fb) = &feedback.tfmcc {
            self.on_report(now, feedback.receiver, fb);
        }
    }
    fn poll_timeout(&self) -> Option<(Timestamp, ControllerTimer)> {
        Some((self.next_timer(), ControllerTimer::Feedback))
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        self.on_timer(now);
    }
    fn poll_announce(&mut self, now: Timestamp) -> Option<Announce> {
        self.poll_info(now).map(Announce::Tfmcc)
    }
    fn set_rate(&mut self, rate: Bitrate) {
        self.cfg.max_rate = rate;
        self.x = self.x.min(self.cap());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u32 = 1000;

    fn fb(round: u16, x_r: f64, rtt_ms: Option<u64>, loss: bool) -> ReceiverFeedback {
        ReceiverFeedback {
            ts_us: 0,
            rtt: rtt_ms.map(Duration::from_millis),
            x_r,
            x_recv: x_r / 2.0,
            p: if loss { 0.01 } else { 0.0 },
            echo: None,
            round,
            have_loss: loss,
            leaving: false,
        }
    }

    fn sender() -> TfmccSender {
        TfmccSender::new(TfmccConfig::new(S, Bitrate::mbps(100)), Timestamp::ZERO)
    }

    #[test]
    fn starts_at_one_packet_per_r_max_and_announces_at_once() {
        let mut t = sender();
        assert_eq!(t.rate_bytes_per_s(), 2000.0);
        assert_eq!(t.feedback_delay(), Duration::from_secs(3));
        let info = t.poll_info(Timestamp::ZERO).unwrap();
        assert_eq!((info.round, info.slow_start, info.clr), (0, true, None));
        assert_eq!(info.x_supp, f64::INFINITY);
        // Nothing new: the next one an R_max later.
        assert!(t.poll_info(Timestamp::from_millis(100)).is_none());
        assert!(t.poll_info(Timestamp::from_millis(500)).is_some());
    }

    #[test]
    fn a_lower_report_makes_a_new_clr_and_the_rate_drops_at_once_but_rises_slowly() {
        let mut t = sender();
        let ms = Timestamp::from_millis;
        // Out of slow start with a loss report: the receiver becomes CLR at its rate.
        t.on_report(ms(100), 1, &fb(0, 1500.0, Some(100), true));
        assert_eq!((t.clr(), t.rate_bytes_per_s()), (Some(1), 1500.0));
        assert!(!t.in_slow_start());
        // The CLR reports a much higher rate: each report raises the rate by one packet per
        // R_max at most (§3.3 case 4), also one 100 ms (its RTT) after the last.
        let r_max = t.r_max().as_secs_f64();
        let mut want = 1500.0;
        for at in [600, 700] {
            t.on_report(ms(at), 1, &fb(0, 50_000.0, Some(100), true));
            want += 1000.0 / r_max;
            assert!(
                (t.rate_bytes_per_s() - want).abs() < 1e-6,
                "{} at {at} ms",
                t.rate_bytes_per_s()
            );
        }
        // Another receiver reports less than the rate: it takes over, the rate drops to it.
        t.on_report(ms(700), 2, &fb(0, 1200.0, Some(50), true));
        assert_eq!((t.clr(), t.rate_bytes_per_s()), (Some(2), 1200.0));
        // A higher non-CLR report changes nothing.
        t.on_report(ms(800), 3, &fb(0, 9000.0, Some(50), true));
        assert_eq!((t.clr(), t.rate_bytes_per_s()), (Some(2), 1200.0));
        assert_eq!(t.counters().clr_changes, 2);
    }

    #[test]
    fn suppression_rate_and_round_ends() {
        let mut t = sender();
        let ms = Timestamp::from_millis;
        t.on_report(ms(100), 1, &fb(0, 5000.0, Some(100), true));
        // Non-CLR reports: X_supp = 0.9 of the lowest.
        t.on_report(ms(200), 2, &fb(0, 8000.0, Some(100), true));
        t.on_report(ms(300), 3, &fb(0, 7000.0, Some(100), true));
        t.on_report(ms(400), 4, &fb(0, 9000.0, Some(100), true));
        // Receiver 1's report counts too: it was not the CLR when it sent it (RFC 4654 §3.4).
        let info = t.poll_info(ms(400)).unwrap();
        assert!((info.x_supp - 4500.0).abs() < 1e-9, "{}", info.x_supp);
        // A report about an old round counts as stale and does not lower X_supp.
        t.on_report(ms(500), 5, &fb(7, 100_000.0, Some(100), false));
        assert_eq!(t.counters().stale_reports, 1);
        // The round ends T = 6 R_max after it began (non-CLR feedback came).
        let t_end = Timestamp::ZERO + t.feedback_delay();
        t.handle_timeout(t_end);
        assert_eq!(t.round(), 1);
        let info = t.poll_info(t_end).unwrap();
        assert_eq!((info.round, info.x_supp), (1, f64::INFINITY));
        // R_max decays towards the round's peak RTT (100 ms): 0.9 × 500 ms.
        assert_eq!(t.r_max(), Duration::from_millis(450));
    }

    #[test]
    fn r_max_follows_the_senders_own_samples_not_the_receivers_figure() {
        let ms = Timestamp::from_millis;
        let mut t = sender();
        // The receiver says 100 ms, but its echo says 800: the data packet it last got was
        // sent at 1000 ms and held 200 ms, the report came at 2000 ms.
        let mut report = fb(0, 50_000.0, Some(100), false);
        report.echo = Some((ms(1000), Duration::from_millis(200)));
        t.on_report(ms(2000), 1, &report);
        assert_eq!(t.r_max(), Duration::from_millis(800));
        // Without an echo, the receiver's own figure counts.
        t.on_report(ms(2100), 2, &fb(0, 60_000.0, Some(900), false));
        assert_eq!(t.r_max(), Duration::from_millis(900));
    }

    #[test]
    fn the_rate_halves_when_the_clr_falls_silent_and_it_is_dropped_after_ten_rtts() {
        let mut t = sender();
        let ms = Timestamp::from_millis;
        t.on_report(ms(100), 1, &fb(0, 40_000.0, Some(100), true));
        let x = t.rate_bytes_per_s();
        // Silent from 100 ms; but CLR for less than 10 RTTs (1 s) until 1.1 s: no halving
        // at 500 ms (4 RTTs).
        t.handle_timeout(ms(500));
        assert_eq!(t.rate_bytes_per_s(), x);
        // It reports at 1 s, then falls silent: halved after 4 of its RTTs, at 1.4 s...
        t.on_report(ms(1000), 1, &fb(0, 40_000.0, Some(100), true));
        let x = t.rate_bytes_per_s();
        let (at, _) = t.poll_timeout().unwrap();
        assert!(at <= ms(1400));
        t.handle_timeout(ms(1300));
        assert_eq!(t.rate_bytes_per_s(), x);
        t.handle_timeout(ms(1400));
        assert_eq!(t.rate_bytes_per_s(), x / 2.0);
        // ...once: still the CLR, still half, until 10 of its RTTs;
        assert!(t.poll_timeout().unwrap().0 <= ms(2000));
        t.handle_timeout(ms(1900));
        assert_eq!((t.rate_bytes_per_s(), t.clr()), (x / 2.0, Some(1)));
        // silent for 10 RTTs: taken to have left, the rate left as it was.
        t.handle_timeout(ms(2000));
        assert_eq!((t.rate_bytes_per_s(), t.clr()), (x / 2.0, None));
        assert_eq!(t.counters().clr_silence_halvings, 1);
    }

    #[test]
    fn with_no_feedback_at_all_the_rate_halves_every_ten_r_max_to_a_floor() {
        let mut t = sender();
        for k in 1..40 {
            t.handle_timeout(Timestamp::from_secs(5 * k));
        }
        assert_eq!(t.rate_bytes_per_s(), 1000.0 / 8.0);
        assert!(t.counters().no_feedback_halvings >= 4);
    }

    #[test]
    fn slow_start_follows_the_smallest_reporter_and_ends_at_the_first_loss() {
        let mut t = sender();
        let ms = Timestamp::from_millis;
        t.on_report(ms(100), 1, &fb(0, 8_000.0, Some(100), false));
        assert_eq!(t.clr(), Some(1));
        t.on_report(ms(150), 2, &fb(0, 6_000.0, Some(100), false));
        assert_eq!((t.clr(), t.rate_bytes_per_s()), (Some(2), 6_000.0));
        assert!(t.in_slow_start());
        // A higher report from another receiver does not raise the rate.
        t.on_report(ms(200), 1, &fb(0, 12_000.0, Some(100), false));
        assert_eq!(t.rate_bytes_per_s(), 6_000.0);
        t.on_report(ms(300), 3, &fb(0, 90_000.0, Some(100), true));
        assert!(!t.in_slow_start());
        assert!(t.poll_info(ms(300)).is_some_and(|i| !i.slow_start));
    }

    /// RFC 4654 §3.6: the CLR reports twice what it receives once per its RTT, and each report
    /// sets the rate: it doubles every RTT, many times within one feedback round (T = 3 s
    /// here), not once a round.
    #[test]
    fn slow_start_doubles_the_rate_every_rtt_of_the_clr() {
        let mut t = sender();
        let start = t.rate_bytes_per_s();
        let mut x = start;
        for k in 1..=8u64 {
            // The CLR received at the rate sent during its last RTT (100 ms).
            t.on_report(
                Timestamp::from_millis(100 * k),
                1,
                &fb(0, 2.0 * x, Some(100), false),
            );
            x = t.rate_bytes_per_s();
        }
        assert_eq!(t.round(), 0);
        assert!(t.in_slow_start());
        assert_eq!(x, start * 256.0);
    }

    /// §3.3 case 3: the receiver that takes over from a CLR taken to have left (silent for
    /// 10 of its RTTs) does not raise the rate for a feedback round; a lower rate it takes.
    #[test]
    fn after_the_clr_left_the_next_reporter_raises_nothing_for_a_round() {
        let mut t = sender();
        let ms = Timestamp::from_millis;
        t.on_report(ms(100), 1, &fb(0, 40_000.0, Some(100), true));
        for at in [1100, 1500, 1900, 2300] {
            t.handle_timeout(ms(at));
        }
        assert_eq!(t.clr(), None);
        let x = t.rate_bytes_per_s();
        t.on_report(ms(2400), 2, &fb(0, 10.0 * x, Some(100), true));
        assert_eq!((t.clr(), t.rate_bytes_per_s()), (Some(2), x));
        t.on_report(ms(2500), 2, &fb(0, 10.0 * x, Some(100), true));
        assert_eq!(t.rate_bytes_per_s(), x, "no increase within the round");
        let later = ms(2400) + t.feedback_delay() + Duration::from_millis(100);
        t.on_report(later, 2, &fb(0, 10.0 * x, Some(100), true));
        assert!(t.rate_bytes_per_s() > x);
        // The one that left, back, is a new CLR only if it reports less.
        t.on_report(later, 1, &fb(0, 20.0 * x, Some(100), true));
        assert_eq!(t.clr(), Some(2));
    }

    /// A CLR that says it is leaving is still heard: its reports stop the silence halvings,
    /// and the next reporter takes its place (case 3).
    #[test]
    fn a_leaving_clr_is_replaced_without_halving() {
        let mut t = sender();
        let ms = Timestamp::from_millis;
        t.on_report(ms(100), 1, &fb(0, 40_000.0, Some(100), true));
        let x = t.rate_bytes_per_s();
        let mut leaving = fb(0, 40_000.0, Some(100), true);
        leaving.leaving = true;
        for k in 1..=20u64 {
            t.on_report(ms(100 + 100 * k), 1, &leaving);
            t.handle_timeout(ms(100 + 100 * k));
        }
        assert_eq!(t.counters().clr_silence_halvings, 0);
        assert_eq!(t.rate_bytes_per_s(), x);
        t.on_report(ms(2200), 2, &fb(0, 50_000.0, Some(100), true));
        assert_eq!((t.clr(), t.rate_bytes_per_s()), (Some(2), x));
    }

    #[test]
    fn echoes_go_to_receivers_without_an_rtt_first_and_the_queue_is_bounded() {
        let mut t = sender();
        let ms = Timestamp::from_millis;
        let _ = t.poll_info(ms(0));
        let mut with = fb(0, 9_000.0, Some(100), true);
        with.ts_us = 11;
        let mut without = fb(0, 9_500.0, None, true);
        without.ts_us = 22;
        t.on_report(ms(100), 7, &with);
        t.on_report(ms(100), 8, &without);
        // Receiver 7 became CLR (first report); 8 has no RTT: 7 is a new CLR, priority 0;
        // the CLR is also echoed once per round first.
        let first = t.poll_info(ms(110)).unwrap().echo.unwrap();
        assert_eq!((first.receiver, first.ts_us), (7, 11));
        assert_eq!(first.delay, Duration::from_millis(10));
        let second = t.poll_info(ms(120)).unwrap().echo.unwrap();
        assert_eq!(second.receiver, 8);
        for id in 100..400 {
            t.on_report(ms(200), id, &fb(0, 99_000.0, Some(100), true));
        }
        assert!(t.echoes.len() <= MAX_ECHOES);
    }

    #[test]
    fn within_a_class_the_older_rounds_report_is_echoed_first_then_the_lower_rate() {
        let mut t = sender();
        let ms = Timestamp::from_millis;
        // Receiver 1 becomes the CLR and is echoed (once per round).
        t.on_report(ms(100), 1, &fb(0, 5_000.0, Some(100), true));
        assert_eq!(t.poll_info(ms(100)).unwrap().echo.unwrap().receiver, 1);
        t.handle_timeout(Timestamp::ZERO + 2 * t.feedback_delay());
        assert_eq!(t.round(), 1);
        let _ = t.poll_info(ms(6000));
        t.on_report(ms(6050), 1, &fb(1, 5_000.0, Some(100), true));
        // Three reports without an RTT, above the CLR's rate: one of this round at the
        // lowest rate, two of the round before.
        let at = ms(6100);
        t.on_report(at, 2, &fb(1, 6_000.0, None, true));
        t.on_report(at, 3, &fb(0, 9_000.0, None, true));
        t.on_report(at, 4, &fb(0, 8_000.0, None, true));
        let order: Vec<u32> = (0..4)
            .filter_map(|k| t.poll_info(ms(6110 + 10 * k)).and_then(|i| i.echo))
            .map(|e| e.receiver)
            .collect();
        // The CLR first (once a round), then round 0's by rate, then round 1's.
        assert_eq!(order, vec![1, 4, 3, 2]);
    }
}
