//! TFRC's receiver (RFC 5348 §6): when to report, and what.
//!
//! - The first packet is answered at once (the sender needs an RTT sample to start).
//! - Then once per round-trip time, if data arrived since the last report: `X_recv` is the
//!   bytes received since then over the time since (at least one RTT), `p` the loss event
//!   rate of the [`LossHistory`].
//! - A new loss event is answered at once (§6.1: the sender must slow down without waiting).
//! - No data since the last report: no report (the sender's no-feedback timer acts).
//!
//! The echo is the last packet's sequence number (the low 32 bits of the extended one: the
//! sender knows when each left; a video packet's RTP timestamp is its frame's presentation
//! time, not its send time), with the time since it arrived. The round-trip
//! time the receiver uses (to group losses and pace its reports) is the sender's, as it tells
//! it ([`TfrcReceiver::set_rtt`]), or a hint until then.

use super::loss::LossHistory;
use metronome_time::Timestamp;
use std::time::Duration;

/// What to put in a report (see `metronome_wire::TfrcFeedback`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReceiverReport {
    /// The sequence number of the last packet received (the low 32 bits of the extended one).
    pub echo_seq: u32,
    /// From that packet's arrival to now.
    pub t_delay: Duration,
    /// Bytes per second received since the last report.
    pub x_recv_bytes_per_s: f64,
    /// The loss event rate.
    pub p: f64,
}

/// One source's TFRC receiver.
#[derive(Clone, Debug)]
pub struct TfrcReceiver {
    history: LossHistory,
    rtt: Duration,
    /// When the last report went, and the bytes received since.
    last_report: Option<Timestamp>,
    bytes_since: u64,
    /// A report is due at this time (or now, after a new loss event or the first packet).
    due: Option<Timestamp>,
    last_packet: Option<(u32, Timestamp)>,
    /// Loss events counted at the last report.
    events_reported: u64,
    /// The mean packet size, bytes (for the first loss interval).
    s: f64,
    /// The receive rate of the last report (a whole RTT or more), bytes/s.
    last_x_recv: f64,
}

impl TfrcReceiver {
    /// A receiver that assumes `rtt_hint` until the sender tells its RTT.
    pub fn new(rtt_hint: Duration) -> Self {
        TfrcReceiver {
            history: LossHistory::new(),
            rtt: rtt_hint.max(Duration::from_micros(100)),
            last_report: None,
            bytes_since: 0,
            due: None,
            last_packet: None,
            events_reported: 0,
            s: 0.0,
            last_x_recv: 0.0,
        }
    }

    /// The sender's round-trip time estimate: a report the hint had already put later comes an
    /// RTT after the last one.
    pub fn set_rtt(&mut self, rtt: Duration) {
        self.rtt = rtt.max(Duration::from_micros(100));
        if let (Some(due), Some(last)) = (self.due, self.last_report) {
            self.due = Some(due.min(last + self.rtt));
        }
    }

    /// The loss history its loss event rate `p` comes from (RFC 5348 §5).
    pub fn history(&self) -> &LossHistory {
        &self.history
    }

    /// A data packet: `seq` extended, `sent` its send time on the sender's timeline as its
    /// timestamp tells it (for grouping losses), `size` its bytes, arrived at `now`.
    pub fn on_packet(&mut self, now: Timestamp, seq: u64, sent: Timestamp, size: usize) {
        self.s = if self.s == 0.0 {
            size as f64
        } else {
            0.9 * self.s + 0.1 * size as f64
        };
        self.bytes_since += size as u64;
        self.last_packet = Some((seq as u32, now));
        // The rate being received, for the first loss interval (§6.3.1): over the last
        // report's span (a whole RTT), or since, if that is more.
        if let Some(since) = self.last_report {
            let dt = now.saturating_since(since).max(self.rtt).as_secs_f64();
            let rate = (self.bytes_since as f64 / dt).max(self.last_x_recv);
            self.history.set_receive_rate(rate, self.s.max(1.0));
        }
        self.history.on_packet(seq, sent, self.rtt);
        let new_event = self.history.counts().0 > self.events_reported;
        if self.last_report.is_none() || new_event {
            self.due = Some(now);
        } else if self.due.is_none() {
            self.due = self.last_report.map(|t| t + self.rtt);
        }
    }

    /// When a report is due, if one is.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.due
    }

    /// The report due by `now`, if any; the next one is then an RTT away (once data comes).
    pub fn poll_report(&mut self, now: Timestamp) -> Option<ReceiverReport> {
        if self.due.is_none_or(|t| t > now) || self.bytes_since == 0 {
            return None;
        }
        let (echo_seq, arrived) = self.last_packet?;
        let dt = match self.last_report {
            Some(t) => now.saturating_since(t).max(self.rtt),
            None => self.rtt,
        };
        let report = ReceiverReport {
            echo_seq,
            t_delay: now.saturating_since(arrived),
            x_recv_bytes_per_s: self.bytes_since as f64 / dt.as_secs_f64(),
            p: self.history.loss_event_rate(),
        };
        self.last_report = Some(now);
        self.last_x_recv = report.x_recv_bytes_per_s;
        self.bytes_since = 0;
        self.events_reported = self.history.counts().0;
        self.due = None;
        Some(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTT: Duration = Duration::from_millis(100);

    /// 1000-byte packets every 10 ms from `from` to `to` (sequence = time / 10 ms), but `lost`.
    fn feed(
        r: &mut TfrcReceiver,
        from: u64,
        to: u64,
        lost: &[u64],
        reports: &mut Vec<(u64, ReceiverReport)>,
    ) {
        for k in from..to {
            let t = Timestamp::from_millis(k * 10);
            if let Some(rep) = r.poll_report(t) {
                reports.push((k, rep));
            }
            if !lost.contains(&k) {
                // Sent 20 ms before it arrives.
                r.on_packet(t, k, Timestamp::from_millis(k * 10 - 20.min(k * 10)), 1000);
            }
        }
    }

    #[test]
    fn the_first_packet_is_answered_then_once_per_rtt() {
        let mut r = TfrcReceiver::new(RTT);
        let mut reps = Vec::new();
        feed(&mut r, 0, 60, &[], &mut reps);
        // Packet 0 at 0 ms is answered at the next look (10 ms); then every 100 ms.
        let at: Vec<u64> = reps.iter().map(|(k, _)| *k).collect();
        assert_eq!(at, vec![1, 11, 21, 31, 41, 51]);
        let (_, first) = reps[0];
        assert_eq!(first.echo_seq, 0);
        assert_eq!(first.t_delay, Duration::from_millis(10));
        // 10 packets of 1000 bytes per 100 ms.
        for (_, rep) in &reps[1..] {
            assert!((rep.x_recv_bytes_per_s - 100_000.0).abs() < 1e-6, "{rep:?}");
            assert_eq!(rep.p, 0.0);
        }
    }

    /// A report scheduled by the hint (500 ms) before the sender's RTT (50 ms) was told comes an
    /// RTT after the last one, not half a second: the first RTTs of slow start wait for it.
    #[test]
    fn the_senders_rtt_brings_a_report_the_hint_put_later_forward() {
        let ms = Timestamp::from_millis;
        let mut r = TfrcReceiver::new(Duration::from_millis(500));
        r.on_packet(ms(0), 0, ms(0), 1000);
        assert!(
            r.poll_report(ms(0)).is_some(),
            "the first packet is answered"
        );
        r.on_packet(ms(10), 1, ms(10), 1000);
        assert_eq!(r.poll_timeout(), Some(ms(500)));
        r.set_rtt(Duration::from_millis(50));
        assert_eq!(r.poll_timeout(), Some(ms(50)));
        // Told a longer one: no later than it was.
        r.set_rtt(Duration::from_millis(80));
        assert_eq!(r.poll_timeout(), Some(ms(50)));
    }

    #[test]
    fn a_new_loss_event_is_answered_at_once_with_its_loss_event_rate() {
        let mut r = TfrcReceiver::new(RTT);
        let mut reps = Vec::new();
        feed(&mut r, 0, 200, &[150], &mut reps);
        // 150 is known lost when 153 arrives (at 1530 ms): the report goes at the next look
        // (1540 ms), not with the regular one at 1610 (the one at 1510 knew nothing yet).
        let after: Vec<&(u64, ReceiverReport)> = reps.iter().filter(|(k, _)| *k > 150).collect();
        assert_eq!((after[0].0, after[0].1.p), (151, 0.0));
        assert_eq!(after[1].0, 154);
        assert!(after[1].1.p > 0.0);
        // The first interval comes from the rate being received (100 kB/s at RTT 100 ms).
        let allowed = super::super::equation::throughput_bytes_per_s(1000.0, RTT, after[1].1.p);
        assert!((allowed / 100_000.0 - 1.0).abs() < 0.2, "{allowed}");
    }

    #[test]
    fn no_data_no_report() {
        let mut r = TfrcReceiver::new(RTT);
        let mut reps = Vec::new();
        feed(&mut r, 0, 5, &[], &mut reps);
        let n = reps.len();
        for k in 5..100 {
            if let Some(rep) = r.poll_report(Timestamp::from_millis(k * 10)) {
                reps.push((k, rep));
            }
        }
        assert_eq!(
            reps.len(),
            n + 1,
            "the one due for the packets before, then silence"
        );
    }
}
