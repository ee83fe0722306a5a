//! A scenario point on real sockets, in real time (root): each of the scenario's hosts (the
//! nodes that send or receive) is a network namespace, and the scenario's links join them as
//! an emulator [`Fabric`] (the same link models, seeded as the simulator seeds them, on the
//! same routes; a multicast group is copied where its receivers' paths part). It writes the
//! same figures as the simulator, so `lab compare` can put the two modes side by side.
//!
//! - UDP flows (unicast or to a group): one paced sender thread sends every flow's datagrams
//!   from a socket in its host, each at its time; a receiver in each receiving host measures
//!   with the kernel's receive timestamps.
//! - TCP flows: iperf3 (Debian's), the kernel's TCP with the flow's congestion control.
//! - RTP flows are refused with a message until they join it.

use crate::closed_form;
use crate::model::{self, LinkPlan};
use crate::results::{EmuFacts, PointResult};
use crate::wall::Stopwatch;
use metronome_emu::fabric::{Datagram, Fabric, HostNet, HostPath};
use metronome_emu::netns::{remove_stale, Hosts};
use metronome_netsim::sim::flows::{FlowReport, ReceiverReport};
use metronome_netsim::sim::meter::IntervalFigures;
use metronome_netsim::sim::meter::Meter;
use metronome_netsim::sim::net::derive_seed;
use metronome_netsim::Link;
use metronome_rt::clock::Clock;
use metronome_rt::udp::{SocketOptions, UdpReceiver};
use metronome_rt::url::RtpUrl;
use metronome_rt::wait::{WaitMode, Waiter};
use metronome_spec::scenario::{FlowDecl, FlowKind, Point, RateShape, Scenario};
use metronome_time::Timestamp;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Time for every thread to be ready before the first datagram (the run's origin).
const LEAD: Duration = Duration::from_millis(300);
/// IPv4 and UDP headers.
const OVERHEAD: u32 = 28;

/// A UDP flow's rate, gap by gap, as the simulator's flow computes it.
struct Pacer {
    payload: u32,
    rate: RateShape,
    carry: u128,
}

impl Pacer {
    fn rate_at(&self, since_start: Duration) -> u64 {
        match self.rate {
            RateShape::Constant(r) => r,
            RateShape::Square {
                high_bps,
                low_bps,
                period,
                duty,
            } => {
                let p = period.as_nanos().max(1);
                let phase = since_start.as_nanos() % p;
                if (phase as f64) < duty * p as f64 {
                    high_bps
                } else {
                    low_bps
                }
            }
        }
    }

    /// The next send time after one at `since_start`.
    fn next(&mut self, since_start: Duration) -> Option<Duration> {
        let rate = self.rate_at(since_start);
        if rate == 0 {
            let RateShape::Square { period, .. } = self.rate else {
                return None;
            };
            let p = period.as_nanos().max(1);
            self.carry = 0;
            return Some(Duration::from_nanos(
                ((since_start.as_nanos() / p + 1) * p) as u64,
            ));
        }
        let numer = self.payload as u128 * 8 * 1_000_000_000 + self.carry;
        self.carry = numer % rate as u128;
        Some(since_start + Duration::from_nanos((numer / rate as u128) as u64))
    }

    fn peak(&self) -> u64 {
        match self.rate {
            RateShape::Constant(r) => r,
            RateShape::Square {
                high_bps, low_bps, ..
            } => high_bps.max(low_bps),
        }
    }
}

/// One flow's sender state.
struct Sending<'a> {
    f: &'a FlowDecl,
    sock: UdpSocket,
    to: SocketAddr,
    pacer: Pacer,
    /// Time of the next datagram from the flow's start (`None`: done).
    next: Option<Duration>,
    sent: u64,
    bytes: u64,
}

/// Sends every flow from one thread, each datagram at its time (the earliest due first): one
/// waiting thread, not one per flow, so that senders do not take the emulator's CPU.
/// Returns each flow's (datagrams, bytes on the wire) sent.
fn send_all(flows: Vec<Sending>, clock: Clock, origin: Timestamp) -> Vec<(u64, u64)> {
    let mut flows = flows;
    let mut waiter = Waiter::new(WaitMode::SleepSpin);
    let mut buf = vec![0u8; 65_536];
    loop {
        let due = |x: &Sending| x.next.map(|t| origin + x.f.start + t);
        let Some(i) = (0..flows.len())
            .filter(|&i| due(&flows[i]).is_some())
            .min_by_key(|&i| due(&flows[i]))
        else {
            break;
        };
        let x = &mut flows[i];
        let t = x.next.expect("filtered");
        if t >= x.f.duration {
            x.next = None;
            continue;
        }
        if x.pacer.rate_at(t) == 0 {
            x.next = x.pacer.next(t);
            continue;
        }
        waiter.wait_until(clock.mono_ns_from_timestamp(origin + x.f.start + t));
        let now = clock.now();
        let len = x.pacer.payload as usize;
        buf[..8].copy_from_slice(&x.sent.to_be_bytes());
        buf[8..16].copy_from_slice(&now.as_nanos().to_be_bytes());
        if x.sock.send_to(&buf[..len], x.to).is_ok() {
            x.sent += 1;
            x.bytes += (x.pacer.payload + OVERHEAD) as u64;
        }
        x.next = x.pacer.next(t);
    }
    flows.iter().map(|x| (x.sent, x.bytes)).collect()
}

/// Receives until `stop`: a meter of what arrived, on the run's timeline from `origin`.
fn receive(
    rx: UdpReceiver,
    clock: Clock,
    origin: Timestamp,
    bound: u64,
    mut meter: Meter,
    stop: &AtomicBool,
) -> Meter {
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        let Ok(meta) = rx.recv(&mut buf) else {
            continue;
        };
        if meta.len < 16 {
            continue;
        }
        let (at, _) = clock.arrival(meta.kernel_rx_realtime_ns);
        let seq = u64::from_be_bytes(buf[..8].try_into().expect("8 bytes"));
        let sent =
            Timestamp::from_nanos(u64::from_be_bytes(buf[8..16].try_into().expect("8 bytes")));
        let rel = |t: Timestamp| Timestamp::ZERO + t.saturating_since(origin);
        meter.record(rel(at), seq, bound, meta.len as u32 + OVERHEAD, rel(sent));
    }
    meter
}

/// A point's figures from the emulator's run (closed forms, timing and host added by the
/// caller).
fn point_result(
    point: &Point,
    s: &Scenario,
    sim: &metronome_netsim::sim::Sim,
    seed: u64,
    fabric_stats: &metronome_emu::fabric::FabricStats,
    flows: Vec<FlowReport>,
) -> PointResult {
    let links = fabric_stats
        .links
        .iter()
        .enumerate()
        .map(|(i, st)| crate::run::link_result_from(s, sim, i, st))
        .collect();
    PointResult {
        index: point.index,
        id: crate::run::point_id(point.index),
        params: point.params.iter().cloned().collect(),
        seed,
        sim_ns: model::end_time(s).as_nanos(),
        wall_s: 0.0,
        events: fabric_stats.received,
        flows,
        links,
        closed_form: Vec::new(),
        tcp_expected: Vec::new(),
        emu: None,
    }
}

/// The scenario's links for the emulator, seeded as the simulator seeds its own.
fn emulated_links(plans: Vec<LinkPlan>, seed: u64) -> Vec<Link<Datagram>> {
    plans
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let link_seed = derive_seed(seed, 1 + i as u64);
            match p {
                LinkPlan::Fixed(cfg) => Link::new(cfg, link_seed),
                LinkPlan::Scheduled(sch) => Link::with_schedule(sch, link_seed),
            }
        })
        .collect()
}

/// How well the emulator kept time, and how busy the host was.
fn emu_facts(
    stats: &metronome_emu::fabric::FabricStats,
    host: &metronome_rt::host::HostWatch,
) -> EmuFacts {
    let late = stats.lateness.summary();
    EmuFacts {
        lateness_p50_us: late.p50_us,
        lateness_p99_us: late.p99_us,
        lateness_max_us: late.max_us,
        socket_drops: stats.socket_drops,
        host: host
            .finish(0)
            .map_or_else(|| "unknown".into(), |h| h.line()),
    }
}

/// What emu mode cannot run yet, said plainly.
fn refuse(s: &Scenario) -> Result<(), String> {
    for f in &s.flows {
        if let FlowKind::Rtp { .. } = f.kind {
            return Err(format!(
                "flow '{}': emu mode does not run RTP flows yet (use --mode sim)",
                f.name
            ));
        }
        if matches!(f.kind, FlowKind::Tcp { .. }) && f.to.len() != 1 {
            return Err(format!(
                "flow '{}': a TCP flow has one receiver, not {}",
                f.name,
                f.to.len()
            ));
        }
    }
    Ok(())
}

/// The port of flow `i` (its receivers listen on it; iperf3's server too).
fn flow_port(i: usize) -> u16 {
    5201 + i as u16
}

/// The group address of flow `i` when it has several receivers.
fn flow_group(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(239, 77, (i >> 8) as u8, (i & 0xff) as u8)
}

/// The scenario's hosts: every node a flow starts or ends at, in the order they appear.
fn host_names(s: &Scenario) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for f in &s.flows {
        for n in std::iter::once(&f.from).chain(&f.to) {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    names
}

/// Where each host's packets go: to every other host by the scenario's shortest paths, and
/// to each multicast flow's group along its receivers' paths.
fn host_net(
    s: &Scenario,
    sim: &mut metronome_netsim::sim::Sim,
    hosts: &Hosts,
) -> Result<HostNet, String> {
    let names = host_names(s);
    let node = |sim: &mut metronome_netsim::sim::Sim, n: &str| {
        sim.net_mut()
            .node_by_name(n)
            .ok_or_else(|| format!("no node '{n}'"))
    };
    let nodes: Vec<_> = names
        .iter()
        .map(|n| node(sim, n))
        .collect::<Result<_, _>>()?;
    let path = |sim: &mut metronome_netsim::sim::Sim, i: usize, j: usize| -> Option<Vec<usize>> {
        let p = sim.net_mut().path(nodes[i], nodes[j])?;
        Some(p.iter().map(|l| l.0 as usize).collect())
    };
    let mut paths = Vec::new();
    for i in 0..names.len() {
        for j in (0..names.len()).filter(|&j| j != i) {
            // A pair the topology does not join gets no path: its packets are unroutable.
            if let Some(links) = path(sim, i, j) {
                paths.push(HostPath {
                    from: i,
                    dst: hosts.hosts()[j].addr,
                    to: vec![(j, links)],
                });
            }
        }
    }
    for (k, f) in s.flows.iter().enumerate().filter(|(_, f)| f.to.len() > 1) {
        let from = host_index(&names, &f.from);
        let mut to = Vec::new();
        for m in &f.to {
            let j = host_index(&names, m);
            let links = path(sim, from, j)
                .ok_or_else(|| format!("flow '{}': no route from {} to {m}", f.name, f.from))?;
            to.push((j, links));
        }
        paths.push(HostPath {
            from,
            dst: flow_group(k),
            to,
        });
    }
    Ok(HostNet {
        devices: hosts.hosts().iter().map(|h| h.tun.clone()).collect(),
        paths,
    })
}

fn host_index(names: &[String], n: &str) -> usize {
    names
        .iter()
        .position(|x| x == n)
        .expect("every flow's nodes are hosts")
}

/// A UDP flow's receiving sockets, one per receiving host, opened in the hosts (joined to
/// the group for several).
fn open_receivers(
    hosts: &Hosts,
    names: &[String],
    k: usize,
    f: &FlowDecl,
) -> Result<Vec<UdpReceiver>, String> {
    let o = SocketOptions {
        buffer_bytes: 8 << 20,
        read_timeout: Some(Duration::from_millis(50)),
    };
    let port = flow_port(k);
    f.to.iter()
        .map(|m| {
            let j = host_index(names, m);
            let addr = hosts.hosts()[j].addr;
            let url = if f.to.len() > 1 {
                RtpUrl::multicast(SocketAddr::from((flow_group(k), port)), Some(addr))
            } else {
                RtpUrl::unicast(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
            };
            hosts
                .run_in(j, move || UdpReceiver::open(&url, &o))
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("flow '{}': receiver at {m}: {e}", f.name))
        })
        .collect()
}

/// Runs one point on real sockets.
pub fn run_point(
    point: &Point,
    s: &Scenario,
    seed: u64,
    dir: Option<&Path>,
) -> Result<PointResult, String> {
    refuse(s)?;
    let watch = Stopwatch::start();
    let host = metronome_rt::host::HostWatch::start();
    remove_stale();
    let (mut sim, plans) = model::network(s, seed, dir)?;
    let closed = closed_form::for_scenario(s, &mut sim);
    let tcp_expected = closed_form::tcp_for_scenario(s, &mut sim);
    let names = host_names(s);
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let hosts = Hosts::create(&format!("p{}", point.index), &name_refs)
        .map_err(|e| format!("cannot make the scenario's hosts: {e}"))?;
    let net = host_net(s, &mut sim, &hosts)?;
    let clock = Clock::new();
    let fabric =
        Fabric::routed(emulated_links(plans, seed), net, clock).map_err(|e| e.to_string())?;
    // Every UDP receiver is open before anything is sent.
    let mut receivers = Vec::new();
    let mut sending = Vec::new();
    for (k, f) in s.flows.iter().enumerate() {
        let FlowKind::Udp { payload, rate } = f.kind else {
            receivers.push(Vec::new());
            continue;
        };
        receivers.push(open_receivers(&hosts, &names, k, f)?);
        let from = host_index(&names, &f.from);
        let sock = hosts
            .run_in(from, || UdpSocket::bind("0.0.0.0:0"))
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("flow '{}': sender at {}: {e}", f.name, f.from))?;
        let dst = if f.to.len() > 1 {
            flow_group(k)
        } else {
            hosts.hosts()[host_index(&names, &f.to[0])].addr
        };
        sending.push((
            k,
            Sending {
                f,
                sock,
                to: SocketAddr::from((dst, flow_port(k))),
                // Room for the number and the send time.
                pacer: Pacer {
                    payload: payload.max(16),
                    rate,
                    carry: 0,
                },
                next: Some(Duration::ZERO),
                sent: 0,
                bytes: 0,
            },
        ));
    }
    let origin = clock.now() + LEAD;
    let end = origin + model::end_time(s).saturating_since(Timestamp::ZERO);
    let (stop_fabric, stop_rx) = (AtomicBool::new(false), AtomicBool::new(false));
    let (fabric_stats, flows) = std::thread::scope(|scope| {
        let fab = scope.spawn(|| fabric.run(&stop_fabric, None));
        let mut rx_threads = Vec::new();
        for (f, rxs) in s.flows.iter().zip(receivers) {
            let mut threads = Vec::new();
            for rx in rxs {
                let FlowKind::Udp { payload, rate } = f.kind else {
                    unreachable!("only UDP flows have receivers here")
                };
                let pacer = Pacer {
                    payload,
                    rate,
                    carry: 0,
                };
                let bound = (f.duration.as_secs_f64() * pacer.peak() as f64
                    / (payload as f64 * 8.0)) as u64
                    + 2;
                let meter = Meter::new(s.interval, s.histograms);
                let stop = &stop_rx;
                threads.push(scope.spawn(move || receive(rx, clock, origin, bound, meter, stop)));
            }
            rx_threads.push(threads);
        }
        let tcp: Vec<_> = s
            .flows
            .iter()
            .enumerate()
            .filter(|(_, f)| matches!(f.kind, FlowKind::Tcp { .. }))
            .map(|(k, f)| {
                let (hosts, names) = (&hosts, &names);
                (
                    k,
                    scope.spawn(move || iperf3_flow(k, f, hosts, names, s.interval, clock, origin)),
                )
            })
            .collect();
        let order: Vec<usize> = sending.iter().map(|(k, _)| *k).collect();
        let sent = send_all(sending.into_iter().map(|(_, x)| x).collect(), clock, origin);
        let mut reports: Vec<Option<Result<FlowReport, String>>> = vec![None; s.flows.len()];
        for (k, h) in tcp {
            reports[k] = Some(
                h.join()
                    .unwrap_or_else(|_| Err("iperf3 thread failed".into())),
            );
        }
        // The drain: what is in flight arrives.
        std::thread::sleep(end.saturating_since(clock.now()));
        stop_fabric.store(true, Ordering::Relaxed);
        let fabric_stats = fab.join().ok();
        stop_rx.store(true, Ordering::Relaxed);
        let mut meters: Vec<Vec<Meter>> = rx_threads
            .into_iter()
            .map(|t| t.into_iter().filter_map(|h| h.join().ok()).collect())
            .collect();
        for (k, (n, bytes)) in order.into_iter().zip(sent) {
            let f = &s.flows[k];
            reports[k] = Some(Ok(udp_report(f, &mut meters[k], n, bytes)));
        }
        (fabric_stats, reports)
    });
    let flows = flows
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("a flow did not run".into())))
        .collect::<Result<Vec<_>, _>>()?;
    let fabric_stats = fabric_stats.ok_or("the emulator's thread failed")?;
    drop(hosts);
    let mut r = point_result(point, s, &sim, seed, &fabric_stats, flows);
    r.wall_s = watch.seconds();
    r.closed_form = closed;
    r.tcp_expected = tcp_expected;
    r.emu = Some(emu_facts(&fabric_stats, &host));
    Ok(r)
}

fn udp_report(f: &FlowDecl, meters: &mut [Meter], sent: u64, bytes: u64) -> FlowReport {
    let target = match f.kind {
        FlowKind::Udp { rate, .. } => match rate {
            RateShape::Constant(r) => r,
            RateShape::Square {
                high_bps, low_bps, ..
            } => high_bps.max(low_bps),
        },
        _ => 0,
    };
    FlowReport {
        name: f.name.clone(),
        kind: "udp".into(),
        src: f.from.clone(),
        target_bps: target,
        start_ns: f.start.as_nanos() as u64,
        duration_ns: f.duration.as_nanos() as u64,
        sent_packets: sent,
        sent_bytes: bytes,
        receivers: f
            .to
            .iter()
            .zip(meters.iter_mut())
            .map(|(m, meter)| ReceiverReport::from_meter(m.clone(), meter, sent, f.duration))
            .collect(),
    }
}

/// A process killed when dropped.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// TCP flow `k` by iperf3 between its hosts, from the flow's start: what its receiver got,
/// per interval and in all (iperf3's `-b` is the flow's rate, its `-C` the congestion
/// control).
fn iperf3_flow(
    k: usize,
    f: &FlowDecl,
    hosts: &Hosts,
    names: &[String],
    interval: Duration,
    clock: Clock,
    origin: Timestamp,
) -> Result<FlowReport, String> {
    let FlowKind::Tcp {
        cc,
        bytes,
        rate_bps,
    } = f.kind
    else {
        return Err(format!("flow '{}' is not TCP", f.name));
    };
    let (from, to) = (host_index(names, &f.from), host_index(names, &f.to[0]));
    let addr = hosts.hosts()[to].addr.to_string();
    let port = flow_port(k).to_string();
    // The server is up before the flow starts (it takes a few hundred ms to listen).
    let _server = Running(
        hosts
            .command(to, "iperf3")
            .args(["-s", "-1", "-B", &addr, "-p", &port])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run iperf3 ({e}): install it (apt-get install iperf3)"))?,
    );
    std::thread::sleep(Duration::from_millis(250));
    std::thread::sleep((origin + f.start).saturating_since(clock.now()));
    let mut c = hosts.command(from, "iperf3");
    c.args(["-c", &addr, "-p", &port, "-J", "-C"]);
    c.arg(match cc {
        metronome_spec::scenario::TcpCc::Reno => "reno",
        metronome_spec::scenario::TcpCc::Cubic => "cubic",
    });
    c.args(["-i", &format!("{:.3}", interval.as_secs_f64().max(0.1))]);
    match bytes {
        Some(n) => c.args(["-n", &n.to_string()]),
        None => c.args(["-t", &format!("{:.3}", f.duration.as_secs_f64())]),
    };
    if let Some(r) = rate_bps {
        c.args(["-b", &r.to_string()]);
    }
    let out = c.output().map_err(|e| format!("cannot run iperf3: {e}"))?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("flow '{}': iperf3 printed no JSON ({e})", f.name))?;
    if let Some(e) = v.get("error") {
        return Err(format!("flow '{}': iperf3: {e}", f.name));
    }
    let received = &v["end"]["sum_received"];
    let intervals = v["intervals"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| IntervalFigures {
                    start_ns: (i["sum"]["start"].as_f64().unwrap_or(0.0) * 1e9) as u64
                        + f.start.as_nanos() as u64,
                    bytes: i["sum"]["bytes"].as_u64().unwrap_or(0),
                    ..IntervalFigures::default()
                })
                .collect()
        })
        .unwrap_or_default();
    let mut rx = ReceiverReport::from_meter(
        f.to[0].clone(),
        &mut Meter::new(Duration::ZERO, false),
        0,
        f.duration,
    );
    rx.bytes = received["bytes"].as_u64().unwrap_or(0);
    rx.throughput_bps = received["bits_per_second"].as_f64().unwrap_or(0.0);
    rx.intervals = intervals;
    let sent = &v["end"]["sum_sent"];
    Ok(FlowReport {
        name: f.name.clone(),
        kind: "tcp".into(),
        src: f.from.clone(),
        target_bps: rate_bps.unwrap_or(0),
        start_ns: f.start.as_nanos() as u64,
        duration_ns: f.duration.as_nanos() as u64,
        sent_packets: 0,
        sent_bytes: sent["bytes"].as_u64().unwrap_or(0),
        receivers: vec![rx],
    })
}
