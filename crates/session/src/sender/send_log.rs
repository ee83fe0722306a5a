//! The packets a sender sent lately (sequence number, time, size), for a controller that reads
//! per-packet feedback (GCC): RFC 8888's reports name sequence numbers and arrival times on
//! the receiver's clock; this turns them into [`PacketResult`]s with our send times. TFRC's
//! and TFMCC's reports echo a sequence number too: [`SendLog::sent_at`] says when it left.

use metronome_cc::PacketResult;
use metronome_time::Timestamp;
use metronome_wire::rtcp::CcfbReport;
use metronome_wire::SeqNo;
use std::collections::VecDeque;
use std::time::Duration;

/// Packets remembered: a few seconds of a 10 Mbit/s stream of 1200-byte packets. Older ones
/// a report names are not matched (counted by the caller).
pub(crate) const SEND_LOG: usize = 8192;

/// One packet sent.
#[derive(Clone, Copy, Debug)]
struct Sent {
    seq: u64,
    at: Timestamp,
    size: u32,
    /// A report has named it: a later one (RFC 8888 lets a receiver repeat itself) does not
    /// count it again.
    reported: bool,
}

/// A bounded ring of the last [`SEND_LOG`] packets sent, with their extended (64-bit)
/// sequence numbers, send times and sizes.
pub(crate) struct SendLog {
    /// Oldest first.
    sent: VecDeque<Sent>,
    /// The receiver's report timestamps extended past their 16.16-second wrap.
    last_report_ts: Option<u64>,
}

impl Default for SendLog {
    fn default() -> Self {
        Self::new()
    }
}

impl SendLog {
    /// An empty log, allocated full size.
    pub(crate) fn new() -> Self {
        SendLog {
            sent: VecDeque::with_capacity(SEND_LOG),
            last_report_ts: None,
        }
    }

    /// `packets` packets from RTP sequence number `first_seq` left at `now`, `wire_len` bytes
    /// in all. Never allocates (the log is made full size).
    pub(crate) fn record(&mut self, now: Timestamp, first_seq: SeqNo, packets: u32, wire_len: u32) {
        let size = wire_len / packets.max(1);
        for k in 0..packets {
            let seq16 = first_seq.add(k as u16);
            let ext = match self.sent.back() {
                Some(last) => last.seq + u64::from(seq16.since(SeqNo::of_extended(last.seq))),
                None => u64::from(seq16.get()) + (1 << 16),
            };
            if self.sent.len() == SEND_LOG {
                self.sent.pop_front();
            }
            self.sent.push_back(Sent {
                seq: ext,
                at: now,
                size,
                reported: false,
            });
        }
    }

    /// A report timestamp (NTP's middle 32 bits, the receiver's clock) as a point in time,
    /// extended across wraps from the newest seen (a reordered report lands before it);
    /// `None` only for one that would come before the extended clock's start.
    fn report_time(&mut self, ts: u32) -> Option<Timestamp> {
        let ext = match self.last_report_ts {
            None => u64::from(ts) + (1 << 32),
            Some(last) => {
                let delta = ts.wrapping_sub(last as u32) as i32;
                last.checked_add_signed(i64::from(delta))?
            }
        };
        if self.last_report_ts.is_none_or(|l| ext > l) {
            self.last_report_ts = Some(ext);
        }
        Some(Timestamp::from_nanos(
            ((u128::from(ext) * 1_000_000_000) >> 16) as u64,
        ))
    }

    /// The packets of one RFC 8888 block, matched with their send times, into `out`. Returns
    /// how many could not be matched: sent too long ago or never, or reported before.
    pub(crate) fn results(
        &mut self,
        report_timestamp: u32,
        reports: &[(SeqNo, CcfbReport)],
        out: &mut Vec<PacketResult>,
    ) -> usize {
        let Some(at) = self.report_time(report_timestamp) else {
            return reports.len();
        };
        let mut unmatched = 0;
        for &(seq16, report) in reports {
            let Some(p) = self.find(seq16).filter(|p| !p.reported) else {
                unmatched += 1;
                continue;
            };
            p.reported = true;
            let arrived = report.offset().map(|a| {
                at.checked_sub(Duration::from_nanos(u64::from(a) * 1_000_000_000 / 1024))
                    .unwrap_or(Timestamp::ZERO)
            });
            out.push(PacketResult {
                seq: p.seq,
                sent: p.at,
                size: p.size,
                received: report.received,
                arrived,
            });
        }
        unmatched
    }

    /// When the newest packet of this sequence number left, if it is in the log: the echo of
    /// a TFRC or TFMCC report.
    pub(crate) fn sent_at(&self, seq16: SeqNo) -> Option<Timestamp> {
        self.index(seq16).map(|i| self.sent[i].at)
    }

    /// The newest packet sent with this sequence number (the log spans less than 2^16).
    fn find(&mut self, seq16: SeqNo) -> Option<&mut Sent> {
        self.index(seq16).map(|i| &mut self.sent[i])
    }

    fn index(&self, seq16: SeqNo) -> Option<usize> {
        let newest = self.sent.back()?.seq;
        let back = u64::from(SeqNo::of_extended(newest).since(seq16));
        let ext = newest.checked_sub(back)?;
        let i = ext.checked_sub(self.sent.front()?.seq)? as usize;
        self.sent.get(i).filter(|e| e.seq == ext).map(|_| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ato: u16) -> CcfbReport {
        CcfbReport {
            received: true,
            ecn: 0,
            ato,
        }
    }

    const LOST: CcfbReport = CcfbReport {
        received: false,
        ecn: 0,
        ato: 0,
    };

    #[test]
    fn reports_are_matched_across_the_sequence_wrap_and_the_timestamp_wrap() {
        let mut log = SendLog::new();
        for k in 0..10u16 {
            log.record(
                Timestamp::from_millis(u64::from(k)),
                SeqNo(65_530u16.wrapping_add(k)),
                1,
                1200,
            );
        }
        let mut out = Vec::new();
        // Report time 65535 s (16.16); packet 65_535 arrived 0.5 s before it, 0 was not
        // received, 1 arrived at it; 20 was never sent.
        let unmatched = log.results(
            0xFFFF_0000,
            &[
                (SeqNo(65_535), at(512)),
                (SeqNo(0), LOST),
                (SeqNo(1), at(0)),
                (SeqNo(20), at(0)),
            ],
            &mut out,
        );
        assert_eq!(unmatched, 1, "seq 20 was never sent");
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].sent, Timestamp::from_millis(5));
        assert!(!out[1].received && out[1].arrived.is_none());
        assert_eq!(out[1].sent, Timestamp::from_millis(6));
        let t0 = out[2].arrived.unwrap();
        assert_eq!(
            t0.saturating_since(out[0].arrived.unwrap()),
            Duration::from_millis(500)
        );
        // The next report's timestamp wrapped: it is later, not 65536 s earlier. A packet
        // reported again is not counted twice; one received at an unknown time counts as
        // received, without a time.
        out.clear();
        let unmatched = log.results(
            0x0000_8000,
            &[
                (SeqNo(1), at(0)),
                (SeqNo(2), at(0)),
                (SeqNo(3), at(metronome_wire::rtcp::ccfb::ATO_UNKNOWN)),
            ],
            &mut out,
        );
        assert_eq!(unmatched, 1, "seq 1 was reported before");
        let t1 = out[0].arrived.unwrap();
        assert_eq!(t1.saturating_since(t0), Duration::from_millis(1500));
        assert!(out[1].received && out[1].arrived.is_none());
    }

    #[test]
    fn the_log_is_bounded_and_old_packets_are_not_matched() {
        let mut log = SendLog::new();
        for k in 0..(SEND_LOG as u32 + 100) {
            log.record(
                Timestamp::from_micros(u64::from(k)),
                SeqNo(k as u16),
                1,
                100,
            );
        }
        assert_eq!(log.sent.len(), SEND_LOG);
        let mut out = Vec::new();
        assert_eq!(log.results(1, &[(SeqNo(5), at(0))], &mut out), 1);
        assert_eq!(
            log.results(1, &[(SeqNo((SEND_LOG + 50) as u16), at(0))], &mut out),
            0
        );
    }
}
