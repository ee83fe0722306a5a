//! The real-time driver: the only part of Metronome that reads clocks, opens sockets and spawns
//! threads. It runs the sans-IO sessions of `metronome-session` against the real world.
//!
//! Mechanisms:
//! - `clock`: the run's monotonic and wall clocks, and conversion of kernel timestamps.
//! - `thread`: real-time scheduling (SCHED_DEADLINE, SCHED_FIFO, fallback), memory locking,
//!   timer slack, CPU pinning; each says what it got and why.
//! - `wait`: the precise waiter: absolute-time sleep, then a short spin; or busy-poll.
//! - `url`: `rtp://` destination and source URLs.
//! - `udp`: UDP sockets for unicast and multicast, kernel receive timestamps, fan-out sends.
//!
//! Drivers:
//! - `ring`: the pre-allocated packet ring between a producer and the pacing thread.
//! - `run`: when a run ends (stop flag, duration).
//! - `pacing_thread`: the one set-up of every pacing thread (policy, memory, pinning, waiting).
//! - `streams`: the stream server: admission, producers, one pacing thread per real-time core
//!   (`streams::core`), RTCP; every MPEG-TS stream runs on it.
//! - `sender`: one stream on the stream server (`serve URL`, `demo`, `bench pacing`).
//! - `receiver`: kernel-timestamped receive loop around a `ReceiverSession`; trace and capture.
//! - `rtsp`: the RTSP server (connections, and the media side of each session on the stream
//!   server); `interleaved`: the queue in front of a connection that carries media too;
//!   `rtsp_client`: the client `metronome recv rtsp://…` uses.

pub mod clock;
pub mod control;
pub mod entropy;
pub mod host;
pub mod interleaved;
pub mod pacing_thread;
pub mod poll;
pub mod process;
pub mod raw;
pub mod receiver;
pub mod ring;
pub mod rtsp;
pub mod rtsp_client;
pub mod run;
pub mod sender;
pub mod streams;
pub mod sync;
pub mod thread;
pub mod udp;
// Declarations (URLs, stream specs, the TOML config) are plain data in `metronome-spec`.
pub use metronome_spec::url;
pub mod wait;
