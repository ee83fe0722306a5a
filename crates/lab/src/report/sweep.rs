//! Every receiver's main figure across the sweep, as tables: rows are the first sweep
//! parameter's values, columns the last one's (one table per combination of any in between).
//! The figure depends on the flow: TCP its goodput (beside what it should carry), UDP and
//! RTP their loss, video its frames lost (beside the PSNR its viewer saw, where judged). With
//! replicates a cell is their mean and 95 % interval, and the plots draw the interval as a
//! band.

use super::esc;
use super::plots::{axis, figure as plot_figure, x_values, Line, Plot, Style};
use crate::estimates::{self, Estimate};
use crate::results::{PointResult, Summary};
use metronome_config::scenario::REPLICATE;
use metronome_link::report::{FlowReport, ReceiverReport};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Flow `flow` at a point, and its receiver `receiver`.
fn at<'p>(
    p: &'p PointResult,
    flow: &str,
    receiver: &str,
) -> Option<(&'p FlowReport, &'p ReceiverReport)> {
    let f = p.flows.iter().find(|f| f.name == flow)?;
    Some((f, f.receivers.iter().find(|r| r.node == receiver)?))
}

/// A receiver's figure at a point, and its unit.
fn figure(p: &PointResult, flow: &str, receiver: &str) -> Option<(f64, &'static str)> {
    let (f, r) = at(p, flow, receiver)?;
    Some(match (f.kind.as_str(), r.frames) {
        ("tcp", _) => (r.throughput_bps / 1e6, "goodput, Mbit/s"),
        (_, Some(fr)) => (fr.lost_percent, "frames lost, %"),
        _ => (r.loss_percent, "packets lost, %"),
    })
}

/// What a video receiver's screen showed at a point: the mean PSNR of Y over its slots, where
/// its pictures were judged (beside its frames lost, so that a sweep with and without loss
/// repair shows what the viewer gained).
fn psnr(p: &PointResult, flow: &str, receiver: &str) -> Option<f64> {
    at(p, flow, receiver)?
        .1
        .frames?
        .pictures
        .map(|q| q.psnr_y_db)
}

fn expected(p: &PointResult, flow: &str) -> Option<f64> {
    p.tcp_expected
        .iter()
        .find(|t| t.flow == flow)
        .map(|t| t.expected_goodput_bps / 1e6)
}

/// The sweep's grid for one combination of the parameters in between (`mid`): rows are the
/// first parameter's values, columns the last one's; a cell holds a point's replicates.
pub(crate) struct Grid<'a> {
    pub s: &'a Summary,
    pub rows: &'a (String, Vec<String>),
    pub cols: &'a (String, Vec<String>),
    /// Whether there are two parameters (else one: a column).
    pub two: bool,
    pub mid: &'a BTreeMap<String, String>,
}

impl<'a> Grid<'a> {
    /// The points at row value `rv` and column value `cv` (every replicate).
    pub(super) fn at(&self, rv: &str, cv: Option<&str>) -> Vec<&'a PointResult> {
        self.s
            .points
            .iter()
            .filter(|p| {
                p.params.get(&self.rows.0).map(String::as_str) == Some(rv)
                    && (!self.two
                        || cv.is_none_or(|cv| {
                            p.params.get(&self.cols.0).map(String::as_str) == Some(cv)
                        }))
                    && self.mid.iter().all(|(k, v)| p.params.get(k) == Some(v))
            })
            .collect()
    }

    /// `f` at a cell, over its replicates that have it.
    pub(super) fn estimate(
        &self,
        rv: &str,
        cv: Option<&str>,
        f: &dyn Fn(&PointResult) -> Option<f64>,
    ) -> Option<Estimate> {
        let v: Vec<f64> = self.at(rv, cv).into_iter().filter_map(f).collect();
        (!v.is_empty()).then(|| Estimate::of(&v))
    }

    /// The column values (one, `None`, with a single parameter).
    pub(super) fn columns(&self) -> Vec<Option<&'a str>> {
        if self.two {
            self.cols.1.iter().map(|c| Some(c.as_str())).collect()
        } else {
            vec![None]
        }
    }
}

/// The sweep's parameters as the tables take them: `replicate` is not one (a cell holds a
/// point's replicates, shown as their mean and interval).
fn parameters(s: &Summary) -> Vec<(String, Vec<String>)> {
    s.scenario
        .sweep
        .iter()
        .filter(|(k, _)| k != REPLICATE)
        .cloned()
        .collect()
}

/// The tables, or nothing without a sweep.
pub(crate) fn sweep_section(s: &Summary) -> String {
    let params = parameters(s);
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
    if estimates::has_replicates(s) {
        h.push_str(
            "<p class=\"note\">Each cell is the mean over the point's replicates ± the \
             half-width of its 95 % confidence interval; the plots draw the interval as a \
             band.</p>\n",
        );
    }
    let mut middles: Vec<BTreeMap<String, String>> = Vec::new();
    for p in &s.points {
        let mut k = p.params.clone();
        k.remove(&rows_param.0);
        k.remove(&cols_param.0);
        k.remove(REPLICATE);
        if !middles.contains(&k) {
            middles.push(k);
        }
    }
    let mut n = 0;
    for f in &first.flows {
        // Receivers with the same figures at every point (a viewer's PSNR too: two that lost
        // as many frames, not the same ones, saw different pictures) share a table; a crowd
        // that differs shows its first 12.
        let figures_of = |node: &str| -> Vec<(Option<u64>, Option<u64>)> {
            s.points
                .iter()
                .map(|p| {
                    let main = figure(p, &f.name, node).map(|v| v.0.to_bits());
                    (main, psnr(p, &f.name, node).map(f64::to_bits))
                })
                .collect()
        };
        let rows = f
            .receivers
            .iter()
            .map(|r| (r.node.as_str(), figures_of(&r.node)))
            .collect();
        for (label, figures) in super::receivers::collapse(rows).iter().take(12) {
            let Some(r) = f.receivers.iter().find(|r| figures_of(&r.node) == *figures) else {
                continue;
            };
            for mid in &middles {
                let grid = Grid {
                    s,
                    rows: rows_param,
                    cols: cols_param,
                    two,
                    mid,
                };
                h.push_str(&table(&grid, &f.name, (&r.node, label), n));
                n += 1;
            }
        }
    }
    h
}

/// The table and plot of `receiver`'s figure, headed by `label` (the receivers it stands for).
fn table(g: &Grid, flow: &str, (receiver, label): (&str, &str), n: usize) -> String {
    let s = g.s;
    let unit = s
        .points
        .iter()
        .find_map(|p| figure(p, flow, receiver))
        .map_or("", |(_, u)| u);
    let is_tcp = s.points.iter().any(|p| expected(p, flow).is_some());
    let mid_label: Vec<String> = g.mid.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    let mut h = format!(
        "<h3>{} → {}: {}{}</h3>\n",
        esc(flow),
        esc(label),
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
            esc(&g.rows.0),
            if g.two { esc(&g.cols.0) } else { String::new() }
        );
        if g.two {
            for c in &g.cols.1 {
                let _ = write!(t, "<th>{}</th>", esc(c));
            }
        } else {
            t.push_str("<th></th>");
        }
        t.push_str("</tr>");
        for rv in &g.rows.1 {
            let _ = write!(t, "<tr><th>{}</th>", esc(rv));
            for cv in g.columns() {
                let v = g.estimate(rv, cv, cell);
                let _ = write!(t, "<td>{}</td>", v.map_or("–".into(), |v| v.show(2)));
            }
            t.push_str("</tr>");
        }
        t.push_str("</table>");
        t
    };
    let measured = |p: &PointResult| figure(p, flow, receiver).map(|f| f.0);
    h.push_str(&verdict(
        g,
        unit,
        &measured,
        is_tcp.then_some(&|p| expected(p, flow)),
    ));
    h.push_str("<div class=\"side\">");
    h.push_str(&grid("measured", &measured));
    if is_tcp {
        h.push_str(&grid(
            "expected: min(offered, bottleneck) less 40 B of headers per 1460 B",
            &|p| expected(p, flow),
        ));
    }
    let seen = |p: &PointResult| psnr(p, flow, receiver);
    if s.points.iter().any(|p| seen(p).is_some()) {
        h.push_str(&grid(PSNR_CAPTION, &seen));
    }
    h.push_str("</div>\n");
    h.push_str(&sweep_plot(
        g,
        (flow, label),
        &|p| figure(p, flow, receiver).map(|f| f.0),
        &|p| expected(p, flow),
        unit,
        n,
    ));
    h
}

/// The caption of a video receiver's second table: what its screen showed.
const PSNR_CAPTION: &str = "what the viewer saw: PSNR of Y, dB (mean over its slots)";

/// A figure of a point (`None`: the point has none).
type Figure<'a> = dyn Fn(&PointResult) -> Option<f64> + 'a;

/// The table's verdict line: for TCP, how much of the most it could carry it carried (the
/// lowest and highest ratio over the cells); for the others, at a glance, where the figure
/// (in `unit`) is lowest and highest.
fn verdict(
    g: &Grid,
    unit: &str,
    measured: &dyn Fn(&PointResult) -> Option<f64>,
    expected: Option<&Figure<'_>>,
) -> String {
    let mut cells = Vec::new();
    for rv in &g.rows.1 {
        for cv in g.columns() {
            let Some(m) = g.estimate(rv, cv, measured) else {
                continue;
            };
            let e = expected.and_then(|e| g.estimate(rv, cv, e));
            let at = match cv {
                Some(cv) => format!("{} = {rv}, {} = {cv}", g.rows.0, g.cols.0),
                None => format!("{} = {rv}", g.rows.0),
            };
            cells.push((at, m.mean, e.map(|e| e.mean)));
        }
    }
    let line = match expected {
        Some(_) => {
            let ratios: Vec<(String, f64)> = cells
                .iter()
                .filter_map(|(at, m, e)| e.filter(|e| *e > 0.0).map(|e| (at.clone(), m / e)))
                .collect();
            let (Some(lo), Some(hi)) = (
                ratios.iter().min_by(|a, b| a.1.total_cmp(&b.1)),
                ratios.iter().max_by(|a, b| a.1.total_cmp(&b.1)),
            ) else {
                return String::new();
            };
            format!(
                "TCP carried {:.1} % ({}) to {:.1} % ({}) of the most it could carry (the \
                 expected table: the link less headers, or what was offered; a flow sharing the \
                 link gets less), over {} cells.",
                lo.1 * 100.0,
                esc(&lo.0),
                hi.1 * 100.0,
                esc(&hi.0),
                ratios.len()
            )
        }
        None => {
            let (Some(lo), Some(hi)) = (
                cells.iter().min_by(|a, b| a.1.total_cmp(&b.1)),
                cells.iter().max_by(|a, b| a.1.total_cmp(&b.1)),
            ) else {
                return String::new();
            };
            let unit = unit.rsplit(", ").next().unwrap_or("");
            let line = if lo.1 == hi.1 {
                format!("{:.2} {unit} in each of the {} cells.", lo.1, cells.len())
            } else {
                format!(
                    "lowest {:.2} {unit} ({}), highest {:.2} {unit} ({}), over {} cells.",
                    lo.1,
                    esc(&lo.0),
                    hi.1,
                    esc(&hi.0),
                    cells.len()
                )
            };
            // Nothing to compare with: a summary, not a verdict.
            return format!("<p class=\"verdict\"><strong>At a glance:</strong> {line}</p>\n");
        }
    };
    format!("<p class=\"verdict\"><strong>Verdict:</strong> {line}</p>\n")
}

/// A receiver's main figure against the first sweep parameter, a line per value of the last;
/// with replicates, their mean, and their 95 % interval as a band. `label` names the
/// receivers it stands for.
fn sweep_plot(
    g: &Grid,
    (flow, label): (&str, &str),
    figure_of: &dyn Fn(&PointResult) -> Option<f64>,
    expected_of: &dyn Fn(&PointResult) -> Option<f64>,
    unit: &str,
    n: usize,
) -> String {
    let (xs, x_unit) = x_values(&g.rows.1);
    let mut lines = Vec::new();
    let mut banded = false;
    for (group, cv) in g.columns().into_iter().enumerate() {
        let name = cv.map_or_else(|| label.to_string(), |c| format!("{} = {c}", g.cols.0));
        let cells = |f: &dyn Fn(&PointResult) -> Option<f64>| {
            g.rows
                .1
                .iter()
                .zip(&xs)
                .filter_map(|(rv, x)| g.estimate(rv, cv, f).map(|e| (*x, e)))
                .collect::<Vec<_>>()
        };
        let measured = cells(figure_of);
        lines.push(Line {
            group,
            name: name.clone(),
            points: measured.iter().map(|(x, e)| (*x, e.mean)).collect(),
            style: Style::Measured,
        });
        let intervals: Vec<(f64, f64, f64)> = measured
            .iter()
            .filter_map(|(x, e)| e.half_width.map(|h| (*x, e.mean - h, e.mean + h)))
            .collect();
        if intervals.len() == measured.len() && !intervals.is_empty() {
            banded = true;
            lines.push(Line {
                group,
                name: format!("{name}, 95 % interval"),
                points: super::plots::band(&intervals),
                style: Style::Band,
            });
        }
        let expected: Vec<(f64, f64)> = cells(expected_of)
            .into_iter()
            .map(|(x, e)| (x, e.mean))
            .collect();
        if !expected.is_empty() {
            lines.push(Line {
                group,
                name: format!("{name} expected"),
                points: expected,
                style: Style::Closed,
            });
        }
    }
    let band = if banded {
        "; the mean over the replicates, their 95 % interval shaded"
    } else {
        ""
    };
    let crosses = if lines.iter().any(|l| l.style == Style::Closed) {
        "; expected values as crosses"
    } else {
        ""
    };
    plot_figure(Plot {
        x_names: super::plots::category_names(&g.rows.1, x_unit),
        id: &format!("sweep-{n}"),
        title: &format!("{flow} → {label}"),
        x_label: &axis(&g.rows.0, x_unit),
        y_label: unit,
        caption: &format!("{unit} against {}{crosses}{band}", g.rows.0),
        lines,
    })
}
