//! A scenario's `[[claim]]`s (what a source concluded) checked against a run: each side is a
//! metric at one point, or the difference between two points, picked by their sweep values.

use crate::results::{PointResult, Summary};
use metronome_netsim::sim::flows::FlowReport;
use metronome_spec::scenario::{Claim, ClaimOp, ScenarioFile};
use std::collections::BTreeMap;

/// A claim and what the run says of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub claim: Claim,
    /// The two sides' values, or why they could not be had (a point not run, no such figure).
    pub values: Result<(f64, f64), String>,
}

impl Checked {
    /// Whether the run agrees (`None`: not known).
    pub fn holds(&self) -> Option<bool> {
        let (l, r) = *self.values.as_ref().ok()?;
        Some(match self.claim.op {
            ClaimOp::Less => l < r,
            ClaimOp::Greater => l > r,
        })
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
    claims_of(s)
        .into_iter()
        .map(|c| Checked {
            values: side(s, &c, &c.lhs).and_then(|l| Ok((l, side(s, &c, &c.rhs)?))),
            claim: c,
        })
        .collect()
}

fn side(s: &Summary, c: &Claim, sel: &[BTreeMap<String, String>]) -> Result<f64, String> {
    let mut v = Vec::with_capacity(2);
    for m in sel {
        let p = point(s, m)?;
        v.push(metric(p, c)?);
    }
    Ok(match v.as_slice() {
        [a] => *a,
        [a, b] => a - b,
        _ => return Err("a side picks one point or two".into()),
    })
}

fn point<'a>(s: &'a Summary, sel: &BTreeMap<String, String>) -> Result<&'a PointResult, String> {
    let mut found = s
        .points
        .iter()
        .filter(|p| sel.iter().all(|(k, v)| p.params.get(k) == Some(v)));
    let describe = || {
        sel.iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let p = found
        .next()
        .ok_or_else(|| format!("no point with {} in this run", describe()))?;
    if found.next().is_some() {
        return Err(format!("more than one point with {}", describe()));
    }
    Ok(p)
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
