//! The RTSP server's driver: TCP connections, and the media side of every session.
//!
//! The protocol itself (framing, methods, session states, ids and timeouts) is the sans-IO
//! `metronome_session::rtsp::RtspServer`. This module gives it sockets and a clock, and
//! implements its `Backend` on a [`StreamServer`](crate::streams::StreamServer): PLAY starts one
//! admitted stream per unicast session (so admission control judges every client, and a refusal
//! is 453 Not Enough Bandwidth), and one shared stream per mount for its multicast clients.
//!
//! - `mounts`: what can be played (one mount per configured stream) and its SDP;
//! - `backend`: SETUP/PLAY/PAUSE/TEARDOWN on the media side: port pairs, interleaved channels,
//!   multicast users;
//! - `event_loop`: one thread for every connection (readiness I/O through mio): accepting
//!   under the connection limits, framing, requests, interleaved RTCP in, writing each
//!   connection's [`ConnOut`](crate::interleaved::ConnOut), deadlines and the session timer;
//! - `service`: starting and stopping the server, metrics;
//! - `state`: what its threads share: the configuration, the protocol and media state under one
//!   lock, the counters;
//! - `shared`: the live sources a mount's sessions share (one encoder for every viewer);
//! - `tls`: RTSPS, each connection's bytes through rustls when the server has a certificate.

mod backend;
mod event_loop;
mod mounts;
mod service;
mod shared;
mod state;
mod tls;

pub use mounts::{
    sdp_for_destination, Mount, MountError, Mounts, RawMount, RawOpener, SharedRawSource,
    MAX_MOUNT_NAME,
};
pub use service::{RtspService, RtspServiceConfig, TlsFiles};

/// FNV-1a of a name: stable across runs (unlike the std hasher), for ids derived from names.
fn fnv1a(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What an RTSP client is told when the stream server refuses what its request would start.
fn refusal(e: crate::streams::control::ControlError) -> metronome_session::rtsp::Refusal {
    use crate::streams::control::ControlError;
    use metronome_session::rtsp::Refusal;
    match e {
        ControlError::Refused(why) => Refusal::NotEnoughBandwidth(why),
        ControlError::Invalid(why) | ControlError::Internal(why) => Refusal::Internal(why),
        ControlError::Exists(why) | ControlError::NotFound(why) => Refusal::Internal(why),
    }
}
