//! The network as both of the lab's modes model it: sans-IO links, the topology they form,
//! and what a receiver at the far end measures. The simulator (`metronome-sim`) drives it
//! in virtual time, the emulator (`metronome-emu`) in real time between real sockets; neither
//! mode needs the other to use it.
//!
//! Everything here is sans-IO (DESIGN.md, "one engine, two clocks"): nothing reads a clock,
//! sleeps or opens a socket, and all randomness comes from a seed the caller passes in.
//!
//! - [`config`]: [`LinkConfig`] and [`LossModel`], plain data a scenario file maps onto.
//! - [`link`]: [`Link`], the impairment pipeline (loss, drop-tail queue, serialization, delay,
//!   jitter, reordering, duplication) and its [`LinkStats`].
//! - [`loss`]: the per-packet loss processes (Bernoulli, Gilbert-Elliott).
//! - [`jitter`]: the delay variation draws (uniform, normal, Pareto, as netem's tables).
//! - [`schedule`]: links that change over time (steps, square waves), applied by the link.
//! - [`delivery`]: Mahimahi packet-delivery traces as a link's capacity.
//! - [`event`]: [`EventQueue`], a min-heap on time whose ties pop in insertion order.
//! - [`topology`]: nodes, directed links with their plans and seeds, shortest-path routes
//!   and multicast trees: routing, written once for both modes.
//! - [`meter`]: what a receiving endpoint measures (loss, RFC 3550 jitter, delay, per
//!   interval); [`report`]: what a flow did, as the lab's results hold it.
//! - [`traffic`]: cross traffic's schedule (iperf-like UDP, constant or a square wave).
//!
//! A driver loop looks like this:
//!
//! ```
//! use metronome_link::{Link, LinkConfig};
//! use metronome_time::Timestamp;
//! use std::time::Duration;
//!
//! let cfg = LinkConfig {
//!     rate_bps: Some(8_000_000),
//!     delay: Duration::from_millis(10),
//!     ..LinkConfig::default()
//! };
//! let mut link = Link::new(cfg, 42);
//! link.send(Timestamp::ZERO, 1000, "hello");
//! let at = link.poll_timeout().unwrap(); // 1 ms on the wire + 10 ms of propagation
//! assert_eq!(at, Timestamp::from_millis(11));
//! assert_eq!(link.poll_deliver(at), Some((at, "hello")));
//! ```

pub mod config;
pub mod delivery;
pub mod event;
pub mod jitter;
pub mod link;
pub mod loss;
pub mod meter;
pub mod report;
pub mod schedule;
pub mod topology;
pub mod traffic;

pub use config::{ConfigError, JitterModel, LinkConfig, LossModel};
pub use delivery::{DeliveryTrace, TraceError};
pub use event::EventQueue;
pub use link::{Link, LinkStats, SendOutcome};
pub use schedule::{LinkSchedule, ScheduleError};
