//! One unit for one kind of quantity in machine output: durations in microseconds. These
//! serialize a figure kept in another unit as microseconds (the field's name says `_us`).

use serde::Serializer;
use std::time::Duration;

/// A duration as microseconds (a number).
pub fn duration_us<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_nanos() as f64 / 1e3)
}

/// Seconds kept as `f64`, written as whole microseconds.
pub fn secs_as_us<S: Serializer>(secs: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_i64((secs * 1e6).round() as i64)
}

/// Milliseconds kept as `f64`, written as microseconds.
pub fn ms_as_us<S: Serializer>(ms: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(ms * 1e3)
}

/// Optional milliseconds, written as microseconds (or null).
pub fn opt_ms_as_us<S: Serializer>(ms: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match ms {
        Some(v) => s.serialize_some(&(v * 1e3)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize)]
    struct T {
        #[serde(serialize_with = "super::duration_us")]
        d: std::time::Duration,
        #[serde(serialize_with = "super::ms_as_us")]
        j: f64,
        #[serde(serialize_with = "super::opt_ms_as_us")]
        r: Option<f64>,
    }

    #[test]
    fn microseconds() {
        let t = T {
            d: std::time::Duration::from_nanos(5763),
            j: 1.5,
            r: None,
        };
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"d":5.763,"j":1500.0,"r":null}"#
        );
    }
}
