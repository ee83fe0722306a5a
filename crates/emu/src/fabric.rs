//! A network of emulated links in one real-time loop: the lab's emu mode for UDP flows.
//!
//! Each route (a flow's path through the topology) has an input socket: a sender sends to it,
//! the datagram enters the route's first link at its kernel receive time, and when that link
//! delivers it, it enters the next link at that instant, inside the emulator (no socket
//! between hops, so intermediate hops add exactly what their models say). After the last link
//! it is sent to the route's destination. Links are shared: two routes over one link share
//! its queue, as two flows over one router port do.
//!
//! One thread runs everything. It reads every input before it moves any datagram due at `t`,
//! watches the sockets (ppoll, ns timeout) while the next delivery is far, and waits precisely
//! (sleep then spin) when it is near.

use crate::relay::UDP_IP_OVERHEAD;
use metronome_netsim::{Link, LinkStats, SendOutcome};
use metronome_rt::clock::Clock;
use metronome_rt::udp::{SocketOptions, UdpError, UdpReceiver, UdpSender};
use metronome_rt::url::RtpUrl;
use metronome_rt::wait::{WaitMode, Waiter};
use metronome_time::{Distribution, Timestamp};
use std::fs::File;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A datagram inside the fabric: which route it is on, at which hop.
#[derive(Clone, Debug)]
pub struct Datagram {
    route: u32,
    hop: u32,
    data: Vec<u8>,
}

/// A path: where its packets come from, the links they cross (indices into the fabric's
/// links), and where they go.
#[derive(Clone, Debug)]
pub struct Route {
    pub ends: Ends,
    pub links: Vec<usize>,
}

/// A route's two ends.
#[derive(Clone, Debug)]
pub enum Ends {
    /// UDP datagrams sent to `listen` (port 0: any free port, see [`Fabric::input_addr`]),
    /// sent on to `dest`. On the wire each is 28 bytes (IPv4, UDP) longer than its payload.
    Udp {
        listen: SocketAddr,
        dest: SocketAddr,
    },
    /// IP packets read from one TUN device and written to another (network-namespace mode:
    /// the kernels on both sides send and receive them as they are).
    Tun { from: Arc<File>, to: Arc<File> },
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
    pub route: u32,
    pub at: Timestamp,
    pub len: usize,
    pub head: [u8; 16],
}

/// What the fabric did.
#[derive(Clone, Debug, Default)]
pub struct FabricStats {
    pub received: u64,
    pub delivered: u64,
    /// Dropped because the fabric held `max_in_flight` datagrams.
    pub overflow: u64,
    /// Arrived longer than the largest UDP payload (cut: not forwarded).
    pub truncated: u64,
    /// Datagrams the input sockets dropped for lack of buffer (SO_RXQ_OVFL), summed.
    pub socket_drops: u64,
    pub send_errors: u64,
    /// Every datagram as it entered (only with [`Fabric::record_inputs`]).
    pub inputs: Vec<Input>,
    /// How late datagrams left the last link against its model, ns.
    pub lateness: Distribution,
    /// Each link's own counters, in the fabric's order.
    pub links: Vec<LinkStats>,
}

pub struct Fabric {
    links: Vec<Link<Datagram>>,
    routes: Vec<Route>,
    inputs: Vec<Source>,
    out: UdpSender,
    clock: Clock,
    waiter: Waiter,
    buf: Vec<u8>,
    stats: FabricStats,
    max_in_flight: usize,
    record: bool,
    /// Set once the run has ended: nothing more is read.
    ended: bool,
    socket_drops: Vec<u64>,
    /// Datagrams read but not yet entered (stamped after the last read began).
    pending: Vec<(Timestamp, Datagram)>,
}

const MAX_DATAGRAM: usize = 65_507;
const PRECISE_WINDOW: Duration = Duration::from_millis(2);

impl Fabric {
    /// Binds each route's input socket. `clock` is the run's (senders and receivers use it
    /// too, so that their times compare).
    pub fn new(
        links: Vec<Link<Datagram>>,
        routes: Vec<Route>,
        clock: Clock,
    ) -> Result<Self, UdpError> {
        let o = SocketOptions {
            buffer_bytes: 8 << 20,
            read_timeout: None,
        };
        let mut inputs = Vec::with_capacity(routes.len());
        for r in &routes {
            match &r.ends {
                Ends::Udp { listen, .. } => {
                    let rx = UdpReceiver::open(&RtpUrl::unicast(*listen), &o)?;
                    rx.socket()
                        .set_nonblocking(true)
                        .map_err(|source| UdpError::Bind {
                            addr: *listen,
                            source,
                        })?;
                    inputs.push(Source::Udp(rx));
                }
                Ends::Tun { from, .. } => inputs.push(Source::Tun(from.clone())),
            }
        }
        let any: SocketAddr = "127.0.0.1:9".parse().expect("a valid address");
        let first_dest = routes
            .iter()
            .find_map(|r| match r.ends {
                Ends::Udp { dest, .. } => Some(dest),
                Ends::Tun { .. } => None,
            })
            .unwrap_or(any);
        let out = UdpSender::open(&RtpUrl::unicast(first_dest), &o)?;
        let n = inputs.len();
        Ok(Fabric {
            links,
            routes,
            inputs,
            out,
            clock,
            waiter: Waiter::new(WaitMode::SleepSpin),
            buf: vec![0u8; MAX_DATAGRAM + 1],
            stats: FabricStats::default(),
            max_in_flight: 1_000_000,
            record: false,
            ended: false,
            socket_drops: vec![0; n],
            pending: Vec::new(),
        })
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
            // Nothing more is read; what was read goes in.
            let rest: Vec<(Timestamp, Datagram)> = self.pending.drain(..).collect();
            for (at, d) in rest {
                self.enter(at, d);
            }
            return;
        }
        // Every datagram stamped before `t0` is in its socket by now; one stamped later may
        // not be in a socket read earlier, so it waits for the next round: links then see
        // their inputs in time order across all sockets.
        let t0 = self.clock.now();
        let mut in_flight =
            self.links.iter().map(Link::in_flight).sum::<usize>() + self.pending.len();
        for r in 0..self.inputs.len() {
            // Until it would block (or reports an ICMP error from an earlier send: nothing to
            // read either).
            while let Some((len, at)) = self.read(r) {
                self.stats.received += 1;
                if len > MAX_DATAGRAM {
                    self.stats.truncated += 1;
                    continue;
                }
                if in_flight >= self.max_in_flight {
                    self.stats.overflow += 1;
                    continue;
                }
                let d = Datagram {
                    route: r as u32,
                    hop: 0,
                    data: self.buf[..len].to_vec(),
                };
                self.pending.push((at, d));
                in_flight += 1;
            }
        }
        self.pending.sort_by_key(|(at, _)| *at); // stable: one socket's order is kept
        let ready = self.pending.partition_point(|(at, _)| *at < t0);
        let now_in: Vec<(Timestamp, Datagram)> = self.pending.drain(..ready).collect();
        for (at, d) in now_in {
            if self.record {
                let mut head = [0u8; 16];
                let k = d.data.len().min(16);
                head[..k].copy_from_slice(&d.data[..k]);
                self.stats.inputs.push(Input {
                    route: d.route,
                    at,
                    len: d.data.len(),
                    head,
                });
            }
            self.enter(at, d);
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

    /// `d` enters the link of its hop at `at` (or leaves the fabric after the last).
    fn enter(&mut self, at: Timestamp, d: Datagram) {
        let route = &self.routes[d.route as usize];
        match route.links.get(d.hop as usize) {
            Some(&l) => {
                let size = match route.ends {
                    Ends::Udp { .. } => d.data.len() + UDP_IP_OVERHEAD,
                    Ends::Tun { .. } => d.data.len(),
                };
                // Loss and queue drops are the link's to count.
                let _: SendOutcome = self.links[l].send(at, size, d);
            }
            None => {
                let sent = match &route.ends {
                    Ends::Udp { dest, .. } => {
                        self.out.send_to(&d.data, *dest).map(|_| ()).map_err(|_| ())
                    }
                    Ends::Tun { to, .. } => (&**to).write_all(&d.data).map_err(|_| ()),
                };
                match sent {
                    Ok(()) => self.stats.delivered += 1,
                    Err(()) => self.stats.send_errors += 1,
                }
                let sent = self.clock.now();
                self.stats
                    .lateness
                    .record(sent.saturating_since(at).as_nanos() as u64);
            }
        }
    }

    /// Moves every datagram due by now one hop on, in time order across the links (and
    /// before any input still waiting, so that no link gets an input out of time order).
    fn deliver(&mut self) {
        let now = self.clock.now();
        let now = match self.pending.first() {
            Some((at, _)) => now.min(Timestamp::from_nanos(at.as_nanos().saturating_sub(1))),
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
            if let Some((at, mut d)) = self.links[i].poll_deliver(now) {
                d.hop += 1;
                self.enter(at, d);
            }
        }
    }

    /// Until the next delivery: watching the inputs while it is far, precisely when near.
    fn wait(&mut self, end: Option<Timestamp>) {
        let now = self.clock.now();
        let next = self.links.iter().filter_map(Link::poll_timeout).min();
        let limit = end
            .filter(|e| *e > now)
            .map_or(Duration::from_millis(50), |e| e.saturating_since(now))
            .clamp(Duration::from_micros(100), Duration::from_millis(50));
        if !self.pending.is_empty() {
            // Read again soon: those inputs wait only for the sockets read before them.
            self.watch(Duration::from_micros(50));
            return;
        }
        match next {
            Some(t) if t.saturating_since(now) < PRECISE_WINDOW => {
                self.drain();
                self.waiter.wait_until(self.clock.mono_ns_from_timestamp(t));
            }
            Some(t) => self.watch((t.saturating_since(now) - PRECISE_WINDOW / 2).min(limit)),
            None => self.watch(limit),
        }
    }

    /// Waits until an input is readable, at most `timeout` (ppoll: ns, not poll's ms).
    fn watch(&self, timeout: Duration) {
        let mut fds: Vec<libc::pollfd> = self
            .inputs
            .iter()
            .map(|i| libc::pollfd {
                fd: i.fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
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
        };
    }
}
