//! Parameter sweeps: the `[sweep]` table, its points, and the `"${name}"` references.

use super::parse::parse_point;
use super::Scenario;
use crate::serve::{ConfigError, ConfigErrorKind, MAX_CONFIG_BYTES};
use std::fmt;

/// The most points one scenario may sweep over.
pub(crate) const MAX_POINTS: usize = 10_000;
/// The most replicates of each point.
pub const MAX_REPLICATES: u32 = 1000;

/// A scenario file as read: its text, and its sweep.
#[derive(Clone, Debug)]
pub struct ScenarioFile {
    /// What names the text in errors: usually the file's path.
    pub origin: String,
    /// The file's whole text, its `"${name}"` references not yet replaced.
    pub text: String,
    /// Sweep parameters in file order, each with its values as TOML literals.
    pub sweep: Vec<(String, Vec<toml::Value>)>,
    /// Runs of each sweep point (`replicates = N`, default 1), replicate `r` (1-based) with
    /// the seed plus `r − 1`: independent samples of every figure, for confidence intervals.
    pub replicates: u32,
}

/// One combination of sweep values.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// 0-based, in sweep order (the last parameter varies fastest).
    pub index: usize,
    /// `(parameter, value)` in sweep order; values as written (strings without quotes). With
    /// more than one replicate, the last is `("replicate", r)`.
    pub params: Vec<(String, String)>,
    /// Which run of its sweep point this is, from 1: its seed is the scenario's plus
    /// `replicate − 1`.
    pub replicate: u32,
    values: Vec<toml::Value>,
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.params.is_empty() {
            return f.write_str("(no sweep)");
        }
        let parts: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        f.write_str(&parts.join(", "))
    }
}

impl ScenarioFile {
    /// Reads the sweep of `text` and checks every `"${name}"` reference against it. The
    /// points themselves are checked by [`resolve`](Self::resolve).
    pub fn parse(text: &str, origin: &str) -> Result<ScenarioFile, ConfigError> {
        let err = |kind, message: String| ConfigError::new(kind, origin, message);
        if text.len() as u64 > MAX_CONFIG_BYTES {
            let message = format!("the scenario is over {MAX_CONFIG_BYTES} bytes");
            return Err(err(ConfigErrorKind::TooLarge, message));
        }
        let doc: toml::Table = toml::from_str(text).map_err(|e| {
            let offset = e.span().map(|s| s.start);
            err(ConfigErrorKind::Parse, e.message().to_string()).at(text, offset)
        })?;
        let mut sweep = Vec::new();
        if let Some(s) = doc.get("sweep") {
            let offset = text.find("[sweep]");
            let Some(table) = s.as_table() else {
                let message = "sweep must be a table: [sweep] then name = [values...]".into();
                return Err(err(ConfigErrorKind::Parse, message).at(text, offset));
            };
            for (name, values) in table {
                let values = match values.as_array() {
                    Some(v) if !v.is_empty() => v.clone(),
                    _ => {
                        let message = format!(
                            "sweep parameter '{name}' needs a non-empty list of values, like \
                             {name} = [\"2mbit\", \"4mbit\"]"
                        );
                        let offset = find_key(text, name).or(offset);
                        return Err(err(ConfigErrorKind::Parse, message).at(text, offset));
                    }
                };
                if values.iter().any(|v| v.is_table() || v.is_array()) {
                    let message = format!(
                        "sweep parameter '{name}': each value must be a string or a number"
                    );
                    return Err(err(ConfigErrorKind::Parse, message).at(text, find_key(text, name)));
                }
                if name == REPLICATE {
                    let message = format!(
                        "sweep parameter '{REPLICATE}' is the lab's own name for a run's \
                         replicate: to run each point several times write replicates = N; \
                         otherwise choose another name"
                    );
                    return Err(err(ConfigErrorKind::Parse, message).at(text, find_key(text, name)));
                }
                sweep.push((name.clone(), values));
            }
        }
        let replicates = match doc.get("replicates") {
            None => 1,
            Some(v) => replicates_of(v).map_err(|message| {
                err(ConfigErrorKind::Invalid, message).at(text, find_key(text, "replicates"))
            })?,
        };
        let file = ScenarioFile {
            origin: origin.to_string(),
            text: text.to_string(),
            sweep,
            replicates,
        };
        file.check_references()?;
        file.check_size()?;
        Ok(file)
    }

    /// The file with `n` replicates of each point instead of its own (`lab run --replicates`).
    pub fn with_replicates(mut self, n: u32) -> Result<ScenarioFile, ConfigError> {
        if !(1..=MAX_REPLICATES).contains(&n) {
            let message = format!("{n} replicates: give 1 to {MAX_REPLICATES}");
            return Err(ConfigError::new(
                ConfigErrorKind::Invalid,
                &self.origin,
                message,
            ));
        }
        self.replicates = n;
        self.check_size()?;
        Ok(self)
    }

    fn check_size(&self) -> Result<(), ConfigError> {
        let n = self.point_count();
        if n > MAX_POINTS {
            let message =
                format!("the sweep has {n} points; at most {MAX_POINTS} run from one file");
            return Err(ConfigError::new(
                ConfigErrorKind::TooLarge,
                &self.origin,
                message,
            ));
        }
        Ok(())
    }

    /// Every `${...}` names a sweep parameter and is a whole string; every parameter is used.
    fn check_references(&self) -> Result<(), ConfigError> {
        let err = |message: String, offset: usize| {
            ConfigError::new(ConfigErrorKind::Invalid, &self.origin, message)
                .at(&self.text, Some(offset))
        };
        let mut used = vec![false; self.sweep.len()];
        let mut from = 0;
        while let Some(i) = self.text[from..].find("${") {
            let at = from + i;
            let Some(len) = self.text[at..].find('}') else {
                return Err(err("'${' without a closing '}'".into(), at));
            };
            let name = &self.text[at + 2..at + len];
            let whole =
                self.text[..at].ends_with('"') && self.text[at + len + 1..].starts_with('"');
            if !whole {
                let message = format!(
                    "a sweep reference must be a whole string: write \"${{{name}}}\", in quotes, \
                     with nothing else"
                );
                return Err(err(message, at));
            }
            match self.sweep.iter().position(|(k, _)| k == name) {
                Some(k) => used[k] = true,
                None => {
                    let known: Vec<&str> = self.sweep.iter().map(|(k, _)| k.as_str()).collect();
                    let message = if known.is_empty() {
                        format!("\"${{{name}}}\" refers to a sweep parameter, but there is no [sweep] table; add [sweep] {name} = [...]")
                    } else {
                        format!(
                            "\"${{{name}}}\" is not a sweep parameter; the [sweep] table has: {}",
                            known.join(", ")
                        )
                    };
                    return Err(err(message, at));
                }
            }
            from = at + len + 1;
        }
        if let Some(k) = used.iter().position(|u| !u) {
            let name = &self.sweep[k].0;
            let message = format!(
                "sweep parameter '{name}' is never used; refer to it as \"${{{name}}}\" or remove it"
            );
            let offset = find_key(&self.text, name).unwrap_or(0);
            return Err(err(message, offset));
        }
        Ok(())
    }

    /// Points to run: every combination of the sweep, each `replicates` times.
    pub fn point_count(&self) -> usize {
        self.sweep
            .iter()
            .map(|(_, v)| v.len())
            .fold(self.replicates.max(1) as usize, |a, b| a.saturating_mul(b))
    }

    /// Every point, the last parameter varying fastest, and each point's replicates after
    /// one another.
    pub fn points(&self) -> Vec<Point> {
        let n = self.point_count();
        let replicates = self.replicates.max(1) as usize;
        (0..n)
            .map(|index| {
                let replicate = (index % replicates) as u32 + 1;
                let mut rest = index / replicates;
                let mut picked = vec![toml::Value::Integer(0); self.sweep.len()];
                for (k, (_, values)) in self.sweep.iter().enumerate().rev() {
                    picked[k] = values[rest % values.len()].clone();
                    rest /= values.len();
                }
                let mut params: Vec<(String, String)> = self
                    .sweep
                    .iter()
                    .zip(&picked)
                    .map(|((name, _), v)| (name.clone(), plain(v)))
                    .collect();
                if replicates > 1 {
                    params.push((REPLICATE.into(), replicate.to_string()));
                }
                Point {
                    index,
                    params,
                    replicate,
                    values: picked,
                }
            })
            .collect()
    }

    /// The scenario at `point`: references replaced by its values, then parsed and checked.
    pub fn resolve(&self, point: &Point) -> Result<Scenario, ConfigError> {
        let mut text = self.text.clone();
        for ((name, _), value) in self.sweep.iter().zip(&point.values) {
            text = text.replace(&format!("\"${{{name}}}\""), &value.to_string());
        }
        parse_point(&text, &self.origin).map_err(|mut e| {
            if !point.params.is_empty() {
                e.message = format!("{} (sweep point {point})", e.message);
            }
            e
        })
    }

    /// Resolves every point: the whole file is checked before anything runs.
    pub fn resolve_all(&self) -> Result<Vec<(Point, Scenario)>, ConfigError> {
        self.points()
            .into_iter()
            .map(|p| self.resolve(&p).map(|s| (p, s)))
            .collect()
    }
}

/// The parameter that names a point's replicate (when there is more than one).
pub const REPLICATE: &str = "replicate";

/// `replicates = N`, checked.
fn replicates_of(v: &toml::Value) -> Result<u32, String> {
    v.as_integer()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (1..=MAX_REPLICATES).contains(n))
        .ok_or_else(|| {
            format!(
                "replicates = {v}: give a whole number of runs of each point, 1 to \
                 {MAX_REPLICATES}, like replicates = 10"
            )
        })
}

/// A TOML value as a person wrote it: strings without quotes.
fn plain(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The offset of `key = ` at the start of a line, if any.
fn find_key(text: &str, key: &str) -> Option<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with(key) && t[key.len()..].trim_start().starts_with('=') {
            return Some(offset + line.len() - t.len());
        }
        offset += line.len();
    }
    None
}
