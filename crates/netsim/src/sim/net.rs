//! The network half of the simulator: nodes, directed links, unicast routes, multicast trees,
//! the event queue, and the packet trace.
//!
//! A node forwards what is not for it: unicast along the shortest path in hops (ties go to the
//! link added first), multicast along its tree (the union of the shortest paths from the source
//! to each member: a source-specific tree, as PIM-SSM builds). Packets for the node itself wait
//! in the inbox until the simulator hands them to the flow's endpoint there.

use super::packet::{Dst, FlowId, LinkId, NodeId, Packet, TreeId};
use super::trace::{DropReason, PacketEvent, PacketTrace, TraceLevel, TraceRow};
use crate::{EventQueue, Link, LinkConfig, LinkSchedule, LinkStats, SendOutcome};
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

struct Node {
    name: String,
    out: Vec<LinkId>,
}

struct SimLink {
    from: NodeId,
    to: NodeId,
    link: Link<Packet>,
    /// The time of the link's pending event (`Timestamp::MAX` if none).
    scheduled: Timestamp,
}

struct Tree {
    src: NodeId,
    /// Per node: whether an endpoint of the tree's flow listens there.
    member: Vec<bool>,
    /// Per node: the links a packet of the tree is copied onto.
    out: Vec<Vec<LinkId>>,
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

pub struct Net {
    nodes: Vec<Node>,
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
    seed: u64,
}

impl Net {
    pub(crate) fn new(seed: u64, trace_level: TraceLevel) -> Self {
        Net {
            nodes: Vec::new(),
            links: Vec::new(),
            routes: HashMap::new(),
            trees: Vec::new(),
            endpoints: Vec::new(),
            events: EventQueue::new(),
            inbox: VecDeque::new(),
            trace_level,
            trace: PacketTrace::default(),
            next_packet: 0,
            counters: NetCounters::default(),
            seed,
        }
    }

    pub fn add_node(&mut self, name: impl Into<String>) -> NodeId {
        self.nodes.push(Node {
            name: name.into(),
            out: Vec::new(),
        });
        for e in &mut self.endpoints {
            e.push(u32::MAX);
        }
        self.routes.clear();
        NodeId(self.nodes.len() as u32 - 1)
    }

    /// One direction of a link from `from` to `to`, seeded from the run's seed and its index.
    pub fn add_link(&mut self, from: NodeId, to: NodeId, cfg: LinkConfig) -> LinkId {
        let id = LinkId(self.links.len() as u32);
        let seed = derive_seed(self.seed, 1 + id.0 as u64);
        self.links.push(SimLink {
            from,
            to,
            link: Link::new(cfg, seed),
            scheduled: Timestamp::MAX,
        });
        self.nodes[from.0 as usize].out.push(id);
        self.routes.clear();
        id
    }

    /// What the network has done so far.
    pub fn counters(&self) -> NetCounters {
        self.counters
    }

    /// One direction of a link that follows `schedule` (see [`crate::schedule`]).
    pub fn add_link_scheduled(
        &mut self,
        from: NodeId,
        to: NodeId,
        schedule: LinkSchedule,
    ) -> LinkId {
        let id = self.add_link(from, to, LinkConfig::default());
        let seed = derive_seed(self.seed, 1 + id.0 as u64);
        self.links[id.0 as usize].link = Link::with_schedule(schedule, seed);
        id
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn node_name(&self, n: NodeId) -> &str {
        &self.nodes[n.0 as usize].name
    }

    pub fn node_by_name(&self, name: &str) -> Option<NodeId> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| NodeId(i as u32))
    }

    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// The link's two ends, `(from, to)`.
    pub fn link_ends(&self, l: LinkId) -> (NodeId, NodeId) {
        let sl = &self.links[l.0 as usize];
        (sl.from, sl.to)
    }

    pub fn link_stats(&self, l: LinkId) -> &LinkStats {
        self.links[l.0 as usize].link.stats()
    }

    /// Packets the link has accepted and not yet delivered.
    pub fn link_in_flight(&self, l: LinkId) -> usize {
        self.links[l.0 as usize].link.in_flight()
    }

    pub fn link_config(&self, l: LinkId) -> &LinkConfig {
        self.links[l.0 as usize].link.config()
    }

    /// Registers flow `flow`'s endpoint `ep` at `node`: packets of the flow that reach the node
    /// go to it.
    pub fn listen(&mut self, flow: FlowId, node: NodeId, ep: u32) {
        let n = self.nodes.len();
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
        let tree = self.tree(src, members);
        self.trees.push(tree);
        TreeId(self.trees.len() as u32 - 1)
    }

    /// Tree `t`'s members become `members` (receivers joined or left): the branches no member
    /// needs are pruned, and new members' paths grafted, at once (PIM's joins and prunes, in no
    /// time). A packet already past a pruned branch's router is not delivered.
    pub fn set_tree_members(&mut self, t: TreeId, members: &[NodeId]) {
        let Some(src) = self.trees.get(t.0 as usize).map(|tr| tr.src) else {
            return;
        };
        self.trees[t.0 as usize] = self.tree(src, members);
    }

    fn tree(&self, src: NodeId, members: &[NodeId]) -> Tree {
        let n = self.nodes.len();
        let parent = self.parents_from(src);
        let mut member = vec![false; n];
        let mut out: Vec<Vec<LinkId>> = vec![Vec::new(); n];
        let mut on_tree = vec![false; self.links.len()];
        for &m in members {
            member[m.0 as usize] = true;
            let mut at = m;
            while let Some(l) = parent[at.0 as usize] {
                if on_tree[l.0 as usize] {
                    break;
                }
                on_tree[l.0 as usize] = true;
                let from = self.links[l.0 as usize].from;
                out[from.0 as usize].push(l);
                at = from;
            }
        }
        for o in &mut out {
            o.sort(); // copies leave in link order, whatever the members' order
        }
        Tree { src, member, out }
    }

    /// Breadth-first from `src`: the link each node is first reached by.
    fn parents_from(&self, src: NodeId) -> Vec<Option<LinkId>> {
        let mut parent = vec![None; self.nodes.len()];
        let mut seen = vec![false; self.nodes.len()];
        seen[src.0 as usize] = true;
        let mut queue = VecDeque::from([src]);
        while let Some(n) = queue.pop_front() {
            for &l in &self.nodes[n.0 as usize].out {
                let to = self.links[l.0 as usize].to;
                if !seen[to.0 as usize] {
                    seen[to.0 as usize] = true;
                    parent[to.0 as usize] = Some(l);
                    queue.push_back(to);
                }
            }
        }
        parent
    }

    /// Per node, the first link on a shortest path to `dst`: breadth-first from `dst` over the
    /// links reversed.
    fn routes_to(&mut self, dst: NodeId) -> &[Option<LinkId>] {
        if !self.routes.contains_key(&dst) {
            let mut into: Vec<Vec<LinkId>> = vec![Vec::new(); self.nodes.len()];
            for (i, l) in self.links.iter().enumerate() {
                into[l.to.0 as usize].push(LinkId(i as u32));
            }
            let mut next = vec![None; self.nodes.len()];
            let mut seen = vec![false; self.nodes.len()];
            seen[dst.0 as usize] = true;
            let mut queue = VecDeque::from([dst]);
            while let Some(n) = queue.pop_front() {
                for &l in &into[n.0 as usize] {
                    let from = self.links[l.0 as usize].from;
                    if !seen[from.0 as usize] {
                        seen[from.0 as usize] = true;
                        next[from.0 as usize] = Some(l);
                        queue.push_back(from);
                    }
                }
            }
            self.routes.insert(dst, next);
        }
        &self.routes[&dst]
    }

    /// The links a unicast packet from `from` to `to` crosses, in order (`None`: no route).
    pub fn path(&mut self, from: NodeId, to: NodeId) -> Option<Vec<LinkId>> {
        let mut at = from;
        let mut links = Vec::new();
        while at != to {
            let l = self.routes_to(to)[at.0 as usize]?;
            links.push(l);
            at = self.links[l.0 as usize].to;
            if links.len() > self.links.len() {
                return None; // cannot happen with BFS routes; never loop on a bug
            }
        }
        Some(links)
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
                let tree = &self.trees[t.0 as usize];
                let n = at.0 as usize;
                let (member, branches) = (tree.member[n] && at != tree.src, tree.out[n].len());
                let at_src = at == tree.src;
                for i in 0..branches {
                    let l = self.trees[t.0 as usize].out[n][i];
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
        let sl = &mut self.links[l.0 as usize];
        let queue_delay_ns = sl.link.queue_delay(now).as_nanos() as u64;
        let (id, flow, size, from) = (pkt.id, pkt.flow, pkt.size, sl.from);
        let outcome = sl.link.send(now, size as usize, pkt);
        if let Some(t) = sl.link.poll_timeout() {
            if t < sl.scheduled {
                sl.scheduled = t;
                self.events.push(t, Event::Link(l));
            }
        }
        if self.trace_level == TraceLevel::Off {
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
        let to = self.links[i].to;
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
        if self.trace_level == TraceLevel::Off {
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

/// A seed for part `k` of a run seeded with `seed` (SplitMix64's finaliser: nearby inputs give
/// unrelated outputs, so link 1 and link 2 do not draw correlated variates).
pub fn derive_seed(seed: u64, k: u64) -> u64 {
    use metronome_time::mix::{mix64, GOLDEN_GAMMA};
    mix64(seed.wrapping_add(k.wrapping_mul(GOLDEN_GAMMA)))
}
