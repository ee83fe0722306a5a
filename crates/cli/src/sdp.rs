//! `metronome sdp NAME`: the SDP of a declared stream's plain RTP session, for receivers that
//! open SDP files (`ffplay -protocol_whitelist file,udp,rtp NAME.sdp`, VLC, GStreamer's
//! `sdpdemux`, `metronome recv NAME.sdp`). `serve --sdp-dir DIR` writes the same files on start.

use crate::args::parse_stream_arg;
use crate::raw_args::RawStreamArgs;
use metronome_media::uncompressed::VideoFormat;
use metronome_sched::SenderType;
use metronome_wire::sdp::{Connection, SessionDescription};

type BoxError = Box<dyn std::error::Error>;
use clap::Args;
use metronome_apps::rtsp::sdp_for_destination;
use metronome_apps::streams::StreamSpec;
use metronome_config::serve;
use metronome_rt::url::RtpUrl;
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub(crate) struct SdpArgs {
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
    pub raw: RawStreamArgs,
}

pub(crate) fn run(a: SdpArgs) -> Result<(), Box<dyn std::error::Error>> {
    if a.raw.raw {
        return print_sdp(&a);
    }
    let mut specs = match &a.config {
        Some(p) => serve::load(p)?.streams,
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
        Some(path) => write_sdp(path, first)?,
        None => print!("{first}"),
    }
    Ok(())
}

/// Writes `DIR/NAME.sdp` (and `NAME-2.sdp`… for further destinations); returns the paths.
pub(crate) fn write_files(spec: &StreamSpec, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut paths = Vec::new();
    for (i, (_, text)) in sdps_of(spec)?.into_iter().enumerate() {
        let file = match i {
            0 => format!("{}.sdp", spec.name),
            n => format!("{}-{}.sdp", spec.name, n + 1),
        };
        let path = dir.join(file);
        write_sdp(&path, &text)?;
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

/// `metronome sdp --raw rtp://HOST:PORT …`: NAME is the destination.
pub(crate) fn print_sdp(a: &SdpArgs) -> Result<(), BoxError> {
    let dest = RtpUrl::parse_destination(&a.name)
        .map_err(|e| format!("with --raw, give the destination (rtp://HOST:PORT): {e}"))?;
    let st = &a.raw;
    let model = st.pacing.map_or(SenderType::NarrowGapped, SenderType::from);
    let text = raw_sdp(&st.format()?, model, &dest);
    match &a.output {
        Some(p) => write_sdp(p, &text)?,
        None => print!("{text}"),
    }
    Ok(())
}

/// An SDP file (`--output`, `--sdp-dir`): a new or regular file is written whole or not at
/// all (a player watching it never reads half); anything else (`/dev/stdout`, a pipe, a
/// symbolic link) is written in place, never replaced.
///
/// An SDP that carries an SRTP key (`a=crypto`, RFC 4568) is as secret as the key: its file
/// is its owner's alone (mode 0600), as the control API's token file is; so is the regular
/// file a symbolic link leads to.
fn write_sdp(p: &Path, text: &str) -> Result<(), String> {
    let secret = text.contains("\na=crypto:");
    let replaceable = std::fs::symlink_metadata(p).map_or(true, |m| m.is_file());
    match (replaceable, secret) {
        (true, true) => metronome_lab::results::write_atomically_private(p, text.as_bytes()),
        (true, false) => metronome_lab::results::write_atomically(p, text.as_bytes()),
        (false, _) => {
            let failed = |e: std::io::Error| format!("cannot write {}: {e}", p.display());
            std::fs::write(p, text).map_err(failed)?;
            if secret && std::fs::metadata(p).is_ok_and(|m| m.is_file()) {
                use std::os::unix::fs::PermissionsExt as _;
                let owner_only = std::fs::Permissions::from_mode(0o600);
                std::fs::set_permissions(p, owner_only).map_err(failed)?;
            }
            Ok(())
        }
    }
}

/// The SDP of a raw stream to `dest`: `a=rtpmap:96 raw/90000` and the RFC 4175 fmtp, with the
/// ST 2110-21 sender type (`TP=`) when the model is one.
pub(crate) fn raw_sdp(format: &VideoFormat, model: SenderType, dest: &RtpUrl) -> String {
    let media = metronome_apps::uncompressed::sdp_media(format, model, dest.addr.port());
    let mut s = SessionDescription::new(origin_for(dest), 1, "metronome raw video");
    s.connection = Some(Connection::new(
        dest.addr.ip(),
        dest.is_multicast().then(|| dest.ttl_byte()),
    ));
    s.tool = Some(metronome_wire::sdp::TOOL.to_string());
    s.media.push(media);
    s.to_sdp()
}
