//! Two streams of pictures through the metrics, frame by frame, on several threads.

use crate::mos;
use crate::picture::{Chroma, Picture};
use crate::psnr::{self, FramePsnr, RunPsnr};
use crate::ssim::{self, FrameSsim};
use crate::y4m::{Reader, Y4mError};
use std::io::BufRead;

/// One frame's figures.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct FrameQuality {
    /// From 0, in stream order.
    pub frame: u64,
    /// PSNR per plane and over all planes, dB (FFmpeg's `psnr` filter's per-frame figures).
    pub psnr: FramePsnr,
    /// SSIM per plane and over all planes, 0 to 1 (FFmpeg's `ssim` filter's per-frame
    /// figures).
    pub ssim: FrameSsim,
    /// Evalvid's MOS of the frame's Y PSNR.
    pub mos: u8,
}

/// A run's figures.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct RunQuality {
    /// Frames compared (the shorter stream's length).
    pub frames: u64,
    /// Frames the reference has beyond the received stream's end (not compared).
    pub frames_missing: u64,
    /// The PSNR of the mean MSE (FFmpeg's `psnr` filter's summary).
    pub psnr_global: RunPsnr,
    /// The mean of the frames' PSNRs, each capped at [`psnr::CAP_DB`] (Evalvid's).
    pub psnr_mean: RunPsnr,
    /// The mean of the frames' SSIMs (FFmpeg's `ssim` filter's summary).
    pub ssim: FrameSsim,
    /// The mean of the frames' MOS (1 to 5; 0 when no frame was compared).
    pub mos_mean: f64,
    /// Frames with MOS 1, 2, 3, 4, 5.
    pub mos_frames: [u64; 5],
}

/// The figures of `received` against `reference`, computed frame by frame.
pub fn frame(reference: &Picture, received: &Picture, n: u64) -> FrameQuality {
    let p = psnr::frame(reference, received);
    FrameQuality {
        frame: n,
        psnr: p,
        ssim: ssim::frame(reference, received),
        mos: mos::from_psnr(p.y_db),
    }
}

/// Why [`streams`] could not compare two videos.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Reading the reference stream failed (bad header, a cut-short frame, I/O).
    #[error("the reference: {0}")]
    Reference(Y4mError),
    /// Reading the received stream failed (bad header, a cut-short frame, I/O).
    #[error("the received video: {0}")]
    Received(Y4mError),
    /// The two streams differ in width, height or chroma sampling, so no frame was compared;
    /// one must be converted first.
    #[error("the videos differ in format: reference {a}, received {b}; convert one (ffmpeg -s WxH -pix_fmt yuv420p)")]
    Format {
        /// The reference's format, as `WxH chroma` (e.g. `352x288 420jpeg`).
        a: String,
        /// The received stream's format, written the same way.
        b: String,
    },
}

fn describe(w: usize, h: usize, c: Chroma) -> String {
    format!("{w}x{h} {}", c.y4m_name())
}

/// Compares two streams to the end of the shorter, `threads` frames at a time; calls `each`
/// with every frame's figures, in order.
pub fn streams<A: BufRead, B: BufRead>(
    mut reference: Reader<A>,
    mut received: Reader<B>,
    threads: usize,
    mut each: impl FnMut(&FrameQuality),
) -> Result<RunQuality, CompareError> {
    let (fa, fb) = (reference.format(), received.format());
    if (fa.width, fa.height, fa.chroma) != (fb.width, fb.height, fb.chroma) {
        return Err(CompareError::Format {
            a: describe(fa.width, fa.height, fa.chroma),
            b: describe(fb.width, fb.height, fb.chroma),
        });
    }
    let threads = threads.max(1);
    let blank = || Picture::black(fa.width, fa.height, fa.chroma);
    // Two sets of buffers: one batch is compared while the next is read.
    let batch =
        |n: usize| -> Vec<(Picture, Picture)> { (0..n).map(|_| (blank(), blank())).collect() };
    let (mut ready, mut next) = (batch(threads), batch(threads));
    let mut run = RunQuality::default();
    let mut totals = psnr::Totals::default();
    let mut ssim_sum = [0.0; 4];
    let mut mos_sum = 0u64;
    let share = psnr::plane_share(&ready[0].0);
    let mut ended = false;
    let mut read = |set: &mut Vec<(Picture, Picture)>,
                    ended: &mut bool,
                    missing: &mut u64|
     -> Result<usize, CompareError> {
        let mut k = 0;
        while k < set.len() && !*ended {
            let (a, b) = &mut set[k];
            if !reference.next_into(a).map_err(CompareError::Reference)? {
                *ended = true;
                break;
            }
            if !received.next_into(b).map_err(CompareError::Received)? {
                *missing += 1;
                *ended = true;
                break;
            }
            k += 1;
        }
        Ok(k)
    };
    let mut have = read(&mut ready, &mut ended, &mut run.frames_missing)?;
    while have > 0 {
        let base = run.frames;
        let (figures, got) = std::thread::scope(|s| {
            let handles: Vec<_> = ready[..have]
                .iter()
                .enumerate()
                .map(|(i, (x, y))| s.spawn(move || frame(x, y, base + i as u64)))
                .collect();
            let got = read(&mut next, &mut ended, &mut run.frames_missing);
            let figures: Vec<FrameQuality> = handles
                .into_iter()
                .map(|h| h.join().expect("metrics never panic"))
                .collect();
            (figures, got)
        });
        for q in &figures {
            totals.add(&q.psnr, share);
            for (s, v) in ssim_sum
                .iter_mut()
                .zip([q.ssim.y, q.ssim.u, q.ssim.v, q.ssim.all])
            {
                *s += v;
            }
            mos_sum += q.mos as u64;
            run.mos_frames[(q.mos - 1) as usize] += 1;
            each(q);
        }
        run.frames += have as u64;
        have = got?;
        std::mem::swap(&mut ready, &mut next);
    }
    if run.frames_missing > 0 {
        // Count the rest of the reference.
        let mut spare = Picture::black(fa.width, fa.height, fa.chroma);
        while reference
            .next_into(&mut spare)
            .map_err(CompareError::Reference)?
        {
            run.frames_missing += 1;
        }
    }
    let n = run.frames.max(1) as f64;
    run.psnr_global = totals.global();
    run.psnr_mean = totals.mean();
    run.ssim = FrameSsim {
        y: ssim_sum[0] / n,
        u: ssim_sum[1] / n,
        v: ssim_sum[2] / n,
        all: ssim_sum[3] / n,
    };
    run.mos_mean = mos_sum as f64 / n;
    Ok(run)
}
