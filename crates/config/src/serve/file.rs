//! The config file as TOML gives it (`FileConfig`), each value read in the units people write
//! ("1gbit", "150%", "5us") and checked, with an error that names the key.

use super::{parse_late, CoreRt, LatePolicy, OverloadPolicy, RtspLimits, SchedKind};
use super::{ServeConfig, WaitPolicy};
use crate::prefix::IpPrefix;
use crate::rtsp_auth::{FileRtspAuth, RtspAuthSpec};
use crate::stream::{parse_bitrate, parse_cpus, parse_share, StreamSpec};
use serde::{Deserialize, Deserializer};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    #[serde(default)]
    sched: Option<SchedKind>,
    #[serde(default, deserialize_with = "de_rt_cores")]
    rt_cores: Option<usize>,
    #[serde(default, deserialize_with = "de_parsed")]
    rt: Option<CoreRt>,
    #[serde(default, deserialize_with = "de_parsed")]
    wait: Option<WaitPolicy>,
    #[serde(default, deserialize_with = "de_cpu")]
    cpu: Option<usize>,
    #[serde(default, deserialize_with = "de_late")]
    late: Option<LatePolicy>,
    #[serde(default)]
    seed: Option<u64>,
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
    pub(super) rtsp_tls_cert: Option<PathBuf>,
    #[serde(default)]
    pub(super) rtsp_tls_key: Option<PathBuf>,
    #[serde(default, deserialize_with = "de_encode_cost")]
    encode_cost: Option<f64>,
    #[serde(default, deserialize_with = "crate::stream::opt_duration")]
    send_cost: Option<Duration>,
    #[serde(default, deserialize_with = "de_overload")]
    overload: Option<OverloadPolicy>,
    #[serde(default)]
    sdp_dir: Option<PathBuf>,
    #[serde(default)]
    rtsp_encoder_per_session: Option<bool>,
    #[serde(default, deserialize_with = "crate::stream::opt_duration")]
    rtsp_session_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "crate::stream::opt_duration")]
    rtsp_idle_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "crate::stream::opt_duration")]
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
    pub(super) rtsp_auth: Option<Spanned<FileRtspAuth>>,
    #[serde(default)]
    pub(super) stream: Vec<Spanned<StreamSpec>>,
}

impl FileConfig {
    /// The checked config: these settings, with the users and streams already checked.
    pub(super) fn into_config(
        self,
        rtsp_auth: Option<RtspAuthSpec>,
        streams: Vec<StreamSpec>,
    ) -> ServeConfig {
        ServeConfig {
            sched: self.sched,
            rt_cores: self.rt_cores,
            rt: self.rt,
            wait: self.wait,
            cpu: self.cpu,
            late: self.late,
            seed: self.seed,
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
    de_parsed(d)
}

/// A value written as its name (`rt = "fifo"`), read by its `FromStr`, whose error says what
/// the names are.
fn de_parsed<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: std::str::FromStr<Err = String>,
{
    let s = String::deserialize(d)?;
    s.parse().map(Some).map_err(serde::de::Error::custom)
}

fn de_late<'de, D: Deserializer<'de>>(d: D) -> Result<Option<LatePolicy>, D::Error> {
    let s = String::deserialize(d)?;
    parse_late(&s).map(Some).map_err(serde::de::Error::custom)
}

fn de_cpu<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let n = i64::deserialize(d)?;
    match usize::try_from(n) {
        Ok(n @ 0..=4095) => Ok(Some(n)),
        _ => Err(serde::de::Error::custom(format!(
            "cpu = {n} is not a CPU number: use 0 to 4095 (see nproc)"
        ))),
    }
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
