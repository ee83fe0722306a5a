//! Jitter distributions: each packet's extra delay as `delay + jitter · z`, with `z` drawn
//! from the packet's uniform variate through a quantile function (inverse CDF), so one
//! variate per packet serves every distribution (see the link's "Randomness").
//!
//! The non-uniform ones are netem's (tc-netem(8) `distribution normal | pareto |
//! paretonormal`). netem reads a table of 4096 quantiles (iproute2 `netem/*.c`, scaled by
//! `NETEM_DIST_SCALE` = 8192 into 16 bits) and adds `jitter · table[rnd] / 8192`; here the
//! same quantile functions are evaluated exactly at the packet's variate instead of at the
//! nearest of 4096 steps. The Pareto-based ones are clamped to the 16-bit range as their
//! tables are; the normal is not (its table ends near −4 and +3.4, ours goes on to about ±8
//! at the variate's extremes, once in many millions of packets). In paretonormal, netem's
//! table reads its normal part half a table step higher than its Pareto part; ours takes both
//! at the same variate.

use crate::config::JitterModel;

/// netem's tables hold 16-bit values over a scale of 8192: at most 32767 / 8192.
const TABLE_MAX: f64 = 32767.0 / 8192.0;
const TABLE_MIN: f64 = -32768.0 / 8192.0;

/// `z` at uniform variate `u` in (0, 1) for `model` (uniform: `u` itself, in [0, 1]).
pub fn z(model: JitterModel, u: f64) -> f64 {
    match model {
        JitterModel::Uniform => u,
        JitterModel::Normal { .. } => normal_quantile(u),
        JitterModel::Pareto { .. } => pareto_z(u),
        JitterModel::ParetoNormal { .. } => {
            (0.25 * normal_quantile(u) + 0.75 * pareto_z(u)).clamp(TABLE_MIN, TABLE_MAX)
        }
    }
}

/// iproute2's `pareto` table: a Pareto variate of shape 3 and scale 1, `X = (1 − q)^(−1/3)`
/// (mean 1.5), centred and scaled as `(X − 1.5) · 4/3`, capped at the table's largest value.
/// Its least value is −2/3 (at `q = 0`); its mean, with the cap, is slightly below 0.
pub fn pareto_z(q: f64) -> f64 {
    (((1.0 - q).powf(-1.0 / 3.0) - 1.5) * 4.0 / 3.0).min(TABLE_MAX)
}

/// The standard normal quantile (inverse CDF) at `p` in (0, 1): Acklam's rational
/// approximation, relative error below 1.2·10⁻⁹ (P. J. Acklam, "An algorithm for computing the
/// inverse normal cumulative distribution function", 2003).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const LOW: f64 = 0.024_25;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - LOW {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normal_quantile_matches_known_values() {
        for (p, z) in [
            (0.5, 0.0),
            (0.841_344_746_068_542_9, 1.0),
            (0.158_655_253_931_457_07, -1.0),
            (0.977_249_868_051_820_8, 2.0),
            (0.001_349_898_031_630_103_5, -3.0),
            (0.999_968_328_758_166_9, 4.0),
        ] {
            assert!(
                (normal_quantile(p) - z).abs() < 1e-6,
                "{p}: {}",
                normal_quantile(p)
            );
        }
    }

    #[test]
    fn paretos_by_hand() {
        assert!((pareto_z(0.0) + 2.0 / 3.0).abs() < 1e-12);
        // 1 − q = 1/8: X = 2, z = 0.5 · 4/3.
        assert!((pareto_z(0.875) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(pareto_z(1.0 - 1e-12), TABLE_MAX);
        let pn = z(JitterModel::ParetoNormal { reorder: false }, 0.5);
        let want = 0.25 * 0.0 + 0.75 * pareto_z(0.5);
        assert!((pn - want).abs() < 1e-9);
    }
}
