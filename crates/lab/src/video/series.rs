//! A viewer's frames as rows, the series the report plots from them, and `frames.csv`.

use super::FrameMap;
use metronome_quality::playout::{FrameType, SentFrame};
use metronome_time::Micros;
use serde::{Deserialize, Serialize};

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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FrameSeries {
    pub flow: String,
    pub receiver: String,
    /// The first frame's due time on the run's clock, and the time between frames.
    pub start_us: Micros,
    pub frame_interval_us: Micros,
    /// Frames per point.
    pub step: u32,
    /// The lowest PSNR of Y in each point's frames, dB (empty without pictures).
    pub psnr_y_db: Vec<f64>,
    /// The largest delay among each point's frames that arrived (`None`: none arrived).
    pub delay_us: Vec<Option<Micros>>,
    /// The largest cumulative jitter among each point's frames that arrived: a thinned
    /// plot still shows every peak (an I-frame's), up to the flow's maximum.
    pub cumulative_jitter_us: Vec<Option<Micros>>,
    /// The smallest: with the largest, each point's range.
    #[serde(default)]
    pub cumulative_jitter_min_us: Vec<Option<Micros>>,
}

/// A video flow as its sender sent it, thinned for plots: its coded frames' sizes and, for a
/// ladder's video, each GOP's rung.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SentSeries {
    pub flow: String,
    /// Each point's first frame's send time on the run's clock.
    pub time_us: Vec<Micros>,
    /// Frames per point.
    pub step: u32,
    /// The mean and the largest coded size of each point's frames, bytes.
    pub frame_bytes_mean: Vec<f64>,
    pub frame_bytes_max: Vec<u32>,
    /// A ladder's video: each GOP's start on the run's clock and the quantizer of the rung
    /// its VBR controller chose, where the rung changed.
    #[serde(default)]
    pub rung_start_us: Vec<Micros>,
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
            s.time_us.push(Micros::from_nanos_u64(chunk[0].send_ns));
            let total: u64 = chunk.iter().map(|f| u64::from(f.size_bytes)).sum();
            s.frame_bytes_mean.push(total as f64 / chunk.len() as f64);
            s.frame_bytes_max
                .push(chunk.iter().map(|f| f.size_bytes).max().unwrap_or(0));
        }
        for &(g, q) in rungs {
            s.rung_start_us
                .push(Micros::from_nanos_u64(epoch_ns + u64::from(g) * gop_ns));
            s.rung_quantizer.push(q);
        }
        s
    }
}

/// Points a [`FrameSeries`] keeps at most.
pub const SERIES_POINTS: usize = 600;

pub(super) fn series(map: &FrameMap, rows: &[FrameRow]) -> FrameSeries {
    let step = rows.len().div_ceil(SERIES_POINTS).max(1);
    let fps = map.picture.map_or(30, |v| v.fps).max(1);
    let mut s = FrameSeries {
        start_us: Micros::from_nanos_u64(
            map.sent
                .frame_due
                .first()
                .map_or(0, |d| (map.epoch + *d).as_nanos()),
        ),
        frame_interval_us: Micros::from_nanos_u64(1_000_000_000 / fps as u64),
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
        s.delay_us.push(
            chunk
                .iter()
                .filter_map(|r| r.delay_ns)
                .max()
                .map(Micros::from_nanos_u64),
        );
        let cj = || {
            chunk
                .iter()
                .filter_map(|r| r.cumulative_jitter_ns)
                .map(Micros::from_nanos)
        };
        s.cumulative_jitter_us.push(cj().max());
        s.cumulative_jitter_min_us.push(cj().min());
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

/// `FLOW.rungs.csv`: each GOP's rung as the VBR controller chose it.
pub const RUNGS_HEADER: &str = "gop,start_ns,quantizer,target_bytes,open_bytes,bucket_fill";

/// The rows of `FLOW.rungs.csv` for `map`.
pub fn rungs_csv(map: &FrameMap, gop: u32, fps: u32) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(RUNGS_HEADER);
    out.push('\n');
    let gop_ns = u64::from(gop) * 1_000_000_000 / u64::from(fps.max(1));
    for (g, d) in &map.rungs {
        let _ = writeln!(
            out,
            "{g},{},{},{:.0},{:.0},{:.4}",
            map.epoch.as_nanos() + u64::from(*g) * gop_ns,
            d.quantizer,
            d.target_bytes,
            d.open_bytes,
            d.fill
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let ns = Micros::from_nanos;
        assert_eq!(s.time_us[24], ns(24 * 40_000_000));
        assert_eq!(
            s.rung_start_us,
            [ns(1_000_000_000), ns(1_480_000_000), ns(1_960_000_000)]
        );
        assert_eq!(s.rung_quantizer, [8, 4, 4]);
        // Past SERIES_POINTS frames, points of two frames: their mean and largest size.
        let many: Vec<SentFrame> = (0..(SERIES_POINTS as u64 + 2))
            .map(|k| frame(k, if k % 2 == 0 { 1000 } else { 200 }))
            .collect();
        let s = SentSeries::of("v", &many, &[], 0, 1);
        assert_eq!(s.step, 2);
        assert_eq!(s.time_us.len(), SERIES_POINTS / 2 + 1);
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
        assert_eq!((s.step, s.cumulative_jitter_us.len()), (2, 600));
        // Frames 600 and 601 make point 300: its largest is frame 600's, not 601's.
        let jitter = |v: i64| Micros::from_nanos(ms(v));
        assert_eq!(s.cumulative_jitter_us[300], Some(jitter(590)));
        assert_eq!(s.cumulative_jitter_min_us[400], Some(jitter(-40)));
        assert_eq!(
            s.cumulative_jitter_us.iter().flatten().max(),
            Some(&jitter(590))
        );
        assert_eq!(s.delay_us[0], Some(Micros::from_nanos(20_000_001)));
    }
}
