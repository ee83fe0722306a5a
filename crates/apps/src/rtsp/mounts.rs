//! Mounts: what an RTSP client can play, one per configured stream, and their descriptions.

use crate::streams::server::open::stream_cname;
use crate::streams::{SourceSpec, StreamSpec};
use crate::uncompressed::RawSenderConfig;
use metronome_media::uncompressed::{RawFrame, RawSource, VideoFormat};
use metronome_media::{duration_of, MediaError, TsFileSource};
use metronome_rt::url::RtpUrl;
use metronome_session::repair::rtx_ssrc;
use metronome_session::srtp::SrtpKey;
use metronome_wire::sdp::{Retransmission, SessionDescription, Source};
use metronome_wire::Ssrc;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest mount name: a session's stream is named `MOUNT.SESSION` and stream names stop at 64.
pub const MAX_MOUNT_NAME: usize = 40;

/// One playable stream.
#[derive(Clone, Debug)]
pub struct Mount {
    /// What each session's stream is made from (its destinations are not used for sessions).
    pub spec: StreamSpec,
    /// Files that do not loop: their length, for PLAY ranges. `None`: live.
    pub duration: Option<Duration>,
    /// The group multicast clients are sent to.
    pub multicast: Option<RtpUrl>,
    /// Uncompressed video (RFC 4175): when set, sessions play this, and `spec` gives only the
    /// mount's name.
    pub raw: Option<Arc<RawMount>>,
}

/// Opens a raw source for one session.
pub type RawOpener = dyn Fn() -> Result<Box<dyn RawSource>, MediaError> + Send + Sync;

/// A mount of uncompressed video: every session gets its own [`crate::uncompressed::RawSender`]
/// from a source of its own, admitted and run as a lane of one of the server's pacing cores.
pub struct RawMount {
    pub format: VideoFormat,
    /// How every session is sent: model, packet size, pacing thread. The destination, SSRC,
    /// seed, sequence number and RTCP are each session's.
    pub sender: RawSenderConfig,
    /// A live source (produced at its frame times) rather than a file read ahead.
    pub live: bool,
    pub describe: String,
    pub open: Box<RawOpener>,
}

impl std::fmt::Debug for RawMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawMount")
            .field("format", &self.format)
            .field("model", &self.sender.model)
            .field("source", &self.describe)
            .finish()
    }
}

/// A session's source, kept across PAUSE and PLAY so that a file resumes where it stopped:
/// each play's sender reads through a clone.
#[derive(Clone)]
pub struct SharedRawSource {
    inner: Arc<Mutex<Box<dyn RawSource>>>,
    format: VideoFormat,
}

impl SharedRawSource {
    pub fn new(source: Box<dyn RawSource>) -> SharedRawSource {
        SharedRawSource {
            format: source.format(),
            inner: Arc::new(Mutex::new(source)),
        }
    }
}

impl RawSource for SharedRawSource {
    fn format(&self) -> VideoFormat {
        self.format
    }
    fn next_frame(&mut self, into: &mut RawFrame) -> Result<bool, MediaError> {
        metronome_rt::sync::lock(&self.inner).next_frame(into)
    }
    fn describe(&self) -> String {
        metronome_rt::sync::lock(&self.inner).describe()
    }
    fn self_timed(&self) -> bool {
        metronome_rt::sync::lock(&self.inner).self_timed()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MountError(pub String);

/// Every mount, by name.
#[derive(Clone, Debug, Default)]
pub struct Mounts(BTreeMap<String, Mount>);

impl Mounts {
    /// One mount per stream. Files that do not loop are read once to find their length.
    pub fn from_specs(specs: &[StreamSpec]) -> Result<Mounts, MountError> {
        let mut mounts = BTreeMap::new();
        for spec in specs {
            spec.validate_settings()
                .map_err(|e| MountError(e.to_string()))?;
            if spec.name.len() > MAX_MOUNT_NAME {
                return Err(MountError(format!(
                    "mount name '{}' is longer than {MAX_MOUNT_NAME} characters; pick a shorter name",
                    spec.name
                )));
            }
            let multicast = match &spec.multicast {
                None => None,
                Some(u) => {
                    let url = RtpUrl::parse_destination(u).map_err(|e| {
                        MountError(format!("stream '{}': multicast {u}: {e}", spec.name))
                    })?;
                    if !url.is_multicast() {
                        return Err(MountError(format!(
                            "stream '{}': multicast = \"{u}\" is not a multicast group; use e.g. \
                             rtp://239.255.0.1:5004?ttl=1",
                            spec.name
                        )));
                    }
                    Some(url)
                }
            };
            let duration = match &spec.source {
                SourceSpec::File(path) if !spec.looping => {
                    let mut f = TsFileSource::open(path, false)
                        .map_err(|e| MountError(format!("stream '{}': {e}", spec.name)))?;
                    Some(
                        duration_of(&mut f)
                            .map_err(|e| MountError(format!("stream '{}': {e}", spec.name)))?,
                    )
                }
                _ => None,
            };
            let m = Mount {
                spec: spec.clone(),
                duration,
                multicast,
                raw: None,
            };
            if mounts.insert(spec.name.clone(), m).is_some() {
                return Err(MountError(format!(
                    "two streams are named '{}'; mount names must be unique",
                    spec.name
                )));
            }
        }
        Ok(Mounts(mounts))
    }

    /// Adds a mount of uncompressed video.
    pub fn add_raw(&mut self, name: &str, raw: RawMount) -> Result<(), MountError> {
        let spec = StreamSpec::new(name, Vec::new());
        spec.validate_settings()
            .map_err(|e| MountError(e.to_string()))?;
        if name.len() > MAX_MOUNT_NAME {
            return Err(MountError(format!(
                "mount name '{name}' is longer than {MAX_MOUNT_NAME} characters; pick a shorter name"
            )));
        }
        if self.0.contains_key(name) {
            return Err(MountError(format!(
                "two mounts are named '{name}'; mount names must be unique"
            )));
        }
        let m = Mount {
            spec,
            duration: None,
            multicast: None,
            raw: Some(Arc::new(raw)),
        };
        self.0.insert(name.to_string(), m);
        Ok(())
    }

    /// These mounts, and those of uncompressed video `old` has that these lack (raw mounts
    /// come from the command line, not the config a reload reads).
    pub(super) fn with_raw_of(mut self, old: &Mounts) -> Mounts {
        for (name, m) in &old.0 {
            if m.raw.is_some() && !self.0.contains_key(name) {
                self.0.insert(name.clone(), m.clone());
            }
        }
        self
    }

    pub fn get(&self, name: &str) -> Option<&Mount> {
        self.0.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(|k| k.as_str())
    }

    /// The SDP a DESCRIBE of `name` answers with, for a client that reached us at `local`.
    pub fn sdp(&self, name: &str, local: SocketAddr) -> Option<String> {
        let m = self.0.get(name)?;
        let range = match m.duration {
            Some(d) => format!("npt=0-{:.3}", d.as_secs_f64()),
            None => "npt=0-".to_string(),
        };
        if let Some(raw) = &m.raw {
            let media = crate::uncompressed::sdp_media(&raw.format, raw.sender.model, 0);
            let s = SessionDescription::rtsp(local.ip(), session_id_of(name), name, range, media);
            return Some(s.to_sdp());
        }
        let mut s = SessionDescription::rtsp_mp2t(local.ip(), session_id_of(name), name, range);
        s.media[0].bitrate_kbps = m.spec.bitrate.map(|b| b.div_ceil(1000));
        s.media[0].crypto = crypto_of(&m.spec);
        // No `a=ssrc`: each RTSP session's stream has its own, given in SETUP's answer. A
        // mount's group stream tells its viewers which losses it is repairing (RFC 6642 §5).
        s.media[0].retransmission = retransmission_of(&m.spec).map(|r| Retransmission {
            tllei: m.multicast.is_some(),
            ..r
        });
        Some(s.to_sdp())
    }
}

/// The SDP of a plain RTP session: what a receiver of `dest` opens (`ffplay file.sdp`, VLC,
/// GStreamer's `sdpdemux`, `metronome recv file.sdp`).
pub fn sdp_for_destination(spec: &StreamSpec, dest: &RtpUrl, origin: IpAddr) -> String {
    let ttl = dest.is_multicast().then(|| dest.ttl_byte());
    let mut s = SessionDescription::rtp_mp2t(
        origin,
        session_id_of(&spec.name),
        &spec.name,
        dest.addr,
        ttl,
    );
    s.media[0].bitrate_kbps = spec.bitrate.map(|b| b.div_ceil(1000));
    s.media[0].crypto = crypto_of(spec);
    s.media[0].source = source_of(spec);
    s.media[0].retransmission = retransmission_of(spec).map(|r| Retransmission {
        ssrc: spec.ssrc.map(|m| rtx_ssrc(Ssrc(m))),
        // To a group the server tells its viewers which losses it is repairing.
        tllei: dest.is_multicast(),
        ..r
    });
    s.to_sdp()
}

/// Loss repair: the retransmission payload type and how long the sender keeps a packet for it
/// (its receivers' play-out delay), for a stream with `repair = "rtx"`.
fn retransmission_of(spec: &StreamSpec) -> Option<Retransmission> {
    spec.repair.rtx().then(|| Retransmission {
        payload_type: metronome_session::repair::RTX_PAYLOAD_TYPE,
        rtx_time_ms: u32::try_from(spec.repair_playout_delay().as_millis()).ok(),
        ssrc: None,
        tllei: false,
    })
}

/// The source of a plain RTP session (`a=ssrc`, RFC 5576), where the stream's SSRC is
/// declared: otherwise it is drawn when the stream starts, after the SDP is written.
fn source_of(spec: &StreamSpec) -> Option<Source> {
    let ssrc = Ssrc(spec.ssrc?);
    Some(Source {
        ssrc,
        cname: stream_cname(ssrc, &spec.name),
    })
}

/// SRTP: the `a=crypto` value that makes the media RTP/SAVP with the stream's key (RFC 4568
/// SDES); the key was checked when the stream was declared.
fn crypto_of(spec: &StreamSpec) -> Option<String> {
    spec.srtp_key
        .as_deref()
        .and_then(|k| SrtpKey::from_base64(k).ok())
        .map(|k| k.crypto_attribute())
}

/// A stable origin session id for a name (RFC 8866 §5.2 only asks that it be unique per host).
fn session_id_of(name: &str) -> u64 {
    super::fnv1a(name) >> 1
}
