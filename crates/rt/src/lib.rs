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
