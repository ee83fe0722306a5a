//! One sweep point in the simulator: build it, run it in virtual time (in slices, so that a
//! stop is seen within a slice's wall time), measure its flows, links and videos.

use crate::closed_form;
use crate::model;
use crate::results::{LinkResult, PointResult, VideoWork};
use crate::wall;
use metronome_config::scenario::{Point, Scenario};
use metronome_link::report::FlowReport;
use metronome_link::topology::LinkId;
use metronome_sim::flows::rtp::RtpFlow;
use metronome_sim::Sim;
use metronome_time::Micros;
use metronome_time::Timestamp;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Virtual time run between two looks at the stop flag. The slowest built-in scenarios run
/// about 10 virtual seconds per wall second, so a stop is seen within tens of milliseconds;
/// slicing does not change the result (the simulator runs on from where it stopped).
const SLICE: Duration = Duration::from_millis(200);

/// Why a point did not finish: it was stopped (Ctrl-C, SIGTERM), not broken.
pub const INTERRUPTED: &str = "interrupted before it finished";

/// Runs one point in the simulator. The per-packet trace, if asked for, goes straight to
/// `points/pNNN/packets.csv`, the hosts' captures to `points/pNNN/NODE.pcap`.
/// `dir`: the scenario file's directory (for relative trace files), `None` for a built-in.
/// `stop` set ends it early with the error [`INTERRUPTED`].
pub fn run_point(
    point: &Point,
    s: &Scenario,
    seed: u64,
    (out, dir): (&Path, Option<&Path>),
    stop: &AtomicBool,
) -> Result<PointResult, String> {
    let started = wall::Stopwatch::start();
    let model::Built { mut sim, videos } =
        model::build(s, seed, dir).map_err(|e| format!("point {point}: {e}"))?;
    let closed = closed_form::for_scenario(s, sim.net().topology());
    let tcp_expected = closed_form::tcp_for_scenario(s, sim.net().topology());
    run_sliced(&mut sim, model::end_time(s), stop)?;
    let net = sim.net();
    let links = (0..net.topology().link_count())
        .map(|i| LinkResult::of(s, net.topology(), i, net.link_stats(LinkId(i as u32))))
        .collect();
    let (events, sim_ns) = (sim.net().counters().events, sim.now().as_nanos());
    let topology = sim.net().topology().clone();
    let (mut outcome, flows) = sim.finish_with_flows();
    let (making, ladder) = videos.iter().fold((0.0, 0.0), |(m, l), (_, v)| {
        let v = crate::video::lock_frames(v);
        (m + v.making_s, l + v.ladder_s)
    });
    let judging = wall::Stopwatch::start();
    let video_work = (!videos.is_empty()).then_some(VideoWork {
        ladder_us: Micros::from_secs_f64(ladder),
        sending_us: Micros::from_secs_f64(making - ladder),
        judging_us: Micros::ZERO,
    });
    let videos = add_frames(s, &mut outcome.flows, flows, &videos);
    let video_work = video_work.map(|w| VideoWork {
        judging_us: Micros::from_secs_f64(judging.seconds()),
        ..w
    });
    let video = video_work.map_or(Micros::ZERO, |w| w.ladder_us + w.sending_us + w.judging_us);
    if s.trace.any() {
        let dir = out
            .join("points")
            .join(crate::results::point_id(point.index));
        write_traces(&dir, s.trace, &outcome.trace, &topology)?;
    }
    let mut result = PointResult::new(
        point,
        seed,
        (sim_ns, events),
        (outcome.flows, links),
        &topology,
    );
    result.wall_us = Micros::from_secs_f64(started.seconds());
    result.closed_form = closed;
    result.tcp_expected = tcp_expected;
    result.video_us = video;
    result.video_work = video_work;
    result.add_videos(videos);
    Ok(result)
}

/// Runs `sim` to `end` a [`SLICE`] at a time, looking at `stop` between slices.
fn run_sliced(sim: &mut Sim, end: Timestamp, stop: &AtomicBool) -> Result<(), String> {
    let slice = SLICE.as_nanos() as u64;
    let mut until = Timestamp::from_nanos(0);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(INTERRUPTED.into());
        }
        until = Timestamp::from_nanos(until.as_nanos().saturating_add(slice)).min(end);
        sim.run_until(until);
        if until >= end {
            return Ok(());
        }
    }
}
/// Each video flow's frames, per receiver, from its packets' arrivals: figures into the
/// reports, series and files for the point.
fn add_frames(
    s: &Scenario,
    reports: &mut [FlowReport],
    flows: Vec<Box<dyn metronome_sim::flows::Flow>>,
    videos: &[(usize, crate::video::SharedFrames)],
) -> Vec<crate::video::FlowVideo> {
    let mut flows: Vec<Option<Box<dyn metronome_sim::flows::Flow>>> =
        flows.into_iter().map(Some).collect();
    let mut out = Vec::new();
    for (i, map) in videos {
        let Some(flow) = flows.get_mut(*i).and_then(Option::take) else {
            continue;
        };
        let Ok(rtp) = flow.into_any().downcast::<RtpFlow>() else {
            continue;
        };
        let mut map = crate::video::lock_frames(map);
        map.absorb_notes();
        let arrivals: Vec<&[metronome_time::Timestamp]> = (0..reports[*i].receivers.len())
            .map(|r| rtp.arrivals(r))
            .collect();
        out.push(crate::video::view_flow(
            &s.flows[*i],
            &mut reports[*i],
            &map,
            &arrivals,
        ));
    }
    out
}

/// `packets.csv` and each host's `NODE.pcap` (a host that sent or received anything), as
/// `trace` asks, into the point's directory `dir`.
fn write_traces(
    dir: &Path,
    trace: metronome_config::scenario::Trace,
    packets: &metronome_sim::trace::PacketTrace,
    topology: &metronome_link::topology::Topology,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    if trace.csv {
        std::fs::write(dir.join("packets.csv"), packets.to_csv())
            .map_err(|e| format!("cannot write the packet trace: {e}"))?;
    }
    if trace.pcap {
        let mut used = std::collections::HashSet::new();
        for (n, bytes) in metronome_sim::pcap::pcaps(&packets.captures) {
            // Two names that make one file name: the second gets its node number too.
            let mut name = crate::results::file_stem(topology.node_name(n));
            if !used.insert(name.clone()) {
                name = format!("{name}-{}", n.0);
                used.insert(name.clone());
            }
            let file = dir.join(format!("{name}.pcap"));
            std::fs::write(&file, bytes)
                .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        }
    }
    Ok(())
}
