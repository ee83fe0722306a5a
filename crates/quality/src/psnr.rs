//! PSNR, as FFmpeg's `psnr` filter computes it for 8-bit video: per plane, the mean squared
//! error over the plane's samples and 10·log10(255² / MSE); for all planes together ("YUV",
//! FFmpeg's `average`), the planes' MSEs weighted by their share of the samples. Over a run,
//! FFmpeg's figure comes from the mean MSE of the frames ([`Totals::global`]); Evalvid's is the
//! mean of the frames' PSNRs ([`Totals::mean`]). Identical frames (MSE 0) get [`CAP_DB`].

use crate::picture::Picture;

/// The PSNR given to identical pictures (infinite in FFmpeg, 0 in Evalvid's `psnr` tool), and
/// the most any picture gets.
pub const CAP_DB: f64 = 100.0;

/// 255², the peak signal of 8-bit samples, squared.
const PEAK2: f64 = 255.0 * 255.0;

/// PSNR from a mean squared error, capped at [`CAP_DB`].
pub fn db(mse: f64) -> f64 {
    if mse <= 0.0 {
        CAP_DB
    } else {
        (10.0 * (PEAK2 / mse).log10()).min(CAP_DB)
    }
}

/// The sum of squared differences of two equally long sample runs. The same code, compiled
/// for AVX2 where the CPU has it.
pub fn sse(a: &[u8], b: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { sse_avx2(a, b) };
    }
    sse_generic(a, b)
}

#[cfg(target_arch = "x86_64")]
/// Safety: only on a CPU with AVX2 (an `unsafe fn` for Rust before 1.86).
#[target_feature(enable = "avx2")]
unsafe fn sse_avx2(a: &[u8], b: &[u8]) -> u64 {
    sse_generic(a, b)
}

#[inline(always)]
fn sse_generic(a: &[u8], b: &[u8]) -> u64 {
    // Chunks of 64 summed in i32 (the loop vectorizes: differences as i16, squares summed in
    // pairs); a chunk's sum is at most 64·255², far from overflowing.
    let mut total = 0u64;
    let (ca, cb) = (a.chunks_exact(64), b.chunks_exact(64));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        let mut s = 0i32;
        for i in 0..64 {
            let d = x[i] as i16 - y[i] as i16;
            s += d as i32 * d as i32;
        }
        total += s as u64;
    }
    for (x, y) in ra.iter().zip(rb) {
        let d = *x as i64 - *y as i64;
        total += (d * d) as u64;
    }
    total
}

/// One frame's PSNR.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct FramePsnr {
    /// Mean squared error per plane (Y, U, V; 0 for planes a mono picture lacks).
    pub mse: [f64; 3],
    /// Luma PSNR, dB, capped at [`CAP_DB`].
    pub y_db: f64,
    /// U (Cb) PSNR, dB, capped at [`CAP_DB`] (the cap for a mono picture).
    pub u_db: f64,
    /// V (Cr) PSNR, dB, capped at [`CAP_DB`] (the cap for a mono picture).
    pub v_db: f64,
    /// All planes, their MSEs weighted by their sample counts (FFmpeg's `average`).
    pub yuv_db: f64,
}

/// The PSNR of `received` against `reference` (the same format).
pub fn frame(reference: &Picture, received: &Picture) -> FramePsnr {
    debug_assert!(reference.same_format(received));
    let mut mse = [0.0; 3];
    let mut weighted = 0.0;
    let total = reference.data.len() as f64;
    for (p, m) in mse.iter_mut().enumerate().take(reference.chroma.planes()) {
        let (a, w, h) = reference.plane(p);
        let (b, _, _) = received.plane(p);
        let n = (w * h).max(1) as f64;
        *m = sse(a, b) as f64 / n;
        weighted += *m * n / total;
    }
    FramePsnr {
        mse,
        y_db: db(mse[0]),
        u_db: db(mse[1]),
        v_db: db(mse[2]),
        yuv_db: db(weighted),
    }
}

/// The PSNR of a run of frames, both ways.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    frames: u64,
    /// Sums of per-frame MSE (Y, U, V, weighted) and of per-frame PSNR (same order).
    mse: [f64; 4],
    db: [f64; 4],
}

/// A run's PSNR in dB: Y, U, V, YUV.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct RunPsnr {
    /// Luma, dB.
    pub y_db: f64,
    /// U (Cb), dB.
    pub u_db: f64,
    /// V (Cr), dB.
    pub v_db: f64,
    /// All planes together, each weighted by its share of the samples (FFmpeg's `average`).
    pub yuv_db: f64,
}

impl Totals {
    /// Adds one frame's figures; `plane_share` is each plane's share of the picture's
    /// samples (from [`plane_share`]), used to weight the frame's MSEs for the YUV figure.
    pub fn add(&mut self, f: &FramePsnr, plane_share: [f64; 3]) {
        self.frames += 1;
        let weighted =
            f.mse[0] * plane_share[0] + f.mse[1] * plane_share[1] + f.mse[2] * plane_share[2];
        for (s, v) in self
            .mse
            .iter_mut()
            .zip([f.mse[0], f.mse[1], f.mse[2], weighted])
        {
            *s += v;
        }
        for (s, v) in self.db.iter_mut().zip([f.y_db, f.u_db, f.v_db, f.yuv_db]) {
            *s += v;
        }
    }

    /// Frames added so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// FFmpeg's figure: the PSNR of the mean MSE.
    pub fn global(&self) -> RunPsnr {
        let n = self.frames.max(1) as f64;
        let m = self.mse.map(|s| db(s / n));
        RunPsnr {
            y_db: m[0],
            u_db: m[1],
            v_db: m[2],
            yuv_db: m[3],
        }
    }

    /// Evalvid's figure: the mean of the frames' PSNRs (each capped).
    pub fn mean(&self) -> RunPsnr {
        let n = self.frames.max(1) as f64;
        let m = self.db.map(|s| s / n);
        RunPsnr {
            y_db: m[0],
            u_db: m[1],
            v_db: m[2],
            yuv_db: m[3],
        }
    }
}

/// Each plane's share of a picture's samples (what FFmpeg weights the planes by).
pub fn plane_share(p: &Picture) -> [f64; 3] {
    let total = p.data.len().max(1) as f64;
    let mut s = [0.0; 3];
    for (q, v) in s.iter_mut().enumerate().take(p.chroma.planes()) {
        let (_, w, h) = p.plane(q);
        *v = (w * h) as f64 / total;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::Chroma;

    #[test]
    fn identical_frames_get_the_cap_not_infinity_or_zero() {
        let a = Picture::black(16, 16, Chroma::C420);
        let f = frame(&a, &a);
        assert_eq!((f.y_db, f.yuv_db), (CAP_DB, CAP_DB));
    }

    #[test]
    fn one_level_off_everywhere_is_48_13_db() {
        // MSE 1: 10·log10(65025) = 48.1308 dB.
        let a = Picture::black(16, 16, Chroma::C444);
        let mut b = a.clone();
        b.data.iter_mut().for_each(|v| *v += 1);
        let f = frame(&a, &b);
        assert!((f.y_db - 48.1308).abs() < 1e-4, "{f:?}");
        assert!((f.yuv_db - 48.1308).abs() < 1e-4);
    }

    #[test]
    fn sse_matches_the_plain_sum() {
        let a: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 256) as u8).collect();
        let b: Vec<u8> = (0..1000u32).map(|i| (i * 13 % 256) as u8).collect();
        let plain: u64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (*x as i64 - *y as i64).pow(2) as u64)
            .sum();
        assert_eq!(sse(&a, &b), plain);
    }
}
