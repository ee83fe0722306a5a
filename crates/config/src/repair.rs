//! How a stream's viewers get lost packets back: `repair = "rtx"`, `"fec"`, `"fec:5x5"` or
//! `"rtx+fec"` on a `[[stream]]` of the server and on an RTP flow of a scenario.

use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use std::time::Duration;

/// How an RTP stream's viewers get lost packets back (`repair = ...`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Repair {
    /// `"none"` (the default): what the network loses is lost.
    #[default]
    None,
    /// `"rtx"`: NACK and retransmission (RFC 4585, RFC 4588). Each viewer asks for what can
    /// still arrive before its play-out deadline; the sender answers what can still make it,
    /// within a quarter of the stream's rate.
    Rtx,
    /// `"fec"` or `"fec:LxD"`: SMPTE 2022-1 row and column XOR FEC over a matrix of `L`
    /// columns by `D` rows (10x10 by default): `1/D + 1/L` more packets, nothing asked back.
    Fec(FecShape),
    /// `"rtx+fec"` or `"rtx+fec:LxD"`: both; viewers ask for what FEC could not rebuild.
    RtxFec(FecShape),
}

/// A SMPTE 2022-1 FEC matrix: `columns` (L) media packets a row, `rows` (D) rows. A row FEC
/// packet follows every L media packets, a column FEC packet every D.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FecShape {
    /// L: packets in a row, 1 to 20.
    pub columns: u8,
    /// D: rows in the matrix, 4 to 20; L × D at most 100 (SMPTE 2022-1).
    pub rows: u8,
}

impl Default for FecShape {
    /// 10 × 10: the largest matrix SMPTE 2022-1 allows, 20 % more packets.
    fn default() -> Self {
        FecShape {
            columns: 10,
            rows: 10,
        }
    }
}

impl FecShape {
    /// `"LxD"`, within SMPTE 2022-1's limits.
    pub fn parse(s: &str) -> Result<FecShape, String> {
        let bad =
            || format!("FEC matrix \"{s}\": write columns x rows, such as \"10x10\" or \"5x5\"");
        let (l, d) = s.split_once(['x', 'X']).ok_or_else(bad)?;
        let (l, d): (u8, u8) = (
            l.trim().parse().map_err(|_| bad())?,
            d.trim().parse().map_err(|_| bad())?,
        );
        if !(1..=20).contains(&l) || !(4..=20).contains(&d) || u16::from(l) * u16::from(d) > 100 {
            return Err(format!(
                "FEC matrix {l}x{d}: SMPTE 2022-1 allows 1 to 20 columns, 4 to 20 rows, at most \
                 100 packets in all"
            ));
        }
        Ok(FecShape {
            columns: l,
            rows: d,
        })
    }

    /// FEC packets per media packet: `1/L + 1/D`.
    pub fn overhead(self) -> f64 {
        1.0 / f64::from(self.columns) + 1.0 / f64::from(self.rows)
    }
}

impl fmt::Display for FecShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.columns, self.rows)
    }
}

/// The viewers' play-out delay a server's repairs must make when a stream does not say
/// (`playout_delay`): GStreamer's `rtpjitterbuffer` latency and `metronome recv`'s default.
pub const DEFAULT_PLAYOUT_DELAY: Duration = Duration::from_millis(200);

impl Repair {
    /// Whether nothing is repaired.
    pub fn is_none(&self) -> bool {
        *self == Repair::None
    }

    /// Whether viewers ask for retransmissions.
    pub fn rtx(self) -> bool {
        matches!(self, Repair::Rtx | Repair::RtxFec(_))
    }

    /// The FEC matrix, if the stream sends FEC.
    pub fn fec(self) -> Option<FecShape> {
        match self {
            Repair::Fec(s) | Repair::RtxFec(s) => Some(s),
            _ => None,
        }
    }

    /// `"none"`, `"rtx"`, `"fec"`, `"rtx+fec"`, the FEC ones with an optional `:LxD`;
    /// anything else is an error that says what to write.
    pub fn parse(s: &str) -> Result<Repair, String> {
        let s = s.trim();
        let (word, shape) = match s.split_once(':') {
            Some((w, shape)) => (w.trim(), Some(FecShape::parse(shape)?)),
            None => (s, None),
        };
        match (word, shape) {
            ("none", None) => Ok(Repair::None),
            ("rtx", None) => Ok(Repair::Rtx),
            ("fec", s) => Ok(Repair::Fec(s.unwrap_or_default())),
            ("rtx+fec" | "fec+rtx", s) => Ok(Repair::RtxFec(s.unwrap_or_default())),
            _ => Err(format!(
                "repair = \"{s}\": write \"rtx\" (NACK and retransmission), \"fec\" or \
                 \"fec:5x5\" (SMPTE 2022-1, columns x rows), \"rtx+fec\" or \"none\""
            )),
        }
    }
}

impl fmt::Display for Repair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Repair::None => f.write_str("none"),
            Repair::Rtx => f.write_str("rtx"),
            Repair::Fec(s) => write!(f, "fec:{s}"),
            Repair::RtxFec(s) => write!(f, "rtx+fec:{s}"),
        }
    }
}

impl Serialize for Repair {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Repair {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Repair::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_others_say_what_to_write() {
        let five = FecShape {
            columns: 5,
            rows: 5,
        };
        for r in [
            Repair::None,
            Repair::Rtx,
            Repair::Fec(five),
            Repair::RtxFec(FecShape::default()),
        ] {
            assert_eq!(Repair::parse(&r.to_string()), Ok(r));
        }
        assert_eq!(Repair::parse("fec"), Ok(Repair::Fec(FecShape::default())));
        assert_eq!(Repair::parse("rtx+fec:5x5"), Ok(Repair::RtxFec(five)));
        let e = Repair::parse("raptor").unwrap_err();
        assert!(e.contains("\"rtx\"") && e.contains("fec:5x5"), "{e}");
        assert!(Repair::parse("rtx:5x5").is_err());
        assert!(Repair::parse("fec:20x20")
            .unwrap_err()
            .contains("at most 100"));
        assert!(Repair::parse("fec:0x5").is_err());
        assert!(Repair::parse("fec:10x3")
            .unwrap_err()
            .contains("4 to 20 rows"));
        assert!(Repair::parse("fec:5")
            .unwrap_err()
            .contains("columns x rows"));
        assert!((five.overhead() - 0.4).abs() < 1e-12);
    }
}
