//! TFRC's sender (RFC 5348 §4): the allowed rate `X` from the receiver's reports of its loss
//! event rate `p` and receive rate `X_recv`, and the no-feedback timer.
//!
//! - Before any feedback: one packet per second (§4.2), halved at each no-feedback timeout
//!   (every 2 s), never below one packet per `t_mbi` (64 s).
//! - First feedback: `R` is the first RTT sample; `X = W_init / R`, `W_init = min(4s, max(2s,
//!   4380))` bytes, TCP's initial window (§4.2).
//! - Each feedback (§4.3): `R = 0.9 R + 0.1 R_sample`; with `p > 0`,
//!   `X = max(min(X_Bps, 2 X_recv), s / t_mbi)`, `X_Bps` the throughput equation; with `p = 0`
//!   (slow start), at most once per RTT, `X = max(min(2X, 2 X_recv), W_init / R)`.
//! - The no-feedback timer runs `max(4R, 2s/X)` (§4.3, step 5). On expiry (§4.4): an idle
//!   sender (nothing sent since the timer was set) below its recover rate (`X_recv < W_init /
//!   R` with loss, `X < 2 W_init / R` without) keeps its rate; else without loss `X` halves
//!   (there is no equation rate yet); with loss `update_limits` halves the limit that held:
//!   `X_recv` if `X_Bps > 2 X_recv`, else `X_Bps / 2` (`X_recv` becomes half the limit and `X
//!   = min(X_Bps, 2 X_recv)`). Before any feedback, `X` halves unless the sender was idle.
//!
//! Left out, as RFC 5348 allows for a sender that is not data-limited: the `X_recv_set` kept
//! over data-limited periods (§4.3 step 4). Metronome's video sender sends at the rate it is
//! given (a constant-rate source from its next packet, the encoder per GOP), so `recv_limit = 2
//! X_recv` of the latest report.

use super::equation::throughput_bytes_per_s;
use crate::{Announce, ControllerTimer, Feedback, RateController};
use metronome_time::{Bitrate, Timestamp};
use std::time::Duration;

/// What a TFRC receiver reports (RFC 5348 §3.2.2; carried in RTCP, see `Feedback::tfrc`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TfrcReport {
    /// The loss event rate, 0..=1.
    pub p: f64,
    /// What it received over the last RTT, bit/s.
    pub x_recv_bps: f64,
    /// A round-trip time sample (from the timestamp echo), taken by the sender.
    pub rtt_sample: Duration,
}

/// TFRC's sender settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TfrcConfig {
    /// The segment size `s`, bytes (the RTP packets' size on the wire).
    pub segment_bytes: u32,
    /// The longest time between packets when backing off (RFC 5348: 64 s).
    pub t_mbi: Duration,
    /// The most it may send (the application's or admission's ceiling).
    pub max_rate: Bitrate,
}

impl TfrcConfig {
    /// The settings for segments of `segment_bytes` capped at `max_rate`, with RFC 5348's
    /// `t_mbi` of 64 s.
    pub fn new(segment_bytes: u32, max_rate: Bitrate) -> Self {
        TfrcConfig {
            segment_bytes,
            t_mbi: Duration::from_secs(64),
            max_rate,
        }
    }
}

/// The sender's state.
#[derive(Clone, Debug)]
pub struct TfrcSender {
    cfg: TfrcConfig,
    /// The allowed rate, bytes/s.
    x: f64,
    /// The receive rate the last report (or timeout) left, bytes/s.
    x_recv: f64,
    p: f64,
    rtt: Option<Duration>,
    /// When the rate was last doubled in slow start.
    tld: Option<Timestamp>,
    no_feedback_at: Timestamp,
    /// When the no-feedback timer was last armed, and whether a packet left since.
    armed_at: Timestamp,
    sent_since_armed: bool,
    /// The RTT last told to the receiver, and whether it should be told again.
    told_rtt: Option<Duration>,
}

impl TfrcSender {
    /// A sender starting at `now`, one packet per second.
    pub fn new(cfg: TfrcConfig, now: Timestamp) -> Self {
        let s = cfg.segment_bytes.max(1) as f64;
        TfrcSender {
            cfg,
            x: s,
            x_recv: 0.0,
            p: 0.0,
            rtt: None,
            tld: None,
            no_feedback_at: now + Duration::from_secs(2),
            armed_at: now,
            sent_since_armed: false,
            told_rtt: None,
        }
    }

    fn s(&self) -> f64 {
        self.cfg.segment_bytes.max(1) as f64
    }

    fn floor(&self) -> f64 {
        self.s() / self.cfg.t_mbi.as_secs_f64().max(1e-3)
    }

    fn cap(&self) -> f64 {
        self.cfg.max_rate.as_bps() as f64 / 8.0
    }

    /// `W_init / R`: TCP's initial window per round trip.
    fn initial_rate(&self, rtt: Duration) -> f64 {
        let s = self.s();
        let w_init = (4.0 * s).min((2.0 * s).max(4380.0));
        w_init / rtt.as_secs_f64().max(1e-6)
    }

    /// The allowed rate, bytes/s.
    pub fn rate_bytes_per_s(&self) -> f64 {
        self.x
    }

    /// The smoothed RTT, once there is one.
    pub fn rtt(&self) -> Option<Duration> {
        self.rtt
    }

    /// The RTT to tell the receiver (RFC 5348 §3.2.1 puts it in every packet): the first one,
    /// and again when it has moved by more than an eighth.
    fn rtt_to_tell(&self) -> Option<Duration> {
        let rtt = self.rtt?;
        match self.told_rtt {
            Some(told) if rtt.abs_diff(told) * 8 <= told => None,
            _ => Some(rtt),
        }
    }

    /// A receiver's report arrived at `now`.
    pub fn on_report(&mut self, now: Timestamp, r: &TfrcReport) {
        self.x_recv = (r.x_recv_bps / 8.0).max(0.0);
        self.p = r.p.clamp(0.0, 1.0);
        let first = self.rtt.is_none();
        let rtt = match self.rtt {
            None => r.rtt_sample,
            Some(old) => old.mul_f64(0.9) + r.rtt_sample.mul_f64(0.1),
        };
        self.rtt = Some(rtt);
        if first && self.p == 0.0 {
            self.x = self.initial_rate(rtt).min(self.cap());
            self.tld = Some(now);
        } else {
            self.update_rate(now, rtt);
        }
        self.arm(now, rtt);
    }

    /// §4.3 step 4.
    fn update_rate(&mut self, now: Timestamp, rtt: Duration) {
        let recv_limit = 2.0 * self.x_recv;
        if self.p > 0.0 {
            let x_bps = throughput_bytes_per_s(self.s(), rtt, self.p);
            self.x = x_bps.min(recv_limit).max(self.floor());
        } else if self.tld.is_none_or(|t| now.saturating_since(t) >= rtt) {
            self.x = (2.0 * self.x).min(recv_limit).max(self.initial_rate(rtt));
            self.tld = Some(now);
        }
        self.x = self.x.min(self.cap());
    }

    fn arm(&mut self, now: Timestamp, rtt: Duration) {
        let t = (4.0 * rtt.as_secs_f64()).max(2.0 * self.s() / self.x.max(1e-9));
        self.no_feedback_at = now + Duration::from_secs_f64(t.min(3600.0));
        self.armed_at = now;
        self.sent_since_armed = false;
    }

    /// The no-feedback timer expired (§4.4).
    pub fn on_no_feedback(&mut self, now: Timestamp) {
        let idle = !self.sent_since_armed;
        let Some(rtt) = self.rtt else {
            // No feedback yet: halved, unless nothing was sent since the timer was set.
            if !idle {
                self.x = (self.x / 2.0).max(self.floor());
            }
            self.no_feedback_at = now + Duration::from_secs(2);
            return;
        };
        let recover_rate = self.initial_rate(rtt);
        let x_bps = throughput_bytes_per_s(self.s(), rtt, self.p);
        // An idle sender hears nothing because it sent nothing: below what it could
        // recover to at once, it keeps its rate.
        let low = if self.p > 0.0 {
            self.x_recv < recover_rate
        } else {
            self.x < 2.0 * recover_rate
        };
        if idle && low {
            // Kept as it is.
        } else if self.p == 0.0 {
            // No equation rate yet (slow start): the allowed rate halves.
            self.x = (self.x / 2.0).max(self.floor());
        } else if x_bps > 2.0 * self.x_recv {
            // The receive rate was what limited it: that limit halves.
            self.update_limits(self.x_recv, x_bps);
        } else {
            self.update_limits(x_bps / 2.0, x_bps);
        }
        self.x = self.x.min(self.cap());
        self.arm(now, rtt);
    }

    /// §4.4's `update_limits`: the receive rate becomes half of `timer_limit` (at least
    /// `s / t_mbi`), and the rate follows as on feedback with loss (step 4), `x_bps` the
    /// equation's rate.
    fn update_limits(&mut self, timer_limit: f64, x_bps: f64) {
        let limit = timer_limit.max(self.floor());
        self.x_recv = limit / 2.0;
        self.x = x_bps.min(2.0 * self.x_recv).max(self.floor());
    }
}

impl RateController for TfrcSender {
    fn wants_send_times(&self) -> bool {
        true
    }
    fn name(&self) -> &'static str {
        "tfrc"
    }
    fn target_rate(&self) -> Bitrate {
        Bitrate::bps((self.x * 8.0) as u64)
    }
    fn on_feedback(&mut self, now: Timestamp, feedback: &Feedback) {
        if let Some(r) = &feedback.tfrc {
            self.on_report(now, r);
        }
    }
    fn reads(&self, feedback: &Feedback) -> bool {
        feedback.tfrc.is_some()
    }
    fn on_sent(&mut self, _now: Timestamp, _bytes: u64) {
        self.sent_since_armed = true;
    }
    fn poll_timeout(&self) -> Option<(Timestamp, ControllerTimer)> {
        if self.rtt_to_tell().is_some() {
            return Some((Timestamp::ZERO, ControllerTimer::Announce));
        }
        Some((self.no_feedback_at, ControllerTimer::NoFeedback))
    }
    fn poll_announce(&mut self, _now: Timestamp) -> Option<Announce> {
        let rtt = self.rtt_to_tell()?;
        self.told_rtt = Some(rtt);
        Some(Announce::TfrcRtt(rtt))
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        if now >= self.no_feedback_at {
            self.on_no_feedback(now);
        }
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

    fn sender() -> TfrcSender {
        TfrcSender::new(TfrcConfig::new(S, Bitrate::mbps(100)), Timestamp::ZERO)
    }

    fn report(p: f64, x_recv_bps: f64, rtt_ms: u64) -> TfrcReport {
        TfrcReport {
            p,
            x_recv_bps,
            rtt_sample: Duration::from_millis(rtt_ms),
        }
    }

    #[test]
    fn one_packet_a_second_then_halving_without_feedback() {
        let mut t = sender();
        assert_eq!(t.rate_bytes_per_s(), 1000.0);
        assert_eq!(t.poll_timeout().unwrap().0, Timestamp::from_secs(2));
        // Nothing sent: nothing to hear about, kept.
        t.handle_timeout(Timestamp::from_secs(2));
        assert_eq!(t.rate_bytes_per_s(), 1000.0);
        t.on_sent(Timestamp::from_secs(3), 1000);
        t.handle_timeout(Timestamp::from_secs(4));
        assert_eq!(t.rate_bytes_per_s(), 500.0);
        // Never below one packet per t_mbi.
        for k in 3..40 {
            t.on_sent(Timestamp::from_secs(2 * k - 1), 1000);
            t.handle_timeout(Timestamp::from_secs(2 * k));
        }
        assert!((t.rate_bytes_per_s() - 1000.0 / 64.0).abs() < 1e-9);
    }

    #[test]
    fn slow_start_doubles_once_per_rtt_limited_by_twice_the_receive_rate() {
        let mut t = sender();
        let ms = Timestamp::from_millis;
        // First feedback, no loss: W_init / R = min(4000, max(2000, 4380)) / 0.1 = 40 000 B/s.
        t.on_report(ms(100), &report(0.0, 8_000.0, 100));
        assert_eq!(t.rate_bytes_per_s(), 40_000.0);
        // Within the same RTT: no doubling.
        t.on_report(ms(150), &report(0.0, 320_000.0, 100));
        assert_eq!(t.rate_bytes_per_s(), 40_000.0);
        // An RTT later: doubled, the receive rate (40 kB/s) allowing up to 80 kB/s.
        t.on_report(ms(200), &report(0.0, 320_000.0, 100));
        assert_eq!(t.rate_bytes_per_s(), 80_000.0);
        // Receiving only 30 kB/s: 60 kB/s at most, but never below W_init / R.
        t.on_report(ms(300), &report(0.0, 240_000.0, 100));
        assert_eq!(t.rate_bytes_per_s(), 60_000.0);
    }

    #[test]
    fn with_losses_the_rate_follows_the_equation_and_the_receive_rate() {
        let mut t = sender();
        let ms = Timestamp::from_millis;
        t.on_report(ms(100), &report(0.0, 8_000.0, 100));
        // p = 1 %: X_Bps = 112 332 B/s at R = 100 ms (equation.rs), below 2 X_recv.
        t.on_report(ms(300), &report(0.01, 8.0 * 100_000.0, 100));
        assert!((t.rate_bytes_per_s() - 112_332.234_362_992_98).abs() < 1e-6);
        // The receiver gets only 40 kB/s: at most twice that.
        t.on_report(ms(400), &report(0.01, 8.0 * 40_000.0, 100));
        assert_eq!(t.rate_bytes_per_s(), 80_000.0);
        // The RTT is smoothed: 0.9 * 100 + 0.1 * 200 ms.
        t.on_report(ms(500), &report(0.01, 8.0 * 100_000.0, 200));
        assert_eq!(t.rtt(), Some(Duration::from_millis(110)));
        let want = throughput_bytes_per_s(1000.0, Duration::from_millis(110), 0.01);
        assert!((t.rate_bytes_per_s() - want).abs() < 1e-6);
        assert_eq!(t.target_rate(), Bitrate::bps((want * 8.0) as u64));
    }

    #[test]
    fn the_no_feedback_timer_halves_the_receive_rate_it_relies_on() {
        let mut t = sender();
        let ms = Timestamp::from_millis;
        t.on_report(ms(100), &report(0.0, 8_000.0, 100));
        t.on_report(ms(300), &report(0.01, 8.0 * 50_000.0, 100));
        assert_eq!(t.rate_bytes_per_s(), 100_000.0);
        // The RTT is told to the receiver first (at once), then nothing until it moves.
        assert_eq!(t.poll_timeout().unwrap().1, ControllerTimer::Announce);
        let told = t.poll_announce(ms(300));
        assert_eq!(told, Some(Announce::TfrcRtt(Duration::from_millis(100))));
        assert_eq!(t.poll_announce(ms(300)), None);
        // Armed for max(4R, 2s/X) = 400 ms.
        let (at, why) = t.poll_timeout().unwrap();
        assert_eq!((at, why), (ms(700), ControllerTimer::NoFeedback));
        t.on_sent(ms(400), 1000);
        t.handle_timeout(ms(700));
        // X_Bps (112 kB/s) > 2 X_recv: X_recv halves to 25 kB/s, X to 50 kB/s.
        assert_eq!(t.rate_bytes_per_s(), 50_000.0);
        t.on_sent(ms(800), 1000);
        t.handle_timeout(ms(700) + Duration::from_millis(400));
        assert_eq!(t.rate_bytes_per_s(), 25_000.0);
        // Idle since (nothing sent) and receiving under W_init / R: kept as it is.
        let mut idle = sender();
        idle.on_report(ms(100), &report(0.01, 8.0 * 20_000.0, 100));
        let _ = idle.poll_announce(ms(100));
        let before = idle.rate_bytes_per_s();
        let (at, _) = idle.poll_timeout().unwrap();
        idle.handle_timeout(at);
        assert_eq!(idle.rate_bytes_per_s(), before);
    }

    /// RFC 5348 §4.4: without loss there is no equation rate, and the timer halves the allowed
    /// rate itself. (Halving the receive rate instead, as RFC 3448 did with its `p = 0` rule,
    /// took a sender whose first report counted one packet down to two packets a second.)
    #[test]
    fn in_slow_start_the_timer_halves_the_allowed_rate() {
        let mut t = sender();
        let ms = Timestamp::from_millis;
        // First feedback, one packet received: W_init / R = 40 000 B/s at R = 100 ms.
        t.on_report(ms(100), &report(0.0, 8_000.0, 100));
        assert_eq!(t.rate_bytes_per_s(), 40_000.0);
        let _ = t.poll_announce(ms(100));
        // A packet left, no report came: armed for max(4R, 2s/X) = 400 ms.
        t.on_sent(ms(150), 1000);
        let (at, why) = t.poll_timeout().unwrap();
        assert_eq!((at, why), (ms(500), ControllerTimer::NoFeedback));
        t.handle_timeout(at);
        assert_eq!(t.rate_bytes_per_s(), 20_000.0);
        // Idle below twice the recover rate (80 kB/s): kept.
        let (at, _) = t.poll_timeout().unwrap();
        t.handle_timeout(at);
        assert_eq!(t.rate_bytes_per_s(), 20_000.0);
        // The next report, an RTT on: doubled, at least W_init / R.
        t.on_report(
            at + Duration::from_millis(100),
            &report(0.0, 8.0 * 30_000.0, 100),
        );
        assert_eq!(t.rate_bytes_per_s(), 40_000.0);
    }

    #[test]
    fn a_ceiling_holds_and_feedback_without_tfrc_fields_changes_nothing() {
        let mut t = TfrcSender::new(TfrcConfig::new(S, Bitrate::kbps(200)), Timestamp::ZERO);
        t.on_report(Timestamp::from_millis(100), &report(0.0, 1e9, 10));
        assert_eq!(t.target_rate(), Bitrate::kbps(200));
        let before = t.rate_bytes_per_s();
        let fb = Feedback {
            receiver: 1,
            from: "127.0.0.1:5005".parse().unwrap(),
            fraction_lost: 0.5,
            cumulative_lost: 10,
            extended_highest_seq: 9,
            jitter: Duration::ZERO,
            rtt: None,
            tfrc: None,
            tfmcc: None,
        };
        t.on_feedback(Timestamp::from_millis(200), &fb);
        assert_eq!(t.rate_bytes_per_s(), before);
        t.set_rate(Bitrate::kbps(100));
        assert_eq!(t.target_rate(), Bitrate::kbps(100));
        assert_eq!(t.name(), "tfrc");
    }
}
