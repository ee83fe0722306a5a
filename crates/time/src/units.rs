//! One spelling for one kind of quantity in machine output: ids as hex and instants as dates
//! (durations are [`crate::Micros`]).

use serde::Serializer;
use std::borrow::Cow;

/// The JSON Schema of an id that [`hex32`] writes: a string of 8 lowercase hex digits, so that
/// validation catches an id spelled another way. A field takes it with
/// `#[schemars(with = "metronome_time::units::Hex32")]` (or `Option<Hex32>`).
pub struct Hex32;

impl schemars::JsonSchema for Hex32 {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Hex32".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "pattern": "^[0-9a-f]{8}$" })
    }
}

/// A 32-bit id (an RTP SSRC, or its bits) written as 8 lowercase hex digits, as every document
/// spells one.
pub fn hex32<T: Copy + Into<u32>, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    let v: u32 = (*v).into();
    s.serialize_str(&format!("{v:08x}"))
}

/// An optional 32-bit id written as 8 lowercase hex digits, or null.
pub fn opt_hex32<T: Copy + Into<u32>, S: Serializer>(
    v: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => {
            let v: u32 = (*v).into();
            s.serialize_some(&format!("{v:08x}"))
        }
        None => s.serialize_none(),
    }
}

/// A point in time (ns since the Unix epoch) as a person reads it: `2026-11-26 08:30:12 UTC`.
pub fn utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // The civil date of a day count (Howard Hinnant's `civil_from_days`, for days ≥ 0).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00 UTC");
        // 2000-02-29 (a leap day of a century year) and 2026-11-26 08:30:12.
        assert_eq!(
            super::utc(951_782_400_000_000_000),
            "2000-02-29 00:00:00 UTC"
        );
        assert_eq!(
            super::utc(1_795_681_812_999_999_999),
            "2026-11-26 08:30:12 UTC"
        );
    }
}
