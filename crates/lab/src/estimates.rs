//! Every metric of a run over its replicates: the mean and the half-width of its 95 %
//! confidence interval (Student's t, N − 1 degrees of freedom), per sweep point.
//!
//! A point's replicates share its sweep values but for `replicate`; each metric is a flow's
//! mean over its receivers (those that have it), or the point's (Jain's index). The claims
//! ([`crate::claims`]) are judged from the same figures; `DIR/replicates.csv` and the
//! report's "Across replicates" section show them all.

use crate::results::{PointResult, Summary};
use metronome_config::scenario::REPLICATE;
use metronome_link::report::{FlowReport, ReceiverReport};
use metronome_time::Micros;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A mean over replicates and the half-width of its 95 % confidence interval (`None` with
/// fewer than two replicates).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub half_width: Option<f64>,
    pub n: usize,
}

impl Estimate {
    pub fn of(values: &[f64]) -> Estimate {
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n.max(1) as f64;
        let half_width = (n >= 2).then(|| {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            t_975(n - 1) * (var / n as f64).sqrt()
        });
        Estimate {
            mean,
            half_width,
            n,
        }
    }

    /// `mean ± half-width`, to `digits` decimals.
    pub fn show(&self, digits: usize) -> String {
        match self.half_width {
            Some(h) => format!("{:.digits$} ± {h:.digits$}", self.mean),
            None => format!("{:.digits$}", self.mean),
        }
    }
}

/// Student's t at 97.5 % for `df` degrees of freedom (two-sided 95 %).
pub fn t_975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        31..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

/// The metrics a claim may name and the estimates cover: name, and what it is (with its
/// unit). All but those of [`POINT_METRICS`] are a flow's.
pub const METRICS: &[(&str, &str)] = &[
    ("throughput_mbps", "throughput, Mbit/s"),
    ("loss_percent", "packets lost, %"),
    ("delay_ms", "mean packet delay, ms"),
    ("p99_delay_ms", "99th-percentile packet delay, ms"),
    ("frames_lost_percent", "frames lost, %"),
    (
        "missed_deadline_percent",
        "frames past the play-out deadline, %",
    ),
    ("frame_delay_ms", "mean frame delay, ms"),
    ("cumulative_jitter_ms", "largest cumulative jitter, ms"),
    (
        "first_frame_delay_ms",
        "delay of the first frame that arrived (cumulative jitter's base), ms",
    ),
    ("psnr_y_db", "PSNR of luma, dB"),
    ("mos", "MOS (from PSNR)"),
    (
        "rate_cv",
        "the controller's target: coefficient of variation over the run",
    ),
    (
        "target_mbps",
        "the controller's target: mean over the run, Mbit/s",
    ),
    (
        "quantizer",
        "a ladder's rung: mean quantizer over the run (higher: coarser)",
    ),
    ("jain_index", "Jain's index over the flows"),
    (
        "bottleneck_drop_percent",
        "the bottleneck's queue drops, % of the packets sent into it",
    ),
    (
        "bottleneck_queue_ms",
        "the bottleneck's longest queue wait, ms",
    ),
];

pub use metronome_config::scenario::POINT_METRICS;

/// Whether `metric` is a whole point's rather than a flow's.
pub fn is_point_metric(metric: &str) -> bool {
    POINT_METRICS.contains(&metric)
}

/// The mean over `f`'s receivers of `value` (those that have it).
fn mean(f: &FlowReport, value: impl Fn(&ReceiverReport) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = f.receivers.iter().filter_map(value).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// `metric` at point `p`, of flow `flow` (none for [`POINT_METRICS`]).
pub fn metric(p: &PointResult, flow: Option<&str>, metric: &str) -> Result<f64, String> {
    if is_point_metric(metric) {
        return point_metric(p, metric);
    }
    let name = flow.unwrap_or_default();
    let f = p
        .flows
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| format!("{}: no flow '{name}'", p.id))?;
    let frames = |r: &ReceiverReport| r.frames;
    let v = match metric {
        "frames_lost_percent" => mean(f, |r| frames(r).map(|x| x.lost_percent)),
        "missed_deadline_percent" => mean(f, |r| {
            frames(r).map(|x| 100.0 * x.missed_deadline as f64 / x.frames.max(1) as f64)
        }),
        "frame_delay_ms" => mean(f, |r| frames(r).map(|x| x.mean_delay_us.as_millis_f64())),
        "cumulative_jitter_ms" => mean(f, |r| {
            frames(r).map(|x| x.max_cumulative_jitter_us.as_millis_f64())
        }),
        "first_frame_delay_ms" => mean(f, |r| frames(r).map(|x| x.first_delay_us.as_millis_f64())),
        "psnr_y_db" => mean(f, |r| frames(r)?.pictures.map(|x| x.psnr_y_db)),
        "mos" => mean(f, |r| frames(r)?.pictures.map(|x| x.mos)),
        "throughput_mbps" => mean(f, |r| Some(r.throughput_bps / 1e6)),
        "loss_percent" => mean(f, |r| Some(r.loss_percent)),
        // A TCP flow's bytes are counted as the application reads them: no packet's delay.
        "delay_ms" | "p99_delay_ms" if f.kind == "tcp" => None,
        "delay_ms" => mean(f, |r| Some(r.mean_delay_us.as_millis_f64())),
        "p99_delay_ms" => mean(f, |r| Some(r.p99_delay_us.as_millis_f64())),
        "rate_cv" => f
            .rate_control
            .as_ref()
            .and_then(|rc| rate_cv(&rc.points, p.sim_us)),
        "target_mbps" => f
            .rate_control
            .as_ref()
            .and_then(|rc| time_weighted(&rc.points, p.sim_us))
            .map(|(mean, _)| mean / 1e6),
        "quantizer" => p
            .sent_series
            .iter()
            .find(|s| s.flow == name)
            .and_then(|s| {
                let rungs: Vec<(Micros, u64)> = (s.rung_start_us.iter().copied())
                    .zip(s.rung_quantizer.iter().map(|&q| q as u64))
                    .collect();
                time_weighted(&rungs, p.sim_us)
            })
            .map(|(mean, _)| mean),
        other => return Err(format!("metric {other} is not known")),
    };
    v.ok_or_else(|| format!("{}: flow '{name}' has no {metric}", p.id))
}

/// A point's own metric: Jain's index, or the bottleneck's (the link with the most queue
/// drops; with none, the one with the longest queue wait).
fn point_metric(p: &PointResult, metric: &str) -> Result<f64, String> {
    if metric == "jain_index" {
        return p
            .fairness
            .as_ref()
            .map(|f| f.jain_index)
            .ok_or_else(|| format!("{}: fewer than two flows", p.id));
    }
    let link = p
        .links
        .iter()
        .max_by_key(|l| (l.dropped_queue, l.max_queue_delay_us))
        .ok_or_else(|| format!("{}: no link", p.id))?;
    match metric {
        "bottleneck_drop_percent" => {
            Ok(100.0 * link.dropped_queue as f64 / link.sent.max(1) as f64)
        }
        "bottleneck_queue_ms" => Ok(link.max_queue_delay_us.as_millis_f64()),
        other => Err(format!("metric {other} is not known")),
    }
}

/// The coefficient of variation (standard deviation over mean) of a rate that is `x` from
/// each point's time `t` to the next's, the last's until `end`, weighted by time: how
/// smooth a controller's target was. `None` without a span or with a zero mean.
pub fn rate_cv(points: &[(Micros, u64)], end: Micros) -> Option<f64> {
    let (mean, sd) = time_weighted(points, end)?;
    (mean > 0.0).then(|| sd / mean)
}

/// The mean and standard deviation of a value that is `x` from each point's time `t` to
/// the next's, the last's until `end`, weighted by time. `None` without a span.
pub fn time_weighted(points: &[(Micros, u64)], end: Micros) -> Option<(f64, f64)> {
    let spans: Vec<(f64, f64)> = points
        .iter()
        .enumerate()
        .map(|(i, &(t, x))| {
            let next = points.get(i + 1).map_or(end, |p| p.0);
            ((next - t).as_nanos_u64() as f64, x as f64)
        })
        .collect();
    let total: f64 = spans.iter().map(|s| s.0).sum();
    if total <= 0.0 {
        return None;
    }
    let mean = spans.iter().map(|(d, x)| d * x).sum::<f64>() / total;
    let var = spans
        .iter()
        .map(|(d, x)| d * (x - mean).powi(2))
        .sum::<f64>()
        / total;
    Some((mean, var.sqrt()))
}

/// A point's replicate (1 when the run has one of each point).
pub fn replicate_of(p: &PointResult) -> u32 {
    p.params
        .get(REPLICATE)
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
}

/// A sweep point and its replicates in this run.
pub struct Group<'a> {
    /// Its sweep values, `replicate` left out.
    pub params: BTreeMap<String, String>,
    pub points: Vec<&'a PointResult>,
}

impl Group<'_> {
    /// `k = v, …` (empty without a sweep).
    pub fn label(&self) -> String {
        let kv: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect();
        kv.join(", ")
    }

    /// `metric` of `flow` over the replicates that have it (`None`: none has).
    pub fn estimate(&self, flow: Option<&str>, name: &str) -> Option<Estimate> {
        let v: Vec<f64> = self
            .points
            .iter()
            .filter_map(|p| metric(p, flow, name).ok())
            .collect();
        (!v.is_empty()).then(|| Estimate::of(&v))
    }
}

/// The run's points grouped by their sweep values, in the order they first appear.
pub fn groups(s: &Summary) -> Vec<Group<'_>> {
    let mut out: Vec<Group> = Vec::new();
    for p in &s.points {
        let mut params = p.params.clone();
        params.remove(REPLICATE);
        match out.iter_mut().find(|g| g.params == params) {
            Some(g) => g.points.push(p),
            None => out.push(Group {
                params,
                points: vec![p],
            }),
        }
    }
    out
}

/// Whether any point of the run was run more than once.
pub fn has_replicates(s: &Summary) -> bool {
    groups(s).iter().any(|g| g.points.len() > 1)
}

/// The flows with receivers, by name, in the first point's order.
pub fn flow_names(s: &Summary) -> Vec<String> {
    s.points.first().map_or_else(Vec::new, |p| {
        p.flows
            .iter()
            .filter(|f| !f.receivers.is_empty())
            .map(|f| f.name.clone())
            .collect()
    })
}

/// `replicates.csv`'s columns after the sweep parameters.
pub const CSV_COLUMNS: &str = "flow,metric,n,mean,ci95_low,ci95_high";

/// `replicates.csv`: a row per sweep point (its values first, a column per sweep parameter
/// but `replicate`), flow and metric that the run has; `flow` is empty for `jain_index`,
/// the interval's ends are empty with one replicate.
pub fn csv(s: &Summary) -> String {
    let groups = groups(s);
    let keys: Vec<String> = groups
        .first()
        .map_or_else(Vec::new, |g| g.params.keys().cloned().collect());
    let mut out = String::new();
    for k in &keys {
        let _ = write!(out, "{k},");
    }
    out.push_str(CSV_COLUMNS);
    out.push('\n');
    let flows = flow_names(s);
    for g in &groups {
        let lead: String = keys
            .iter()
            .map(|k| format!("{},", g.params.get(k).map_or("", String::as_str)))
            .collect();
        for (flow, name) in rows_of(&flows) {
            let Some(e) = g.estimate(flow, name) else {
                continue;
            };
            let (lo, hi) = e.half_width.map_or((String::new(), String::new()), |h| {
                (format!("{}", e.mean - h), format!("{}", e.mean + h))
            });
            let _ = writeln!(
                out,
                "{lead}{},{name},{},{},{lo},{hi}",
                flow.unwrap_or_default(),
                e.n,
                e.mean
            );
        }
    }
    out
}

/// Writes `DIR/replicates.csv` for `s`.
pub fn write(dir: &std::path::Path, s: &Summary) -> Result<(), String> {
    let path = dir.join("replicates.csv");
    std::fs::write(&path, csv(s)).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Every (flow, metric) pair, the point-wide metrics last with no flow.
pub fn rows_of(flows: &[String]) -> Vec<(Option<&str>, &'static str)> {
    let mut rows: Vec<(Option<&str>, &'static str)> = flows
        .iter()
        .flat_map(|f| {
            METRICS
                .iter()
                .filter(|(m, _)| !is_point_metric(m))
                .map(move |(m, _)| (Some(f.as_str()), *m))
        })
        .collect();
    rows.extend(POINT_METRICS.iter().map(|m| (None, *m)));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_a_claim_may_name_is_estimated() {
        let ours: Vec<&str> = METRICS.iter().map(|(m, _)| *m).collect();
        let mut claims = metronome_config::scenario::CLAIM_METRICS.to_vec();
        let mut sorted = ours.clone();
        claims.sort_unstable();
        sorted.sort_unstable();
        assert_eq!(sorted, claims);
    }

    #[test]
    fn a_rates_variation_is_weighted_by_how_long_it_held() {
        // 1 Mbit/s for 3 s, then 3 Mbit/s for 1 s: mean 1.5, deviation sqrt(0.75).
        let s = Micros::from_nanos;
        let cv = rate_cv(
            &[(s(0), 1_000_000), (s(3_000_000_000), 3_000_000)],
            s(4_000_000_000),
        );
        assert!((cv.unwrap() - 0.75f64.sqrt() / 1.5).abs() < 1e-12, "{cv:?}");
        // Constant: no variation; nothing to weigh: none.
        assert_eq!(rate_cv(&[(s(0), 5)], s(10)), Some(0.0));
        assert_eq!(rate_cv(&[], s(10)), None);
        assert_eq!(rate_cv(&[(s(10), 5)], s(10)), None);
    }

    #[test]
    fn the_interval_is_students_at_95_percent() {
        assert_eq!(t_975(1), 12.706);
        assert_eq!(t_975(9), 2.262);
        assert_eq!(t_975(1000), 1.960);
        // Ten replicates, sample standard deviation 1: ± 2.262 / √10.
        let v: Vec<f64> = (0..10)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let e = Estimate::of(&v);
        let sd = (10.0f64 / 9.0).sqrt();
        assert_eq!((e.mean, e.n), (0.0, 10));
        assert!((e.half_width.unwrap() - 2.262 * sd / 10f64.sqrt()).abs() < 1e-12);
        assert_eq!(Estimate::of(&[3.0]).half_width, None);
        assert_eq!(Estimate::of(&[3.0]).show(1), "3.0");
        assert_eq!(Estimate::of(&[1.0, 3.0]).show(1), "2.0 ± 12.7");
    }
}
