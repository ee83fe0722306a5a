//! Two runs side by side (`metronome lab compare A B`): the same points (matched by their
//! sweep values) and receivers, each figure from both runs and their difference.

use crate::report::collapse_receivers as collapse;
use crate::report::esc;
use crate::results::Summary;
use metronome_link::report::ReceiverReport;
use metronome_time::Micros;
use std::fmt::Write as _;

/// One receiver at one point, in both runs (or the receivers that showed the same figures in
/// both, as one row).
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
pub struct Row {
    /// The point's sweep values, `k=v, …`.
    pub point: String,
    pub flow: String,
    /// The receiver, or the receivers whose figures were the same in both runs, named once
    /// ("R1–R45 (45 receivers)").
    pub receiver: String,
    /// (a, b) per figure: loss %, throughput bit/s, jitter and mean delay.
    pub loss_percent: (f64, f64),
    pub throughput_bps: (f64, f64),
    /// RFC 3550 jitter in both runs; null for a TCP flow (its segments carry no timestamps to
    /// measure it from).
    pub jitter_us: Option<[Micros; 2]>,
    /// Mean one-way delay in both runs; null for a TCP flow.
    pub mean_delay_us: Option<[Micros; 2]>,
}

/// A receiver's figures in both runs: what [`Row`] shows of it.
#[derive(PartialEq)]
struct Figures {
    loss_percent: (f64, f64),
    throughput_bps: (f64, f64),
    jitter_us: Option<[Micros; 2]>,
    mean_delay_us: Option<[Micros; 2]>,
}

impl Figures {
    fn of(tcp: bool, a: &ReceiverReport, b: &ReceiverReport) -> Figures {
        let timed = |f: fn(&ReceiverReport) -> Micros| (!tcp).then(|| [f(a), f(b)]);
        Figures {
            loss_percent: (a.loss_percent, b.loss_percent),
            throughput_bps: (a.throughput_bps, b.throughput_bps),
            jitter_us: timed(|r| r.jitter_us),
            mean_delay_us: timed(|r| r.mean_delay_us),
        }
    }
}

/// The rows both runs have, in `a`'s order, receivers with the same figures in both as one
/// row; and how many of `a`'s and `b`'s receivers had no partner.
pub fn rows(a: &Summary, b: &Summary) -> (Vec<Row>, usize, usize) {
    let mut out = Vec::new();
    let mut matched_b = 0;
    for pa in &a.points {
        let Some(pb) = b.points.iter().find(|p| p.params == pa.params) else {
            continue;
        };
        let point: Vec<String> = pa.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        for fa in &pa.flows {
            let Some(fb) = pb.flows.iter().find(|f| f.name == fa.name) else {
                continue;
            };
            let pairs: Vec<(&str, Figures)> = fa
                .receivers
                .iter()
                .filter_map(|ra| {
                    let rb = fb.receivers.iter().find(|r| r.node == ra.node)?;
                    Some((ra.node.as_str(), Figures::of(fa.kind == "tcp", ra, rb)))
                })
                .collect();
            matched_b += pairs.len();
            for (receiver, f) in collapse(pairs) {
                out.push(Row {
                    point: point.join(", "),
                    flow: fa.name.clone(),
                    receiver,
                    loss_percent: f.loss_percent,
                    throughput_bps: f.throughput_bps,
                    jitter_us: f.jitter_us,
                    mean_delay_us: f.mean_delay_us,
                });
            }
        }
    }
    let count = |s: &Summary| -> usize {
        s.points
            .iter()
            .flat_map(|p| &p.flows)
            .map(|f| f.receivers.len())
            .sum()
    };
    (
        out,
        count(a) - matched_b.min(count(a)),
        count(b) - matched_b.min(count(b)),
    )
}

/// A pair of durations in ms as the tables show them (`n/a` where the flow has none).
fn ms(v: Option<[Micros; 2]>, k: usize) -> String {
    v.map_or("n/a".into(), |v| format!("{:.3}", v[k].as_millis_f64()))
}

/// A plain-text table for a terminal.
pub fn text(a: &Summary, b: &Summary, rows: &[Row]) -> String {
    let mut s = format!(
        "A: {} ({}, commit {}, seed {})\nB: {} ({}, commit {}, seed {})\n\n",
        a.scenario.name,
        a.mode,
        a.commit,
        a.scenario.seed,
        b.scenario.name,
        b.mode,
        b.commit,
        b.scenario.seed
    );
    // A group's label ("R1–R45 (45 receivers)") is wider than a name: the column fits it.
    let w = rows
        .iter()
        .map(|r| r.receiver.chars().count())
        .fold(12, usize::max);
    let _ = writeln!(
        s,
        "{:<32} {:<14} {:<w$} {:>7} {:>7} {:>7}  {:>8} {:>8}  {:>7} {:>7}  {:>8} {:>8}",
        "point",
        "flow",
        "receiver",
        "loss A%",
        "loss B%",
        "Δ",
        "Mbit/s A",
        "Mbit/s B",
        "jit A",
        "jit B",
        "delay A",
        "delay B"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<32} {:<14} {:<w$} {:>7.2} {:>7.2} {:>+7.2}  {:>8.3} {:>8.3}  {:>7} {:>7}  {:>8} {:>8}",
            r.point,
            r.flow,
            r.receiver,
            r.loss_percent.0,
            r.loss_percent.1,
            r.loss_percent.1 - r.loss_percent.0,
            r.throughput_bps.0 / 1e6,
            r.throughput_bps.1 / 1e6,
            ms(r.jitter_us, 0),
            ms(r.jitter_us, 1),
            ms(r.mean_delay_us, 0),
            ms(r.mean_delay_us, 1),
        );
    }
    s.push_str("(jitter and delay in ms; n/a for TCP)\n");
    s
}

/// The same as an HTML page.
pub fn html(a: &Summary, b: &Summary, rows: &[Row]) -> String {
    let mut h = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{} vs {}</title>\
         <style>body{{font:15px system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:right}}</style></head><body>\
         <h1>{} vs {}</h1><p>A: commit {}, {} points. B: commit {}, {} points.</p><table><tr>\
         <th>point</th><th>flow</th><th>receiver</th><th>loss A %</th><th>loss B %</th>\
         <th>Δ loss</th><th>Mbit/s A</th><th>Mbit/s B</th><th>jitter A ms</th><th>jitter B ms</th>\
         <th>delay A ms</th><th>delay B ms</th></tr>",
        esc(&a.scenario.name),
        esc(&b.scenario.name),
        esc(&a.scenario.name),
        esc(&b.scenario.name),
        esc(&a.commit),
        a.points.len(),
        esc(&b.commit),
        b.points.len()
    );
    for r in rows {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:+.2}</td>\
             <td>{:.3}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.point),
            esc(&r.flow),
            esc(&r.receiver),
            r.loss_percent.0,
            r.loss_percent.1,
            r.loss_percent.1 - r.loss_percent.0,
            r.throughput_bps.0 / 1e6,
            r.throughput_bps.1 / 1e6,
            ms(r.jitter_us, 0),
            ms(r.jitter_us, 1),
            ms(r.mean_delay_us, 0),
            ms(r.mean_delay_us, 1)
        );
    }
    h.push_str("</table></body></html>\n");
    h
}
