//! A serializable summary of what a receiver measured, for JSON output and reports.

use super::{Counters, ReceiverSession, Source};
use metronome_time::Micros;
use metronome_time::Summary;
use serde::Serialize;

/// What was measured of one source ([`Source`]), in plain units for JSON.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SourceSummary {
    /// The SSRC as 8 lowercase hex digits.
    #[schemars(with = "metronome_time::units::Hex32")]
    pub ssrc: String,
    /// The CNAME from the source's SDES, if one arrived.
    pub cname: Option<String>,
    /// RTP packets taken from the source, duplicates and late ones included.
    pub packets: u64,
    /// Unique packets received, across sequence resyncs.
    pub received: u64,
    /// Packets expected from the sequence numbers (RFC 3550 A.3), across resyncs.
    pub expected: u64,
    /// Cumulative loss: `expected - received`, never negative.
    pub lost: u64,
    /// `lost` as a percentage of `expected` (0 when nothing was expected).
    pub loss_percent: f64,
    /// Duplicate arrivals: copies of packets already received.
    pub duplicates: u64,
    /// Packets that arrived after a later one.
    pub reordered: u64,
    /// Packets too old to tell from duplicates, not counted as received.
    pub too_late: u64,
    /// Confirmed large sequence jumps (resyncs, RFC 3550 A.1).
    pub sequence_jumps: u64,
    /// RTP timestamp jumps, kept out of the jitter.
    pub timestamp_jumps: u64,
    /// RTP payload bytes of the unique packets.
    pub payload_bytes: u64,
    /// From the first to the last arrival.
    pub duration_us: Micros,
    /// Payload bit rate over `duration_us`, bits per second (headers not counted; 0 for a single
    /// instant).
    pub bitrate_bps: f64,
    /// RFC 3550 interarrival jitter at the end of the run.
    pub jitter_us: Micros,
    /// Gaps between consecutive arrivals (µs).
    pub interarrival: Summary,
    /// Present when the sender stamps its send time (RFC 8285 extension).
    pub one_way_delay: Option<Summary>,
    /// Packets whose one-way delay came out negative (the clocks disagree), left out of
    /// `one_way_delay`.
    pub negative_delays: u64,
    /// RTCP sender reports received from the source.
    pub sender_reports: u64,
    /// Whether the source sent an RTCP BYE.
    pub said_bye: bool,
}

/// Everything a [`ReceiverSession`] measured, for JSON output.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ReceiverSummary {
    /// Datagram-level counters of the whole session.
    pub counters: Counters,
    /// Receiver reports built (the driver says how many it could send).
    pub receiver_reports_written: u64,
    /// One summary per source tracked.
    pub sources: Vec<SourceSummary>,
    /// What loss repair did (NACKs out, retransmissions in), when the receiver asks for
    /// repairs; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<super::RepairStats>,
}

impl SourceSummary {
    /// The summary of `s`, whose RTP clock runs at `clock_rate` Hz (for the jitter in ms).
    pub fn of(s: &Source, clock_rate: u32) -> Self {
        let duration = s
            .last_arrival
            .saturating_since(s.first_arrival)
            .as_secs_f64();
        let expected = s.expected();
        SourceSummary {
            ssrc: format!("{:08x}", s.ssrc),
            cname: s.cname.clone(),
            packets: s.packets,
            received: s.received(),
            expected,
            lost: s.lost(),
            loss_percent: if expected == 0 {
                0.0
            } else {
                s.lost() as f64 * 100.0 / expected as f64
            },
            duplicates: s.duplicates,
            reordered: s.reordered,
            too_late: s.too_late,
            sequence_jumps: s.seq_jumps,
            timestamp_jumps: s.ts_jumps,
            payload_bytes: s.payload_bytes,
            duration_us: Micros::from_secs_f64(duration),
            bitrate_bps: if duration > 0.0 {
                s.payload_bytes as f64 * 8.0 / duration
            } else {
                0.0
            },
            jitter_us: Micros::from_secs_f64(s.jitter_ticks() / clock_rate as f64),
            interarrival: s.interarrival.summary(),
            one_way_delay: (!s.one_way_delay.is_empty()).then(|| s.one_way_delay.summary()),
            negative_delays: s.negative_delay,
            sender_reports: s.sender_reports,
            said_bye: s.said_bye,
        }
    }
}

impl ReceiverSession {
    /// A summary of everything measured so far, per source.
    pub fn summary(&self) -> ReceiverSummary {
        ReceiverSummary {
            counters: *self.counters(),
            receiver_reports_written: self.reports_written(),
            sources: self
                .sources()
                .iter()
                .map(|s| SourceSummary::of(s, self.config().clock.rate()))
                .collect(),
            repair: self.repair_stats(),
        }
    }

    /// A one-line status of the main source, for a terminal.
    pub fn status_line(&self) -> String {
        let Some(s) = self.main_source() else {
            let c = self.counters();
            return format!(
                "waiting for RTP… ({} datagrams, {} not RTP)",
                c.datagrams, c.not_rtp
            );
        };
        let m = SourceSummary::of(s, self.config().clock.rate());
        let mut owd = m
            .one_way_delay
            .map(|d| format!(" owd p50 {:.0} µs", d.p50_us.as_micros_f64()))
            .unwrap_or_default();
        if let Some(r) = self.repair_stats() {
            owd += &format!(
                " repaired {} late {} given up {}",
                r.rtx_useful, r.nack.recovered_late, r.nack.given_up
            );
        }
        format!(
            "{} pkts {:.2} Mbit/s lost {} ({:.2}%) dup {} reord {} jitter {:.3} ms ia p99 {:.2} ms{}",
            m.received,
            m.bitrate_bps / 1e6,
            m.lost,
            m.loss_percent,
            m.duplicates,
            m.reordered,
            m.jitter_us.as_millis_f64(),
            m.interarrival.p99_us.as_millis_f64(),
            owd
        )
    }
}
