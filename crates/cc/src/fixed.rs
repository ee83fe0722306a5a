//! The controller that does not control: the rate it was given, until it is given another.

use crate::{Feedback, RateController};
use metronome_time::{Bitrate, Timestamp};

/// A constant target rate: what every stream had before congestion control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedRate {
    rate: Bitrate,
}

impl FixedRate {
    /// A controller whose target is `rate` until [`RateController::set_rate`] gives another.
    pub fn new(rate: Bitrate) -> Self {
        FixedRate { rate }
    }
}

impl RateController for FixedRate {
    fn name(&self) -> &'static str {
        "fixed"
    }
    fn target_rate(&self) -> Bitrate {
        self.rate
    }
    fn on_feedback(&mut self, _now: Timestamp, _feedback: &Feedback) {}
    fn reads(&self, _feedback: &Feedback) -> bool {
        false
    }
    fn set_rate(&mut self, rate: Bitrate) {
        self.rate = rate;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn keeps_its_rate_whatever_the_feedback_until_told_otherwise() {
        let mut c = FixedRate::new(Bitrate::mbps(5));
        let fb = Feedback {
            receiver: 1,
            from: "127.0.0.1:5005".parse().unwrap(),
            fraction_lost: 0.5,
            cumulative_lost: 1000,
            extended_highest_seq: 9,
            jitter: Duration::from_millis(30),
            rtt: Some(Duration::from_millis(200)),
            tfrc: None,
            tfmcc: None,
        };
        c.on_feedback(Timestamp::from_secs(1), &fb);
        assert_eq!(c.target_rate(), Bitrate::mbps(5));
        assert_eq!(c.poll_timeout(), None);
        c.set_rate(Bitrate::mbps(2));
        assert_eq!(c.target_rate(), Bitrate::mbps(2));
        assert_eq!(c.name(), "fixed");
    }
}
