//! SSIM as FFmpeg's `ssim` filter computes it for 8-bit video (the algorithm is x264's, by
//! Loren Merritt): instead of Wang et al.'s Gaussian window, 8×8 windows stepped by 4 pixels,
//! each the sum of four 4×4 blocks' sums (Σa, Σb, Σa²+Σb², Σab), with C1 = (0.01·255)² and
//! C2 = (0.03·255)² scaled to those sums. A plane's SSIM is the mean over its windows
//! ((W/4 − 1)·(H/4 − 1) of them); a frame's is the planes' SSIMs weighted by their sample
//! counts; a run's is the mean of its frames'.

use crate::picture::Picture;

/// C1 and C2 for sums over 64 samples (x264's integer constants).
const C1: i64 = (0.01 * 0.01 * 255.0 * 255.0 * 64.0 + 0.5) as i64;
const C2: i64 = (0.03 * 0.03 * 255.0 * 255.0 * 64.0 * 63.0 + 0.5) as i64;

/// One 4×4 block's sums: Σa, Σb, Σa²+Σb², Σab.
type Sums = [u32; 4];

/// The sums of each 4×4 block of the row of blocks starting at sample row `y0`.
fn block_row(a: &[u8], b: &[u8], w: usize, y0: usize, out: &mut [Sums]) {
    for s in out.iter_mut() {
        *s = [0; 4];
    }
    for dy in 0..4 {
        let off = (y0 + dy) * w;
        let (ra, rb) = (&a[off..off + w], &b[off..off + w]);
        for (k, s) in out.iter_mut().enumerate() {
            let (x, y) = (&ra[4 * k..4 * k + 4], &rb[4 * k..4 * k + 4]);
            for i in 0..4 {
                let (p, q) = (x[i] as u32, y[i] as u32);
                s[0] += p;
                s[1] += q;
                s[2] += p * p + q * q;
                s[3] += p * q;
            }
        }
    }
}

/// The SSIM of one 8×8 window from its four blocks' summed sums.
fn window(s1: i64, s2: i64, ss: i64, s12: i64) -> f64 {
    let vars = ss * 64 - s1 * s1 - s2 * s2;
    let covar = s12 * 64 - s1 * s2;
    ((2 * s1 * s2 + C1) as f64 * (2 * covar + C2) as f64)
        / ((s1 * s1 + s2 * s2 + C1) as f64 * (vars + C2) as f64)
}

/// The SSIM of two `w`×`h` planes (1.0 for a plane too small to hold one window).
pub fn plane(a: &[u8], b: &[u8], w: usize, h: usize) -> f64 {
    let (bw, bh) = (w / 4, h / 4);
    if bw < 2 || bh < 2 {
        return 1.0;
    }
    let mut prev = vec![[0u32; 4]; bw];
    let mut cur = vec![[0u32; 4]; bw];
    block_row(a, b, w, 0, &mut prev);
    let mut total = 0.0;
    for by in 1..bh {
        block_row(a, b, w, 4 * by, &mut cur);
        for k in 0..bw - 1 {
            let s = |i: usize| {
                prev[k][i] as i64 + prev[k + 1][i] as i64 + cur[k][i] as i64 + cur[k + 1][i] as i64
            };
            total += window(s(0), s(1), s(2), s(3));
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    total / ((bh - 1) * (bw - 1)) as f64
}

/// One frame's SSIM.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct FrameSsim {
    pub y: f64,
    pub u: f64,
    pub v: f64,
    /// The planes weighted by their sample counts (FFmpeg's `All`).
    pub all: f64,
}

/// The SSIM of `received` against `reference` (the same format).
pub fn frame(reference: &Picture, received: &Picture) -> FrameSsim {
    debug_assert!(reference.same_format(received));
    let mut c = [1.0; 3];
    let total = reference.data.len().max(1) as f64;
    let mut all = 0.0;
    for (p, v) in c.iter_mut().enumerate().take(reference.chroma.planes()) {
        let (a, w, h) = reference.plane(p);
        let (b, _, _) = received.plane(p);
        *v = plane(a, b, w, h);
        all += *v * (w * h) as f64 / total;
    }
    FrameSsim {
        y: c[0],
        u: c[1],
        v: c[2],
        all,
    }
}

/// SSIM in dB, as FFmpeg prints it beside the value: −10·log10(1 − SSIM).
pub fn db(ssim: f64) -> f64 {
    if ssim >= 1.0 {
        f64::INFINITY
    } else {
        -10.0 * (1.0 - ssim).log10()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::Chroma;

    #[test]
    fn identical_planes_are_1() {
        let a: Vec<u8> = (0..64 * 32).map(|i| (i * 31 % 251) as u8).collect();
        assert!((plane(&a, &a, 64, 32) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_flat_shift_costs_luminance_only() {
        // Two flat planes 10 levels apart: no structure, so SSIM is the luminance term
        // (2·μa·μb + c1) / (μa² + μb² + c1), per window, with μ in sums of 64.
        let a = vec![100u8; 32 * 32];
        let b = vec![110u8; 32 * 32];
        let (s1, s2) = (6400.0f64, 7040.0f64);
        let c1 = C1 as f64;
        let want = (2.0 * s1 * s2 + c1) / (s1 * s1 + s2 * s2 + c1);
        assert!((plane(&a, &b, 32, 32) - want).abs() < 1e-9);
    }

    #[test]
    fn a_frame_weights_planes_by_their_samples() {
        let a = Picture::black(32, 32, Chroma::C420);
        let mut b = a.clone();
        // Damage U only: Y and V stay 1; All = (1024 + 256·u + 256) / 1536.
        let (off, n) = (32 * 32, 16 * 16);
        b.data[off..off + n]
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (i * 37 % 256) as u8);
        let f = frame(&a, &b);
        assert!(f.u < 0.5 && f.y == 1.0 && f.v == 1.0, "{f:?}");
        assert!((f.all - (1024.0 + 256.0 * f.u + 256.0) / 1536.0).abs() < 1e-12);
    }
}
