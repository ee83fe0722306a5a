//! One scenario point's text → [`Scenario`]: the file's keys, their forms, and the checks
//! that need the whole file (names of nodes and link profiles).

use super::checks::{FileClaim, FileReference};
use super::flow::FileFlow;
use super::topology::{expand, RawLink, RawTopology};
use super::values::{Dur, Prob, Rate};
use super::{
    DeliveryDecl, FlowDecl, JitterDistribution, LinkProfile, LossDecl, Scenario, Variation,
};
use crate::serve::{ConfigError, ConfigErrorKind};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::time::Duration;
use toml::Spanned;

/// The most flows, links or nodes one scenario may declare.
pub(crate) const MAX_ITEMS: usize = 100_000;

pub(crate) fn parse_point(text: &str, origin: &str) -> Result<Scenario, ConfigError> {
    let raw: RawScenario = toml::from_str(text).map_err(|e| {
        let offset = e.span().map(|s| s.start);
        ConfigError::new(ConfigErrorKind::Parse, origin, explain(e.message())).at(text, offset)
    })?;
    let invalid = |message: String, offset: usize| {
        ConfigError::new(ConfigErrorKind::Invalid, origin, message).at(text, Some(offset))
    };
    for (name, p) in &raw.links {
        let at = p.span().start;
        let r = p.get_ref();
        r.check()
            .map_err(|m| invalid(format!("[links.{name}]: {m}"), at))?;
        r.variation()
            .map_err(|m| invalid(format!("[links.{name}]: {m}"), at))?;
    }
    let profiles: BTreeMap<String, LinkProfile> = raw
        .links
        .iter()
        .map(|(k, v)| (k.clone(), v.get_ref().to_profile()))
        .collect();
    let (nodes, links) = expand(raw.topology.as_ref(), &raw.link, &profiles)
        .map_err(|(message, offset)| invalid(message, offset))?;
    if nodes.len() > MAX_ITEMS || links.len() > MAX_ITEMS || raw.flow.len() > MAX_ITEMS {
        let message = format!("more than {MAX_ITEMS} nodes, links or flows; split the scenario");
        return Err(ConfigError::new(ConfigErrorKind::TooLarge, origin, message));
    }
    let duration = raw.duration.map_or(Duration::from_secs(10), |d| d.0);
    let drain = raw.drain.map_or(Duration::from_secs(1), |d| d.0);
    let interval = raw.interval.map_or(Duration::from_secs(1), |d| d.0);
    check_interval(interval, duration + drain)
        .map_err(|m| invalid(m, text.find("interval").unwrap_or(0)))?;
    let mut flows = Vec::with_capacity(raw.flow.len());
    for (i, f) in raw.flow.iter().enumerate() {
        let offset = f.span().start;
        let flow = f
            .get_ref()
            .resolve(i, &nodes, duration)
            .map_err(|m| invalid(m, offset))?;
        if flows.iter().any(|g: &FlowDecl| g.name == flow.name) {
            let message = format!(
                "a second flow is named '{}'; flow names must be unique",
                flow.name
            );
            return Err(invalid(message, offset));
        }
        flows.push(flow);
    }
    if flows.is_empty() {
        let message = "the scenario has no [[flow]]; add one, e.g. kind = \"udp\", from, to, rate";
        return Err(ConfigError::new(
            ConfigErrorKind::Invalid,
            origin,
            message.into(),
        ));
    }
    let reference = match raw.reference {
        Some(r) => Some(
            r.check()
                .map_err(|m| invalid(m, text.find("[reference]").unwrap_or(0)))?,
        ),
        None => None,
    };
    let mut claims = Vec::with_capacity(raw.claim.len());
    for c in raw.claim {
        let at = text.find("[[claim]]").unwrap_or(0);
        let claim = c.check(&flows).map_err(|m| invalid(m, at))?;
        claims.push(claim);
    }
    Ok(Scenario {
        claims,
        name: raw.name,
        description: raw.description,
        seed: raw.seed,
        duration,
        drain,
        interval,
        trace: raw
            .trace
            .as_ref()
            .map(super::Trace::parse)
            .transpose()
            .map_err(|m| invalid(m, text.find("trace =").unwrap_or(0)))?
            .unwrap_or_default(),
        histograms: raw.histograms.unwrap_or(true),
        nodes,
        links,
        flows,
        reference,
    })
}

/// The most intervals a run is cut into: each is a row per receiver in memory and in
/// `intervals.csv`.
pub(crate) const MAX_INTERVALS: u128 = 100_000;

/// Whether `interval` cuts a run of `span` (its duration and drain) into at most
/// [`MAX_INTERVALS`] (`interval = "1ns"` once asked for 7.3 GB).
fn check_interval(interval: Duration, span: Duration) -> Result<(), String> {
    let n = span.as_nanos() / interval.as_nanos().max(1);
    if interval.is_zero() || n > MAX_INTERVALS {
        let least = span.as_nanos().div_ceil(MAX_INTERVALS);
        let least_ms = (least as f64 / 1e6).ceil().max(1.0);
        return Err(format!(
            "interval = {interval:?} cuts the {span:?} run (duration and drain) into {n} \
             intervals, each a row per receiver; at most {MAX_INTERVALS}: use an interval of at \
             least {least_ms} ms"
        ));
    }
    Ok(())
}

/// toml's messages, in the file's terms.
fn explain(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some((key, expected)) = rest.split_once("`, expected ") {
            let known = expected
                .trim_start_matches("one of ")
                .replace('`', "")
                .replace(" or ", ", ");
            return format!("unknown key '{key}'; known keys here: {known}");
        }
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let key = rest.trim_end_matches('`');
        return format!("the key '{key}' is required here; add {key} = ...");
    }
    message.to_string()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    seed: u64,
    duration: Option<Dur>,
    drain: Option<Dur>,
    interval: Option<Dur>,
    trace: Option<toml::Value>,
    histograms: Option<bool>,
    /// Read by [`super::ScenarioFile`]; its references are already replaced.
    #[serde(default, rename = "sweep")]
    _sweep: Option<toml::Table>,
    /// Read by [`super::ScenarioFile`].
    #[serde(default, rename = "replicates")]
    _replicates: Option<toml::Value>,
    #[serde(default)]
    links: BTreeMap<String, Spanned<RawProfile>>,
    topology: Option<Spanned<RawTopology>>,
    #[serde(default)]
    link: Vec<Spanned<RawLink>>,
    #[serde(default)]
    flow: Vec<Spanned<FileFlow>>,
    reference: Option<FileReference>,
    #[serde(default)]
    claim: Vec<FileClaim>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    rate: Option<Rate>,
    burst: Option<usize>,
    latency: Option<Dur>,
    delay: Option<Dur>,
    jitter: Option<Dur>,
    jitter_distribution: Option<RawJitter>,
    loss: Option<RawLoss>,
    duplicate: Option<Prob>,
    reorder: Option<Prob>,
    reorder_delay: Option<Dur>,
    queue_packets: Option<usize>,
    queue_bytes: Option<usize>,
    netem_limit: Option<usize>,
    hold_extra: Option<Dur>,
    schedule: Option<Vec<toml::Table>>,
    square: Option<toml::Table>,
    delivery_ms: Option<Vec<u64>>,
    delivery_file: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
enum RawJitter {
    Uniform,
    Normal,
    NormalReorder,
    Pareto,
    ParetoReorder,
    #[serde(rename = "paretonormal")]
    ParetoNormal,
    #[serde(rename = "paretonormal-reorder")]
    ParetoNormalReorder,
}

#[derive(Clone, Copy)]
enum RawLoss {
    Random(Prob),
    Gilbert(RawGilbert),
}

/// `loss = 0.01`, `loss = "1%"`, or `loss = { p, r, loss_good, loss_bad }`.
impl<'de> Deserialize<'de> for RawLoss {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let v = toml::Value::deserialize(d)?;
        if v.is_table() {
            RawGilbert::deserialize(v)
                .map(RawLoss::Gilbert)
                .map_err(|e| {
                    D::Error::custom(format!("loss as a Gilbert-Elliott table: {}", e.message()))
                })
        } else {
            Prob::deserialize(v).map(RawLoss::Random).map_err(|e| {
                D::Error::custom(format!(
                    "{}; or a table {{ p, r, loss_good, loss_bad }} for bursts",
                    e.message()
                ))
            })
        }
    }
}

#[derive(Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct RawGilbert {
    p: Prob,
    r: Prob,
    #[serde(default)]
    loss_good: Option<Prob>,
    #[serde(default)]
    loss_bad: Option<Prob>,
}

/// A step's keys over the base profile's.
fn overlay(base: &RawProfile, step: &RawProfile) -> RawProfile {
    RawProfile {
        rate: step.rate.or(base.rate),
        burst: step.burst.or(base.burst),
        latency: step.latency.or(base.latency),
        delay: step.delay.or(base.delay),
        jitter: step.jitter.or(base.jitter),
        jitter_distribution: step.jitter_distribution.or(base.jitter_distribution),
        loss: step.loss.or(base.loss),
        duplicate: step.duplicate.or(base.duplicate),
        reorder: step.reorder.or(base.reorder),
        reorder_delay: step.reorder_delay.or(base.reorder_delay),
        queue_packets: step.queue_packets.or(base.queue_packets),
        queue_bytes: step.queue_bytes.or(base.queue_bytes),
        netem_limit: step.netem_limit.or(base.netem_limit),
        hold_extra: step.hold_extra.or(base.hold_extra),
        schedule: None,
        square: None,
        delivery_ms: None,
        delivery_file: None,
    }
}

/// A step's table: its own key (`at`, `period`, …) taken out, the rest a profile.
fn step_profile(table: &toml::Table, own: &[&str], what: &str) -> Result<RawProfile, String> {
    let mut rest = table.clone();
    for k in own {
        rest.remove(*k);
    }
    let p = RawProfile::deserialize(toml::Value::Table(rest))
        .map_err(|e| format!("{what}: {}", explain(e.message())))?;
    if p.schedule.is_some()
        || p.square.is_some()
        || p.delivery_ms.is_some()
        || p.delivery_file.is_some()
    {
        return Err(format!(
            "{what}: a step cannot itself change over time or have a trace"
        ));
    }
    Ok(p)
}

fn duration_key(table: &toml::Table, key: &str, what: &str) -> Result<Duration, String> {
    let v = table
        .get(key)
        .ok_or_else(|| format!("{what} needs {key} = \"...\" (a duration like \"5s\")"))?;
    Dur::deserialize(v.clone())
        .map(|d| d.0)
        .map_err(|e| format!("{what}: {key}: {}", e.message()))
}

impl RawProfile {
    /// How the profile changes over time.
    fn variation(&self) -> Result<Option<Variation>, String> {
        match (&self.schedule, &self.square) {
            (Some(_), Some(_)) => Err("a profile has a schedule or a square wave, not both".into()),
            (Some(steps), None) => {
                let mut out = Vec::with_capacity(steps.len());
                for (i, t) in steps.iter().enumerate() {
                    let what = format!("schedule step {}", i + 1);
                    let at = duration_key(t, "at", &what)?;
                    if out.last().is_some_and(|(prev, _)| at <= *prev) || at.is_zero() {
                        return Err(format!("{what}: at = {at:?} must come after the step before it (and after 0 s, which is the base profile)"));
                    }
                    let p = step_profile(t, &["at"], &what)?;
                    let merged = overlay(self, &p);
                    merged.check().map_err(|m| format!("{what}: {m}"))?;
                    out.push((at, merged.to_profile()));
                }
                Ok(Some(Variation::Steps(out)))
            }
            (None, Some(t)) => {
                let what = "square";
                let period = duration_key(t, "period", what)?;
                let duty = match t.get("duty") {
                    None => 0.5,
                    Some(v) => v
                        .as_float()
                        .or_else(|| v.as_integer().map(|i| i as f64))
                        .filter(|d| (0.0..=1.0).contains(d))
                        .ok_or(
                            "square: duty is the share of the period at the base profile, 0 to 1",
                        )?,
                };
                let low = t.get("low").and_then(toml::Value::as_table).ok_or(
                    "square needs low = { rate = \"2mbit\", ... }: the profile's other half",
                )?;
                let p = step_profile(low, &[], "square.low")?;
                let merged = overlay(self, &p);
                merged.check().map_err(|m| format!("square.low: {m}"))?;
                Ok(Some(Variation::Square {
                    period,
                    duty,
                    low: Box::new(merged.to_profile()),
                }))
            }
            (None, None) => Ok(None),
        }
    }

    /// Settings that only make sense together.
    fn check(&self) -> Result<(), String> {
        if (self.delivery_ms.is_some() || self.delivery_file.is_some()) && self.rate.is_some() {
            return Err("a delivery trace is the link's capacity: drop rate, or the trace".into());
        }
        if self.delivery_ms.is_some() && self.delivery_file.is_some() {
            return Err("delivery_ms or delivery_file, not both".into());
        }
        if self.burst.is_some() && self.rate.is_none() {
            return Err("burst is a token bucket's size: it needs a rate".into());
        }
        if self.latency.is_some() && (self.rate.is_none() || self.burst.is_none()) {
            return Err("latency is tc-tbf's: it needs rate and burst (the queue then holds rate · latency + burst bytes)".into());
        }
        if self.latency.is_some() && self.queue_bytes.is_some() {
            return Err("latency and queue_bytes both set the queue's size; keep one".into());
        }
        Ok(())
    }

    fn to_profile(&self) -> LinkProfile {
        let d = |v: Option<Dur>| v.map_or(Duration::ZERO, |d| d.0);
        LinkProfile {
            rate_bps: self.rate.map(|r| r.0),
            burst_bytes: self.burst,
            tbf_latency: self.latency.map(|l| l.0),
            delay: d(self.delay),
            jitter: d(self.jitter),
            jitter_distribution: match self.jitter_distribution {
                None | Some(RawJitter::Uniform) => JitterDistribution::Uniform,
                Some(RawJitter::Normal) => JitterDistribution::Normal,
                Some(RawJitter::NormalReorder) => JitterDistribution::NormalReorder,
                Some(RawJitter::Pareto) => JitterDistribution::Pareto,
                Some(RawJitter::ParetoReorder) => JitterDistribution::ParetoReorder,
                Some(RawJitter::ParetoNormal) => JitterDistribution::ParetoNormal,
                Some(RawJitter::ParetoNormalReorder) => JitterDistribution::ParetoNormalReorder,
            },
            loss: match self.loss {
                None => LossDecl::None,
                Some(RawLoss::Random(p)) => LossDecl::Random(p.0),
                Some(RawLoss::Gilbert(g)) => LossDecl::GilbertElliott {
                    p: g.p.0,
                    r: g.r.0,
                    loss_good: g.loss_good.map_or(0.0, |p| p.0),
                    loss_bad: g.loss_bad.map_or(1.0, |p| p.0),
                },
            },
            duplicate: self.duplicate.map_or(0.0, |p| p.0),
            reorder: self.reorder.map_or(0.0, |p| p.0),
            reorder_delay: d(self.reorder_delay),
            queue_packets: self.queue_packets,
            queue_bytes: match (self.latency, self.rate, self.burst) {
                // tc-tbf(8): limit = rate · latency + burst.
                (Some(l), Some(r), Some(b)) => {
                    Some((r.0 as u128 * l.0.as_nanos() / 8_000_000_000) as usize + b)
                }
                _ => self.queue_bytes,
            },
            netem_limit: self.netem_limit,
            hold_extra: d(self.hold_extra),
            // Checked by `check` and `variation` before the profile is made.
            variation: self.variation().ok().flatten(),
            delivery: match (&self.delivery_ms, &self.delivery_file) {
                (Some(ms), _) => Some(DeliveryDecl::Millis(ms.clone())),
                (None, Some(f)) => Some(DeliveryDecl::File(f.clone())),
                (None, None) => None,
            },
        }
    }
}
