//! The applications that run on the real-time driver (`metronome-rt`): what `metronome serve`
//! and `metronome recv` are. The protocol logic they use is sans-IO (`metronome-session`,
//! `metronome-cc`, `metronome-sched`); the clocks, threads, sockets and the pacer are the driver's.
//!
//! - `streams`: the stream server: admission, producers, the streams' lanes on the driver's pacing
//!   cores, RTCP; every MPEG-TS stream runs on it.
//! - `sender`: one stream on the stream server (`serve URL`, `demo`, `bench pacing`).
//! - `rtsp`: the RTSP server (connections, and the media side of each session on the stream
//!   server); `interleaved`: the queue in front of a connection that carries media too.
//! - `control`: the HTTP control API and metrics.
//! - `uncompressed`: uncompressed video (RFC 4175): its lane on the stream server, its receiver.
//! - `sources`: sources that need the driver: V4L2 capture.
//! - `receiver`: kernel-timestamped receive loop around a `ReceiverSession`; trace and capture.
//! - `rtsp_client`: the client `metronome recv rtsp://…` uses.

pub mod control;
pub mod interleaved;
pub mod receiver;
pub mod rtsp;
pub mod rtsp_client;
pub mod sender;
pub mod sources;
pub mod streams;
pub mod uncompressed;
