//! The exact tests against independent, deliberately simple references, on small integer task
//! sets (times in nanoseconds, periods 2..=12, so hyperperiods stay small):
//!
//! - EDF: the processor-demand condition evaluated at *every* integer time up to the hyperperiod
//!   plus the longest deadline, with the blocking term charged below the longest deadline
//!   (George et al. 1996), and `U ≤ b` checked over the hyperperiod.
//! - DM: a tick-by-tick preemptive fixed-priority schedule from the critical instant (every
//!   higher-priority task released together, a blocking packet already running, Liu & Layland
//!   1973 / Audsley et al. 1993), the core serving `b` of each tick.

use metronome_sched::{dm_test, edf_test, Budget, DmViolation, EdfViolation, TaskParams};
use proptest::prelude::*;
use std::time::Duration;

type Raw = (u64, u64, u64); // (period, deadline, cost)

fn params(raw: &[Raw]) -> Vec<TaskParams> {
    raw.iter()
        .map(|&(t, d, c)| TaskParams {
            period: Duration::from_nanos(t),
            deadline: Duration::from_nanos(d),
            cost: Duration::from_nanos(c),
            bitrate_bps: 0,
        })
        .collect()
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn reference_edf(raw: &[Raw], pct: u64, blocking: u64) -> bool {
    let h = raw.iter().fold(1, |h, &(t, _, _)| h / gcd(h, t) * t);
    let work: u64 = raw.iter().map(|&(t, _, c)| c * (h / t)).sum();
    if work * 100 > pct * h {
        return false;
    }
    let d_min = raw.iter().map(|r| r.1).min().unwrap_or(0);
    let d_max = raw.iter().map(|r| r.1).max().unwrap_or(0);
    (d_min..=h + d_max).all(|t| {
        let demand: u64 = raw
            .iter()
            .filter(|&&(_, d, _)| t >= d)
            .map(|&(p, d, c)| ((t - d) / p + 1) * c)
            .sum();
        let b = if t < d_max { blocking } else { 0 };
        demand == 0 || (demand + b) * 100 <= pct * t
    })
}

fn reference_dm(raw: &[Raw], pct: u64, blocking: u64) -> bool {
    let mut order: Vec<usize> = (0..raw.len()).collect();
    order.sort_by_key(|&i| (raw[i].1, i));
    order.iter().enumerate().all(|(rank, &i)| {
        let b = if rank + 1 < order.len() { blocking } else { 0 };
        let hp: Vec<Raw> = order[..rank].iter().map(|&j| raw[j]).collect();
        first_job_meets_deadline(raw[i], &hp, pct, b)
    })
}

/// Work in hundredths of a tick; the core serves `pct` of them per tick, blocking first.
fn first_job_meets_deadline(task: Raw, hp: &[Raw], pct: u64, blocking: u64) -> bool {
    let (_, deadline, cost) = task;
    let mut block = blocking * 100;
    let mut pending = vec![0u64; hp.len()];
    let mut own = cost * 100;
    for tick in 0..deadline {
        for (k, &(t, _, c)) in hp.iter().enumerate() {
            if tick % t == 0 {
                pending[k] += c * 100;
            }
        }
        let mut cap = pct;
        for w in std::iter::once(&mut block).chain(pending.iter_mut()) {
            let served = cap.min(*w);
            *w -= served;
            cap -= served;
        }
        own -= cap.min(own);
        if own == 0 {
            return true;
        }
    }
    own == 0
}

fn task() -> impl Strategy<Value = Raw> {
    (2u64..=12)
        .prop_flat_map(|t| (Just(t), 1..=t))
        .prop_flat_map(|(t, d)| (Just(t), Just(d), 0..d))
}

fn task_set() -> impl Strategy<Value = Vec<Raw>> {
    prop::collection::vec(task(), 1..=5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// The exact EDF test agrees with the brute-force demand check, with and without blocking:
    /// so it never admits a set the reference refuses, and refuses nothing it admits.
    #[test]
    fn edf_test_agrees_with_brute_force(raw in task_set(), pct in 50u64..=100, b in 0u64..=3) {
        let ours = edf_test(&params(&raw), Budget::percent(pct as u32), Duration::from_nanos(b));
        prop_assert!(!matches!(ours, Err(EdfViolation::Intractable { .. })), "{ours:?}");
        prop_assert_eq!(ours.is_ok(), reference_edf(&raw, pct, b), "{:?}", ours);
    }

    /// Response-time analysis agrees with the preemptive schedule from the critical instant.
    #[test]
    fn dm_test_agrees_with_the_critical_instant_schedule(
        raw in task_set(), pct in 50u64..=100, b in 0u64..=3
    ) {
        let ours = dm_test(&params(&raw), Budget::percent(pct as u32), Duration::from_nanos(b));
        prop_assert_eq!(ours.is_ok(), reference_dm(&raw, pct, b), "{:?}", ours);
        if ours.is_ok() {
            prop_assert!(reference_edf(&raw, pct, b), "DM admits what EDF cannot schedule");
        }
    }

    /// Inflating an admitted set's costs by 1 ns at a time, the first refusal comes exactly
    /// when the reference says the set stopped fitting.
    #[test]
    fn inflating_costs_is_refused_exactly_at_the_bound(raw in task_set(), pct in 50u64..=100) {
        let budget = Budget::percent(pct as u32);
        let mut set = raw.clone();
        if edf_test(&params(&set), budget, Duration::ZERO).is_err() {
            return Ok(());
        }
        loop {
            let grown: Vec<Raw> = set.iter().map(|&(t, d, c)| (t, d, (c + 1).min(d - 1))).collect();
            if grown == set {
                break; // every cost is at its deadline: the model allows no more
            }
            let admitted = edf_test(&params(&grown), budget, Duration::ZERO).is_ok();
            prop_assert_eq!(admitted, reference_edf(&grown, pct, 0));
            if !admitted {
                break;
            }
            set = grown;
        }
    }
}

/// A set built to use exactly the budget, in realistic units (periods dividing 12 ms).
fn exact_budget_set() -> impl Strategy<Value = (Vec<TaskParams>, u32)> {
    let h: u64 = 12_000_000;
    let divisors = prop::sample::select(vec![1u64, 2, 3, 4, 6, 12]);
    (
        50u32..=99,
        prop::collection::vec((divisors, 1u64..=10), 1..=6),
    )
        .prop_map(move |(pct, parts)| {
            let work = h / 100 * u64::from(pct);
            let weights: u64 = parts.iter().map(|p| p.1).sum();
            let mut shares: Vec<(u64, u64)> = parts
                .iter()
                .map(|&(m, w)| (m, work * w / weights / m * m))
                .collect();
            shares[0].0 = 1; // the first task takes the rounding remainder
            let used: u64 = shares[1..].iter().map(|s| s.1).sum();
            shares[0].1 = work - used;
            let set = shares
                .iter()
                .map(|&(m, a)| TaskParams {
                    period: Duration::from_nanos(h / m),
                    deadline: Duration::from_nanos(h / m),
                    cost: Duration::from_nanos(a / m),
                    bitrate_bps: 0,
                })
                .collect();
            (set, pct)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Liu & Layland (1973): with D = T and no blocking, U exactly at the budget is admitted
    /// and one more nanosecond per period of any task is refused as an overload.
    #[test]
    fn utilisation_exactly_at_the_budget_is_the_boundary((set, pct) in exact_budget_set(), which in any::<prop::sample::Index>()) {
        let budget = Budget::percent(pct);
        let r = edf_test(&set, budget, Duration::ZERO);
        prop_assert!(r.is_ok(), "{:?}", r);
        let mut over = set.clone();
        let i = which.index(over.len());
        over[i].cost += Duration::from_nanos(1);
        let r = edf_test(&over, budget, Duration::ZERO);
        prop_assert!(matches!(r, Err(EdfViolation::Overload { .. })), "{:?}", r);
        let dm = dm_test(&over, budget, Duration::ZERO);
        prop_assert!(matches!(dm, Err(DmViolation::Overload { .. })), "{:?}", dm);
    }
}
