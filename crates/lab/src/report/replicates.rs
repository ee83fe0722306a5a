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
    h.push_str(&verdict(s, &groups));
    for flow in estimates::flow_names(s) {
        h.push_str(&table(&groups, Some(&flow)));
    }
    h.push_str(&table(&groups, None));
    h
}

/// How much of a figure's mean its interval's half-width may be for it to count as known.
const KNOWN_SHARE: f64 = 0.10;
/// For a share in % (`*_percent`), the half-width in percentage points that counts as known
/// however small the mean.
const KNOWN_POINTS: f64 = 0.1;

/// Whether the replicates pin the figures down: how many are known ([`is_known`]), and the
/// least certain of the others (the widest interval for its mean).
fn verdict(s: &Summary, groups: &[Group]) -> String {
    let flows: Vec<Option<String>> = estimates::flow_names(s)
        .into_iter()
        .map(Some)
        .chain([None])
        .collect();
    let mut known = 0;
    let mut all = 0;
    let mut worst: Option<(f64, String, estimates::Estimate)> = None;
    for g in groups {
        for flow in &flows {
            for (m, what) in METRICS
                .iter()
                .filter(|(m, _)| flow.is_some() != estimates::is_point_metric(m))
            {
                let Some(e) = g.estimate(flow.as_deref(), m) else {
                    continue;
                };
                let Some(hw) = e.half_width else { continue };
                all += 1;
                if is_known(m, hw, e.mean) {
                    known += 1;
                    continue;
                }
                let share = hw / e.mean.abs().max(f64::MIN_POSITIVE);
                if worst.as_ref().is_none_or(|w| share > w.0) {
                    let at = [flow.as_ref().map(|f| format!("flow {f}")), Some(g.label())]
                        .into_iter()
                        .flatten()
                        .filter(|l| !l.is_empty())
                        .collect::<Vec<_>>()
                        .join(", ");
                    worst = Some((share, format!("{what} ({at})"), e));
                }
            }
        }
    }
    let known_as = format!(
        "within ±{:.0} % of their mean, or ±{KNOWN_POINTS} percentage points for a share \
         (95 % interval)",
        KNOWN_SHARE * 100.0
    );
    let line = match worst {
        None if all == 0 => return String::new(),
        None => format!("all {all} figures are known {known_as}."),
        Some((_, what, e)) => format!(
            "{known} of {all} figures are known {known_as}; the least certain: {}, {}. More \
             replicates narrow an interval by the square root of their number.",
            esc(&what),
            e.show(3)
        ),
    };
    format!("<p class=\"verdict\"><strong>Verdict:</strong> {line}</p>\n")
}

/// Whether a figure's interval pins it down: a half-width within 10 % of its mean, or, for a
/// share in % (a loss near 0), within 0.1 percentage points.
fn is_known(metric: &str, half_width: f64, mean: f64) -> bool {
    half_width <= KNOWN_SHARE * mean.abs()
        || (metric.ends_with("_percent") && half_width <= KNOWN_POINTS)
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

#[cfg(test)]
mod tests {
    use super::is_known;

    #[test]
    fn a_share_near_zero_is_known_by_its_points() {
        // 0.05 ± 0.03 % lost: pinned to hundredths of a point, though ±60 % of its mean.
        assert!(is_known("loss_percent", 0.03, 0.05));
        assert!(!is_known("loss_percent", 0.3, 1.0));
        assert!(is_known("throughput_mbps", 0.09, 1.0));
        assert!(!is_known("throughput_mbps", 0.03, 0.05));
        assert!(is_known("jain_index", 0.0, 0.0));
    }
}
