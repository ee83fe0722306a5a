//! A reference (a seed's table, the scenario's `[reference]`) beside the closed form and the
//! measurement: the tables side by side, a verdict line and a legend for each group of the
//! other sweep values, and the fit of the reference testbed's extra holding time.

use super::esc;
use super::plots::{axis, figure, x_values, Line, Plot, Style};
use crate::closed_form::{self, ClosedForm};
use crate::results::{PointResult, Summary};
use metronome_config::scenario::{Reference, ScenarioFile, REPLICATE};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How near a measured loss must be to the reference's to agree, in percentage points.
const LOSS_AGREES_POINTS: f64 = 5.0;
/// How near a measured loss must be to the evenly-spaced closed form, in percentage points.
const LOSS_CLOSED_POINTS: f64 = 1.0;
/// How near any other measured figure must be to the reference's, as a share of it.
const OTHER_AGREES_SHARE: f64 = 0.10;

/// The scenario's `[reference]`, if it has one (read back from the text the run used).
pub(crate) fn reference_of(s: &Summary) -> Option<Reference> {
    let file = ScenarioFile::parse(&s.scenario.text, &s.scenario.origin).ok()?;
    let first = file.points().into_iter().next()?;
    file.resolve(&first).ok()?.reference
}

/// The points grouped by the values of every sweep parameter but `by` and `replicate`, in
/// run order (a group holds every replicate of its points).
pub(crate) fn groups<'a>(
    s: &'a Summary,
    by: &str,
) -> Vec<(BTreeMap<String, String>, Vec<&'a PointResult>)> {
    let mut out: Vec<(BTreeMap<String, String>, Vec<&PointResult>)> = Vec::new();
    for p in &s.points {
        let mut key = p.params.clone();
        key.remove(by);
        key.remove(REPLICATE);
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(p),
            None => out.push((key, vec![p])),
        }
    }
    out
}

/// The mean of `f` over the group's points (its replicates) where `by` is `col`.
pub(crate) fn mean_at(
    group: &[&PointResult],
    by: &str,
    col: &str,
    f: impl Fn(&PointResult) -> Option<f64>,
) -> Option<f64> {
    let v: Vec<f64> = group
        .iter()
        .filter(|p| p.params.get(by).map(String::as_str) == Some(col))
        .filter_map(|p| f(p))
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// How a reference's metric is shown: its unit, and the factor from the stored value
/// (%, bit/s or µs, as the scenario writes it) to that unit.
#[derive(Clone, Copy)]
pub(crate) struct Shown {
    pub unit: &'static str,
    pub scale: f64,
    /// The unit of a difference of two values (a difference of percentages is in points).
    pub diff_unit: &'static str,
    pub digits: usize,
}

impl Shown {
    pub(crate) fn of(metric: &str) -> Shown {
        let (unit, scale, diff_unit, digits) = match metric {
            "loss_percent" => ("%", 1.0, "percentage points", 1),
            "throughput_bps" => ("Mbit/s", 1e-6, "Mbit/s", 2),
            // jitter_us, mean_delay_us
            _ => ("ms", 1e-3, "ms", 3),
        };
        Shown {
            unit,
            scale,
            diff_unit,
            digits,
        }
    }

    fn show(&self, stored: f64) -> String {
        format!("{:.*}", self.digits, stored * self.scale)
    }

    /// A difference, one digit finer than the cells (so 5.03 apart does not read as 5.0).
    fn show_diff(&self, stored: f64) -> String {
        format!("{:.*}", self.digits + 1, stored * self.scale)
    }
}

/// A rows × columns table; `cell` gives each value, as stored (None: no figure).
fn grid(
    caption: &str,
    r: &Reference,
    cell: impl Fn(usize, usize) -> Option<f64>,
    class: impl Fn(usize, usize) -> &'static str,
) -> String {
    let shown = Shown::of(&r.metric);
    let mut h = format!("<table><caption>{}</caption><tr><th></th>", esc(caption));
    for c in &r.columns {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr>");
    for (i, (name, _)) in r.rows.iter().enumerate() {
        let _ = write!(h, "<tr><th>{}</th>", esc(name));
        for j in 0..r.columns.len() {
            let v = cell(i, j).map_or("n/a".into(), |v| shown.show(v));
            let _ = write!(h, "<td class=\"{}\">{v}</td>", class(i, j));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    h
}

/// The reference beside the closed forms and the measurement, per group of other sweep
/// values, and the fitted extra holding time.
pub(crate) fn reference_section(s: &Summary) -> String {
    let Some(r) = reference_of(s) else {
        return String::new();
    };
    let u = Shown::of(&r.metric).unit;
    let mut h = format!("<h2 id=\"reference\">{}</h2>\n", esc(&r.title));
    let replicates = if super::super::estimates::has_replicates(s) {
        "; a measured cell is the mean over the point's replicates"
    } else {
        ""
    };
    let _ = writeln!(
        h,
        "<p class=\"note\">Reference figures from {}; each cell is the <code>{}</code> of the \
         receiver named by the row, in {u}, at the point where <code>{}</code> is the column's \
         value (n/a: not measured){replicates}.</p>",
        esc(&r.source),
        esc(&r.metric),
        esc(&r.by)
    );
    for (n, (key, g)) in groups(s, &r.by).into_iter().enumerate() {
        let label: Vec<String> = key.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        let label = label.join(", ");
        let cells = Cells { r: &r, g: &g };
        if !label.is_empty() {
            let _ = writeln!(h, "<h3>{}</h3>", esc(&label));
        }
        h.push_str(&cells.verdict());
        h.push_str("<div class=\"side\">");
        h.push_str(&cells.grids());
        h.push_str("</div>\n");
        h.push_str(&cells.legend());
        h.push_str(&reference_plots(&r, &g, &label, n));
    }
    if r.metric == "loss_percent" {
        h.push_str(&fit_note(s, &r));
    }
    h
}

/// One group's cells of the reference table: the reference's, the closed forms' and the
/// measured, by row (receiver) and column (value of the swept parameter).
struct Cells<'a> {
    r: &'a Reference,
    g: &'a [&'a PointResult],
}

impl Cells<'_> {
    fn loss(&self) -> bool {
        self.r.metric == "loss_percent"
    }

    fn reference(&self, i: usize, j: usize) -> f64 {
        self.r.rows[i].1[j]
    }

    fn measured(&self, i: usize, j: usize) -> Option<f64> {
        mean_at(self.g, &self.r.by, &self.r.columns[j], |p| {
            closed_form::metric(&p.flows, &self.r.rows[i].0, &self.r.metric)
        })
    }

    /// The closed form's loss: evenly spaced arrivals, or the fluid bound (the same at every
    /// replicate: it depends on the link and the stream alone).
    fn closed(&self, i: usize, j: usize, fluid: bool) -> Option<f64> {
        let row = &self.r.rows[i].0;
        mean_at(self.g, &self.r.by, &self.r.columns[j], |p| {
            let c: &ClosedForm = p.closed_form.iter().find(|c| &c.receiver == row)?;
            Some(if fluid {
                c.fluid_loss_percent
            } else {
                c.periodic_loss_percent
            })
        })
    }

    fn off_closed(&self, i: usize, j: usize) -> Option<f64> {
        Some((self.measured(i, j)? - self.closed(i, j, false)?).abs())
    }

    /// Whether the measured cell agrees with the reference's (None: not measured).
    fn agrees(&self, i: usize, j: usize) -> Option<bool> {
        let (m, r) = (self.measured(i, j)?, self.reference(i, j));
        Some(if self.loss() {
            (m - r).abs() <= LOSS_AGREES_POINTS
        } else {
            (m - r).abs() <= OTHER_AGREES_SHARE * r.abs()
        })
    }

    /// What "agrees with the reference" means, in words.
    fn tolerance(&self) -> String {
        if self.loss() {
            format!("within {LOSS_AGREES_POINTS} percentage points")
        } else {
            format!("within {:.0} % of it", OTHER_AGREES_SHARE * 100.0)
        }
    }

    /// Every cell's (row, column).
    fn all(&self) -> impl Iterator<Item = (usize, usize)> {
        let cols = self.r.columns.len();
        (0..self.r.rows.len()).flat_map(move |i| (0..cols).map(move |j| (i, j)))
    }

    /// The reference's table, the closed forms' (for loss) and the measured, side by side.
    fn grids(&self) -> String {
        let (r, u) = (self.r, Shown::of(&self.r.metric).unit);
        let mut h = grid(
            &format!("reference ({u})"),
            r,
            |i, j| Some(self.reference(i, j)),
            |_, _| "",
        );
        if self.loss() {
            h.push_str(&grid(
                "closed form: evenly spaced arrivals (%)",
                r,
                |i, j| self.closed(i, j, false),
                |_, _| "",
            ));
            h.push_str(&grid(
                "closed form: fluid bound L ÷ hold (%)",
                r,
                |i, j| self.closed(i, j, true),
                |_, _| "",
            ));
        }
        h.push_str(&grid(
            &format!("measured ({u})"),
            r,
            |i, j| self.measured(i, j),
            |i, j| match (self.off_closed(i, j), self.agrees(i, j)) {
                (Some(d), _) if self.loss() && d > LOSS_CLOSED_POINTS => "bad",
                (_, Some(true)) => "good",
                _ => "",
            },
        ));
        h
    }

    /// What the measured table's shading means.
    fn legend(&self) -> String {
        let closed = if self.loss() {
            format!(
                "; <span class=\"bad\">red</span>: more than {LOSS_CLOSED_POINTS} percentage \
                 point from the evenly-spaced closed form (the simulator and the form disagree), \
                 whatever its distance from the reference"
            )
        } else {
            String::new()
        };
        format!(
            "<p class=\"note\">Measured cells: <span class=\"good\">green</span>: {} of the \
             reference{closed}; unshaded: neither.</p>\n",
            esc(&self.tolerance())
        )
    }

    /// The group's verdict: how many measured cells agree with the reference, the farthest
    /// one, and (for loss) how many are within a point of the closed form.
    fn verdict(&self) -> String {
        let shown = Shown::of(&self.r.metric);
        let measured: Vec<(usize, usize)> = self
            .all()
            .filter(|&(i, j)| self.measured(i, j).is_some())
            .collect();
        if measured.is_empty() {
            return "<p class=\"verdict\"><strong>Verdict:</strong> no cell of the reference \
                    was measured in this run.</p>\n"
                .into();
        }
        let agree = measured
            .iter()
            .filter(|&&(i, j)| self.agrees(i, j) == Some(true))
            .count();
        let off = |&(i, j): &(usize, usize)| {
            (self.measured(i, j).unwrap_or(0.0) - self.reference(i, j)).abs()
        };
        let far = measured
            .iter()
            .copied()
            .max_by(|a, b| off(a).total_cmp(&off(b)))
            .unwrap_or((0, 0));
        let mut line = format!(
            "<p class=\"verdict\"><strong>Verdict:</strong> the measurement agrees with the \
             reference in <b>{agree} of {}</b> cells ({}); the farthest is {} at {}: {} against \
             {} {}, {} {} apart.",
            measured.len(),
            esc(&self.tolerance()),
            esc(&self.r.rows[far.0].0),
            esc(&self.r.columns[far.1]),
            shown.show(self.measured(far.0, far.1).unwrap_or(0.0)),
            shown.show(self.reference(far.0, far.1)),
            shown.unit,
            shown.show_diff(off(&far)),
            shown.diff_unit
        );
        if self.loss() {
            let with_closed: Vec<f64> = measured
                .iter()
                .filter_map(|&(i, j)| self.off_closed(i, j))
                .collect();
            let near = with_closed
                .iter()
                .filter(|d| **d <= LOSS_CLOSED_POINTS)
                .count();
            let worst = with_closed.iter().copied().fold(0.0, f64::max);
            let _ = write!(
                line,
                " Beside the evenly-spaced closed form: {near} of {} cells within \
                 {LOSS_CLOSED_POINTS} percentage point (at most {worst:.2} apart).",
                with_closed.len()
            );
        }
        line.push_str("</p>\n");
        line
    }
}

/// The reference's metric against its sweep parameter (measured, the reference's figures,
/// the closed form), and jitter likewise, for one group of the other parameters.
pub(crate) fn reference_plots(
    r: &Reference,
    group: &[&PointResult],
    label: &str,
    n: usize,
) -> String {
    let (xs, unit) = x_values(&r.columns);
    // With replicates, a column's figure is the mean over them.
    let series = |f: &dyn Fn(&PointResult, &str) -> Option<f64>, row: &str| -> Vec<(f64, f64)> {
        r.columns
            .iter()
            .zip(&xs)
            .filter_map(|(c, x)| mean_at(group, &r.by, c, |p| f(p, row)).map(|y| (*x, y)))
            .collect()
    };
    let Shown {
        scale,
        unit: y_unit,
        ..
    } = Shown::of(&r.metric);
    let mut lines = Vec::new();
    for (group, (row, values)) in r.rows.iter().enumerate() {
        lines.push(Line {
            group,
            name: format!("{row} measured"),
            points: series(
                &|p, row| closed_form::metric(&p.flows, row, &r.metric).map(|v| v * scale),
                row,
            ),
            style: Style::Measured,
        });
        lines.push(Line {
            group,
            name: format!("{row} reference"),
            points: xs
                .iter()
                .zip(values)
                .map(|(x, v)| (*x, v * scale))
                .collect(),
            style: Style::Reference,
        });
        if r.metric == "loss_percent" {
            lines.push(Line {
                group,
                name: format!("{row} closed form"),
                points: series(
                    &|p, row| {
                        p.closed_form
                            .iter()
                            .find(|c| c.receiver == row)
                            .map(|c| c.periodic_loss_percent)
                    },
                    row,
                ),
                style: Style::Closed,
            });
        }
    }
    let x_label = axis(&r.by, unit);
    let mut html = figure(Plot {
        x_names: super::plots::category_names(&r.columns, unit),
        id: &format!("reference-{n}"),
        title: &format!("{} against {}", r.metric, r.by),
        x_label: &x_label,
        y_label: &format!("{}, {y_unit}", r.metric),
        caption: &format!(
            "{label}: measured (circles), reference (triangles), closed form (crosses)"
        ),
        lines,
    });
    let jitter = r
        .rows
        .iter()
        .enumerate()
        .map(|(group, (row, _))| Line {
            group,
            name: row.clone(),
            points: series(
                &|p, row| closed_form::metric(&p.flows, row, "jitter_us").map(|v| v / 1e3),
                row,
            ),
            style: Style::Measured,
        })
        .collect();
    html.push_str(&figure(Plot {
        x_names: super::plots::category_names(&r.columns, unit),
        id: &format!("jitter-{n}"),
        title: &format!("RFC 3550 jitter against {}", r.by),
        x_label: &x_label,
        y_label: "jitter, ms",
        caption: &format!("{label}: each receiver's jitter at the end of the run"),
        lines: jitter,
    }));
    html
}

/// The extra time the reference's testbed held packets, fitted to its table.
fn fit_note(s: &Summary, r: &Reference) -> String {
    let Some((key, _)) = groups(s, &r.by).into_iter().next() else {
        return String::new();
    };
    let points: Vec<(BTreeMap<String, String>, Vec<ClosedForm>)> = s
        .points
        .iter()
        .map(|p| (p.params.clone(), p.closed_form.clone()))
        .collect();
    let cells = closed_form::reference_cells(r, &points, &key);
    let Some((from, to, worst)) = closed_form::fit_hold_extra(&cells) else {
        return String::new();
    };
    format!(
        "<h3>Fit: how long the reference's testbed held packets</h3>\n<p class=\"note\" id=\"fit\">\
         The closed form holds each packet for its delay plus its serialization. Fitted to the \
         reference's {} cells by least squares, the testbed held each packet \
         <b>{:.2} to {:.2} ms</b> longer (<code>hold_extra</code>; the form is a step function of \
         the holding time, so every value in the range gives the same table); with that, the \
         evenly-spaced closed form is within \
         <b>{worst:.1}</b> percentage points of every reference cell. This is a property of the \
         testbed (the qdisc's dequeue timing, the host's stack), not of netem's definition, so \
         the model keeps its definition and the scenario carries the fitted value as a \
         documented parameter.</p>\n",
        cells.len(),
        from as f64 / 1e6,
        to as f64 / 1e6
    )
}

#[cfg(test)]
mod tests {
    use super::Shown;

    #[test]
    fn each_metric_is_shown_in_its_unit() {
        // Stored as the scenario writes them: %, bit/s, µs.
        assert_eq!(Shown::of("loss_percent").show(9.34), "9.3");
        assert_eq!(Shown::of("throughput_bps").show(5_438_000.0), "5.44");
        assert_eq!(Shown::of("jitter_us").show(1500.0), "1.500");
        assert_eq!(Shown::of("mean_delay_us").show_diff(21_264.0), "21.2640");
        assert_eq!(Shown::of("loss_percent").diff_unit, "percentage points");
    }
}
