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

use metronome_media::decode::{VideoCodec, VideoDecoder};
use metronome_media::frames::{Noted, NotingSource, SentFrames};
use metronome_media::testsrc::{TestSource, TestSourceConfig};
use metronome_media::ts_rtp::TsRtp;
use metronome_media::{Frame, Pictures, TestPattern};
use metronome_netsim::sim::flows::{FlowReport, FrameFigures, PictureFigures};
use metronome_quality::playout::{reconstruct, FrameType, Playout, SentFrame};
use metronome_quality::trace::PacketRecord;
use metronome_quality::{compare, mos, psnr, viewer, Chroma, Picture};
use metronome_session::sender::{PacketizerConfig, RtpSource, SourceError, SourcePacket};
use metronome_spec::scenario::{FlowDecl, FlowKind, ScenePace, VideoContent, VideoDecl};
use metronome_time::{Bitrate, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Seconds per scene of the pattern the lab sends (static, moderate, high motion).
pub const SCENE_SECS: u32 = 4;

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

/// The video's share of the mux rate in the lab's test sources.
pub const VIDEO_SHARE: f64 = 0.7;

/// The test source the lab sends for `v`: `duration` of `content`, H.264 at 70 % of
/// `rate_bps`, muxed at `rate_bps`, an IDR every `gop` frames (one second's worth if `None`).
pub fn test_source(
    v: VideoDecl,
    content: &VideoContent,
    rate_bps: u64,
    duration: Duration,
    gop: Option<u32>,
) -> Result<TestSource, String> {
    let cfg = TestSourceConfig {
        width: v.width,
        height: v.height,
        fps: v.fps,
        video_bitrate: u32::try_from((rate_bps as f64 * VIDEO_SHARE) as u64).unwrap_or(u32::MAX),
        mux_rate: rate_bps,
        duration: Some(duration),
        scene_secs: SCENE_SECS,
        idr_interval: gop.unwrap_or(0),
        ..TestSourceConfig::default()
    };
    let frames = (duration.as_nanos() * u128::from(v.fps)).div_ceil(1_000_000_000) as u64;
    let pictures = pictures_of(v, content, frames)?;
    TestSource::with_pictures(cfg, pictures).map_err(|e| format!("the test video: {e}"))
}

/// The pictures of `content` at `v`, `frames` of them.
pub fn pictures_of(
    v: VideoDecl,
    content: &VideoContent,
    frames: u64,
) -> Result<Box<dyn Pictures>, String> {
    Ok(match content {
        VideoContent::Pattern => Box::new(
            TestPattern::new(v.fps, SCENE_SECS).map_err(|e| format!("the test video: {e}"))?,
        ),
        VideoContent::Motion(seed) => {
            Box::new(metronome_media::motion::Motion::new(v.fps, *seed).map_err(|e| e.to_string())?)
        }
        VideoContent::File(path) => Box::new(
            metronome_media::clip::Clip::open(path, v.width, v.height, v.fps)
                .map_err(|e| e.to_string())?,
        ),
        VideoContent::Lavfi(sources) => Box::new(crate::lavfi::Lavfi::spawn(
            sources, v.width, v.height, v.fps, SCENE_SECS, frames,
        )?),
        VideoContent::Scenes(scenes) => {
            let scenes: Vec<_> = scenes.iter().map(|(p, n)| (pace(*p), *n)).collect();
            Box::new(
                metronome_media::motion::Scenes::new(v.fps, 1, &scenes)
                    .map_err(|e| e.to_string())?,
            )
        }
    })
}

/// The generator's pace of a declared scene.
pub(crate) fn pace(p: ScenePace) -> metronome_media::motion::Pace {
    use metronome_media::motion::Pace;
    match p {
        ScenePace::Still => Pace::STILL,
        ScenePace::Calm => Pace::CALM,
        ScenePace::Busy => Pace::BUSY,
        ScenePace::Fast => Pace::FAST,
        ScenePace::Drive => Pace::DRIVE,
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
    fn follow_rate(&mut self, wire: Bitrate) {
        self.inner.follow_rate(wire)
    }
    fn is_live(&self) -> bool {
        self.inner.is_live()
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

/// One frame as a viewer saw it: its fate, and the picture its display slot showed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameRow {
    pub frame: u32,
    pub kind: FrameType,
    /// The frame the slot showed (`None`: nothing yet).
    pub shown: Option<u32>,
    pub arrived: bool,
    pub delay_ns: Option<u64>,
    pub cumulative_jitter_ns: Option<i64>,
    pub missed_deadline: bool,
    /// The slot's picture against the source's frame (`None` without pictures).
    pub psnr_y_db: Option<f64>,
    pub psnr_yuv_db: Option<f64>,
    pub ssim: Option<f64>,
    pub mos: Option<u8>,
}

/// A video receiver's frames, thinned for plots: at most [`SERIES_POINTS`] points, each over
/// `step` consecutive frames.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FrameSeries {
    pub flow: String,
    pub receiver: String,
    /// The first frame's due time on the run's clock, ns, and the time between frames, ns.
    #[serde(rename = "start_us", with = "metronome_time::units::ns_as_us")]
    pub start_ns: u64,
    #[serde(rename = "frame_interval_us", with = "metronome_time::units::ns_as_us")]
    pub frame_interval_ns: u64,
    /// Frames per point.
    pub step: u32,
    /// The lowest PSNR of Y in each point's frames, dB (empty without pictures).
    pub psnr_y_db: Vec<f64>,
    /// The largest delay among each point's frames that arrived, ns (`None`: none arrived).
    #[serde(rename = "delay_us", with = "metronome_time::units::ns_as_us")]
    pub delay_ns: Vec<Option<u64>>,
    /// The largest cumulative jitter among each point's frames that arrived, ns: a thinned
    /// plot still shows every peak (an I-frame's), up to the flow's maximum.
    #[serde(
        rename = "cumulative_jitter_us",
        with = "metronome_time::units::ns_as_us"
    )]
    pub cumulative_jitter_ns: Vec<Option<i64>>,
    /// The smallest, ns: with the largest, each point's range.
    #[serde(
        default,
        rename = "cumulative_jitter_min_us",
        with = "metronome_time::units::ns_as_us"
    )]
    pub cumulative_jitter_min_ns: Vec<Option<i64>>,
}

/// A video flow as its sender sent it, thinned for plots: its coded frames' sizes and, for a
/// ladder's video, each GOP's rung.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SentSeries {
    pub flow: String,
    /// Each point's first frame's send time on the run's clock, ns.
    #[serde(rename = "time_us", with = "metronome_time::units::ns_as_us")]
    pub time_ns: Vec<u64>,
    /// Frames per point.
    pub step: u32,
    /// The mean and the largest coded size of each point's frames, bytes.
    pub frame_bytes_mean: Vec<f64>,
    pub frame_bytes_max: Vec<u32>,
    /// A ladder's video: each GOP's start on the run's clock (ns) and the quantizer of the rung
    /// its VBR controller chose, where the rung changed.
    #[serde(
        default,
        rename = "rung_start_us",
        with = "metronome_time::units::ns_as_us"
    )]
    pub rung_start_ns: Vec<u64>,
    #[serde(default)]
    pub rung_quantizer: Vec<u32>,
}

impl SentSeries {
    /// The series of `frames` (as sent) and of a ladder's `rungs` (`(GOP, quantizer)`, GOPs
    /// `gop_ns` apart from `epoch_ns`).
    pub fn of(
        flow: &str,
        frames: &[SentFrame],
        rungs: &[(u32, u32)],
        epoch_ns: u64,
        gop_ns: u64,
    ) -> SentSeries {
        let step = frames.len().div_ceil(SERIES_POINTS).max(1);
        let mut s = SentSeries {
            flow: flow.to_string(),
            step: step as u32,
            ..SentSeries::default()
        };
        for chunk in frames.chunks(step) {
            s.time_ns.push(chunk[0].send_ns);
            let total: u64 = chunk.iter().map(|f| u64::from(f.size_bytes)).sum();
            s.frame_bytes_mean.push(total as f64 / chunk.len() as f64);
            s.frame_bytes_max
                .push(chunk.iter().map(|f| f.size_bytes).max().unwrap_or(0));
        }
        for &(g, q) in rungs {
            s.rung_start_ns.push(epoch_ns + u64::from(g) * gop_ns);
            s.rung_quantizer.push(q);
        }
        s
    }
}

/// Points a [`FrameSeries`] keeps at most.
pub const SERIES_POINTS: usize = 600;

/// One receiver's frames: the summary, every frame's row, and the series for plots.
pub struct Viewed {
    pub figures: FrameFigures,
    pub rows: Vec<FrameRow>,
    pub series: FrameSeries,
}

/// What a video flow leaves in its point's directory, and its series for the report.
#[derive(Debug, Default)]
pub struct FlowVideo {
    pub series: Vec<FrameSeries>,
    /// The flow as sent (frame sizes, rungs), for the report's plots.
    pub sent: Option<SentSeries>,
    /// `(file name, contents)`: `FLOW.frames.csv` (every receiver's frames, [`FRAMES_HEADER`]),
    /// `FLOW.sent.csv` (the sender's frame trace) and `FLOW.RECEIVER.packets.csv` (what each
    /// receiver got), in `metronome_quality::trace`'s formats; for a ladder's video
    /// `FLOW.rungs.csv` (each GOP's rung, `crate::ladder::RUNGS_HEADER`).
    pub files: Vec<(String, Vec<u8>)>,
    /// What went wrong with the flow's video, in words.
    pub warnings: Vec<String>,
}

/// The play-out of a flow's viewers.
pub fn playout_of(f: &FlowDecl) -> Playout {
    match f.kind {
        FlowKind::Rtp {
            playout_deadline, ..
        } => Playout {
            deadline_ns: playout_deadline.map(|d| d.as_nanos() as u64),
            ..Playout::default()
        },
        _ => Playout::default(),
    }
}

/// Every receiver of video flow `f` (its report's receivers, in order, and their packets'
/// arrivals): frame figures into the report, series and files for the point.
pub fn view_flow(
    f: &FlowDecl,
    report: &mut FlowReport,
    map: &FrameMap,
    arrivals: &[&[Timestamp]],
) -> FlowVideo {
    let playout = playout_of(f);
    let mut out = FlowVideo::default();
    if let Some(e) = &map.source_error {
        out.warnings.push(format!("flow '{}': {e}", f.name));
    }
    let mut rows_csv = String::from(FRAMES_HEADER);
    rows_csv.push('\n');
    let sent = sent_frames(map);
    let mut trace = Vec::new();
    let _ = metronome_quality::trace::write_frames(&mut trace, &sent);
    out.files.push((format!("{}.sent.csv", f.name), trace));
    let fps = map.picture.map_or(25, |v| v.fps).max(1);
    let gop = match f.kind {
        FlowKind::Rtp { gop, .. } => gop.unwrap_or(fps),
        _ => fps,
    };
    if !map.rungs.is_empty() {
        let csv = crate::ladder::rungs_csv(map, gop, fps);
        out.files
            .push((format!("{}.rungs.csv", f.name), csv.into_bytes()));
    }
    let rungs: Vec<(u32, u32)> = map.rungs.iter().map(|(g, d)| (*g, d.quantizer)).collect();
    let gop_ns = u64::from(gop) * 1_000_000_000 / u64::from(fps);
    out.sent = Some(SentSeries::of(
        &f.name,
        &sent,
        &rungs,
        map.epoch.as_nanos(),
        gop_ns,
    ));
    let mut cache = PictureCache::default();
    for (rx, got) in report.receivers.iter_mut().zip(arrivals) {
        let v = view(map, got, playout, &mut cache);
        rx.frames = Some(v.figures);
        frames_csv(&mut rows_csv, &f.name, &rx.node, &v.rows);
        out.series.push(FrameSeries {
            flow: f.name.clone(),
            receiver: rx.node.clone(),
            ..v.series
        });
        let packets: Vec<PacketRecord> = got
            .iter()
            .enumerate()
            .filter(|(_, t)| **t != Timestamp::MAX)
            .map(|(k, t)| PacketRecord {
                packet: k as u64,
                time_ns: t.as_nanos(),
                size_bytes: map.sent.payload_bytes.get(k).copied().unwrap_or(0),
            })
            .collect();
        let mut trace = Vec::new();
        let _ = metronome_quality::trace::write_packets(&mut trace, &packets);
        out.files
            .push((format!("{}.{}.packets.csv", f.name, rx.node), trace));
    }
    out.files
        .push((format!("{}.frames.csv", f.name), rows_csv.into_bytes()));
    out
}

/// The frames as sent: type, size, packets, send time on the run's clock.
fn sent_frames(map: &FrameMap) -> Vec<SentFrame> {
    map.sent.trace(map.epoch.as_nanos(), 0)
}

/// What one receiver saw, from its packets' arrival times (by packet number,
/// `Timestamp::MAX` or missing: lost), played out with `playout`.
pub fn view(
    map: &FrameMap,
    arrivals: &[Timestamp],
    playout: Playout,
    cache: &mut PictureCache,
) -> Viewed {
    let n = map.sent.frame_due.len();
    let sent = sent_frames(map);
    let got: Vec<(u64, u64)> = arrivals
        .iter()
        .enumerate()
        .filter(|(_, t)| **t != Timestamp::MAX)
        .map(|(k, t)| (k as u64, t.as_nanos()))
        .collect();
    let r = reconstruct(&sent, &got, playout);
    let mut rows: Vec<FrameRow> = r
        .frames
        .iter()
        .enumerate()
        .map(|(k, f)| FrameRow {
            frame: k as u32,
            kind: f.kind,
            shown: r.slots.get(k).copied().flatten(),
            arrived: f.arrived,
            delay_ns: f.delay_ns,
            cumulative_jitter_ns: f.cumulative_jitter_ns,
            missed_deadline: f.missed_deadline,
            psnr_y_db: None,
            psnr_yuv_db: None,
            ssim: None,
            mos: None,
        })
        .collect();
    let delay = r.shown_delay();
    let by_type = |t: FrameType| r.loss_by_type[t as usize].lost;
    let mut figures = FrameFigures {
        frames: n as u64,
        lost: r.frames_lost,
        lost_percent: if n == 0 {
            0.0
        } else {
            100.0 * r.frames_lost as f64 / n as f64
        },
        lost_i: by_type(FrameType::I),
        lost_p: by_type(FrameType::P),
        missed_deadline: r.missed_deadline,
        mean_delay_ns: delay.mean_ns,
        p99_delay_ns: delay.p99_ns,
        max_delay_ns: delay.max_ns,
        max_cumulative_jitter_ns: r.max_cumulative_jitter_ns(),
        pictures: None,
    };
    if let Some(v) = map.picture.filter(|_| !map.sent.coded.is_empty()) {
        if let Some((mut p, slots)) = pictures_cached(map, v, &sent, &r, playout, cache) {
            // MIV (Evalvid's): against the MOS of the video as sent, every frame shown.
            let every: Vec<(u64, u64)> = sent
                .iter()
                .flat_map(|f| f.packets.iter().map(|k| (*k, f.send_ns)))
                .collect();
            let lossless = reconstruct(&sent, &every, Playout::default());
            let as_sent = pictures_cached(map, v, &sent, &lossless, Playout::default(), cache);
            if let Some((_, reference)) = as_sent {
                let mos = |s: &SlotFigures| s.iter().map(|q| q.3).collect::<Vec<u8>>();
                let miv = mos::miv(&mos(&slots), &mos(&reference), mos::MIV_WINDOW);
                p.miv_max_percent = miv.iter().copied().fold(0.0, f64::max);
                p.miv_mean_percent = miv.iter().sum::<f64>() / miv.len().max(1) as f64;
            }
            figures.pictures = Some(p);
            for (row, q) in rows.iter_mut().zip(slots.iter()) {
                row.psnr_y_db = Some(q.0);
                row.psnr_yuv_db = Some(q.1);
                row.ssim = Some(q.2);
                row.mos = Some(q.3);
            }
        }
    }
    let series = series(map, &rows);
    Viewed {
        figures,
        rows,
        series,
    }
}

/// Each slot's picture against the source's frame: PSNR of Y and of YUV (dB), SSIM, MOS.
type SlotFigures = Vec<(f64, f64, f64, u8)>;

/// What decides a viewer's pictures: when each frame reached its decoder (the slot it was
/// decoded for), and which frame each slot showed.
type ViewKey = (Vec<Option<usize>>, Vec<Option<u32>>);

/// Receivers whose decoder got the same frames for the same slots, and whose slots showed the
/// same frames, saw the same pictures: they are decoded and judged once (in a crowd behind one
/// bottleneck, most viewers lose the same packets).
#[derive(Default)]
pub struct PictureCache {
    seen: HashMap<ViewKey, (PictureFigures, Rc<SlotFigures>)>,
    /// Receivers whose pictures came from the cache.
    pub hits: u64,
}

/// The pictures receiver `r` saw, from the cache or decoded and compared now.
fn pictures_cached(
    map: &FrameMap,
    v: VideoDecl,
    sent: &[SentFrame],
    r: &metronome_quality::playout::Reconstruction,
    playout: Playout,
    cache: &mut PictureCache,
) -> Option<(PictureFigures, Rc<SlotFigures>)> {
    let order = map.order();
    let key = (
        viewer::decoder_input(sent, r, playout, &order),
        r.slots.clone(),
    );
    if let Some(hit) = cache.seen.get(&key) {
        cache.hits += 1;
        return Some(hit.clone());
    }
    let got = pictures(map, v, sent, r, playout)?;
    let got = (got.0, Rc::new(got.1));
    cache.seen.insert(key, got.clone());
    Some(got)
}

/// Decodes what reached the viewer and compares every slot's picture with the source's
/// frame. `None` if the decoder cannot be made.
fn pictures(
    map: &FrameMap,
    v: VideoDecl,
    sent: &[SentFrame],
    r: &metronome_quality::playout::Reconstruction,
    playout: Playout,
) -> Option<(PictureFigures, SlotFigures)> {
    let mut decoder = VideoDecoder::new(map.codec, None).ok()?;
    let order = map.order();
    let mut source = pictures_of(v, &map.content, r.slots.len() as u64).ok()?;
    let mut frame = Frame::new(v.width, v.height).ok()?;
    let mut failed = false;
    let (w, h) = (v.width as usize, v.height as usize);
    let blank = Picture::black(w, h, Chroma::C420);
    let mut reference = blank.clone();
    let mut totals = psnr::Totals::default();
    let share = psnr::plane_share(&blank);
    let mut slots = Vec::with_capacity(r.slots.len());
    let mut ssim_sum = 0.0;
    let mut wrong_size = 0u64;
    let stats = viewer::play(
        sent,
        r,
        playout,
        &map.sent.coded,
        &order,
        &mut decoder,
        &blank,
        |j, shown| {
            if failed || source.picture(j as u64, &mut frame).is_err() {
                failed = true;
                return;
            }
            frame.copy_to(&mut reference);
            let q = if shown.same_format(&reference) {
                compare::frame(&reference, shown, j as u64)
            } else {
                // A picture of another size is nothing like the source: as black.
                wrong_size += 1;
                compare::frame(&reference, &blank, j as u64)
            };
            totals.add(&q.psnr, share);
            ssim_sum += q.ssim.all;
            slots.push((q.psnr.y_db, q.psnr.yuv_db, q.ssim.all, q.mos));
        },
    );
    if failed {
        // The reference pictures could not be made again: no figures rather than wrong ones.
        return None;
    }
    let mos_all: Vec<u8> = slots.iter().map(|s| s.3).collect();
    let n = mos_all.len().max(1) as f64;
    let mean = totals.mean();
    let figures = PictureFigures {
        psnr_y_db: mean.y_db,
        psnr_yuv_db: mean.yuv_db,
        ssim: ssim_sum / n,
        mos: mos_all.iter().map(|m| f64::from(*m)).sum::<f64>() / n,
        mos_frames: mos::distribution(&mos_all),
        undecodable: stats.undecodable + wrong_size,
        blank_frames: stats.blank_slots,
        // Against the video as sent: filled in by the caller.
        miv_mean_percent: 0.0,
        miv_max_percent: 0.0,
    };
    Some((figures, slots))
}

fn series(map: &FrameMap, rows: &[FrameRow]) -> FrameSeries {
    let step = rows.len().div_ceil(SERIES_POINTS).max(1);
    let fps = map.picture.map_or(30, |v| v.fps).max(1);
    let mut s = FrameSeries {
        start_ns: map
            .sent
            .frame_due
            .first()
            .map_or(0, |d| (map.epoch + *d).as_nanos()),
        frame_interval_ns: 1_000_000_000 / fps as u64,
        step: step as u32,
        ..FrameSeries::default()
    };
    for chunk in rows.chunks(step) {
        if chunk.iter().any(|r| r.psnr_y_db.is_some()) {
            s.psnr_y_db.push(
                chunk
                    .iter()
                    .filter_map(|r| r.psnr_y_db)
                    .fold(f64::INFINITY, f64::min),
            );
        }
        s.delay_ns
            .push(chunk.iter().filter_map(|r| r.delay_ns).max());
        let cj = || chunk.iter().filter_map(|r| r.cumulative_jitter_ns);
        s.cumulative_jitter_ns.push(cj().max());
        s.cumulative_jitter_min_ns.push(cj().min());
    }
    s
}

/// `frames.csv`: one row per video flow, receiver and frame.
pub const FRAMES_HEADER: &str = "flow,receiver,frame,type,shown_frame,arrived,delay_ns,cumulative_jitter_ns,missed_deadline,psnr_y_db,psnr_yuv_db,ssim,mos";

/// Appends `rows` of `flow` at `receiver` to a `frames.csv` text.
pub fn frames_csv(out: &mut String, flow: &str, receiver: &str, rows: &[FrameRow]) {
    use std::fmt::Write as _;
    let opt = |v: Option<String>| v.unwrap_or_default();
    for r in rows {
        let _ = writeln!(
            out,
            "{flow},{receiver},{},{},{},{},{},{},{},{},{},{},{}",
            r.frame,
            r.kind.letter(),
            opt(r.shown.map(|k| k.to_string())),
            u8::from(r.arrived),
            opt(r.delay_ns.map(|d| d.to_string())),
            opt(r.cumulative_jitter_ns.map(|d| d.to_string())),
            u8::from(r.missed_deadline),
            opt(r.psnr_y_db.map(|d| format!("{d:.3}"))),
            opt(r.psnr_yuv_db.map(|d| format!("{d:.3}"))),
            opt(r.ssim.map(|d| format!("{d:.6}"))),
            opt(r.mos.map(|d| d.to_string())),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_media::frames::FrameNoter;
    use metronome_media::TsSource;

    #[test]
    fn the_sent_series_keeps_every_frame_size_and_rung_until_it_must_thin() {
        let frame = |k: u64, size: u32| SentFrame {
            kind: FrameType::Other,
            size_bytes: size,
            packets: Vec::new(),
            send_ns: k * 40_000_000,
        };
        // 25 frames: every one kept; GOPs of 12 frames (480 ms) from 1 s.
        let few: Vec<SentFrame> = (0..25).map(|k| frame(k, 100 + k as u32)).collect();
        let s = SentSeries::of(
            "v",
            &few,
            &[(0, 8), (1, 4), (2, 4)],
            1_000_000_000,
            480_000_000,
        );
        assert_eq!(s.step, 1);
        assert_eq!(s.frame_bytes_mean[24], 124.0);
        assert_eq!(s.time_ns[24], 24 * 40_000_000);
        assert_eq!(
            s.rung_start_ns,
            [1_000_000_000, 1_480_000_000, 1_960_000_000]
        );
        assert_eq!(s.rung_quantizer, [8, 4, 4]);
        // Past SERIES_POINTS frames, points of two frames: their mean and largest size.
        let many: Vec<SentFrame> = (0..(SERIES_POINTS as u64 + 2))
            .map(|k| frame(k, if k % 2 == 0 { 1000 } else { 200 }))
            .collect();
        let s = SentSeries::of("v", &many, &[], 0, 1);
        assert_eq!(s.step, 2);
        assert_eq!(s.time_ns.len(), SERIES_POINTS / 2 + 1);
        assert!(s.frame_bytes_mean.iter().all(|m| *m == 600.0));
        assert!(s.frame_bytes_max.iter().all(|m| *m == 1000));
        assert!(s.rung_quantizer.is_empty());
    }

    /// Thinned for plots, each point keeps its frames' extremes: a peak of cumulative jitter
    /// on any frame (an I-frame's, say) is in the series, not only each point's last frame.
    #[test]
    fn the_frame_series_keeps_each_points_extremes() {
        let ms = |v: i64| v * 1_000_000;
        let rows: Vec<FrameRow> = (0..1200u32)
            .map(|k| FrameRow {
                frame: k,
                kind: FrameType::P,
                shown: Some(k),
                arrived: true,
                delay_ns: Some(20_000_000 + u64::from(k % 3)),
                cumulative_jitter_ns: Some(match k {
                    600 => ms(590),
                    800 => ms(-40),
                    _ => ms(10),
                }),
                missed_deadline: false,
                psnr_y_db: None,
                psnr_yuv_db: None,
                ssim: None,
                mos: None,
            })
            .collect();
        let s = series(&FrameMap::default(), &rows);
        assert_eq!((s.step, s.cumulative_jitter_ns.len()), (2, 600));
        // Frames 600 and 601 make point 300: its largest is frame 600's, not 601's.
        assert_eq!(s.cumulative_jitter_ns[300], Some(ms(590)));
        assert_eq!(s.cumulative_jitter_min_ns[400], Some(ms(-40)));
        assert_eq!(
            s.cumulative_jitter_ns.iter().flatten().max(),
            Some(&ms(590))
        );
        assert_eq!(s.delay_ns[0], Some(20_000_001));
    }

    #[test]
    fn a_frame_is_lost_with_any_of_its_packets() {
        let ms = Timestamp::from_millis;
        // Frames 0..3; packets: [0], [0,1], [1], none, [2].
        let due = Duration::from_millis;
        let map = FrameMap {
            sent: SentFrames {
                packets: vec![Some((0, 0)), Some((0, 1)), Some((1, 1)), None, Some((2, 2))],
                frame_due: vec![due(0), due(10), due(20)],
                ..SentFrames::default()
            },
            ..FrameMap::default()
        };
        let frame_figures = |m: &FrameMap, a: &[Timestamp]| {
            view(m, a, Playout::default(), &mut PictureCache::default()).figures
        };
        let all = [ms(5), ms(12), ms(18), ms(19), ms(30)];
        let f = frame_figures(&map, &all);
        assert_eq!((f.frames, f.lost), (3, 0));
        // Frame 0 complete at 12 ms (due 0), frame 1 at 18 (due 10), frame 2 at 30 (due 20).
        assert_eq!(f.mean_delay_ns, (12 + 8 + 10) * 1_000_000 / 3);
        // Cumulative jitter: delays 12, 8, 10 ms never grew past the first frame's.
        assert_eq!(f.max_cumulative_jitter_ns, 0);
        let later = [ms(5), ms(12), ms(18), ms(19), ms(40)];
        // Frame 2 now complete at 40 ms: 20 ms of delay, 8 ms more than frame 0's.
        assert_eq!(
            frame_figures(&map, &later).max_cumulative_jitter_ns,
            8_000_000
        );
        let mut some = all;
        some[1] = Timestamp::MAX; // carries frames 0 and 1
        let f = frame_figures(&map, &some);
        assert_eq!(f.lost, 2);
        // A packet with no video lost costs no frame; missing tail arrivals are losses.
        let f = frame_figures(&map, &all[..4]);
        assert_eq!(f.lost, 1);
    }

    #[test]
    fn viewers_who_lost_the_same_packets_are_judged_once_and_alike() {
        // Noted from the real source, seven TS packets to a packet, as the sender makes them.
        let v = VideoDecl {
            width: 160,
            height: 96,
            fps: 30,
        };
        let mut src = test_source(
            v,
            &VideoContent::Pattern,
            1_000_000,
            Duration::from_millis(500),
            None,
        )
        .unwrap();
        let mut map = FrameMap {
            picture: Some(v),
            ..FrameMap::default()
        };
        let mut noter = FrameNoter::default();
        let (mut ts, mut n) = ([0u8; 188], 0);
        while let Some(due) = src.next_packet(&mut ts).unwrap() {
            noter.ts(&mut map.sent, &ts, due);
            n += 1;
            if n % 7 == 0 {
                noter.end_packet(&mut map.sent);
            }
        }
        if n % 7 != 0 {
            noter.end_packet(&mut map.sent);
        }
        noter.finish(&mut map.sent);
        assert_eq!((map.sent.coded.len(), map.sent.frame_due.len()), (15, 15));
        let all: Vec<Timestamp> = (0..map.sent.packets.len())
            .map(|k| Timestamp::from_millis(30 + k as u64))
            .collect();
        // A packet carrying frame 3 is lost.
        let mut lossy = all.clone();
        let k = map
            .sent
            .packets
            .iter()
            .position(|p| matches!(p, Some((a, _)) if *a == 3))
            .unwrap();
        lossy[k] = Timestamp::MAX;
        let mut cache = PictureCache::default();
        let p = Playout::default();
        let a = view(&map, &all, p, &mut cache).figures;
        let b = view(&map, &lossy, p, &mut cache).figures;
        let c = view(&map, &lossy, p, &mut cache).figures;
        // b and c are alike; the video as sent (for MIV) is a's.
        assert_eq!(cache.hits, 4);
        assert_eq!(b, c);
        assert_eq!((a.lost, b.lost_p), (0, b.lost));
        assert!(b.lost >= 1);
        let (qa, qb) = (a.pictures.unwrap(), b.pictures.unwrap());
        assert!(qb.psnr_y_db < qa.psnr_y_db, "{qa:?} {qb:?}");
        assert_eq!((qa.undecodable, qa.blank_frames), (0, 0));
        assert_eq!(qa.miv_max_percent, 0.0);
        assert!(
            qb.miv_max_percent > 0.0 || qb.mos_frames == qa.mos_frames,
            "{qb:?}"
        );
    }
}
