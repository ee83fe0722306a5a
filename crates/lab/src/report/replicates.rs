//! "Across replicates": every metric of every flow at each sweep point, as the mean over the
//! point's replicates ± the half-width of its 95 % confidence interval (what
//! `replicates.csv` holds), one table per flow with a column per point.

use super::esc;
use crate::estimates::{self, Group, METRICS};
use crate::results::Summary;
use std::fmt::Write as _;

/// The section, or nothing when no point ran more than once.
pub(crate) fn section(s: &Summary) -> String {
    if !estimates::has_replicates(s) {
        return String::new();
    }
    let groups = estimates::groups(s);
    let n: Vec<usize> = groups.iter().map(|g| g.points.len()).collect();
    let (lo, hi) = (
        n.iter().min().copied().unwrap_or(0),
        n.iter().max().copied().unwrap_or(0),
    );
    let count = if lo == hi {
        lo.to_string()
    } else {
        format!("{lo} to {hi}")
    };
    let mut h = format!(
        "<h2 id=\"replicates\">Across replicates</h2>\n<p class=\"note\">Each point ran \
         {count} times (seeds one apart). A cell is the mean over its replicates ± the \
         half-width of its 95 % confidence interval (Student's t); a flow's figure is the \
         mean over its receivers. Every figure is in <code>replicates.csv</code>.</p>\n"
    );
    for flow in estimates::flow_names(s) {
        h.push_str(&table(&groups, Some(&flow)));
    }
    h.push_str(&table(&groups, None));
    h
}

/// One flow's metrics (`None`: the point-wide ones), a column per sweep point; empty when
/// the flow has none.
fn table(groups: &[Group], flow: Option<&str>) -> String {
    let metrics = METRICS
        .iter()
        .filter(|(m, _)| flow.is_some() != estimates::is_point_metric(m));
    let mut rows = String::new();
    for (m, what) in metrics {
        let cells: Vec<Option<estimates::Estimate>> =
            groups.iter().map(|g| g.estimate(flow, m)).collect();
        if cells.iter().all(Option::is_none) {
            continue;
        }
        let digits = if matches!(*m, "mos" | "jain_index") {
            3
        } else {
            2
        };
        let _ = write!(rows, "<tr><th>{}</th>", esc(what));
        for c in cells {
            let _ = write!(
                rows,
                "<td>{}</td>",
                c.map_or_else(|| "n/a".into(), |e| e.show(digits))
            );
        }
        rows.push_str("</tr>");
    }
    if rows.is_empty() {
        return String::new();
    }
    let caption = flow.map_or_else(|| "the flows together".into(), |f| format!("flow {f}"));
    let mut h = format!("<table><caption>{}</caption><tr><th></th>", esc(&caption));
    for g in groups {
        let label = g.label();
        let _ = write!(
            h,
            "<th>{}</th>",
            esc(if label.is_empty() {
                "the point"
            } else {
                &label
            })
        );
    }
    let _ = writeln!(h, "</tr>{rows}</table>");
    h
}
