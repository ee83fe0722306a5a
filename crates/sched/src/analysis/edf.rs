//! The processor-demand test for EDF on one limited-preemptive core.
//!
//! **Criterion.** A constrained-deadline sporadic task set is EDF-schedulable on a processor of
//! speed `b` if `U ≤ b` and, at every absolute deadline `t = k·Tᵢ + Dᵢ` of the synchronous
//! pattern, `h(t) + B(t) ≤ b·t` (if and only if, when `B = 0`), where `h(t) = Σᵢ max(0, ⌊(t − Dᵢ)/Tᵢ⌋ + 1)·Cᵢ` is the demand of the jobs
//! released and due within any window of length `t` (Baruah, Rosier & Howell 1990).
//! `B(t)` is the blocking by a packet of a job due later than the window: George, Rivierre &
//! Spuri (1996) for non-preemptive EDF and Baruah (2005) for limited preemption charge it
//! only while some task has `Dⱼ > t`, so `B(t) = B` for `t < D_max` and `0` after. (Charging
//! `B` for every `t` is also safe but refuses sets that are feasible.) A window in which only
//! zero-cost jobs are due has nothing that could be late and is not charged.
//!
//! **Where to stop (the bound L).** Any of these is correct; the test takes the smallest:
//!
//! 1. `U < b`: `L_a = max(D_max, Σ(Tᵢ − Dᵢ)·Uᵢ / (b − U))`. Since `h(t) ≤ U·t + Σ(Tᵢ − Dᵢ)·Uᵢ`,
//!    a failure at `t ≥ D_max` (where `B(t) = 0`) needs `t < Σ(Tᵢ − Dᵢ)·Uᵢ / (b − U)`;
//!    failures below `D_max` are below `L_a` anyway (the bound of Baruah et al. 1990, with the
//!    blocking term as in George et al.). It is computed from fixed-point upper bounds of the
//!    `Uᵢ` and a lower bound of `b − U`, so it can only come out larger than the true value.
//! 2. The synchronous busy period with blocking: the least `L > 0` with
//!    `B + Σ⌈L/Tᵢ⌉·Cᵢ ≤ b·L` (Spuri 1996; George et al. 1996). Proof sketch: take the first
//!    failing `t > L`; the jobs due by `t` released before `L` bring at most `b·L − B`, those
//!    released in `[L, t)` at most `h(t − L) ≤ b·(t − L) − B(t − L)`, so
//!    `h(t) + B(t) ≤ b·t` — no failure. It is found by fixed-point iteration, given up when it
//!    grows past the other bounds.
//! 3. `U ≤ b`: the hyperperiod `H = lcm(Tᵢ)`. Then `Σ⌈H/Tᵢ⌉·Cᵢ = U·H ≤ b·H` and `H ≥ D_max`, so
//!    the argument of (2) goes through with `B(t) = 0` beyond `D_max`. This is the only bound when
//!    `U = b` exactly, and it is small for harmonic periods.
//!
//! If none applies, or more than [`MAX_POINTS`] deadlines lie below the bound (a utilisation
//! within a hair of the budget), the set is refused as [`EdfViolation::Intractable`]: the safe
//! answer, and one that leaves no headroom anyway.

use super::{compare_utilisation, dur, first_invalid, hyperperiod, scaled_util, utilisation};
use super::{util_bounds, Budget};
use crate::fmt_util::{Ns, Pct};
use crate::task::{TaskParams, TaskProblem};
use serde::Serialize;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::fmt;
use std::time::Duration;

/// The most absolute deadlines [`edf_test`] examines before refusing as intractable.
pub const MAX_POINTS: u64 = 1 << 21;

/// Iterations allowed to find the synchronous busy period.
const MAX_BUSY_ITERATIONS: u32 = 100_000;

/// One checkpoint of the demand test: the jobs due within `at` need `demand` of CPU, plus
/// `blocking` by a packet already in flight, and `available` fits in the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DemandPoint {
    /// Length of the window (an absolute deadline in the synchronous pattern).
    pub at: Duration,
    /// `h(at)`: cost of the jobs released and due within the window.
    pub demand: Duration,
    /// Blocking charged at this point (B before the longest deadline, zero after).
    pub blocking: Duration,
    /// `⌊b·at⌋`: the work the budget allows in the window.
    pub available: Duration,
}

impl DemandPoint {
    /// Demand plus blocking: what the window needs.
    pub fn needed(&self) -> Duration {
        self.demand + self.blocking
    }
}

/// A set the demand test admits.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EdfReport {
    /// Σ Cᵢ/Tᵢ (for display).
    pub utilisation: f64,
    /// The bound L up to which deadlines were checked.
    pub bound: Duration,
    /// How many distinct deadlines were checked.
    pub points_checked: u64,
    /// The checkpoint with the least slack (`available − needed`); `None` for an empty set.
    pub tightest: Option<DemandPoint>,
}

/// Why the demand test refuses a set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum EdfViolation {
    /// Task `task` (an index into the slice) is outside the model.
    Invalid {
        /// Index into the input slice of the first invalid task.
        task: usize,
        /// Which constraint of the task model it breaks.
        problem: TaskProblem,
    },
    /// `U > b`: more work arrives than the budget can ever serve.
    Overload {
        /// Σ Cᵢ/Tᵢ as a fraction of one core (1.0 = 100%), for display.
        utilisation: f64,
        /// The share of the core the pacer may use, which `utilisation` exceeds.
        budget: Budget,
    },
    /// The first window whose jobs need more than the budget allows in it.
    Demand {
        /// The failing checkpoint: `point.needed() > point.available`.
        point: DemandPoint,
        /// Σ Cᵢ/Tᵢ of the whole set as a fraction of one core, for display.
        utilisation: f64,
    },
    /// The exact test would need more than [`MAX_POINTS`] checkpoints (utilisation within a hair
    /// of the budget): refused to stay safe.
    Intractable {
        /// Σ Cᵢ/Tᵢ of the whole set as a fraction of one core, for display.
        utilisation: f64,
        /// Number of absolute deadlines below the bound L; 0 when no bound could be found at
        /// all.
        points: u64,
    },
}

impl fmt::Display for EdfViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EdfViolation::Invalid { task, problem } => write!(f, "task {task}: {problem}"),
            EdfViolation::Overload { utilisation, budget } => write!(
                f,
                "utilisation {} exceeds the {budget} budget",
                Pct(*utilisation)
            ),
            EdfViolation::Demand { point, .. } => write!(
                f,
                "jobs due within {} need {} (incl. {} blocking) but only {} is available",
                Ns(point.at),
                Ns(point.needed()),
                Ns(point.blocking),
                Ns(point.available)
            ),
            EdfViolation::Intractable { utilisation, points } => write!(
                f,
                "utilisation {} is so close to the budget that {points} checkpoints would be needed",
                Pct(*utilisation)
            ),
        }
    }
}

/// Exact EDF schedulability of `tasks` on one core of which the pacer may use `budget`, when a
/// job may wait `blocking` for a lower-priority packet in flight (see the module docs).
pub fn edf_test(
    tasks: &[TaskParams],
    budget: Budget,
    blocking: Duration,
) -> Result<EdfReport, EdfViolation> {
    if let Some((task, problem)) = first_invalid(tasks) {
        return Err(EdfViolation::Invalid { task, problem });
    }
    let utilisation = utilisation(tasks);
    if compare_utilisation(tasks, budget) == Ordering::Greater {
        return Err(EdfViolation::Overload {
            utilisation,
            budget,
        });
    }
    let blocking = blocking.as_nanos().min(u128::from(u64::MAX));
    let intractable = |points| EdfViolation::Intractable {
        utilisation,
        points,
    };
    let bound = demand_bound(tasks, budget, blocking).ok_or(intractable(0))?;
    let points = points_up_to(tasks, bound);
    if points > MAX_POINTS {
        return Err(intractable(points));
    }
    let check = Check {
        tasks,
        budget,
        blocking,
        bound,
        d_max: d_max(tasks),
    };
    match check.scan() {
        Ok((points_checked, tightest)) => Ok(EdfReport {
            utilisation,
            bound: dur(bound),
            points_checked,
            tightest,
        }),
        Err(point) => Err(EdfViolation::Demand { point, utilisation }),
    }
}

/// The smallest of the correct bounds of the module docs, or `None` if none is known.
fn demand_bound(tasks: &[TaskParams], budget: Budget, blocking: u128) -> Option<u128> {
    let by_slope = linear_bound(tasks, budget);
    // U ≤ b holds here, so the hyperperiod is a bound whenever it is known.
    let best = min_opt(by_slope, hyperperiod(tasks));
    let limit = best.unwrap_or(u128::from(u64::MAX));
    min_opt(best, busy_period(tasks, budget, blocking, limit))
}

fn min_opt(a: Option<u128>, b: Option<u128>) -> Option<u128> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// `L_a = max(D_max, ⌈Σ(Tᵢ − Dᵢ)·Uᵢ / (b − U)⌉)`, rounded up, when `U < b` is certain.
fn linear_bound(tasks: &[TaskParams], budget: Budget) -> Option<u128> {
    let target = u128::from(budget.ppm()) << 40;
    let (_, u_hi) = util_bounds(tasks);
    let slack = target.checked_sub(u_hi).filter(|&s| s > 0)?;
    let excess: u128 = tasks
        .iter()
        .map(|t| (t.t_ns() - t.d_ns()).saturating_mul(scaled_util(t).1))
        .fold(0, u128::saturating_add);
    Some(d_max(tasks).max(excess.div_ceil(slack)))
}

/// The least `L` with `B + Σ⌈L/Tᵢ⌉·Cᵢ ≤ b·L`, if found below `limit`.
fn busy_period(tasks: &[TaskParams], budget: Budget, blocking: u128, limit: u128) -> Option<u128> {
    let work = |w: u128| -> u128 {
        tasks
            .iter()
            .map(|t| w.div_ceil(t.t_ns()).saturating_mul(t.c_ns()))
            .fold(blocking, u128::saturating_add)
    };
    // Start below the least positive fixed point: every task has at least one job in it.
    let mut w = budget.stretch(
        tasks
            .iter()
            .map(|t| t.c_ns())
            .fold(blocking, u128::saturating_add),
    );
    for _ in 0..MAX_BUSY_ITERATIONS {
        if w > limit {
            return None;
        }
        let next = budget.stretch(work(w));
        if next == w {
            return Some(w);
        }
        w = next;
    }
    None
}

fn d_max(tasks: &[TaskParams]) -> u128 {
    tasks.iter().map(TaskParams::d_ns).max().unwrap_or(0)
}

/// How many absolute deadlines `k·Tᵢ + Dᵢ` are at most `bound` (counted with repeats).
fn points_up_to(tasks: &[TaskParams], bound: u128) -> u64 {
    let n: u128 = tasks
        .iter()
        .filter(|t| t.d_ns() <= bound)
        .map(|t| (bound - t.d_ns()) / t.t_ns() + 1)
        .fold(0, u128::saturating_add);
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// One run of the demand check over the deadlines up to `bound`.
struct Check<'a> {
    tasks: &'a [TaskParams],
    budget: Budget,
    blocking: u128,
    bound: u128,
    /// Blocking is charged only in windows shorter than this.
    d_max: u128,
}

impl Check<'_> {
    /// Visits the distinct deadlines in increasing order, keeping `h(t)` as a running sum.
    /// Returns how many were checked and the tightest, or the first that fails.
    fn scan(&self) -> Result<(u64, Option<DemandPoint>), DemandPoint> {
        let mut next: BinaryHeap<Reverse<(u128, usize)>> = (self.tasks.iter().enumerate())
            .filter(|(_, t)| t.d_ns() <= self.bound)
            .map(|(i, t)| Reverse((t.d_ns(), i)))
            .collect();
        let mut demand: u128 = 0;
        let mut checked = 0u64;
        let mut tightest: Option<(u128, DemandPoint)> = None;
        while let Some(Reverse((t, i))) = next.pop() {
            let task = &self.tasks[i];
            demand += task.c_ns();
            if t + task.t_ns() <= self.bound {
                next.push(Reverse((t + task.t_ns(), i)));
            }
            if next.peek().is_some_and(|Reverse((u, _))| *u == t) {
                continue; // more jobs due at the same instant
            }
            checked += 1;
            let (slack, point) = self.check(t, demand)?;
            if tightest.as_ref().is_none_or(|(s, _)| slack < *s) {
                tightest = Some((slack, point));
            }
        }
        Ok((checked, tightest.map(|(_, p)| p)))
    }

    /// `h(t) + B(t) ≤ b·t`? Returns the slack (scaled by 10⁶) and the point, or the failing point.
    fn check(&self, t: u128, demand: u128) -> Result<(u128, DemandPoint), DemandPoint> {
        let blocking = if t < self.d_max { self.blocking } else { 0 };
        let point = DemandPoint {
            at: dur(t),
            demand: dur(demand),
            blocking: dur(blocking),
            available: self.budget.available(dur(t)),
        };
        let needed = demand + blocking;
        // With nothing due (zero-cost jobs only) there is nothing to be late.
        if demand > 0 && !self.budget.fits(needed, t) {
            return Err(point);
        }
        let slack = (t * u128::from(self.budget.ppm())).saturating_sub(needed * super::PPM);
        Ok((slack, point))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::us;
    use super::*;

    fn demand_failure(r: Result<EdfReport, EdfViolation>) -> DemandPoint {
        match r {
            Err(EdfViolation::Demand { point, .. }) => point,
            other => panic!("expected a demand failure, got {other:?}"),
        }
    }

    /// U = 0.75 ≤ 1, yet two jobs of 3 due at 4 and 5 after a common release need 6 in 5:
    /// the utilisation test alone would admit it (Baruah et al. 1990 motivate the demand test
    /// with such sets).
    #[test]
    fn short_deadlines_fail_the_demand_test_below_full_utilisation() {
        let set = [us(8, 4, 3), us(8, 5, 3)];
        let p = demand_failure(edf_test(&set, Budget::FULL, Duration::ZERO));
        assert_eq!(p.at, Duration::from_micros(5));
        assert_eq!(p.demand, Duration::from_micros(6));
        assert_eq!(p.available, Duration::from_micros(5));
        // With the second deadline at 6 the demand fits exactly.
        let ok = edf_test(&[us(8, 4, 3), us(8, 6, 3)], Budget::FULL, Duration::ZERO).unwrap();
        let tight = ok.tightest.unwrap();
        assert_eq!(
            (tight.at, tight.needed()),
            (Duration::from_micros(6), Duration::from_micros(6))
        );
    }

    /// Liu & Layland (1973, Thm 7): with D = T, EDF is feasible iff U ≤ 1; here at a 95% budget.
    #[test]
    fn implicit_deadlines_reduce_to_the_utilisation_bound() {
        let full = [us(2, 2, 1), us(4, 4, 2)]; // U = 1 exactly, harmonic
        let r = edf_test(&full, Budget::FULL, Duration::ZERO).unwrap();
        assert_eq!(r.bound, Duration::from_micros(4)); // the hyperperiod
        let nine_five = [us(100, 100, 95)];
        assert!(edf_test(&nine_five, Budget::percent(95), Duration::ZERO).is_ok());
        let mut over = nine_five;
        over[0].cost += Duration::from_nanos(1);
        assert!(matches!(
            edf_test(&over, Budget::percent(95), Duration::ZERO),
            Err(EdfViolation::Overload { .. })
        ));
        // U = 2/5 + 4/7 = 0.971 (Buttazzo 2005): admitted, checked up to the slope bound.
        assert!(edf_test(&[us(5, 5, 2), us(7, 7, 4)], Budget::FULL, Duration::ZERO).is_ok());
    }

    /// George et al. (1996): blocking counts only in windows shorter than the longest deadline.
    #[test]
    fn blocking_pushes_a_set_over_only_before_the_longest_deadline() {
        let set = [us(10, 4, 2), us(10, 10, 7)]; // U = 0.9
                                                 // t = 4: 2 + B ≤ 4 needs B ≤ 2; t = 10: 9 ≤ 10 with no blocking charged.
        let r = edf_test(&set, Budget::FULL, Duration::from_micros(2)).unwrap();
        let tight = r.tightest.unwrap();
        assert_eq!(tight.at, Duration::from_micros(4));
        assert_eq!(tight.blocking, Duration::from_micros(2));
        let p = demand_failure(edf_test(&set, Budget::FULL, Duration::from_micros(3)));
        let micros = Duration::from_micros;
        assert_eq!(
            (p.at, p.demand, p.blocking),
            (micros(4), micros(2), micros(3))
        );
        // At a 95% budget the window of 4 only holds 3.8: B = 2 now fails.
        let p = demand_failure(edf_test(
            &set,
            Budget::percent(95),
            Duration::from_micros(2),
        ));
        assert_eq!(p.available, Duration::from_nanos(3_800));
    }

    /// U = b exactly with blocking: only the hyperperiod bounds the test, and the set passes.
    #[test]
    fn full_utilisation_with_blocking_is_checked_up_to_the_hyperperiod() {
        let set = [us(2, 2, 1), us(4, 4, 2)];
        let r = edf_test(&set, Budget::FULL, Duration::from_micros(1)).unwrap();
        assert_eq!((r.bound, r.points_checked), (Duration::from_micros(4), 2));
        assert!(edf_test(&set, Budget::FULL, Duration::from_nanos(1_001)).is_err());
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        let r = edf_test(&[], Budget::percent(0), Duration::from_secs(1)).unwrap();
        assert_eq!((r.points_checked, r.tightest), (0, None));
        assert!(matches!(
            edf_test(&[us(10, 5, 1)], Budget::percent(0), Duration::ZERO),
            Err(EdfViolation::Overload { .. })
        ));
        let bad = [us(10, 10, 1), us(0, 0, 0)];
        assert!(matches!(
            edf_test(&bad, Budget::FULL, Duration::ZERO),
            Err(EdfViolation::Invalid {
                task: 1,
                problem: TaskProblem::ZeroPeriod
            })
        ));
        // Blocking longer than any window: fails at the first deadline, never overflows.
        let p = demand_failure(edf_test(
            &[us(10, 5, 1), us(20, 20, 1)],
            Budget::FULL,
            Duration::MAX,
        ));
        assert_eq!(p.at, Duration::from_micros(5));
    }

    /// Co-prime periods near the budget: the hyperperiod is huge, the busy period is not.
    #[test]
    fn near_full_utilisation_with_coprime_periods_stays_tractable() {
        let set = [
            us(1_000, 1_000, 333),
            us(1_009, 900, 330),
            us(1_013, 1_013, 330),
        ];
        let r = edf_test(&set, Budget::FULL, Duration::from_micros(1)).unwrap();
        assert!(r.points_checked < 10_000, "{r:?}");
    }
}
