//! What travels through the simulated network. Nodes and links are the topology's
//! ([`metronome_link::topology`]).

use metronome_link::topology::NodeId;
use metronome_time::Timestamp;
use std::rc::Rc;

/// A flow (one application: a UDP stream, an RTP session, a TCP connection), by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId(pub u32);

/// A multicast distribution tree, by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TreeId(pub u32);

/// Where a packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dst {
    /// One host, reached by unicast routing (shortest path in hops).
    Node(NodeId),
    /// Every member of a multicast tree; routers copy the packet onto each branch.
    Tree(TreeId),
}

/// The bytes a packet carries, shared between the copies a multicast tree makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// A measurement datagram (UDP cross traffic, iperf-style): only its number is needed.
    Probe {
        /// The datagram's number within its flow, from 0 in sending order.
        seq: u64,
    },
    /// An RTP or RTCP datagram, as the sessions wrote it.
    Datagram(Rc<[u8]>),
    /// A SMPTE 2022-1 FEC packet of an RTP flow (on the wire, to the media's port + 2 or + 4).
    Fec(Rc<[u8]>),
    /// An IPv4 packet of a TCP connection, as the TCP stack wrote it.
    Ip(Rc<[u8]>),
}

/// One packet in the network.
#[derive(Clone, Debug)]
pub struct Packet {
    /// Unique per run, in the order packets were sent; copies of a multicast packet share it.
    pub id: u64,
    /// The application it belongs to; the receiving node hands it to that flow's endpoint.
    pub flow: FlowId,
    /// The node whose application sent it.
    pub src: NodeId,
    /// Where it goes: one node, or every member of a multicast tree.
    pub dst: Dst,
    /// Bytes on the wire (IP header included): what links serialize and queue.
    pub size: u32,
    /// When the sending application handed it to the network.
    pub sent_at: Timestamp,
    /// What it carries (shared between multicast copies).
    pub body: Body,
}
