//! The network both modes build: nodes, directed links with their plans and seeds, unicast
//! routes and multicast trees. Written once: the simulator's network (`metronome_sim`)
//! and the lab's emu mode (the emulator's fabric) both take their links, paths and trees from
//! a [`Topology`].
//!
//! Routing is by hops: a unicast packet follows a shortest path to its destination (ties go to
//! the link added first), and a multicast packet its group's tree, the union of the shortest
//! paths from the source to each member (a source-specific tree, as PIM-SSM builds).
//! Each link's model is seeded from the run's seed and the link's index ([`derive_seed`]), so
//! the simulator and the emulator draw the same variates on the same link.

use crate::{Link, LinkConfig, LinkSchedule};
use metronome_time::Timestamp;
use std::collections::VecDeque;

/// A node of the topology (a host or a router), by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// One direction of a link, by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(pub u32);

/// How one direction of a link is built: a fixed configuration, or a schedule.
#[derive(Clone, Debug)]
pub enum LinkPlan {
    /// The same configuration for the whole run.
    Fixed(LinkConfig),
    /// A configuration that changes at set times; the link applies it itself.
    Scheduled(LinkSchedule),
}

impl LinkPlan {
    /// The configuration in force at the start of a run.
    pub fn initial(&self) -> &LinkConfig {
        match self {
            LinkPlan::Fixed(cfg) => cfg,
            LinkPlan::Scheduled(s) => s.at(Timestamp::ZERO).0,
        }
    }
}

#[derive(Clone)]
struct DirectedLink {
    from: NodeId,
    to: NodeId,
    plan: LinkPlan,
}

/// A multicast tree from one source: per node, whether a member listens there and the links
/// a packet of the group is copied onto (in link order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McastTree {
    /// Indexed by [`NodeId`]: whether a member of the group listens at that node (a
    /// packet arriving there is delivered as well as copied on).
    pub member: Vec<bool>,
    /// Indexed by [`NodeId`]: the tree's links leaving that node, sorted by [`LinkId`];
    /// empty off the tree and at leaves.
    pub out: Vec<Vec<LinkId>>,
}

/// Nodes and directed links, seeded from one run's seed.
#[derive(Clone)]
pub struct Topology {
    seed: u64,
    names: Vec<String>,
    /// Per node, the links leaving it, in the order they were added.
    out: Vec<Vec<LinkId>>,
    links: Vec<DirectedLink>,
}

impl Topology {
    /// No nodes yet; `seed` is the run's (each link's model gets its own from it).
    pub fn new(seed: u64) -> Self {
        Topology {
            seed,
            names: Vec::new(),
            out: Vec::new(),
            links: Vec::new(),
        }
    }

    /// The run's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Adds a node named `name` and returns its id, the next index from 0. Names are not
    /// checked for uniqueness ([`Topology::node_by_name`] finds the first).
    pub fn add_node(&mut self, name: impl Into<String>) -> NodeId {
        self.names.push(name.into());
        self.out.push(Vec::new());
        NodeId(self.names.len() as u32 - 1)
    }

    /// One direction of a link from `from` to `to`.
    pub fn add_link(&mut self, from: NodeId, to: NodeId, plan: LinkPlan) -> LinkId {
        let id = LinkId(self.links.len() as u32);
        self.links.push(DirectedLink { from, to, plan });
        self.out[from.0 as usize].push(id);
        id
    }

    /// Number of nodes; ids run from 0 to this minus one.
    pub fn node_count(&self) -> usize {
        self.names.len()
    }

    /// The name node `n` was added with. Panics for an id this topology did not give.
    pub fn node_name(&self, n: NodeId) -> &str {
        &self.names[n.0 as usize]
    }

    /// The first node added with exactly this name (case-sensitive), if any.
    pub fn node_by_name(&self, name: &str) -> Option<NodeId> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| NodeId(i as u32))
    }

    /// Number of directed links; ids run from 0 to this minus one.
    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// The link's two ends, `(from, to)`.
    pub fn link_ends(&self, l: LinkId) -> (NodeId, NodeId) {
        let dl = &self.links[l.0 as usize];
        (dl.from, dl.to)
    }

    /// How link `l` was configured: fixed or scheduled.
    pub fn link_plan(&self, l: LinkId) -> &LinkPlan {
        &self.links[l.0 as usize].plan
    }

    /// The link's configuration at the start of a run.
    pub fn link_config(&self, l: LinkId) -> &LinkConfig {
        self.links[l.0 as usize].plan.initial()
    }

    /// The seed of link `l`'s model: part `1 + l` of the run's seed.
    pub fn link_seed(&self, l: LinkId) -> u64 {
        derive_seed(self.seed, 1 + l.0 as u64)
    }

    /// Link `l`'s model, built from its plan with its seed.
    pub fn build_link<T>(&self, l: LinkId) -> Link<T> {
        let seed = self.link_seed(l);
        match &self.links[l.0 as usize].plan {
            LinkPlan::Fixed(cfg) => Link::new(cfg.clone(), seed),
            LinkPlan::Scheduled(s) => Link::with_schedule(s.clone(), seed),
        }
    }

    /// Every link's model, in link order.
    pub fn build_links<T>(&self) -> Vec<Link<T>> {
        (0..self.links.len() as u32)
            .map(|i| self.build_link(LinkId(i)))
            .collect()
    }

    /// Per node, the first link on a shortest path to `dst` (`None` at `dst` and where no
    /// path leads): breadth-first from `dst` over the links reversed.
    pub fn routes_to(&self, dst: NodeId) -> Vec<Option<LinkId>> {
        let mut into: Vec<Vec<LinkId>> = vec![Vec::new(); self.names.len()];
        for (i, l) in self.links.iter().enumerate() {
            into[l.to.0 as usize].push(LinkId(i as u32));
        }
        self.breadth_first(dst, &into, |l| l.from)
    }

    /// The links a unicast packet from `from` crosses to reach the node `routes` lead to (the
    /// table [`routes_to`](Self::routes_to) gave for `to`), in order (`None`: no route).
    pub fn path_by(
        &self,
        routes: &[Option<LinkId>],
        from: NodeId,
        to: NodeId,
    ) -> Option<Vec<LinkId>> {
        let mut at = from;
        let mut links = Vec::new();
        while at != to {
            let l = routes[at.0 as usize]?;
            links.push(l);
            at = self.links[l.0 as usize].to;
            if links.len() > self.links.len() {
                return None; // cannot happen with BFS routes; never loop on a bug
            }
        }
        Some(links)
    }

    /// The links a unicast packet from `from` to `to` crosses, in order (`None`: no route).
    pub fn path(&self, from: NodeId, to: NodeId) -> Option<Vec<LinkId>> {
        self.path_by(&self.routes_to(to), from, to)
    }

    /// Breadth-first from `src`: the link each node is first reached by.
    fn parents_from(&self, src: NodeId) -> Vec<Option<LinkId>> {
        self.breadth_first(src, &self.out, |l| l.to)
    }

    /// Breadth-first from `start` over `adjacent` (per node, its links in the order they were
    /// added; `far` the end a link leads to): per node, the link it was first reached by.
    fn breadth_first(
        &self,
        start: NodeId,
        adjacent: &[Vec<LinkId>],
        far: impl Fn(&DirectedLink) -> NodeId,
    ) -> Vec<Option<LinkId>> {
        let n = self.names.len();
        let mut reached_by = vec![None; n];
        let mut seen = vec![false; n];
        seen[start.0 as usize] = true;
        let mut queue = VecDeque::from([start]);
        while let Some(at) = queue.pop_front() {
            for &l in &adjacent[at.0 as usize] {
                let next = far(&self.links[l.0 as usize]);
                if !seen[next.0 as usize] {
                    seen[next.0 as usize] = true;
                    reached_by[next.0 as usize] = Some(l);
                    queue.push_back(next);
                }
            }
        }
        reached_by
    }

    /// The multicast tree from `src` to `members`: the union of the shortest paths.
    pub fn tree(&self, src: NodeId, members: &[NodeId]) -> McastTree {
        let n = self.names.len();
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
        McastTree { member, out }
    }

    /// Each member's path down the tree from `src` to `members` ([`tree`](Self::tree)), in
    /// the members' order (`None`: not reached). Paths share the links they have in common
    /// from the start, so copying a packet where they part is the tree.
    pub fn tree_paths(&self, src: NodeId, members: &[NodeId]) -> Vec<Option<Vec<LinkId>>> {
        let parent = self.parents_from(src);
        members
            .iter()
            .map(|&m| {
                let mut links = Vec::new();
                let mut at = m;
                while at != src {
                    let l = parent[at.0 as usize]?;
                    links.push(l);
                    at = self.links[l.0 as usize].from;
                }
                links.reverse();
                Some(links)
            })
            .collect()
    }
}

/// A seed for part `k` of a run seeded with `seed` (SplitMix64's finaliser: nearby inputs give
/// unrelated outputs, so link 1 and link 2 do not draw correlated variates).
pub fn derive_seed(seed: u64, k: u64) -> u64 {
    use metronome_time::mix::{mix64, GOLDEN_GAMMA};
    mix64(seed.wrapping_add(k.wrapping_mul(GOLDEN_GAMMA)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// a → b → d and a → c → d: two shortest paths of two hops; the first added wins.
    fn diamond() -> (Topology, [NodeId; 4]) {
        let mut t = Topology::new(1);
        let [a, b, c, d] = ["a", "b", "c", "d"].map(|n| t.add_node(n));
        for (x, y) in [(a, b), (a, c), (b, d), (c, d)] {
            t.add_link(x, y, LinkPlan::Fixed(LinkConfig::default()));
            t.add_link(y, x, LinkPlan::Fixed(LinkConfig::default()));
        }
        (t, [a, b, c, d])
    }

    #[test]
    fn shortest_paths_and_trees_take_the_first_link_on_ties() {
        let (t, [a, b, c, d]) = diamond();
        assert_eq!(t.path(a, d), Some(vec![LinkId(0), LinkId(4)]));
        assert_eq!(t.path(d, a), Some(vec![LinkId(5), LinkId(1)]));
        assert_eq!(t.path(a, a), Some(vec![]));
        let tree = t.tree(a, &[d, c]);
        assert_eq!(tree.out[a.0 as usize], vec![LinkId(0), LinkId(2)]);
        assert_eq!(tree.out[b.0 as usize], vec![LinkId(4)]);
        assert!(tree.member[d.0 as usize] && tree.member[c.0 as usize]);
        let paths = t.tree_paths(a, &[d, c]);
        assert_eq!(paths[0], Some(vec![LinkId(0), LinkId(4)]));
        assert_eq!(paths[1], Some(vec![LinkId(2)]));
    }

    #[test]
    fn unreachable_nodes_have_no_path() {
        let mut t = Topology::new(1);
        let (a, b) = (t.add_node("a"), t.add_node("b"));
        t.add_link(a, b, LinkPlan::Fixed(LinkConfig::default()));
        assert_eq!(t.path(b, a), None);
        assert_eq!(t.tree_paths(b, &[a]), vec![None]);
        assert_eq!(t.node_by_name("b"), Some(b));
        assert_eq!(t.link_seed(LinkId(0)), derive_seed(1, 1));
    }
}
