//! What a lab video shows: the pattern, generated content and its scenes, a file, lavfi
//! sources; and the test source that encodes and muxes it.

use metronome_config::scenario::{ScenePace, VideoContent, VideoDecl};
use metronome_media::testsrc::{TestSource, TestSourceConfig};
use metronome_media::{Pictures, TestPattern};
use std::time::Duration;

/// Seconds per scene of the pattern the lab sends (static, moderate, high motion).
pub const SCENE_SECS: u32 = 4;

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
