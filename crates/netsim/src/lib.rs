//! Link models and a discrete-event queue, in virtual time.
//!
//! Everything here is sans-IO (DESIGN.md, "one engine, two clocks"): nothing reads a clock, sleeps
//! or opens a socket, and all randomness comes from a seed the caller passes in. The simulator
//! drives a [`Link`] with virtual [`Timestamp`](metronome_time::Timestamp)s; the link emulator
//! drives the same [`Link`] with real time and real sockets.
//!
//! - [`config`]: [`LinkConfig`] and [`LossModel`], plain data a scenario file maps onto.
//! - [`link`]: [`Link`], the impairment pipeline (loss, drop-tail queue, serialization, delay,
//!   jitter, reordering, duplication) and its [`LinkStats`].
//! - [`loss`]: the per-packet loss processes (Bernoulli, Gilbert-Elliott).
//! - [`schedule`]: links that change over time (steps, square waves), applied by the link.
//! - [`delivery`]: Mahimahi packet-delivery traces as a link's capacity.
//! - [`event`]: [`EventQueue`], a min-heap on time whose ties pop in insertion order.
//! - [`pair`]: one stream in virtual time: the unchanged sender and receiver sessions over a
//!   forward and a back link, with stalls of the sender, replayable by seed ([`run_pair`]).
//!
//! A driver loop looks like this:
//!
//! ```
//! use metronome_netsim::{Link, LinkConfig};
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
pub mod pair;
pub mod schedule;
pub mod sim;

pub use config::{ConfigError, JitterModel, LinkConfig, LossModel};
pub use delivery::{DeliveryTrace, TraceError};
pub use event::EventQueue;
pub use link::{Link, LinkStats, SendOutcome};
pub use pair::{
    run_pair, CbrTs, PairConfig, PairOutcome, RtpSource, SourcePacket, Trace, TraceRow,
};
pub use schedule::{LinkSchedule, ScheduleError};
