//! A scenario's `[[claim]]`s (what a source concluded) checked against a run: each side is a
//! metric at one point, or the difference between two points, picked by their sweep values.
//!
//! With replicates (`replicates = N`), each side is had once per replicate, and the verdict
//! comes from the replicates' differences (left − right): their mean and its 95 % confidence
//! interval (Student's t, N − 1 degrees of freedom). The claim agrees when the whole interval
//! is on its side of zero, differs when the whole interval is on the other, and is
//! inconclusive when the interval holds zero. One replicate gives a verdict from the two
//! values alone, without an interval. The figures are [`crate::estimates`]'s.

use crate::estimates::{metric, replicate_of, Estimate};
use crate::results::{PointResult, Summary};
use metronome_config::scenario::{Claim, ClaimOp, Evidence, ScenarioFile};
use std::collections::BTreeMap;

/// A claim and what the run says of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub claim: Claim,
    /// The two sides' values (their means over the replicates), or why they could not be had
    /// (a point not run, no such figure).
    pub values: Result<(f64, f64), String>,
    /// Each replicate's `(replicate, left, right)`.
    pub replicates: Vec<(u32, f64, f64)>,
    /// The claim's evidence at the same points, in its order.
    pub evidence: Vec<Shown>,
}

/// A figure shown under a claim: its value at the claim's two sides.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    pub evidence: Evidence,
    /// Each replicate's `(replicate, left, right)`, or why it could not be had.
    pub replicates: Result<Vec<(u32, f64, f64)>, String>,
}

impl Shown {
    /// The left side over the replicates (`None`: not had).
    pub fn left(&self) -> Option<Estimate> {
        let r = self.replicates.as_ref().ok()?;
        Some(Estimate::of(&side_of(r, Side::Left)))
    }

    /// The right side over the replicates.
    pub fn right(&self) -> Option<Estimate> {
        let r = self.replicates.as_ref().ok()?;
        Some(Estimate::of(&side_of(r, Side::Right)))
    }

    /// Left less right, replicate by replicate.
    pub fn difference(&self) -> Option<Estimate> {
        let r = self.replicates.as_ref().ok()?;
        Some(Estimate::of(&side_of(r, Side::Difference)))
    }
}

/// What the run says of a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Agrees,
    Differs,
    /// The replicates' interval holds no difference as well as the claimed one.
    Inconclusive,
    /// A side could not be had.
    NotKnown,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Agrees => "agrees",
            Verdict::Differs => "differs",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotKnown => "not known",
        }
    }
}

/// Which of a claim's figures, per replicate.
#[derive(Clone, Copy)]
enum Side {
    Left,
    Right,
    Difference,
}

fn side_of(replicates: &[(u32, f64, f64)], side: Side) -> Vec<f64> {
    replicates
        .iter()
        .map(|&(_, l, r)| match side {
            Side::Left => l,
            Side::Right => r,
            Side::Difference => l - r,
        })
        .collect()
}

impl Checked {
    /// The left side over the replicates.
    pub fn left(&self) -> Estimate {
        Estimate::of(&side_of(&self.replicates, Side::Left))
    }

    /// The right side over the replicates.
    pub fn right(&self) -> Estimate {
        Estimate::of(&side_of(&self.replicates, Side::Right))
    }

    /// Left less right, replicate by replicate.
    pub fn difference(&self) -> Estimate {
        Estimate::of(&side_of(&self.replicates, Side::Difference))
    }

    /// What the run says (see the module).
    pub fn verdict(&self) -> Verdict {
        if self.values.is_err() || self.replicates.is_empty() {
            return Verdict::NotKnown;
        }
        let d = self.difference();
        // The claim as "the difference is below zero".
        let sign = match self.claim.op {
            ClaimOp::Less => 1.0,
            ClaimOp::Greater => -1.0,
        };
        let (m, h) = (sign * d.mean, d.half_width.unwrap_or(0.0));
        if m + h < 0.0 {
            Verdict::Agrees
        } else if m - h > 0.0 || (h == 0.0 && m == 0.0) {
            Verdict::Differs
        } else {
            Verdict::Inconclusive
        }
    }

    /// Whether the run agrees (`None`: not known, or inconclusive).
    pub fn holds(&self) -> Option<bool> {
        match self.verdict() {
            Verdict::Agrees => Some(true),
            Verdict::Differs => Some(false),
            Verdict::Inconclusive | Verdict::NotKnown => None,
        }
    }
}

/// The scenario's claims (read back from the text the run used).
pub fn claims_of(s: &Summary) -> Vec<Claim> {
    let Ok(file) = ScenarioFile::parse(&s.scenario.text, &s.scenario.origin) else {
        return Vec::new();
    };
    let Some(first) = file.points().into_iter().next() else {
        return Vec::new();
    };
    file.resolve(&first).map(|sc| sc.claims).unwrap_or_default()
}

/// Every claim of the run's scenario, checked.
pub fn check(s: &Summary) -> Vec<Checked> {
    claims_of(s).into_iter().map(|c| checked(s, c)).collect()
}

const NO_COMMON_REPLICATE: &str = "the two sides have no replicate in common in this run";

fn checked(s: &Summary, claim: Claim) -> Checked {
    let (flow, metric) = (claim.flow.as_deref(), claim.metric.as_str());
    let both = both_sides(s, &claim, flow, metric);
    let values = match &both {
        Err(e) => Err(e.clone()),
        Ok(r) if r.is_empty() => Err(NO_COMMON_REPLICATE.into()),
        Ok(r) => Ok((
            Estimate::of(&side_of(r, Side::Left)).mean,
            Estimate::of(&side_of(r, Side::Right)).mean,
        )),
    };
    let evidence = claim
        .evidence
        .iter()
        .map(|e| Shown {
            replicates: both_sides(s, &claim, e.flow.as_deref(), &e.metric).and_then(|r| {
                if r.is_empty() {
                    Err(NO_COMMON_REPLICATE.into())
                } else {
                    Ok(r)
                }
            }),
            evidence: e.clone(),
        })
        .collect();
    Checked {
        values,
        replicates: both.unwrap_or_default(),
        evidence,
        claim,
    }
}

/// `metric` of `flow` at the claim's two sides: `(replicate, left, right)` for each
/// replicate both have.
fn both_sides(
    s: &Summary,
    c: &Claim,
    flow: Option<&str>,
    metric: &str,
) -> Result<Vec<(u32, f64, f64)>, String> {
    let l = side(s, flow, metric, &c.lhs)?;
    let r = side(s, flow, metric, &c.rhs)?;
    Ok(l.iter()
        .filter_map(|(k, lv)| r.get(k).map(|rv| (*k, *lv, *rv)))
        .collect())
}

/// A side's value in each replicate of the run.
fn side(
    s: &Summary,
    flow: Option<&str>,
    name: &str,
    sel: &[BTreeMap<String, String>],
) -> Result<BTreeMap<u32, f64>, String> {
    let mut v = Vec::with_capacity(2);
    for m in sel {
        let mut by_replicate = BTreeMap::new();
        for p in points(s, m)? {
            by_replicate.insert(replicate_of(p), metric(p, flow, name)?);
        }
        v.push(by_replicate);
    }
    Ok(match v.as_slice() {
        [a] => a.clone(),
        [a, b] => a
            .iter()
            .filter_map(|(k, x)| b.get(k).map(|y| (*k, x - y)))
            .collect(),
        _ => return Err("a side picks one point or two".into()),
    })
}

/// The points `sel` picks: one, or one per replicate.
fn points<'a>(
    s: &'a Summary,
    sel: &BTreeMap<String, String>,
) -> Result<Vec<&'a PointResult>, String> {
    let found: Vec<&PointResult> = s
        .points
        .iter()
        .filter(|p| sel.iter().all(|(k, v)| p.params.get(k) == Some(v)))
        .collect();
    let describe = || {
        sel.iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if found.is_empty() {
        return Err(format!("no point with {} in this run", describe()));
    }
    let mut replicates: Vec<u32> = found.iter().map(|p| replicate_of(p)).collect();
    replicates.sort_unstable();
    replicates.dedup();
    if replicates.len() < found.len() {
        return Err(format!(
            "more than one point with {} in one replicate: name the other sweep values",
            describe()
        ));
    }
    Ok(found)
}
