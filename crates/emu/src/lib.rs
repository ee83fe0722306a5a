//! The emulator: the lab's link models ([`metronome_netsim::Link`], the same code the simulator
//! runs in virtual time) between real sockets, in real time.
//!
//! - [`relay`]: UDP relay mode, which needs no privileges: datagrams sent to the relay's port
//!   leave it, towards a destination, when the link model delivers them.
//!
//! The link model never reads a clock: the relay hands it each datagram with the kernel's
//! receive timestamp, so the model sees the true arrival times however late the relay reads
//! its socket, and sends each one when the model says it arrives.

pub mod relay;
