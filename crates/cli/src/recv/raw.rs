//! `metronome recv --raw` (or an SDP whose media is `raw/90000`): uncompressed video (RFC 4175)
//! received by `metronome_apps::uncompressed::RawReceiver`, and what it measured.

use crate::raw_args::RecvRt;
use crate::recv::RecvArgs;
use crate::report::warn_buffer;
use crate::report::{print_outcome, Intervals, LiveLine, Output, Snapshot};
use metronome_apps::uncompressed::{
    parse_model, RawReceiver, RawReceiverConfig, RawReceiverOutcome, RawReceiverStatus,
};
use metronome_rt::thread::RtPolicy;
use metronome_rt::url::RtpUrl;
use metronome_sched::SenderType;
use metronome_session::rfc4175::parse_fmtp;
use metronome_time::Micros;
use metronome_wire::sdp::MediaDescription;
use std::fmt::Write;
use std::sync::atomic::AtomicBool;

type BoxError = Box<dyn std::error::Error>;

/// `recv --raw rtp://…`.
pub(super) fn recv_url(a: &RecvArgs, stop: &AtomicBool) -> Result<(), BoxError> {
    let source = RtpUrl::parse_source(&a.url)?;
    let st = &a.raw.stream;
    let mut cfg = RawReceiverConfig::new(source, st.format()?);
    cfg.declared = st.pacing.map_or(SenderType::NarrowGapped, SenderType::from);
    receive(a, cfg, stop)
}

/// Whether an SDP media is RFC 4175 raw video.
pub(super) fn is_raw_media(m: &MediaDescription) -> bool {
    m.encoding.eq_ignore_ascii_case("raw")
}

/// `recv FILE.sdp` of raw video: the format from its fmtp, the sender type from `TP=`.
pub(super) fn recv_sdp(
    a: &RecvArgs,
    source: RtpUrl,
    m: &MediaDescription,
    stop: &AtomicBool,
) -> Result<(), BoxError> {
    let Some(f) = m.fmtp.as_deref() else {
        return Err(
            "the SDP's raw video has no a=fmtp line: it must give sampling, width, height and depth (RFC 4175 §6.1)"
                .into(),
        );
    };
    let parsed = parse_fmtp(f).map_err(|e| format!("SDP: {e}"))?;
    let mut cfg = RawReceiverConfig::new(source, parsed.format);
    cfg.payload_type = Some(m.payload_type);
    let tp = f.split(';').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("tp")
            .then(|| parse_model(v))?
    });
    cfg.declared = a
        .raw
        .stream
        .pacing
        .map(SenderType::from)
        .or(tp)
        .unwrap_or(SenderType::NarrowGapped);
    receive(a, cfg, stop)
}

fn receive(a: &RecvArgs, mut cfg: RawReceiverConfig, stop: &AtomicBool) -> Result<(), BoxError> {
    cfg.duration = a.duration;
    cfg.frames = a.raw.frames;
    if let Some(every) = super::status_every(a) {
        cfg.status_every = every;
    }
    cfg.output = a.output.clone();
    if a.raw.rt == RecvRt::Off {
        cfg.rt_policy = RtPolicy::Other;
    }
    let shown = cfg.source.to_string();
    let format = cfg.format;
    let rx = RawReceiver::open(cfg)?;
    warn_buffer(&rx.buffer());
    // Said once the socket is bound (and the group joined): a script may start sending now.
    eprintln!("metronome: listening on {shown} for raw video {format}");
    let interval = a.interval.is_some();
    let live = LiveLine::new(!interval);
    let mut lines = Intervals::new(a.json);
    let outcome = rx.run(stop, |s| {
        if interval {
            lines.line(s, |d, span| RawRecvInterval {
                frames_complete: d(|s| s.frames_complete),
                frames_partial: d(|s| s.frames_partial),
                frames_lost: d(|s| s.frames_lost),
                packets: d(|s| s.packets),
                bytes: d(|s| s.bytes),
                bitrate_bps: d(|s| s.bytes) as f64 * 8.0 / span,
                rx_overflow: d(|s| s.rx_overflow),
                latency_p99_us: s.latency_p99_us,
            });
        } else {
            live.show(&s.line());
        }
    })?;
    live.finish();
    print_outcome(Output::of(a.json, interval), &outcome, receiver_summary)?;
    Ok(())
}

/// What one uncompressed stream brought over one `--interval`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct RawRecvInterval {
    /// Frames that ended complete, partial (some packets missing) and lost.
    pub frames_complete: u64,
    pub frames_partial: u64,
    pub frames_lost: u64,
    /// RTP packets of the stream.
    pub packets: u64,
    /// Their bytes (RTP, headers included).
    pub bytes: u64,
    /// Their rate over the interval, bit/s.
    pub bitrate_bps: f64,
    /// Datagrams the kernel dropped from the full socket buffer.
    pub rx_overflow: u64,
    /// Capture-to-complete latency of the frames so far (from the start): 99th percentile.
    pub latency_p99_us: Micros,
}

impl Snapshot for RawReceiverStatus {
    fn elapsed(&self) -> std::time::Duration {
        self.elapsed
    }
}

fn receiver_summary(o: &RawReceiverOutcome) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "raw receiver on {} ({}): {:.2} s, ended by {}; SSRC {}",
        o.source,
        o.format,
        o.duration_us.as_secs_f64(),
        o.ended_by,
        o.ssrc.map_or("none".to_string(), |v| format!("{v:08x}"))
    );
    let _ = writeln!(
        s,
        "  frames: {} complete, {} partial, {} lost",
        o.frames_complete, o.frames_partial, o.frames_lost
    );
    if o.frames_without_capture_time > 0 {
        let _ = writeln!(
            s,
            "  {} complete frames carried no capture time (not a Metronome sender): latency unknown for them",
            o.frames_without_capture_time
        );
    }
    let _ = writeln!(
        s,
        "  latency, capture → complete in memory: {}",
        o.latency_us
    );
    let _ = writeln!(s, "  spread, first → last packet: {}", o.spread_us);
    if let Some(c) = &o.conformance {
        let _ = writeln!(
            s,
            "  ST 2110-21 vs {}: verdict {}; Cinst max {} (narrow CMAX {}, wide {}), VRX {}..{} (narrow VRX_FULL {}), {} frames",
            o.declared_model,
            c.verdict.name(),
            c.cinst_max,
            c.narrow.cmax,
            c.wide.cmax,
            c.vrx_min,
            c.vrx_max,
            c.narrow.vrx_full,
            c.frames
        );
    }
    let d = &o.drops;
    let _ = writeln!(
        s,
        "  {} datagrams ({:.0}/s, {:.1} Mbit/s); malformed {}, other SSRC {}, duplicates {}, late {}, truncated {}; socket overflows {}",
        o.packets,
        o.pps,
        o.bitrate_bps / 1e6,
        d.total_malformed,
        d.other_ssrc,
        d.duplicates,
        d.late,
        d.truncated,
        o.rx_overflow
    );
    let _ = writeln!(
        s,
        "  CPU {:.3} s ({:.0} µs a frame); {}; GRO {}; SO_RCVBUF {} of {} bytes",
        o.cpu_us.as_secs_f64(),
        o.cpu_per_frame_us.as_micros_f64(),
        o.realtime,
        if o.gro { "on" } else { "off" },
        o.buffer.accepted,
        o.buffer.wanted
    );
    let _ = writeln!(
        s,
        "  RTCP: {} sender reports heard{}, {} receiver reports sent; RTP packets lost {}, jitter {:.2} ms",
        o.rtcp.sender_reports,
        o.rtcp
            .sender_cname
            .as_deref()
            .map(|c| format!(" (from {c})"))
            .unwrap_or_default(),
        o.rtcp.receiver_reports_sent,
        o.rtcp.packets_lost,
        o.rtcp.jitter_us.as_millis_f64()
    );
    if o.frames_written > 0 || o.frames_not_written > 0 {
        let _ = writeln!(
            s,
            "  output: {} frames written, {} not written",
            o.frames_written, o.frames_not_written
        );
    }
    if let Some(e) = &o.output_error {
        let _ = writeln!(s, "  output failed: {e}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_media::uncompressed::{Depth, Sampling, VideoFormat};
    use metronome_wire::sdp::SessionDescription;

    #[test]
    fn sdp_round_trips_through_the_fmtp_parser() {
        let f = VideoFormat::new(720, 576, Sampling::Ycbcr422, Depth::Eight, 25, 1).unwrap();
        let dest = RtpUrl::parse_destination("rtp://127.0.0.1:5004").unwrap();
        let text = crate::sdp::raw_sdp(&f, SenderType::NarrowGapped, &dest);
        assert!(text.contains("a=rtpmap:96 raw/90000"), "{text}");
        assert!(text.contains("TP=2110TPN"), "{text}");
        let sdp = SessionDescription::parse(&text).unwrap();
        let m = &sdp.media[0];
        assert!(is_raw_media(m));
        assert_eq!(parse_fmtp(m.fmtp.as_deref().unwrap()).unwrap().format, f);
        assert!(!crate::sdp::raw_sdp(&f, SenderType::Burst, &dest).contains("TP="));
    }
}
