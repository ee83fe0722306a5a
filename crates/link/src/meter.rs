//! What a receiving endpoint measured: packets, bytes, loss, one-way delay, RFC 3550 jitter,
//! and the same per interval (for throughput over time).

use metronome_time::Micros;
use metronome_time::{Distribution, Timestamp};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Figures of one interval `[start, start + interval)` of virtual time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntervalFigures {
    /// Start of the interval (virtual time).
    pub start_us: Micros,
    /// Packets received in it (unique).
    pub packets: u64,
    /// Bytes on the wire received in it.
    pub bytes: u64,
    /// Mean one-way delay of its packets (0 without packets).
    pub mean_delay_us: Micros,
    /// RFC 3550 jitter at its end.
    pub jitter_us: Micros,
}

/// The measuring half of a receiving endpoint.
#[derive(Clone, Debug)]
pub struct Meter {
    interval: Duration,
    /// Unique packets counted (duplicates and out-of-range numbers excluded).
    pub packets: u64,
    /// Bytes counted: each packet's on-the-wire size as given to [`Meter::record`] or
    /// [`Meter::account`], plus the application bytes of [`Meter::account_bytes`].
    pub bytes: u64,
    /// Packets whose number had already been seen (not counted again).
    pub duplicates: u64,
    /// Packets that arrived after one with a higher number.
    pub reordered: u64,
    highest: Option<u64>,
    /// Bit per packet number seen (numbers are bounded by what the sender sent).
    seen: Vec<u64>,
    /// RFC 3550 §6.4.1 / A.8 jitter, in ns (floating, as iperf keeps it).
    jitter: f64,
    last_transit: Option<i64>,
    delay_sum_ns: u128,
    /// Smallest one-way delay (arrival − send time), ns; `u64::MAX` until a packet is
    /// counted. Negative delays (clocks apart) count as 0.
    pub min_delay_ns: u64,
    /// Largest one-way delay, ns (0 until a packet is counted).
    pub max_delay_ns: u64,
    /// Delay and inter-arrival histograms (only when asked for: each is ~200 KB).
    pub delay: Option<Distribution>,
    /// Histogram of the time between consecutive counted arrivals, ns (with histograms on).
    pub interarrival: Option<Distribution>,
    last_arrival: Option<Timestamp>,
    /// When the first packet or byte was counted; `None` before.
    pub first_arrival: Option<Timestamp>,
    /// One entry per interval from time zero to the latest arrival, empty intervals
    /// included; empty when the interval is zero. The last one's mean delay is set by
    /// [`Meter::finish`].
    pub intervals: Vec<IntervalFigures>,
    interval_delay_sum: u128,
}

impl Meter {
    /// A meter binning by `interval` (zero: no bins); `histograms` keeps full distributions.
    pub fn new(interval: Duration, histograms: bool) -> Self {
        Meter {
            interval,
            packets: 0,
            bytes: 0,
            duplicates: 0,
            reordered: 0,
            highest: None,
            seen: Vec::new(),
            jitter: 0.0,
            last_transit: None,
            delay_sum_ns: 0,
            min_delay_ns: u64::MAX,
            max_delay_ns: 0,
            delay: histograms.then(Distribution::new),
            interarrival: histograms.then(Distribution::new),
            last_arrival: None,
            first_arrival: None,
            intervals: Vec::new(),
            interval_delay_sum: 0,
        }
    }

    /// Packet number `seq` (dense from 0, at most `bound`), `size` bytes on the wire, sent at
    /// `sent`, arrived at `now`. Returns false for a duplicate (not counted again).
    pub fn record(
        &mut self,
        now: Timestamp,
        seq: u64,
        bound: u64,
        size: u32,
        sent: Timestamp,
    ) -> bool {
        if seq >= bound {
            return false;
        }
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if self.seen.len() <= word {
            self.seen.resize(word + 1, 0);
        }
        if self.seen[word] & (1 << bit) != 0 {
            self.duplicates += 1;
            return false;
        }
        self.seen[word] |= 1 << bit;
        match self.highest {
            Some(h) if seq < h => self.reordered += 1,
            _ => self.highest = Some(seq),
        }
        self.account(now, size, sent);
        true
    }

    /// Counts a packet whose uniqueness the caller already checked (an RTP receiver session).
    pub fn account(&mut self, now: Timestamp, size: u32, sent: Timestamp) {
        self.packets += 1;
        self.bytes += size as u64;
        let delay = now.signed_nanos_since(sent);
        let d = delay.max(0) as u64;
        self.delay_sum_ns += d as u128;
        self.min_delay_ns = self.min_delay_ns.min(d);
        self.max_delay_ns = self.max_delay_ns.max(d);
        if let Some(h) = &mut self.delay {
            h.record(d);
        }
        // RFC 3550 A.8: J += (|D(i-1,i)| - J) / 16, on the transit time.
        if let Some(prev) = self.last_transit {
            let dd = (delay - prev).unsigned_abs() as f64;
            self.jitter += (dd - self.jitter) / 16.0;
        }
        self.last_transit = Some(delay);
        if let (Some(h), Some(last)) = (&mut self.interarrival, self.last_arrival) {
            h.record(now.saturating_since(last).as_nanos() as u64);
        }
        self.last_arrival = Some(now);
        self.first_arrival.get_or_insert(now);
        self.bin(now, size, d);
    }

    /// Counts bytes an application read from a stream (TCP): throughput, not packets.
    pub fn account_bytes(&mut self, now: Timestamp, bytes: u64) {
        self.bytes += bytes;
        self.first_arrival.get_or_insert(now);
        self.last_arrival = Some(now);
        let step = self.interval.as_nanos() as u64;
        if step == 0 {
            return;
        }
        self.open_interval(now, step);
        let last = self.intervals.last_mut().expect("just opened");
        last.bytes += bytes;
    }

    /// Makes the interval holding `now` the last one, closing the ones before.
    fn open_interval(&mut self, now: Timestamp, step: u64) {
        let k = (now.as_nanos() / step) as usize;
        if self.intervals.len() <= k {
            self.close_interval();
            let from = self.intervals.len();
            let jitter = self.jitter();
            self.intervals.extend((from..=k).map(|i| IntervalFigures {
                start_us: Micros::from_nanos_u64(i as u64 * step),
                jitter_us: jitter,
                ..IntervalFigures::default()
            }));
            self.interval_delay_sum = 0;
        }
    }

    fn bin(&mut self, now: Timestamp, size: u32, delay: u64) {
        let step = self.interval.as_nanos() as u64;
        if step == 0 {
            return;
        }
        self.open_interval(now, step);
        let jitter = self.jitter();
        let last = self.intervals.last_mut().expect("just opened");
        last.packets += 1;
        last.bytes += size as u64;
        self.interval_delay_sum += delay as u128;
        last.jitter_us = jitter;
    }

    fn close_interval(&mut self) {
        if let Some(last) = self.intervals.last_mut() {
            if last.packets > 0 {
                last.mean_delay_us =
                    Micros::from_nanos_u64((self.interval_delay_sum / last.packets as u128) as u64);
            }
        }
    }

    /// Closes the current interval (call once at the end of the run).
    pub fn finish(&mut self) {
        self.close_interval();
    }

    /// Interarrival jitter as RFC 3550 §6.4.1 / A.8 computes it (smoothed by 1/16, on the
    /// transit times), truncated to the ns.
    pub fn jitter(&self) -> Micros {
        Micros::from_nanos_u64(self.jitter as u64)
    }

    /// Mean one-way delay of the packets counted (0 without packets).
    pub fn mean_delay(&self) -> Micros {
        if self.packets == 0 {
            Micros::ZERO
        } else {
            Micros::from_nanos_u64((self.delay_sum_ns / self.packets as u128) as u64)
        }
    }
}
