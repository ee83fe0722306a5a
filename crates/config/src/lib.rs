//! What users declare, parsed and validated with errors a person can act on: destinations
//! (`rtp://HOST:PORT`, multicast with `ttl` and `iface`), streams (`--stream` and `[[stream]]`:
//! source, rate, period, deadline, ring), the `serve` TOML config, and address prefixes (the
//! control API's destination allow-list).
//!
//! Plain data: the real-time driver (`metronome-rt`) opens sockets and sources from it, and the
//! lab will build scenarios from the same declarations. Nothing here opens a socket or reads a
//! clock; `serve::load` reads the one file it is given, bounded in size.

pub mod prefix;
pub mod repair;
pub mod rtsp_auth;
pub mod scenario;
pub mod serve;
pub mod stream;
pub mod url;
