//! Schedulability tests for the streams of one core, in integer nanoseconds.
//!
//! The pacing thread of a core is *limited-preemptive*: a job is one or more packets, and after
//! every packet the thread re-picks the highest-priority released job, so a job waits for at most
//! one packet of a lower-priority job (the platform's `blocking`, B). The pacer may use a share
//! `b` of the core (its [`Budget`]); both tests treat that as a processor of speed `b`, so work
//! `w` takes `w / b` of time and `b·t` of work fits in an interval of length `t`.
//!
//! - [`edf_test`] ([`edf`]): the processor-demand criterion of Baruah, Rosier & Howell (1990)
//!   for EDF, with the blocking term of George, Rivierre & Spuri (1996) for non-preemptive EDF,
//!   which Baruah (2005) showed also covers limited preemption.
//! - [`dm_test`] ([`dm`]): response-time analysis (Joseph & Pandya 1986; Audsley, Burns,
//!   Richardson, Tindell & Wellings 1993) for deadline-monotonic fixed priorities (Leung &
//!   Whitehead 1982), with blocking.
//!
//! No decision uses floating point: demand is compared with `b·t` by cross-multiplying integers
//! (`u128`), and the utilisation is classified exactly (see [`compare_utilisation`]). The `f64`
//! utilisations in reports are for people.

pub mod dm;
pub mod edf;

pub use dm::{dm_test, priority_order, DmReport, DmViolation};
pub use edf::{edf_test, DemandPoint, EdfReport, EdfViolation, MAX_POINTS};

use crate::task::{TaskParams, TaskProblem};
use serde::Serialize;
use std::cmp::Ordering;
use std::fmt;
use std::time::Duration;

/// Parts per million in a whole core.
const PPM: u128 = 1_000_000;

/// The share of a core the pacer may use, in parts per million (at most 100%).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Budget {
    ppm: u32,
}

impl Budget {
    /// The whole core.
    pub const FULL: Budget = Budget { ppm: 1_000_000 };

    /// `p` percent of the core (clamped to 100).
    pub const fn percent(p: u32) -> Budget {
        Budget::from_ppm(p.saturating_mul(10_000))
    }

    /// `ppm` parts per million of the core (clamped to 1 000 000).
    pub const fn from_ppm(ppm: u32) -> Budget {
        Budget {
            ppm: if ppm > 1_000_000 { 1_000_000 } else { ppm },
        }
    }

    /// A fraction of the core (0.95 = 95%), rounded to the nearest ppm and clamped to
    /// `0..=1` (NaN is zero). For configuration; decisions use the integer ppm.
    pub fn from_fraction(f: f64) -> Budget {
        let ppm = (f * 1e6).round().clamp(0.0, 1e6);
        Budget::from_ppm(if ppm.is_nan() { 0 } else { ppm as u32 })
    }

    /// The budget in parts per million.
    pub const fn ppm(self) -> u32 {
        self.ppm
    }

    /// The budget as a fraction of the core, for display.
    pub fn as_fraction(self) -> f64 {
        f64::from(self.ppm) / 1e6
    }

    /// The work that fits in an interval of length `t`: `⌊b·t⌋`.
    pub fn available(self, t: Duration) -> Duration {
        dur(t.as_nanos().saturating_mul(u128::from(self.ppm)) / PPM)
    }

    /// Whether `work_ns` of work fits in `t_ns` of time: `work ≤ b·t`, exactly.
    pub(crate) fn fits(self, work_ns: u128, t_ns: u128) -> bool {
        work_ns.saturating_mul(PPM) <= t_ns.saturating_mul(u128::from(self.ppm))
    }

    /// The time `work_ns` of work takes on the slower processor: `⌈work / b⌉`
    /// (`u128::MAX` when the budget is zero and there is work).
    pub(crate) fn stretch(self, work_ns: u128) -> u128 {
        if work_ns == 0 {
            0
        } else if self.ppm == 0 {
            u128::MAX
        } else {
            work_ns.saturating_mul(PPM).div_ceil(u128::from(self.ppm))
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, rest) = (self.ppm / 10_000, self.ppm % 10_000);
        if rest == 0 {
            write!(f, "{whole}%")
        } else {
            let frac = format!("{rest:04}");
            write!(f, "{whole}.{}%", frac.trim_end_matches('0'))
        }
    }
}

/// The first task in `tasks` outside the model, with its index.
fn first_invalid(tasks: &[TaskParams]) -> Option<(usize, TaskProblem)> {
    tasks
        .iter()
        .enumerate()
        .find_map(|(i, t)| t.validate().err().map(|p| (i, p)))
}

/// Total utilisation Σ Cᵢ/Tᵢ, for display.
pub fn utilisation(tasks: &[TaskParams]) -> f64 {
    tasks.iter().map(TaskParams::utilisation).sum()
}

/// Fixed-point scale for utilisations: 10⁶·2⁴⁰ (< 2⁶⁰), so a budget in ppm scales exactly and
/// `C·SCALE` stays below 2¹⁰² for valid tasks.
const SCALE: u128 = PPM << 40;

/// Per-task utilisation `Cᵢ/Tᵢ` scaled by [`SCALE`], rounded down and up.
fn scaled_util(t: &TaskParams) -> (u128, u128) {
    let num = t.c_ns().saturating_mul(SCALE); // exact for valid tasks
    let den = t.t_ns().max(1);
    (num / den, num.div_ceil(den))
}

/// Lower and upper bounds of `U·SCALE`; equal when every term is exact.
fn util_bounds(tasks: &[TaskParams]) -> (u128, u128) {
    tasks
        .iter()
        .map(scaled_util)
        .fold((0, 0), |(lo, hi), (l, h)| {
            (lo.saturating_add(l), hi.saturating_add(h))
        })
}

/// Orders two sets of valid tasks by utilisation, exactly: by the fixed-point bounds when they
/// separate, else by the work of each over the common hyperperiod; should that overflow, by the
/// lower bounds (then a tie within ≈ n·10⁻¹⁸ may be broken either way).
pub fn cmp_utilisation(a: &[TaskParams], b: &[TaskParams]) -> Ordering {
    let ((alo, ahi), (blo, bhi)) = (util_bounds(a), util_bounds(b));
    if ahi < blo {
        Ordering::Less
    } else if bhi < alo {
        Ordering::Greater
    } else if alo == ahi && blo == bhi {
        alo.cmp(&blo)
    } else {
        exact_cmp(a, b).unwrap_or(alo.cmp(&blo))
    }
}

fn exact_cmp(a: &[TaskParams], b: &[TaskParams]) -> Option<Ordering> {
    let (ha, hb) = (hyperperiod(a)?, hyperperiod(b)?);
    let h = (ha / gcd(ha, hb)).checked_mul(hb)?;
    Some(work_over(a, h)?.cmp(&work_over(b, h)?))
}

/// `Σ Cᵢ·(h/Tᵢ)`: the work released in `h`, a multiple of every period.
fn work_over(tasks: &[TaskParams], h: u128) -> Option<u128> {
    tasks.iter().try_fold(0u128, |w, t| {
        w.checked_add(t.c_ns().checked_mul(h / t.t_ns().max(1))?)
    })
}

/// Exactly how the utilisation of valid `tasks` compares with `budget`.
///
/// The fixed-point bounds decide unless `U` is within `n/SCALE` (≈ n·10⁻¹⁸) of the budget; then
/// the sums are redone over the hyperperiod `H`: `U ≤ b ⇔ Σ Cᵢ·(H/Tᵢ)·10⁶ ≤ ppm·H`. Should `H`
/// overflow there too, the answer is `Greater`: a refusal, which is the safe side.
pub fn compare_utilisation(tasks: &[TaskParams], budget: Budget) -> Ordering {
    let target = u128::from(budget.ppm) << 40;
    let (lo, hi) = util_bounds(tasks);
    if hi < target {
        Ordering::Less
    } else if lo > target {
        Ordering::Greater
    } else if lo == hi {
        Ordering::Equal // every term exact and the sum is the budget
    } else {
        exact_compare(tasks, budget).unwrap_or(Ordering::Greater)
    }
}

fn exact_compare(tasks: &[TaskParams], budget: Budget) -> Option<Ordering> {
    let h = hyperperiod(tasks)?;
    let left = work_over(tasks, h)?.checked_mul(PPM)?;
    let right = h.checked_mul(u128::from(budget.ppm))?;
    Some(left.cmp(&right))
}

/// The least common multiple of the periods, if it fits in a `u128`.
pub(crate) fn hyperperiod(tasks: &[TaskParams]) -> Option<u128> {
    tasks.iter().try_fold(1u128, |acc, t| {
        let p = t.t_ns().max(1);
        (acc / gcd(acc, p)).checked_mul(p)
    })
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Nanoseconds to a `Duration`, saturating at `u64::MAX` nanoseconds.
pub(crate) fn dur(ns: u128) -> Duration {
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

#[cfg(test)]
pub(crate) mod test_util {
    use crate::TaskParams;
    use std::time::Duration;

    /// A task in integer "ticks" of 1 µs: (period, deadline, cost).
    pub(crate) fn us(t: u64, d: u64, c: u64) -> TaskParams {
        TaskParams {
            period: Duration::from_micros(t),
            deadline: Duration::from_micros(d),
            cost: Duration::from_micros(c),
            bitrate_bps: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::us;
    use super::*;

    #[test]
    fn budget_clamps_scales_and_prints() {
        assert_eq!(Budget::percent(95).ppm(), 950_000);
        assert_eq!(Budget::percent(250), Budget::FULL);
        assert_eq!(Budget::from_fraction(0.95), Budget::percent(95));
        assert_eq!(Budget::from_fraction(2.0), Budget::FULL);
        assert_eq!(Budget::from_fraction(-1.0).ppm(), 0);
        assert_eq!(Budget::from_fraction(f64::NAN).ppm(), 0);
        assert_eq!(Budget::from_ppm(955_000).to_string(), "95.5%");
        assert_eq!(Budget::percent(95).to_string(), "95%");
        let b = Budget::percent(95);
        assert_eq!(
            b.available(Duration::from_micros(100)),
            Duration::from_micros(95)
        );
        assert!(b.fits(95, 100) && !b.fits(96, 100));
        assert_eq!(b.stretch(95), 100);
        assert_eq!(b.stretch(96), 102); // ⌈96/0.95⌉ = ⌈101.05⌉
        assert_eq!(Budget::percent(0).stretch(1), u128::MAX);
        assert_eq!(Budget::percent(0).stretch(0), 0);
    }

    #[test]
    fn utilisation_is_classified_exactly_even_when_thirds_do_not_scale() {
        let thirds = [us(3, 3, 1), us(6, 6, 2), us(9, 9, 3)];
        assert_eq!(compare_utilisation(&thirds, Budget::FULL), Ordering::Equal);
        let more = [us(3, 3, 1), us(6, 6, 2), us(9_000, 9_000, 3_001)];
        assert_eq!(compare_utilisation(&more, Budget::FULL), Ordering::Greater);
        let less = [us(3, 3, 1), us(6, 6, 2), us(9_000, 9_000, 2_999)];
        assert_eq!(compare_utilisation(&less, Budget::FULL), Ordering::Less);
        assert_eq!(
            compare_utilisation(&[us(100, 100, 95)], Budget::percent(95)),
            Ordering::Equal
        );
        assert_eq!(
            compare_utilisation(&[], Budget::percent(0)),
            Ordering::Equal
        );
        assert_eq!(hyperperiod(&thirds), Some(18_000));
        // 1/3 + 1/3 against 2/3: a tie, though the rounded fixed-point sums differ.
        let (a, b) = ([us(3, 3, 1), us(3, 3, 1)], [us(3, 3, 2)]);
        assert_eq!(cmp_utilisation(&a, &b), Ordering::Equal);
        assert_eq!(
            cmp_utilisation(&a, &[us(3, 3, 2), us(1000, 1000, 1)]),
            Ordering::Less
        );
        assert_eq!(cmp_utilisation(&[us(7, 7, 1)], &[]), Ordering::Greater);
    }
}
