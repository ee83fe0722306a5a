//! The network half of the simulator: a [`Topology`]'s links as models in virtual time, the
//! event queue, and the packet trace.
//!
//! A node forwards what is not for it: unicast along the topology's shortest path in hops
//! (ties go to the link added first), multicast along its tree (the union of the shortest paths
//! from the source to each member: a source-specific tree, as PIM-SSM builds); routes and trees
//! are the topology's, as the emulator's are. Packets for the node itself wait in the inbox
//! until the simulator hands them to the flow's endpoint there.

use super::packet::{Dst, FlowId, Packet, TreeId};
use super::trace::{Capture, DropReason, PacketEvent, PacketTrace, TraceLevel, TraceRow};
use metronome_link::topology::{LinkId, LinkPlan, McastTree, NodeId, Topology};
use metronome_link::{EventQueue, Link, LinkStats, SendOutcome};
use metronome_time::Timestamp;
use std::collections::{HashMap, VecDeque};

/// Something the simulator must do at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A link's next packet arrives at its far end.
    Link(LinkId),
    /// A flow's endpoint asked to be woken.
    Wake(FlowId, u32),
}

struct SimLink {
    link: Link<Packet>,
    /// The time of the link's pending event (`Timestamp::MAX` if none).
    scheduled: Timestamp,
}

struct Tree {
    src: NodeId,
    /// Per node: members, and the links a packet of the tree is copied onto.
    tree: McastTree,
}

/// Counters of the network as a whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetCounters {
    /// Events the loop handled.
    pub events: u64,
    /// Packets applications sent (a multicast packet once).
    pub sent: u64,
    /// Packets handed to applications (every copy).
    pub delivered: u64,
    /// Packets dropped for want of a route.
    pub no_route: u64,
    /// Packets that reached a node where their flow has no endpoint.
    pub stray: u64,
    /// A group's packets that reached a branch pruned while they were on their way.
    pub pruned: u64,
}

/// The simulated network (see the module docs): the topology's links as models, routes and
/// multicast trees, the flows' endpoints per node, the event queue and the trace. Flows reach
/// it through [`Flow`](super::flows::Flow)'s callbacks.
pub struct Net {
    topology: Topology,
    /// Per link of the topology, its model in this run.
    links: Vec<SimLink>,
    /// Next-hop link toward a destination, per node, computed when first needed.
    routes: HashMap<NodeId, Vec<Option<LinkId>>>,
    trees: Vec<Tree>,
    /// Per flow, per node: the flow's endpoint there (`u32::MAX`: none).
    endpoints: Vec<Vec<u32>>,
    pub(crate) events: EventQueue<Event>,
    pub(crate) inbox: VecDeque<(NodeId, Packet)>,
    trace_level: TraceLevel,
    pub(crate) trace: PacketTrace,
    next_packet: u64,
    pub(crate) counters: NetCounters,
}

impl Net {
    /// The network of `topology`, each link's model built from its plan and seed.
    pub(crate) fn new(topology: Topology, trace_level: TraceLevel) -> Self {
        let links = (0..topology.link_count() as u32)
            .map(|i| SimLink {
                link: topology.build_link(LinkId(i)),
                scheduled: Timestamp::MAX,
            })
            .collect();
        Net {
            topology,
            links,
            routes: HashMap::new(),
            trees: Vec::new(),
            endpoints: Vec::new(),
            events: EventQueue::new(),
            inbox: VecDeque::new(),
            trace_level,
            trace: PacketTrace::default(),
            next_packet: 0,
            counters: NetCounters::default(),
        }
    }

    /// Nodes, links, routes and trees: what the network is built from.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Adds a node called `name` (for summaries); routes are recomputed when next needed.
    pub fn add_node(&mut self, name: impl Into<String>) -> NodeId {
        let id = self.topology.add_node(name);
        for e in &mut self.endpoints {
            e.push(u32::MAX);
        }
        self.routes.clear();
        id
    }

    /// One direction of a link from `from` to `to`, seeded from the run's seed and its index.
    pub fn add_link(&mut self, from: NodeId, to: NodeId, plan: LinkPlan) -> LinkId {
        let id = self.topology.add_link(from, to, plan);
        self.links.push(SimLink {
            link: self.topology.build_link(id),
            scheduled: Timestamp::MAX,
        });
        self.routes.clear();
        id
    }

    /// What the network has done so far.
    pub fn counters(&self) -> NetCounters {
        self.counters
    }

    /// What link `l` has carried, queued and dropped so far. Panics if `l` is not a link of
    /// this network.
    pub fn link_stats(&self, l: LinkId) -> &LinkStats {
        self.links[l.0 as usize].link.stats()
    }

    /// Packets the link has accepted and not yet delivered.
    pub fn link_in_flight(&self, l: LinkId) -> usize {
        self.links[l.0 as usize].link.in_flight()
    }

    /// Registers flow `flow`'s endpoint `ep` at `node`: packets of the flow that reach the node
    /// go to it.
    pub fn listen(&mut self, flow: FlowId, node: NodeId, ep: u32) {
        let n = self.topology.node_count();
        let f = flow.0 as usize;
        if self.endpoints.len() <= f {
            self.endpoints.resize_with(f + 1, || vec![u32::MAX; n]);
        }
        self.endpoints[f][node.0 as usize] = ep;
    }

    pub(crate) fn endpoint(&self, flow: FlowId, node: NodeId) -> Option<u32> {
        let ep = *self.endpoints.get(flow.0 as usize)?.get(node.0 as usize)?;
        (ep != u32::MAX).then_some(ep)
    }

    /// A multicast tree from `src` to `members`: the union of the shortest paths.
    pub fn add_tree(&mut self, src: NodeId, members: &[NodeId]) -> TreeId {
        let tree = self.topology.tree(src, members);
        self.trees.push(Tree { src, tree });
        TreeId(self.trees.len() as u32 - 1)
    }

    /// Tree `t`'s members become `members` (receivers joined or left): the branches no member
    /// needs are pruned, and new members' paths grafted, at once (PIM's joins and prunes, in no
    /// time). A packet already past a pruned branch's router is not delivered.
    pub fn set_tree_members(&mut self, t: TreeId, members: &[NodeId]) {
        let Some(src) = self.trees.get(t.0 as usize).map(|tr| tr.src) else {
            return;
        };
        self.trees[t.0 as usize].tree = self.topology.tree(src, members);
    }

    /// Per node, the first link on a shortest path to `dst` (kept until the topology changes).
    fn routes_to(&mut self, dst: NodeId) -> &[Option<LinkId>] {
        let topology = &self.topology;
        self.routes
            .entry(dst)
            .or_insert_with(|| topology.routes_to(dst))
    }

    /// The links a unicast packet from `from` to `to` crosses, in order (`None`: no route).
    pub fn path(&mut self, from: NodeId, to: NodeId) -> Option<Vec<LinkId>> {
        self.routes_to(to);
        self.topology.path_by(&self.routes[&to], from, to)
    }

    /// Asks for flow `flow`'s endpoint `ep` to be woken at `at`.
    pub fn wake(&mut self, at: Timestamp, flow: FlowId, ep: u32) {
        self.events.push(at, Event::Wake(flow, ep));
    }

    /// A new packet id, for a packet about to be sent.
    pub fn packet_id(&mut self) -> u64 {
        self.next_packet += 1;
        self.next_packet - 1
    }

    /// An application at `from` sends `pkt` at `now`.
    pub fn send(&mut self, now: Timestamp, from: NodeId, pkt: Packet) {
        self.counters.sent += 1;
        self.record(now, PacketEvent::Sent, from, &pkt);
        self.forward(now, from, pkt);
    }

    /// `pkt` is at node `at`: deliver it here, pass it on, or both (a multicast member that
    /// is also a branch point).
    fn forward(&mut self, now: Timestamp, at: NodeId, pkt: Packet) {
        match pkt.dst {
            Dst::Node(dst) if dst == at => self.inbox.push_back((at, pkt)),
            Dst::Node(dst) => match self.routes_to(dst)[at.0 as usize] {
                Some(l) => self.enqueue(now, l, pkt),
                None => {
                    self.counters.no_route += 1;
                    let why = DropReason::NoRoute;
                    self.record(now, PacketEvent::Dropped { link: None, why }, at, &pkt);
                }
            },
            Dst::Tree(t) => {
                let Tree { src, tree } = &self.trees[t.0 as usize];
                let n = at.0 as usize;
                let (member, branches) = (tree.member[n] && at != *src, tree.out[n].len());
                let at_src = at == *src;
                for i in 0..branches {
                    let l = self.trees[t.0 as usize].tree.out[n][i];
                    self.enqueue(now, l, pkt.clone());
                }
                if member {
                    self.inbox.push_back((at, pkt));
                } else if branches == 0 && !at_src {
                    // On a branch pruned while it was on its way.
                    self.counters.pruned += 1;
                    let why = DropReason::Pruned;
                    self.record(now, PacketEvent::Dropped { link: None, why }, at, &pkt);
                }
            }
        }
    }

    fn enqueue(&mut self, now: Timestamp, l: LinkId, pkt: Packet) {
        let from = self.topology.link_ends(l).0;
        let sl = &mut self.links[l.0 as usize];
        let queue_delay_ns = sl.link.queue_delay(now).as_nanos() as u64;
        let (id, flow, size) = (pkt.id, pkt.flow, pkt.size);
        let outcome = sl.link.send(now, size as usize, pkt);
        if let Some(t) = sl.link.poll_timeout() {
            if t < sl.scheduled {
                sl.scheduled = t;
                self.events.push(t, Event::Link(l));
            }
        }
        if !self.trace_level.rows() {
            return;
        }
        let event = match outcome {
            SendOutcome::Queued => PacketEvent::Queued {
                link: l,
                queue_delay_ns,
            },
            SendOutcome::Lost => PacketEvent::Dropped {
                link: Some(l),
                why: DropReason::Loss,
            },
            SendOutcome::DroppedQueueFull => PacketEvent::Dropped {
                link: Some(l),
                why: DropReason::QueueFull,
            },
        };
        self.trace.rows.push(TraceRow {
            at: now,
            event,
            node: from,
            flow,
            packet: id,
            size,
        });
    }

    /// The link event at `now`: every packet due comes out at the far end.
    pub(crate) fn link_due(&mut self, now: Timestamp, l: LinkId) {
        let i = l.0 as usize;
        if self.links[i].scheduled > now {
            return; // an earlier event already handled it; a later one is queued
        }
        let to = self.topology.link_ends(l).1;
        while let Some((_, pkt)) = self.links[i].link.poll_deliver(now) {
            self.forward(now, to, pkt);
        }
        let sl = &mut self.links[i];
        sl.scheduled = Timestamp::MAX;
        if let Some(t) = sl.link.poll_timeout() {
            sl.scheduled = t;
            self.events.push(t, Event::Link(l));
        }
    }

    pub(crate) fn record(&mut self, at: Timestamp, event: PacketEvent, node: NodeId, p: &Packet) {
        if self.trace_level.captures() {
            let sent = event == PacketEvent::Sent;
            if sent || event == PacketEvent::Delivered {
                self.trace.captures.push(Capture {
                    at,
                    node,
                    sent,
                    packet: p.clone(),
                });
            }
        }
        if !self.trace_level.rows() {
            return;
        }
        self.trace.rows.push(TraceRow {
            at,
            event,
            node,
            flow: p.flow,
            packet: p.id,
            size: p.size,
        });
    }
}
