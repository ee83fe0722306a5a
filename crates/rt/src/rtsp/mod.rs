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
//! - `conn`: one thread per connection (framing, requests, interleaved RTCP in), and a writer
//!   thread behind a [`ConnOut`](crate::interleaved::ConnOut);
//! - `service`: the listener, connection limits and the session timer.

mod backend;
mod conn;
mod mounts;
mod service;

pub use mounts::{sdp_for_destination, Mount, MountError, Mounts};
pub use service::{RtspService, RtspServiceConfig};
