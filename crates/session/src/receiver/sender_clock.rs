//! Where a rate controller's receiving end places packets on the sender's clock. TFRC's and
//! TFMCC's receivers need each data packet's send time (RFC 5348 §3.2.1, RFC 4654 §2.2.1 and
//! §4.3.3: the one-way delay change between echoes; and which losses fall in one loss event)
//! and when the sender's announcements left, on one clock.

use metronome_time::{
    AbsSendTimeUnwrapper, MediaClock, NtpTime, RtpTime, RtpTsUnwrapper, Timestamp,
};
use metronome_wire::rtp::abs_send_time;
use std::time::Duration;

/// What a data packet says of when it left: abs-send-time's 24 bits if it carries a send
/// time (either form), and its RTP timestamp.
#[derive(Clone, Copy, Debug)]
pub(super) struct PacketTimes {
    pub stamp: Option<u32>,
    pub rtp_ts: RtpTime,
}

/// The sender's clock as a stream's packets show it, chosen by its first packet.
pub(super) enum SenderClock {
    /// Packets carry their send time (abs-send-time, or its bits of the NTP form); the sender
    /// reports' NTP time is on the same clock.
    SendTime {
        unwrap: AbsSendTimeUnwrapper,
        last: u32,
    },
    /// Packets carry no send time: their RTP timestamp stands in (a video frame's presentation
    /// time, the same for all its packets however they are paced), and a sender report's RTP
    /// timestamp says when it left.
    RtpTs {
        unwrap: RtpTsUnwrapper,
        clock: MediaClock,
        last: RtpTime,
    },
}

impl SenderClock {
    /// The clock of a stream whose first packet shows `first`; RTP timestamps in `clock`'s
    /// units.
    pub(super) fn new(first: PacketTimes, clock: MediaClock) -> Self {
        match first.stamp {
            Some(last) => SenderClock::SendTime {
                unwrap: AbsSendTimeUnwrapper::new(),
                last,
            },
            None => SenderClock::RtpTs {
                unwrap: RtpTsUnwrapper::new(),
                clock,
                last: first.rtp_ts,
            },
        }
    }

    /// When a data packet showing `p` left (a stamped stream's packet that lacks a stamp is
    /// taken as sent with the one before).
    pub(super) fn data(&mut self, p: PacketTimes) -> Timestamp {
        match self {
            SenderClock::SendTime { unwrap, last } => {
                *last = p.stamp.unwrap_or(*last);
                from_abs24(unwrap.unwrap(*last))
            }
            SenderClock::RtpTs {
                unwrap,
                clock,
                last,
            } => {
                *last = p.rtp_ts;
                Timestamp::ZERO + clock.duration(unwrap.unwrap_rtp(p.rtp_ts))
            }
        }
    }

    /// When the sender's RTCP left: from its sender report's NTP time and RTP timestamp, or
    /// without one in the compound, with the last data packet.
    pub(super) fn report(&mut self, sr: Option<(NtpTime, RtpTime)>) -> Timestamp {
        match self {
            SenderClock::SendTime { unwrap, last } => {
                let v = sr.map_or(*last, |(ntp, _)| abs_send_time(ntp));
                from_abs24(unwrap.unwrap(v))
            }
            SenderClock::RtpTs {
                unwrap,
                clock,
                last,
            } => {
                let ts = sr.map_or(*last, |(_, ts)| ts);
                Timestamp::ZERO + clock.duration(unwrap.unwrap_rtp(ts))
            }
        }
    }
}

/// abs-send-time units (2^-18 s) extended, as a time.
fn from_abs24(units: u64) -> Timestamp {
    let ns = (u128::from(units) * 1_000_000_000) >> 18;
    Timestamp::ZERO + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(stamp: Option<u32>, rtp_ts: RtpTime) -> PacketTimes {
        PacketTimes { stamp, rtp_ts }
    }

    #[test]
    fn send_times_and_reports_share_one_clock_across_the_wrap() {
        // The sender's wall clock 1 ms before a 64 s wrap of abs-send-time.
        let wall = |ms: u64| NtpTime::from_unix_nanos((64 * 1000 * 1000 - 1 + ms) * 1_000_000);
        let stamp = |ms| Some(abs_send_time(wall(ms)));
        let mut c = SenderClock::new(at(stamp(0), RtpTime(0)), MediaClock::VIDEO_90K);
        let t0 = c.data(at(stamp(0), RtpTime(0)));
        let t1 = c.data(at(stamp(3), RtpTime(0)));
        assert!((t1.saturating_since(t0).as_micros() as i64 - 3000).abs() <= 4);
        // A report sent at 10 ms, its RTP timestamp irrelevant.
        let r = c.report(Some((wall(10), RtpTime(12345))));
        assert!((r.saturating_since(t0).as_micros() as i64 - 10_000).abs() <= 4);
        // A packet without the stamp counts as sent with the one before.
        assert_eq!(
            c.data(at(None, RtpTime(999))),
            c.data(at(stamp(3), RtpTime(0)))
        );
    }

    #[test]
    fn without_send_times_the_rtp_timestamp_stands_in() {
        let mut c = SenderClock::new(at(None, RtpTime(90_000)), MediaClock::VIDEO_90K);
        let t0 = c.data(at(None, RtpTime(90_000)));
        let t1 = c.data(at(Some(5), RtpTime(93_600)));
        assert_eq!(t1.saturating_since(t0), Duration::from_millis(40));
        let r = c.report(Some((NtpTime(0), RtpTime(99_000))));
        assert_eq!(r.saturating_since(t0), Duration::from_millis(100));
        // Without a sender report: sent with the last data packet.
        assert_eq!(c.report(None), t1);
    }
}
