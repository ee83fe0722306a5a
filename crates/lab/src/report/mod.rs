//! The HTML report of a results directory: one self-contained file (styles inline, plots as
//! inline SVG), so it opens anywhere without a network connection.
//!
//! - `reference.rs`: the reference table beside the closed form and the measurement, its
//!   verdict, the fit of the testbed's extra holding time;
//! - `tables.rs`: the per-point figures;
//! - `sweep.rs`: each receiver's main figure across the sweep;
//! - `replicates.rs`: every metric over each point's replicates, mean and interval;
//! - `figures.rs`: which plots of each point, from its figures; [`plots`]: drawing them as
//!   SVG;
//! - `receivers.rs`: receivers with the same figures, said once (a multicast group's 45).

mod figures;
pub mod plots;
mod receivers;
mod reference;

pub use receivers::collapse as collapse_receivers;
mod repair;
mod replicates;
mod sweep;
mod tables;

use crate::claims::Verdict;
use crate::results::Summary;
use std::fmt::Write as _;
use std::path::Path;

/// Writes `DIR/report.html` for `summary`.
pub fn write(dir: &Path, summary: &Summary) -> Result<(), String> {
    let path = dir.join("report.html");
    std::fs::write(&path, render(summary))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The report as one HTML document.
pub fn render(s: &Summary) -> String {
    let mut h = String::with_capacity(64 * 1024);
    let title = format!("{} — Metronome lab", s.scenario.name);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n",
        esc(&title)
    );
    let _ = write!(
        h,
        "<h1>{}</h1>\n<p class=\"lead\">{}</p>\n",
        esc(&s.scenario.name),
        esc(&s.scenario.description)
    );
    let checked = crate::claims::check(s);
    h.push_str(&verdict_line(&checked));
    h.push_str(&run_facts(s));
    h.push_str(&unfinished(s));
    h.push_str(&claims_section(&checked));
    h.push_str(&replicates::section(s));
    h.push_str(&reference::reference_section(s));
    h.push_str(&sweep::sweep_section(s));
    h.push_str(&tables::points_section(s));
    let _ = writeln!(
        h,
        "<details><summary>Scenario file ({})</summary><pre>{}</pre></details>",
        esc(&s.scenario.origin),
        esc(&s.scenario.text)
    );
    h.push_str("</body></html>\n");
    h
}

/// The report's first word on the claims: how many agree, differ, or are inconclusive, and
/// from how many replicates (nothing without claims).
fn verdict_line(checked: &[crate::claims::Checked]) -> String {
    if checked.is_empty() {
        return String::new();
    }
    let count = |v: Verdict| checked.iter().filter(|c| c.verdict() == v).count();
    let mut parts = vec![
        format!("{} agree", count(Verdict::Agrees)),
        format!("{} differ", count(Verdict::Differs)),
        format!("{} inconclusive", count(Verdict::Inconclusive)),
    ];
    let unknown = count(Verdict::NotKnown);
    if unknown > 0 {
        parts.push(format!("{unknown} could not be measured"));
    }
    let reps = checked
        .iter()
        .map(|c| c.replicates.len())
        .max()
        .unwrap_or(0);
    let judged = if reps > 1 {
        format!("judged from {reps} replicates by 95 % confidence intervals")
    } else {
        "one replicate: each verdict compares two values, without an interval; \
         <code>--replicates 10</code> judges them"
            .into()
    };
    format!(
        "<p class=\"verdict\"><strong>Verdict:</strong> of {} claims of the source, {} \
         (<a href=\"#claims\">claims checked</a>; {judged}).</p>\n",
        checked.len(),
        parts.join(", ")
    )
}

/// The scenario's claims beside what the run says.
fn claims_section(checked: &[crate::claims::Checked]) -> String {
    if checked.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<h2 id=\"claims\">Claims checked</h2>\n<p class=\"note\">What the source concluded, \
         and what this run says: each side is the metric at the point its sweep values pick, \
         or the difference between two points (the first less the second). With replicates, \
         each side is their mean ± the half-width of its 95 % confidence interval, and the \
         verdict comes from the interval of the replicates' differences (left − right): \
         <em>agrees</em> when it lies wholly on the claim's side of zero, <em>differs</em> \
         when wholly on the other, <em>inconclusive</em> when it holds zero. Rows marked ↳ \
         under a claim are other figures of the same points, the run's own data on why it \
         holds or not. Under each side's value, the point it is (two: the first less the \
         second).</p>\n\
         <table class=\"claims\"><tr><th>claim</th><th>source</th><th>metric</th><th>left</th><th></th>\
         <th>right</th><th>left − right</th><th>replicates</th><th>this run</th></tr>",
    );
    for c in checked {
        let (l, r, d) = match &c.values {
            Ok(_) => (
                format!("{}{}", stacked(c.left()), side_label(&c.claim.lhs)),
                format!("{}{}", stacked(c.right()), side_label(&c.claim.rhs)),
                stacked(c.difference()),
            ),
            Err(e) => (esc(e), String::new(), String::new()),
        };
        let verdict = c.verdict();
        let class = match verdict {
            Verdict::Agrees => "good",
            Verdict::Differs => "bad",
            Verdict::Inconclusive | Verdict::NotKnown => "",
        };
        let verdict = match verdict {
            Verdict::Differs if !c.claim.note.is_empty() => {
                format!("differs: {}", esc(&c.claim.note))
            }
            v => v.as_str().to_string(),
        };
        let _ = write!(
            h,
            "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\"><code>{}</code>{}</td>\
             <td>{l}</td><td>{}</td><td>{r}</td><td>{d}</td><td>{}</td>\
             <td class=\"text run {class}\">{verdict}</td></tr>",
            esc(&c.claim.text),
            esc(&c.claim.source),
            esc(&c.claim.metric),
            c.claim
                .flow
                .as_deref()
                .map_or(String::new(), |f| format!(" of {}", esc(f))),
            esc(c.claim.op.symbol()),
            c.replicates.len()
        );
        for e in &c.evidence {
            h.push_str(&evidence_row(e));
        }
    }
    h.push_str("</table>\n");
    h
}

/// `mean ± half-width` to 3 decimals, the interval under the mean (a narrow column that
/// never breaks a number).
fn stacked(e: crate::estimates::Estimate) -> String {
    e.show(3).replace(" ± ", "<br>±\u{a0}")
}

/// Which point a side of a claim is (`cc = asmp`), or which two (the first less the second),
/// under its value.
fn side_label(side: &[std::collections::BTreeMap<String, String>]) -> String {
    let points: Vec<String> = side
        .iter()
        .map(|p| {
            let kv: Vec<String> = p.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            kv.join(", ")
        })
        .collect();
    format!("<br><span class=\"at\">{}</span>", esc(&points.join(" − ")))
}

/// A row under a claim: one of its evidence figures at the claim's sides.
fn evidence_row(e: &crate::claims::Shown) -> String {
    let show = |v: Option<crate::estimates::Estimate>| v.map_or(String::new(), stacked);
    let (l, r, d) = match &e.replicates {
        Ok(_) => (show(e.left()), show(e.right()), show(e.difference())),
        Err(why) => (esc(why), String::new(), String::new()),
    };
    let n = e.replicates.as_ref().map_or(0, Vec::len);
    format!(
        "<tr class=\"evidence\"><td>↳</td><td></td><td class=\"text\"><code>{}</code></td><td>{l}</td>\
         <td></td><td>{r}</td><td>{d}</td><td>{n}</td><td></td></tr>",
        esc(&e.evidence.label())
    )
}

fn run_facts(s: &Summary) -> String {
    let mut h = String::from("<table class=\"facts\">");
    let shard = if s.shard.count > 1 {
        format!("{} of {}", s.shard.index, s.shard.count)
    } else {
        "all".into()
    };
    for (k, v) in [
        ("mode", s.mode.clone()),
        (
            "points",
            format!("{} of {} ({shard})", s.points.len(), s.total_points),
        ),
        ("seed", s.scenario.seed.to_string()),
        (
            "host",
            format!(
                "{} ({} CPUs, Linux {})",
                s.host.hostname, s.host.cpus, s.host.kernel
            ),
        ),
        ("commit", s.commit.clone()),
        ("started", metronome_time::units::utc(s.started_unix_ns)),
        ("schema", s.schema.clone()),
    ] {
        let _ = write!(h, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v));
    }
    h.push_str("</table>\n");
    h
}

/// A run with points missing says so before any figure: which failed and why, and how to
/// finish it.
fn unfinished(s: &Summary) -> String {
    let (index, count) = (s.shard.index, s.shard.count.max(1));
    let share = (s.total_points + count - 1).saturating_sub(index) / count;
    if s.failed.is_empty() && s.points.len() >= share {
        return String::new();
    }
    let mut h = format!(
        "<div class=\"incomplete\"><p><strong>Incomplete:</strong> {} of the sweep's {} points \
         finished; the figures below are theirs. <code>metronome lab run --resume DIR</code> \
         runs the rest (a shard's directory holds only its share; <code>lab report</code> \
         merges shards).</p>",
        s.points.len(),
        s.total_points
    );
    if !s.failed.is_empty() {
        h.push_str("<table><tr><th>point</th><th>parameters</th><th>why it failed</th></tr>");
        for f in &s.failed {
            let params: Vec<String> = f.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"why\">{}</td></tr>",
                esc(&f.id),
                esc(&params.join(" ")),
                esc(&f.error)
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</div>\n");
    h
}

/// Escapes text for HTML.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}\
h1{margin-bottom:.2em}h2{margin-top:2em;border-bottom:1px solid #ccc}.lead{color:#555}\
table{border-collapse:collapse;margin:.5em 1.5em 1em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}\
th{background:#f3f3f3}tr>th:first-child{text-align:left}.facts th,.facts td,td.text{text-align:left}.at{font-size:85%;color:#555}.claims td.text{min-width:7em}.claims td.run{min-width:20em}caption{font-weight:600;text-align:left;padding:.3em 0}\
.side{display:flex;flex-wrap:wrap;align-items:flex-start}.note{color:#444;max-width:60em}\
.incomplete{border-left:4px solid #c60;background:#fff6ec;padding:.3em 1em}.incomplete .why{text-align:left}\
.bad{background:#fde2e2}.good{background:#e2f5e2}tr.evidence td{color:#555;font-size:90%;background:#fafafa}.verdict{font-size:110%;border-left:4px solid #36c;background:#eef3fc;padding:.4em 1em;max-width:60em}pre{background:#f7f7f7;padding:1em;overflow:auto}\
figure{display:inline-block;margin:.5em 1em .5em 0;vertical-align:top;max-width:640px}\
figcaption{font-size:90%;color:#444}.legend{color:#222;margin-bottom:.2em}.key{font-size:110%}";

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_markup() {
        assert_eq!(
            super::esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
