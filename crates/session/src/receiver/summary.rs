//! A serializable summary of what a receiver measured, for JSON output and reports.

use super::{Counters, ReceiverSession, Source};
use metronome_time::Summary;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct SourceSummary {
    pub ssrc: String,
    pub cname: Option<String>,
    pub packets: u64,
    pub received: u64,
    pub expected: u64,
    pub lost: u64,
    pub loss_percent: f64,
    pub duplicates: u64,
    pub reordered: u64,
    pub too_late: u64,
    pub sequence_jumps: u64,
    pub timestamp_jumps: u64,
    pub payload_bytes: u64,
    #[serde(
        rename = "duration_us",
        serialize_with = "metronome_time::units::secs_as_us"
    )]
    pub duration_s: f64,
    pub bitrate_bps: f64,
    /// RFC 3550 interarrival jitter at the end of the run, in milliseconds (`jitter_us` in
    /// JSON).
    #[serde(
        rename = "jitter_us",
        serialize_with = "metronome_time::units::ms_as_us"
    )]
    pub jitter_ms: f64,
    pub interarrival: Summary,
    /// Present when the sender stamps its send time (RFC 8285 extension).
    pub one_way_delay: Option<Summary>,
    pub negative_delays: u64,
    pub sender_reports: u64,
    pub said_bye: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReceiverSummary {
    pub counters: Counters,
    /// Receiver reports built (the driver says how many it could send).
    pub receiver_reports_written: u64,
    pub sources: Vec<SourceSummary>,
}

impl SourceSummary {
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
            duration_s: duration,
            bitrate_bps: if duration > 0.0 {
                s.payload_bytes as f64 * 8.0 / duration
            } else {
                0.0
            },
            jitter_ms: s.jitter_ticks() * 1000.0 / clock_rate as f64,
            interarrival: s.interarrival.summary(),
            one_way_delay: (!s.one_way_delay.is_empty()).then(|| s.one_way_delay.summary()),
            negative_delays: s.negative_delay,
            sender_reports: s.sender_reports,
            said_bye: s.said_bye,
        }
    }
}

impl ReceiverSession {
    pub fn summary(&self) -> ReceiverSummary {
        ReceiverSummary {
            counters: *self.counters(),
            receiver_reports_written: self.reports_written(),
            sources: self
                .sources()
                .iter()
                .map(|s| SourceSummary::of(s, self.config().clock.rate()))
                .collect(),
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
        let owd = m
            .one_way_delay
            .map(|d| format!(" owd p50 {:.0} µs", d.p50_us))
            .unwrap_or_default();
        format!(
            "{} pkts {:.2} Mbit/s lost {} ({:.2}%) dup {} reord {} jitter {:.3} ms ia p99 {:.2} ms{}",
            m.received,
            m.bitrate_bps / 1e6,
            m.lost,
            m.loss_percent,
            m.duplicates,
            m.reordered,
            m.jitter_ms,
            m.interarrival.p99_us / 1000.0,
            owd
        )
    }
}
