//! SSIM as FFmpeg's `ssim` filter computes it for 8-bit video (the algorithm is x264's, by
//! Loren Merritt): instead of Wang et al.'s Gaussian window, 8×8 windows stepped by 4 pixels,
//! each the sum of four 4×4 blocks' sums (Σa, Σb, Σa²+Σb², Σab), with C1 = (0.01·255)² and
//! C2 = (0.03·255)² scaled to those sums. A plane's SSIM is the mean over its windows
//! ((W/4 − 1)·(H/4 − 1) of them); a frame's is the planes' SSIMs weighted by their sample
//! counts; a run's is the mean of its frames'.

use crate::picture::Picture;

/// C1 and C2 for sums over 64 samples (x264's integer constants).
const C1: i32 = (0.01 * 0.01 * 255.0 * 255.0 * 64.0 + 0.5) as i32;
const C2: i32 = (0.03 * 0.03 * 255.0 * 255.0 * 64.0 * 63.0 + 0.5) as i32;

/// Block sums of one row of 4×4 blocks, as four arrays (Σa, Σb, Σa²+Σb², Σab): arrays, not
/// an array of tuples, so that the loops over them vectorize.
#[derive(Clone, Default)]
struct BlockRow {
    s1: Vec<i32>,
    s2: Vec<i32>,
    ss: Vec<i32>,
    s12: Vec<i32>,
}

impl BlockRow {
    fn new(n: usize) -> Self {
        BlockRow {
            s1: vec![0; n],
            s2: vec![0; n],
            ss: vec![0; n],
            s12: vec![0; n],
        }
    }
}

/// Per-column sums over 4 sample rows (the first step of the block sums).
struct Columns {
    s1: Vec<i32>,
    s2: Vec<i32>,
    ss: Vec<i32>,
    s12: Vec<i32>,
}

/// The block sums of the row of 4×4 blocks starting at sample row `y0`: each column summed
/// over the 4 rows (one pass, written once), then each 4 columns. Every value fits an i32 (a
/// window's Σa² + Σb² is at most 64·2·255², and x264's formula stays below 2³¹ with it).
#[inline(always)]
fn block_row(a: &[u8], b: &[u8], w: usize, y0: usize, cols: &mut Columns, out: &mut BlockRow) {
    let n = out.s1.len() * 4;
    let off = |dy: usize| (y0 + dy) * w..(y0 + dy) * w + n;
    let (a0, a1, a2, a3) = (&a[off(0)], &a[off(1)], &a[off(2)], &a[off(3)]);
    let (b0, b1, b2, b3) = (&b[off(0)], &b[off(1)], &b[off(2)], &b[off(3)]);
    let (c1, c2, cs, c12) = (
        &mut cols.s1[..n],
        &mut cols.s2[..n],
        &mut cols.ss[..n],
        &mut cols.s12[..n],
    );
    for x in 0..n {
        let (p0, p1, p2, p3) = (a0[x] as i32, a1[x] as i32, a2[x] as i32, a3[x] as i32);
        let (q0, q1, q2, q3) = (b0[x] as i32, b1[x] as i32, b2[x] as i32, b3[x] as i32);
        c1[x] = p0 + p1 + p2 + p3;
        c2[x] = q0 + q1 + q2 + q3;
        cs[x] = p0 * p0 + p1 * p1 + p2 * p2 + p3 * p3 + q0 * q0 + q1 * q1 + q2 * q2 + q3 * q3;
        c12[x] = p0 * q0 + p1 * q1 + p2 * q2 + p3 * q3;
    }
    for k in 0..out.s1.len() {
        let r = 4 * k..4 * k + 4;
        out.s1[k] = c1[r.clone()].iter().sum();
        out.s2[k] = c2[r.clone()].iter().sum();
        out.ss[k] = cs[r.clone()].iter().sum();
        out.s12[k] = c12[r].iter().sum();
    }
}

/// Windows computed at once: a chunk the compiler turns into vector arithmetic.
const LANES: usize = 8;

/// The sum of the SSIMs of the windows between two rows of blocks: x264's arithmetic
/// (integers, then the ratio in f32, as FFmpeg's SIMD code computes it), summed in f64.
#[inline(always)]
fn window_row(prev: &BlockRow, cur: &BlockRow) -> f64 {
    let n = prev.s1.len() - 1;
    let mut lanes = [0.0f64; LANES];
    let mut k = 0;
    while k + LANES <= n {
        let r = k..k + LANES + 1;
        let arr = |v: &[i32]| -> [i32; LANES + 1] { v[r.clone()].try_into().expect("9 values") };
        let (p1, p2, ps, p12) = (arr(&prev.s1), arr(&prev.s2), arr(&prev.ss), arr(&prev.s12));
        let (c1, c2, cs, c12) = (arr(&cur.s1), arr(&cur.s2), arr(&cur.ss), arr(&cur.s12));
        let mut v = [0.0f32; LANES];
        for i in 0..LANES {
            v[i] = window(
                p1[i] + p1[i + 1] + c1[i] + c1[i + 1],
                p2[i] + p2[i + 1] + c2[i] + c2[i + 1],
                ps[i] + ps[i + 1] + cs[i] + cs[i + 1],
                p12[i] + p12[i + 1] + c12[i] + c12[i + 1],
            );
        }
        for i in 0..LANES {
            lanes[i] += v[i] as f64;
        }
        k += LANES;
    }
    let mut total: f64 = lanes.iter().sum();
    for k in k..n {
        let sum = |p: &[i32], c: &[i32]| p[k] + p[k + 1] + c[k] + c[k + 1];
        total += window(
            sum(&prev.s1, &cur.s1),
            sum(&prev.s2, &cur.s2),
            sum(&prev.ss, &cur.ss),
            sum(&prev.s12, &cur.s12),
        ) as f64;
    }
    total
}

/// The SSIM of one 8×8 window from its four blocks' summed sums.
#[inline(always)]
fn window(s1: i32, s2: i32, ss: i32, s12: i32) -> f32 {
    let vars = ss * 64 - s1 * s1 - s2 * s2;
    let covar = s12 * 64 - s1 * s2;
    ((2 * s1 * s2 + C1) as f32 * (2 * covar + C2) as f32)
        / ((s1 * s1 + s2 * s2 + C1) as f32 * (vars + C2) as f32)
}

#[inline(always)]
fn plane_generic(a: &[u8], b: &[u8], w: usize, h: usize) -> f64 {
    plane_with(a, b, w, h, block_row)
}

/// A plane's SSIM with `row` making the block sums.
#[inline(always)]
fn plane_with(
    a: &[u8],
    b: &[u8],
    w: usize,
    h: usize,
    mut row: impl FnMut(&[u8], &[u8], usize, usize, &mut Columns, &mut BlockRow),
) -> f64 {
    let (bw, bh) = (w / 4, h / 4);
    if bw < 2 || bh < 2 {
        return 1.0;
    }
    let mut cols = Columns {
        s1: vec![0; 4 * bw],
        s2: vec![0; 4 * bw],
        ss: vec![0; 4 * bw],
        s12: vec![0; 4 * bw],
    };
    let (mut prev, mut cur) = (BlockRow::new(bw), BlockRow::new(bw));
    row(a, b, w, 0, &mut cols, &mut prev);
    let mut total = 0.0;
    for by in 1..bh {
        row(a, b, w, 4 * by, &mut cols, &mut cur);
        total += window_row(&prev, &cur);
        std::mem::swap(&mut prev, &mut cur);
    }
    total / ((bh - 1) * (bw - 1)) as f64
}

#[cfg(target_arch = "x86_64")]
/// Safety: only on a CPU with AVX2 (an `unsafe fn` for Rust before 1.86).
#[target_feature(enable = "avx2")]
unsafe fn plane_avx2(a: &[u8], b: &[u8], w: usize, h: usize) -> f64 {
    plane_with(a, b, w, h, |a, b, w, y0, cols, out| {
        // SAFETY: this function runs only where the CPU has AVX2.
        unsafe { block_row_avx2(a, b, w, y0, cols, out) }
    })
}

/// [`block_row`] with AVX2 intrinsics, four blocks (16 columns) at a time, as x264's SIMD
/// code does it: each row's samples widened to 16 bits, products and sums of adjacent pairs
/// by `madd`, pairs into blocks by `hadd`. The blocks left over (fewer than four) are summed
/// by the portable code.
///
/// Safety: only on a CPU with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn block_row_avx2(
    a: &[u8],
    b: &[u8],
    w: usize,
    y0: usize,
    cols: &mut Columns,
    out: &mut BlockRow,
) {
    use std::arch::x86_64::*;
    let nb = out.s1.len();
    let n = nb * 4;
    let ra: [&[u8]; 4] = std::array::from_fn(|dy| &a[(y0 + dy) * w..(y0 + dy) * w + n]);
    let rb: [&[u8]; 4] = std::array::from_fn(|dy| &b[(y0 + dy) * w..(y0 + dy) * w + n]);
    let ones = _mm256_set1_epi16(1);
    let mut k = 0;
    while k + 4 <= nb {
        let x0 = 4 * k;
        let (mut sa, mut sb) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        let (mut sq, mut sab) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for dy in 0..4 {
            // 16 samples from each row: the slices hold x0 + 16 ≤ n bytes, checked here.
            let (pa, pb) = (&ra[dy][x0..x0 + 16], &rb[dy][x0..x0 + 16]);
            // SAFETY: each load reads the 16 bytes of a slice just checked to hold them.
            let va = _mm256_cvtepu8_epi16(unsafe { _mm_loadu_si128(pa.as_ptr().cast()) });
            let vb = _mm256_cvtepu8_epi16(unsafe { _mm_loadu_si128(pb.as_ptr().cast()) });
            sa = _mm256_add_epi32(sa, _mm256_madd_epi16(va, ones));
            sb = _mm256_add_epi32(sb, _mm256_madd_epi16(vb, ones));
            let squares = _mm256_add_epi32(_mm256_madd_epi16(va, va), _mm256_madd_epi16(vb, vb));
            sq = _mm256_add_epi32(sq, squares);
            sab = _mm256_add_epi32(sab, _mm256_madd_epi16(va, vb));
        }
        // Per 128-bit half: [a pairs 0+1, 2+3, b pairs 0+1, 2+3]: blocks k, k+1 then k+2, k+3.
        let (mut t1, mut t2) = ([0i32; 8], [0i32; 8]);
        // SAFETY: each store writes 32 bytes into an [i32; 8].
        unsafe {
            _mm256_storeu_si256(t1.as_mut_ptr().cast(), _mm256_hadd_epi32(sa, sb));
            _mm256_storeu_si256(t2.as_mut_ptr().cast(), _mm256_hadd_epi32(sq, sab));
        }
        for (j, half) in [(0usize, 0usize), (2, 4)] {
            out.s1[k + j] = t1[half];
            out.s1[k + j + 1] = t1[half + 1];
            out.s2[k + j] = t1[half + 2];
            out.s2[k + j + 1] = t1[half + 3];
            out.ss[k + j] = t2[half];
            out.ss[k + j + 1] = t2[half + 1];
            out.s12[k + j] = t2[half + 2];
            out.s12[k + j + 1] = t2[half + 3];
        }
        k += 4;
    }
    if k < nb {
        // The last blocks: the portable sums over the columns left.
        let mut tail = BlockRow::new(nb - k);
        let (ta, tb): (Vec<u8>, Vec<u8>) = (0..4)
            .flat_map(|dy| (4 * k..n).map(move |x| (ra[dy][x], rb[dy][x])))
            .unzip();
        block_row(&ta, &tb, n - 4 * k, 0, cols, &mut tail);
        out.s1[k..].copy_from_slice(&tail.s1);
        out.s2[k..].copy_from_slice(&tail.s2);
        out.ss[k..].copy_from_slice(&tail.ss);
        out.s12[k..].copy_from_slice(&tail.s12);
    }
}

/// The SSIM of two `w`×`h` planes (1.0 for a plane too small to hold one window). The same
/// code, compiled for AVX2 where the CPU has it.
pub fn plane(a: &[u8], b: &[u8], w: usize, h: usize) -> f64 {
    assert!(
        a.len() >= w * h && b.len() >= w * h,
        "planes smaller than {w}x{h}"
    );
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { plane_avx2(a, b, w, h) };
    }
    plane_generic(a, b, w, h)
}

/// One frame's SSIM.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct FrameSsim {
    /// Luma SSIM, at most 1.0 (identical planes).
    pub y: f64,
    /// U (Cb) SSIM, at most 1.0; 1.0 for a mono picture.
    pub u: f64,
    /// V (Cr) SSIM, at most 1.0; 1.0 for a mono picture.
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
    fn the_vector_code_computes_what_the_portable_code_does() {
        // Widths with and without blocks left over after groups of four.
        for (w, h) in [(64, 16), (70, 20), (35, 9), (8, 8), (1920 / 2, 12)] {
            let a: Vec<u8> = (0..w * h).map(|i| (i * 97 % 251) as u8).collect();
            let b: Vec<u8> = (0..w * h).map(|i| (i * 89 % 241 + i / 7) as u8).collect();
            assert_eq!(plane(&a, &b, w, h), plane_generic(&a, &b, w, h), "{w}x{h}");
        }
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
        assert!((plane(&a, &b, 32, 32) - want).abs() < 1e-6, "f32 ratios");
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
