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

/// What emu mode cannot run yet, said plainly.
fn refuse(s: &Scenario) -> Result<(), String> {
    for f in &s.flows {
        match f.kind {
            FlowKind::Udp { .. } if f.to.len() == 1 => {}
            FlowKind::Udp { .. } => {
                return Err(format!("flow '{}': emu mode runs unicast UDP flows so far; a multicast group is not yet emulated (use --mode sim)", f.name))
            }
            _ => {
                return Err(format!("flow '{}': emu mode runs UDP flows so far; TCP and RTP flows are next (use --mode sim)", f.name))
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
    let watch = Stopwatch::start();
    let host = metronome_rt::host::HostWatch::start();
    let (mut sim, plans) = model::network(s, seed, dir)?;
    let closed = closed_form::for_scenario(s, &mut sim);
    let links: Vec<Link<Datagram>> = plans
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let link_seed = derive_seed(seed, 1 + i as u64);
            match p {
                LinkPlan::Fixed(cfg) => Link::new(cfg, link_seed),
                LinkPlan::Scheduled(sch) => Link::with_schedule(sch, link_seed),
            }
        })
        .collect();
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
    let late = fabric_stats.lateness.summary();
    let links = fabric_stats
        .links
        .iter()
        .enumerate()
        .map(|(i, st)| crate::run::link_result_from(s, &sim, i, st))
        .collect();
    Ok(PointResult {
        index: point.index,
        id: crate::run::point_id(point.index),
        params: point.params.iter().cloned().collect(),
        seed,
        sim_ns: model::end_time(s).as_nanos(),
        wall_s: watch.seconds(),
        events: fabric_stats.received,
        flows,
        links,
        closed_form: closed,
        tcp_expected: Vec::new(),
        emu: Some(EmuFacts {
            lateness_p50_us: late.p50_us,
            lateness_p99_us: late.p99_us,
            lateness_max_us: late.max_us,
            socket_drops: fabric_stats.socket_drops,
            host: host
                .finish(0)
                .map_or_else(|| "unknown".into(), |h| h.line()),
        }),
    })
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
