//! MOS and MIV as Evalvid computes them.
//!
//! MOS from PSNR (Evalvid's table, after Klaue et al.): above 37 dB is 5 (excellent), above 31
//! is 4, above 25 is 3, above 20 is 2, else 1. MIV (Evalvid's `miv` tool): in a window of
//! frames sliding one frame at a time, the percentage whose MOS is below the reference's (the
//! MOS of the video as it was sent, against the same source: what the network, not the
//! encoder, took away).

/// Evalvid's MOS of a frame of `psnr_db`.
pub fn from_psnr(psnr_db: f64) -> u8 {
    match psnr_db {
        p if p > 37.0 => 5,
        p if p > 31.0 => 4,
        p if p > 25.0 => 3,
        p if p > 20.0 => 2,
        _ => 1,
    }
}

/// The default MIV window, in frames (one second at 25 fps, Evalvid's setting).
pub const MIV_WINDOW: usize = 25;

/// For each window of `window` frames (sliding by one), the percentage of frames whose MOS in
/// `received` is below that in `reference`. Shorter runs give one window over all of them.
pub fn miv(received: &[u8], reference: &[u8], window: usize) -> Vec<f64> {
    let n = received.len().min(reference.len());
    if n == 0 {
        return Vec::new();
    }
    let w = window.clamp(1, n);
    let worse: Vec<u32> = (0..n)
        .map(|i| u32::from(received[i] < reference[i]))
        .collect();
    let mut out = Vec::with_capacity(n - w + 1);
    let mut count: u32 = worse[..w].iter().sum();
    out.push(100.0 * count as f64 / w as f64);
    for i in w..n {
        count = count + worse[i] - worse[i - w];
        out.push(100.0 * count as f64 / w as f64);
    }
    out
}

/// How many frames have each MOS (index 0 is MOS 1).
pub fn distribution(mos: &[u8]) -> [u64; 5] {
    let mut d = [0u64; 5];
    for &m in mos {
        d[(m.clamp(1, 5) - 1) as usize] += 1;
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evalvids_table_with_its_boundaries() {
        let cases = [
            (45.0, 5),
            (37.01, 5),
            (37.0, 4),
            (31.5, 4),
            (31.0, 3),
            (25.0, 2),
            (20.5, 2),
            (20.0, 1),
            (5.0, 1),
        ];
        for (p, m) in cases {
            assert_eq!(from_psnr(p), m, "{p} dB");
        }
    }

    #[test]
    fn miv_slides_one_frame_at_a_time() {
        let reference = [5u8; 6];
        let received = [5, 3, 5, 5, 2, 5];
        // Windows of 3: [5,3,5] 1/3, [3,5,5] 1/3, [5,5,2] 1/3, [5,2,5] 1/3.
        let m = miv(&received, &reference, 3);
        assert_eq!(m.len(), 4);
        assert!(m.iter().all(|v| (v - 100.0 / 3.0).abs() < 1e-9), "{m:?}");
        assert_eq!(miv(&received, &reference, 100), vec![200.0 / 6.0]);
        assert_eq!(distribution(&received), [0, 1, 1, 0, 4]);
    }
}
