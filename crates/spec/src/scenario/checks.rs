//! What a scenario's run is checked against: `[reference]` (a seed's figures, shown beside the
//! measured ones) and `[[claim]]`s (a source's conclusions, compared between points).

use super::{Claim, ClaimOp, FlowDecl, Reference, CLAIM_METRICS};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClaim {
    text: String,
    #[serde(default)]
    source: String,
    flow: Option<String>,
    metric: String,
    lhs: Vec<BTreeMap<String, String>>,
    op: String,
    rhs: Vec<BTreeMap<String, String>>,
    #[serde(default)]
    note: String,
}

impl RawClaim {
    pub(super) fn check(self, flows: &[FlowDecl]) -> Result<Claim, String> {
        let what = format!("[[claim]] '{}'", self.text);
        if !CLAIM_METRICS.contains(&self.metric.as_str()) {
            return Err(format!(
                "{what}: metric = \"{}\" is not known; use one of: {}",
                self.metric,
                CLAIM_METRICS.join(", ")
            ));
        }
        match (&self.flow, self.metric == "jain_index") {
            (Some(f), false) if flows.iter().any(|g| &g.name == f) => {}
            (Some(f), false) => return Err(format!("{what}: flow = \"{f}\" is not a flow")),
            (None, true) => {}
            (None, false) => {
                return Err(format!(
                    "{what}: metric {} needs flow = \"NAME\"",
                    self.metric
                ))
            }
            (Some(_), true) => {
                return Err(format!("{what}: jain_index is the point's: remove flow"))
            }
        }
        let op = match self.op.as_str() {
            "<" => ClaimOp::Less,
            ">" => ClaimOp::Greater,
            other => return Err(format!("{what}: op = \"{other}\": use \"<\" or \">\"")),
        };
        for side in [&self.lhs, &self.rhs] {
            if side.is_empty() || side.len() > 2 {
                return Err(format!(
                    "{what}: lhs and rhs are [{{ param = \"value\" }}] (a point) or two of them (the first less the second)"
                ));
            }
        }
        Ok(Claim {
            text: self.text,
            source: self.source,
            flow: self.flow,
            metric: self.metric,
            lhs: self.lhs,
            op,
            rhs: self.rhs,
            note: self.note,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReference {
    title: String,
    metric: String,
    by: String,
    #[serde(default)]
    source: String,
    columns: Vec<String>,
    rows: Vec<RawRow>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRow {
    name: String,
    values: Vec<f64>,
}

impl RawReference {
    pub(super) fn check(self) -> Result<Reference, String> {
        for r in &self.rows {
            if r.values.len() != self.columns.len() {
                return Err(format!(
                    "[reference] row '{}' has {} values for {} columns",
                    r.name,
                    r.values.len(),
                    self.columns.len()
                ));
            }
        }
        const METRICS: [&str; 4] = [
            "loss_percent",
            "throughput_bps",
            "jitter_us",
            "mean_delay_us",
        ];
        if !METRICS.contains(&self.metric.as_str()) {
            return Err(format!(
                "[reference] metric = \"{}\" is not a receiver figure; use one of: {}",
                self.metric,
                METRICS.join(", ")
            ));
        }
        Ok(Reference {
            title: self.title,
            metric: self.metric,
            by: self.by,
            columns: self.columns,
            rows: self.rows.into_iter().map(|r| (r.name, r.values)).collect(),
            source: self.source,
        })
    }
}
