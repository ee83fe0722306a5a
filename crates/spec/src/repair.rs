//! How a stream's viewers get lost packets back: `repair = "rtx"` on a `[[stream]]` of the
//! server and on an RTP flow of a scenario.

use serde::{Deserialize, Deserializer, Serialize};
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
}

/// The viewers' play-out delay a server's repairs must make when a stream does not say
/// (`playout_delay`): GStreamer's `rtpjitterbuffer` latency and `metronome recv`'s default.
pub const DEFAULT_PLAYOUT_DELAY: Duration = Duration::from_millis(200);

impl Repair {
    /// The word for it in configs and scenarios.
    pub fn as_str(self) -> &'static str {
        match self {
            Repair::None => "none",
            Repair::Rtx => "rtx",
        }
    }

    /// Whether nothing is repaired.
    pub fn is_none(&self) -> bool {
        *self == Repair::None
    }

    /// `"none"` or `"rtx"`; anything else is an error that says what to write.
    pub fn parse(s: &str) -> Result<Repair, String> {
        match s.trim() {
            "none" => Ok(Repair::None),
            "rtx" => Ok(Repair::Rtx),
            other => Err(format!(
                "repair = \"{other}\": write \"rtx\" (NACK and retransmission) or \"none\""
            )),
        }
    }
}

impl Serialize for Repair {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
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
        for r in [Repair::None, Repair::Rtx] {
            assert_eq!(Repair::parse(r.as_str()), Ok(r));
        }
        let e = Repair::parse("fec").unwrap_err();
        assert!(e.contains("\"rtx\""), "{e}");
    }
}
