//! The report's tables: a reference (a seed's figures) beside the closed form and the
//! measurement, and each point's figures.

use super::{esc, receivers};
use crate::closed_form::{self, ClosedForm};
use crate::results::{PointResult, Summary};
use metronome_config::scenario::{Reference, ScenarioFile};
use metronome_time::Micros;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The scenario's `[reference]`, if it has one (read back from the text the run used).
pub(crate) fn reference_of(s: &Summary) -> Option<Reference> {
    let file = ScenarioFile::parse(&s.scenario.text, &s.scenario.origin).ok()?;
    let first = file.points().into_iter().next()?;
    file.resolve(&first).ok()?.reference
}

/// The points grouped by the values of every sweep parameter but `by`, in run order.
pub(crate) fn groups<'a>(
    s: &'a Summary,
    by: &str,
) -> Vec<(BTreeMap<String, String>, Vec<&'a PointResult>)> {
    let mut out: Vec<(BTreeMap<String, String>, Vec<&PointResult>)> = Vec::new();
    for p in &s.points {
        let mut key = p.params.clone();
        key.remove(by);
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(p),
            None => out.push((key, vec![p])),
        }
    }
    out
}

fn point_for<'a>(group: &[&'a PointResult], by: &str, col: &str) -> Option<&'a PointResult> {
    group
        .iter()
        .copied()
        .find(|p| p.params.get(by).map(String::as_str) == Some(col))
}

fn closed<'a>(p: &'a PointResult, receiver: &str) -> Option<&'a ClosedForm> {
    p.closed_form.iter().find(|c| c.receiver == receiver)
}

fn fmt_metric(metric: &str, v: f64) -> String {
    match metric {
        "loss_percent" => format!("{v:.1}"),
        "throughput_bps" => format!("{:.2}", v / 1e6),
        _ => format!("{:.3}", v / 1e6),
    }
}

fn unit(metric: &str) -> &'static str {
    match metric {
        "loss_percent" => "%",
        "throughput_bps" => "Mbit/s",
        _ => "ms",
    }
}

/// A rows × columns table; `cell` gives each value (None: no figure).
fn grid(
    caption: &str,
    r: &Reference,
    cell: impl Fn(usize, usize) -> Option<f64>,
    class: impl Fn(usize, usize) -> &'static str,
) -> String {
    let mut h = format!("<table><caption>{}</caption><tr><th></th>", esc(caption));
    for c in &r.columns {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr>");
    for (i, (name, _)) in r.rows.iter().enumerate() {
        let _ = write!(h, "<tr><th>{}</th>", esc(name));
        for j in 0..r.columns.len() {
            let v = cell(i, j).map_or("–".into(), |v| fmt_metric(&r.metric, v));
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
    let u = unit(&r.metric);
    let mut h = format!("<h2 id=\"reference\">{}</h2>\n", esc(&r.title));
    let _ = writeln!(
        h,
        "<p class=\"note\">Reference figures from {}; each cell is <code>{}</code> ({u}) of the \
         receiver named by the row, at the point where <code>{}</code> is the column's value.</p>",
        esc(&r.source),
        esc(&r.metric),
        esc(&r.by)
    );
    for (n, (key, g)) in groups(s, &r.by).into_iter().enumerate() {
        let label = if key.is_empty() {
            String::new()
        } else {
            let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            parts.join(", ")
        };
        let cells = Cells { r: &r, g: &g };
        let _ = write!(h, "<h3>{}</h3>\n<div class=\"side\">", esc(&label));
        h.push_str(&cells.grids());
        h.push_str("</div>\n");
        h.push_str(&super::figures::reference_plots(&r, &g, &label, n));
        let _ = writeln!(
            h,
            "<p class=\"note\">{}.</p>",
            esc(&cells.facts().join("; "))
        );
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
        let p = point_for(self.g, &self.r.by, &self.r.columns[j])?;
        closed_form::metric(&p.flows, &self.r.rows[i].0, &self.r.metric)
    }

    /// The closed form's loss: evenly spaced arrivals, or the fluid bound.
    fn closed(&self, i: usize, j: usize, fluid: bool) -> Option<f64> {
        let p = point_for(self.g, &self.r.by, &self.r.columns[j])?;
        let c = closed(p, &self.r.rows[i].0)?;
        Some(if fluid {
            c.fluid_loss_percent
        } else {
            c.periodic_loss_percent
        })
    }

    fn off_closed(&self, i: usize, j: usize) -> Option<f64> {
        Some((self.measured(i, j)? - self.closed(i, j, false)?).abs())
    }

    /// The largest of `f` over every cell that has it.
    fn worst(&self, f: impl Fn(usize, usize) -> Option<f64>) -> Option<f64> {
        let mut w: Option<f64> = None;
        for i in 0..self.r.rows.len() {
            for j in 0..self.r.columns.len() {
                if let Some(d) = f(i, j) {
                    w = Some(w.map_or(d, |x: f64| x.max(d)));
                }
            }
        }
        w
    }

    /// The reference's table, the closed forms' (for loss) and the measured, side by side.
    fn grids(&self) -> String {
        let (r, u) = (self.r, unit(&self.r.metric));
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
            |i, j| match (self.off_closed(i, j), self.measured(i, j)) {
                (Some(d), _) if self.loss() && d > 1.0 => "bad",
                (_, Some(m)) if (m - self.reference(i, j)).abs() <= 5.0 => "good",
                _ => "",
            },
        ));
        h
    }

    /// How far apart the measurement is from the closed form and from the reference.
    fn facts(&self) -> Vec<String> {
        let u = unit(&self.r.metric);
        let mut facts = Vec::new();
        if self.loss() {
            if let Some(w) = self.worst(|i, j| self.off_closed(i, j)) {
                facts.push(format!(
                    "measured vs. closed form (evenly spaced): at most {w:.2} points apart"
                ));
            }
        }
        let vs_ref = self.worst(|i, j| Some((self.measured(i, j)? - self.reference(i, j)).abs()));
        if let Some(w) = vs_ref {
            facts.push(format!("measured vs. reference: at most {w:.2} {u} apart"));
        }
        facts
    }
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
         <b>{worst:.1}</b> points of every reference cell. This is a property of the testbed \
         (the qdisc's dequeue timing, the host's stack), not of netem's definition, so the \
         model keeps its definition and the scenario carries the fitted value as a documented \
         parameter.</p>\n",
        cells.len(),
        from as f64 / 1e6,
        to as f64 / 1e6
    )
}

/// Each point: its receivers' figures, and its links.
pub(crate) fn points_section(s: &Summary) -> String {
    let mut h = String::from("<h2 id=\"points\">Points</h2>\n");
    for p in &s.points {
        h.push_str(&point_heading(p));
        h.push_str(&commands_table(p));
        h.push_str(&flows_table(p));
        h.push_str(&sharing_table(p));
        h.push_str(&video_table(p));
        h.push_str(&super::repair::repair_table(p));
        h.push_str(&super::figures::point_plots(p));
        h.push_str(&super::figures::rate_plot(p));
        h.push_str(&super::figures::sent_plots(p));
        h.push_str(&super::figures::video_plots(p));
        h.push_str(&links_table(p));
    }
    h
}

/// A point's heading: its parameters, how long it took (and its video), its warnings, and
/// in emu mode how well the emulator kept time.
fn point_heading(p: &PointResult) -> String {
    let params: Vec<String> = p.params.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    let video = if p.video_us > Micros::ZERO {
        let net = (p.wall_us - p.video_us).as_secs_f64().max(1e-9);
        let parts = p.video_work.map_or(String::new(), |w| {
            format!(
                " (the ladder {:.3} s, sending {:.3} s, decoding and comparing what \
                 viewers saw {:.3} s)",
                w.ladder_us.as_secs_f64(),
                w.sending_us.as_secs_f64(),
                w.judging_us.as_secs_f64()
            )
        });
        format!(
            "; the video took {:.3} s{parts}, the network and the sessions {:.3} s: \
             {:.2} M events/s",
            p.video_us.as_secs_f64(),
            net,
            p.events as f64 / net / 1e6
        )
    } else {
        String::new()
    };
    let mut h = format!(
        "<h3 id=\"{}\">{}: {}</h3>\n<p class=\"note\">{:.1} s of virtual time in {:.3} s \
         ({} events, seed {}){video}.</p>\n",
        p.id,
        p.id,
        esc(&params.join(", ")),
        p.sim_us.as_secs_f64(),
        p.wall_us.as_secs_f64(),
        p.events,
        p.seed
    );
    for w in &p.warnings {
        let _ = writeln!(h, "<p class=\"note bad\">{}</p>", esc(w));
    }
    if let Some(e) = &p.emu {
        let _ = writeln!(
            h,
            "<p class=\"note\">On real sockets: the emulator sent datagrams p50 {:.0} µs, \
             p99 {:.0} µs, at most {:.0} µs after its model's time; its sockets dropped {}; \
             {}.</p>",
            e.lateness_p50_us.as_micros_f64(),
            e.lateness_p99_us.as_micros_f64(),
            e.lateness_max_us.as_micros_f64(),
            e.socket_drops,
            esc(&e.host)
        );
    }
    h
}

/// The programs a point's command flows ran (emu mode), and how each ended.
fn commands_table(p: &PointResult) -> String {
    if p.commands.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<table><tr><th>program flow</th><th>host</th><th>command</th><th>ended</th>\
         <th>ran s</th><th>output</th></tr>",
    );
    for c in &p.commands {
        let ended = match (c.exit_code, c.signal) {
            (Some(code), _) => format!("exit {code}"),
            (None, Some(sig)) => format!("signal {sig}"),
            (None, None) => "not started".into(),
        };
        let stopped = if c.stopped {
            " (stopped by the lab)"
        } else {
            ""
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{ended}{stopped}</td>\
             <td>{:.2}</td><td><a href=\"{}\">stdout</a> <a href=\"{}\">stderr</a></td></tr>",
            esc(&c.flow),
            esc(&c.host),
            esc(&c.argv.join(" ")),
            c.ran_us.as_secs_f64(),
            esc(&c.stdout),
            esc(&c.stderr)
        );
    }
    h.push_str("</table>\n");
    h
}

/// Each flow's receivers, those with equal figures in one row (the first rows of a crowd
/// that differs, and a row for the rest).
fn flows_table(p: &PointResult) -> String {
    let mut h = String::from(
        "<table><tr><th>flow</th><th>kind</th><th>receiver</th><th>sent</th><th>received</th>\
         <th>loss %</th><th>throughput Mbit/s</th><th>jitter ms</th><th>mean delay ms</th>\
         <th>p99 delay ms</th><th>frames lost</th><th>frame delay ms (mean / p99)</th></tr>",
    );
    for f in &p.flows {
        let rows = f
            .receivers
            .iter()
            .map(|r| (r.node.as_str(), receiver_cells(f, r)))
            .collect();
        let groups = receivers::collapse(rows);
        let shown = if groups.len() > MAX_ROWS {
            SHOWN_ROWS
        } else {
            groups.len()
        };
        for (label, cells) in &groups[..shown] {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td>{cells}</tr>",
                esc(&f.name),
                esc(&f.kind),
                esc(label)
            );
        }
        if groups.len() > shown {
            h.push_str(&crowd_row(f, groups.len() - shown));
        }
    }
    h.push_str("</table>\n");
    h
}

/// A receiver's cells of [`flows_table`], after its name.
fn receiver_cells(
    f: &metronome_link::report::FlowReport,
    r: &metronome_link::report::ReceiverReport,
) -> String {
    let frames = r.frames.map_or_else(
        || "<td>n/a</td><td>n/a</td>".to_string(),
        |f| {
            format!(
                "<td>{} of {} ({:.1} %)</td><td>{:.1} / {:.1}</td>",
                f.lost,
                f.frames,
                f.lost_percent,
                f.mean_delay_us.as_millis_f64(),
                f.p99_delay_us.as_millis_f64()
            )
        },
    );
    // A TCP flow is measured as the application reads it: no packet's delay or jitter.
    let ms = |d: Micros| {
        if f.kind == "tcp" {
            "n/a".to_string()
        } else {
            format!("{:.3}", d.as_millis_f64())
        }
    };
    format!(
        "<td>{}</td><td>{}</td><td>{:.2}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td>\
         {frames}",
        f.sent_packets,
        r.packets,
        r.loss_percent,
        r.throughput_bps / 1e6,
        ms(r.jitter_us),
        ms(r.mean_delay_us),
        ms(r.p99_delay_us)
    )
}

/// The time-weighted mean of a rate controller's target over the flow's active time, bit/s.
pub(crate) fn mean_target(f: &metronome_link::report::FlowReport) -> Option<f64> {
    let rc = f.rate_control.as_ref()?;
    let end = f.start_us + f.duration_us;
    let mut sum = 0.0;
    for (i, &(t, bps)) in rc.points.iter().enumerate() {
        let next = rc.points.get(i + 1).map_or(end, |p| p.0).min(end);
        sum += bps as f64 * (next - t.max(f.start_us)).as_nanos_u64() as f64;
    }
    (f.duration_us > Micros::ZERO).then(|| sum / f.duration_us.as_nanos_u64() as f64)
}

/// The flows' rate controllers and how the flows shared the network (empty when neither
/// applies).
fn sharing_table(p: &PointResult) -> String {
    let mut h = String::new();
    let controlled: Vec<_> = p
        .flows
        .iter()
        .filter(|f| {
            f.rate_control
                .as_ref()
                .is_some_and(|r| r.controller != "fixed")
        })
        .collect();
    if !controlled.is_empty() {
        h.push_str(
            "<table><caption>Rate control</caption><tr><th>flow</th><th>controller</th>\
             <th>target changes</th><th>mean target Mbit/s</th><th>sent Mbit/s</th></tr>",
        );
        for f in controlled {
            let rc = f
                .rate_control
                .as_ref()
                .map_or("", |r| r.controller.as_str());
            let sent = f.sent_bytes as f64 * 8e9 / f.duration_us.as_nanos_u64().max(1) as f64;
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td></tr>",
                esc(&f.name),
                esc(rc),
                f.rate_control.as_ref().map_or(0, |r| r.changes),
                mean_target(f).unwrap_or(0.0) / 1e6,
                sent / 1e6
            );
        }
        h.push_str("</table>\n");
    }
    if let Some(fair) = &p.fairness {
        h.push_str(
            "<table><caption>Sharing: each flow's throughput (the mean of its receivers'), \
             Jain's fairness index over them, the largest ratio</caption>\
             <tr><th>flow</th><th>kind</th><th>throughput Mbit/s</th></tr>",
        );
        for f in &fair.flows {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{:.3}</td></tr>",
                esc(&f.flow),
                esc(&f.kind),
                f.throughput_bps / 1e6
            );
        }
        let _ = writeln!(
            h,
            "<tr><th colspan=\"2\">Jain's index</th><td>{:.3}</td></tr>\
             <tr><th colspan=\"2\">largest / smallest</th><td>{:.2}</td></tr></table>",
            fair.jain_index, fair.max_ratio
        );
    }
    h
}

/// What each video receiver saw: frames lost by type, delay, cumulative jitter, and the
/// pictures against the source's (empty without video).
fn video_table(p: &crate::results::PointResult) -> String {
    // Per flow, its viewers with equal figures in one row.
    let rows: Vec<(&str, String, String)> = p
        .flows
        .iter()
        .flat_map(|f| {
            let viewers = f
                .receivers
                .iter()
                .filter_map(|r| r.frames.map(|v| (r.node.as_str(), viewer_cells(&v))))
                .collect();
            receivers::collapse(viewers)
                .into_iter()
                .map(move |(label, cells)| (f.name.as_str(), label, cells))
        })
        .take(SHOWN_ROWS * 4)
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<table><caption>What viewers saw</caption><tr><th>flow</th><th>receiver</th>\
         <th>frames lost (I / P)</th><th>missed play-out deadline</th>\
         <th>frame delay ms (mean / p99)</th><th>max cumulative jitter ms</th>\
         <th>PSNR Y dB</th><th>PSNR YUV dB</th><th>SSIM</th><th>MOS</th>\
         <th>frames at MOS 1 / 2 / 3 / 4 / 5</th><th>MIV % (mean / max)</th></tr>",
    );
    for (flow, label, cells) in rows {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td>{cells}</tr>",
            esc(flow),
            esc(&label)
        );
    }
    h.push_str(
        "</table>\n<p class=\"note\">A frame is lost when a packet of it is, or when it misses \
         the play-out deadline and a newer frame is shown instead; the pictures are what reached \
         the viewer, decoded by FFmpeg's decoder, each display slot against the source's frame (PSNR \
         capped at 100 dB, Evalvid's MOS table). Every frame: <code>points/PNNN/FLOW.frames.csv</code>.</p>\n",
    );
    h
}

/// A viewer's cells of [`video_table`], after its flow and name.
fn viewer_cells(v: &metronome_link::report::FrameFigures) -> String {
    let pictures = v.pictures.map_or_else(
        || "<td>n/a</td><td>n/a</td><td>n/a</td><td>n/a</td><td>n/a</td><td>n/a</td>".to_string(),
        |q| {
            let m = q.mos_frames;
            format!(
                "<td>{:.2}</td><td>{:.2}</td><td>{:.4}</td><td>{:.2}</td>\
             <td>{} / {} / {} / {} / {}</td><td>{:.1} / {:.1}</td>",
                q.psnr_y_db,
                q.psnr_yuv_db,
                q.ssim,
                q.mos,
                m[0],
                m[1],
                m[2],
                m[3],
                m[4],
                q.miv_mean_percent,
                q.miv_max_percent
            )
        },
    );
    format!(
        "<td>{} of {} ({} / {})</td><td>{}</td><td>{:.1} / {:.1}</td><td>{:.1}</td>{pictures}",
        v.lost,
        v.frames,
        v.lost_i,
        v.lost_p,
        v.missed_deadline,
        v.mean_delay_us.as_millis_f64(),
        v.p99_delay_us.as_millis_f64(),
        v.max_cumulative_jitter_us.as_millis_f64(),
    )
}

/// Receivers shown per flow when it has more than [`MAX_ROWS`].
const SHOWN_ROWS: usize = 20;
const MAX_ROWS: usize = 50;

/// What the receivers of rows left out of the table did, in one row: the spread of every
/// receiver's loss.
fn crowd_row(f: &metronome_link::report::FlowReport, hidden: usize) -> String {
    let n = f.receivers.len();
    let loss = f.receivers.iter().map(|r| r.loss_percent);
    let (lo, hi) = loss.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    let mean = f.receivers.iter().map(|r| r.loss_percent).sum::<f64>() / n as f64;
    format!(
        "<tr><td colspan=\"12\" class=\"note\">… and {hidden} more rows (all {n} receivers \
         in flows.csv): loss from {lo:.2} to {hi:.2} %, mean {mean:.2} %</td></tr>"
    )
}

fn links_table(p: &PointResult) -> String {
    const SHOWN: usize = 200;
    let mut h = String::from(
        "<details><summary>links</summary><table><tr><th>from</th><th>to</th><th>profile</th>\
         <th>sent</th><th>delivered</th><th>lost</th><th>queue drops</th>\
         <th>max queue delay ms</th></tr>",
    );
    for l in p.links.iter().take(SHOWN) {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{:.3}</td></tr>",
            esc(&l.from),
            esc(&l.to),
            esc(&l.profile),
            l.sent,
            l.delivered,
            l.lost,
            l.dropped_queue,
            l.max_queue_delay_us.as_millis_f64()
        );
    }
    if p.links.len() > SHOWN {
        let _ = write!(
            h,
            "<tr><td colspan=\"8\" class=\"note\">… and {} more (every link is in summary.json)</td></tr>",
            p.links.len() - SHOWN
        );
    }
    h.push_str("</table></details>\n");
    h
}
