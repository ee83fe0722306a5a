//! The discrete-event simulator: nodes and links, flows at the nodes, virtual time.
//!
//! One loop pops the earliest event (a link delivering its next packet, or a flow's endpoint
//! asking to be woken), lets it act, then hands the packets that reached their node to the
//! flow's endpoint there. Ties run in the order they were scheduled, and every random draw
//! comes from the run's seed (the [`Topology`] gives each link its own stream), so a run is
//! a function of its configuration and seed: the same inputs give the same trace, byte for byte.

use crate::flows::Flow;
use crate::net::{Event, Net, NetCounters};
use crate::packet::FlowId;
use crate::trace::{PacketEvent, PacketTrace, TraceLevel};
use metronome_link::report::FlowReport;
use metronome_link::topology::{LinkId, LinkPlan, NodeId, Topology};
use metronome_link::LinkConfig;
use metronome_time::Timestamp;

/// A simulation: build the network and flows, then [`run_until`](Sim::run_until).
pub struct Sim {
    net: Net,
    flows: Vec<Box<dyn Flow>>,
    now: Timestamp,
    started: bool,
}

/// What a run leaves behind.
pub struct SimOutcome {
    /// The virtual time the run ended at.
    pub end: Timestamp,
    /// What each flow measured, indexed by [`FlowId`] (the order flows were added).
    pub flows: Vec<FlowReport>,
    /// The network's totals: events, packets sent, delivered and lost for want of a route.
    pub counters: NetCounters,
    /// Every packet event, if the run traced them ([`TraceLevel::Packets`]); else empty.
    pub trace: PacketTrace,
}

impl Sim {
    /// An empty network; `seed` seeds every link and flow.
    pub fn new(seed: u64, trace: TraceLevel) -> Self {
        Sim::with_topology(Topology::new(seed), trace)
    }

    /// The network of `topology` (seeded with its seed), no flows yet.
    pub fn with_topology(topology: Topology, trace: TraceLevel) -> Self {
        Sim {
            net: Net::new(topology, trace),
            flows: Vec::new(),
            now: Timestamp::ZERO,
            started: false,
        }
    }

    /// The network: its topology, counters and links' statistics.
    pub fn net(&self) -> &Net {
        &self.net
    }

    /// The network, to change it between steps (add trees, change members, wake endpoints).
    pub fn net_mut(&mut self) -> &mut Net {
        &mut self.net
    }

    /// Adds a host or router called `name` (the name is for summaries only).
    pub fn add_node(&mut self, name: impl Into<String>) -> NodeId {
        self.net.add_node(name)
    }

    /// A full-duplex link: `ab` from `a` to `b`, `ba` back.
    pub fn add_link(
        &mut self,
        a: NodeId,
        b: NodeId,
        ab: LinkConfig,
        ba: LinkConfig,
    ) -> (LinkId, LinkId) {
        (
            self.net.add_link(a, b, LinkPlan::Fixed(ab)),
            self.net.add_link(b, a, LinkPlan::Fixed(ba)),
        )
    }

    /// Adds an application and lets it register its endpoints ([`Flow::bind`]); it starts at
    /// the first step. Its id is its index in [`SimOutcome::flows`].
    pub fn add_flow(&mut self, mut flow: Box<dyn Flow>) -> FlowId {
        let id = FlowId(self.flows.len() as u32);
        flow.bind(id, &mut self.net);
        self.flows.push(flow);
        id
    }

    /// The virtual time: that of the last event handled, or the `until` a
    /// [`run_until`](Sim::run_until) reached.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Runs until nothing is left to happen or virtual time passes `until`, whichever is first.
    /// May be called again with a later `until` to go on.
    pub fn run_until(&mut self, until: Timestamp) {
        while self.net.events.peek_time().is_some_and(|t| t <= until) || !self.started {
            if !self.step() {
                break;
            }
        }
        self.now = self
            .now
            .max(until.min(self.net.events.peek_time().unwrap_or(until)));
    }

    /// Handles the next event (starting the flows first, on the first call). False when
    /// nothing is left to happen.
    pub fn step(&mut self) -> bool {
        if !self.started {
            self.started = true;
            for f in &mut self.flows {
                f.start(self.now, &mut self.net);
            }
            self.deliver_inbox();
            return true;
        }
        let Some((t, ev)) = self.net.events.pop() else {
            return false;
        };
        self.now = self.now.max(t);
        self.net.counters.events += 1;
        match ev {
            Event::Link(l) => self.net.link_due(self.now, l),
            Event::Wake(f, ep) => self.flows[f.0 as usize].on_wake(self.now, ep, &mut self.net),
        }
        self.deliver_inbox();
        true
    }

    /// Whether flow `id` has nothing more to send.
    pub fn flow_done(&self, id: FlowId) -> bool {
        self.flows[id.0 as usize].done()
    }

    fn deliver_inbox(&mut self) {
        while let Some((node, pkt)) = self.net.inbox.pop_front() {
            let Some(ep) = self.net.endpoint(pkt.flow, node) else {
                self.net.counters.stray += 1;
                continue;
            };
            self.net.counters.delivered += 1;
            self.net
                .record(self.now, PacketEvent::Delivered, node, &pkt);
            let f = pkt.flow.0 as usize;
            self.flows[f].on_packet(self.now, ep, pkt, &mut self.net);
        }
    }

    /// Ends the run: every flow's figures, the counters, the trace.
    pub fn finish(self) -> SimOutcome {
        self.finish_with_flows().0
    }

    /// [`finish`](Self::finish), and the flows themselves (for their sessions).
    pub fn finish_with_flows(mut self) -> (SimOutcome, Vec<Box<dyn Flow>>) {
        let end = self.now;
        let flows = self
            .flows
            .iter_mut()
            .map(|f| f.report(end, &self.net))
            .collect();
        let out = SimOutcome {
            end,
            flows,
            counters: self.net.counters,
            trace: std::mem::take(&mut self.net.trace),
        };
        (out, self.flows)
    }
}
