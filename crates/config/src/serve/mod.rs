//! The `serve` config file: optional server settings and any number of `[[stream]]` tables.
//!
//! ```toml
//! sched = "edf"                 # edf | dm | naive
//! rt_cores = 1
//! rt = "auto"                   # auto | fifo | deadline | off: the pacing threads' policy
//! wait = "auto"                 # auto | sleep-spin | busy-poll: how they wait for a packet
//! cpu = 1                       # pin the pacing thread (core i's to cpu + i)
//! late = "catch-up"             # catch-up[=F] | drop-late[=DURATION], after a stall
//! seed = 7                      # SSRCs, sequence numbers and RTCP timing, reproducible
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

mod error;
mod file;
mod pacing;
#[cfg(test)]
mod tests;

use error::explain;
pub use error::{ConfigError, ConfigErrorKind};
use file::FileConfig;

use crate::prefix::IpPrefix;
use crate::rtsp_auth::RtspAuthSpec;
use crate::stream::StreamSpec;
pub use metronome_sched::{LatePolicy, OverloadPolicy, WaitPolicy};
pub use pacing::{parse_late, CoreRt};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

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
    /// `rt`: how the pacing threads run (`"auto"`, `"fifo"`, `"deadline"`, `"off"`).
    pub rt: Option<CoreRt>,
    /// `wait`: how a pacing thread waits between packets (`"auto"`, `"sleep-spin"`,
    /// `"busy-poll"`).
    pub wait: Option<WaitPolicy>,
    /// `cpu`: the CPU the (first) pacing thread is pinned to; core `i`'s to `cpu + i`.
    pub cpu: Option<usize>,
    /// `late`: what the streams do with packets later than the stall threshold
    /// (`"catch-up"`, `"catch-up=3"`, `"drop-late"`, `"drop-late=20ms"`).
    pub late: Option<LatePolicy>,
    /// `seed`: the seed of the streams' SSRCs, first sequence numbers and RTCP timing.
    pub seed: Option<u64>,
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
    let mut raw: FileConfig = toml::from_str(text).map_err(|e| {
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
