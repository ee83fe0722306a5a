//! A network of emulated links in one real-time loop: what the relay, namespace mode and the
//! lab's emu mode all run.
//!
//! Datagrams come in from inputs (UDP sockets, or hosts' TUN devices) and follow a tree over
//! the fabric's links: a datagram enters its first link at its receive time, and when that
//! link delivers it, it enters the next at that instant, inside the emulator (no socket
//! between hops, so intermediate hops add exactly what their models say); after the last it
//! leaves by its output. A [`Route`] is a tree with one branch (every datagram of its input
//! goes the same way); a [`HostNet`] routes each host's packets by their destination
//! address, and a multicast group's tree is copied where its receivers' paths part. Links are
//! shared: two routes over one link share its queue, as two flows over one router port do.
//! The fabric computes no routes: its caller gives the paths (the lab takes them from
//! [`metronome_link::topology`], as the simulator does).
//!
//! One thread runs everything. It reads every input before it moves any datagram due at `t`,
//! watches the inputs (ppoll, ns timeout) while the next delivery is far, and waits precisely
//! (sleep then spin) when it is near.

use metronome_link::{Link, LinkStats, SendOutcome};
use metronome_rt::clock::Clock;
use metronome_rt::thread::RtPolicy;
use metronome_rt::udp::{SocketOptions, UdpError, UdpReceiver, UdpSender};
use metronome_rt::url::RtpUrl;
use metronome_rt::wait::{WaitMode, Waiter};
use metronome_time::IPV4_UDP_OVERHEAD;
use metronome_time::{Distribution, Timestamp};
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A datagram inside the fabric: which tree it follows, at which hop, and its size on the
/// wire.
#[derive(Clone, Debug)]
pub struct Datagram {
    tree: u32,
    hop: u32,
    wire: u32,
    data: Vec<u8>,
}

/// A path: where its packets come from, the links they cross (indices into the fabric's
/// links), and where they go.
#[derive(Clone, Debug)]
pub struct Route {
    /// Where its packets come in and go out.
    pub ends: Ends,
    /// The links they cross, in order (indices into the fabric's links).
    pub links: Vec<usize>,
}

/// A route's two ends.
#[derive(Clone, Debug)]
pub enum Ends {
    /// UDP datagrams sent to `listen` (port 0: any free port, see [`Fabric::input_addr`]),
    /// sent on to `dest`. On the wire each is 28 bytes (IPv4, UDP) longer than its payload.
    Udp {
        /// The address the fabric receives the route's datagrams on.
        listen: SocketAddr,
        /// Where it sends them after the last link.
        dest: SocketAddr,
    },
    /// IP packets read from one TUN device and written to another (network-namespace mode:
    /// the kernels on both sides send and receive them as they are).
    Tun {
        /// The sending host's TUN device.
        from: Arc<File>,
        /// The receiving host's TUN device.
        to: Arc<File>,
    },
}

impl Route {
    /// A UDP route.
    pub fn udp(listen: SocketAddr, links: Vec<usize>, dest: SocketAddr) -> Route {
        Route {
            ends: Ends::Udp { listen, dest },
            links,
        }
    }
}

/// Hosts that reach each other through the fabric (network-namespace mode for a whole
/// topology): each host's TUN device, and for each (sending host, destination address) the
/// hosts the packet reaches and the links it crosses to each. A multicast group has several;
/// where their paths share links (from the start), one copy crosses them and is copied where
/// they part, as a multicast router does.
#[derive(Clone, Debug, Default)]
pub struct HostNet {
    /// Each host's TUN device, by host index.
    pub devices: Vec<Arc<File>>,
    /// Every (sending host, destination) the topology routes.
    pub paths: Vec<HostPath>,
}

/// Where the IPv4 packets host `from` sends to `dst` go: `(host, links)` for each receiver.
#[derive(Clone, Debug)]
pub struct HostPath {
    /// The sending host.
    pub from: usize,
    /// The destination address (a host's, or a multicast group's).
    pub dst: Ipv4Addr,
    /// Each receiving host with the links its copy crosses, in order.
    pub to: Vec<(usize, Vec<usize>)>,
}

/// One hop of a tree: the link a datagram crosses, then the hops after it and the outputs it
/// leaves by.
#[derive(Clone, Debug)]
struct Hop {
    link: usize,
    next: Vec<u32>,
    exits: Vec<u32>,
}

/// Where the datagrams of one input (and destination) go: a trie of link paths.
#[derive(Clone, Debug, Default)]
struct Tree {
    first: Vec<u32>,
    /// Outputs reached without crossing a link.
    direct: Vec<u32>,
    hops: Vec<Hop>,
}

impl Tree {
    /// Adds a path over `links` that leaves by output `exit`, sharing the hops it has in
    /// common (from the start) with the paths added before.
    fn add(&mut self, links: &[usize], exit: u32) {
        let mut at: Option<u32> = None;
        for &l in links {
            let level = match at {
                None => &self.first,
                Some(h) => &self.hops[h as usize].next,
            };
            let found = level
                .iter()
                .copied()
                .find(|&h| self.hops[h as usize].link == l);
            let h = match found {
                Some(h) => h,
                None => {
                    let h = self.hops.len() as u32;
                    self.hops.push(Hop {
                        link: l,
                        next: Vec::new(),
                        exits: Vec::new(),
                    });
                    match at {
                        None => self.first.push(h),
                        Some(p) => self.hops[p as usize].next.push(h),
                    }
                    h
                }
            };
            at = Some(h);
        }
        let exits = match at {
            None => &mut self.direct,
            Some(h) => &mut self.hops[h as usize].exits,
        };
        if !exits.contains(&exit) {
            exits.push(exit);
        }
    }
}

/// Which tree an input's datagram follows.
#[derive(Clone, Debug)]
enum Classify {
    /// Every datagram of the input (a route).
    Fixed(u32),
    /// By the IPv4 destination address (hosts); anything else is unroutable.
    ByDestination(HashMap<Ipv4Addr, u32>),
}

/// Where datagrams leave the fabric.
#[derive(Clone, Debug)]
enum Sink {
    Udp(SocketAddr),
    Tun(Arc<File>),
}

/// Where a route's packets are read.
enum Source {
    Udp(UdpReceiver),
    Tun(Arc<File>),
}

impl Source {
    fn fd(&self) -> i32 {
        match self {
            Source::Udp(u) => u.socket().as_raw_fd(),
            Source::Tun(f) => f.as_raw_fd(),
        }
    }
}

/// One datagram as it entered the fabric: the model's input, to replay it in virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Input {
    /// The route it came in on (its index in the fabric).
    pub route: u32,
    /// When it came in, on the fabric's clock.
    pub at: Timestamp,
    /// Its length, bytes (the UDP payload, or the whole IP packet from a TUN device).
    pub len: usize,
    /// Its first 16 bytes (zero-filled if shorter), to tell datagrams apart in a replay.
    pub head: [u8; 16],
}

/// What the fabric did.
#[derive(Clone, Debug, Default)]
pub struct FabricStats {
    /// Datagrams read from the routes' inputs.
    pub received: u64,
    /// Copies written out (a multicast datagram counts once per receiver).
    pub delivered: u64,
    /// Dropped because the fabric held `max_in_flight` datagrams.
    pub overflow: u64,
    /// Arrived longer than the largest UDP payload (cut: not forwarded).
    pub truncated: u64,
    /// Packets from a host to an address no path was declared for (IPv6, IGMP, other
    /// hosts' traffic nobody listens to): dropped.
    pub unroutable: u64,
    /// Datagrams the input sockets dropped for lack of buffer (SO_RXQ_OVFL), summed.
    pub socket_drops: u64,
    /// Writes out of the fabric that failed (counted, the datagram dropped).
    pub send_errors: u64,
    /// Every datagram as it entered (only with [`Fabric::record_inputs`]).
    pub inputs: Vec<Input>,
    /// How late datagrams were handed out of the last link against its model (when the
    /// write to the receiving host's TUN device or socket began), ns.
    pub lateness: Distribution,
    /// How long those writes took, ns: a TUN write runs the receiving host's network stack
    /// (its TCP, its wake-ups) in the emulator's thread, and later datagrams wait for it.
    pub write_time: Distribution,
    /// Each link's own counters, in the fabric's order.
    pub links: Vec<LinkStats>,
    /// How its thread was scheduled (real-time or not, and why).
    pub thread: String,
}

/// The emulated network: its links, the inputs it reads, the trees datagrams follow and the
/// outputs they leave by, run by one thread (see the module).
pub struct Fabric {
    links: Vec<Link<Datagram>>,
    inputs: Vec<Source>,
    classify: Vec<Classify>,
    trees: Vec<Tree>,
    sinks: Vec<Sink>,
    out: UdpSender,
    clock: Clock,
    waiter: Waiter,
    buf: Vec<u8>,
    stats: FabricStats,
    max_in_flight: usize,
    record: bool,
    realtime: bool,
    /// Set once the run has ended: nothing more is read.
    ended: bool,
    socket_drops: Vec<u64>,
    /// Datagrams read but not yet entered (stamped after the last read began), with the
    /// input each came from.
    pending: Vec<(Timestamp, u32, Datagram)>,
    /// The datagrams entering in one round (kept to reuse its allocation).
    entering: Vec<(Timestamp, u32, Datagram)>,
    /// The inputs, as `ppoll` watches them.
    pollfds: Vec<libc::pollfd>,
}

const MAX_DATAGRAM: usize = 65_507;

fn socket_options() -> SocketOptions {
    SocketOptions {
        buffer_bytes: 8 << 20,
        read_timeout: None,
    }
}

impl Fabric {
    /// Binds each route's input socket. `clock` is the run's (senders and receivers use it
    /// too, so that their times compare).
    pub fn new(
        links: Vec<Link<Datagram>>,
        routes: Vec<Route>,
        clock: Clock,
    ) -> Result<Self, UdpError> {
        let o = socket_options();
        let mut inputs = Vec::with_capacity(routes.len());
        let mut trees = Vec::with_capacity(routes.len());
        let mut sinks = Vec::with_capacity(routes.len());
        for (i, r) in routes.iter().enumerate() {
            let mut tree = Tree::default();
            tree.add(&r.links, i as u32);
            trees.push(tree);
            match &r.ends {
                Ends::Udp { listen, dest } => {
                    let rx = UdpReceiver::open(&RtpUrl::unicast(*listen), &o)?;
                    rx.socket()
                        .set_nonblocking(true)
                        .map_err(|source| UdpError::Bind {
                            addr: *listen,
                            source,
                        })?;
                    inputs.push(Source::Udp(rx));
                    sinks.push(Sink::Udp(*dest));
                }
                Ends::Tun { from, to } => {
                    inputs.push(Source::Tun(from.clone()));
                    sinks.push(Sink::Tun(to.clone()));
                }
            }
        }
        let classify = (0..routes.len() as u32).map(Classify::Fixed).collect();
        Self::assemble(links, inputs, classify, trees, sinks, clock)
    }

    /// A fabric between hosts' TUN devices, each packet routed by its destination address.
    pub fn routed(
        links: Vec<Link<Datagram>>,
        net: HostNet,
        clock: Clock,
    ) -> Result<Self, UdpError> {
        let n = net.devices.len();
        let mut trees: Vec<Tree> = Vec::new();
        let mut classify: Vec<HashMap<Ipv4Addr, u32>> = vec![HashMap::new(); n];
        for p in &net.paths {
            let Some(table) = classify.get_mut(p.from) else {
                continue;
            };
            let t = *table.entry(p.dst).or_insert_with(|| {
                trees.push(Tree::default());
                trees.len() as u32 - 1
            });
            for (to, links) in &p.to {
                if *to < n {
                    trees[t as usize].add(links, *to as u32);
                }
            }
        }
        let inputs = net.devices.iter().cloned().map(Source::Tun).collect();
        let sinks = net.devices.into_iter().map(Sink::Tun).collect();
        let classify = classify.into_iter().map(Classify::ByDestination).collect();
        Self::assemble(links, inputs, classify, trees, sinks, clock)
    }

    fn assemble(
        links: Vec<Link<Datagram>>,
        inputs: Vec<Source>,
        classify: Vec<Classify>,
        trees: Vec<Tree>,
        sinks: Vec<Sink>,
        clock: Clock,
    ) -> Result<Self, UdpError> {
        let any: SocketAddr = "127.0.0.1:9".parse().expect("a valid address");
        let first_dest = sinks
            .iter()
            .find_map(|s| match s {
                Sink::Udp(dest) => Some(*dest),
                Sink::Tun(_) => None,
            })
            .unwrap_or(any);
        let out = UdpSender::open(&RtpUrl::unicast(first_dest), &socket_options())?;
        let n = inputs.len();
        let pollfds = inputs
            .iter()
            .map(|i: &Source| libc::pollfd {
                fd: i.fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        Ok(Fabric {
            pollfds,
            links,
            inputs,
            classify,
            trees,
            sinks,
            out,
            clock,
            waiter: Waiter::new(WaitMode::SleepSpin),
            buf: vec![0u8; MAX_DATAGRAM + 1],
            stats: FabricStats::default(),
            max_in_flight: 1_000_000,
            record: false,
            realtime: true,
            ended: false,
            socket_drops: vec![0; n],
            pending: Vec::new(),
            entering: Vec::new(),
        })
    }

    /// Whether its thread asks for SCHED_FIFO (the default; refused without the privilege, then
    /// it runs as an ordinary thread). Real time keeps the programs it carries (iperf3, a
    /// sender) from preempting it: at 1 Gbit/s on two CPUs that took the added delay's error
    /// at p99 from 350–1000 µs to 150–250 µs. It sleeps between packets, so RT throttling does
    /// not stop it.
    pub fn set_realtime(&mut self, on: bool) {
        self.realtime = on;
    }

    /// Keeps every datagram's arrival (for [`FabricStats::inputs`]).
    pub fn record_inputs(&mut self, on: bool) {
        self.record = on;
    }

    /// Datagrams held at most (the links' own limits come first; this bounds an unlimited
    /// model's memory). Beyond it, datagrams are dropped and counted.
    pub fn set_max_in_flight(&mut self, n: usize) {
        self.max_in_flight = n.max(1);
    }

    /// Where route `r`'s sender sends to (a UDP route's).
    pub fn input_addr(&self, r: usize) -> std::io::Result<SocketAddr> {
        match &self.inputs[r] {
            Source::Udp(u) => u.local_addr(),
            Source::Tun(_) => Err(std::io::Error::other("a TUN route has no address")),
        }
    }

    /// Runs until `stop` is set or `duration` has passed, then lets what is in flight arrive
    /// (for at most a second).
    pub fn run(mut self, stop: &AtomicBool, duration: Option<Duration>) -> FabricStats {
        // Wake-ups as precise as the kernel's timers allow (the default slack is 50 µs).
        let _ = metronome_rt::thread::set_timer_slack_ns(1);
        self.stats.thread = if self.realtime {
            // Above the pacing threads (the network is not what a test measures), below the
            // kernel's own threads.
            metronome_rt::thread::make_current_thread_realtime(RtPolicy::Fifo {
                priority: RtPolicy::DEFAULT_FIFO_PRIORITY + 1,
            })
            .description
        } else {
            "SCHED_OTHER (as asked)".into()
        };
        let mut end = duration.map(|d| self.clock.now() + d);
        loop {
            let now = self.clock.now();
            if stop.load(Ordering::Relaxed) && end.is_none_or(|e| e > now) {
                end = Some(now);
            }
            self.ended = end.is_some_and(|e| now >= e);
            let in_flight =
                self.links.iter().map(Link::in_flight).sum::<usize>() + self.pending.len();
            if self.ended
                && (in_flight == 0 || end.is_some_and(|e| now >= e + Duration::from_secs(1)))
            {
                break;
            }
            self.drain();
            self.deliver();
            self.wait(end);
        }
        self.stats.links = self.links.iter().map(|l| l.stats().clone()).collect();
        self.stats.socket_drops = self.socket_drops.iter().sum();
        self.stats
    }

    /// Reads every datagram the inputs hold into their routes' first links.
    fn drain(&mut self) {
        if self.ended {
            // Nothing more is read; what was read goes in (recorded like any other input:
            // the record is of what entered the links).
            let ready = self.pending.len();
            self.enter_pending(ready, self.record);
            return;
        }
        // Every datagram stamped before `t0` is in its socket by now; one stamped later may
        // not be in a socket read earlier, so it waits for the next round: links then see
        // their inputs in time order across all sockets.
        let t0 = self.clock.now();
        let mut in_flight =
            self.links.iter().map(Link::in_flight).sum::<usize>() + self.pending.len();
        // A burst (a TCP sender's whole window, queued in a TUN device at once) is not read
        // to its end while a delivery falls due: reading ~90 packets takes longer than a
        // packet's time on a 1 Gbit/s link. What is left is read next round. Each input is
        // read up to its first datagram stamped at or after that delivery (a socket holds its
        // datagrams in time order): every datagram that came before the delivery, in any
        // input, enters before it, as in virtual time.
        let next_due = self.links.iter().filter_map(Link::poll_timeout).min();
        for r in 0..self.inputs.len() {
            // Until it would block (or reports an ICMP error from an earlier send: nothing to
            // read either).
            while let Some((len, at)) = self.read(r) {
                self.take(r, len, at, &mut in_flight);
                if next_due.is_some_and(|t| at >= t) {
                    break;
                }
            }
        }
        self.pending.sort_by_key(|(at, _, _)| *at); // stable: one socket's order is kept
        let ready = self.pending.partition_point(|(at, _, _)| *at < t0);
        self.enter_pending(ready, self.record);
    }

    /// The datagram just read from input `r` (`len` bytes, arrived `at`) waits to enter its
    /// tree, or is counted and dropped.
    fn take(&mut self, r: usize, len: usize, at: Timestamp, in_flight: &mut usize) {
        self.stats.received += 1;
        if len > MAX_DATAGRAM {
            self.stats.truncated += 1;
            return;
        }
        if *in_flight >= self.max_in_flight {
            self.stats.overflow += 1;
            return;
        }
        let Some(tree) = self.tree_of(r, len) else {
            self.stats.unroutable += 1;
            return;
        };
        let wire = match self.inputs[r] {
            Source::Udp(_) => len + IPV4_UDP_OVERHEAD,
            Source::Tun(_) => len,
        };
        let d = Datagram {
            tree,
            hop: 0,
            wire: wire as u32,
            data: self.buf[..len].to_vec(),
        };
        self.pending.push((at, r as u32, d));
        *in_flight += 1;
    }

    /// The first `ready` pending datagrams enter their trees (recorded if `record`).
    fn enter_pending(&mut self, ready: usize, record: bool) {
        let mut entering = std::mem::take(&mut self.entering);
        entering.extend(self.pending.drain(..ready));
        for (at, input, d) in entering.drain(..) {
            if record {
                let mut head = [0u8; 16];
                let k = d.data.len().min(16);
                head[..k].copy_from_slice(&d.data[..k]);
                self.stats.inputs.push(Input {
                    route: input,
                    at,
                    len: d.data.len(),
                    head,
                });
            }
            self.enter(at, d);
        }
        self.entering = entering;
    }

    /// The tree that the datagram in the buffer (`len` bytes, from input `r`) follows.
    fn tree_of(&self, r: usize, len: usize) -> Option<u32> {
        match &self.classify[r] {
            Classify::Fixed(t) => Some(*t),
            Classify::ByDestination(table) => {
                let ip = &self.buf[..len];
                if len < 20 || ip[0] >> 4 != 4 {
                    return None;
                }
                let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
                table.get(&dst).copied()
            }
        }
    }

    /// One packet from input `r` into the buffer: its length and arrival (the kernel's
    /// receive time for UDP; the read's for a TUN device, which has none). `None` when empty.
    fn read(&mut self, r: usize) -> Option<(usize, Timestamp)> {
        match &self.inputs[r] {
            Source::Udp(u) => {
                let meta = u.recv(&mut self.buf).ok()?;
                if let Some(d) = meta.dropped_total {
                    self.socket_drops[r] = d as u64;
                }
                let len = if meta.truncated { usize::MAX } else { meta.len };
                Some((len, self.clock.arrival(meta.kernel_rx_realtime_ns).0))
            }
            Source::Tun(f) => {
                let n = (&**f).read(&mut self.buf).ok()?;
                Some((n, self.clock.now()))
            }
        }
    }

    /// A datagram read at `at` enters its tree: the first links, or straight out.
    fn enter(&mut self, at: Timestamp, d: Datagram) {
        self.fan_out(at, d, None);
    }

    /// `d` has crossed the link of its hop at `at`: on to the next, or out.
    fn crossed(&mut self, at: Timestamp, d: Datagram) {
        let hop = d.hop;
        self.fan_out(at, d, Some(hop));
    }

    /// After hop `after` of its tree (`None`: at its input), `d` leaves by each of the hop's
    /// exits and enters each of the next hops' links (a copy for each but the last). Indexes,
    /// not clones of the lists: nothing is allocated but the copies.
    fn fan_out(&mut self, at: Timestamp, mut d: Datagram, after: Option<u32>) {
        let t = d.tree as usize;
        let lists = |trees: &[Tree]| -> (usize, usize) {
            let tree = &trees[t];
            match after {
                None => (tree.direct.len(), tree.first.len()),
                Some(h) => {
                    let hop = &tree.hops[h as usize];
                    (hop.exits.len(), hop.next.len())
                }
            }
        };
        let (n_exits, n_next) = lists(&self.trees);
        for i in 0..n_exits {
            let tree = &self.trees[t];
            let e = match after {
                None => tree.direct[i],
                Some(h) => tree.hops[h as usize].exits[i],
            };
            self.exit(at, e, &d.data);
        }
        for i in 0..n_next {
            let tree = &self.trees[t];
            let h = match after {
                None => tree.first[i],
                Some(h) => tree.hops[h as usize].next[i],
            };
            if i + 1 == n_next {
                d.hop = h;
                self.send_on_link(at, d);
                return;
            }
            let copy = Datagram {
                hop: h,
                ..d.clone()
            };
            self.send_on_link(at, copy);
        }
    }

    /// `d` enters the link of its hop at `at`.
    fn send_on_link(&mut self, at: Timestamp, d: Datagram) {
        let l = self.trees[d.tree as usize].hops[d.hop as usize].link;
        // Loss and queue drops are the link's to count.
        let _: SendOutcome = self.links[l].send(at, d.wire as usize, d);
    }

    /// `data` leaves by output `e`, due at `at`.
    fn exit(&mut self, at: Timestamp, e: u32, data: &[u8]) {
        let start = self.clock.now();
        let sent = match &self.sinks[e as usize] {
            Sink::Udp(dest) => self.out.send_to(data, *dest).map(|_| ()).map_err(|_| ()),
            Sink::Tun(to) => (&**to).write_all(data).map_err(|_| ()),
        };
        match sent {
            Ok(()) => self.stats.delivered += 1,
            Err(()) => self.stats.send_errors += 1,
        }
        let done = self.clock.now();
        self.stats
            .lateness
            .record(start.saturating_since(at).as_nanos() as u64);
        self.stats
            .write_time
            .record(done.saturating_since(start).as_nanos() as u64);
    }

    /// Moves every datagram due by now one hop on, in time order across the links (and
    /// before any input still waiting, so that no link gets an input out of time order).
    fn deliver(&mut self) {
        let now = self.clock.now();
        let now = match self.pending.first() {
            Some((at, _, _)) => now.min(Timestamp::from_nanos(at.as_nanos().saturating_sub(1))),
            None => now,
        };
        loop {
            let next = self
                .links
                .iter()
                .enumerate()
                .filter_map(|(i, l)| l.poll_timeout().filter(|t| *t <= now).map(|t| (t, i)))
                .min();
            let Some((_, i)) = next else { return };
            if let Some((at, d)) = self.links[i].poll_deliver(now) {
                self.crossed(at, d);
            }
        }
    }

    /// Until the next delivery or the next input, whichever comes first. The inputs are
    /// watched all the way (a TUN packet is stamped when it is read, so it must be read at
    /// once): a `ppoll` until the waiter's margin before the delivery, then a spin that polls
    /// the inputs without blocking.
    fn wait(&mut self, end: Option<Timestamp>) {
        let now = self.clock.now();
        let next = self.links.iter().filter_map(Link::poll_timeout).min();
        let limit = end
            .filter(|e| *e > now)
            .map_or(Duration::from_millis(50), |e| e.saturating_since(now))
            .clamp(Duration::from_micros(100), Duration::from_millis(50));
        if !self.pending.is_empty() {
            // Read again soon: those inputs wait only for the inputs read before them.
            self.watch(Duration::from_micros(50));
            return;
        }
        let Some(t) = next else {
            self.watch(limit);
            return;
        };
        let margin = Duration::from_nanos(self.waiter.margin_ns());
        let left = t.saturating_since(now);
        if left > margin {
            let nap = (left - margin).min(limit);
            if self.watch(nap) == 0 {
                let woke = self.clock.now();
                self.waiter
                    .record_sleep(woke.saturating_since(now + nap).as_nanos() as u64);
            }
            return;
        }
        while self.clock.now() < t {
            if self.watch(Duration::ZERO) > 0 {
                return;
            }
            std::hint::spin_loop();
        }
    }

    /// Waits until an input is readable, at most `timeout` (ppoll: ns, not poll's ms);
    /// returns how many are.
    fn watch(&mut self, timeout: Duration) -> i32 {
        let fds = &mut self.pollfds;
        for f in fds.iter_mut() {
            f.revents = 0;
        }
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `fds` holds `fds.len()` valid pollfds and `ts` a valid timespec, both live
        // for the call; no signal mask is passed.
        unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        }
    }
}
