//! The `serve` config file: optional server settings and any number of `[[stream]]` tables.
//!
//! ```toml
//! sched = "edf"                 # edf | dm | naive
//! rt_cores = 1
//! link_capacity = "1gbit"
//! control = "127.0.0.1:8089"    # the HTTP control API address
//! control_token_file = "/var/lib/metronome/control-token"  # its bearer token (made if absent)
//! control_hosts = ["metronome.example"]  # names it may be reached by (besides IPs, localhost)
//! allow_destinations = ["127.0.0.0/8", "239.0.0.0/8", "10.1.0.0/16"]  # where its streams may go
//! rtsp = "0.0.0.0:8554"         # serve every stream as rtsp://HOST:8554/NAME
//! rtsp_tls_cert = "/etc/metronome/cert.pem"  # with rtsp_tls_key: rtsps:// (RTSP over TLS)
//! rtsp_tls_key = "/etc/metronome/key.pem"
//! core_budget = "95%"           # or 0.95
//! memory_budget = "2GiB"        # what the streams' rings and sources may hold
//! max_stream_rate = "200mbit"   # the most one stream may send, to all its destinations
//! encode_budget = 1.5           # the CPUs the live encoders may take (or "150%")
//! encode_cost = "25%"           # what one live encoder costs, instead of measuring it
//! send_cost = "5us"             # the send cost budgeted per packet, instead of measuring it
//! overload = "refuse"           # warn | refuse | shed, when the streams no longer fit
//! sdp_dir = "/var/lib/metronome/sdp"  # NAME.sdp for each pushed stream
//! rtsp_session_timeout = "60s"  # and rtsp_idle_timeout, rtsp_request_timeout
//! rtsp_max_connections = 1024   # and rtsp_max_per_address, rtsp_max_sessions,
//!                               # rtsp_max_sessions_per_address
//! rtsp_encoder_per_session = false
//!
//! [rtsp_auth]                   # who may play which mount (see `rtsp_auth`)
//! public = ["lobby"]
//! [[rtsp_auth.user]]
//! name = "alice"
//! md5 = "…"                     # what `metronome passwd alice` prints
//! sha256 = "…"
//!
//! [[stream]]
//! name = "cam1"
//! destination = "rtp://127.0.0.1:5004"
//! bitrate = "4mbit"
//! period = "15ms"
//! ```
//!
//! Every setting is optional (the command line overrides them). Unknown keys are errors, every
//! stream is validated, and names must be unique. A stream without a destination is only served
//! over RTSP. Errors name the file, the line and column, and
//! what to do.

use crate::prefix::IpPrefix;
use crate::rtsp_auth::{RawRtspAuth, RtspAuthSpec};
use crate::stream::{parse_bitrate, parse_cpus, parse_duration, parse_share, StreamSpec};
pub use metronome_sched::OverloadPolicy;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::HashSet;
use std::fmt;
use std::io::Read;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;
use toml::Spanned;

/// The largest config file accepted, in bytes.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The most `[[stream]]` tables one config file may declare.
pub const MAX_STREAMS: usize = 10_000;

/// The scheduling policy for the real-time pacing threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedKind {
    /// Earliest deadline first.
    #[default]
    Edf,
    /// Deadline monotonic (fixed priorities, shorter relative deadline first).
    Dm,
    /// The baseline: one ordinary pacing thread per stream, no shared deadline-ordered cores.
    Naive,
}

impl FromStr for SchedKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "edf" => Ok(SchedKind::Edf),
            "dm" => Ok(SchedKind::Dm),
            "naive" => Ok(SchedKind::Naive),
            _ => Err(format!(
                "unknown scheduler '{}': use edf, dm or naive",
                s.escape_debug()
            )),
        }
    }
}

impl fmt::Display for SchedKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SchedKind::Edf => "edf",
            SchedKind::Dm => "dm",
            SchedKind::Naive => "naive",
        })
    }
}

/// A parsed and checked `serve` config file. `None` means "not set here".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServeConfig {
    /// `sched`: the scheduling policy.
    pub sched: Option<SchedKind>,
    /// `rt_cores`: how many CPU cores run real-time pacing threads (1 to 1024).
    pub rt_cores: Option<usize>,
    /// `link_capacity`: the outgoing link's capacity in bit/s (`"1gbit"` or a number).
    pub link_capacity: Option<u64>,
    /// `control`: the address of the HTTP control API.
    pub control: Option<SocketAddr>,
    /// `control_token_file`: the file holding the control API's bearer token (made, mode 0600,
    /// if absent).
    pub control_token_file: Option<PathBuf>,
    /// `control_hosts`: host names a control API request's `Host` may give, besides IP
    /// addresses and `localhost`.
    pub control_hosts: Vec<String>,
    /// `allow_destinations`: the address prefixes streams added through the control API may
    /// send to (`None`: [`IpPrefix::default_destinations`]).
    pub allow_destinations: Option<Vec<IpPrefix>>,
    /// `memory_budget`: the most the admitted streams may hold in memory, bytes (`"2GiB"`).
    pub memory_budget: Option<u64>,
    /// `max_stream_rate`: the most one stream may send, bit/s, all destinations together.
    pub max_stream_rate: Option<u64>,
    /// `encode_budget`: the CPU the live encoders may take together, CPUs.
    pub encode_budget: Option<f64>,
    /// `rtsp`: the address of the RTSP server.
    pub rtsp: Option<SocketAddr>,
    /// `core_budget`: the share of each real-time core the pacer may use, 0.01 to 1.
    pub core_budget: Option<f64>,
    /// `[rtsp_auth]`: RTSP users and what they may play (`None`: anyone plays anything).
    pub rtsp_auth: Option<RtspAuthSpec>,
    /// `rtsp_tls_cert`, `rtsp_tls_key`: RTSPS with this PEM certificate chain and key (both
    /// or neither).
    pub rtsp_tls_cert: Option<PathBuf>,
    /// `rtsp_tls_key`: the PEM private key of [`rtsp_tls_cert`](Self::rtsp_tls_cert)'s
    /// certificate (given with it, or neither is).
    pub rtsp_tls_key: Option<PathBuf>,
    /// `encode_cost`: what one live encoder costs, CPUs, instead of measuring it.
    pub encode_cost: Option<f64>,
    /// `send_cost`: the send cost per packet admission budgets, instead of measuring it.
    pub send_cost: Option<Duration>,
    /// `overload`: what the server does when the running streams no longer fit the host.
    pub overload: Option<OverloadPolicy>,
    /// `sdp_dir`: the directory each pushed stream's SDP file is written to (`NAME.sdp`).
    pub sdp_dir: Option<PathBuf>,
    /// The RTSP server's limits and timeouts (`rtsp_*` keys).
    pub rtsp_limits: RtspLimits,
    /// The `[[stream]]` tables, in file order; each validated, names unique.
    pub streams: Vec<StreamSpec>,
}

/// The RTSP server's limits and timeouts, each as the `serve --rtsp-*` option of its name
/// (`None`: not set here).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtspLimits {
    /// `rtsp_encoder_per_session`: each session of a live test-source mount gets its own encoder.
    pub encoder_per_session: Option<bool>,
    /// `rtsp_session_timeout`: a session without a request or receiver report this long ends.
    pub session_timeout: Option<Duration>,
    /// `rtsp_idle_timeout`: a connection without a session and without a byte this long closes.
    pub idle_timeout: Option<Duration>,
    /// `rtsp_request_timeout`: a request must arrive whole within this long of its first byte.
    pub request_timeout: Option<Duration>,
    /// `rtsp_max_connections`: connections at once.
    pub max_connections: Option<usize>,
    /// `rtsp_max_per_address`: connections from one address at once.
    pub max_per_address: Option<usize>,
    /// `rtsp_max_sessions`: sessions at once.
    pub max_sessions: Option<usize>,
    /// `rtsp_max_sessions_per_address`: sessions from one address at once.
    pub max_sessions_per_address: Option<usize>,
}

/// What kind of problem a config file has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// The file could not be read (missing, unreadable, not UTF-8).
    Read,
    /// The file is larger than [`MAX_CONFIG_BYTES`] or declares more than [`MAX_STREAMS`].
    TooLarge,
    /// Not valid TOML, an unknown or missing key, or a value of the wrong form.
    Parse,
    /// Well-formed, but a stream does not validate or a name is used twice.
    Invalid,
}

/// A config file problem: where it is and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The kind of problem.
    pub kind: ConfigErrorKind,
    /// The file's path, or whatever names the text's origin.
    pub origin: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong and what to do, without the location.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)?;
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, " line {l}, column {c}")?,
            (Some(l), None) => write!(f, " line {l}")?,
            _ => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// An error not (yet) placed at a line.
    pub(crate) fn new(kind: ConfigErrorKind, origin: &str, message: String) -> Self {
        let origin = origin.to_string();
        ConfigError {
            kind,
            origin,
            line: None,
            column: None,
            message,
        }
    }

    /// Places the error at a byte offset of `text`.
    pub(crate) fn at(mut self, text: &str, offset: Option<usize>) -> Self {
        if let Some(o) = offset {
            let (line, column) = line_col(text, o);
            (self.line, self.column) = (Some(line), Some(column));
        }
        self
    }
}

/// Reads and parses a config file (see [`parse`]).
pub fn load(path: &Path) -> Result<ServeConfig, ConfigError> {
    use ConfigErrorKind::{Read as Unreadable, TooLarge};
    let origin = path.display().to_string();
    let err = |kind, message: String| ConfigError::new(kind, &origin, message);
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| {
            err(
                Unreadable,
                format!("cannot read the config file: {e}; check the path"),
            )
        })?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        let message = format!("the file is over {MAX_CONFIG_BYTES} bytes; is it the right file?");
        return Err(err(TooLarge, message));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        err(
            Unreadable,
            format!("the file is not UTF-8 text (bad byte at offset {at})"),
        )
    })?;
    parse(&text, &origin)
}

/// Parses config text; `origin` names it in errors (usually the file's path).
pub fn parse(text: &str, origin: &str) -> Result<ServeConfig, ConfigError> {
    use ConfigErrorKind::{Invalid, Parse, TooLarge};
    let err = |kind, message: String| ConfigError::new(kind, origin, message);
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(err(
            TooLarge,
            format!("the text is over {MAX_CONFIG_BYTES} bytes"),
        ));
    }
    let mut raw: RawConfig = toml::from_str(text).map_err(|e| {
        let offset = e.span().map(|s| s.start);
        err(Parse, explain(text, e.message(), offset)).at(text, offset)
    })?;
    let n = raw.stream.len();
    if n > MAX_STREAMS {
        let message = format!("{n} streams declared; at most {MAX_STREAMS} fit in one file");
        return Err(err(TooLarge, message));
    }
    let mut names = HashSet::with_capacity(n);
    let mut streams = Vec::with_capacity(n);
    for s in std::mem::take(&mut raw.stream) {
        let offset = Some(s.span().start);
        let spec = s.into_inner();
        if let Err(e) = spec.validate_settings() {
            return Err(err(Invalid, e.0).at(text, offset));
        }
        if !names.insert(spec.name.clone()) {
            let message = format!(
                "a second [[stream]] is named '{}'; stream names must be unique, rename one",
                spec.name
            );
            return Err(err(Invalid, message).at(text, offset));
        }
        streams.push(spec);
    }
    if raw.rtsp_tls_cert.is_some() != raw.rtsp_tls_key.is_some() {
        let message = "rtsp_tls_cert and rtsp_tls_key go together: give both files, or neither";
        return Err(err(Invalid, message.to_string()));
    }
    let rtsp_auth = match raw.rtsp_auth.take() {
        None => None,
        Some(table) => {
            let offset = Some(table.span().start);
            let spec = table
                .into_inner()
                .check()
                .map_err(|m| err(Invalid, format!("[rtsp_auth]: {m}")).at(text, offset))?;
            Some(spec)
        }
    };
    Ok(raw.into_config(rtsp_auth, streams))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    sched: Option<SchedKind>,
    #[serde(default, deserialize_with = "de_rt_cores")]
    rt_cores: Option<usize>,
    #[serde(default, deserialize_with = "de_capacity")]
    link_capacity: Option<u64>,
    #[serde(default, deserialize_with = "de_control")]
    control: Option<SocketAddr>,
    #[serde(default)]
    control_token_file: Option<PathBuf>,
    #[serde(default)]
    control_hosts: Vec<String>,
    #[serde(default)]
    allow_destinations: Option<Vec<IpPrefix>>,
    #[serde(default, deserialize_with = "de_memory")]
    memory_budget: Option<u64>,
    #[serde(default, deserialize_with = "de_max_stream_rate")]
    max_stream_rate: Option<u64>,
    #[serde(default, deserialize_with = "de_encode_budget")]
    encode_budget: Option<f64>,
    #[serde(default, deserialize_with = "de_rtsp")]
    rtsp: Option<SocketAddr>,
    #[serde(default, deserialize_with = "de_budget")]
    core_budget: Option<f64>,
    #[serde(default)]
    rtsp_tls_cert: Option<PathBuf>,
    #[serde(default)]
    rtsp_tls_key: Option<PathBuf>,
    #[serde(default, deserialize_with = "de_encode_cost")]
    encode_cost: Option<f64>,
    #[serde(default, deserialize_with = "de_duration")]
    send_cost: Option<Duration>,
    #[serde(default, deserialize_with = "de_overload")]
    overload: Option<OverloadPolicy>,
    #[serde(default)]
    sdp_dir: Option<PathBuf>,
    #[serde(default)]
    rtsp_encoder_per_session: Option<bool>,
    #[serde(default, deserialize_with = "de_duration")]
    rtsp_session_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    rtsp_idle_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    rtsp_request_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "de_count")]
    rtsp_max_connections: Option<usize>,
    #[serde(default, deserialize_with = "de_count")]
    rtsp_max_per_address: Option<usize>,
    #[serde(default, deserialize_with = "de_count")]
    rtsp_max_sessions: Option<usize>,
    #[serde(default, deserialize_with = "de_count")]
    rtsp_max_sessions_per_address: Option<usize>,
    #[serde(default)]
    rtsp_auth: Option<Spanned<RawRtspAuth>>,
    #[serde(default)]
    stream: Vec<Spanned<StreamSpec>>,
}

impl RawConfig {
    /// The checked config: these settings, with the users and streams already checked.
    fn into_config(self, rtsp_auth: Option<RtspAuthSpec>, streams: Vec<StreamSpec>) -> ServeConfig {
        ServeConfig {
            sched: self.sched,
            rt_cores: self.rt_cores,
            link_capacity: self.link_capacity,
            control: self.control,
            control_token_file: self.control_token_file,
            control_hosts: self.control_hosts,
            allow_destinations: self.allow_destinations,
            memory_budget: self.memory_budget,
            max_stream_rate: self.max_stream_rate,
            encode_budget: self.encode_budget,
            rtsp: self.rtsp,
            core_budget: self.core_budget,
            rtsp_auth,
            rtsp_tls_cert: self.rtsp_tls_cert,
            rtsp_tls_key: self.rtsp_tls_key,
            encode_cost: self.encode_cost,
            send_cost: self.send_cost,
            overload: self.overload,
            sdp_dir: self.sdp_dir,
            rtsp_limits: RtspLimits {
                encoder_per_session: self.rtsp_encoder_per_session,
                session_timeout: self.rtsp_session_timeout,
                idle_timeout: self.rtsp_idle_timeout,
                request_timeout: self.rtsp_request_timeout,
                max_connections: self.rtsp_max_connections,
                max_per_address: self.rtsp_max_per_address,
                max_sessions: self.rtsp_max_sessions,
                max_sessions_per_address: self.rtsp_max_sessions_per_address,
            },
            streams,
        }
    }
}

/// A number or a string: TOML lets people write either for rates and shares.
#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrText {
    Int(i64),
    Float(f64),
    Text(String),
}

fn de_rt_cores<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let n = i64::deserialize(d)?;
    match usize::try_from(n) {
        Ok(n @ 1..=1024) => Ok(Some(n)),
        _ => Err(serde::de::Error::custom(format!(
            "rt_cores = {n} is out of range: use 1 to 1024 cores"
        ))),
    }
}

fn de_capacity<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    rate_of(d, "link_capacity")
}

fn de_max_stream_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    rate_of(d, "max_stream_rate")
}

/// A bit rate, as a number or text ("1gbit"); `key` names it in the error.
fn rate_of<'de, D: Deserializer<'de>>(d: D, key: &str) -> Result<Option<u64>, D::Error> {
    let bad = |v: &dyn fmt::Display| {
        serde::de::Error::custom(format!(
            "{key} = {v} is not a bit rate: write it like \"1gbit\" or \"100mbit\""
        ))
    };
    match NumOrText::deserialize(d)? {
        NumOrText::Int(n) if n >= 1 => Ok(Some(n as u64)),
        NumOrText::Int(n) => Err(bad(&n)),
        NumOrText::Float(x) => Err(bad(&x)),
        NumOrText::Text(s) => parse_bitrate(&s)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

fn de_memory<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let s = String::deserialize(d)?;
    crate::stream::parse_bytes(&s)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(format!("memory_budget: {e}")))
}

fn de_control<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    let s = String::deserialize(d)?;
    s.trim().parse().map(Some).map_err(|_| {
        serde::de::Error::custom(format!(
            "control = \"{}\" is not an address: write it like \"127.0.0.1:8089\"",
            s.escape_debug()
        ))
    })
}

fn de_rtsp<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    let s = String::deserialize(d)?;
    s.trim().parse().map(Some).map_err(|_| {
        serde::de::Error::custom(format!(
            "rtsp = \"{}\" is not an address: write it like \"0.0.0.0:8554\"",
            s.escape_debug()
        ))
    })
}

fn de_encode_budget<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    cpus_of(d, "encode_budget")
}

fn de_encode_cost<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    cpus_of(d, "encode_cost")
}

/// An amount of CPU, as a number (CPUs) or text (`"150%"`); `key` names it in the error.
fn cpus_of<'de, D: Deserializer<'de>>(d: D, key: &str) -> Result<Option<f64>, D::Error> {
    let cpus = match NumOrText::deserialize(d)? {
        NumOrText::Int(n) => parse_cpus(&n.to_string()),
        NumOrText::Float(x) => parse_cpus(&x.to_string()),
        NumOrText::Text(s) => parse_cpus(&s),
    };
    cpus.map(Some)
        .map_err(|e| serde::de::Error::custom(format!("{key}: {e}")))
}

/// A duration with its unit: `"5us"`, `"60s"`.
fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// How many of something at once: 1 to a million.
fn de_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let n = i64::deserialize(d)?;
    match usize::try_from(n) {
        Ok(n @ 1..=1_000_000) => Ok(Some(n)),
        _ => Err(serde::de::Error::custom(format!(
            "{n} is out of range: use 1 to 1000000"
        ))),
    }
}

fn de_overload<'de, D: Deserializer<'de>>(d: D) -> Result<Option<OverloadPolicy>, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map(Some).map_err(serde::de::Error::custom)
}

fn de_budget<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let share = match NumOrText::deserialize(d)? {
        NumOrText::Int(n) => parse_share(&n.to_string()),
        NumOrText::Float(x) => parse_share(&x.to_string()),
        NumOrText::Text(s) => parse_share(&s),
    };
    match share {
        Ok(b) => Ok(Some(b)),
        Err(_) => Err(serde::de::Error::custom(
            "core_budget must be a share from 1% to 100%: write it like \"95%\" or 0.95",
        )),
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, text[start..offset].chars().count() + 1)
}

/// Rewords toml's message in the file's own terms, naming the table it is in
/// (`[[stream]] 'cam1'`, `[rtsp_auth]`, …).
fn explain(text: &str, message: &str, offset: Option<usize>) -> String {
    let stream = offset.and_then(|o| table_at(text, o));
    let place = stream
        .as_ref()
        .map_or_else(|| "at the top level".to_string(), |p| format!("in {p}"));
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some((key, expected)) = rest.split_once("`, expected ") {
            let known = expected
                .trim_start_matches("one of ")
                .replace('`', "")
                .replace(" or ", ", ");
            // At the top level, the keys that are tables are written as tables.
            let known: Vec<&str> = known
                .split(", ")
                .map(|k| match (k, &stream) {
                    ("rtsp_auth", None) => "[rtsp_auth]",
                    ("stream", None) => "[[stream]]",
                    ("user", Some(t)) if t == "[rtsp_auth]" => "[[rtsp_auth.user]]",
                    (k, _) => k,
                })
                .collect();
            return format!(
                "unknown key '{key}' {place}; known keys: {}",
                known.join(", ")
            );
        }
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let key = rest.trim_end_matches('`');
        return format!("{place}: the key '{key}' is required; add {key} = ...");
    }
    let message = if message.contains("untagged enum OneOrMany") {
        "destination must be \"rtp://HOST:PORT\" or a list of such strings"
    } else {
        message
    };
    let line = offset.map_or("", |o| {
        let (l, _) = line_col(text, o);
        text.lines().nth(l - 1).unwrap_or("").trim()
    });
    let shown: String = line.chars().take(80).collect();
    let at = if shown.is_empty() {
        String::new()
    } else {
        format!(" (at `{shown}`)")
    };
    match stream {
        Some(_) => format!("{place}: {message}{at}"),
        None => format!("{message}{at}"),
    }
}

/// Which table holds a byte offset: "[[stream]] 'cam1'" (or "#2" without a name),
/// "[rtsp_auth]", "[[rtsp_auth.user]] 'alice'"; `None` at the top level.
fn table_at(text: &str, offset: usize) -> Option<String> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let within = |r: Range<usize>| r.start <= offset && offset < r.end.max(r.start + 1);
    let top = doc.get_ref();
    if let Some(streams) = entry(top, "stream") {
        if let Some(name) = array_entry_at(streams.get_ref(), "[[stream]]", &within) {
            return Some(name);
        }
    }
    let auth = entry(top, "rtsp_auth")?;
    let auth_table = auth.get_ref().as_table()?;
    if let Some(users) = entry(auth_table, "user") {
        if let Some(name) = array_entry_at(users.get_ref(), "[[rtsp_auth.user]]", &within) {
            return Some(name);
        }
    }
    let inside = auth_table
        .iter()
        .any(|(k, v)| within(k.span()) || within(v.span()));
    inside.then(|| "[rtsp_auth]".to_string())
}

/// The value of `key` in `table`.
fn entry<'a, 'b>(
    table: &'a toml::de::DeTable<'b>,
    key: &str,
) -> Option<&'a toml::Spanned<toml::de::DeValue<'b>>> {
    table
        .iter()
        .find(|(k, _)| k.get_ref() == key)
        .map(|(_, v)| v)
}

/// The entry of an array of tables (`what`, e.g. `[[stream]]`) that holds the offset, by its
/// `name` or its place.
fn array_entry_at(
    array: &toml::de::DeValue,
    what: &str,
    within: &dyn Fn(Range<usize>) -> bool,
) -> Option<String> {
    for (i, s) in array.as_array()?.iter().enumerate() {
        let table = s.get_ref().as_table()?;
        let inside = within(s.span())
            || table
                .iter()
                .any(|(k, v)| within(k.span()) || within(v.span()));
        if inside {
            let name = table.iter().find(|(k, _)| k.get_ref() == "name");
            return Some(match name.and_then(|(_, v)| v.get_ref().as_str()) {
                Some(n) => format!("{what} '{}'", n.escape_debug()),
                None => format!("{what} #{}", i + 1),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const FULL: &str = r#"
# server settings
sched = "dm"
rt_cores = 2
link_capacity = "1gbit"
control = "127.0.0.1:8089"
control_token_file = "/var/lib/metronome/control-token"
control_hosts = ["metronome.example"]
allow_destinations = ["127.0.0.0/8", "10.1.0.0/16"]
memory_budget = "512MiB"
encode_budget = "150%"
core_budget = "95%"

[[stream]]
name = "cam1"
source = "test"
destination = "rtp://127.0.0.1:5004"
bitrate = "4mbit"
period = "15ms"
deadline = "10ms"

[[stream]]
name = "file2"
source = "clip.ts"
loop = true
destination = ["rtp://127.0.0.1:5006", "rtp://239.1.1.1:5008"]
"#;

    fn err(text: &str) -> ConfigError {
        parse(text, "config.toml").expect_err("the config should be refused")
    }

    #[test]
    fn rtsp_users_are_read_and_their_mistakes_located() {
        let md5 = "939e7578ed9e3c518a452acee763bce9";
        let text = format!(
            "rtsp = \"0.0.0.0:8554\"\n[rtsp_auth]\npublic = [\"a\"]\n\
             [[rtsp_auth.user]]\nname = \"alice\"\nmd5 = \"{md5}\"\n"
        );
        let cfg = parse(&text, "config.toml").unwrap();
        let auth = cfg.rtsp_auth.unwrap();
        assert!(auth.is_public("a") && auth.user("alice").is_some());
        let e = err("sched = \"edf\"\n[rtsp_auth]\nrealm = \"x\"\n");
        assert_eq!((e.kind, e.line), (ConfigErrorKind::Invalid, Some(2)));
        assert!(e.message.starts_with("[rtsp_auth]: "), "{e}");
    }

    /// The options of `serve` that are not a stream's have keys too, and say what is wrong.
    #[test]
    fn budgets_overload_and_rtsp_limits_are_read() {
        let text = "send_cost = \"5us\"\nencode_cost = \"25%\"\noverload = \"shed\"\n\
                    sdp_dir = \"/run/sdp\"\nrtsp_encoder_per_session = true\n\
                    rtsp_session_timeout = \"30s\"\nrtsp_idle_timeout = \"60s\"\n\
                    rtsp_request_timeout = \"2s\"\nrtsp_max_connections = 10\n\
                    rtsp_max_per_address = 3\nrtsp_max_sessions = 4\n\
                    rtsp_max_sessions_per_address = 2\n";
        let c = parse(text, "config.toml").unwrap();
        assert_eq!(c.send_cost, Some(Duration::from_micros(5)));
        assert_eq!(c.encode_cost, Some(0.25));
        assert_eq!(c.overload, Some(OverloadPolicy::Shed));
        assert_eq!(c.sdp_dir, Some(PathBuf::from("/run/sdp")));
        let l = c.rtsp_limits;
        assert_eq!(l.encoder_per_session, Some(true));
        assert_eq!(
            (l.session_timeout, l.idle_timeout, l.request_timeout),
            (
                Some(Duration::from_secs(30)),
                Some(Duration::from_secs(60)),
                Some(Duration::from_secs(2))
            )
        );
        assert_eq!(
            (
                l.max_connections,
                l.max_per_address,
                l.max_sessions,
                l.max_sessions_per_address
            ),
            (Some(10), Some(3), Some(4), Some(2))
        );
        let e = err("sched = \"edf\"\noverload = \"panic\"\n");
        assert_eq!((e.kind, e.line), (ConfigErrorKind::Parse, Some(2)), "{e}");
        assert!(e.message.contains("use warn, refuse or shed"), "{e}");
        let e = err("rtsp_max_sessions = 0\n");
        assert!(e.message.contains("use 1 to 1000000"), "{e}");
        let e = err("send_cost = \"fast\"\n");
        assert_eq!(e.line, Some(1), "{e}");
    }

    #[test]
    fn a_bad_prefix_in_the_allow_list_names_its_line() {
        let e = err("control = \"127.0.0.1:8089\"\nallow_destinations = [\"10.0.0.0/33\"]\n");
        assert_eq!((e.kind, e.line), (ConfigErrorKind::Parse, Some(2)), "{e}");
        assert!(e.message.contains("longer than the address"), "{e}");
    }

    #[test]
    fn a_full_example_parses() {
        let c = parse(FULL, "config.toml").unwrap();
        assert_eq!(c.sched, Some(SchedKind::Dm));
        assert_eq!(c.rt_cores, Some(2));
        assert_eq!(c.link_capacity, Some(1_000_000_000));
        assert_eq!(c.control, Some("127.0.0.1:8089".parse().unwrap()));
        assert_eq!(
            c.control_token_file.as_deref(),
            Some(Path::new("/var/lib/metronome/control-token"))
        );
        assert_eq!(c.control_hosts, ["metronome.example"]);
        let allowed = c.allow_destinations.unwrap();
        assert_eq!(allowed.len(), 2);
        assert!(allowed[1].contains("10.1.2.3".parse().unwrap()));
        assert_eq!(c.memory_budget, Some(512 << 20));
        assert_eq!(c.encode_budget, Some(1.5));
        assert_eq!(c.core_budget, Some(0.95));
        assert_eq!(c.streams.len(), 2);
        assert_eq!(c.streams[0].deadline, Some(Duration::from_millis(10)));
        assert_eq!(c.streams[1].destination.len(), 2);
        assert!(c.streams[1].looping);
    }

    #[test]
    fn everything_is_optional() {
        assert_eq!(parse("", "x").unwrap(), ServeConfig::default());
        let c = parse("core_budget = 0.5\nlink_capacity = 100000000\n", "x").unwrap();
        assert_eq!(
            (c.core_budget, c.link_capacity),
            (Some(0.5), Some(100_000_000))
        );
        assert!(c.streams.is_empty() && c.sched.is_none() && c.control.is_none());
    }

    #[test]
    fn sched_kind_parses_and_prints() {
        for k in [SchedKind::Edf, SchedKind::Dm, SchedKind::Naive] {
            assert_eq!(k.to_string().parse::<SchedKind>(), Ok(k));
        }
        assert_eq!("EDF".parse::<SchedKind>(), Ok(SchedKind::Edf));
        assert!("rm"
            .parse::<SchedKind>()
            .unwrap_err()
            .contains("edf, dm or naive"));
    }

    #[test]
    fn an_unknown_key_names_its_line_stream_and_the_known_keys() {
        let e = err("[[stream]]\nname = \"cam1\"\ndestination = \"rtp://h:1\"\nperod = \"15ms\"\n");
        assert_eq!(
            (e.kind, e.line, e.column),
            (ConfigErrorKind::Parse, Some(4), Some(1))
        );
        let s = e.to_string();
        assert!(s.starts_with("config.toml line 4, column 1: unknown key 'perod' in [[stream]] 'cam1'; known keys: name, source"), "{s}");
        let e = err("sched = \"edf\"\nbogus = 1\n");
        assert_eq!(e.line, Some(2));
        assert!(
            e.message.contains("unknown key 'bogus' at the top level"),
            "{e}"
        );
        assert!(
            e.message
                .contains("rtsp_max_sessions_per_address, [rtsp_auth], [[stream]]"),
            "{e}"
        );
        // A key with "stream" in its name is not a table (it read "max_[[stream]]_rate").
        assert!(e.message.contains(", max_stream_rate, "), "{e}");
        // Within [rtsp_auth] and its users, the table is named, and so are its own tables.
        let e = err("[rtsp_auth]
realm = \"x\"
perod = 1
");
        assert_eq!(
            e.message,
            "unknown key 'perod' in [rtsp_auth]; known keys: realm, public, [[rtsp_auth.user]]"
        );
        let e = err("[rtsp_auth]
[[rtsp_auth.user]]
name = \"alice\"
perod = 1
");
        assert_eq!(
            e.message,
            "unknown key 'perod' in [[rtsp_auth.user]] 'alice'; known keys: name, md5, sha256, mounts"
        );
    }

    #[test]
    fn syntax_type_and_missing_key_errors_are_located() {
        let e = err("sched = \"edf\n");
        assert_eq!((e.kind, e.line), (ConfigErrorKind::Parse, Some(1)));
        let e = err("sched = \"rm\"\n");
        assert!(e.message.contains("edf"), "{e}");
        let e = err("rt_cores = 0\n");
        assert!(e.message.contains("1 to 1024"), "{e}");
        let e = err("core_budget = \"120%\"\n");
        assert!(e.message.contains("95%"), "{e}");
        let e = err("control = \"localhost\"\n");
        assert!(e.message.contains("127.0.0.1:8089"), "{e}");
        let e = err("link_capacity = \"fast\"\n");
        assert!(e.message.contains("1gbit"), "{e}");
        let e = err("[[stream]]\nname = \"a\"\ndestination = \"rtp://h:1\"\nperiod = \"15\"\n");
        assert_eq!(e.line, Some(4));
        assert!(
            e.message.contains("[[stream]] 'a'") && e.message.contains("15ms"),
            "{e}"
        );
        let e = err("[[stream]]\nname = \"a\"\ndestination = \"rtp://h:1\"\n[[stream]]\nsource = \"test\"\n");
        assert_eq!(e.line, Some(4));
        assert!(
            e.message
                .contains("[[stream]] #2: the key 'name' is required"),
            "{e}"
        );
    }

    #[test]
    fn streams_are_validated_and_names_unique() {
        let e = err("[[stream]]\nname = \"a b\"\ndestination = \"rtp://h:1\"\n");
        assert_eq!((e.kind, e.line), (ConfigErrorKind::Invalid, Some(1)));
        assert!(e.message.contains("not usable"), "{e}");
        let one = "[[stream]]\nname = \"cam\"\ndestination = \"rtp://h:1\"\n";
        let e = err(&format!("{one}\n{one}"));
        assert_eq!((e.kind, e.line), (ConfigErrorKind::Invalid, Some(5)));
        assert!(
            e.message.contains("named 'cam'") && e.message.contains("unique"),
            "{e}"
        );
    }

    #[test]
    fn size_limits_are_enforced() {
        let one = |i: usize| format!("[[stream]]\nname=\"s{i}\"\ndestination=\"rtp://h:1\"\n");
        let many: String = (0..=MAX_STREAMS).map(one).collect();
        assert!(many.len() as u64 <= MAX_CONFIG_BYTES);
        assert_eq!(err(&many).kind, ConfigErrorKind::TooLarge);
        let huge = format!("# {}\n", "x".repeat(MAX_CONFIG_BYTES as usize));
        assert_eq!(err(&huge).kind, ConfigErrorKind::TooLarge);
    }

    #[test]
    fn files_are_read_with_clear_errors() {
        let dir = std::env::temp_dir().join(format!("metronome-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("serve.toml");
        std::fs::write(&path, FULL).unwrap();
        assert_eq!(load(&path).unwrap().streams.len(), 2);
        std::fs::write(&path, "rt_cores = 1\nx = 2\n").unwrap();
        let e = load(&path).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("{} line 2", path.display())),
            "{e}"
        );
        std::fs::write(&path, vec![b'#'; MAX_CONFIG_BYTES as usize + 10]).unwrap();
        assert_eq!(load(&path).unwrap_err().kind, ConfigErrorKind::TooLarge);
        std::fs::remove_dir_all(&dir).unwrap();
        let e = load(&dir.join("missing.toml")).unwrap_err();
        assert_eq!(e.kind, ConfigErrorKind::Read);
        assert!(
            e.to_string()
                .contains("missing.toml: cannot read the config file"),
            "{e}"
        );
        assert!(e.message.contains("check the path"), "{e}");
    }
}
