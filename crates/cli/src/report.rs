//! Human-readable summaries of what a run measured.

use metronome_apps::receiver::ReceiverOutcome;
use metronome_apps::sender::{SenderOutcome, SenderStatus};
use metronome_time::Micros;
use serde::Serialize;
use std::fmt::Write;
use std::io::IsTerminal;

/// A status line rewritten in place on a terminal; silent when stderr is not one.
pub(crate) struct LiveLine {
    on: bool,
}

impl LiveLine {
    pub(crate) fn new(wanted: bool) -> Self {
        LiveLine {
            on: wanted && std::io::stderr().is_terminal(),
        }
    }
    pub(crate) fn is_on(&self) -> bool {
        self.on
    }
    pub(crate) fn show(&self, line: &str) {
        if self.on {
            eprint!("\r\x1b[K{line}");
        }
    }
    pub(crate) fn finish(&self) {
        if self.on {
            eprintln!();
        }
    }
    /// Clears the status line so that a message can take its place.
    pub(crate) fn finish_line(&self) {
        if self.on {
            eprint!("\r\x1b[K");
        }
    }
}

/// The version of every JSON document the binary prints (`schema_version`, the first field).
/// Raise it when a field changes meaning or goes away; adding a field keeps it.
///
/// 3: durations in µs where they were in ms or `{secs, nanos}` (`jitter_us`, `rtt_us`,
/// the calibration's `*_us`), enum values spelled as on the command line (`sleep-spin`), and a
/// `run` header.
/// 4: every duration in µs, run lengths and CPU times too (`duration_us`, `elapsed_us`,
/// `cpu_us`, `process_cpu_us`, the interval's `start_us`/`end_us`, raw's `spread_us`).
/// 5: every SSRC as 8 lowercase hex digits (`serve`'s `ssrc` and its receivers' were numbers).
/// 6: every duration is one type (`metronome_time::Micros`): whole µs print as integers, the
/// rest with up to three decimals (run lengths, CPU times and `wall_us` were whole µs, always
/// integers; jitter and RTTs had any number of decimals).
/// 7: enum values that were snake_case are kebab-case, as the command line spells them
/// (ST 2110-21's `verdict` `not-conformant`, `narrow-linear`, `no-frames`; the read schedule).
/// 8: `lab compare`'s `jitter_us` and `mean_delay_us` are null for a TCP flow (they were 0),
/// and receivers with the same figures in both runs are one row (`receiver` names them).
/// 9: `ended_by` is one of a documented list, kebab-case (`packets`, `end-of-input`,
/// `sender-bye`, `left-group`, ...), where it was a phrase (`packet count`, `end of input`,
/// `source closed`, a sentence on BYE or on TFMCC's leave rule).
/// 10: a pacing or receiving thread's scheduling policy (`realtime`, `grant`, `pacer`) is an
/// object (`policy`: `deadline`, `fifo` or `other`, its parameters, and `note` in words),
/// `memory_locked` and a pacer's `memory` one (`state`: `locked`, `not-locked`,
/// `not-requested`, `as-core`; `reason`), a raw sender's `late_policy` one (`policy`:
/// `drop-late` with `after_us`, or `catch-up` with `factor`), and `wait_mode` one of `auto`,
/// `sleep-spin`, `busy-poll`, `plain-sleep`: each was a phrase.
pub(crate) const SCHEMA_VERSION: u32 = 10;

/// What run a document comes from: this binary's version, when it started (Unix ns), the
/// host's name and the command line.
#[derive(Serialize, schemars::JsonSchema)]
struct RunHeader {
    version: &'static str,
    started_unix_ns: u64,
    host: String,
    args: Vec<String>,
}

/// A document as `--json` prints it: the schema version, the run header, then its own fields.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct Versioned<'a, T> {
    schema_version: u32,
    run: RunHeader,
    #[serde(flatten)]
    body: &'a T,
}

static STARTED_UNIX_NS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// Notes when the run started (call first thing in `main`).
#[allow(clippy::disallowed_methods)] // describes the run in its JSON; no input to the engine
pub(crate) fn mark_start() {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let _ = STARTED_UNIX_NS.set(ns);
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// What a command prints on stdout: text for people, or JSON alone (`--json`): one document,
/// or, with `--interval`, JSON lines (each interval, then the summary, one line each, as
/// iperf3's `--json-stream`), so that `jq` reads stdout whole either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    Human,
    Json,
    JsonLines,
}

impl Output {
    /// From `--json` and whether `--interval` was given.
    pub(crate) fn of(json: bool, intervals: bool) -> Output {
        match (json, intervals) {
            (false, _) => Output::Human,
            (true, false) => Output::Json,
            (true, true) => Output::JsonLines,
        }
    }
}

/// `value` as pretty JSON, with the schema version as its first field and the run header.
pub(crate) fn to_json<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(&rounded(&versioned(value))?)
}

pub(crate) use metronome_time::json::rounded;

fn versioned<T: Serialize>(value: &T) -> Versioned<'_, T> {
    Versioned {
        schema_version: SCHEMA_VERSION,
        run: RunHeader {
            version: env!("CARGO_PKG_VERSION"),
            started_unix_ns: STARTED_UNIX_NS.get().copied().unwrap_or(0),
            host: host_name(),
            args: std::env::args().collect(),
        },
        body: value,
    }
}

/// `--interval` as `serve` and `recv` take it. `0` turns the lines off (as iperf3's `-i 0`:
/// a terminal then gets the status line rewritten in place). Without the option, a person at
/// a terminal gets a line a second, as iperf3 prints them, where the command has interval
/// lines (`has_intervals`); `--json` and a pipe get none unless asked.
pub(crate) fn interval_wanted(
    given: Option<std::time::Duration>,
    json: bool,
    has_intervals: bool,
) -> Option<std::time::Duration> {
    interval_for(given, json, has_intervals, std::io::stdout().is_terminal())
}

fn interval_for(
    given: Option<std::time::Duration>,
    json: bool,
    has_intervals: bool,
    terminal: bool,
) -> Option<std::time::Duration> {
    match given {
        Some(every) if every.is_zero() => None,
        Some(every) => Some(every),
        None if has_intervals && !json && terminal => Some(std::time::Duration::from_secs(1)),
        None => None,
    }
}

/// One `--interval` line as `--json` prints it (iperf3's `--json-stream` intervals): the
/// schema version, the interval, then the command's figures (`metronome schema recv-interval`,
/// `serve-interval`).
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct IntervalLine<F> {
    pub schema_version: u32,
    pub interval: Span,
    #[serde(flatten)]
    pub figures: F,
}

/// An interval of a run, from its start.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct Span {
    pub start_us: Micros,
    pub end_us: Micros,
}

/// One interval's figures (`--interval`), as iperf3 prints its intervals: an
/// [`IntervalLine`], or with [`Output::Human`] a line of text of the same figures.
pub(crate) fn interval_line<F: Serialize>(out: Output, start_s: f64, end_s: f64, figures: F) {
    use std::io::Write as _;
    let line = if out == Output::Human {
        let figures = serde_json::to_value(&figures).unwrap_or_default();
        format!("{start_s:7.1}-{end_s:.1} s  {}", human_figures(&figures))
    } else {
        let line = IntervalLine {
            schema_version: SCHEMA_VERSION,
            interval: Span {
                start_us: Micros::from_micros((start_s * 1e6).round() as i64),
                end_us: Micros::from_micros((end_s * 1e6).round() as i64),
            },
            figures,
        };
        rounded(&line).map(|v| v.to_string()).unwrap_or_default()
    };
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// `--interval` lines from a run's status snapshots (counts since its start): each line is
/// what changed since the previous snapshot, the first since the start.
pub(crate) struct Intervals<S> {
    out: Output,
    last: Option<S>,
}

/// What a status snapshot says of its time and counts, for [`Intervals`].
pub(crate) trait Snapshot: Clone {
    /// Since the run's start.
    fn elapsed(&self) -> std::time::Duration;
}

impl<S: Snapshot> Intervals<S> {
    pub(crate) fn new(json: bool) -> Self {
        Intervals {
            out: Output::of(json, true),
            last: None,
        }
    }

    /// Prints the line from the previous snapshot to `now`, its figures made by `figures`
    /// from a count's change (`delta`) and the interval's length, s.
    pub(crate) fn line<F: Serialize>(
        &mut self,
        now: &S,
        figures: impl FnOnce(&dyn Fn(fn(&S) -> u64) -> u64, f64) -> F,
    ) {
        let then = self.last.as_ref();
        let t0 = then.map_or(std::time::Duration::ZERO, Snapshot::elapsed);
        let span = now.elapsed().saturating_sub(t0).as_secs_f64().max(1e-9);
        let delta = |f: fn(&S) -> u64| f(now).saturating_sub(then.map_or(0, f));
        let figures = figures(&delta, span);
        interval_line(
            self.out,
            t0.as_secs_f64(),
            now.elapsed().as_secs_f64(),
            figures,
        );
        self.last = Some(now.clone());
    }
}

/// An interval's figures in words, in a fixed order, with their units (what `--json` gives
/// as `packets`, `bitrate_bps`, `lost`, `jitter_us`, … ).
fn human_figures(f: &serde_json::Value) -> String {
    let num = |k: &str| f.get(k).and_then(serde_json::Value::as_f64);
    let mut parts = Vec::new();
    if let Some(v) = num("frames") {
        parts.push(format!("{v:>4} frames"));
    }
    if let Some(v) = num("frames_complete") {
        parts.push(format!("{v:>4} frames complete"));
    }
    for (k, word) in [("frames_partial", "partial"), ("frames_lost", "lost")] {
        if let Some(v) = num(k) {
            parts.push(format!("{v} {word}"));
        }
    }
    if let Some(v) = num("late_frames") {
        parts.push(format!("{v} late"));
    }
    if let Some(v) = num("packets") {
        parts.push(format!("{v:>6} packets"));
    }
    if let Some(v) = num("bitrate_bps") {
        parts.push(format!("{:8.3} Mbit/s", v / 1e6));
    }
    if let Some(v) = num("lost") {
        parts.push(format!("lost {v}"));
    }
    if let Some(v) = num("jitter_us") {
        parts.push(format!("jitter {:.3} ms", v / 1e3));
    }
    if let Some(v) = num("max_late_us") {
        parts.push(format!("late max {v:.1} µs"));
    }
    if let Some(v) = num("target_bitrate_bps") {
        parts.push(format!("target {:.3} Mbit/s", v / 1e6));
    }
    if let Some(v) = num("latency_p99_us") {
        parts.push(format!("latency p99 {v:.0} µs"));
    }
    if let Some(v) = num("rx_overflow") {
        parts.push(format!("overflow {v}"));
    }
    if let Some(v) = num("receivers") {
        parts.push(format!("{v} receivers"));
    }
    if let Some(v) = f.get("ssrc").and_then(serde_json::Value::as_str) {
        parts.push(format!("ssrc {v}"));
    }
    parts.join("  ")
}

/// Prints a run's outcome: the human summary, pretty JSON, or one JSON line.
pub(crate) fn print_outcome<T: Serialize>(
    out: Output,
    outcome: &T,
    human: impl Fn(&T) -> String,
) -> Result<(), serde_json::Error> {
    match out {
        Output::Human => print!("{}", human(outcome)),
        Output::Json => println!("{}", to_json(outcome)?),
        Output::JsonLines => println!("{}", rounded(&versioned(outcome))?),
    }
    Ok(())
}

pub(crate) fn sender_status(s: &SenderStatus) -> String {
    let rate = if s.elapsed.as_secs_f64() > 0.0 {
        s.bytes as f64 * 8.0 / s.elapsed.as_secs_f64() / 1e6
    } else {
        0.0
    };
    let mut line = format!(
        "{:>6.1}s {} pkts {:.2} Mbit/s late max {:.1} µs ring {}",
        s.elapsed.as_secs_f64(),
        s.packets,
        rate,
        s.max_late_us.as_micros_f64(),
        s.ring_occupancy
    );
    for r in s.receivers.iter().take(3) {
        let rtt = r
            .rtt_us
            .map(Micros::as_millis_f64)
            .map(|v| format!(" rtt {v:.2} ms"))
            .unwrap_or_default();
        let _ = write!(
            line,
            " | rx {:08x} loss {:.1}% jitter {:.3} ms{}",
            r.ssrc,
            r.fraction_lost * 100.0,
            r.jitter_us.as_millis_f64(),
            rtt
        );
    }
    line
}

pub(crate) fn sender_summary(o: &SenderOutcome) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "sender: {}", o.source);
    let _ = writeln!(s, "  to {}", o.destinations.join(", "));
    let _ = writeln!(
        s,
        "  pacing thread: {}; memory {}; wait {}",
        o.realtime, o.memory_locked, o.wait_mode
    );
    let _ = writeln!(
        s,
        "  sent {} packets, {} bytes in {:.2} s ({:.3} Mbit/s), ended by {}",
        o.packets,
        o.bytes,
        o.duration_us.as_secs_f64(),
        o.bitrate_bps / 1e6,
        o.ended_by
    );
    let _ = writeln!(s, "  send lateness: {}", o.pacing.lateness);
    let w = &o.wait_modes;
    if w.busy_poll_us > Micros::ZERO {
        let _ = writeln!(
            s,
            "  waited {:.1} s sleeping-then-spinning and {:.1} s busy-polling (sleeping made >1% of packets late by >20 µs); pacer CPU {:.0}%",
            w.sleep_spin_us.as_secs_f64(), w.busy_poll_us.as_secs_f64(), o.pacer_cpu_percent
        );
    } else {
        let _ = writeln!(s, "  pacer CPU {:.0}%", o.pacer_cpu_percent);
    }
    let _ = writeln!(
        s,
        "  stalls {} ({} packets caught up late, {} dropped), underruns {}, send errors {}",
        o.pacing.stalls, o.pacing.late_packets, o.pacing.dropped, o.underruns, o.send_errors
    );
    if o.frames_skipped > 0 {
        let _ = writeln!(
            s,
            "  the source fell behind real time: {} frames skipped (null packets kept the rate)",
            o.frames_skipped
        );
    }
    for r in &o.receivers {
        let _ = writeln!(s, "  {}", receiver_line(r));
    }
    if let Some(h) = &o.host {
        let _ = writeln!(s, "  {}", h.line());
    }
    s
}

/// What one receiver's RTCP reports said about a stream we send, on one line.
pub(crate) fn receiver_line(r: &metronome_session::sender::ReceiverView) -> String {
    format!(
        "receiver {:08x} ({}) at {}: loss {:.2}% (cumulative {}), jitter {:.3} ms, rtt {}",
        r.ssrc,
        r.cname.as_deref().unwrap_or("?"),
        r.addr,
        r.fraction_lost * 100.0,
        r.cumulative_lost,
        r.jitter_us.as_millis_f64(),
        r.rtt_us
            .map(Micros::as_millis_f64)
            .map(|v| format!("{v:.3} ms"))
            .unwrap_or_else(|| "n/a".into())
    )
}

pub(crate) fn receiver_summary(o: &ReceiverOutcome) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "receiver on {}: {:.2} s, ended by {}; kernel timestamps {}; socket buffer {} KiB, overflows {}",
        o.source,
        o.duration_us.as_secs_f64(),
        o.ended_by,
        if o.kernel_timestamps { "yes" } else { "no" },
        o.receive_buffer_bytes / 1024,
        o.socket_overflows
    );
    if o.fec_socket_overflows > 0 {
        let _ = writeln!(
            s,
            "  FEC sockets overflowed: the kernel dropped {} FEC datagrams (as root, or with a larger net.core.rmem_max, the buffers are larger)",
            o.fec_socket_overflows
        );
    }
    let c = &o.receiver.counters;
    let _ = writeln!(
        s,
        "  datagrams {} (not RTP {}, wrong payload type {}, bad payload {}, unconfirmed jumps {}, over source limit {}), RTCP {} (malformed {})",
        c.datagrams,
        c.not_rtp,
        c.wrong_payload_type,
        c.bad_payload,
        c.jump_suspects,
        c.too_many_sources,
        c.rtcp_packets,
        c.rtcp_malformed
    );
    for src in &o.receiver.sources {
        let _ = writeln!(
            s,
            "  source {} ({}): {} packets, {:.3} Mbit/s, lost {} of {} ({:.3}%), duplicates {}, reordered {}, seq jumps {}, ts jumps {}",
            src.ssrc,
            src.cname.as_deref().unwrap_or("?"),
            src.received,
            src.bitrate_bps / 1e6,
            src.lost,
            src.expected,
            src.loss_percent,
            src.duplicates,
            src.reordered,
            src.sequence_jumps,
            src.timestamp_jumps
        );
        let _ = writeln!(
            s,
            "    RFC 3550 jitter {:.4} ms",
            src.jitter_us.as_millis_f64()
        );
        let _ = writeln!(s, "    inter-arrival: {}", src.interarrival);
        if let Some(d) = &src.one_way_delay {
            let _ = writeln!(s, "    one-way delay: {d}");
        }
    }
    if let Some(h) = &o.host {
        let _ = writeln!(s, "  {}", h.line());
    }
    s
}

/// A socket buffer the kernel granted smaller than asked: what to do about it, on stderr.
pub(crate) fn warn_buffer(b: &metronome_apps::uncompressed::BufferInfo) {
    if let Some(advice) = &b.advice {
        eprintln!("metronome: warning: {advice}");
    }
}

#[cfg(test)]
mod tests {
    use super::interval_for;
    use std::time::Duration;

    #[test]
    fn json_floats_keep_six_decimals_and_their_order() {
        let v = serde_json::json!({
            "z": 0.1 + 0.2,
            "a": [1_234.567_890_123, 7, -2.5e-7],
            "big": 2.0e9 + 0.123_456_789,
        });
        let r = super::rounded(&v).unwrap();
        assert_eq!(
            r.to_string(),
            r#"{"z":0.3,"a":[1234.56789,7,0.0],"big":2000000000.1234567}"#
        );
    }

    #[test]
    fn a_line_a_second_on_a_terminal_unless_told() {
        let s = |n| Some(Duration::from_millis(n));
        // Asked for: as asked, anywhere; 0 turns the lines off.
        assert_eq!(interval_for(s(500), false, true, false), s(500));
        assert_eq!(interval_for(s(500), true, true, true), s(500));
        assert_eq!(interval_for(s(0), false, true, true), None);
        // Not asked: a second on a terminal, for people (not --json), where there are lines.
        assert_eq!(interval_for(None, false, true, true), s(1000));
        assert_eq!(interval_for(None, true, true, true), None);
        assert_eq!(interval_for(None, false, true, false), None);
        assert_eq!(interval_for(None, false, false, true), None);
    }
}
