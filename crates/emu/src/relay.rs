//! UDP relay mode: one direction of one emulated link between two real sockets, needing no
//! privileges. A [`Fabric`] of one route over one link.
//!
//! ```text
//! sender ──UDP──► relay (listen) ──[Link model: rate, queue, delay, jitter, loss]──► destination
//! ```

use crate::fabric::{Fabric, FabricStats, Route};
use metronome_link::{Link, LinkConfig};
use metronome_rt::clock::Clock;
use metronome_rt::udp::UdpError;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

pub use crate::fabric::Input;

/// Where the relay listens, where it sends, and the link between.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// Where it receives the datagrams it relays.
    pub listen: SocketAddr,
    /// Where it sends them after the link.
    pub forward: SocketAddr,
    /// The link between: rate, delay, loss, queue.
    pub link: LinkConfig,
    /// The seed of the link's loss (the same seed loses the same datagrams).
    pub seed: u64,
    /// Datagrams held at most; beyond it, dropped and counted.
    pub max_in_flight: usize,
    /// Keep every datagram's arrival: the model's input, to replay it in virtual time.
    pub record_inputs: bool,
}

impl RelayConfig {
    /// A relay from `listen` to `forward` over `link`, seed 1, holding at most 100,000
    /// datagrams, recording nothing.
    pub fn new(listen: SocketAddr, forward: SocketAddr, link: LinkConfig) -> Self {
        RelayConfig {
            listen,
            forward,
            link,
            seed: 1,
            max_in_flight: 100_000,
            record_inputs: false,
        }
    }
}

/// What the relay did.
#[derive(Clone, Debug, Default)]
pub struct RelayStats {
    /// Datagrams received.
    pub received: u64,
    /// Datagrams sent on.
    pub forwarded: u64,
    /// Dropped by the model's loss.
    pub lost: u64,
    /// Dropped by the model's queue (or netem's limit).
    pub dropped_queue: u64,
    /// Dropped because the relay held `max_in_flight` datagrams.
    pub overflow: u64,
    /// Arrived longer than the largest UDP payload (not forwarded).
    pub truncated: u64,
    /// Dropped by the input socket for lack of buffer (SO_RXQ_OVFL).
    pub socket_drops: u64,
    /// Sends that failed (counted, the datagram dropped).
    pub send_errors: u64,
    /// How late each datagram left against the model's delivery time, ns.
    pub lateness: metronome_time::Distribution,
    /// Every datagram as it arrived (only with `record_inputs`).
    pub inputs: Vec<Input>,
}

impl From<FabricStats> for RelayStats {
    fn from(f: FabricStats) -> Self {
        let link = f.links.first().cloned().unwrap_or_default();
        RelayStats {
            received: f.received,
            forwarded: f.delivered,
            lost: link.lost,
            dropped_queue: link.dropped_queue,
            overflow: f.overflow,
            truncated: f.truncated,
            socket_drops: f.socket_drops,
            send_errors: f.send_errors,
            lateness: f.lateness,
            inputs: f.inputs,
        }
    }
}

/// A relay, bound and ready to [`run`](Relay::run).
pub struct Relay {
    fabric: Fabric,
}

impl Relay {
    /// Binds the relay's socket and builds its link, ready to run.
    pub fn open(cfg: RelayConfig) -> Result<Relay, UdpError> {
        let route = Route::udp(cfg.listen, vec![0], cfg.forward);
        let link = Link::new(cfg.link, cfg.seed);
        let mut fabric = Fabric::new(vec![link], vec![route], Clock::new())?;
        fabric.record_inputs(cfg.record_inputs);
        fabric.set_max_in_flight(cfg.max_in_flight);
        Ok(Relay { fabric })
    }

    /// Where senders send to.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.fabric.input_addr(0)
    }

    /// Relays until `stop` is set or `duration` has passed, then lets what is in flight
    /// arrive (for at most one more second), and says what it did.
    pub fn run(self, stop: &AtomicBool, duration: Option<Duration>) -> RelayStats {
        self.fabric.run(stop, duration).into()
    }
}
