//! [`RateKnob`]: how a running stream's target rate reaches its producer. The RTCP thread and
//! the control side set it, one at a time (both hold the server's stream table); the producer
//! takes from it before each turn and tells the source (`RtpSource::set_rate`, `follow_rate`,
//! `rate_reported`).

use metronome_session::sender::RateLimits;
use metronome_time::Bitrate;
use std::sync::atomic::{AtomicU64, Ordering};

/// In [`RateKnob`]'s pending change: the rate controller moved the target (else a person asked).
const BY_CONTROLLER: u64 = 1 << 63;
/// In [`RateKnob`]'s pending change: there is one (a rate of 0 is a rate).
const PENDING: u64 = 1 << 62;
/// The rate's bits in a pending change.
const RATE: u64 = PENDING - 1;

/// A change of source rate the producer is yet to ask of the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateChange {
    /// Someone asked for it (the control API): `RtpSource::set_rate`.
    Asked(u64),
    /// The rate controller moved its target, on a report or on its own clock:
    /// `RtpSource::follow_rate`.
    Followed(u64),
}

/// The rate knob as the driver holds it: where the source's rate may go (sans-IO,
/// [`RateLimits`]), what it targets now, and what the producer is yet to tell the source.
pub struct RateKnob {
    pub limits: RateLimits,
    /// The source rate targeted now.
    pub target: AtomicU64,
    /// The last change not yet taken: [`PENDING`] set if there is one, [`BY_CONTROLLER`] for
    /// the controller's; one word, so that the producer takes a rate and its cause together.
    change: AtomicU64,
    /// The source rate after a report the controller computed its rate from, as it is (not
    /// kept within the limits: a source that averages reports caps its mean itself), for the
    /// producer to tell the source; [`PENDING`] set if there is one. The reports of one RTCP
    /// turn of the server count once, and so do those between two of the producer's turns
    /// (2 ms at most).
    reported: AtomicU64,
    /// The session's count of reports taken (`SenderSession::rate_reports`) when last looked.
    reports_seen: AtomicU64,
}

impl RateKnob {
    /// A stream that starts at `start` (source bit/s) within `limits`.
    pub fn new(start: u64, limits: RateLimits) -> Self {
        RateKnob {
            limits,
            target: AtomicU64::new(start),
            change: AtomicU64::new(0),
            reported: AtomicU64::new(0),
            reports_seen: AtomicU64::new(0),
        }
    }

    /// A person asked for a rate and the session's target is now `wire`: the source is asked
    /// for its rate, kept within the limits. Returns the source rate targeted now.
    pub fn ask(&self, wire: Bitrate) -> u64 {
        self.set(wire, 0)
    }

    /// Follows the session's target rate, moved by its rate controller: a new source rate,
    /// kept within the limits, is handed to the producer. Returns the source rate targeted
    /// now.
    pub fn follow(&self, wire: Bitrate) -> u64 {
        self.set(wire, BY_CONTROLLER)
    }

    /// Sets the target and the pending change together; the knob's writers take turns (see
    /// the module), so no other write comes between the two.
    fn set(&self, wire: Bitrate, cause: u64) -> u64 {
        let Some(ts) = self.limits.source_rate(wire) else {
            return self.target.load(Ordering::Relaxed);
        };
        let ts = ts.min(RATE);
        if self.target.swap(ts, Ordering::AcqRel) != ts {
            self.change.store(ts | PENDING | cause, Ordering::Release);
        }
        ts
    }

    /// Follows the session after its RTCP turn: as [`RateKnob::follow`] with its target rate
    /// `wire`, and when the controller computed its rate from reports since the last turn
    /// (`reports`, the session's running count), hands the producer `reported`, the target
    /// right after the last of them, in the source's units.
    pub fn follow_reports(&self, wire: Bitrate, reports: u64, reported: Option<Bitrate>) -> u64 {
        let ts = self.follow(wire);
        let new_reports = self.reports_seen.swap(reports, Ordering::AcqRel) != reports;
        let rate = reported.and_then(|r| self.limits.source_rate_unclamped(r));
        if let (true, Some(rate)) = (new_reports, rate) {
            self.reported
                .store(rate.min(RATE) | PENDING, Ordering::Release);
        }
        ts
    }

    /// The change the producer is yet to ask of the source, if any.
    pub fn take_change(&self) -> Option<RateChange> {
        let c = self.change.swap(0, Ordering::AcqRel);
        match (c & PENDING != 0, c & BY_CONTROLLER != 0) {
            (false, _) => None,
            (true, true) => Some(RateChange::Followed(c & RATE)),
            (true, false) => Some(RateChange::Asked(c & RATE)),
        }
    }

    /// The source rate after the reports since the producer last looked, if any came.
    pub fn take_report(&self) -> Option<u64> {
        let r = self.reported.swap(0, Ordering::AcqRel);
        (r & PENDING != 0).then_some(r & RATE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knob_hands_on_changes_with_their_cause_and_each_turns_reports() {
        // Two destinations: the source's rate is half the wire's.
        let limits = RateLimits {
            ts_per_wire: 0.5,
            range: Some(10_000..=4_000_000),
            ceiling: 4_000_000,
        };
        let knob = RateKnob::new(1_000_000, limits);
        let take = |k: &RateKnob| (k.take_change(), k.take_report());
        // A report that changed the rate: the change, then the report.
        knob.follow_reports(Bitrate::mbps(4), 1, Some(Bitrate::mbps(4)));
        assert_eq!(
            take(&knob),
            (Some(RateChange::Followed(2_000_000)), Some(2_000_000))
        );
        // Reports that kept it: one report for the producer, however many came between turns,
        // in the source's units as the change.
        knob.follow_reports(Bitrate::mbps(4), 3, Some(Bitrate::mbps(4)));
        assert_eq!(take(&knob), (None, Some(2_000_000)));
        // A turn without reports whose controller moved on its own clock: a change, no report.
        knob.follow_reports(Bitrate::mbps(2), 3, Some(Bitrate::mbps(4)));
        assert_eq!(take(&knob), (Some(RateChange::Followed(1_000_000)), None));
        // A report, then the controller's timer in the same turn: the report is of the rate
        // after it, not after the timer.
        knob.follow_reports(Bitrate::mbps(1), 4, Some(Bitrate::mbps(3)));
        assert_eq!(
            take(&knob),
            (Some(RateChange::Followed(500_000)), Some(1_500_000))
        );
        // A report is passed as it is, outside the limits too (the source caps its mean); a
        // change is kept within them.
        knob.follow_reports(Bitrate::mbps(10), 5, Some(Bitrate::mbps(10)));
        assert_eq!(
            take(&knob),
            (Some(RateChange::Followed(4_000_000)), Some(5_000_000))
        );
        // A change to 0 is a change.
        let zero = RateKnob::new(
            1_000_000,
            RateLimits {
                ts_per_wire: 1.0,
                range: Some(0..=4_000_000),
                ceiling: 4_000_000,
            },
        );
        zero.ask(Bitrate::bps(0));
        assert_eq!(take(&zero), (Some(RateChange::Asked(0)), None));
        // A person's rate is asked of the source as such; the same rate again is no change.
        knob.ask(Bitrate::mbps(6));
        assert_eq!(take(&knob), (Some(RateChange::Asked(3_000_000)), None));
        knob.ask(Bitrate::mbps(6));
        assert_eq!(take(&knob), (None, None));
        // A source whose rate is its own hears nothing.
        let fixed = RateKnob::new(
            1_000_000,
            RateLimits {
                ts_per_wire: 1.0,
                range: None,
                ceiling: 4_000_000,
            },
        );
        fixed.follow_reports(Bitrate::mbps(2), 1, Some(Bitrate::mbps(2)));
        assert_eq!(take(&fixed), (None, None));
    }
}
