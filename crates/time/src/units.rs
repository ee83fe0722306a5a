//! One unit for one kind of quantity in machine output: durations in microseconds. These
//! serialize a figure kept in another unit as microseconds (the field's name says `_us`).

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

/// A duration as microseconds (a number).
pub fn duration_us<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_nanos() as f64 / 1e3)
}

/// Seconds kept as `f64`, written as whole microseconds.
pub fn secs_as_us<S: Serializer>(secs: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_i64((secs * 1e6).round() as i64)
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

/// Seconds written as whole microseconds, read back (with [`secs_as_us`]):
/// `#[serde(serialize_with = "secs_as_us", deserialize_with = "us_as_secs")]`.
pub fn us_as_secs<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(f64::deserialize(d)? / 1e6)
}

/// Nanoseconds kept as integers (exact in virtual time), written as microseconds (a number
/// with three decimals at most) and read back exactly: `#[serde(with = "ns_as_us")]` on a
/// `u64`, an `i64`, and a `Vec` or an `Option` of them.
pub mod ns_as_us {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// A quantity in nanoseconds that has a microsecond form.
    pub trait Nanos: Sized {
        /// The value in µs.
        type Us: Serialize + for<'de> Deserialize<'de>;
        /// The value converted from nanoseconds to microseconds (as `f64`, so up to three
        /// decimals carry the sub-microsecond part).
        fn to_us(&self) -> Self::Us;
        /// Back from microseconds to nanoseconds, rounded to the nearest nanosecond; exact
        /// for anything [`Nanos::to_us`] wrote.
        fn from_us(us: Self::Us) -> Self;
    }

    impl Nanos for u64 {
        type Us = f64;
        fn to_us(&self) -> f64 {
            *self as f64 / 1e3
        }
        fn from_us(us: f64) -> u64 {
            // Negative or not a number: 0 (a file edited by hand, not one this wrote).
            (us * 1e3).round().max(0.0) as u64
        }
    }

    impl Nanos for i64 {
        type Us = f64;
        fn to_us(&self) -> f64 {
            *self as f64 / 1e3
        }
        fn from_us(us: f64) -> i64 {
            (us * 1e3).round() as i64
        }
    }

    impl<T: Nanos> Nanos for Option<T> {
        type Us = Option<T::Us>;
        fn to_us(&self) -> Self::Us {
            self.as_ref().map(T::to_us)
        }
        fn from_us(us: Self::Us) -> Self {
            us.map(T::from_us)
        }
    }

    impl<T: Nanos> Nanos for Vec<T> {
        type Us = Vec<T::Us>;
        fn to_us(&self) -> Self::Us {
            self.iter().map(T::to_us).collect()
        }
        fn from_us(us: Self::Us) -> Self {
            us.into_iter().map(T::from_us).collect()
        }
    }

    /// Two durations side by side (run A's and run B's), both in µs. A pair that is a tuple
    /// is `(time, value)`, below.
    impl<T: Nanos> Nanos for [T; 2] {
        type Us = [T::Us; 2];
        fn to_us(&self) -> Self::Us {
            [self[0].to_us(), self[1].to_us()]
        }
        fn from_us([a, b]: Self::Us) -> Self {
            [T::from_us(a), T::from_us(b)]
        }
    }

    /// `(time, value)`: the time in nanoseconds, the value as it is.
    impl<V: Copy + Serialize + for<'de> Deserialize<'de>> Nanos for (u64, V) {
        type Us = (f64, V);
        fn to_us(&self) -> (f64, V) {
            (self.0.to_us(), self.1)
        }
        fn from_us(us: (f64, V)) -> Self {
            (u64::from_us(us.0), us.1)
        }
    }

    /// Serde `serialize_with` half: writes the nanosecond value `v` as microseconds.
    pub fn serialize<T: Nanos, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        v.to_us().serialize(s)
    }

    /// Serde `deserialize_with` half: reads microseconds and gives back nanoseconds.
    pub fn deserialize<'de, T: Nanos, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        Ok(T::from_us(T::Us::deserialize(d)?))
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

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct N {
        #[serde(rename = "a_us", with = "super::ns_as_us")]
        a: u64,
        #[serde(with = "super::ns_as_us")]
        b: i64,
        #[serde(with = "super::ns_as_us")]
        c: Vec<Option<u64>>,
        #[serde(with = "super::ns_as_us")]
        d: Vec<(u64, u64)>,
        #[serde(
            serialize_with = "super::secs_as_us",
            deserialize_with = "super::us_as_secs"
        )]
        e: f64,
    }

    #[test]
    fn nanoseconds_go_out_as_microseconds_and_come_back_exactly() {
        let n = N {
            a: 1_234_567,
            b: -5,
            c: vec![Some(999_999_999_999), None],
            d: vec![(40_000_000_001, 2_000_000)],
            e: 1.25,
        };
        let text = serde_json::to_string(&n).unwrap();
        assert_eq!(
            text,
            r#"{"a_us":1234.567,"b":-0.005,"c":[999999999.999,null],"d":[[40000000.001,2000000]],"e":1250000}"#
        );
        assert_eq!(serde_json::from_str::<N>(&text).unwrap(), n);
    }

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
