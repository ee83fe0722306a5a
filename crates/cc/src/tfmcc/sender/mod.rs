//! The TFMCC sender (RFC 4654 §3).
//!
//! - **Start (§3.1):** `R_max` = 500 ms, one packet per `R_max`, slow start.
//! - **`R_max` (§3.2):** from the sender's own sample of each report, `R_r = now − ts_i'`
//!   (the echoed send time of the receiver's last data packet, plus how long it held it): a
//!   larger one raises it at once; at the end of a round without that,
//!   `R_max = max(0.9 R_max, R_peak)`, the round's largest sample; never below
//!   `s/X + 10 ms` (the packet interval and the clock's granularity), also the moment `X`
//!   falls.
//! - **Rounds (§3.4):** `T = k R_max` (k = 6; §3.4 allows 4 where receivers' feedback is
//!   multicast to the whole group, which RTCP to the sender is not). A round ends
//!   `T` after it began if a non-CLR receiver answered, else at the first non-CLR answer, at
//!   most `2T` after. Each non-CLR answer lowers the suppression rate:
//!   `X_supp = (1 − g) X_r` when `X_supp > X_r`, g = 0.1.
//! - **The rate (§3.3):** a receiver reporting less than the rate becomes the CLR and the
//!   rate drops to its `X_r` at once; each of the CLR's reports (one per its RTT) moves the
//!   rate to `min(X_r, X + s / R_max)` (case 4); with no CLR, the rate is set to a report's
//!   `X_r` if that is less than one packet per `R_max` more, else rises to it by at most that
//!   every `R_max` (case 1, a ramp, `ramp.rs`); a CLR that leaves (its report says so, or it is
//!   silent for 10 of its RTTs) is replaced by the next reporter, with no increase for a
//!   round (case 3). One whose report says so stays the CLR, announced and echoed, until
//!   then or its round's end (§4.2: it flags its reports to the round's end), its reports
//!   lowering the rate but raising it no more; its BYE is a leave at once; another
//!   receiver's flagged report makes no CLR (case 2), but lowers `X_supp` as any (§3.4). A receiver with loss but no RTT computed `X_r` with `R_max`; the sender
//!   scales it by `R_max / R_r`, `R_r` its own sample from the report's echo, for the choice
//!   of CLR and the rate (§3.3, §3.4), not for `X_supp`.
//! - **Slow start (§3.6):** until a receiver reports a loss, receivers report `2 X_recv`;
//!   the receiver that reports the lowest rate becomes the CLR (§3.3 cases 1-2), and each of
//!   its reports (one per its RTT, §4.5) sends the rate towards what it reported, without
//!   the one-packet-per-`R_max` limit, "gradually ... over the course of an RTT" (a
//!   ramp of 8 steps (`ramp.rs`) over the CLR's RTT, driven by the sender's timer): the rate about
//!   doubles every RTT. A lower report between the rate and the ramp's end becomes the end;
//!   one below the rate is taken at once. The first report of a loss ends slow start, and
//!   the ramp where it got to.
//! - **Silence (§3.3):** no report from the CLR for 4 of its RTTs halves the rate once
//!   (not within 10 RTTs of its choice); after 10 RTTs of silence it is taken to have left.
//!   No report from anyone for 10 `R_max` halves the rate, again every 10 `R_max`, down to
//!   one packet per 8 s.
//! - **Echoes (§3.5):** one per announcement, from the queue of `echo.rs`: a new CLR or one
//!   without an RTT first, then receivers without an RTT, then others, then the CLR; the CLR
//!   at least once per round.

use super::echo::{EchoClass, EchoQueue};
use super::ramp::Ramp;
use super::{ReceiverFeedback, SenderInfo};
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
    /// The least a source sends that cannot send less whatever the rate (a constant-rate
    /// mux's lowest rate): the rate does not go below it, as the stream would send that much
    /// anyway. Zero (the default) for a source sent at the rate, which queues what the rate
    /// does not carry: RFC 4654's own start (one packet per `R_max`, §3.1) and floor (one
    /// packet per 8 s) then hold.
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
    /// `R_max` 500 ms at the start, announcements every `R_max` and at least 10 ms apart; the
    /// rate never below one packet per 8 s.
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
    state: ClrState,
}

/// Where the CLR stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClrState {
    /// Its reports set the rate (§3.3 case 4).
    Active,
    /// Its last report carried the leave flag (§4.2): still the CLR, announced and echoed,
    /// its reports flagged until its round ends, but they no longer move the rate; the next
    /// other receiver's report takes its place (§3.3 case 3).
    Leaving,
    /// Silent for 10 of its RTTs: taken to have crashed or left (§3.3).
    Gone,
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
    /// Slow start's way to its last target (§3.6), while under way.
    ramp: Option<Ramp>,
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
    heard_any: Timestamp,
    no_feedback_halved: Timestamp,
    echoes: EchoQueue,
    announce_due: Option<Timestamp>,
    last_announce: Option<Timestamp>,
    counters: TfmccCounters,
}

impl TfmccSender {
    /// A sender starting at `now` in slow start, round 0, at one packet per `R_max` (§3.1;
    /// or the source's least, if it has one above that), with an announcement due at once.
    pub fn new(cfg: TfmccConfig, now: Timestamp) -> Self {
        let r_max = cfg.initial_r_max;
        let least = cfg.min_rate.as_bps() as f64 / 8.0;
        TfmccSender {
            x: (cfg.segment_bytes.max(1) as f64 / r_max.as_secs_f64()).max(least),
            ramp: None,
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
            heard_any: now,
            no_feedback_halved: now,
            echoes: EchoQueue::default(),
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

    /// The current CLR, as announced: also one on its way out (§4.2), not one taken to have
    /// gone (none then, until the next report).
    pub fn clr(&self) -> Option<u32> {
        self.clr.filter(|c| c.state != ClrState::Gone).map(|c| c.id)
    }

    /// The CLR whose reports set the rate: one leaving or gone is kept only so that the next
    /// reporter takes its place as §3.3's case 3 says.
    fn current_clr(&self) -> Option<&Clr> {
        self.clr.as_ref().filter(|c| c.state == ClrState::Active)
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

    /// The rate the sender is on its way to: a ramp's end while one runs, else `X`.
    fn heading(&self) -> f64 {
        self.ramp.map_or(self.x, |r| r.target().min(self.cap()))
    }

    /// One packet per `R_max`, the increase §3.3 allows a step.
    fn packet_per_r_max(&self) -> f64 {
        self.s() / self.r_max.as_secs_f64()
    }

    /// Sets `X` at once (a decrease, or a step §3.3 allows), ending any ramp.
    fn set_x(&mut self, x: f64) {
        self.ramp = None;
        self.apply_x(x);
    }

    /// Heads for `ramp`'s end in its steps; a start at or above its end is taken at once.
    fn start_ramp(&mut self, ramp: Ramp) {
        let to = ramp
            .target()
            .clamp(self.floor().min(self.cap()), self.cap());
        if to <= self.x {
            self.set_x(to);
        } else {
            self.ramp = Some(ramp);
        }
    }

    /// The ramp's next step, if one is due at `now`.
    fn step_ramp(&mut self, now: Timestamp) {
        let Some(mut r) = self.ramp.filter(|r| now >= r.next_step()) else {
            return;
        };
        let (x, done) = r.at(now);
        self.ramp = (!done).then_some(r);
        self.apply_x(x);
    }

    /// Sets `X`, within the floor and the cap; `R_max` never falls below the gap between two
    /// packets at the new rate (§3.2).
    fn apply_x(&mut self, x: f64) {
        let x = x.clamp(self.floor().min(self.cap()), self.cap());
        if (x - self.x).abs() > 0.1 * self.x {
            self.announce_soon();
        }
        self.x = x;
        self.r_max = self.r_max.max(self.least_r_max());
    }

    /// §3.2: `R_max ≥ s/X + ts_gran` (the packet interval and the clock's granularity, 10 ms).
    fn least_r_max(&self) -> Duration {
        let gap = Duration::from_secs_f64((self.s() / self.x.max(1e-9)).min(64.0));
        gap + Duration::from_millis(10)
    }

    fn announce_soon(&mut self) {
        let earliest = self
            .last_announce
            .map_or(Timestamp::ZERO, |t| t + self.cfg.min_announce_gap);
        let at = self.announce_due.map_or(earliest, |d| d.min(earliest));
        self.announce_due = Some(at.max(earliest));
    }

    /// §3.6: in slow start the rate heads for the receivers' `2 X_recv` (`target`) over one RTT
    /// of the CLR (`R_max` before it has one), without §3.3's one-packet limit.
    fn slow_start_to(&mut self, now: Timestamp, target: f64) {
        let rtt = self.current_clr().map_or(self.r_max, |c| self.clr_rtt(c));
        self.start_ramp(Ramp::over(self.x, target, now, rtt));
    }

    /// §3.3 case 4: the CLR's report raises the rate to `min(X_r, X + s / R_max)` (slow start:
    /// towards `X_r` over an RTT).
    fn increase_by_clr_report(&mut self, now: Timestamp, target: f64) {
        if self.no_increase_until.is_some_and(|t| now < t) {
            return;
        }
        if self.slow_start {
            self.slow_start_to(now, target);
        } else {
            self.set_x(target.min(self.x + self.packet_per_r_max()));
        }
    }

    /// §3.3 case 1: with no CLR, `X = X_r` at once if that rises by less than one packet per
    /// `R_max`, else by at most that every `R_max` (slow start: towards `X_r` over an RTT).
    fn increase_to(&mut self, now: Timestamp, target: f64) {
        if self.no_increase_until.is_some_and(|t| now < t) {
            return;
        }
        let step = self.packet_per_r_max();
        if self.slow_start {
            self.slow_start_to(now, target);
        } else if target - self.x < step {
            self.set_x(target);
        } else {
            self.start_ramp(Ramp::per_step(self.x, target, now, step, self.r_max));
        }
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
        // sample gives the rate it would have computed (`X_r' = X_r R_max / R_r`, lower too
        // where its RTT is above R_max).
        let unscaled_x_r = fb.x_r;
        let mut scaled = *fb;
        if let Some(r) = sample.filter(|_| fb.have_loss && fb.rtt.is_none()) {
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
        let is_clr = self.clr() == Some(id);
        let class = EchoClass::of(is_clr, fb.rtt.is_some());
        self.echoes.push(now, id, fb, class, self.round);
        self.announce_soon();
        if fb.have_loss && self.slow_start {
            // The first loss anywhere ends slow start (§3.6), and its ramp where it got to.
            self.slow_start = false;
            self.ramp = None;
            self.announce_soon();
        }
        let stale = fb.round != self.round;
        if stale {
            self.counters.stale_reports += 1;
        }
        if !is_clr && !stale {
            // §3.4: every non-CLR report of the round, a leaving receiver's too.
            self.non_clr_heard = true;
            if self.x_supp > unscaled_x_r {
                self.x_supp = (1.0 - self.cfg.g) * unscaled_x_r;
                self.announce_soon();
            }
        }
        if fb.leaving
            || self
                .clr
                .is_some_and(|c| c.id == id && c.state == ClrState::Leaving)
        {
            self.on_leaving_report(now, is_clr, fb);
            return;
        }
        match self.clr {
            Some(mut c) if c.id == id && c.state == ClrState::Active => {
                c.heard = now;
                c.halved = None;
                c.x_r = fb.x_r;
                c.rtt = fb.rtt.or(c.rtt);
                self.clr = Some(c);
                if fb.x_r < self.heading() {
                    self.lower_to(now, fb.x_r);
                } else {
                    self.increase_by_clr_report(now, fb.x_r);
                }
            }
            Some(c) if c.state == ClrState::Active => {
                if fb.x_r < self.heading() {
                    self.make_clr(now, id, fb);
                    self.lower_to(now, fb.x_r);
                }
            }
            _ => {
                // No CLR, or one that left (even if this is it, back): this receiver takes
                // its place (cases 1 and 3).
                let replaced = self.clr.is_some();
                self.make_clr(now, id, fb);
                if fb.x_r <= self.heading() {
                    self.lower_to(now, fb.x_r);
                } else if replaced {
                    self.no_increase_until = Some(now + self.feedback_delay());
                } else {
                    self.increase_to(now, fb.x_r);
                }
            }
        }
        self.maybe_end_round(now);
    }

    /// A report with the leave flag (or a late unflagged one from the CLR that sent one):
    /// a receiver on its way out does not become the CLR (§3.3 case 2); the CLR stays the CLR
    /// until another receiver's report takes its place or its round ends (§4.2), and its
    /// reports may still lower the rate (case 4) but no longer raise it.
    fn on_leaving_report(&mut self, now: Timestamp, is_clr: bool, fb: &ReceiverFeedback) {
        let Some(c) = self.clr.as_mut().filter(|_| is_clr) else {
            return;
        };
        c.state = ClrState::Leaving;
        c.heard = now;
        self.ramp = None;
        if fb.x_r < self.x {
            self.set_x(fb.x_r);
        }
    }

    /// A report below where the sender is heading: taken at once if below `X`; one between
    /// `X` and a ramp's end becomes its end.
    fn lower_to(&mut self, now: Timestamp, x_r: f64) {
        let x = self.x;
        match self.ramp.as_mut() {
            Some(r) if x_r > x => r.lower_target(now, x, x_r),
            _ => self.set_x(x_r),
        }
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
            state: ClrState::Active,
        });
        // A new CLR is echoed first.
        self.echoes.promote(id);
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
        // A leaving CLR has left at the round's end (§4.2): the next report takes its place.
        if let Some(c) = self.clr.as_mut().filter(|c| c.state == ClrState::Leaving) {
            c.state = ClrState::Gone;
        }
        // §3.2: a round without a larger sample decays R_max, also one without any sample
        // (R_peak 0).
        if !self.r_max_raised {
            self.r_max = self.r_max.mul_f64(0.9).max(self.r_peak);
        }
        self.r_max = self.r_max.max(self.least_r_max());
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
        if let Some(r) = self.ramp {
            next = next.min(r.next_step());
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
        self.step_ramp(now);
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
                if now.saturating_since(c.heard) >= 10 * rtt {
                    c.state = ClrState::Gone;
                }
                if c.halved.is_none() && c.state == ClrState::Active {
                    c.halved = Some(now);
                    self.counters.clr_silence_halvings += 1;
                    self.set_x(self.x / 2.0);
                }
                if c.state == ClrState::Gone {
                    self.ramp = None;
                }
                self.clr = Some(c);
                self.announce_soon();
            }
        }
        if now >= self.no_feedback_at() {
            self.counters.no_feedback_halvings += 1;
            self.set_x(self.x / 2.0);
            self.no_feedback_halved = now;
            self.announce_soon();
        }
    }

    /// The sender's fields, when an announcement is due at `now`.
    pub fn poll_info(&mut self, now: Timestamp) -> Option<SenderInfo> {
        let due = self.announce_due?;
        if now < due {
            return None;
        }
        // §3.5: the CLR at least once per round; otherwise the most urgent echo.
        let echo = self.echoes.pop(now, self.round, self.clr());
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
    fn reads(&self, feedback: &Feedback) -> bool {
        feedback.tfmcc.is_some()
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
    /// The CLR's BYE: it has left, and the next report takes its place (§3.3 case 3).
    fn on_receiver_left(&mut self, _now: Timestamp, receiver: u32) {
        if let Some(c) = self.clr.as_mut().filter(|c| c.id == receiver) {
            c.state = ClrState::Gone;
            self.ramp = None;
            self.announce_soon();
        }
    }
    fn set_rate(&mut self, rate: Bitrate) {
        self.cfg.max_rate = rate;
        // A lower cap lowers X at once, with R_max's floor (§3.2) and an announcement.
        self.apply_x(self.x.min(self.cap()));
    }
}

#[cfg(test)]
mod tests;
