//! How the flows of a point shared the network: each flow's throughput over the run (the mean
//! of its receivers': a multicast flow's receivers behind one bottleneck see alike), Jain's
//! fairness index over them, `(Σx)² / (n Σx²)` (1: equal shares; 1/n: one flow took all), and
//! the largest ratio between two of them (TFMCC's TCP-friendliness, RFC 4654 §1: within a
//! factor of two of a TCP flow on the same path).
//!
//! Only flows that compete have a fairness: [`Fairness::among_sharing`] judges them when a
//! link every one of them crosses was their bottleneck (it dropped from its queue, or carried
//! at least [`BUSY`] of its rate); flows on separate links (seed 001's clients, each behind its
//! own) share nothing, and get no index.

use metronome_link::report::FlowReport;
use metronome_link::topology::Topology;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The share of its rate a link carried over the run for it to count as a bottleneck.
pub const BUSY: f64 = 0.8;

/// What a link did over the run, as much as a bottleneck is judged by.
#[derive(Clone, Copy, Debug)]
pub struct LinkLoad {
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

impl Fairness {
    /// [`Fairness::of`] the flows, when they shared a bottleneck: a link on every flow's way
    /// to its receivers (`topology`'s routes; `links` in its link order) that dropped from its
    /// queue or was [`BUSY`] over the `run_ns` the point ran.
    pub fn among_sharing(
        flows: &[FlowReport],
        topology: &Topology,
        links: &[LinkLoad],
        run_ns: u64,
    ) -> Option<Fairness> {
        let crossed = |f: &FlowReport| -> BTreeSet<usize> {
            let Some(src) = topology.node_by_name(&f.src) else {
                return BTreeSet::new();
            };
            f.receivers
                .iter()
                .filter_map(|r| topology.path(src, topology.node_by_name(&r.node)?))
                .flatten()
                .map(|l| l.0 as usize)
                .collect()
        };
        let mut competing = flows.iter().filter(|f| !f.receivers.is_empty());
        let first = crossed(competing.next()?);
        let common = competing.fold(first, |acc, f| &acc & &crossed(f));
        let busy = |i: &usize| {
            let Some(l) = links.get(*i) else {
                return false;
            };
            let carried = l.bytes_delivered as f64 * 8.0 / (run_ns.max(1) as f64 / 1e9);
            let rate = topology
                .link_config(metronome_link::topology::LinkId(*i as u32))
                .rate_bps;
            l.dropped_queue > 0 || rate.is_some_and(|r| carried >= BUSY * r as f64)
        };
        if !common.iter().any(busy) {
            return None;
        }
        Fairness::of(flows)
    }

    /// The shares of the flows that have receivers (command flows measure none), when there
    /// are at least two.
    pub fn of(flows: &[FlowReport]) -> Option<Fairness> {
        let shares: Vec<FlowShare> = flows
            .iter()
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
