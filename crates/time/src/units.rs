//! One spelling for one kind of quantity in machine output: ids as hex, durations kept in
//! nanoseconds written as microseconds (the field's name says `_us`; the type for new fields is
//! [`crate::Micros`]), instants as dates.

use serde::Serializer;

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
    }

    #[test]
    fn nanoseconds_go_out_as_microseconds_and_come_back_exactly() {
        let n = N {
            a: 1_234_567,
            b: -5,
            c: vec![Some(999_999_999_999), None],
            d: vec![(40_000_000_001, 2_000_000)],
        };
        let text = serde_json::to_string(&n).unwrap();
        assert_eq!(
            text,
            r#"{"a_us":1234.567,"b":-0.005,"c":[999999999.999,null],"d":[[40000000.001,2000000]]}"#
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
