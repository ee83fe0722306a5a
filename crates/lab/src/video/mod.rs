//! Real video in the lab: the test pattern, encoded with H.264 and muxed into constant-rate
//! MPEG-TS by `metronome-media`, packetized by the engine's packetizer; which frames each
//! packet carries is noted, with each frame's coded bytes, so that what each viewer saw can be
//! told frame by frame and picture by picture, in both modes.
//!
//! A frame starts at a TS packet of the video PID with `payload_unit_start_indicator` set
//! (ISO/IEC 13818-1 §2.4.3.3: a PES packet, here one access unit, begins in it) and runs to
//! the next such packet. What the screen showed follows `metronome_quality::playout`'s rules
//! (a frame is lost when any of its packets is; the flow's play-out deadline, if any); the
//! pictures are the frames that reached the viewer, decoded by FFmpeg's decoder in order (a
//! frame whose reference was lost is decoded against what the decoder has, as a player does), and
//! compared with the pattern's own pictures: PSNR, SSIM and MOS per frame. The received bytes
//! are the sent bytes (links lose and delay packets, they do not corrupt them), so the coded
//! frames are kept once, at the sender, as Evalvid keeps the sent file.
//!
//! `content.rs` is what the video shows, `judge.rs` what each viewer saw, `series.rs` the
//! per-frame rows, plot series and `frames.csv`.

mod content;
mod judge;
mod series;

pub(crate) use content::pace;
pub use content::{pictures_of, test_source, SCENE_SECS, VIDEO_SHARE};
pub use judge::{playout_of, view, view_flow, FlowVideo, PictureCache, Viewed};
pub use series::{
    frames_csv, rungs_csv, FrameRow, FrameSeries, SentSeries, FRAMES_HEADER, RUNGS_HEADER,
    SERIES_POINTS,
};

use metronome_config::scenario::{VideoContent, VideoDecl};
use metronome_media::decode::VideoCodec;
use metronome_media::frames::{Noted, NotingSource, SentFrames};
use metronome_media::ts_rtp::TsRtp;
use metronome_quality::viewer;
use metronome_session::sender::{PacketizerConfig, RtpSource, SourceError, SourcePacket};
use metronome_time::Timestamp;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// What a video flow sent (which frames each RTP packet carries, each frame's due time, type
/// and coded bytes: see `metronome_media::frames`), where its timeline starts on the run's
/// clock, and the pattern's picture, to render the reference frames from.
#[derive(Debug)]
pub struct FrameMap {
    pub sent: SentFrames,
    pub epoch: Timestamp,
    pub picture: Option<VideoDecl>,
    pub content: VideoContent,
    /// Why the source stopped before its end, if it did (the stream is then shorter).
    pub source_error: Option<String>,
    /// Wall-clock seconds the source spent making the video (rendering, encoding, muxing):
    /// how fast the run was, not a result.
    pub making_s: f64,
    /// Of which encoding a ladder's renditions (or reading them from the cache).
    pub ladder_s: f64,
    /// What decodes it: H.264 for the MPEG-TS test source, the ladder's codec otherwise.
    pub codec: VideoCodec,
    /// The frames' numbers in the order they were sent, where B-frames make it other than
    /// display order (empty: display order).
    pub decode_order: Vec<u32>,
    /// The rung of each GOP of a ladder's video, as its VBR controller chose it.
    pub rungs: Vec<(u32, metronome_cc::VbrDecision)>,
    /// What a noted MPEG-TS source noted, until [`FrameMap::absorb_notes`] takes it.
    pub notes: Option<Arc<Mutex<Noted>>>,
}

impl Default for FrameMap {
    fn default() -> Self {
        FrameMap {
            sent: SentFrames::default(),
            epoch: Timestamp::ZERO,
            picture: None,
            content: VideoContent::Pattern,
            source_error: None,
            making_s: 0.0,
            ladder_s: 0.0,
            codec: VideoCodec::H264,
            decode_order: Vec::new(),
            rungs: Vec::new(),
            notes: None,
        }
    }
}

impl FrameMap {
    /// The frames' numbers in decode order.
    pub fn order(&self) -> Vec<u32> {
        if self.decode_order.is_empty() {
            viewer::display_order(self.sent.coded.len())
        } else {
            self.decode_order.clone()
        }
    }
}

/// A flow's frame map, shared by its source (which notes into it as it makes packets) and the
/// run that reads it afterwards.
pub type SharedFrames = Arc<Mutex<FrameMap>>;

/// The map behind `m` (a source that panicked leaves what it noted).
pub fn lock_frames(m: &SharedFrames) -> MutexGuard<'_, FrameMap> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FrameMap {
    /// Takes what a noted MPEG-TS source noted into the map (after the run: its last packet
    /// and access unit closed).
    pub fn absorb_notes(&mut self) {
        if let Some(notes) = self.notes.take() {
            let mut n = notes.lock().unwrap_or_else(|e| e.into_inner());
            n.finish();
            self.sent = std::mem::take(&mut n.frames);
        }
    }
}

/// A source whose time making packets (rendering, encoding, muxing, payloading) is added to
/// its flow's `making_s`: how fast the run was, not a result.
pub struct Timed<S> {
    pub inner: S,
    pub frames: SharedFrames,
}

impl<S: RtpSource> RtpSource for Timed<S> {
    fn next_packet(&mut self, buf: &mut [u8]) -> Result<Option<SourcePacket>, SourceError> {
        let watch = crate::wall::Stopwatch::start();
        let out = self.inner.next_packet(buf);
        let mut map = lock_frames(&self.frames);
        map.making_s += watch.seconds();
        if let Err(e) = &out {
            map.source_error = Some(format!("the video source stopped: {e}"));
        }
        out
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn nominal_bitrate(&self) -> Option<u64> {
        self.inner.nominal_bitrate()
    }
    fn source_per_wire(&self) -> f64 {
        self.inner.source_per_wire()
    }
    fn rate_range(&self) -> Option<std::ops::RangeInclusive<u64>> {
        self.inner.rate_range()
    }
    fn set_rate(&mut self, rate: u64) -> Result<(), SourceError> {
        self.inner.set_rate(rate)
    }
    fn follow_rate(&mut self, rate: u64) -> Result<(), SourceError> {
        self.inner.follow_rate(rate)
    }
    fn rate_reported(&mut self, rate: u64) {
        self.inner.rate_reported(rate)
    }
    fn is_live(&self) -> bool {
        self.inner.is_live()
    }
    fn next_due(&self) -> Option<Timestamp> {
        self.inner.next_due()
    }
    fn leaves_at_rate(&self) -> bool {
        self.inner.leaves_at_rate()
    }
    fn note_queue(&mut self, packets: usize) {
        self.inner.note_queue(packets)
    }
}

/// The encoded test pattern (see [`test_source`]) as an RTP source from `epoch`, packetized
/// with `pcfg`, every TS packet noted; its frame map.
pub fn test_video(
    v: VideoDecl,
    content: &VideoContent,
    rate_bps: u64,
    duration: Duration,
    gop: Option<u32>,
    pcfg: PacketizerConfig,
    epoch: Timestamp,
) -> Result<(Timed<TsRtp>, SharedFrames), String> {
    let source = test_source(v, content, rate_bps, duration, gop)?;
    let (noting, notes) = NotingSource::new(Box::new(source));
    let noting = noting.with_ts_per_packet(pcfg.ts_per_packet);
    let frames = Arc::new(Mutex::new(FrameMap {
        epoch,
        picture: Some(v),
        content: content.clone(),
        notes: Some(notes),
        ..FrameMap::default()
    }));
    let source = Timed {
        inner: TsRtp::new(Box::new(noting), pcfg, epoch),
        frames: frames.clone(),
    };
    Ok((source, frames))
}
