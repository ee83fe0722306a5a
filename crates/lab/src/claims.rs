//! A scenario's `[[claim]]`s (what a source concluded) checked against a run: each side is a
//! metric at one point, or the difference between two points, picked by their sweep values.
//!
//! With replicates (`replicates = N`), each side is had once per replicate, and the verdict
//! comes from the replicates' differences (left − right): their mean and its 95 % confidence
//! interval (Student's t, N − 1 degrees of freedom). The claim agrees when the whole interval
//! is on its side of zero, differs when the whole interval is on the other, and is
//! inconclusive when the interval holds zero. One replicate gives a verdict from the two
//! values alone, without an interval.

use crate::results::{PointResult, Summary};
use metronome_netsim::sim::flows::FlowReport;
use metronome_spec::scenario::{Claim, ClaimOp, ScenarioFile, REPLICATE};
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

/// A mean over replicates and the half-width of its 95 % confidence interval (`None` with
/// fewer than two replicates).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub half_width: Option<f64>,
    pub n: usize,
}

impl Estimate {
    pub fn of(values: &[f64]) -> Estimate {
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n.max(1) as f64;
        let half_width = (n >= 2).then(|| {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            t_975(n - 1) * (var / n as f64).sqrt()
        });
        Estimate {
            mean,
            half_width,
            n,
        }
    }

    /// `mean ± half-width`, to `digits` decimals.
    pub fn show(&self, digits: usize) -> String {
        match self.half_width {
            Some(h) => format!("{:.digits$} ± {h:.digits$}", self.mean),
            None => format!("{:.digits$}", self.mean),
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

/// Student's t at 97.5 % for `df` degrees of freedom (two-sided 95 %).
pub fn t_975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        31..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
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

fn checked(s: &Summary, claim: Claim) -> Checked {
    let sides = side(s, &claim, &claim.lhs).and_then(|l| Ok((l, side(s, &claim, &claim.rhs)?)));
    let replicates: Vec<(u32, f64, f64)> = match &sides {
        Ok((l, r)) => l
            .iter()
            .filter_map(|(k, lv)| r.get(k).map(|rv| (*k, *lv, *rv)))
            .collect(),
        Err(_) => Vec::new(),
    };
    let values = match sides {
        Err(e) => Err(e),
        Ok(_) if replicates.is_empty() => {
            Err("the two sides have no replicate in common in this run".into())
        }
        Ok(_) => Ok((
            Estimate::of(&side_of(&replicates, Side::Left)).mean,
            Estimate::of(&side_of(&replicates, Side::Right)).mean,
        )),
    };
    Checked {
        claim,
        values,
        replicates,
    }
}

/// A side's value in each replicate of the run.
fn side(
    s: &Summary,
    c: &Claim,
    sel: &[BTreeMap<String, String>],
) -> Result<BTreeMap<u32, f64>, String> {
    let mut v = Vec::with_capacity(2);
    for m in sel {
        let mut by_replicate = BTreeMap::new();
        for p in points(s, m)? {
            by_replicate.insert(replicate_of(p), metric(p, c)?);
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

/// A point's replicate (1 when the run has one of each point).
fn replicate_of(p: &PointResult) -> u32 {
    p.params
        .get(REPLICATE)
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
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

/// The mean over `f`'s receivers of `value` (those that have it).
fn mean(
    f: &FlowReport,
    value: impl Fn(&metronome_netsim::sim::flows::ReceiverReport) -> Option<f64>,
) -> Option<f64> {
    let v: Vec<f64> = f.receivers.iter().filter_map(value).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn metric(p: &PointResult, c: &Claim) -> Result<f64, String> {
    if c.metric == "jain_index" {
        return p
            .fairness
            .as_ref()
            .map(|f| f.jain_index)
            .ok_or_else(|| format!("{}: fewer than two flows", p.id));
    }
    let name = c.flow.as_deref().unwrap_or_default();
    let f = p
        .flows
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| format!("{}: no flow '{name}'", p.id))?;
    let frames = |r: &metronome_netsim::sim::flows::ReceiverReport| r.frames;
    let v = match c.metric.as_str() {
        "frames_lost_percent" => mean(f, |r| frames(r).map(|x| x.lost_percent)),
        "missed_deadline_percent" => mean(f, |r| {
            frames(r).map(|x| 100.0 * x.missed_deadline as f64 / x.frames.max(1) as f64)
        }),
        "frame_delay_ms" => mean(f, |r| frames(r).map(|x| x.mean_delay_ns as f64 / 1e6)),
        "cumulative_jitter_ms" => mean(f, |r| {
            frames(r).map(|x| x.max_cumulative_jitter_ns as f64 / 1e6)
        }),
        "psnr_y_db" => mean(f, |r| frames(r)?.pictures.map(|x| x.psnr_y_db)),
        "mos" => mean(f, |r| frames(r)?.pictures.map(|x| x.mos)),
        "throughput_mbps" => mean(f, |r| Some(r.throughput_bps / 1e6)),
        "loss_percent" => mean(f, |r| Some(r.loss_percent)),
        "delay_ms" => mean(f, |r| Some(r.mean_delay_ns as f64 / 1e6)),
        "p99_delay_ms" => mean(f, |r| Some(r.p99_delay_ns as f64 / 1e6)),
        other => return Err(format!("metric {other} is not known")),
    };
    v.ok_or_else(|| format!("{}: flow '{name}' has no {}", p.id, c.metric))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_students_at_95_percent() {
        assert_eq!(t_975(1), 12.706);
        assert_eq!(t_975(9), 2.262);
        assert_eq!(t_975(1000), 1.960);
        // Ten replicates, sample standard deviation 1: ± 2.262 / √10.
        let v: Vec<f64> = (0..10)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let e = Estimate::of(&v);
        let sd = (10.0f64 / 9.0).sqrt();
        assert_eq!((e.mean, e.n), (0.0, 10));
        assert!((e.half_width.unwrap() - 2.262 * sd / 10f64.sqrt()).abs() < 1e-12);
        assert_eq!(Estimate::of(&[3.0]).half_width, None);
        assert_eq!(Estimate::of(&[3.0]).show(1), "3.0");
        assert_eq!(Estimate::of(&[1.0, 3.0]).show(1), "2.0 ± 12.7");
    }
}
