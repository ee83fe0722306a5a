//! Other members of the session, for the RTCP interval (RFC 3550 §6.3.2-§6.3.5): in a multicast
//! group every receiver hears every other receiver's reports, and the interval grows with their
//! number so that RTCP stays within its bandwidth share. Bounded, and members time out.

use metronome_time::Timestamp;
use metronome_wire::Ssrc;
use std::collections::HashMap;
use std::time::Duration;

/// Most members remembered; further ones are not counted (the interval is then already long).
pub(crate) const MAX_MEMBERS: usize = 65_536;

/// The other members heard lately (an SDES CNAME or a report in their RTCP), by SSRC, with
/// when each was last heard.
#[derive(Debug, Default)]
pub(crate) struct Members {
    last_heard: HashMap<Ssrc, Timestamp>,
}

impl Members {
    /// Notes that `ssrc` was heard at `now`; a new member beyond [`MAX_MEMBERS`] is ignored.
    pub(crate) fn heard(&mut self, ssrc: Ssrc, now: Timestamp) {
        if self.last_heard.len() < MAX_MEMBERS || self.last_heard.contains_key(&ssrc) {
            self.last_heard.insert(ssrc, now);
        }
    }
    /// Forgets `ssrc` at once (its RTCP BYE, RFC 3550 §6.3.4).
    pub(crate) fn left(&mut self, ssrc: Ssrc) {
        self.last_heard.remove(&ssrc);
    }
    /// Forgets members not heard for `timeout` (RFC 3550 §6.3.5: five report intervals).
    pub(crate) fn expire(&mut self, now: Timestamp, timeout: Duration) {
        self.last_heard
            .retain(|_, t| now.saturating_since(*t) < timeout);
    }
    /// How many members are remembered now.
    pub(crate) fn len(&self) -> usize {
        self.last_heard.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_counted_once_and_time_out() {
        let mut m = Members::default();
        m.heard(Ssrc(1), Timestamp::from_secs(1));
        m.heard(Ssrc(1), Timestamp::from_secs(2));
        m.heard(Ssrc(2), Timestamp::from_secs(3));
        assert_eq!(m.len(), 2);
        m.expire(Timestamp::from_secs(7), Duration::from_secs(5));
        assert_eq!(
            m.len(),
            1,
            "member 1 was last heard 5 s ago, member 2 4 s ago"
        );
        m.left(Ssrc(2));
        assert_eq!(m.len(), 0);
    }
}
