//! The stream server's figures in Prometheus's text format (version 0.0.4), which the control
//! API serves at `GET /metrics`: the same numbers `GET /streams` gives in JSON. Durations in
//! seconds, sizes and rates in bytes (per second), Prometheus's base units, which `promtool check metrics` asks for; counters end in
//! `_total`.

use super::status::{ServerStatus, StreamStatus};
use metronome_session::sender::ReceiverView;
use metronome_time::Micros;
use std::fmt::Write as _;

/// A label value, escaped as the format asks (backslash, double quote, newline).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes `# HELP` and `# TYPE` once, then each sample.
pub(crate) fn family(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: &[(String, f64)],
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, v) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {v}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    }
}

/// A family read from one status: its name, its type, its help text, and how to read it.
type Family<T> = (&'static str, &'static str, &'static str, fn(&T) -> f64);

/// The exposition of `server` and its running `streams`.
pub(crate) fn exposition(server: &ServerStatus, streams: &[StreamStatus]) -> String {
    let mut out = String::with_capacity(4096);
    server_families(&mut out, server);
    stream_families(&mut out, streams);
    lateness(&mut out, streams);
    receiver_families(&mut out, streams);
    out
}

/// The server's own figures: one sample each.
fn server_families(out: &mut String, server: &ServerStatus) {
    let families: [Family<ServerStatus>; 8] = [
        (
            "metronome_streams_running",
            "gauge",
            "Streams running now.",
            |s| s.running as f64,
        ),
        (
            "metronome_admission_refused_total",
            "counter",
            "Streams admission control refused (they would have missed deadlines).",
            |s| s.refused as f64,
        ),
        (
            "metronome_link_used_bytes_per_second",
            "gauge",
            "Link capacity the admitted streams reserve (Prometheus's base unit: bytes).",
            |s| s.link_used_bps as f64 / 8.0,
        ),
        (
            "metronome_memory_reserved_bytes",
            "gauge",
            "Memory the admitted streams hold (rings and sources), against the budget.",
            |s| s.memory_reserved_bytes as f64,
        ),
        (
            "metronome_memory_budget_bytes",
            "gauge",
            "The most the admitted streams may hold (--memory-budget).",
            |s| s.memory_budget_bytes as f64,
        ),
        (
            "metronome_encode_reserved_cpus",
            "gauge",
            "CPUs the running live encoders take as admission reserved them (measured costs).",
            |s| s.encode_reserved_percent / 100.0,
        ),
        (
            "metronome_encode_budget_cpus",
            "gauge",
            "The most CPU the live encoders may take together (--encode-budget).",
            |s| s.encode_budget_percent / 100.0,
        ),
        (
            "metronome_producer_cpus",
            "gauge",
            "CPUs the producer threads (the encoders among them) used over the last second.",
            |s| s.producer_cpu_percent / 100.0,
        ),
    ];
    for (name, kind, help, f) in families {
        family(out, name, kind, help, &[(String::new(), f(server))]);
    }
}

/// Each stream's counters and target rate: a sample per stream.
fn stream_families(out: &mut String, streams: &[StreamStatus]) {
    let families: [Family<StreamStatus>; 10] = [
        (
            "metronome_stream_packets_total",
            "counter",
            "RTP packets sent.",
            |st| st.packets as f64,
        ),
        (
            "metronome_stream_bytes_total",
            "counter",
            "RTP bytes sent.",
            |st| st.bytes as f64,
        ),
        (
            "metronome_stream_deadline_misses_total",
            "counter",
            "Jobs finished after their deadline.",
            |st| st.deadline_misses as f64,
        ),
        (
            "metronome_stream_late_packets_total",
            "counter",
            "Packets sent more than the stall threshold late (caught up).",
            |st| st.late_packets as f64,
        ),
        (
            "metronome_stream_dropped_packets_total",
            "counter",
            "Packets dropped for being too late.",
            |st| st.dropped as f64,
        ),
        (
            "metronome_stream_underruns_total",
            "counter",
            "Times the pacer found the ring empty.",
            |st| st.underruns as f64,
        ),
        (
            "metronome_stream_send_errors_total",
            "counter",
            "Sends the kernel refused.",
            |st| st.send_errors as f64,
        ),
        (
            "metronome_stream_stalls_total",
            "counter",
            "Times the stream fell behind its schedule.",
            |st| st.stalls as f64,
        ),
        (
            "metronome_stream_frames_skipped_total",
            "counter",
            "Frames a live source skipped to keep up.",
            |st| st.frames_skipped as f64,
        ),
        (
            "metronome_stream_target_bytes_per_second",
            "gauge",
            "The MPEG-TS rate the stream's rate knob targets now (bytes: Prometheus's base unit).",
            |st| st.target_bitrate_bps as f64 / 8.0,
        ),
    ];
    for (name, kind, help, f) in families {
        let samples: Vec<(String, f64)> = streams
            .iter()
            .map(|st| (format!("stream=\"{}\"", label(&st.name)), f(st)))
            .collect();
        family(out, name, kind, help, &samples);
    }
}

/// Lateness: a summary of send time minus due time, per packet, per stream.
fn lateness(out: &mut String, streams: &[StreamStatus]) {
    let _ = writeln!(
        out,
        "# HELP metronome_stream_lateness_seconds Send time minus due time, per packet."
    );
    let _ = writeln!(out, "# TYPE metronome_stream_lateness_seconds summary");
    for st in streams {
        let n = label(&st.name);
        let l = &st.lateness;
        for (q, v) in [
            ("0.5", l.p50_us),
            ("0.99", l.p99_us),
            ("0.999", l.p999_us),
            ("1", l.max_us),
        ] {
            let _ = writeln!(
                out,
                "metronome_stream_lateness_seconds{{stream=\"{n}\",quantile=\"{q}\"}} {}",
                v.as_secs_f64()
            );
        }
        let _ = writeln!(
            out,
            "metronome_stream_lateness_seconds_sum{{stream=\"{n}\"}} {}",
            l.mean_us.as_secs_f64() * l.count as f64
        );
        let _ = writeln!(
            out,
            "metronome_stream_lateness_seconds_count{{stream=\"{n}\"}} {}",
            l.count
        );
    }
}

/// A receiver family: its name, type, help text, and how to read it (`None`: no sample).
type ReceiverFamily = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ReceiverView) -> Option<f64>,
);

/// What each stream's receivers report (RTCP receiver reports): a sample per receiver.
fn receiver_families(out: &mut String, streams: &[StreamStatus]) {
    let families: [ReceiverFamily; 5] = [
        (
            "metronome_receiver_fraction_lost",
            "gauge",
            "Fraction of packets lost in the receiver's last report interval (0 to 1).",
            |rv| Some(rv.fraction_lost),
        ),
        (
            "metronome_receiver_packets_lost_total",
            "counter",
            "Packets the receiver counts lost since it started.",
            |rv| Some(rv.cumulative_lost as f64),
        ),
        (
            "metronome_receiver_jitter_seconds",
            "gauge",
            "RFC 3550 interarrival jitter the receiver reports.",
            |rv| Some(rv.jitter_us.as_secs_f64()),
        ),
        (
            "metronome_receiver_rtt_seconds",
            "gauge",
            "Round-trip time from the receiver's report (LSR/DLSR).",
            |rv| rv.rtt_us.map(Micros::as_secs_f64),
        ),
        (
            "metronome_receiver_reports_total",
            "counter",
            "Receiver reports received.",
            |rv| Some(rv.reports as f64),
        ),
    ];
    for (name, kind, help, f) in families {
        let samples: Vec<(String, f64)> = streams
            .iter()
            .flat_map(|st| st.receivers.iter().map(move |rv| (st, rv)))
            .filter_map(|(st, rv)| {
                let labels = format!(
                    "stream=\"{}\",receiver=\"{:08x}\",addr=\"{}\"",
                    label(&st.name),
                    rv.ssrc,
                    label(&rv.addr.to_string())
                );
                Some((labels, f(rv)?))
            })
            .collect();
        family(out, name, kind, help, &samples);
    }
}
