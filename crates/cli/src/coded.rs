//! `serve --codec`: video sent as Evalvid-RA sends it, over RTP without MPEG-TS. The content is
//! encoded once per quantizer (a ladder, kept in the cache between runs), each GOP leaves at
//! the rung the VBR controller picks from the rate allowed (`--bitrate`, or the rate
//! controller's target with `--cc`), every frame as coded (RFC 6416 MP4V-ES, RFC 6184 H.264),
//! paced over its frame interval, no padding. It is the lab's own source
//! (`metronome_lab::served::ServedFlow`), as emu mode's hosts send it; its SDP carries the
//! codec's configuration (`config=`, `sprop-parameter-sets=`), so that ffplay, VLC and
//! GStreamer play it from the file `--sdp` writes.

use clap::{Args, ValueEnum};
use metronome_config::scenario::{
    CodedVideo, FlowDecl, FlowKind, RtpCc, VideoCodecDecl, VideoContent, VideoDecl,
};
use metronome_lab::model::{Frames, RtpPlan};
use metronome_lab::served::ServedFlow;
use metronome_media::payload::sdp::RtpFormat;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a ladder's stream is without `--duration`.
pub(crate) const DEFAULT_SECS: u64 = 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum CodecArg {
    /// MPEG-4 Part 2 at quantizer scales (seed 002's), RFC 6416
    Mpeg4,
    /// H.264 (x264) at fixed QPs, RFC 6184
    H264,
}

/// `serve`'s options for a ladder's video.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct CodedArgs {
    /// Send video as Evalvid-RA does instead of MPEG-TS: the content encoded once per
    /// quantizer (cached in ~/.cache/metronome/ladders), each GOP at the rung the VBR
    /// controller picks from --bitrate or the --cc target, frames as coded over RTP; --size
    /// and --fps set the picture; write the SDP with --sdp
    #[arg(long, value_enum, conflicts_with_all = ["input", "raw"], help_heading = "Evalvid-RA video")]
    pub codec: Option<CodecArg>,
    /// What the video shows: motion (or motion=seed=N), pattern, a .y4m or .yuv file of the
    /// picture's size (played again from its start if shorter), or FFmpeg lavfi sources
    #[arg(
        long,
        value_name = "CONTENT",
        default_value = "motion",
        requires = "codec",
        help_heading = "Evalvid-RA video"
    )]
    pub content: String,
    /// The ladder's finest and coarsest quantizer, e.g. 2-31 (default: MPEG-4's 2-31,
    /// H.264's 18-42)
    #[arg(long, value_name = "Q1-Q2", value_parser = parse_quantizers, requires = "codec", help_heading = "Evalvid-RA video")]
    pub quantizers: Option<(u32, u32)>,
    /// Frames per GOP (a key frame every GOP; the rung changes only there); default: one
    /// second's worth
    #[arg(long, requires = "codec", help_heading = "Evalvid-RA video")]
    pub gop: Option<u32>,
    /// B-frames between references
    #[arg(
        long,
        default_value_t = 0,
        requires = "codec",
        help_heading = "Evalvid-RA video"
    )]
    pub b_frames: u32,
}

/// `A-B` (or `A,B`), the finer first.
pub(crate) fn parse_quantizers(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("'{s}' is not a quantizer range; write it like 2-31");
    let (a, b) = s.split_once(['-', ',']).ok_or_else(bad)?;
    let (a, b): (u32, u32) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if a > b {
        return Err(format!("'{s}': give the finer (smaller) quantizer first"));
    }
    Ok((a, b))
}

/// The stream `serve --codec` sends: the lab's flow, its SDP's format, and where its frames
/// will be noted.
pub(crate) struct CodedStream {
    pub source: ServedFlow,
    pub format: RtpFormat,
    pub frames: Arc<Mutex<Option<Frames>>>,
}

/// What the options ask for, as one of the lab's flows: `rate_bps` the most it may send (bit/s
/// on the wire), starting at `start_bps`, for `duration`; the ladder is encoded (or read from
/// the cache) now.
pub(crate) fn open(
    c: &CodedArgs,
    codec: CodecArg,
    picture: (u32, u32, u32),
    cc: RtpCc,
    (start_bps, rate_bps): (u64, u64),
    mtu: Option<u32>,
    duration: Duration,
) -> Result<CodedStream, String> {
    let codec = match codec {
        CodecArg::Mpeg4 => VideoCodecDecl::Mpeg4,
        CodecArg::H264 => VideoCodecDecl::H264,
    };
    let quantizers = c.quantizers.unwrap_or(codec.default_ladder());
    let (lo, hi) = codec.quantizer_range();
    if quantizers.0 < lo || quantizers.1 > hi {
        return Err(format!(
            "--quantizers {}-{}: {} has quantizers {lo}-{hi}",
            quantizers.0,
            quantizers.1,
            codec.name()
        ));
    }
    let content = VideoContent::parse(std::slice::from_ref(&c.content))
        .map_err(|e| format!("--content: {e}"))?;
    let (width, height, fps) = picture;
    let f = FlowDecl {
        name: "video".into(),
        from: "server".into(),
        to: vec!["viewer".into()],
        start: Duration::ZERO,
        duration,
        membership: Vec::new(),
        kind: FlowKind::Rtp {
            rate_bps,
            video: Some(VideoDecl { width, height, fps }),
            playout_deadline: None,
            content,
            cc,
            start_bps: Some(start_bps),
            mtu,
            gop: c.gop,
            coded: Some(CodedVideo {
                codec,
                quantizers,
                b_frames: c.b_frames,
            }),
            // The sender's RTCP follows `serve`'s own settings; this is the scenario's default.
            rtcp_interval: metronome_config::scenario::RTCP_MIN_INTERVAL,
            repair: metronome_config::scenario::Repair::None,
        },
    };
    let dir = std::env::current_dir().ok();
    let plan = RtpPlan::of(&f, dir.as_deref()).ok_or("not an RTP flow")?;
    let mut source = ServedFlow::new(&f, plan);
    eprintln!("metronome: the ladder: encoding it, or reading it from the cache…");
    let format = source
        .rtp_format()?
        .ok_or("the stream has no coded video to describe")?;
    let frames = source.frames();
    Ok(CodedStream {
        source,
        format,
        frames,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantizer_ranges() {
        assert_eq!(parse_quantizers("2-31"), Ok((2, 31)));
        assert_eq!(parse_quantizers("4,8"), Ok((4, 8)));
        assert!(parse_quantizers("8-4").unwrap_err().contains("finer"));
        assert!(parse_quantizers("fine").is_err());
    }
}
