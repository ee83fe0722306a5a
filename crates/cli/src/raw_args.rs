//! The options of uncompressed video (RFC 4175) for `serve --raw`, `recv --raw` and `sdp --raw`,
//! and their parsers.

use crate::args::{parse_duration, parse_size};
use clap::{Args, ValueEnum};
use metronome_media::uncompressed::{Depth, Sampling, VideoFormat};
use metronome_sched::SenderType;
use metronome_session::rfc4175::MAX_PAYLOAD_LIMIT;
use std::time::Duration;

type BoxError = Box<dyn std::error::Error>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SamplingArg {
    /// YCbCr-4:2:2
    #[value(name = "422")]
    S422,
    /// YCbCr-4:2:0 (8-bit)
    #[value(name = "420")]
    S420,
    /// RGB (8-bit)
    Rgb,
}

impl From<SamplingArg> for Sampling {
    fn from(s: SamplingArg) -> Sampling {
        match s {
            SamplingArg::S422 => Sampling::Ycbcr422,
            SamplingArg::S420 => Sampling::Ycbcr420,
            SamplingArg::Rgb => Sampling::Rgb,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PacingArg {
    /// The whole frame at its epoch, as fast as the link takes it (GStreamer's udpsink)
    Burst,
    /// ST 2110-21 type N: one packet every TRS over the active part of the frame period
    NarrowGapped,
    /// ST 2110-21 type NL: one packet every TRS over the whole frame period
    NarrowLinear,
    /// ST 2110-21 type W: small groups of packets back to back
    Wide,
}

impl From<PacingArg> for SenderType {
    fn from(p: PacingArg) -> SenderType {
        match p {
            PacingArg::Burst => SenderType::Burst,
            PacingArg::NarrowGapped => SenderType::NarrowGapped,
            PacingArg::NarrowLinear => SenderType::NarrowLinear,
            PacingArg::Wide => SenderType::Wide,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum RawFormatArg {
    /// Planar 4:2:0 8-bit (ffmpeg's yuv420p)
    I420,
    /// Packed 4:2:2 8-bit (ffmpeg's uyvy422)
    Uyvy,
    /// Packed 4:2:2 10-bit (ffmpeg's v210)
    V210,
}

fn parse_depth(s: &str) -> Result<Depth, String> {
    s.trim()
        .parse::<u32>()
        .ok()
        .and_then(Depth::from_bits)
        .ok_or_else(|| format!("'{s}' is not a supported depth: 8 or 10"))
}

/// `N` or `N/D` frames per second.
fn parse_fps(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("'{s}' is not a frame rate; write 25 or 30000/1001");
    let (n, d) = s.split_once('/').unwrap_or((s, "1"));
    match (n.trim().parse::<u32>(), d.trim().parse::<u32>()) {
        (Ok(n), Ok(d)) if n > 0 && d > 0 => Ok((n, d)),
        _ => Err(bad()),
    }
}

fn parse_packet_size(s: &str) -> Result<usize, String> {
    let v: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of bytes"))?;
    if !(64..=MAX_PAYLOAD_LIMIT).contains(&v) {
        return Err(format!(
            "{v} bytes: the RTP payload must be 64 to {MAX_PAYLOAD_LIMIT} bytes (1428 fits a \
             1500-byte MTU; larger datagrams are fragmented by the kernel)"
        ));
    }
    Ok(v)
}

/// `serve --raw` options (the source's size, rate, input and loop come from `SourceArgs`).
#[derive(Args, Clone, Debug)]
pub(crate) struct RawServeArgs {
    /// Send uncompressed video (RFC 4175): the test pattern at --size and --fps, or -i FILE
    /// (.y4m; or headerless .yuv/.uyvy/.v210, or any name with --raw-format)
    #[arg(long, help_heading = "Raw video (--raw)")]
    pub raw: bool,
    /// Colour sampling of the test pattern (default 422; a file gives its own)
    #[arg(long, value_enum, help_heading = "Raw video (--raw)")]
    pub sampling: Option<SamplingArg>,
    /// Bits per sample of the test pattern: 8 or 10 (10 with 422 only; default 8)
    #[arg(long, value_parser = parse_depth, help_heading = "Raw video (--raw)")]
    pub depth: Option<Depth>,
    /// How each frame's packets are spread: burst, or an ST 2110-21 sender type
    #[arg(
        long,
        value_enum,
        default_value = "narrow-gapped",
        help_heading = "Raw video (--raw)"
    )]
    pub pacing: PacingArg,
    /// RTP payload bytes per packet (1428 fits a 1500-byte MTU; up to 65471, which the kernel
    /// fragments)
    #[arg(long, value_parser = parse_packet_size, default_value = "1428", help_heading = "Raw video (--raw)")]
    pub packet_size: usize,
    /// Pixel format of a headerless input file (default: from its extension)
    #[arg(long, value_enum, help_heading = "Raw video (--raw)")]
    pub raw_format: Option<RawFormatArg>,
    /// Stop after this many frames
    #[arg(long, help_heading = "Raw video (--raw)")]
    pub frames: Option<u64>,
    /// Packets due within this window go out in one GSO send call
    #[arg(long, value_parser = parse_duration, default_value = "20us", help_heading = "Raw video (--raw)")]
    pub batch_window: Duration,
    /// A frame whose send calls start later than this after they were due counts as late
    #[arg(long, value_parser = parse_duration, default_value = "1ms", help_heading = "Raw video (--raw)")]
    pub late_threshold: Duration,
    /// Send with sendmmsg instead of UDP GSO
    #[arg(long, help_heading = "Raw video (--raw)")]
    pub no_gso: bool,
}

/// What a raw stream is, for `recv --raw` and `sdp --raw`.
#[derive(Args, Clone, Debug)]
pub(crate) struct RawStreamArgs {
    /// Uncompressed video (RFC 4175) of --size, --fps, --sampling and --depth (an SDP file with
    /// `raw/90000` says all of it)
    #[arg(long, help_heading = "Raw video (--raw)")]
    pub raw: bool,
    /// Frame size (default 640x360, as `serve --raw`)
    #[arg(long, value_parser = parse_size, help_heading = "Raw video (--raw)")]
    pub size: Option<(u32, u32)>,
    /// Frame rate, N or N/D (default 30, as `serve --raw`)
    #[arg(long, value_parser = parse_fps, help_heading = "Raw video (--raw)")]
    pub fps: Option<(u32, u32)>,
    /// Colour sampling (default 422)
    #[arg(long, value_enum, help_heading = "Raw video (--raw)")]
    pub sampling: Option<SamplingArg>,
    /// Bits per sample: 8 or 10 (default 8)
    #[arg(long, value_parser = parse_depth, help_heading = "Raw video (--raw)")]
    pub depth: Option<Depth>,
    /// The sender type: recv judges ST 2110-21 conformance against it (default: the SDP's TP=,
    /// else narrow-gapped); sdp writes it as TP= (default narrow-gapped)
    #[arg(long, value_enum, help_heading = "Raw video (--raw)")]
    pub pacing: Option<PacingArg>,
}

impl RawStreamArgs {
    pub(crate) fn format(&self) -> Result<VideoFormat, BoxError> {
        let (w, h) = self.size.unwrap_or((640, 360));
        let (n, d) = self.fps.unwrap_or((30, 1));
        let sampling = self.sampling.map_or(Sampling::Ycbcr422, Sampling::from);
        Ok(VideoFormat::new(
            w,
            h,
            sampling,
            self.depth.unwrap_or(Depth::Eight),
            n,
            d,
        )?)
    }
}

/// `recv --raw` options.
#[derive(Args, Clone, Debug)]
pub(crate) struct RawRecvArgs {
    #[command(flatten)]
    pub stream: RawStreamArgs,
    /// Stop once this many frames have ended (complete, partial or lost)
    #[arg(long, help_heading = "Raw video (--raw)")]
    pub frames: Option<u64>,
    /// Scheduling of the receiving thread: SCHED_FIFO (priority 70, below the pacers) where
    /// permitted, or an ordinary thread
    #[arg(
        long,
        value_enum,
        default_value = "auto",
        help_heading = "Raw video (--raw)"
    )]
    pub rt: RecvRt,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum RecvRt {
    Auto,
    Off,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_parsers() {
        assert_eq!(parse_fps("30000/1001"), Ok((30000, 1001)));
        assert_eq!(parse_fps("25"), Ok((25, 1)));
        assert!(parse_fps("0").is_err());
        assert_eq!(parse_depth("10"), Ok(Depth::Ten));
        assert!(parse_depth("12").is_err());
        assert!(parse_packet_size("65000").is_ok());
        assert!(parse_packet_size("70000").is_err());
    }
}
