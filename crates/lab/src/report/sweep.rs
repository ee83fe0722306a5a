//! Every receiver's main figure across the sweep, as tables: rows are the first sweep
//! parameter's values, columns the last one's (one table per combination of any in between).
//! The figure depends on the flow: TCP its goodput (beside what it should carry), UDP and
//! RTP their loss, video its frames lost.

use super::esc;
use crate::results::{PointResult, Summary};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A receiver's figure at a point, and its unit.
fn figure(p: &PointResult, flow: &str, receiver: &str) -> Option<(f64, &'static str)> {
    let f = p.flows.iter().find(|f| f.name == flow)?;
    let r = f.receivers.iter().find(|r| r.node == receiver)?;
    Some(match (f.kind.as_str(), r.frames) {
        ("tcp", _) => (r.throughput_bps / 1e6, "goodput, Mbit/s"),
        (_, Some(fr)) => (fr.lost_percent, "frames lost, %"),
        _ => (r.loss_percent, "packets lost, %"),
    })
}

fn expected(p: &PointResult, flow: &str) -> Option<f64> {
    p.tcp_expected
        .iter()
        .find(|t| t.flow == flow)
        .map(|t| t.expected_goodput_bps / 1e6)
}

/// The tables, or nothing without a sweep.
pub(crate) fn sweep_section(s: &Summary) -> String {
    let params = &s.scenario.sweep;
    let Some(first) = s.points.first() else {
        return String::new();
    };
    if params.is_empty() {
        return String::new();
    }
    let rows_param = &params[0];
    let cols_param = &params[params.len() - 1];
    let two = params.len() > 1;
    let mut h = String::from("<h2 id=\"sweep\">Across the sweep</h2>\n");
    let mut middles: Vec<BTreeMap<String, String>> = Vec::new();
    for p in &s.points {
        let mut k = p.params.clone();
        k.remove(&rows_param.0);
        k.remove(&cols_param.0);
        if !middles.contains(&k) {
            middles.push(k);
        }
    }
    let mut n = 0;
    for f in &first.flows {
        // A crowd's receivers would make a table per receiver: the first 12 are shown.
        for r in f.receivers.iter().take(12) {
            for mid in &middles {
                h.push_str(&table(
                    s, &f.name, &r.node, mid, rows_param, cols_param, two, n,
                ));
                n += 1;
            }
        }
    }
    h
}

#[allow(clippy::too_many_arguments)]
fn table(
    s: &Summary,
    flow: &str,
    receiver: &str,
    mid: &BTreeMap<String, String>,
    rows: &(String, Vec<String>),
    cols: &(String, Vec<String>),
    two: bool,
    n: usize,
) -> String {
    let at = |rv: &str, cv: &str| {
        s.points.iter().find(|p| {
            p.params.get(&rows.0).map(String::as_str) == Some(rv)
                && (!two || p.params.get(&cols.0).map(String::as_str) == Some(cv))
                && mid.iter().all(|(k, v)| p.params.get(k) == Some(v))
        })
    };
    let col_values: Vec<&String> = if two {
        cols.1.iter().collect()
    } else {
        vec![&rows.1[0]]
    };
    let unit = s
        .points
        .iter()
        .find_map(|p| figure(p, flow, receiver))
        .map_or("", |(_, u)| u);
    let is_tcp = s.points.iter().any(|p| expected(p, flow).is_some());
    let mid_label: Vec<String> = mid.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    let mut h = format!(
        "<h3>{} → {} ({}){}</h3>\n<div class=\"side\">",
        esc(flow),
        esc(receiver),
        esc(unit),
        if mid_label.is_empty() {
            String::new()
        } else {
            format!(", {}", esc(&mid_label.join(", ")))
        }
    );
    let grid = |caption: &str, cell: &dyn Fn(&PointResult) -> Option<f64>| {
        let mut t = format!(
            "<table><caption>{}</caption><tr><th>{} \\ {}</th>",
            esc(caption),
            esc(&rows.0),
            if two { esc(&cols.0) } else { String::new() }
        );
        if two {
            for c in &cols.1 {
                let _ = write!(t, "<th>{}</th>", esc(c));
            }
        } else {
            t.push_str("<th></th>");
        }
        t.push_str("</tr>");
        for rv in &rows.1 {
            let _ = write!(t, "<tr><th>{}</th>", esc(rv));
            for cv in &col_values {
                let v = at(rv, cv).and_then(cell);
                let _ = write!(
                    t,
                    "<td>{}</td>",
                    v.map_or("–".into(), |v| format!("{v:.2}"))
                );
            }
            t.push_str("</tr>");
        }
        t.push_str("</table>");
        t
    };
    h.push_str(&grid("measured", &|p| {
        figure(p, flow, receiver).map(|f| f.0)
    }));
    if is_tcp {
        h.push_str(&grid(
            "expected: min(offered, bottleneck) less 40 B of headers per 1460 B",
            &|p| expected(p, flow),
        ));
    }
    h.push_str("</div>\n");
    h.push_str(&super::figures::sweep_plot(
        s,
        flow,
        receiver,
        mid,
        &|p| figure(p, flow, receiver).map(|f| f.0),
        &|p| expected(p, flow),
        unit,
        n,
    ));
    h
}
