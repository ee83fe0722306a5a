//! Admission control as a whole: what it admits runs without a deadline miss on the simulated
//! pacer, the link is never oversubscribed, worst fit spreads the load, and a refusal says where
//! and by how much.

use metronome_sched::{
    cmp_utilisation, dm_test, edf_test, simulate, Admission, Budget, CpuCause, Platform, Policy,
    Refusal, Release, SimTask, TaskParams,
};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::Duration;

/// Periods from a small menu (ms) keep hyperperiods, and so exact utilisation sums, small.
const PERIODS_MS: [u64; 8] = [1, 2, 3, 4, 5, 8, 10, 20];

#[derive(Clone, Debug)]
struct Candidate {
    period: Duration,
    deadline_pct: u64,
    packets: u32,
    packet_cost: Duration,
    phase_permille: u64,
}

impl Candidate {
    fn sim(&self, release: Release, phased: bool) -> SimTask {
        let cost = self.packet_cost * self.packets;
        let deadline =
            (self.period * self.deadline_pct as u32 / 100).max(cost + Duration::from_nanos(1));
        let phase = if phased {
            self.period * self.phase_permille as u32 / 1000
        } else {
            Duration::ZERO
        };
        SimTask {
            phase,
            period: self.period,
            deadline: deadline.min(self.period),
            packets: self.packets,
            packet_cost: self.packet_cost,
            release,
        }
    }
}

/// A stream using 2–45% of a core, in packets of 20–300 µs.
fn candidate() -> impl Strategy<Value = Candidate> {
    (
        prop::sample::select(PERIODS_MS.to_vec()),
        30u64..=100,
        20u64..=300,
        20u64..=450,
        0u64..1000,
    )
        .prop_map(|(p, deadline_pct, packet_us, permille, phase_permille)| {
            let period = Duration::from_millis(p);
            let packet_cost = Duration::from_micros(packet_us);
            let cost = period * permille as u32 / 1000;
            let packets = (cost.as_nanos() / packet_cost.as_nanos()).max(1) as u32;
            Candidate {
                period,
                deadline_pct,
                packets,
                packet_cost,
                phase_permille,
            }
        })
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![Just(Policy::Edf), Just(Policy::Dm)]
}

/// Admits the candidates in order; returns each core's admitted sim tasks, in admission order.
fn admit_all(a: &mut Admission, cands: &[Candidate]) -> Vec<Vec<Candidate>> {
    let mut per_core = vec![Vec::new(); a.platform().cores];
    for (id, c) in cands.iter().enumerate() {
        let task = c.sim(Release::Periodic, false).params(1_000_000);
        if let Ok(p) = a.try_admit(id as u64, &format!("s{id}"), task) {
            per_core[p.core].push(c.clone());
        }
    }
    per_core
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever admission accepts (blocking = the largest packet cost) meets every deadline on
    /// the simulated limited-preemptive pacer: released together (the critical instant), with
    /// random phases, and sporadically. DM response times also stay within the analysis bound.
    #[test]
    fn admitted_sets_never_miss_a_deadline_in_simulation(
        cands in prop::collection::vec(candidate(), 4..=24),
        policy in policy(),
        cores in 1usize..=3,
        budget in 70u32..=100,
        seed in any::<u64>(),
    ) {
        let blocking = cands.iter().map(|c| c.packet_cost).max().unwrap_or_default();
        let platform = Platform { cores, budget: Budget::percent(budget), link_capacity_bps: None, blocking };
        let mut a = Admission::new(policy, platform);
        for core_set in admit_all(&mut a, &cands) {
            for (release, phased) in [
                (Release::Periodic, false),
                (Release::Periodic, true),
                (Release::Sporadic { max_extra: Duration::from_millis(1) }, true),
            ] {
                let tasks: Vec<SimTask> = core_set.iter().map(|c| c.sim(release, phased)).collect();
                let out = simulate(policy, &tasks, Duration::from_millis(120), seed);
                prop_assert_eq!(out.deadline_misses, 0, "seed {} {:?} {:?}: {:?}", seed, policy, tasks, out);
                if policy == Policy::Dm {
                    let params: Vec<TaskParams> = tasks.iter().map(|t| t.params(0)).collect();
                    let bound = dm_test(&params, platform.budget, blocking).unwrap();
                    for (o, r) in out.tasks.iter().zip(&bound.response_times) {
                        prop_assert!(o.worst_response <= *r, "seed {}: {:?} > {:?}", seed, o, r);
                    }
                }
            }
        }
    }

    /// Worst fit: every stream goes to a least loaded core among those that stay feasible, and
    /// a refusal means no core is feasible and names a least loaded core with a percentage.
    #[test]
    fn placement_is_worst_fit_and_refusals_name_a_core(
        cands in prop::collection::vec(candidate(), 1..=16),
        policy in policy(),
        cores in 1usize..=4,
        blocking_us in 0u64..=50,
    ) {
        let blocking = Duration::from_micros(blocking_us);
        let platform = Platform { cores, budget: Budget::percent(90), link_capacity_bps: None, blocking };
        let mut a = Admission::new(policy, platform);
        for (id, c) in cands.iter().enumerate() {
            let task = c.sim(Release::Periodic, false).params(0);
            let snap = a.snapshot();
            let sets: Vec<Vec<TaskParams>> =
                snap.cores.iter().map(|core| core.streams.iter().map(|s| s.task).collect()).collect();
            let fits: Vec<bool> = sets.iter().map(|s| feasible(policy, s, task, platform)).collect();
            let least = |pred: &dyn Fn(usize) -> bool| {
                (0..cores).filter(|&i| pred(i)).min_by(|&i, &j| cmp_utilisation(&sets[i], &sets[j]))
            };
            match a.try_admit(id as u64, &format!("s{id}"), task) {
                Ok(p) => prop_assert_eq!(Some(p.core), least(&|i| fits[i])),
                Err(r) => {
                    prop_assert!(fits.iter().all(|f| !f), "refused though a core fits: {}", r);
                    let Refusal::Cpu { core, .. } = &r else {
                        return Err(TestCaseError::fail(format!("not a CPU refusal: {r}")));
                    };
                    prop_assert_eq!(Some(*core), least(&|_| true));
                    let msg = r.to_string();
                    prop_assert!(msg.contains(&format!("core {core}")) && msg.contains('%'), "{}", msg);
                }
            }
        }
    }

    /// The declared link capacity is never exceeded, the used rate is the sum of what is
    /// admitted, and releasing a stream frees its rate.
    #[test]
    fn the_link_is_never_oversubscribed(
        ops in prop::collection::vec((any::<bool>(), 0u64..=40_000_000, any::<prop::sample::Index>()), 1..60),
        capacity in 1_000_000u64..=100_000_000,
    ) {
        let platform = Platform {
            cores: 2,
            budget: Budget::percent(95),
            link_capacity_bps: Some(capacity),
            blocking: Duration::from_micros(1),
        };
        let mut a = Admission::new(Policy::Edf, platform);
        let mut model: BTreeMap<u64, u64> = BTreeMap::new();
        for (id, (admit, bps, pick)) in ops.into_iter().enumerate() {
            if admit || model.is_empty() {
                let task = TaskParams {
                    period: Duration::from_millis(10),
                    deadline: Duration::from_millis(10),
                    cost: Duration::from_micros(1),
                    bitrate_bps: bps,
                };
                let used: u64 = model.values().sum();
                match a.try_admit(id as u64, "s", task) {
                    Ok(_) => {
                        prop_assert!(used + bps <= capacity);
                        model.insert(id as u64, bps);
                    }
                    Err(Refusal::Link { needed_bps, .. }) => {
                        prop_assert!(used + bps > capacity);
                        prop_assert_eq!(needed_bps, used + bps);
                    }
                    Err(r) => return Err(TestCaseError::fail(format!("unexpected refusal: {r}"))),
                }
            } else {
                let victim = *model.keys().nth(pick.index(model.len())).unwrap();
                let before = a.link_used_bps();
                prop_assert!(a.release(victim));
                prop_assert!(!a.release(victim));
                prop_assert_eq!(a.link_used_bps(), before - model.remove(&victim).unwrap());
            }
            prop_assert_eq!(a.link_used_bps(), model.values().sum::<u64>());
            prop_assert!(a.link_used_bps() <= capacity);
            prop_assert_eq!(a.admitted(), model.len());
        }
    }

    /// Identical streams are dealt round-robin: per-core counts never differ by more than one.
    #[test]
    fn worst_fit_spreads_identical_streams(cores in 1usize..=4, n in 1usize..=24, policy in policy()) {
        let platform = Platform { cores, budget: Budget::percent(95), link_capacity_bps: None, blocking: Duration::ZERO };
        let mut a = Admission::new(policy, platform);
        let task = TaskParams {
            period: Duration::from_millis(10),
            deadline: Duration::from_millis(10),
            cost: Duration::from_micros(300),
            bitrate_bps: 0,
        };
        for id in 0..n {
            let p = a.try_admit(id as u64, "same", task).unwrap();
            prop_assert_eq!(p.core, id % cores);
        }
        let counts: Vec<usize> = a.snapshot().cores.iter().map(|c| c.streams.len()).collect();
        prop_assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "{:?}", counts);
    }
}

fn feasible(policy: Policy, set: &[TaskParams], task: TaskParams, p: Platform) -> bool {
    let mut all = set.to_vec();
    all.push(task);
    match policy {
        Policy::Edf => edf_test(&all, p.budget, p.blocking).is_ok(),
        Policy::Dm => dm_test(&all, p.budget, p.blocking).is_ok(),
    }
}

/// Two cores, both too full: the refusal names the less loaded one and its percentage.
#[test]
fn a_set_refused_by_every_core_reports_the_most_promising_one() {
    let platform = Platform {
        cores: 2,
        budget: Budget::percent(95),
        link_capacity_bps: None,
        blocking: Duration::ZERO,
    };
    let mut a = Admission::new(Policy::Edf, platform);
    let t = |cost_us| TaskParams {
        period: Duration::from_millis(1),
        deadline: Duration::from_millis(1),
        cost: Duration::from_micros(cost_us),
        bitrate_bps: 8_000_000,
    };
    assert_eq!(a.try_admit(1, "a", t(900)).unwrap().core, 0);
    assert_eq!(a.try_admit(2, "b", t(800)).unwrap().core, 1);
    let r = a.try_admit(3, "cam7", t(200)).unwrap_err();
    match &r {
        Refusal::Cpu {
            core: 1,
            cause:
                CpuCause::Utilisation {
                    excess_bps: Some(2_000_000),
                },
            ..
        } => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r.to_string(),
        "admitting 'cam7' would put core 1 (the least loaded of 2) at 100.0% of its 95% budget; \
         free 5.0% of that core (about 2.0 Mbit/s of streams like this one) or add a core"
    );
}
