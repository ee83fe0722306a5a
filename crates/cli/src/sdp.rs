//! `metronome sdp NAME`: the SDP of a declared stream's plain RTP session, for receivers that
//! open SDP files (`ffplay -protocol_whitelist file,udp,rtp NAME.sdp`, VLC, GStreamer's
//! `sdpdemux`, `metronome recv NAME.sdp`). `serve --sdp-dir DIR` writes the same files on start.

use crate::multi::parse_stream_arg;
use clap::Args;
use metronome_apps::rtsp::sdp_for_destination;
use metronome_apps::streams::{config, StreamSpec};
use metronome_rt::url::RtpUrl;
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct SdpArgs {
    /// The stream's name, as declared in --config or --stream (with --raw: the destination,
    /// rtp://HOST:PORT)
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The TOML config that declares the stream
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A stream as KEY=VALUE pairs (repeatable), as `serve --stream` takes it
    #[arg(long, value_name = "SPEC")]
    pub stream: Vec<String>,
    /// Write the SDP here instead of printing it
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub raw: crate::raw::RawStreamArgs,
}

pub fn run(a: SdpArgs) -> Result<(), Box<dyn std::error::Error>> {
    if a.raw.raw {
        return crate::raw::print_sdp(&a);
    }
    let mut specs = match &a.config {
        Some(p) => config::load(p)?.streams,
        None => Vec::new(),
    };
    for s in &a.stream {
        specs.push(parse_stream_arg(s)?);
    }
    let Some(spec) = specs.iter().find(|s| s.name == a.name) else {
        let known: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        return Err(if known.is_empty() {
            format!(
                "no stream named '{}': declare it with --config FILE or --stream name={},destination=rtp://HOST:PORT",
                a.name, a.name
            )
        } else {
            format!("no stream named '{}'; declared: {}", a.name, known.join(", "))
        }
        .into());
    };
    let sdps = sdps_of(spec)?;
    let Some((_, first)) = sdps.first() else {
        return Err(format!(
            "stream '{}' has no destination, so it has no plain RTP session to describe; \
             play it over RTSP (serve --rtsp) or give it destination = \"rtp://HOST:PORT\"",
            spec.name
        )
        .into());
    };
    match &a.output {
        Some(path) => std::fs::write(path, first)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?,
        None => print!("{first}"),
    }
    Ok(())
}

/// Writes `DIR/NAME.sdp` (and `NAME-2.sdp`… for further destinations); returns the paths.
pub fn write_files(spec: &StreamSpec, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut paths = Vec::new();
    for (i, (_, text)) in sdps_of(spec)?.into_iter().enumerate() {
        let file = match i {
            0 => format!("{}.sdp", spec.name),
            n => format!("{}-{}.sdp", spec.name, n + 1),
        };
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        paths.push(path);
    }
    Ok(paths)
}

/// One SDP per destination.
fn sdps_of(spec: &StreamSpec) -> Result<Vec<(RtpUrl, String)>, String> {
    spec.destination
        .iter()
        .map(|d| {
            let url =
                RtpUrl::parse_destination(d).map_err(|e| format!("stream '{}': {e}", spec.name))?;
            Ok((url, sdp_for_destination(spec, &url, origin_for(&url))))
        })
        .collect()
}

/// The address this machine sends to `dest` from (the SDP origin), by asking the kernel's
/// routing table; the unspecified address if it has no route.
pub(crate) fn origin_for(dest: &RtpUrl) -> IpAddr {
    if let Some(i) = dest.iface {
        return IpAddr::V4(i);
    }
    let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    UdpSocket::bind((any, 0))
        .and_then(|s| {
            s.connect(dest.addr)?;
            s.local_addr()
        })
        .map(|a| a.ip())
        .unwrap_or(any)
}
