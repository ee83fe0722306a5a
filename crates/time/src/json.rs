//! Figures as Metronome's JSON writes them: every float with at most [`FLOAT_DECIMALS`]
//! decimals, so a document shows no binary noise (`0.30000000000000004`). The command line's
//! `--json` documents and the control API's answers both go through [`rounded`].

use serde::Serialize;
use serde_json::Value;

/// Decimal places a float keeps in JSON: a millionth of its unit (of a µs, a bit/s, a
/// percent, a dB), past what any figure measures, and the binary noise of sums and ratios
/// is gone.
pub const FLOAT_DECIMALS: i32 = 6;

/// `value` as JSON, each float rounded to [`FLOAT_DECIMALS`] places (a float of a billion
/// or more is left as it is: f64 holds few more digits).
pub fn rounded<T: Serialize>(value: &T) -> Result<Value, serde_json::Error> {
    let mut v = serde_json::to_value(value)?;
    round_floats(&mut v);
    Ok(v)
}

/// Rounds every float in `v`, as [`rounded`] does.
pub fn round_floats(v: &mut Value) {
    match v {
        Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap_or(0.0);
            let scale = 10f64.powi(FLOAT_DECIMALS);
            if x.abs() < 1e9 {
                // `+ 0.0` makes a negative zero (a tiny negative rounded) plain 0.
                let r = (x * scale).round() / scale + 0.0;
                if let Some(r) = serde_json::Number::from_f64(r) {
                    *n = r;
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(round_floats),
        Value::Object(o) => o.values_mut().for_each(round_floats),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_keep_six_decimals_and_lose_their_noise() {
        let v = rounded(&(0.1 + 0.2, -1e-9, 2.0e9 + 0.123, 7u64, 1.2345678)).unwrap();
        assert_eq!(v.to_string(), "[0.3,0.0,2000000000.123,7,1.234568]");
    }
}
