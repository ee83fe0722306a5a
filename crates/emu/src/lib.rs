//! The emulator: the lab's link models ([`metronome_link::Link`], the same code the simulator
//! runs in virtual time) between real sockets, in real time.
//!
//! - [`fabric`]: several links in one real-time loop: a datagram crosses its links inside the
//!   emulator and leaves after the last, by route or by destination address (multicast too).
//! - [`relay`]: UDP relay mode, which needs no privileges: one route over one link.
//! - [`netns`]: network-namespace mode (root): hosts in namespaces joined only by the
//!   emulator, through TUN devices, so that unchanged programs and kernel TCP cross the links.
//!
//! The link model never reads a clock: the relay hands it each datagram with the kernel's
//! receive timestamp, so the model sees the true arrival times however late the relay reads
//! its socket, and sends each one when the model says it arrives.

pub mod fabric;
pub mod netns;
pub mod relay;
