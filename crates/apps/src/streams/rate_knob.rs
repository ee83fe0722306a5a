//! [`RateKnob`]: how a running stream's target rate reaches its producer. The RTCP thread and
//! the control side set it; the producer takes from it before each turn and tells the source
//! (`RtpSource::set_rate`, `follow_rate`, `rate_reported`).

use metronome_session::sender::RateLimits;
use metronome_time::Bitrate;
use std::sync::atomic::{AtomicU64, Ordering};

/// In [`RateKnob`]'s pending change: the rate controller moved the target (else a person asked).
const BY_CONTROLLER: u64 = 1 << 63;

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
    /// The last change not yet taken (0: none), with [`BY_CONTROLLER`] set for the
    /// controller's: one word, so that the producer takes a rate and its cause together.
    change: AtomicU64,
    /// The source rate after a report the controller computed its rate from, for the producer
    /// to tell the source (0: none since it last looked). The reports of one RTCP turn of the
    /// server count once, and so do those between two of the producer's turns (2 ms at most).
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

    fn set(&self, wire: Bitrate, cause: u64) -> u64 {
        let Some(ts) = self.limits.source_rate(wire) else {
            return self.target.load(Ordering::Relaxed);
        };
        let ts = ts.min(!BY_CONTROLLER);
        if self.target.swap(ts, Ordering::AcqRel) != ts {
            self.change.store(ts | cause, Ordering::Release);
        }
        ts
    }

    /// Follows the session after its RTCP turn: as [`RateKnob::follow`], and when the
    /// controller computed its rate from reports since the last turn (`reports`, the session's
    /// running count), hands the producer the target after them, in the source's units.
    pub fn follow_reports(&self, wire: Bitrate, reports: u64) -> u64 {
        let ts = self.follow(wire);
        let new_reports = self.reports_seen.swap(reports, Ordering::AcqRel) != reports;
        if new_reports && self.limits.allowed().is_some() && ts > 0 {
            self.reported.store(ts, Ordering::Release);
        }
        ts
    }

    /// The change the producer is yet to ask of the source, if any.
    pub fn take_change(&self) -> Option<RateChange> {
        match self.change.swap(0, Ordering::AcqRel) {
            0 => None,
            c if c & BY_CONTROLLER != 0 => Some(RateChange::Followed(c & !BY_CONTROLLER)),
            c => Some(RateChange::Asked(c)),
        }
    }

    /// The source rate after the reports since the producer last looked, if any came.
    pub fn take_report(&self) -> Option<u64> {
        match self.reported.swap(0, Ordering::AcqRel) {
            0 => None,
            r => Some(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knob_hands_on_changes_with_their_cause_and_every_report() {
        // Two destinations: the source's rate is half the wire's.
        let limits = RateLimits {
            ts_per_wire: 0.5,
            range: Some(10_000..=4_000_000),
            ceiling: 4_000_000,
        };
        let knob = RateKnob::new(1_000_000, limits);
        let take = |k: &RateKnob| (k.take_change(), k.take_report());
        // A report that changed the rate: the change, then the report.
        knob.follow_reports(Bitrate::mbps(4), 1);
        assert_eq!(
            take(&knob),
            (Some(RateChange::Followed(2_000_000)), Some(2_000_000))
        );
        // Reports that kept it: one report for the producer, however many came between turns,
        // in the source's units as the change.
        knob.follow_reports(Bitrate::mbps(4), 3);
        assert_eq!(take(&knob), (None, Some(2_000_000)));
        // A turn without reports whose controller moved on its own clock: a change, no report.
        knob.follow_reports(Bitrate::mbps(2), 3);
        assert_eq!(take(&knob), (Some(RateChange::Followed(1_000_000)), None));
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
        fixed.follow_reports(Bitrate::mbps(2), 1);
        assert_eq!(take(&fixed), (None, None));
    }
}
