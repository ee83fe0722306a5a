//! [`Micros`]: the one type of every duration in machine output, written in microseconds.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A duration (or a signed offset in time) as every document writes one: a number of
/// microseconds, whole where it is whole and with at most three decimals otherwise (the field's
/// name ends in `_us`).
///
/// Kept as whole nanoseconds, so figures of virtual time stay exact: a value goes out as
/// microseconds and comes back as the same nanoseconds (exactly below 2^53 ns, about 104
/// days, where a JSON number's 53 bits run out). Figures a measurement keeps as
/// floating-point seconds or milliseconds are rounded to the nanosecond when they become one.
///
/// `{:?}` shows microseconds too (`12.5µs`), as the field names say; there is no `{}`, so
/// that text says which unit it prints (`as_millis_f64`, `as_nanos`).
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Micros(i64);

impl Micros {
    /// No time at all.
    pub const ZERO: Micros = Micros(0);

    /// `ns` nanoseconds (negative: an offset back in time).
    pub const fn from_nanos(ns: i64) -> Micros {
        Micros(ns)
    }

    /// `us` whole microseconds.
    pub const fn from_micros(us: i64) -> Micros {
        Micros(us.saturating_mul(1_000))
    }

    /// `ns` nanoseconds counted unsigned (saturating at about 292 years).
    pub const fn from_nanos_u64(ns: u64) -> Micros {
        if ns > i64::MAX as u64 {
            Micros(i64::MAX)
        } else {
            Micros(ns as i64)
        }
    }

    /// Seconds kept as a float (a measured wall-clock or CPU time, a rate's period), rounded to
    /// the nanosecond. Not a number counts as zero; beyond ±292 years saturates.
    pub fn from_secs_f64(secs: f64) -> Micros {
        Micros::from_nanos_f64(secs * 1e9)
    }

    /// Milliseconds kept as a float (RFC 3550's jitter, an RTT), rounded to the nanosecond.
    pub fn from_millis_f64(ms: f64) -> Micros {
        Micros::from_nanos_f64(ms * 1e6)
    }

    /// Microseconds kept as a float, rounded to the nanosecond.
    pub fn from_micros_f64(us: f64) -> Micros {
        Micros::from_nanos_f64(us * 1e3)
    }

    fn from_nanos_f64(ns: f64) -> Micros {
        // `as` saturates at the ends and takes NaN to 0.
        Micros(ns.round() as i64)
    }

    /// The exact value in nanoseconds.
    pub const fn as_nanos(self) -> i64 {
        self.0
    }

    /// Nanoseconds as an unsigned count; an offset back in time counts as 0.
    pub const fn as_nanos_u64(self) -> u64 {
        if self.0 < 0 {
            0
        } else {
            self.0 as u64
        }
    }

    /// Seconds as a float, for statistics and display.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Milliseconds as a float, for statistics and display.
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// Whole microseconds, rounded toward zero.
    pub const fn as_micros(self) -> i64 {
        self.0 / 1_000
    }

    /// Microseconds as a float: the number machine output writes.
    pub fn as_micros_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }

    /// As a [`Duration`]; an offset back in time counts as zero.
    pub const fn to_duration(self) -> Duration {
        Duration::from_nanos(self.as_nanos_u64())
    }
}

impl fmt::Debug for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 % 1000 == 0 {
            write!(f, "{}µs", self.0 / 1000)
        } else {
            write!(f, "{}µs", self.as_micros_f64())
        }
    }
}

impl From<Duration> for Micros {
    /// Saturates beyond about 292 years.
    fn from(d: Duration) -> Micros {
        Micros(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
}

impl Add for Micros {
    type Output = Micros;
    /// Saturating at the ends of the range.
    fn add(self, rhs: Micros) -> Micros {
        Micros(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Micros {
    fn add_assign(&mut self, rhs: Micros) {
        *self = *self + rhs;
    }
}

impl Sub for Micros {
    type Output = Micros;
    /// Saturating at the ends of the range.
    fn sub(self, rhs: Micros) -> Micros {
        Micros(self.0.saturating_sub(rhs.0))
    }
}

impl std::iter::Sum for Micros {
    fn sum<I: Iterator<Item = Micros>>(iter: I) -> Micros {
        iter.fold(Micros::ZERO, Add::add)
    }
}

impl Serialize for Micros {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0 % 1000 == 0 {
            s.serialize_i64(self.0 / 1000)
        } else {
            s.serialize_f64(self.as_micros_f64())
        }
    }
}

impl<'de> Deserialize<'de> for Micros {
    /// Any JSON number of microseconds; back to the nanosecond this type wrote.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Micros, D::Error> {
        let us = f64::deserialize(d)?;
        if !us.is_finite() {
            return Err(serde::de::Error::custom(
                "a duration in µs must be a finite number",
            ));
        }
        Ok(Micros::from_micros_f64(us))
    }
}

impl schemars::JsonSchema for Micros {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Micros".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        f64::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::Micros;
    use std::time::Duration;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Doc {
        a_us: Micros,
        b_us: Micros,
        c_us: Vec<Option<Micros>>,
        d_us: [Micros; 2],
    }

    #[test]
    fn whole_microseconds_are_integers_and_the_rest_has_three_decimals() {
        let doc = Doc {
            a_us: Micros::from_nanos(1_234_567),
            b_us: Micros::from_nanos(-5),
            c_us: vec![Some(Micros::from_nanos_u64(999_999_999_000)), None],
            d_us: [Micros::from_secs_f64(1.25), Micros::from_millis_f64(0.0015)],
        };
        let text = serde_json::to_string(&doc).unwrap();
        assert_eq!(
            text,
            r#"{"a_us":1234.567,"b_us":-0.005,"c_us":[999999999,null],"d_us":[1250000,1.5]}"#
        );
        assert_eq!(serde_json::from_str::<Doc>(&text).unwrap(), doc);
    }

    #[test]
    fn conversions_round_to_the_nanosecond_and_saturate() {
        assert_eq!(Micros::from_secs_f64(1e-9 * 0.4), Micros::ZERO);
        assert_eq!(Micros::from_secs_f64(f64::NAN), Micros::ZERO);
        assert_eq!(Micros::from_secs_f64(1e300).as_nanos(), i64::MAX);
        assert_eq!(Micros::from_nanos_u64(u64::MAX).as_nanos(), i64::MAX);
        assert_eq!(
            Micros::from(Duration::from_nanos(5_763)).as_micros_f64(),
            5.763
        );
        assert_eq!(Micros::from_nanos(-3).as_nanos_u64(), 0);
        assert_eq!(Micros::from_nanos(-3).to_duration(), Duration::ZERO);
        assert_eq!(Micros::from_millis_f64(2.5).as_secs_f64(), 0.0025);
        assert_eq!(
            Micros::from_nanos(i64::MAX) + Micros::from_nanos(1),
            Micros::from_nanos(i64::MAX)
        );
    }

    #[test]
    fn debug_shows_microseconds() {
        assert_eq!(format!("{:?}", Micros::from_nanos(7_000)), "7µs");
        assert_eq!(
            format!("{:?}", Some(Micros::from_nanos(-7_250))),
            "Some(-7.25µs)"
        );
    }

    #[test]
    fn reading_refuses_what_is_no_duration() {
        assert!(serde_json::from_str::<Micros>("\"12\"").is_err());
        assert!(serde_json::from_str::<Micros>("1e400").is_err());
        assert_eq!(
            serde_json::from_str::<Micros>("12").unwrap(),
            Micros::from_nanos(12_000)
        );
    }
}
