//! How the flows of a point shared the network: each flow's throughput over the run (the mean
//! of its receivers': a multicast flow's receivers behind one bottleneck see alike), Jain's
//! fairness index over them, `(Σx)² / (n Σx²)` (1: equal shares; 1/n: one flow took all), and
//! the largest ratio between two of them (TFMCC's TCP-friendliness, RFC 4654 §1: within a
//! factor of two of a TCP flow on the same path).

use metronome_link::report::FlowReport;
use serde::{Deserialize, Serialize};

/// The flows' shares at one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fairness {
    /// Each flow's throughput, bit/s (the mean over its receivers).
    pub flows: Vec<FlowShare>,
    pub jain_index: f64,
    /// The largest flow's throughput over the smallest's.
    pub max_ratio: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
