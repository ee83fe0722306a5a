//! The real-time driver, and nothing else: clocks, real-time threads, the pacer, UDP sockets.
//! What runs on it (the stream server, RTSP, the control API, the receivers) is
//! `metronome-apps`; the two are the only crates that read clocks, open sockets and spawn
//! threads. The protocol logic they drive is sans-IO (`metronome-session`, `-cc`, `-sched`).
//!
//! - `clock`: the run's monotonic and wall clocks, thread CPU time, kernel timestamps.
//! - `thread`: real-time scheduling (SCHED_DEADLINE, SCHED_FIFO, fallback), memory locking,
//!   timer slack, CPU pinning; each says what it got and why.
//! - `wait`: the precise waiter: absolute-time sleep, then a short spin; or busy-poll.
//! - `pacing`: the pacer: the pacing thread, one pacing core per real-time core scheduling its
//!   streams' lanes under EDF or DM, and the send cost measured at start-up.
//! - `ring`: the pre-allocated packet ring between a producer and the pacing thread;
//!   `frame_ring`: the same for whole frames of packets (raw video, sent in GSO batches).
//! - `udp`: UDP sockets for unicast and multicast, kernel receive timestamps, GSO fan-out sends.
//! - `poll`: waiting on a few file descriptors; `run`: when a run ends (stop flag, duration).
//! - `host`: how busy the machine is; `process`: child processes with default signals;
//!   `entropy`: seeds and secrets from the kernel; `sync`: a lock that survives a panicked holder.
//! - `url`: `rtp://` destination and source URLs (plain data, from `metronome-config`).

pub mod circulation;
pub mod clock;
pub mod entropy;
pub mod frame_ring;
pub mod host;
pub mod pacing;
pub mod poll;
pub mod ports;
pub mod process;
pub mod ring;
pub mod run;
pub mod sync;
pub mod thread;
pub mod udp;
pub use metronome_config::url;
pub mod wait;
