//! How the flows of a point shared the network: each flow's throughput over the run (the mean
//! of its receivers': a multicast flow's receivers behind one bottleneck see alike), Jain's
//! fairness index over them, `(Σx)² / (n Σx²)` (1: equal shares; 1/n: one flow took all), and
//! the largest ratio between two of them (TFMCC's TCP-friendliness, RFC 4654 §1: within a
//! factor of two of a TCP flow on the same path).
//!
//! Only flows that compete have a fairness: [`Fairness::per_bottleneck`] groups the flows by
//! the links that were their bottleneck (a link dropped from its queue, or carried at least
//! [`BUSY`] of its rate) and judges each group; a point's `fairness` is the group of all of
//! them, if they had one. Flows on separate links (seed 001's clients, each behind its
//! own) share nothing, and get no index.

use metronome_link::report::FlowReport;
use metronome_link::topology::Topology;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The share of its rate a link carried while its flows sent (`active_ns`) for it to count as a
/// bottleneck.
pub const BUSY: f64 = 0.8;

/// What a link did over the run, as much as a bottleneck is judged by.
#[derive(Clone, Debug)]
pub struct LinkLoad {
    /// `from→to`.
    pub name: String,
    /// Packets dropped because its queue was full.
    pub dropped_queue: u64,
    pub bytes_delivered: u64,
}

/// The flows' shares at one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Fairness {
    /// Each flow's throughput, bit/s (the mean over its receivers).
    pub flows: Vec<FlowShare>,
    pub jain_index: f64,
    /// The largest flow's throughput over the smallest's.
    pub max_ratio: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowShare {
    pub flow: String,
    pub kind: String,
    pub throughput_bps: f64,
}

/// Jain's index of `x` (1 for one value; 0 for none or all zero).
pub fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    if x.is_empty() || squares <= 0.0 {
        return 0.0;
    }
    sum * sum / (x.len() as f64 * squares)
}

/// Flows that shared a bottleneck, and how they shared it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SharedBottleneck {
    /// The busy links every one of these flows crossed, and no other flow (`from→to`, in
    /// the topology's order).
    pub links: Vec<String>,
    /// The flows' shares: each one's throughput, Jain's index, the largest ratio.
    pub fairness: Fairness,
}

impl Fairness {
    /// The flows that shared each bottleneck: for each link (`links` in the topology's link
    /// order) that dropped from its queue or was [`BUSY`] while the flows crossing it sent
    /// (the `run_ns` the point ran if none says),
    /// the flows (two or more) whose way to a receiver crosses it (`topology`'s routes).
    /// Links crossed by the same flows make one group.
    pub fn per_bottleneck(
        flows: &[FlowReport],
        topology: &Topology,
        links: &[LinkLoad],
        run_ns: u64,
    ) -> Vec<SharedBottleneck> {
        let crossed: Vec<BTreeSet<usize>> = flows.iter().map(|f| crossed(f, topology)).collect();
        let mut groups: Vec<(Vec<usize>, Vec<String>)> = Vec::new();
        for (i, l) in links.iter().enumerate() {
            if !busy(l, i, topology, active_ns(flows, &crossed, i, run_ns)) {
                continue;
            }
            let members: Vec<usize> = (0..flows.len())
                .filter(|&f| !flows[f].receivers.is_empty() && crossed[f].contains(&i))
                .collect();
            match groups.iter_mut().find(|(m, _)| *m == members) {
                Some((_, names)) => names.push(l.name.clone()),
                None if members.len() >= 2 => groups.push((members, vec![l.name.clone()])),
                None => {}
            }
        }
        groups
            .into_iter()
            .filter_map(|(members, links)| {
                Some(SharedBottleneck {
                    links,
                    fairness: Fairness::of(members.iter().map(|&f| &flows[f]))?,
                })
            })
            .collect()
    }

    /// The shares of the flows that have receivers (command flows measure none), when there
    /// are at least two.
    pub fn of<'a>(flows: impl IntoIterator<Item = &'a FlowReport>) -> Option<Fairness> {
        let shares: Vec<FlowShare> = flows
            .into_iter()
            .filter(|f| !f.receivers.is_empty())
            .map(|f| FlowShare {
                flow: f.name.clone(),
                kind: f.kind.clone(),
                throughput_bps: f.receivers.iter().map(|r| r.throughput_bps).sum::<f64>()
                    / f.receivers.len() as f64,
            })
            .collect();
        if shares.len() < 2 {
            return None;
        }
        let x: Vec<f64> = shares.iter().map(|s| s.throughput_bps).collect();
        let (lo, hi) = x.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(*v), hi.max(*v))
        });
        Some(Fairness {
            jain_index: jain(&x),
            max_ratio: if lo > 0.0 { hi / lo } else { f64::INFINITY },
            flows: shares,
        })
    }
}

/// The links `f` crosses on its way to its receivers.
fn crossed(f: &FlowReport, topology: &Topology) -> BTreeSet<usize> {
    let Some(src) = topology.node_by_name(&f.src) else {
        return BTreeSet::new();
    };
    f.receivers
        .iter()
        .filter_map(|r| topology.path(src, topology.node_by_name(&r.node)?))
        .flatten()
        .map(|l| l.0 as usize)
        .collect()
}

/// How long the flows that cross link `i` (`crossed`: each flow's links) sent: from the first
/// one's start to the last one's end, not the drain after them nor the time before them;
/// `run_ns` if none crosses it, or if a flow's way is not known (a command flow has no
/// receivers of the lab's: what it sent may have crossed the link at any time).
fn active_ns(flows: &[FlowReport], crossed: &[BTreeSet<usize>], i: usize, run_ns: u64) -> u64 {
    if flows.iter().any(|f| f.receivers.is_empty()) {
        return run_ns;
    }
    let crossing = || {
        flows
            .iter()
            .zip(crossed)
            .filter(|(_, c)| c.contains(&i))
            .map(|(f, _)| f)
    };
    let start = crossing().map(|f| f.start_us).min();
    let end = crossing().map(|f| f.start_us + f.duration_us).max();
    match (start, end) {
        (Some(s), Some(e)) if e > s => (e - s).as_nanos_u64(),
        _ => run_ns,
    }
}

/// Whether link `i` (`l`) was a bottleneck over the `run_ns` its flows sent: it dropped from
/// its queue, or carried [`BUSY`] of its rate.
fn busy(l: &LinkLoad, i: usize, topology: &Topology, run_ns: u64) -> bool {
    let carried = l.bytes_delivered as f64 * 8.0 / (run_ns.max(1) as f64 / 1e9);
    let rate = topology
        .link_config(metronome_link::topology::LinkId(i as u32))
        .rate_bps;
    l.dropped_queue > 0 || rate.is_some_and(|r| carried >= BUSY * r as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jains_index_worked_values() {
        assert_eq!(jain(&[2.0, 2.0]), 1.0);
        // One flow takes all: 1/n.
        assert_eq!(jain(&[4.0, 0.0]), 0.5);
        // 3 and 1 Mbit/s: 16 / (2 × 10) = 0.8.
        assert!((jain(&[3.0, 1.0]) - 0.8).abs() < 1e-12);
        assert_eq!(jain(&[]), 0.0);
    }
}
