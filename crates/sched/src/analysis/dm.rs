//! Response-time analysis for deadline-monotonic fixed priorities on one limited-preemptive core.
//!
//! Priorities follow Leung & Whitehead (1982): shorter relative deadline first, ties to the lower
//! index (the dispatcher breaks ties by stream index the same way). The worst-case response time
//! of task `i` is the least fixed point of
//!
//! ```text
//! R = ⌈(Cᵢ + Bᵢ + Σ_{j ∈ hp(i)} ⌈R/Tⱼ⌉·Cⱼ) / b⌉
//! ```
//!
//! (Joseph & Pandya 1986; Audsley, Burns, Richardson, Tindell & Wellings 1993), found by iterating
//! from `⌈(Cᵢ + Bᵢ + Σ Cⱼ)/b⌉` and stopping as soon as `R > Dᵢ`. `Bᵢ` is one packet of a
//! lower-priority job in flight, so every task but the lowest-priority one gets it.
//!
//! Why this is safe under limited preemption: every higher-priority job released while task `i`'s
//! job is pending is charged in full, including those released during its own last packet, so the
//! bound does not fall into the trap Bril, Lukkien & Verhaegh (2009) found in analyses of
//! deferred preemption that stop counting interference once the final non-preemptive part
//! starts. With `R ≤ Dᵢ ≤ Tᵢ` the level-i busy period ends before the next job of `i`, so the
//! first job is the worst.

use super::{compare_utilisation, dur, first_invalid, utilisation, Budget};
use crate::fmt_util::{Ns, Pct};
use crate::task::{TaskParams, TaskProblem};
use serde::Serialize;
use std::cmp::Ordering;
use std::fmt;
use std::time::Duration;

/// Iterations allowed per task before giving up (and refusing).
const MAX_ITERATIONS: u32 = 1_000_000;

/// A set the response-time analysis admits.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DmReport {
    /// Σ Cᵢ/Tᵢ (for display).
    pub utilisation: f64,
    /// Worst-case response time of each task, in the order of the input slice.
    pub response_times: Vec<Duration>,
    /// Task indices from highest to lowest priority.
    pub priority_order: Vec<usize>,
}

/// Why the response-time analysis refuses a set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum DmViolation {
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
    /// Task `task` (the highest-priority one that fails) may respond in at least
    /// `response_at_least`, past its `deadline`.
    Deadline {
        /// Index into the input slice of the failing task.
        task: usize,
        /// The first iterate of the recurrence past the deadline: a lower bound of the task's
        /// worst-case response time (the true value may be larger).
        response_at_least: Duration,
        /// The task's relative deadline.
        deadline: Duration,
        /// Σ Cᵢ/Tᵢ of the whole set as a fraction of one core, for display.
        utilisation: f64,
    },
}

impl fmt::Display for DmViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DmViolation::Invalid { task, problem } => write!(f, "task {task}: {problem}"),
            DmViolation::Overload {
                utilisation,
                budget,
            } => write!(
                f,
                "utilisation {} exceeds the {budget} budget",
                Pct(*utilisation)
            ),
            DmViolation::Deadline {
                task,
                response_at_least,
                deadline,
                ..
            } => write!(
                f,
                "task {task} may respond in {} or more, past its {} deadline",
                Ns(*response_at_least),
                Ns(*deadline)
            ),
        }
    }
}

/// Deadline-monotonic schedulability of `tasks` on one core of which the pacer may use `budget`,
/// when a job may wait `blocking` for a lower-priority packet in flight (see the module docs).
pub fn dm_test(
    tasks: &[TaskParams],
    budget: Budget,
    blocking: Duration,
) -> Result<DmReport, DmViolation> {
    if let Some((task, problem)) = first_invalid(tasks) {
        return Err(DmViolation::Invalid { task, problem });
    }
    let utilisation = utilisation(tasks);
    if compare_utilisation(tasks, budget) == Ordering::Greater {
        return Err(DmViolation::Overload {
            utilisation,
            budget,
        });
    }
    let order = priority_order(tasks);
    let blocking = blocking.as_nanos().min(u128::from(u64::MAX));
    let mut response_times = vec![Duration::ZERO; tasks.len()];
    for (rank, &i) in order.iter().enumerate() {
        let hp: Vec<&TaskParams> = order[..rank].iter().map(|&j| &tasks[j]).collect();
        let b_i = if rank + 1 < order.len() { blocking } else { 0 };
        match response_time(&tasks[i], b_i, &hp, budget) {
            Ok(r) => response_times[i] = dur(r),
            Err(r) => {
                return Err(DmViolation::Deadline {
                    task: i,
                    response_at_least: dur(r),
                    deadline: tasks[i].deadline,
                    utilisation,
                })
            }
        }
    }
    Ok(DmReport {
        utilisation,
        response_times,
        priority_order: order,
    })
}

/// Task indices by deadline-monotonic priority: shorter deadline first, ties to the lower index.
pub fn priority_order(tasks: &[TaskParams]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by_key(|&i| (tasks[i].deadline, i));
    order
}

/// The least fixed point of the response-time recurrence, or the first iterate past the
/// deadline (a lower bound of the response time) as the error.
fn response_time(
    task: &TaskParams,
    blocking: u128,
    hp: &[&TaskParams],
    budget: Budget,
) -> Result<u128, u128> {
    if task.c_ns() == 0 {
        return Ok(0); // nothing to send: done on release, whatever runs
    }
    let own = task.c_ns().saturating_add(blocking);
    let interference = |r: u128| -> u128 {
        hp.iter()
            .map(|j| r.div_ceil(j.t_ns()).saturating_mul(j.c_ns()))
            .fold(own, u128::saturating_add)
    };
    let mut r = budget.stretch(hp.iter().map(|j| j.c_ns()).fold(own, u128::saturating_add));
    for _ in 0..MAX_ITERATIONS {
        if r > task.d_ns() {
            return Err(r);
        }
        let next = budget.stretch(interference(r));
        if next == r {
            return Ok(r);
        }
        r = next;
    }
    Err(r)
}

#[cfg(test)]
mod tests {
    use super::super::edf_test;
    use super::super::test_util::us;
    use super::*;

    fn micros(v: u64) -> Duration {
        Duration::from_micros(v)
    }

    /// Buttazzo (2005, "Rate Monotonic vs. EDF: Judgment Day", Fig. 1): U = 2/5 + 4/7 ≈ 0.97.
    /// EDF schedules it; under fixed priorities τ2 sees two jobs of τ1 and ends at 8 > 7.
    #[test]
    fn edf_admits_what_dm_refuses() {
        let set = [us(5, 5, 2), us(7, 7, 4)];
        assert!(edf_test(&set, Budget::FULL, Duration::ZERO).is_ok());
        match dm_test(&set, Budget::FULL, Duration::ZERO) {
            Err(DmViolation::Deadline {
                task: 1,
                response_at_least,
                ..
            }) => assert_eq!(response_at_least, micros(8)),
            other => panic!("{other:?}"),
        }
    }

    /// Liu & Layland (1973): for two tasks the worst case is T₂ ≈ √2·T₁, C₁ = T₂ − T₁,
    /// C₂ = T₁ − C₁·… In integers (T₁ = 10, T₂ = 14, C₁ = 4) the largest C₂ is 6
    /// (U = 0.829, the bound 2(√2 − 1) = 0.828); C₂ = 7 (U = 0.9) fails DM but not EDF.
    #[test]
    fn liu_layland_two_task_boundary() {
        let at_bound = [us(10, 10, 4), us(14, 14, 6)];
        let r = dm_test(&at_bound, Budget::FULL, Duration::ZERO).unwrap();
        assert_eq!(r.response_times, vec![micros(4), micros(10)]);
        let over = [us(10, 10, 4), us(14, 14, 7)];
        assert!(matches!(
            dm_test(&over, Budget::FULL, Duration::ZERO),
            Err(DmViolation::Deadline { task: 1, .. })
        ));
        assert!(edf_test(&over, Budget::FULL, Duration::ZERO).is_ok());
        // Harmonic periods reach U = 1 under fixed priorities too.
        let harmonic = [us(2, 2, 1), us(4, 4, 2)];
        let r = dm_test(&harmonic, Budget::FULL, Duration::ZERO).unwrap();
        assert_eq!(r.response_times, vec![micros(1), micros(4)]);
    }

    /// Deadline-monotonic, not rate-monotonic: the short-deadline task goes first, whatever its
    /// period; blocking is charged to every task but the last.
    #[test]
    fn priorities_follow_deadlines_and_blocking_spares_the_lowest() {
        let set = [us(10, 10, 3), us(20, 4, 1), us(30, 10, 2)];
        let r = dm_test(&set, Budget::FULL, micros(1)).unwrap();
        assert_eq!(r.priority_order, vec![1, 0, 2]); // tie at D = 10 → lower index
                                                     // τ1: 1 + B = 2; τ0: 3 + B + 1 = 5; τ2 (lowest, no B): 2 + 3 + 1 = 6.
        assert_eq!(r.response_times, vec![micros(5), micros(2), micros(6)]);
        // B = 3: τ1 needs 1 + 3 = 4 ≤ 4, τ0 needs 3 + 3 + 1 = 7 ≤ 10; B = 4 breaks τ1.
        assert!(dm_test(&set, Budget::FULL, micros(3)).is_ok());
        assert!(matches!(
            dm_test(&set, Budget::FULL, micros(4)),
            Err(DmViolation::Deadline { task: 1, .. })
        ));
    }

    /// A budget below 100% is a slower processor: every response stretches by 1/b.
    #[test]
    fn budget_stretches_response_times() {
        let set = [us(10, 10, 4), us(14, 14, 6)];
        // U = 0.829: over an 80% budget outright.
        assert!(matches!(
            dm_test(&set, Budget::percent(80), Duration::ZERO),
            Err(DmViolation::Overload { .. })
        ));
        // At 90%, τ2: (6 + 4)/0.9 = 11.1 > 10, so two jobs of τ1: (6 + 8)/0.9 = 15.6 > 14.
        let r = dm_test(&set, Budget::percent(90), Duration::ZERO);
        assert!(
            matches!(r, Err(DmViolation::Deadline { task: 1, .. })),
            "{r:?}"
        );
        let r = dm_test(&[us(10, 10, 4)], Budget::percent(80), Duration::ZERO).unwrap();
        assert_eq!(r.response_times, vec![micros(5)]);
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        let r = dm_test(&[], Budget::percent(0), Duration::MAX).unwrap();
        assert!(r.response_times.is_empty());
        assert!(matches!(
            dm_test(&[us(10, 5, 1)], Budget::percent(0), Duration::ZERO),
            Err(DmViolation::Overload { .. })
        ));
        assert!(matches!(
            dm_test(&[us(10, 12, 1)], Budget::FULL, Duration::ZERO),
            Err(DmViolation::Invalid { task: 0, .. })
        ));
        assert!(dm_test(&[us(10, 5, 1), us(10, 9, 1)], Budget::FULL, Duration::MAX).is_err());
    }
}
