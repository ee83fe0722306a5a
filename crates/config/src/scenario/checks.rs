//! What a scenario's run is checked against: `[reference]` (a seed's figures, shown beside the
//! measured ones) and `[[claim]]`s (a source's conclusions, compared between points).

use super::{Claim, ClaimOp, Evidence, FlowDecl, Reference, CLAIM_METRICS, POINT_METRICS};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileClaim {
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
    #[serde(default)]
    evidence: Vec<String>,
}

/// Checks that `metric` is known and that `flow` is given exactly when it is a flow's.
fn metric_and_flow(
    what: &str,
    metric: &str,
    flow: Option<&str>,
    flows: &[FlowDecl],
) -> Result<(), String> {
    if !CLAIM_METRICS.contains(&metric) {
        return Err(format!(
            "{what}: metric = \"{metric}\" is not known; use one of: {}",
            CLAIM_METRICS.join(", ")
        ));
    }
    match (flow, POINT_METRICS.contains(&metric)) {
        (Some(f), false) if flows.iter().any(|g| g.name == f) => Ok(()),
        (Some(f), false) => Err(format!("{what}: flow = \"{f}\" is not a flow")),
        (None, true) => Ok(()),
        (None, false) => Err(format!("{what}: metric {metric} needs flow = \"NAME\"")),
        (Some(_), true) => Err(format!("{what}: {metric} is the point's: name no flow")),
    }
}

impl FileClaim {
    pub(super) fn check(self, flows: &[FlowDecl]) -> Result<Claim, String> {
        let what = format!("[[claim]] '{}'", self.text);
        metric_and_flow(&what, &self.metric, self.flow.as_deref(), flows)?;
        let evidence = self
            .evidence
            .iter()
            .map(|e| self.evidence_of(&what, e, flows))
            .collect::<Result<Vec<_>, _>>()?;
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
            evidence,
        })
    }

    /// `"metric"` (of the claim's flow, for a flow's metric) or `"metric of FLOW"`.
    fn evidence_of(&self, what: &str, e: &str, flows: &[FlowDecl]) -> Result<Evidence, String> {
        let (metric, flow) = match e.split_once(" of ") {
            Some((m, f)) => (m.trim(), Some(f.trim().to_string())),
            None if POINT_METRICS.contains(&e.trim()) => (e.trim(), None),
            None => (e.trim(), self.flow.clone()),
        };
        let what = format!("{what}: evidence \"{e}\"");
        metric_and_flow(&what, metric, flow.as_deref(), flows)?;
        Ok(Evidence {
            metric: metric.to_string(),
            flow,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileReference {
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

impl FileReference {
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
