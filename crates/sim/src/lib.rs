//! The discrete-event simulator, in virtual time.
//!
//! Everything here is sans-IO (DESIGN.md, "one engine, two clocks"): nothing reads a clock, sleeps
//! or opens a socket, and all randomness comes from a seed the caller passes in. The network it
//! runs is `metronome-link`'s: the link model and the topology (routes, multicast trees, per-link
//! seeds) that the emulator drives in real time too.
//!
//! - [`Sim`] (`event_loop.rs`): a topology's links in virtual time and the flows at its nodes,
//!   one event at a time;
//! - [`net`]: the network: a topology's links as [`Link`](metronome_link::Link) models, its
//!   routes and multicast trees, the packet trace;
//! - [`flows`]: the applications: UDP at a constant rate or in a square wave ([`flows::udp`]),
//!   RTP sessions, TCP; each measures with a [`metronome_link::meter::Meter`];
//! - [`trace`]: the per-packet trace and its CSV; [`pcap`]: each host's packets as a capture
//!   file;
//! - [`pair`]: one stream in virtual time: the unchanged sender and receiver sessions over a
//!   forward and a back link, with stalls of the sender, replayable by seed ([`run_pair`]).

mod event_loop;
pub mod flows;
pub mod net;
pub mod packet;
pub mod pair;
pub mod pcap;
pub mod trace;

pub use event_loop::{Sim, SimOutcome};
pub use pair::{
    run_pair, CbrTs, PairConfig, PairOutcome, RtpSource, SourcePacket, Trace, TraceRow,
};
