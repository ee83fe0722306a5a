//! The applications of a simulation. Each flow has endpoints at nodes: endpoint 0 sends,
//! endpoints 1.. receive (one per receiving node). The simulator wakes an endpoint when it
//! asked ([`Net::wake`]) and hands it the packets of its flow that reach its node. What a
//! flow reports is plain data shared with the emulator: [`metronome_link::report`].

pub mod rtp;
pub mod tcp;
pub mod udp;

use super::net::Net;
use super::packet::{Dst, FlowId, Packet};
use metronome_link::report::FlowReport;
use metronome_link::topology::NodeId;
use metronome_time::Timestamp;

/// An application in the simulated network.
pub trait Flow {
    /// Registers endpoints and trees; `id` is how the network knows the flow.
    fn bind(&mut self, id: FlowId, net: &mut Net);
    /// Called once, at the start of the run.
    fn start(&mut self, now: Timestamp, net: &mut Net);
    /// The endpoint `ep` asked to be woken at `now`.
    fn on_wake(&mut self, now: Timestamp, ep: u32, net: &mut Net);
    /// A packet of this flow reached endpoint `ep`.
    fn on_packet(&mut self, now: Timestamp, ep: u32, pkt: Packet, net: &mut Net);
    /// Whether the flow has nothing more to send (packets may still be in flight).
    fn done(&self) -> bool;
    /// The flow itself, for a caller that knows its type (`downcast`).
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any>;
    /// What it measured, at the end of the run (`end`: the run's last instant).
    fn report(&mut self, end: Timestamp, net: &Net) -> FlowReport;
}

/// Where a flow's packets go: one node (unicast) or several (a multicast tree).
pub(crate) fn destination(net: &mut Net, id: FlowId, src: NodeId, receivers: &[NodeId]) -> Dst {
    for (i, &r) in receivers.iter().enumerate() {
        net.listen(id, r, 1 + i as u32);
    }
    match receivers {
        [one] => Dst::Node(*one),
        many => Dst::Tree(net.add_tree(src, many)),
    }
}
