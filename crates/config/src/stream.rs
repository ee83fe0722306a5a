//! What a user declares about a stream: a `[[stream]]` table of the TOML config, the JSON body of
//! `POST /streams`, or one `serve` command line. Units are the ones people write: `"15ms"`,
//! `"4mbit"`, `"640x360"`.

use crate::repair::{Repair, DEFAULT_PLAYOUT_DELAY};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// One stream, as declared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    /// A short unique name: the stream's id in the API and in reports (letters, digits, `-_.`).
    pub name: String,
    /// `"test"` (the built-in encoded test pattern, the default) or the path of an MPEG-TS file.
    #[serde(default)]
    #[schemars(with = "String")]
    pub source: SourceSpec,
    /// Loop a file source forever.
    #[serde(default, rename = "loop")]
    pub looping: bool,
    /// One or more `rtp://` destinations to push to. May be empty when the server only serves
    /// the stream over RTSP (`serve --rtsp`).
    #[serde(default, deserialize_with = "one_or_many")]
    #[schemars(with = "Destinations")]
    pub destination: Vec<String>,
    /// Test source: picture size, `WxH`.
    #[serde(default)]
    pub size: Option<String>,
    /// Test source: frames per second.
    #[serde(default)]
    pub fps: Option<u32>,
    /// Test source: the constant MPEG-TS mux rate. File source: the rate to declare for admission
    /// when the file's own PCR rate is not what should be budgeted.
    #[serde(
        default,
        deserialize_with = "opt_bitrate",
        serialize_with = "ser_opt_bitrate"
    )]
    #[schemars(with = "Option<BitrateText>")]
    pub bitrate: Option<u64>,
    /// The most the stream's rate may be raised to while it runs (`PATCH /streams/NAME`, or a
    /// rate controller); admission reserves this much. By default the starting `bitrate`: a
    /// running stream may go down from what it was admitted at, and back up to it.
    #[serde(
        default,
        deserialize_with = "opt_bitrate",
        serialize_with = "ser_opt_bitrate"
    )]
    #[schemars(with = "Option<BitrateText>")]
    pub max_bitrate: Option<u64>,
    /// Job period; by default one packet interval at the stream's rate.
    #[serde(
        default,
        deserialize_with = "opt_duration",
        serialize_with = "ser_opt_duration"
    )]
    #[schemars(with = "Option<DurationText>")]
    pub period: Option<Duration>,
    /// Relative deadline; by default the period.
    #[serde(
        default,
        deserialize_with = "opt_duration",
        serialize_with = "ser_opt_duration"
    )]
    #[schemars(with = "Option<DurationText>")]
    pub deadline: Option<Duration>,
    /// Worst-case CPU cost of one job; by default packets per job times the calibrated send cost.
    #[serde(
        default,
        deserialize_with = "opt_duration",
        serialize_with = "ser_opt_duration"
    )]
    #[schemars(with = "Option<DurationText>")]
    pub cost: Option<Duration>,
    /// Ring slots between the producer and the pacer (the paper: 1024).
    #[serde(default)]
    pub ring: Option<usize>,
    /// Stamp each packet's send time in an RFC 8285 header extension.
    #[serde(default)]
    pub send_time: bool,
    /// The RTP SSRC: 8 hex digits as every output spells it (`"0badcafe"`), hex after `0x`
    /// (`"0xcafe"`), or a number; random by default. Written back as 8 hex digits.
    #[serde(
        default,
        deserialize_with = "opt_ssrc",
        serialize_with = "ser_opt_ssrc"
    )]
    #[schemars(with = "Option<SsrcText>")]
    pub ssrc: Option<u32>,
    /// The rate controller: `fixed` (the default: the rate as declared, or as set by hand),
    /// `tfrc` (RFC 5348, one receiver), `tfmcc` (RFC 4654, a group) or `asmp` (seed 002's,
    /// from receiver reports). With one, `max_bitrate` is the most it may reach; receivers
    /// run its receiving end (`metronome recv --cc`).
    #[serde(default)]
    pub cc: Option<String>,
    /// The largest IP packet, bytes: as many TS packets go in each RTP packet as fit (at most
    /// seven, the default; RFC 2250).
    #[serde(default)]
    pub mtu: Option<u32>,
    /// RTSP: the multicast group that clients asking for `multicast` in SETUP join, as
    /// `rtp://GROUP:PORT?ttl=N&iface=ADDR`. Without it the mount is unicast only.
    #[serde(default)]
    pub multicast: Option<String>,
    /// Send SRTP (RFC 3711, AES_CM_128_HMAC_SHA1_80) with this master key and salt: 30 bytes
    /// in base64 (40 characters), what FFmpeg's `-srtp_out_params` takes; the stream's SDP
    /// carries it as `a=crypto` (RFC 4568). Anyone who reads the config or the SDP can decrypt.
    #[serde(default)]
    pub srtp_key: Option<String>,
    /// Loss repair: `"rtx"` answers the receivers' NACKs (RFC 4585) with retransmissions
    /// (RFC 4588: payload type 97, an SSRC of their own, announced in the SDP) of what can
    /// still reach them before their play-out time, within a quarter of the stream's rate,
    /// which admission reserves; `"fec"` or `"fec:LxD"` sends SMPTE 2022-1 row and column FEC
    /// (10x10 by default) to each destination's port + 2 and + 4, `1/L + 1/D` more packets,
    /// which admission reserves; `"rtx+fec"` both; `"none"` (the default).
    #[serde(default, skip_serializing_if = "Repair::is_none")]
    #[schemars(with = "String")]
    pub repair: Repair,
    /// With `repair`: the receivers' play-out delay (their jitter buffer's latency), which
    /// decides what is still worth repairing; 200ms by default (GStreamer's `rtpjitterbuffer`
    /// latency, `metronome recv --playout-delay`).
    #[serde(
        default,
        deserialize_with = "opt_duration",
        serialize_with = "ser_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<DurationText>")]
    pub playout_delay: Option<Duration>,
}

impl StreamSpec {
    /// TS packets per RTP packet: seven, or as many as fit `mtu` with the RTP header, the
    /// send-time extension if stamped, SRTP's tag if protected, IPv4 and UDP, and FEC's
    /// header if it sends FEC (a FEC packet is 16 bytes longer than what it protects).
    pub fn ts_per_packet(&self) -> usize {
        let srtp_tag = if self.srtp_key.is_some() { 10 } else { 0 };
        let fec = if self.repair.fec().is_some() { 16 } else { 0 };
        let ip_udp = metronome_time::IPV4_UDP_OVERHEAD;
        let header = 12 + if self.send_time { 16 } else { 0 } + srtp_tag + fec + ip_udp;
        self.mtu.map_or(7, |m| {
            ((m as usize).saturating_sub(header) / 188).clamp(1, 7)
        })
    }
}

impl StreamSpec {
    /// A spec with defaults for everything but the name and destinations.
    pub fn new(name: impl Into<String>, destination: Vec<String>) -> Self {
        StreamSpec {
            name: name.into(),
            source: SourceSpec::Test,
            looping: false,
            destination,
            size: None,
            fps: None,
            bitrate: None,
            max_bitrate: None,
            period: None,
            deadline: None,
            cost: None,
            ring: None,
            send_time: false,
            ssrc: None,
            cc: None,
            mtu: None,
            multicast: None,
            srtp_key: None,
            repair: Repair::None,
            playout_delay: None,
        }
    }

    /// Checks what can be checked without opening anything.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.validate_settings()?;
        if self.destination.is_empty() {
            return Err(SpecError(format!(
                "stream '{}' has no destination: add destination = \"rtp://HOST:PORT\"",
                self.name
            )));
        }
        Ok(())
    }

    /// Checks everything but the destinations (an RTSP session brings its own).
    pub fn validate_settings(&self) -> Result<(), SpecError> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !name_ok {
            return Err(SpecError(format!(
                "stream name '{}' is not usable: use 1 to 64 letters, digits, '-', '_' or '.'",
                self.name.escape_debug()
            )));
        }
        if let Some(m) = self.mtu.filter(|m| !(300..=9000).contains(m)) {
            return Err(SpecError(format!(
                "stream '{}': mtu = {m}: an IP packet of 300 to 9000 bytes",
                self.name
            )));
        }
        if let Some(cc) = self.cc.as_deref() {
            if metronome_cc::ControllerKind::from_name(cc).is_none() {
                let names: Vec<&str> = metronome_cc::ControllerKind::ALL
                    .iter()
                    .map(|k| k.name())
                    .collect();
                return Err(SpecError(format!(
                    "stream '{}': cc = \"{cc}\" is not known; use one of: {}",
                    self.name,
                    names.join(", ")
                )));
            }
        }
        if let (Some(b), Some(m)) = (self.bitrate, self.max_bitrate) {
            if m < b {
                return Err(SpecError(format!(
                    "stream '{}': max_bitrate {} is below its bitrate {}; it is the most the \
                     rate may be raised to",
                    self.name,
                    format_bitrate(m),
                    format_bitrate(b)
                )));
            }
        }
        if let (Some(p), Some(d)) = (self.period, self.deadline) {
            if d > p {
                return Err(SpecError(format!(
                    "stream '{}': deadline {d:?} is longer than its period {p:?}; \
                     a deadline may be at most the period",
                    self.name
                )));
            }
        }
        for (what, v) in [("period", self.period), ("deadline", self.deadline)] {
            if let Some(v) = v {
                if v < Duration::from_micros(100) || v > Duration::from_secs(10) {
                    return Err(SpecError(format!(
                        "stream '{}': {what} {v:?} is outside 100us..10s",
                        self.name
                    )));
                }
            }
        }
        if let Some(k) = &self.srtp_key {
            let b64 = |c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/';
            if k.len() != 40 || !k.chars().all(b64) {
                return Err(SpecError(format!(
                    "stream '{}': srtp_key must be 30 bytes in base64, 40 characters of \
                     A-Z a-z 0-9 + /; make one with `head -c 30 /dev/urandom | base64`",
                    self.name
                )));
            }
        }
        self.validate_repair()?;
        if self.ring == Some(0) || self.ring.is_some_and(|r| r > 1 << 20) {
            return Err(SpecError(format!(
                "stream '{}': ring must hold 1 to 1048576 packets",
                self.name
            )));
        }
        Ok(())
    }
}

impl StreamSpec {
    /// The receivers' play-out delay the stream's repairs must make.
    pub fn repair_playout_delay(&self) -> Duration {
        self.playout_delay.unwrap_or(DEFAULT_PLAYOUT_DELAY)
    }

    fn validate_repair(&self) -> Result<(), SpecError> {
        if self.repair.fec().is_some() && self.srtp_key.is_some() {
            return Err(SpecError(format!(
                "stream '{}': repair = \"{}\" with srtp_key: SMPTE 2022-1 FEC is not \
                 protected by SRTP; use repair = \"rtx\" or remove srtp_key",
                self.name, self.repair
            )));
        }
        let Some(d) = self.playout_delay else {
            return Ok(());
        };
        if self.repair.is_none() {
            return Err(SpecError(format!(
                "stream '{}': playout_delay is what repairs must make; add repair = \"rtx\" \
                 or remove it",
                self.name
            )));
        }
        if d < Duration::from_millis(10) || d > Duration::from_secs(10) {
            return Err(SpecError(format!(
                "stream '{}': playout_delay {d:?} is outside 10ms..10s",
                self.name
            )));
        }
        Ok(())
    }
}

/// Where a stream's media comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SourceSpec {
    /// The built-in test pattern, encoded with openh264 and muxed to MPEG-TS live.
    #[default]
    Test,
    /// An MPEG-TS file, sent at the rate of its PCRs.
    File(PathBuf),
}

impl fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceSpec::Test => f.write_str("test"),
            SourceSpec::File(p) => write!(f, "{}", p.display()),
        }
    }
}

impl Serialize for SourceSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SourceSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(if s == "test" {
            SourceSpec::Test
        } else {
            SourceSpec::File(PathBuf::from(s))
        })
    }
}

/// A stream spec that could not be used; the text says what was wrong, in words a user can
/// act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

/// Parses a duration as people write it: `15ms`, `2.5ms`, `500us`, `1s`, `250000ns`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration: write it like 15ms, 500us or 1s"))?;
    let scale = match unit.trim() {
        "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        _ => {
            return Err(format!(
                "'{s}' has no known unit: write it like 15ms, 500us or 1s"
            ))
        }
    };
    let ns = v * scale;
    if !ns.is_finite() || !(0.0..=1e13).contains(&ns) {
        return Err(format!("'{s}' is out of range (0 to 10000 s)"));
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}

/// Parses a bit rate: `4mbit`, `4M`, `500kbit`, `1gbit`, `1.5Mbps`, or a plain number of bit/s.
pub fn parse_bitrate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a bit rate: write it like 4mbit, 500kbit or 1gbit"))?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit
        .strip_suffix("bit/s")
        .or_else(|| unit.strip_suffix("bps"))
        .or_else(|| unit.strip_suffix("bit"))
        .unwrap_or(&unit);
    let scale = match unit {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        _ => {
            return Err(format!(
                "'{s}' has no known unit: write it like 4mbit, 500kbit or 1gbit"
            ))
        }
    };
    let bps = v * scale;
    if !bps.is_finite() || !(1.0..=1e12).contains(&bps) {
        return Err(format!("'{s}' is out of range (1 bit/s to 1 Tbit/s)"));
    }
    Ok(bps.round() as u64)
}

/// Parses an amount of memory: `512MiB`, `2GiB`, `1.5G`, `64M`, `4096` (bytes); K, M, G and T
/// are powers of 1024 with or without `iB` or `B`. From 1 MiB to 1 PiB.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let bad = || format!("'{s}' is not an amount of memory: write it like 512MiB or 2GiB");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| bad())?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit
        .strip_suffix("ib")
        .or_else(|| unit.strip_suffix('b'))
        .unwrap_or(&unit);
    let power = match unit {
        "" => 0,
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        _ => return Err(bad()),
    };
    let bytes = v * 1024f64.powi(power);
    if !bytes.is_finite() || !((1u64 << 20) as f64..=(1u64 << 50) as f64).contains(&bytes) {
        return Err(format!("'{s}' is out of range (1 MiB to 1 PiB)"));
    }
    Ok(bytes.round() as u64)
}

/// Parses a share of a core: `95%` or `0.95`, from 1% to 100%.
pub fn parse_share(s: &str) -> Result<f64, String> {
    let v = fraction(s).map_err(|_| format!("'{s}' is not a share; write it like 95% or 0.95"))?;
    if !(0.01..=1.0).contains(&v) {
        return Err(format!("'{s}' is outside 1%..100%"));
    }
    Ok(v)
}

/// `95%` as 0.95, `0.95` as itself.
fn fraction(s: &str) -> Result<f64, std::num::ParseFloatError> {
    let t = s.trim();
    match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
}

/// Parses an amount of CPU: `1.5` (CPUs) or `150%` (of one CPU), from 0 to 1024 CPUs.
pub fn parse_cpus(s: &str) -> Result<f64, String> {
    let v = fraction(s)
        .map_err(|_| format!("'{s}' is not an amount of CPU; write it like 1.5 (CPUs) or 150%"))?;
    if !(0.0..=1024.0).contains(&v) {
        return Err(format!("'{s}' is outside 0 to 1024 CPUs"));
    }
    Ok(v)
}

/// Formats a bit rate for people: `4 Mbit/s`.
pub fn format_bitrate(bps: u64) -> String {
    let v = bps as f64;
    if v >= 1e9 {
        format!("{:.3} Gbit/s", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.1} Mbit/s", v / 1e6)
    } else {
        format!("{:.0} kbit/s", v / 1e3)
    }
}

/// One destination, or several.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum Destinations {
    One(String),
    Many(Vec<String>),
}

/// A bit rate as people write it (`"4mbit"`, `"2.5Mbit/s"`) or bit/s as a number.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum BitrateText {
    Text(String),
    Number(u64),
}

/// An SSRC: 8 hex digits as outputs spell it, hex after `0x`, or a number.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum SsrcText {
    Hex(#[schemars(regex(pattern = r"^(0[xX][0-9a-fA-F]{1,8}|[0-9a-fA-F]{8})$"))] String),
    Number(u32),
}

/// An SSRC as text: 8 hex digits (as every output spells one), or hex after `0x`.
pub fn parse_ssrc(s: &str) -> Result<u32, String> {
    let hex = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if (1..=8).contains(&h.len()) => h,
        None if s.len() == 8 => s,
        _ => "",
    };
    let digits = !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit());
    digits
        .then(|| u32::from_str_radix(hex, 16).ok())
        .flatten()
        .ok_or_else(|| {
            format!(
                "ssrc '{s}' is not an SSRC: write 8 hex digits as outputs print them \
             (\"0badcafe\"), hex after 0x (\"0xcafe\"), or a number (3054)"
            )
        })
}

fn opt_ssrc<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match Option::<SsrcText>::deserialize(d)? {
        Some(SsrcText::Hex(s)) => parse_ssrc(&s).map(Some).map_err(serde::de::Error::custom),
        Some(SsrcText::Number(n)) => Ok(Some(n)),
        None => Ok(None),
    }
}

fn ser_opt_ssrc<S: serde::Serializer>(v: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(n) => s.collect_str(&format_args!("{n:08x}")),
        None => s.serialize_none(),
    }
}

/// A duration with its unit, as people write it: `"15ms"`, `"250us"`, `"2s"`.
#[derive(schemars::JsonSchema)]
#[allow(dead_code)] // only its schema is used; the text is parsed by `opt_duration`
struct DurationText(String);

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match Destinations::deserialize(d)? {
        Destinations::One(s) => vec![s],
        Destinations::Many(v) => v,
    })
}

/// A duration as people write it (`"15ms"`), where one may be given: a stream's keys and the
/// `serve` file's.
pub(crate) fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    match Option::<String>::deserialize(d)? {
        Some(s) => parse_duration(&s)
            .map(Some)
            .map_err(serde::de::Error::custom),
        None => Ok(None),
    }
}

fn opt_bitrate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<BitrateText>::deserialize(d)? {
        Some(BitrateText::Text(s)) => parse_bitrate(&s)
            .map(Some)
            .map_err(serde::de::Error::custom),
        Some(BitrateText::Number(n)) => Ok(Some(n)),
        None => Ok(None),
    }
}

fn ser_opt_duration<S: serde::Serializer>(v: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(d) => s.collect_str(&format_args!("{}us", d.as_nanos() as f64 / 1e3)),
        None => s.serialize_none(),
    }
}

fn ser_opt_bitrate<S: serde::Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(b) => s.serialize_u64(*b),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ssrc_is_taken_as_outputs_spell_it_or_as_a_number() {
        let spec = |v: &str| -> Result<Option<u32>, String> {
            let text =
                format!("name = \"s\"\ndestination = \"rtp://127.0.0.1:5004\"\nssrc = {v}\n");
            toml::from_str::<StreamSpec>(&text)
                .map(|s| s.ssrc)
                .map_err(|e| e.to_string())
        };
        assert_eq!(spec("\"0badcafe\""), Ok(Some(0x0bad_cafe)));
        assert_eq!(spec("\"0xcafe\""), Ok(Some(0xcafe)));
        assert_eq!(spec("3054"), Ok(Some(3054)));
        assert_eq!(spec("0xcafe"), Ok(Some(0xcafe)));
        for bad in [
            "\"cafe\"",
            "\"0x\"",
            "\"0x123456789\"",
            "\"nothex00\"",
            "-1",
            "\"+badcafe\"",
            "\"0x+cafe\"",
        ] {
            assert!(spec(bad).is_err(), "{bad}");
        }
        assert!(spec("\"1234\"").unwrap_err().contains("8 hex digits"));
        // Written back as outputs spell it.
        let mut s = StreamSpec::new("s", vec!["rtp://127.0.0.1:5004".into()]);
        s.ssrc = Some(0xcafe);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["ssrc"], "0000cafe");
    }

    #[test]
    fn a_playout_delay_belongs_to_a_stream_that_repairs() {
        let mut s = StreamSpec::new("s", vec!["rtp://127.0.0.1:5004".into()]);
        s.playout_delay = Some(Duration::from_millis(200));
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("add repair = \"rtx\""), "{e}");
        s.repair = Repair::Rtx;
        assert_eq!(s.validate(), Ok(()));
        s.playout_delay = Some(Duration::from_millis(5));
        assert!(s.validate().unwrap_err().to_string().contains("10ms..10s"));
        s.playout_delay = None;
        assert_eq!(s.repair_playout_delay(), DEFAULT_PLAYOUT_DELAY);
        let toml: StreamSpec = toml::from_str(
            "name = \"s\"\ndestination = \"rtp://127.0.0.1:5004\"\nrepair = \"rtx\"\nplayout_delay = \"300ms\"",
        )
        .unwrap();
        assert_eq!(toml.repair, Repair::Rtx);
        assert_eq!(toml.playout_delay, Some(Duration::from_millis(300)));
        // FEC is not sent under SRTP: refused with what to do.
        s.repair = Repair::parse("fec:5x5").unwrap();
        assert_eq!(s.validate(), Ok(()));
        s.srtp_key = Some("x".repeat(40));
        let e = s.validate().unwrap_err().to_string();
        assert!(
            e.contains("not protected by SRTP") && e.contains("fec:5x5"),
            "{e}"
        );
    }

    #[test]
    fn cpus_are_written_as_cpus_or_percent() {
        assert_eq!(parse_cpus("1.5"), Ok(1.5));
        assert_eq!(parse_cpus("40%"), Ok(0.4));
        assert_eq!(parse_cpus("0"), Ok(0.0));
        assert!(parse_cpus("-1").unwrap_err().contains("outside"));
        assert!(parse_cpus("lots")
            .unwrap_err()
            .contains("1.5 (CPUs) or 150%"));
    }

    #[test]
    fn amounts_of_memory_parse_in_powers_of_1024() {
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("2GiB"), Ok(2 << 30));
        assert_eq!(parse_bytes("1.5G"), Ok(3 << 29));
        assert_eq!(parse_bytes(" 64 MB "), Ok(64 << 20));
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        for bad in ["", "GiB", "2XB", "-1G", "1KiB", "2PiB", "nanG"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_and_rates_parse_as_written() {
        assert_eq!(parse_duration("15ms").unwrap(), Duration::from_millis(15));
        assert_eq!(
            parse_duration("2.5ms").unwrap(),
            Duration::from_micros(2500)
        );
        assert_eq!(parse_duration("500us").unwrap(), Duration::from_micros(500));
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert!(parse_duration("15").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("1e99s").is_err());
        assert_eq!(parse_bitrate("4mbit").unwrap(), 4_000_000);
        assert_eq!(parse_bitrate("4M").unwrap(), 4_000_000);
        assert_eq!(parse_bitrate("1gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_bitrate("1.5Mbps").unwrap(), 1_500_000);
        assert_eq!(parse_bitrate("500000").unwrap(), 500_000);
        assert!(parse_bitrate("fast").is_err());
        assert!(parse_bitrate("0").is_err());
    }

    #[test]
    fn a_spec_round_trips_through_json_and_checks_its_fields() {
        let json = r#"{"name":"cam7","source":"a.ts","loop":true,
            "destination":"rtp://127.0.0.1:5004","bitrate":"4mbit","period":"15ms","deadline":"10ms"}"#;
        let s: StreamSpec = serde_json::from_str(json).unwrap();
        assert_eq!(s.source, SourceSpec::File("a.ts".into()));
        assert_eq!(s.bitrate, Some(4_000_000));
        assert_eq!(s.period, Some(Duration::from_millis(15)));
        s.validate().unwrap();
        let back: StreamSpec = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let mut bad = s.clone();
        bad.deadline = Some(Duration::from_millis(20));
        assert!(bad
            .validate()
            .unwrap_err()
            .0
            .contains("longer than its period"));
        bad = s.clone();
        bad.name = "a b".into();
        assert!(bad.validate().is_err());
        assert!(
            serde_json::from_str::<StreamSpec>(r#"{"name":"x","destination":[],"typo":1}"#)
                .is_err()
        );
    }
}
