//! What a receiver knows about one source (one SSRC): sequence validation (RFC 3550 A.1),
//! loss (A.3), interarrival jitter (A.8), and distributions of inter-arrival time and one-way delay.

use metronome_time::{Distribution, NtpTime, RtpTime, Timestamp};
use metronome_wire::rtcp::Block;
use metronome_wire::{SeqNo, Ssrc};

const RTP_SEQ_MOD: u32 = 1 << 16;
/// RFC 3550 A.1: a forward jump of up to this many is taken as loss.
pub const MAX_DROPOUT: u16 = 3000;
/// RFC 3550 A.1: a backward step of up to this many is taken as reordering or duplication.
pub const MAX_MISORDER: u16 = 100;
/// Sequence numbers remembered for duplicate detection.
const DUP_WINDOW: u64 = 2048;

/// How one packet relates to the sequence so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqVerdict {
    /// The next packet, or one after a gap (the gap is loss until it is filled).
    InOrder,
    /// Older than the highest seen, first time seen: reordered.
    Reordered,
    /// Seen before.
    Duplicate,
    /// Older than anything the duplicate window remembers, or from before the first packet:
    /// counted as late, not as received.
    TooLate,
    /// A very large jump (RFC 3550 A.1 "bad_seq"): not counted until the next packet confirms it.
    JumpSuspect,
    /// The packet after a jump confirmed it: the sequence restarts here.
    Resync,
}

impl SeqVerdict {
    /// As a trace's `verdict` column spells it (kebab-case, as the command line spells
    /// values): `in-order`, `reordered`, `duplicate`, `too-late`, `jump-suspect`, `resync`.
    pub fn name(self) -> &'static str {
        match self {
            SeqVerdict::InOrder => "in-order",
            SeqVerdict::Reordered => "reordered",
            SeqVerdict::Duplicate => "duplicate",
            SeqVerdict::TooLate => "too-late",
            SeqVerdict::JumpSuspect => "jump-suspect",
            SeqVerdict::Resync => "resync",
        }
    }
}

/// One source's receive state.
#[derive(Clone, Debug)]
pub struct Source {
    /// The source's RTP SSRC.
    pub ssrc: Ssrc,
    // RFC 3550 A.1 state, with `received` counting unique packets only.
    max_seq: SeqNo,
    cycles: u64,
    base_seq: u32,
    bad_seq: u32,
    received: u64,
    expected_prior: u64,
    received_prior: u64,
    // Totals from before a sequence resync, so that loss stays cumulative across restarts.
    expected_before: u64,
    received_before: u64,
    seen: [u64; (DUP_WINDOW / 64) as usize],
    // RFC 3550 A.8.
    transit: Option<i32>,
    jitter: f64,
    // Counters.
    /// RTP packets taken from this source, duplicates and late ones included (not those dropped
    /// as a jump suspect).
    pub packets: u64,
    /// RTP payload bytes of the packets counted as received (duplicates and late ones excluded).
    pub payload_bytes: u64,
    /// Packets whose sequence number was already received ([`SeqVerdict::Duplicate`]).
    pub duplicates: u64,
    /// Packets older than the highest received but new ([`SeqVerdict::Reordered`]).
    pub reordered: u64,
    /// Packets too old to tell from duplicates ([`SeqVerdict::TooLate`]), not counted as received.
    pub too_late: u64,
    /// Large sequence jumps confirmed by the next packet, each a resync (RFC 3550 A.1).
    pub seq_jumps: u64,
    /// RTP transit changes larger than the configured threshold: timestamp jumps, kept out of
    /// the jitter.
    pub ts_jumps: u64,
    /// Packets whose one-way delay came out negative (clocks out of sync), kept out of
    /// [`Self::one_way_delay`].
    pub negative_delay: u64,
    /// When the source's first packet arrived.
    pub first_arrival: Timestamp,
    /// The latest arrival time of a packet counted as received.
    pub last_arrival: Timestamp,
    /// Gaps between arrivals of consecutive received packets, in nanoseconds.
    pub interarrival: Distribution,
    /// One-way delay (receiver's wall clock minus the packet's NTP send time), in nanoseconds;
    /// only packets carrying the 64-bit send time, and only non-negative delays.
    pub one_way_delay: Distribution,
    // From the source's sender reports.
    /// The last sender report: its NTP timestamp's middle 32 bits (RFC 3550 §6.4.1 LSR) and when
    /// it arrived, for the report block's LSR and DLSR.
    pub last_sr: Option<(u32, Timestamp)>,
    /// Sender reports received from this source.
    pub sender_reports: u64,
    /// The source's CNAME from its SDES (RFC 3550 §6.5.1), at most 255 bytes, lossily decoded as
    /// UTF-8.
    pub cname: Option<String>,
    /// Whether the source sent an RTCP BYE (RFC 3550 §6.6).
    pub said_bye: bool,
}

/// Longest CNAME kept (RFC 3550 §6.5: an SDES item is at most 255 octets).
const MAX_CNAME: usize = 255;

impl Source {
    /// A source first heard at `now`; its histograms keep `digits` significant digits.
    pub fn new(ssrc: Ssrc, seq: SeqNo, now: Timestamp, digits: u8) -> Self {
        let mut s = Source {
            ssrc,
            max_seq: seq,
            cycles: 0,
            base_seq: u32::from(seq.get()),
            bad_seq: RTP_SEQ_MOD + 1,
            received: 0,
            expected_prior: 0,
            received_prior: 0,
            expected_before: 0,
            received_before: 0,
            seen: [0; (DUP_WINDOW / 64) as usize],
            transit: None,
            jitter: 0.0,
            packets: 0,
            payload_bytes: 0,
            duplicates: 0,
            reordered: 0,
            too_late: 0,
            seq_jumps: 0,
            ts_jumps: 0,
            negative_delay: 0,
            first_arrival: now,
            last_arrival: now,
            interarrival: Distribution::with_digits(digits),
            one_way_delay: Distribution::with_digits(digits),
            last_sr: None,
            sender_reports: 0,
            cname: None,
            said_bye: false,
        };
        s.init_seq(seq);
        s
    }

    /// RFC 3550 A.1 `init_seq()`, keeping totals from before.
    fn init_seq(&mut self, seq: SeqNo) {
        self.expected_before += self.expected_current();
        self.received_before += self.received;
        self.base_seq = u32::from(seq.get());
        self.max_seq = seq;
        self.bad_seq = RTP_SEQ_MOD + 1;
        self.cycles = 0;
        self.received = 0;
        self.received_prior = 0;
        self.expected_prior = 0;
        self.seen = [0; (DUP_WINDOW / 64) as usize];
    }

    /// The extended highest sequence number received (RFC 3550 A.3 `extended_max`).
    pub fn extended_max(&self) -> u64 {
        self.cycles + u64::from(self.max_seq.get())
    }

    fn expected_current(&self) -> u64 {
        if self.received == 0 && self.cycles == 0 && u32::from(self.max_seq.get()) == self.base_seq
        {
            return 0;
        }
        (self.extended_max() + 1).saturating_sub(self.base_seq as u64)
    }

    /// Packets expected since the first (across resyncs).
    pub fn expected(&self) -> u64 {
        self.expected_before + self.expected_current()
    }
    /// Unique packets received (across resyncs).
    pub fn received(&self) -> u64 {
        self.received_before + self.received
    }
    /// Cumulative loss: expected minus unique received (never negative, since duplicates are
    /// not counted as received).
    pub fn lost(&self) -> u64 {
        self.expected().saturating_sub(self.received())
    }
    /// RFC 3550 interarrival jitter in RTP timestamp units.
    pub fn jitter_ticks(&self) -> f64 {
        self.jitter
    }

    fn bit(ext: u64) -> (usize, u64) {
        let i = ext % DUP_WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }
    fn is_seen(&self, ext: u64) -> bool {
        let (w, b) = Self::bit(ext);
        self.seen[w] & b != 0
    }
    fn mark_seen(&mut self, ext: u64) {
        let (w, b) = Self::bit(ext);
        self.seen[w] |= b;
    }
    fn unmark(&mut self, ext: u64) {
        let (w, b) = Self::bit(ext);
        self.seen[w] &= !b;
    }

    /// RFC 3550 A.1 `update_seq()`, extended with duplicate and reorder detection. Returns the
    /// verdict and the packet's extended sequence number.
    pub fn update_seq(&mut self, seq: SeqNo) -> (SeqVerdict, u64) {
        let udelta = seq.since(self.max_seq);
        if udelta == 0 && self.received == 0 {
            // The very first packet of a (re)started sequence.
            let ext = self.extended_max();
            self.mark_seen(ext);
            self.received += 1;
            return (SeqVerdict::InOrder, ext);
        }
        if udelta != 0 && udelta < MAX_DROPOUT {
            // In order, with a permissible gap.
            let old_max = self.extended_max();
            if seq.get() < self.max_seq.get() {
                self.cycles += RTP_SEQ_MOD as u64;
            }
            self.max_seq = seq;
            let new_max = self.extended_max();
            // Forget the window slots the sequence moved past.
            let clear_from = old_max + 1;
            for e in clear_from.max(new_max.saturating_sub(DUP_WINDOW - 1))..=new_max {
                self.unmark(e);
            }
            self.mark_seen(new_max);
            self.received += 1;
            return (SeqVerdict::InOrder, new_max);
        }
        if udelta as u32 <= RTP_SEQ_MOD - MAX_MISORDER as u32 && udelta != 0 {
            // A very large jump.
            if u32::from(seq.get()) == self.bad_seq {
                self.seq_jumps += 1;
                self.init_seq(seq);
                let ext = self.extended_max();
                self.mark_seen(ext);
                self.received += 1;
                return (SeqVerdict::Resync, ext);
            }
            self.bad_seq = (u32::from(seq.get()) + 1) & (RTP_SEQ_MOD - 1);
            return (SeqVerdict::JumpSuspect, self.extended_max());
        }
        // Duplicate or reordered (udelta == 0 or a small step back).
        let back = u64::from(self.max_seq.since(seq));
        let ext = self.extended_max().saturating_sub(back);
        if back >= DUP_WINDOW || ext < self.base_seq as u64 {
            // Older than anything we can tell apart: count it as late, not as received.
            self.too_late += 1;
            return (SeqVerdict::TooLate, ext);
        }
        if self.is_seen(ext) {
            self.duplicates += 1;
            return (SeqVerdict::Duplicate, ext);
        }
        self.mark_seen(ext);
        self.received += 1;
        self.reordered += 1;
        (SeqVerdict::Reordered, ext)
    }

    /// Whether packet `seq` is ahead of the highest received (a repair of it waits until a
    /// later packet has come: see [`Source::repair_of`]).
    pub fn is_ahead(&self, seq: SeqNo) -> bool {
        self.received > 0 && seq.is_after(self.max_seq)
    }

    /// A repair of packet `seq` (RFC 4588: its statistics stay the original stream's, so
    /// nothing is counted or marked; a late original still counts as received): its extended
    /// number, if this source has not had the packet; `None` for one it has, or one older than
    /// the duplicate window or ahead of the highest received.
    pub fn repair_of(&self, seq: SeqNo) -> Option<u64> {
        if self.received == 0 {
            return None;
        }
        let back = u64::from(self.max_seq.since(seq));
        let ext = self.extended_max().checked_sub(back)?;
        if back == 0 || back >= DUP_WINDOW || ext < self.base_seq as u64 || self.is_seen(ext) {
            return None;
        }
        Some(ext)
    }

    /// RFC 3550 A.8: updates the jitter estimate with a packet of RTP timestamp `rtp_ts` that
    /// arrived at `arrival_ticks` (the arrival time in the same clock's units, wrapping).
    /// A transit change of more than `jump_ticks` is a timestamp jump (a source restart or a
    /// splice), counted and not taken as jitter.
    pub fn update_jitter(&mut self, arrival_ticks: u32, rtp_ts: RtpTime, jump_ticks: u32) -> i32 {
        // The arrival clock's ticks are of the media clock too (A.8): compared as timestamps.
        let transit = RtpTime(arrival_ticks).delta(rtp_ts);
        if let Some(prev) = self.transit {
            let d = transit.wrapping_sub(prev).unsigned_abs();
            if d > jump_ticks {
                self.ts_jumps += 1;
            } else {
                self.jitter += (d as f64 - self.jitter) / 16.0;
            }
        }
        self.transit = Some(transit);
        transit
    }

    /// Records the arrival time (for inter-arrival) and, where known, the one-way delay.
    pub fn record_arrival(
        &mut self,
        now: Timestamp,
        wall: Option<NtpTime>,
        sent: Option<NtpTime>,
    ) -> (Option<u64>, Option<i64>) {
        // Called after `update_seq` counted this packet: the first one has no gap.
        let first = self.received() <= 1;
        let gap = (!first).then(|| now.saturating_since(self.last_arrival).as_nanos());
        let gap = gap.map(|g| u64::try_from(g).unwrap_or(u64::MAX));
        if let Some(g) = gap {
            self.interarrival.record(g);
        }
        if now > self.last_arrival || first {
            self.last_arrival = now;
        }
        let owd = match (wall, sent) {
            (Some(w), Some(s)) => {
                let d = w.signed_nanos_since(s);
                if d < 0 {
                    self.negative_delay += 1;
                } else {
                    self.one_way_delay.record(d as u64);
                }
                Some(d)
            }
            _ => None,
        };
        (gap, owd)
    }

    /// Sets the CNAME from an SDES item, cut at 255 bytes and decoded lossily as UTF-8.
    pub fn set_cname(&mut self, cname: &[u8]) {
        let cname = &cname[..cname.len().min(MAX_CNAME)];
        self.cname = Some(String::from_utf8_lossy(cname).into_owned());
    }

    /// A report block about this source (RFC 3550 A.3), advancing the "prior" counters.
    pub fn report_block(&mut self, now: Timestamp) -> Block {
        let expected = self.expected_current();
        let expected_interval = expected.saturating_sub(self.expected_prior);
        let received_interval = self.received.saturating_sub(self.received_prior);
        self.expected_prior = expected;
        self.received_prior = self.received;
        let lost_interval = expected_interval as i64 - received_interval as i64;
        let fraction_lost = if expected_interval == 0 || lost_interval <= 0 {
            0
        } else {
            ((lost_interval << 8) / expected_interval as i64).min(255) as u8
        };
        let (lsr, dlsr) = match self.last_sr {
            Some((lsr, at)) => (
                lsr,
                NtpTime::compact_from_duration(now.saturating_since(at)),
            ),
            None => (0, 0),
        };
        Block {
            ssrc: self.ssrc,
            fraction_lost,
            cumulative_lost: self.lost().min(i32::MAX as u64) as i32,
            extended_highest_seq: self.extended_max() as u32,
            jitter: self.jitter as u32,
            lsr,
            dlsr,
        }
    }
}
