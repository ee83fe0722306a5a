//! GCC's receiving end: it notes when each packet arrived and, every `interval`, reports
//! every sequence number since its last report, arrived or not (what RFC 8888's feedback
//! carries; the receiver session writes it).

use metronome_time::Timestamp;
use std::collections::VecDeque;
use std::time::Duration;

/// Packets one report covers at most (RFC 8888's range per stream).
pub const MAX_RANGE: u64 = 16_384;

/// One report: the packets from `begin_seq` on, each with its arrival (`None`: not arrived
/// by the time of the report), and when it was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrivalReport {
    /// Extended RTP sequence number of the first packet reported.
    pub begin_seq: u64,
    /// Arrival time (receiver's clock) of `begin_seq + i` at index `i`; `None` if it had not
    /// arrived by the report. At most [`MAX_RANGE`] entries.
    pub arrivals: Vec<Option<Timestamp>>,
    /// When the report was made (receiver's clock).
    pub at: Timestamp,
}

/// GCC's receiving end (see the module docs): records the arrival of each packet by extended
/// sequence number and hands out an [`ArrivalReport`] every `interval`.
#[derive(Clone, Debug)]
pub struct ArrivalRecorder {
    interval: Duration,
    /// The arrivals of the sequence numbers from `next_seq` on, not yet reported (at most
    /// `MAX_RANGE`; the last one always arrived). Its room is kept between reports: a
    /// packet's arrival allocates nothing once the range has been seen.
    pending: VecDeque<Option<Timestamp>>,
    /// The first sequence number the next report starts from.
    next_seq: Option<u64>,
    next_report: Option<Timestamp>,
}

impl ArrivalRecorder {
    /// A report every `interval` (RFC 8888 leaves it to the controller; WebRTC's feedback
    /// comes about every 50 to 100 ms).
    pub fn new(interval: Duration) -> Self {
        ArrivalRecorder {
            interval,
            pending: VecDeque::new(),
            next_seq: None,
            next_report: None,
        }
    }

    /// Packet `seq` (extended) arrived at `now`.
    pub fn on_packet(&mut self, now: Timestamp, seq: u64) {
        let next = *self.next_seq.get_or_insert(seq);
        if seq < next {
            // Reported as missing already: too late to count.
            return;
        }
        let mut first = next;
        if seq - next >= MAX_RANGE {
            // A jump (or a long silence): what lies before the newest range is given up.
            first = seq + 1 - MAX_RANGE;
            let gone = ((first - next) as usize).min(self.pending.len());
            self.pending.drain(..gone);
            self.next_seq = Some(first);
        }
        let i = (seq - first) as usize;
        if i >= self.pending.len() {
            self.pending.resize(i + 1, None);
        }
        self.pending[i].get_or_insert(now);
        self.next_report.get_or_insert(now + self.interval);
    }

    /// When the next report is due: `interval` after the first packet since the last report,
    /// at once when a report was cut short; `None` when nothing waits to be reported.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.next_report
    }

    /// The report due at `now`, if one is, of at most `max` packets (what the packet that
    /// carries it has room for): the rest is due at once, in the next.
    pub fn poll_report(&mut self, now: Timestamp, max: usize) -> Option<ArrivalReport> {
        if self.next_report.is_none_or(|t| now < t) || max == 0 {
            return None;
        }
        self.next_report = None;
        let begin = self.next_seq?;
        if self.pending.is_empty() {
            return None;
        }
        let n = self.pending.len().min(max);
        let arrivals = self.pending.drain(..n).collect();
        self.next_seq = Some(begin + n as u64);
        if !self.pending.is_empty() {
            self.next_report = Some(now);
        }
        Some(ArrivalReport {
            begin_seq: begin,
            arrivals,
            at: now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_covers_every_number_since_the_last_and_marks_gaps() {
        let mut r = ArrivalRecorder::new(Duration::from_millis(50));
        let t = |ms| Timestamp::from_millis(ms);
        r.on_packet(t(10), 100);
        r.on_packet(t(12), 101);
        r.on_packet(t(15), 103);
        assert_eq!(r.poll_timeout(), Some(t(60)));
        assert_eq!(r.poll_report(t(59), 100), None);
        let rep = r.poll_report(t(60), 100).unwrap();
        assert_eq!(rep.begin_seq, 100);
        assert_eq!(
            rep.arrivals,
            vec![Some(t(10)), Some(t(12)), None, Some(t(15))]
        );
        // 102 arriving late is not reported again; the next report starts at 104.
        r.on_packet(t(70), 102);
        r.on_packet(t(71), 104);
        let rep = r.poll_report(t(121), 100).unwrap();
        assert_eq!((rep.begin_seq, rep.arrivals.len()), (104, 1));
        // Nothing arrived: no report, no timer.
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn a_jump_keeps_the_report_within_the_rfc_range() {
        let mut r = ArrivalRecorder::new(Duration::from_millis(50));
        r.on_packet(Timestamp::from_millis(1), 5);
        r.on_packet(Timestamp::from_millis(2), 1_000_000);
        let rep = r.poll_report(Timestamp::from_secs(1), 100_000).unwrap();
        assert_eq!(rep.arrivals.len() as u64, MAX_RANGE);
        assert_eq!(rep.begin_seq, 1_000_000 + 1 - MAX_RANGE);
    }

    #[test]
    fn a_report_too_big_for_its_packet_goes_in_parts_and_nothing_is_lost() {
        let mut r = ArrivalRecorder::new(Duration::from_millis(50));
        for s in 0..1000u64 {
            r.on_packet(Timestamp::from_micros(s * 10), s);
        }
        let now = Timestamp::from_millis(60);
        let a = r.poll_report(now, 600).unwrap();
        assert_eq!((a.begin_seq, a.arrivals.len()), (0, 600));
        // The rest is due at once.
        assert_eq!(r.poll_timeout(), Some(now));
        let b = r.poll_report(now, 600).unwrap();
        assert_eq!((b.begin_seq, b.arrivals.len()), (600, 400));
        assert!(b.arrivals.iter().all(Option::is_some));
        assert_eq!(r.poll_timeout(), None);
    }
}
