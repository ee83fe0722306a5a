//! A scenario point on real sockets, in real time (root): each of the scenario's hosts (the
//! nodes that send or receive) is a network namespace, and the scenario's links join them as
//! an emulator [`Fabric`] (the scenario's [`Topology`], as the simulator builds it: the same
//! link models with the same seeds, the same routes and multicast trees; a group is copied
//! where its receivers' paths part). It writes the same figures as the simulator, so
//! `lab compare` can put the two modes side by side.
//!
//! - UDP flows (unicast or to a group): one paced sender thread sends every flow's datagrams
//!   from a socket in its host, each at its time; a receiver in each receiving host measures
//!   with the kernel's receive timestamps.
//! - TCP flows: iperf3 (Debian's), the kernel's TCP with the flow's congestion control.
//! - RTP flows: Metronome's own sender (the stream server `metronome serve` runs) in the
//!   sending host, measured per receiving host, frames counted as in sim mode (`rtp.rs`).
//! - Command flows: real programs in their hosts (`programs.rs`).

use crate::closed_form;
use crate::model;
use crate::results::{CommandRun, EmuFacts, LinkResult, PointResult};
use crate::served::ServedFlow;
use crate::wall::Stopwatch;
use metronome_config::scenario::{FlowDecl, FlowKind, Point, Repair, RtpCc, Scenario};
use metronome_emu::fabric::{Datagram, Fabric, HostNet, HostPath};
use metronome_emu::netns::{remove_stale, Hosts};
use metronome_link::meter::Meter;
use metronome_link::report::FlowReport;
use metronome_link::topology::{LinkId, NodeId, Topology};
use metronome_rt::clock::Clock;
use metronome_rt::udp::{SocketOptions, UdpReceiver};
use metronome_rt::url::RtpUrl;
use metronome_time::Micros;
use metronome_time::Timestamp;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod programs;
mod rtp;
mod udp;

use crate::video::FlowVideo;
use metronome_link::traffic::UdpSchedule;
use programs::Stage;
use udp::{receive, send_all, udp_report, Sending};

/// Time for every thread to be ready before the first datagram (the run's origin).
const LEAD: Duration = Duration::from_millis(300);

/// A point's figures from the emulator's run (closed forms, timing and host added by the
/// caller).
fn point_result(
    point: &Point,
    s: &Scenario,
    topology: &Topology,
    seed: u64,
    fabric_stats: &metronome_emu::fabric::FabricStats,
    flows: Vec<FlowReport>,
) -> PointResult {
    let links = fabric_stats
        .links
        .iter()
        .enumerate()
        .map(|(i, st)| LinkResult::of(s, topology, i, st))
        .collect();
    let time = (model::end_time(s).as_nanos(), fabric_stats.received);
    PointResult::new(point, seed, time, (flows, links), topology)
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
        thread: stats.thread.clone(),
        host: host
            .finish(0)
            .map_or_else(|| "unknown".into(), |h| h.line()),
    }
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
        let named = programs::referenced_nodes(f)
            .into_iter()
            .filter(|n| s.nodes.contains(n));
        for n in std::iter::once(f.from.clone())
            .chain(f.to.iter().cloned())
            .chain(named)
        {
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    names
}

/// Where each host's packets go: to every other host by the topology's shortest paths, and
/// to each multicast flow's group down its tree (the simulator's routes and trees).
fn host_net(s: &Scenario, topology: &Topology, hosts: &Hosts) -> Result<HostNet, String> {
    let names = host_names(s);
    let nodes: Vec<NodeId> = names
        .iter()
        .map(|n| {
            topology
                .node_by_name(n)
                .ok_or_else(|| format!("no node '{n}'"))
        })
        .collect::<Result<_, _>>()?;
    let indices = |p: Vec<LinkId>| -> Vec<usize> { p.iter().map(|l| l.0 as usize).collect() };
    let routes: Vec<_> = nodes.iter().map(|&n| topology.routes_to(n)).collect();
    let mut paths = Vec::new();
    for i in 0..names.len() {
        for j in (0..names.len()).filter(|&j| j != i) {
            // A pair the topology does not join gets no path: its packets are unroutable.
            let path = topology.path_by(&routes[j], nodes[i], nodes[j]);
            if let Some(links) = path.map(indices) {
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
        let members: Vec<usize> = f.to.iter().map(|m| host_index(&names, m)).collect();
        let member_nodes: Vec<NodeId> = members.iter().map(|&j| nodes[j]).collect();
        let tree = topology.tree_paths(nodes[from], &member_nodes);
        let mut to = Vec::new();
        for ((m, &j), links) in f.to.iter().zip(&members).zip(tree) {
            let links = links
                .ok_or_else(|| format!("flow '{}': no route from {} to {m}", f.name, f.from))?;
            to.push((j, indices(links)));
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

/// Where a point runs: the scenario's directory (for relative trace files), the results
/// directory (programs' output goes to its `points/pNNN/`), and the run's stop flag.
#[derive(Clone, Copy)]
pub struct Where<'a> {
    pub scenario_dir: Option<&'a Path>,
    pub out: &'a Path,
    pub stop: &'a Arc<AtomicBool>,
}

/// An RTP flow's run, set up before the point starts: where its sender sends, its plan,
/// its receivers opened in their hosts (the engine's, reporting by RTCP, for a flow with a
/// rate controller).
fn rtp_run<'a>(
    k: usize,
    f: &'a FlowDecl,
    hosts: &Hosts,
    names: &[String],
    clock: Clock,
    seed: u64,
    scenario_dir: Option<&Path>,
) -> Result<rtp::RtpFlowRun<'a>, String> {
    let from = hosts.hosts()[host_index(names, &f.from)].addr;
    // The flow's sessions are seeded as the simulator seeds them.
    let flow_seed = model::flow_seed(seed, k);
    let dest = if f.to.len() > 1 {
        RtpUrl::multicast(SocketAddr::from((flow_group(k), flow_port(k))), Some(from))
    } else {
        let to = hosts.hosts()[host_index(names, &f.to[0])].addr;
        RtpUrl::unicast(SocketAddr::from((to, flow_port(k))))
    };
    let receivers = match f.kind {
        FlowKind::Rtp { cc, repair, .. } if cc != RtpCc::Fixed || repair != Repair::None => {
            // The engine's receivers: they report in RTCP (and ask for repairs), a group's by
            // unicast to the sender (RFC 5760), as the fabric routes a group from its sender
            // only.
            let urls =
                f.to.iter()
                    .map(|m| {
                        let j = host_index(names, m);
                        let addr = hosts.hosts()[j].addr;
                        let url = if f.to.len() > 1 {
                            RtpUrl::multicast(
                                SocketAddr::from((flow_group(k), flow_port(k))),
                                Some(addr),
                            )
                        } else {
                            RtpUrl::unicast(SocketAddr::from((Ipv4Addr::UNSPECIFIED, flow_port(k))))
                        };
                        (j, url)
                    })
                    .collect();
            let feedback = (f.to.len() > 1).then(|| SocketAddr::from((from, flow_port(k) + 1)));
            rtp::session_receivers(f, urls, feedback, clock, flow_seed, |j, cfg| {
                hosts
                    .run_in(j, move || metronome_apps::receiver::Receiver::open(cfg))
                    .map_err(|e| e.to_string())?
                    .map_err(|e| format!("flow '{}': a receiver: {e}", f.name))
            })?
        }
        _ => rtp::RtpReceivers::Plain(open_receivers(hosts, names, k, f)?),
    };
    let plan = model::RtpPlan::of(f, scenario_dir).expect("an RTP flow");
    // A video's ladder is encoded (or read from the cache) now, before the run's origin.
    // Opened by the sender, after its epoch, it made the first packets late by the time that
    // took (7.7 s to encode a 30 s CIF ladder), and a rate controller at its floor behind that
    // backlog stayed there for most of the run.
    let mut source = ServedFlow::new(f, plan.clone());
    source.rtp_format()?;
    Ok(rtp::RtpFlowRun {
        f,
        plan,
        source,
        dest,
        receivers,
        seed: flow_seed,
    })
}

/// Runs one point on real sockets.
pub fn run_point(point: &Point, s: &Scenario, seed: u64, at: Where) -> Result<PointResult, String> {
    refuse(s)?;
    let watch = Stopwatch::start();
    let host = metronome_rt::host::HostWatch::start();
    remove_stale();
    let topology = model::topology(s, seed, at.scenario_dir)?;
    let closed = closed_form::for_scenario(s, &topology);
    let tcp_expected = closed_form::tcp_for_scenario(s, &topology);
    let names = host_names(s);
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let hosts = Hosts::create(&format!("p{}", point.index), &name_refs)
        .map_err(|e| format!("cannot make the scenario's hosts: {e}"))?;
    let net = host_net(s, &topology, &hosts)?;
    let clock = Clock::new();
    let links = topology.build_links::<Datagram>();
    let fabric = Fabric::routed(links, net, clock).map_err(|e| e.to_string())?;
    // Every UDP receiver is open before anything is sent.
    let flows = PointFlows::open(s, &hosts, &names, clock, seed, at.scenario_dir)?;
    let rel_dir = Path::new("points").join(crate::results::point_id(point.index));
    let point_dir = at.out.join(&rel_dir);
    let stage = Stage {
        hosts: &hosts,
        names: &names,
        s,
        dir: &point_dir,
        rel_dir: &rel_dir,
        clock,
        origin: clock.now() + LEAD,
        stop: at.stop,
    };
    let out = flows.run(fabric, &stage);
    drop(hosts);
    if at.stop.load(Ordering::Relaxed) {
        return Err(format!(
            "point {point}: interrupted (Ctrl-C or SIGTERM); its hosts are removed"
        ));
    }
    let flows = out
        .reports
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("a flow did not run".into())))
        .collect::<Result<Vec<_>, _>>()?;
    let fabric_stats = out.fabric.ok_or("the emulator's thread failed")?;
    let mut r = point_result(point, s, &topology, seed, &fabric_stats, flows);
    r.wall_us = Micros::from_secs_f64(watch.seconds());
    r.closed_form = closed;
    r.tcp_expected = tcp_expected;
    r.emu = Some(emu_facts(&fabric_stats, &host));
    r.commands = out.commands;
    r.add_videos(out.videos);
    r.warnings.extend(out.warnings);
    Ok(r)
}

/// Emu mode keeps a group's tree for the whole run: a scenario whose receivers join and
/// leave is refused with what to do.
/// What emu mode cannot run of `s`, said before any host is made: receivers joining and
/// leaving, and two TCP flows between the same two hosts that ask different windows (the
/// kernel keeps one per route, [`Hosts::set_tcp_window`]). `lab run --mode emu` asks it of
/// every point before the first starts.
pub fn refuse(s: &Scenario) -> Result<(), String> {
    refuse_membership(s)?;
    refuse_window_clash(s)
}

/// Two TCP flows from one host to another that ask different `initial_window`s or
/// `max_window`s: the kernel sets both on the route between the hosts, for every TCP on it.
fn refuse_window_clash(s: &Scenario) -> Result<(), String> {
    let mut asked: Vec<(&FlowDecl, Option<u32>, Option<u32>)> = Vec::new();
    for f in &s.flows {
        let FlowKind::Tcp {
            initial_window,
            max_window,
            ..
        } = f.kind
        else {
            continue;
        };
        let same_hosts = |g: &&(&FlowDecl, _, _)| g.0.from == f.from && g.0.to[..1] == f.to[..1];
        for (g, gi, gm) in asked.iter().filter(same_hosts) {
            for (what, a, b) in [
                ("initial_window", *gi, initial_window),
                ("max_window", *gm, max_window),
            ] {
                if let (Some(a), Some(b)) = (a, b) {
                    if a != b {
                        return Err(format!(
                            "flows '{}' and '{}' (TCP from {} to {}) ask {what} {a} and {b}: on real sockets the kernel sets it once for all TCP between two hosts; give both flows the same {what}, or run them in --mode sim",
                            g.name, f.name, f.from, f.to[0]
                        ));
                    }
                }
            }
        }
        asked.push((f, initial_window, max_window));
    }
    Ok(())
}

fn refuse_membership(s: &Scenario) -> Result<(), String> {
    match s.flows.iter().find(|f| !f.membership.is_empty()) {
        Some(f) => Err(format!(
            "flow '{}': receivers joining and leaving (membership) run in sim mode only for now: the emulator's fabric keeps a group's tree for the whole run; remove membership or use --mode sim",
            f.name
        )),
        None => Ok(()),
    }
}

/// A point's flows, opened in their hosts before anything is sent.
struct PointFlows<'a> {
    s: &'a Scenario,
    /// Per scenario flow, its UDP receivers (none for other kinds).
    udp_receivers: Vec<Vec<UdpReceiver>>,
    /// The UDP flows' senders, each with its flow's index.
    sending: Vec<(usize, Sending<'a>)>,
    /// The RTP flows' runs, each with its flow's index.
    rtp: Vec<(usize, rtp::RtpFlowRun<'a>)>,
}

/// What a point's threads made: the fabric's figures, each flow's report in the scenario's
/// order, the programs' runs and the flows' videos.
struct Outcomes {
    fabric: Option<metronome_emu::fabric::FabricStats>,
    reports: Vec<Option<Result<FlowReport, String>>>,
    commands: Vec<CommandRun>,
    videos: Vec<FlowVideo>,
    /// What went wrong with the flows' programs, in words (a video's are in its FlowVideo).
    warnings: Vec<String>,
}

/// What a flow's own thread (iperf3, a command, an RTP flow) gives back.
type FlowOutcome = Result<(FlowReport, FlowExtras), String>;

/// What a flow gives back beside its report: the program it ran, its video, warnings.
#[derive(Default)]
struct FlowExtras {
    run: Option<CommandRun>,
    video: Option<FlowVideo>,
    warnings: Vec<String>,
}

impl<'a> PointFlows<'a> {
    fn open(
        s: &'a Scenario,
        hosts: &Hosts,
        names: &[String],
        clock: Clock,
        seed: u64,
        scenario_dir: Option<&Path>,
    ) -> Result<Self, String> {
        let mut flows = PointFlows {
            s,
            udp_receivers: Vec::new(),
            sending: Vec::new(),
            rtp: Vec::new(),
        };
        for (k, f) in s.flows.iter().enumerate() {
            if let FlowKind::Rtp { .. } = f.kind {
                let run = rtp_run(k, f, hosts, names, clock, seed, scenario_dir)?;
                flows.rtp.push((k, run));
            }
            if let FlowKind::Udp { .. } = f.kind {
                flows
                    .udp_receivers
                    .push(open_receivers(hosts, names, k, f)?);
                flows.sending.push((k, udp_sending(k, f, hosts, names)?));
            } else {
                flows.udp_receivers.push(Vec::new());
            }
        }
        Ok(flows)
    }

    /// Runs the point: the fabric, every flow's threads and the UDP senders, until the
    /// scenario's end (or the stop flag), then the drain.
    fn run(self, fabric: Fabric, stage: &Stage) -> Outcomes {
        let s = self.s;
        let (clock, origin) = (stage.clock, stage.origin);
        let end = origin + model::end_time(s).saturating_since(Timestamp::ZERO);
        let (stop_fabric, stop_rx) = (AtomicBool::new(false), AtomicBool::new(false));
        std::thread::scope(|scope| {
            let fab = scope.spawn(|| fabric.run(&stop_fabric, None));
            let mut meters: Vec<Vec<_>> = (s.flows.iter().zip(self.udp_receivers))
                .map(|(f, rxs)| {
                    let (bound, stop) = (udp_bound(f), &stop_rx);
                    rxs.into_iter()
                        .map(|rx| {
                            let meter = Meter::new(s.interval, s.histograms);
                            scope.spawn(move || receive(rx, clock, origin, bound, meter, stop))
                        })
                        .collect()
                })
                .collect();
            let mut programs = Vec::new();
            for (k, f) in s.flows.iter().enumerate() {
                if let Some(work) = program_work(k, f, stage) {
                    programs.push((k, scope.spawn(work)));
                }
            }
            for (k, run) in self.rtp {
                let work = move || {
                    rtp::rtp_flow(run, stage).map(|(r, video)| {
                        let extras = FlowExtras {
                            video,
                            ..FlowExtras::default()
                        };
                        (r, extras)
                    })
                };
                programs.push((k, scope.spawn(work)));
            }
            let order: Vec<usize> = self.sending.iter().map(|(k, _)| *k).collect();
            let senders = self.sending.into_iter().map(|(_, x)| x).collect();
            let sent = send_all(senders, clock, origin, stage.stop);
            let mut out = Outcomes::new(s.flows.len());
            for (k, h) in programs {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err("a program's thread failed".into()));
                out.add(k, r);
            }
            // The drain: what is in flight arrives.
            programs::sleep_until(stage, end);
            stop_fabric.store(true, Ordering::Relaxed);
            out.fabric = fab.join().ok();
            stop_rx.store(true, Ordering::Relaxed);
            for (k, sent) in order.into_iter().zip(sent) {
                let mut m: Vec<Meter> = meters[k].drain(..).filter_map(|h| h.join().ok()).collect();
                out.reports[k] = Some(Ok(udp_report(&s.flows[k], &mut m, sent.0, sent.1)));
            }
            out
        })
    }
}

/// The work of a flow that runs a program (iperf3 for TCP, a command), for its own thread.
fn program_work<'a>(
    k: usize,
    f: &'a FlowDecl,
    stage: &'a Stage,
) -> Option<Box<dyn FnOnce() -> FlowOutcome + Send + 'a>> {
    match f.kind {
        FlowKind::Tcp { .. } => Some(Box::new(move || {
            programs::iperf3_flow(k, f, stage).map(|(r, warning)| {
                let extras = FlowExtras {
                    warnings: warning.into_iter().collect(),
                    ..FlowExtras::default()
                };
                (r, extras)
            })
        })),
        FlowKind::Command { .. } => Some(Box::new(move || {
            programs::command_flow(f, stage).map(|run| {
                let mut report = programs::command_report(f);
                report
                    .receivers
                    .extend(programs::measured_by(&run, f, stage));
                let extras = FlowExtras {
                    run: Some(run),
                    ..FlowExtras::default()
                };
                (report, extras)
            })
        })),
        _ => None,
    }
}

impl Outcomes {
    fn new(flows: usize) -> Self {
        Outcomes {
            fabric: None,
            reports: vec![None; flows],
            commands: Vec::new(),
            videos: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Flow `k`'s outcome from its own thread.
    fn add(&mut self, k: usize, r: FlowOutcome) {
        self.reports[k] = Some(r.map(|(report, extras)| {
            self.commands.extend(extras.run);
            self.videos.extend(extras.video);
            self.warnings.extend(extras.warnings);
            report
        }));
    }
}

/// A UDP flow's sender: a socket in its host, to its receiver or its group.
fn udp_sending<'a>(
    k: usize,
    f: &'a FlowDecl,
    hosts: &Hosts,
    names: &[String],
) -> Result<Sending<'a>, String> {
    let FlowKind::Udp { payload, rate } = f.kind else {
        return Err(format!("flow '{}' is not UDP", f.name));
    };
    let from = host_index(names, &f.from);
    let sock = hosts
        .run_in(from, || UdpSocket::bind("0.0.0.0:0"))
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("flow '{}': sender at {}: {e}", f.name, f.from))?;
    let dst = if f.to.len() > 1 {
        flow_group(k)
    } else {
        hosts.hosts()[host_index(names, &f.to[0])].addr
    };
    // Room for the number and the send time.
    let payload = payload.max(16);
    Ok(Sending {
        f,
        sock,
        to: SocketAddr::from((dst, flow_port(k))),
        payload,
        schedule: UdpSchedule::new(payload, model::rate_pattern(rate)),
        next: Some(Duration::ZERO),
        sent: 0,
        bytes: 0,
    })
}

/// The most datagrams a UDP flow can send (its sequence numbers' bound for the meter).
fn udp_bound(f: &FlowDecl) -> u64 {
    let FlowKind::Udp { payload, rate } = f.kind else {
        return 0;
    };
    let peak = model::rate_pattern(rate).peak_bps();
    (f.duration.as_secs_f64() * peak as f64 / (payload as f64 * 8.0)) as u64 + 2
}

#[cfg(test)]
mod tests {
    use metronome_config::scenario::ScenarioFile;

    /// Two TCP flows from a to b, with `first` and `second` as their own keys.
    fn two_tcp_flows(first: &str, second: &str) -> String {
        format!(
            r#"
name = "windows"
duration = "1s"

[links.l]
rate = "20mbit"
delay = "5ms"

[topology]
shape = "chain"
nodes = ["a", "b", "c"]
link = "l"

[[flow]]
name = "one"
kind = "tcp"
from = "a"
to = "c"
{first}

[[flow]]
name = "two"
kind = "tcp"
from = "a"
to = "c"
{second}

[[flow]]
name = "other"
kind = "tcp"
from = "b"
to = "c"
max_window = 7
"#
        )
    }

    fn refused(first: &str, second: &str) -> Result<(), String> {
        let text = two_tcp_flows(first, second);
        let all = ScenarioFile::parse(&text, "windows.toml")
            .and_then(|f| f.resolve_all())
            .unwrap();
        super::refuse(&all[0].1)
    }

    #[test]
    fn tcp_flows_between_two_hosts_may_not_ask_different_windows() {
        let e = refused("max_window = 20", "max_window = 40").unwrap_err();
        assert!(
            e.contains("flows 'one' and 'two' (TCP from a to c) ask max_window 20 and 40")
                && e.contains("--mode sim"),
            "{e}"
        );
        let e = refused("initial_window = 4", "initial_window = 2").unwrap_err();
        assert!(e.contains("ask initial_window 4 and 2"), "{e}");
        // The same window, one flow asking none, and another pair of hosts are fine.
        refused("max_window = 20", "max_window = 20").unwrap();
        refused("max_window = 20\ninitial_window = 4", "").unwrap();
        refused("initial_window = 4", "max_window = 40").unwrap();
    }

    #[test]
    fn repair_needs_a_play_out_deadline_and_a_word_it_knows() {
        let b = crate::builtin::find("repair-rtx").unwrap();
        let text = b.text.replace("playout_deadline = \"200ms\"\n", "");
        let e = ScenarioFile::parse(&text, b.name)
            .unwrap()
            .resolve_all()
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs playout_deadline"), "{e}");
        let text = b.text.replacen("\"${repair}\"", "\"raptorq\"", 1);
        let e = ScenarioFile::parse(&text, b.name)
            .and_then(|f| f.resolve_all())
            .unwrap_err()
            .to_string();
        assert!(e.contains("write \"rtx\"") && e.contains("\"fec\""), "{e}");
    }
}
