//! A scenario point on real sockets, in real time: the scenario's links as an emulator
//! [`Fabric`] (the same link models, seeded as the simulator seeds them, on the same routes),
//! real paced UDP senders, and receivers that measure with kernel timestamps. It writes the
//! same figures as the simulator, so `lab compare` can put the two modes side by side.
//!
//! So far emu mode runs unicast UDP flows (iperf-like, constant rate or square wave); TCP,
//! RTP and multicast flows are refused with a message until they join it.

use crate::closed_form;
use crate::model::{self, LinkPlan};
use crate::results::{EmuFacts, PointResult};
use crate::wall::Stopwatch;
use metronome_emu::fabric::{Datagram, Fabric, Route};
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
use std::net::{SocketAddr, UdpSocket};
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
    let Ok(sock) = UdpSocket::bind("127.0.0.1:0") else {
        return vec![(0, 0); flows.len()];
    };
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
        if sock.send_to(&buf[..len], x.to).is_ok() {
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
    let tcp = s
        .flows
        .iter()
        .filter(|f| matches!(f.kind, FlowKind::Tcp { .. }))
        .count();
    if tcp == s.flows.len() {
        return Ok(());
    }
    for f in &s.flows {
        match f.kind {
            FlowKind::Udp { .. } if f.to.len() == 1 => {}
            FlowKind::Udp { .. } => {
                return Err(format!("flow '{}': emu mode runs unicast UDP flows so far; a multicast group is not yet emulated (use --mode sim)", f.name))
            }
            FlowKind::Tcp { .. } => {
                return Err(format!("flow '{}': emu mode runs a scenario's TCP flows (kernel TCP in namespaces) or its UDP flows, not both yet (use --mode sim)", f.name))
            }
            FlowKind::Rtp { .. } => {
                return Err(format!("flow '{}': emu mode does not run RTP flows yet (use --mode sim)", f.name))
            }
        }
    }
    Ok(())
}

/// Runs one point on real sockets.
pub fn run_point(
    point: &Point,
    s: &Scenario,
    seed: u64,
    dir: Option<&Path>,
) -> Result<PointResult, String> {
    refuse(s)?;
    if s.flows
        .iter()
        .all(|f| matches!(f.kind, FlowKind::Tcp { .. }))
    {
        return run_tcp_point(point, s, seed, dir);
    }
    let watch = Stopwatch::start();
    let host = metronome_rt::host::HostWatch::start();
    let (mut sim, plans) = model::network(s, seed, dir)?;
    let closed = closed_form::for_scenario(s, &mut sim);
    let links = emulated_links(plans, seed);
    let o = SocketOptions {
        buffer_bytes: 8 << 20,
        read_timeout: Some(Duration::from_millis(50)),
    };
    let any: SocketAddr = "127.0.0.1:0".parse().expect("a valid address");
    let mut receivers = Vec::new();
    let mut routes = Vec::new();
    for f in &s.flows {
        let net = sim.net_mut();
        let (a, b) = (net.node_by_name(&f.from), net.node_by_name(&f.to[0]));
        let path = a
            .zip(b)
            .and_then(|(a, b)| net.path(a, b))
            .ok_or_else(|| format!("flow '{}': no route from {} to {}", f.name, f.from, f.to[0]))?;
        let rx = UdpReceiver::open(&RtpUrl::unicast(any), &o).map_err(|e| e.to_string())?;
        let dest = rx.local_addr().map_err(|e| e.to_string())?;
        routes.push(Route::udp(
            any,
            path.iter().map(|l| l.0 as usize).collect(),
            dest,
        ));
        receivers.push(rx);
    }
    let clock = Clock::new();
    let fabric = Fabric::new(links, routes, clock).map_err(|e| e.to_string())?;
    let inputs: Vec<SocketAddr> = (0..s.flows.len())
        .map(|r| fabric.input_addr(r))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let origin = clock.now() + LEAD;
    let end = origin + model::end_time(s).saturating_since(Timestamp::ZERO);
    let (stop_fabric, stop_rx) = (AtomicBool::new(false), AtomicBool::new(false));
    let (fabric_stats, flows) = std::thread::scope(|scope| {
        let fab = scope.spawn(|| fabric.run(&stop_fabric, None));
        let mut rx_threads = Vec::new();
        for (f, rx) in s.flows.iter().zip(receivers) {
            let FlowKind::Udp { payload, rate } = f.kind else {
                unreachable!("refused above")
            };
            let pacer = Pacer {
                payload,
                rate,
                carry: 0,
            };
            let bound = (f.duration.as_secs_f64() * pacer.peak() as f64 / (payload as f64 * 8.0))
                as u64
                + 2;
            let meter = Meter::new(s.interval, s.histograms);
            let stop = &stop_rx;
            rx_threads.push(scope.spawn(move || receive(rx, clock, origin, bound, meter, stop)));
        }
        let sending: Vec<Sending> = s
            .flows
            .iter()
            .zip(&inputs)
            .map(|(f, to)| {
                let FlowKind::Udp { payload, rate } = f.kind else {
                    unreachable!("refused above")
                };
                Sending {
                    f,
                    to: *to,
                    // Room for the number and the send time.
                    pacer: Pacer {
                        payload: payload.max(16),
                        rate,
                        carry: 0,
                    },
                    next: Some(Duration::ZERO),
                    sent: 0,
                    bytes: 0,
                }
            })
            .collect();
        let sent = send_all(sending, clock, origin);
        // The drain: what is in flight arrives.
        let left = end.saturating_since(clock.now());
        std::thread::sleep(left);
        stop_fabric.store(true, Ordering::Relaxed);
        let fabric_stats = fab.join().ok();
        stop_rx.store(true, Ordering::Relaxed);
        let meters: Vec<Meter> = rx_threads
            .into_iter()
            .filter_map(|h| h.join().ok())
            .collect();
        let flows: Vec<FlowReport> = s
            .flows
            .iter()
            .zip(meters)
            .zip(sent)
            .map(|((f, mut m), (n, bytes))| report(f, &mut m, n, bytes))
            .collect();
        (fabric_stats, flows)
    });
    let fabric_stats = fabric_stats.ok_or("the emulator's thread failed")?;
    let mut r = point_result(point, s, &sim, seed, &fabric_stats, flows);
    r.wall_s = watch.seconds();
    r.closed_form = closed;
    r.emu = Some(emu_facts(&fabric_stats, &host));
    Ok(r)
}

fn report(f: &FlowDecl, meter: &mut Meter, sent: u64, bytes: u64) -> FlowReport {
    let (target, start) = match f.kind {
        FlowKind::Udp { rate, .. } => (
            match rate {
                RateShape::Constant(r) => r,
                RateShape::Square {
                    high_bps, low_bps, ..
                } => high_bps.max(low_bps),
            },
            f.start,
        ),
        _ => (0, f.start),
    };
    FlowReport {
        name: f.name.clone(),
        kind: "udp".into(),
        src: f.from.clone(),
        target_bps: target,
        start_ns: start.as_nanos() as u64,
        duration_ns: f.duration.as_nanos() as u64,
        sent_packets: sent,
        sent_bytes: bytes,
        receivers: vec![ReceiverReport::from_meter(
            f.to[0].clone(),
            meter,
            sent,
            f.duration,
        )],
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

/// A point whose flows are all TCP, in namespace mode (root): each flow's two hosts are
/// namespaces joined only by the emulator's fabric, on the scenario's routes there and back;
/// iperf3 runs the kernel's TCP between them (its `-b` is the flow's rate, its `-C` the
/// congestion control).
fn run_tcp_point(
    point: &Point,
    s: &Scenario,
    seed: u64,
    dir: Option<&Path>,
) -> Result<PointResult, String> {
    use metronome_emu::netns::{remove_stale, NetnsPair};
    let watch = Stopwatch::start();
    let host = metronome_rt::host::HostWatch::start();
    remove_stale();
    let (mut sim, plans) = model::network(s, seed, dir)?;
    let tcp_expected = closed_form::tcp_for_scenario(s, &mut sim);
    let links = emulated_links(plans, seed);
    let mut pairs = Vec::new();
    let mut routes = Vec::new();
    for (i, f) in s.flows.iter().enumerate() {
        let net = sim.net_mut();
        let (a, b) = (net.node_by_name(&f.from), net.node_by_name(&f.to[0]));
        let (there, back) = a
            .zip(b)
            .and_then(|(a, b)| Some((net.path(a, b)?, net.path(b, a)?)))
            .ok_or_else(|| {
                format!(
                    "flow '{}': no route between {} and {}",
                    f.name, f.from, f.to[0]
                )
            })?;
        let pair = NetnsPair::create(&format!("f{i}"), 100 + i as u8).map_err(|e| e.to_string())?;
        let mut r = pair.routes();
        r[0].links = there.iter().map(|l| l.0 as usize).collect();
        r[1].links = back.iter().map(|l| l.0 as usize).collect();
        routes.extend(r);
        pairs.push(pair);
    }
    let clock = Clock::new();
    let fabric = Fabric::new(links, routes, clock).map_err(|e| e.to_string())?;
    let stop = AtomicBool::new(false);
    let (fabric_stats, flows) = std::thread::scope(|scope| {
        let fab = scope.spawn(|| fabric.run(&stop, None));
        let clients: Vec<_> = s
            .flows
            .iter()
            .zip(&pairs)
            .map(|(f, pair)| scope.spawn(move || iperf3_flow(f, pair, s.interval)))
            .collect();
        let flows: Vec<Result<FlowReport, String>> = clients
            .into_iter()
            .map(|c| {
                c.join()
                    .unwrap_or_else(|_| Err("iperf3 thread failed".into()))
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        (fab.join().ok(), flows)
    });
    let flows = flows.into_iter().collect::<Result<Vec<_>, _>>()?;
    let fabric_stats = fabric_stats.ok_or("the emulator's thread failed")?;
    drop(pairs);
    let mut r = point_result(point, s, &sim, seed, &fabric_stats, flows);
    r.wall_s = watch.seconds();
    r.tcp_expected = tcp_expected;
    r.emu = Some(emu_facts(&fabric_stats, &host));
    Ok(r)
}

/// One TCP flow by iperf3 in its namespaces: what its receiver got, per interval and in all.
fn iperf3_flow(
    f: &FlowDecl,
    pair: &metronome_emu::netns::NetnsPair,
    interval: Duration,
) -> Result<FlowReport, String> {
    let FlowKind::Tcp {
        cc,
        bytes,
        rate_bps,
    } = f.kind
    else {
        return Err(format!("flow '{}' is not TCP", f.name));
    };
    std::thread::sleep(f.start);
    let addr = pair.addr_b.to_string();
    let _server = Running(
        pair.command(false, "iperf3")
            .args(["-s", "-1", "-B", &addr])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run iperf3 ({e}): install it (apt-get install iperf3)"))?,
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut c = pair.command(true, "iperf3");
    c.args(["-c", &addr, "-J", "-C"]);
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
