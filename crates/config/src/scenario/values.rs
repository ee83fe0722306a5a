//! Values a scenario writes as people write them: durations ("20ms"), rates ("10mbit"),
//! probabilities (0.01 or "1%"), each with the one-line error a wrong spelling gets.

use crate::stream::{parse_bitrate, parse_duration};
use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// A duration written as people write it: "20ms", "1.5s".
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumOrText::deserialize(d)? {
            NumOrText::Text(s) => parse_duration(&s)
                .map(Dur)
                .map_err(serde::de::Error::custom),
            NumOrText::Int(0) => Ok(Dur(Duration::ZERO)),
            _ => Err(serde::de::Error::custom(
                "a duration needs a unit, in quotes: write it like \"20ms\" or \"1.5s\"",
            )),
        }
    }
}

/// A rate: "10mbit", "500kbit", or a number of bit/s.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rate(pub u64);

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumOrText::deserialize(d)? {
            NumOrText::Text(s) if s.trim() == "0" => Ok(Rate(0)),
            NumOrText::Text(s) => parse_bitrate(&s)
                .map(Rate)
                .map_err(serde::de::Error::custom),
            NumOrText::Int(n) if n >= 0 => Ok(Rate(n as u64)),
            _ => Err(serde::de::Error::custom(
                "a rate is written like \"10mbit\", \"500kbit\" or a number of bit/s",
            )),
        }
    }
}

/// A probability: 0.01 or "1%".
#[derive(Clone, Copy, Debug)]
pub(crate) struct Prob(pub f64);

impl<'de> Deserialize<'de> for Prob {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let bad = || {
            serde::de::Error::custom(
                "a probability is written like 0.01 or \"1%\" (0 to 1, or 0% to 100%)",
            )
        };
        let v = match NumOrText::deserialize(d)? {
            NumOrText::Int(n) => n as f64,
            NumOrText::Float(x) => x,
            NumOrText::Text(s) => match s.trim().strip_suffix('%') {
                Some(p) => p.trim().parse::<f64>().map_err(|_| bad())? / 100.0,
                None => s.trim().parse::<f64>().map_err(|_| bad())?,
            },
        };
        if (0.0..=1.0).contains(&v) {
            Ok(Prob(v))
        } else {
            Err(bad())
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrText {
    Int(i64),
    Float(f64),
    Text(String),
}
