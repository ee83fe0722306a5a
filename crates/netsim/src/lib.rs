//! The discrete-event simulator, in virtual time.
//!
//! Everything here is sans-IO (DESIGN.md, "one engine, two clocks"): nothing reads a clock, sleeps
//! or opens a socket, and all randomness comes from a seed the caller passes in. The network it
//! runs is `metronome-link`'s: the link model and the topology (routes, multicast trees, per-link
//! seeds) that the emulator drives in real time too.
//!
//! - [`sim`]: the simulator: a topology's links in virtual time, flows at its nodes (UDP, RTP
//!   sessions, TCP), the packet trace.
//! - [`pair`]: one stream in virtual time: the unchanged sender and receiver sessions over a
//!   forward and a back link, with stalls of the sender, replayable by seed ([`run_pair`]).

pub mod pair;
pub mod sim;

pub use pair::{
    run_pair, CbrTs, PairConfig, PairOutcome, RtpSource, SourcePacket, Trace, TraceRow,
};
