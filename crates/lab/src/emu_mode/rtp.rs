//! RTP flows on real sockets: Metronome's own sender (the driver's stream server, as `metronome
//! serve` runs it: producer, ring, pacing thread, sender session, RTCP) in the sending host,
//! unicast or to the flow's group; in each receiving host a receiver that measures with the
//! kernel's receive timestamps and the packets' send-time stamps (a ladder's packets carry
//! none, as Evalvid-RA's: their delay counts from each packet's due time on the epoch the
//! sender reports).
//!
//! The source is the simulator's own (`model::flow_source`: constant-rate MPEG-TS, the encoded
//! test pattern, or a ladder's frames as coded), opened by the server once it has numbered and
//! timed the stream ([`crate::served::ServedFlow`]). It notes which frame each packet carries as it makes it,
//! so that frames are counted lost and late exactly as in sim mode.

use super::Stage;
use crate::model::RtpPlan;
use crate::served::ServedFlow;
use crate::video::{lock_frames, view_flow, FlowVideo, FrameMap};
use metronome_apps::receiver::{Receiver, ReceiverRunConfig};
use metronome_apps::sender::{run_sender, SenderConfig, SenderOutcome};
use metronome_apps::streams::GivenSource;
use metronome_config::scenario::{FlowDecl, FlowKind, RtpCc};
use metronome_link::meter::Meter;
use metronome_link::report::{FlowReport, ReceiverReport};
use metronome_rt::clock::Clock;
use metronome_rt::udp::UdpReceiver;
use metronome_rt::url::RtpUrl;
use metronome_session::receiver::RepairStats;
use metronome_session::repair_figures::{sender_repair, viewer_repair};
use metronome_time::Micros;
use metronome_time::Timestamp;
use metronome_wire::rtp::RtpView;
use metronome_wire::{SeqNo, Ssrc};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The send-time extension's id (the packetizer's).
const SEND_TIME_ID: u8 = metronome_wire::rtp::SEND_TIME_EXT_ID;
/// IPv4 and UDP headers.
const OVERHEAD: u32 = metronome_time::IPV4_UDP_OVERHEAD as u32;

/// A receiver that runs the engine's receiver session (RTCP, and the rate controller's end)
/// and notes every packet, as [`receive`] does.
pub(super) struct GotSink {
    clock: Clock,
    got: Vec<Got>,
}

impl metronome_apps::receiver::PayloadSink for GotSink {
    fn payload(&mut self, _: &metronome_session::receiver::PacketRecord, _: &[u8]) {}
    fn packet(
        &mut self,
        rec: &metronome_session::receiver::PacketRecord,
        arrival_unix_ns: u64,
        datagram: &[u8],
    ) {
        let sent = RtpView::parse(datagram)
            .ok()
            .and_then(|p| p.send_time(SEND_TIME_ID))
            .map(|t| self.clock.timestamp_from_realtime_ns(t.to_unix_nanos()));
        self.got.push(Got {
            seq: rec.seq,
            at: self.clock.timestamp_from_realtime_ns(arrival_unix_ns),
            sent,
            len: datagram.len() as u32,
            repaired: rec.repaired,
        });
    }
}

/// Runs `rx` until `stop`: what arrived, in order, and what its loss repair did.
fn receive_session(rx: Receiver, sink: Arc<Mutex<GotSink>>, stop: &AtomicBool) -> Received {
    let repair = rx.run(stop, |_, _| {}).ok().and_then(|o| o.receiver.repair);
    let got = std::mem::take(&mut sink.lock().unwrap_or_else(|e| e.into_inner()).got);
    Received { got, repair }
}

/// What one receiver got.
#[derive(Default)]
struct Received {
    got: Vec<Got>,
    /// What its loss repair did, if it asked for repairs.
    repair: Option<RepairStats>,
}

/// One datagram as a receiver got it.
#[derive(Clone, Copy)]
struct Got {
    seq: SeqNo,
    at: Timestamp,
    /// When it left the sender (its send-time stamp), on the run's clock.
    sent: Option<Timestamp>,
    len: u32,
    /// A retransmission (RFC 4588), given back as the packet it repairs.
    repaired: bool,
}

/// Receives until `stop`: what arrived, in order.
fn receive(rx: UdpReceiver, clock: Clock, stop: &AtomicBool) -> Received {
    let mut buf = vec![0u8; 65_536];
    let mut got = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let Ok(meta) = rx.recv(&mut buf) else {
            continue;
        };
        let Ok(p) = RtpView::parse(&buf[..meta.len]) else {
            continue; // RTCP on the same group, or anything else: not the stream
        };
        let (at, _) = clock.arrival(meta.kernel_rx_realtime_ns);
        let sent = p
            .send_time(SEND_TIME_ID)
            .map(|t| clock.timestamp_from_realtime_ns(t.to_unix_nanos()));
        // Bounded by the flow's own rate and duration (the caller's receive window).
        got.push(Got {
            seq: p.sequence(),
            at,
            sent,
            len: meta.len as u32,
            repaired: false,
        });
    }
    Received { got, repair: None }
}

/// An RTP flow's receivers, opened in their hosts: plain sockets that note what arrives, or
/// (for a flow with a rate controller) the engine's receivers, which also report in RTCP.
pub(super) enum RtpReceivers {
    Plain(Vec<UdpReceiver>),
    Sessions(Vec<(Receiver, Arc<Mutex<GotSink>>)>),
}

/// An RTP flow's plan: where it sends, its receivers.
pub(super) struct RtpFlowRun<'a> {
    pub f: &'a FlowDecl,
    pub plan: RtpPlan,
    /// Its source, its video's ladder already made.
    pub source: ServedFlow,
    pub dest: RtpUrl,
    pub receivers: RtpReceivers,
    /// The flow's seed (`model::flow_seed`): its sender's RTCP timing.
    pub seed: u64,
}

/// The engine's receivers for flow `f` (a rate controller's: `cc`), each opened by `open` in
/// its host with its URL; a group's report to the sender by unicast, at `feedback_to`. Each is
/// seeded as the simulator seeds it, from the flow's seed (`model::flow_seed`): RFC 3550's
/// report times and RFC 4654's feedback timers differ from receiver to receiver and from
/// replicate to replicate.
pub(super) fn session_receivers(
    f: &FlowDecl,
    urls: Vec<(usize, RtpUrl)>,
    feedback_to: Option<std::net::SocketAddr>,
    clock: Clock,
    flow_seed: u64,
    open: impl Fn(usize, ReceiverRunConfig) -> Result<Receiver, String>,
) -> Result<RtpReceivers, String> {
    let FlowKind::Rtp {
        cc,
        coded,
        rtcp_interval,
        repair,
        playout_deadline,
        ..
    } = f.kind
    else {
        return Err(format!("flow '{}' is not RTP", f.name));
    };
    let kind = cc.receiver();
    // Viewers that ask for repairs as the simulator's do.
    let repair = crate::model::viewer_repair(repair, playout_deadline, urls.len());
    let mut out = Vec::with_capacity(urls.len());
    for (i, (host, url)) in urls.into_iter().enumerate() {
        let mut cfg = ReceiverRunConfig::new(url);
        cfg.session.ssrc = Ssrc(0x5256_0000 | i as u32);
        cfg.session.cname = format!("{}-{i}", f.name);
        cfg.session.seed = crate::model::receivers_seed(flow_seed).wrapping_add(i as u64);
        cfg.session.cc = kind;
        cfg.session.rtcp_min_interval = rtcp_interval;
        // A ladder's video is MPEG-4 or H.264 over RTP, not MPEG-TS (as in the simulator).
        if coded.is_some() {
            cfg.session.payload = metronome_session::receiver::PayloadKind::Any;
        }
        // A crowd of receivers keeps no histograms (the lab's meter measures delay).
        cfg.session.histogram_digits = 0;
        cfg.feedback_to = feedback_to;
        cfg.session.repair = repair.clone();
        let sink = Arc::new(Mutex::new(GotSink {
            clock,
            got: Vec::new(),
        }));
        cfg.sink = Some(metronome_apps::receiver::PayloadSinkHandle(sink.clone()));
        out.push((open(host, cfg)?, sink));
    }
    Ok(RtpReceivers::Sessions(out))
}

/// The sender of flow `plan` from host `from` to `dest`, for `duration`: its stream server
/// starts its first packet a preroll after it is started.
fn sender_config(
    dest: RtpUrl,
    from: usize,
    plan: &RtpPlan,
    duration: Duration,
    seed: u64,
) -> SenderConfig {
    let mut cfg = SenderConfig::new(vec![dest], Ssrc(0x4d54_0000 | from as u32), seed);
    cfg.send_time_ext = !plan.send_time.is_none();
    cfg.duration = Some(duration + Duration::from_millis(500));
    cfg.lock_memory = false;
    cfg.mtu = plan.mtu;
    // A ladder sent at its controller's rate keeps its backlog in the ring, as in the
    // simulator.
    cfg.ring_slots = cfg.ring_slots.max(plan.queue_slots());
    // Packets that carry no send-time stamp are timed from when the server sent them.
    cfg.keep_send_times = true;
    cfg.rtcp_min_interval = plan.rtcp_interval;
    // The controller's target is traced at its changes, as the simulator traces it: looked
    // at every 20 ms (the server's RTCP thread moves it at most that often).
    cfg.status_every = Duration::from_millis(20);
    cfg.repair = plan.repair;
    cfg.playout_delay = plan.playout_deadline;
    if plan.cc != RtpCc::Fixed {
        // With a rate controller, `rate` is the most on the wire, in the source's units, and
        // the source starts at `start_rate` on the wire (as in the simulator).
        let per_wire = ServedFlow::source_per_wire(plan);
        cfg.cc = Some(plan.cc.name().to_string());
        cfg.max_bitrate = Some((plan.rate_bps as f64 * per_wire) as u64);
    }
    cfg
}

/// Runs RTP flow `run` (sender in its host, receivers in theirs) and says what each receiver
/// measured, with frame figures for video.
pub(super) fn rtp_flow(
    run: RtpFlowRun,
    st: &Stage,
) -> Result<(FlowReport, Option<FlowVideo>), String> {
    let f = run.f;
    let plan = run.plan;
    let (rate_bps, cc) = (plan.rate_bps, plan.cc);
    let per_wire = ServedFlow::source_per_wire(&plan);
    let source = run.source;
    let frames = source.frames();
    let targets: Mutex<Vec<(Micros, u64)>> = Mutex::new(Vec::new());
    let stop_rx = AtomicBool::new(false);
    let from = super::host_index(st.names, &f.from);
    let (outcome, got) = std::thread::scope(|scope| {
        let stop = &stop_rx;
        let rx: Vec<_> = match run.receivers {
            RtpReceivers::Plain(v) => v
                .into_iter()
                .map(|r| scope.spawn(move || receive(r, st.clock, stop)))
                .collect(),
            RtpReceivers::Sessions(v) => v
                .into_iter()
                .map(|(r, sink)| scope.spawn(move || receive_session(r, sink, stop)))
                .collect(),
        };
        let cfg = sender_config(run.dest, from, &plan, f.duration, run.seed);
        let preroll = cfg.preroll;
        let start = (st.origin + f.start)
            .as_nanos()
            .saturating_sub(preroll.as_nanos() as u64);
        let outcome = if super::programs::sleep_until(st, Timestamp::from_nanos(start)) {
            // The run's own stop flag: Ctrl-C ends the stream as it ends the rest.
            let stop = st.stop.clone();
            st.hosts
                .run_in(from, || {
                    let source = GivenSource::Rtp(Box::new(source));
                    run_sender(source, cfg, stop, |status| {
                        // The controller's target where it changed (the source's bits to wire
                        // bits).
                        let at = Micros::from(f.start + status.elapsed);
                        let wire = (status.target_bitrate_bps as f64 / per_wire) as u64;
                        let mut t = targets.lock().unwrap_or_else(|e| e.into_inner());
                        if t.last().is_none_or(|&(_, last)| last != wire) {
                            t.push((at, wire));
                        }
                    })
                })
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| format!("flow '{}': the sender: {e}", f.name)))
        } else {
            Err("interrupted".into())
        };
        // What is in flight arrives.
        super::programs::sleep_until(
            st,
            st.clock.now() + st.s.drain.max(Duration::from_millis(200)),
        );
        stop_rx.store(true, Ordering::Relaxed);
        let got: Vec<Received> = rx.into_iter().filter_map(|h| h.join().ok()).collect();
        (outcome, got)
    });
    let outcome = outcome?;
    // The flow's frames as its source noted them (what it made before the sender stopped).
    let opened = frames.lock().unwrap_or_else(|e| e.into_inner()).take();
    let map = match opened.flatten() {
        Some(shared) => {
            let mut map = std::mem::take(&mut *lock_frames(&shared));
            map.absorb_notes();
            map
        }
        None => FrameMap::default(),
    };
    let targets = targets.into_inner().unwrap_or_else(|e| e.into_inner());
    let (mut report, video) = report(f, rate_bps, &outcome, map, got, st);
    report.rate_control = Some(metronome_link::report::RateControl {
        controller: cc.name().into(),
        changes: targets.windows(2).filter(|w| w[0].1 != w[1].1).count() as u64,
        points: targets,
    });
    Ok((report, video))
}

/// The stream's epoch on the run's clock. Each packet left at its release or later, so with
/// send-time stamps the earliest (send time − release) of what arrived is the epoch plus the
/// least lateness; without them, the epoch the sender says it used.
fn stream_epoch(
    got: &[Received],
    out: &SenderOutcome,
    st: &Stage,
    release: &dyn Fn(usize) -> Duration,
    index: &dyn Fn(SeqNo) -> usize,
) -> Option<Timestamp> {
    let stamped = got
        .iter()
        .flat_map(|r| &r.got)
        .filter_map(|g| {
            g.sent.map(|s| {
                s.as_nanos()
                    .saturating_sub(release(index(g.seq)).as_nanos() as u64)
            })
        })
        .min()
        .map(Timestamp::from_nanos);
    stamped.or_else(|| {
        (out.epoch_unix_ns > 0).then(|| st.clock.timestamp_from_realtime_ns(out.epoch_unix_ns))
    })
}

fn report(
    f: &FlowDecl,
    rate_bps: u64,
    out: &SenderOutcome,
    mut map: FrameMap,
    got: Vec<Received>,
    st: &Stage,
) -> (FlowReport, Option<FlowVideo>) {
    let sent = out.packets;
    let rel = |t: Timestamp| Timestamp::ZERO + t.saturating_since(st.origin);
    // Each packet's release (due time) from the stream's epoch.
    let release = |k: usize| {
        let due = &map.sent.packet_due;
        due.get(k).or(due.last()).copied().unwrap_or(Duration::ZERO)
    };
    let first = SeqNo(out.first_seq);
    let index = |seq: SeqNo| usize::from(seq.since(first));
    // When the server sent packet `k`, on the run's clock.
    let sent_at = |k: usize| {
        let ns = *out.send_times_unix_ns.get(k)?;
        Some(st.clock.timestamp_from_realtime_ns(ns))
    };
    let epoch = stream_epoch(&got, out, st, &release, &index);
    let mut arrivals = Vec::with_capacity(f.to.len());
    let receivers =
        f.to.iter()
            .zip(got)
            .map(|(node, received)| {
                let got = received.got;
                let mut meter = Meter::new(st.s.interval, st.s.histograms);
                // Sequence numbers extended from the first sent, over a stream of a bounded length.
                let mut at_k = vec![Timestamp::MAX; sent as usize];
                let mut last = 0u64;
                for g in &got {
                    let k = SeqNo(g.seq.since(first)).extend_near(last);
                    last = k;
                    let at = rel(g.at);
                    // Sent when its stamp says, or (a ladder's packets carry none) when the
                    // server sent it, or else at its release.
                    let left = g
                        .sent
                        .or_else(|| sent_at(k as usize))
                        .or(epoch.map(|e| e + release(k as usize)));
                    // The meter keeps what the network delivered; the viewer's arrivals
                    // (its frames) include repairs, as in the simulator.
                    if !g.repaired {
                        meter.record(at, k, sent, g.len + OVERHEAD, rel(left.unwrap_or(g.at)));
                    }
                    if let Some(a) = at_k.get_mut(k as usize) {
                        *a = (*a).min(at);
                    }
                }
                arrivals.push(at_k);
                let mut r = ReceiverReport::from_meter(node.clone(), &mut meter, sent, f.duration);
                r.repair = received.repair.map(|s| viewer_repair(&s, r.lost, sent));
                r
            })
            .collect();
    let sent_bytes = out.bytes + OVERHEAD as u64 * sent;
    let mut report = FlowReport {
        repair: sender_repair(out.repair.as_ref(), out.fec.as_ref(), OVERHEAD, sent_bytes),
        name: f.name.clone(),
        kind: "rtp".into(),
        src: f.from.clone(),
        target_bps: rate_bps,
        start_us: Micros::from(f.start),
        duration_us: Micros::from(f.duration),
        sent_packets: sent,
        // RTP bytes, and IPv4 and UDP headers: bytes on the wire, as the simulator counts.
        sent_bytes,
        receivers,
        rate_control: None,
    };
    let video = match (map.picture.is_some(), epoch) {
        (true, Some(e)) => {
            map.epoch = rel(e);
            let refs: Vec<&[Timestamp]> = arrivals.iter().map(Vec::as_slice).collect();
            Some(view_flow(f, &mut report, &map, &refs))
        }
        (true, None) => Some(FlowVideo {
            warnings: vec![format!(
                "flow '{}': the stream's epoch is unknown (no send-time stamps arrived and the sender reported none): its frames are not judged",
                f.name
            )],
            ..FlowVideo::default()
        }),
        _ => None,
    };
    let video = video.map(|mut v| {
        v.warnings.extend(shifted_frames(f, out));
        v
    });
    (report, video)
}

/// Receivers number a ladder's packets by sequence number, the frame map by the order they
/// were made: the same while the sender drops nothing. The lab's sender catches up after a
/// stall and never drops (no scenario key sets another late policy); should it drop, the
/// session renumbers what follows (RFC 3550 §5.1), every later packet's frame is one off,
/// and the run says so.
fn shifted_frames(f: &FlowDecl, out: &SenderOutcome) -> Option<String> {
    (out.pacing.dropped > 0).then(|| {
        format!(
            "flow '{}': the sender dropped {} late packets, so receivers' packets after the first drop are matched to the wrong frames: its frame figures are not to be trusted",
            f.name, out.pacing.dropped
        )
    })
}
