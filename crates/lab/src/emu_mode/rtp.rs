//! RTP flows on real sockets: Metronome's own sender (the driver's stream server, as `metronome
//! serve` runs it: producer, ring, pacing thread, sender session, RTCP) in the sending host,
//! unicast or to the flow's group; in each receiving host a receiver that measures with the
//! kernel's receive timestamps and the packets' send-time stamps.
//!
//! The source is the one the simulator sends: the encoded test pattern (`video`) or
//! constant-rate MPEG-TS. Which frames each RTP packet carries is noted as the source makes
//! its TS packets (seven to a packet, in order), so that frames are counted lost and late
//! exactly as in sim mode.

use super::Stage;
use crate::video::{view_flow, FlowVideo, FrameMap};
use metronome_media::frames::NotingSource;
use metronome_media::{MediaError, TsSource};
use metronome_netsim::sim::flows::{FlowReport, ReceiverReport};
use metronome_netsim::sim::meter::Meter;
use metronome_rt::clock::Clock;
use metronome_rt::receiver::{Receiver, ReceiverRunConfig};
use metronome_rt::sender::{run_sender, SenderConfig, SenderOutcome};
use metronome_rt::udp::UdpReceiver;
use metronome_rt::url::RtpUrl;
use metronome_spec::scenario::{FlowDecl, FlowKind, RtpCc, VideoContent, VideoDecl};
use metronome_time::Timestamp;
use metronome_wire::rtp::RtpView;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The send-time extension's id (the packetizer's).
const SEND_TIME_ID: u8 = metronome_wire::rtp::SEND_TIME_EXT_ID;
/// IPv4 and UDP headers.
const OVERHEAD: u32 = 28;

/// The PID of the constant-rate placeholder stream's packets.
const CBR_PID: u16 = 0x100;

/// Constant-rate MPEG-TS with no null packets: the simulator's `CbrTs`, as a source. Its rate
/// can change (a rate controller's knob), from its next packet; it ends at `end`.
struct CbrTs {
    interval: Duration,
    next_due: Duration,
    i: u64,
    end: Duration,
}

impl TsSource for CbrTs {
    fn next_packet(&mut self, out: &mut [u8; 188]) -> Result<Option<Duration>, MediaError> {
        if self.next_due >= self.end {
            return Ok(None);
        }
        out.fill(0xff);
        out[0] = 0x47;
        out[1] = (CBR_PID >> 8) as u8;
        out[2] = CBR_PID as u8;
        out[3] = 0x10 | (self.i & 0x0f) as u8;
        let due = self.next_due;
        self.next_due += self.interval;
        self.i += 1;
        Ok(Some(due))
    }
    /// Made as it is sent (a little ahead), so that a new rate takes effect at once, as in
    /// the simulator's source.
    fn is_live(&self) -> bool {
        true
    }
    fn rate_range(&self) -> Option<std::ops::RangeInclusive<u64>> {
        Some(10_000..=10_000_000_000)
    }
    fn set_rate(&mut self, rate: u64) -> Result<(), MediaError> {
        self.interval = Duration::from_nanos(188 * 8 * 1_000_000_000 / rate.max(1));
        Ok(())
    }
    fn describe(&self) -> String {
        format!("constant-rate MPEG-TS, a packet every {:?}", self.interval)
    }
    fn nominal_bitrate(&self) -> Option<u64> {
        Some((188 * 8 * 1_000_000_000 / self.interval.as_nanos().max(1)) as u64)
    }
}

/// The source of an RTP flow, as the simulator makes it.
fn source(
    f: &FlowDecl,
    rate_bps: u64,
    video: Option<VideoDecl>,
    content: &VideoContent,
) -> Result<Box<dyn TsSource>, String> {
    let interval = Duration::from_nanos(188 * 8 * 1_000_000_000 / rate_bps.max(1));
    let (k, gop) = match f.kind {
        FlowKind::Rtp { coded: Some(c), .. } => {
            return Err(format!(
                "flow '{}': codec = \"{}\" (the video as Evalvid-RA sends it) runs in sim mode only so far: the real-time driver sends MPEG-TS; remove codec for an MPEG-TS video, or use --mode sim",
                f.name,
                c.codec.name()
            ))
        }
        FlowKind::Rtp { mtu, gop, .. } => (crate::model::ts_per_packet(mtu), gop),
        _ => (7, None),
    };
    match video {
        None => {
            // Whole RTP packets, as the simulator's source makes them.
            let packets = f.duration.as_nanos() / (interval.as_nanos() * k as u128).max(1);
            Ok(Box::new(CbrTs {
                interval,
                next_due: Duration::ZERO,
                i: 0,
                end: interval * (packets as u32 * k as u32),
            }))
        }
        Some(v) => {
            let s = crate::video::test_source(v, content, rate_bps, f.duration, gop)
                .map_err(|e| format!("flow '{}': {e}", f.name))?;
            Ok(Box::new(s))
        }
    }
}

/// A receiver that runs the engine's receiver session (RTCP, and the rate controller's end)
/// and notes every packet, as [`receive`] does.
pub(super) struct GotSink {
    clock: Clock,
    got: Vec<Got>,
}

impl metronome_rt::receiver::PayloadSink for GotSink {
    fn payload(&mut self, _: Timestamp, _: u32, _: u64, _: &[u8]) {}
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
        });
    }
}

/// Runs `rx` until `stop`: what arrived, in order.
fn receive_session(rx: Receiver, sink: Arc<Mutex<GotSink>>, stop: &AtomicBool) -> Vec<Got> {
    let _ = rx.run(stop, |_| {});
    std::mem::take(&mut sink.lock().unwrap_or_else(|e| e.into_inner()).got)
}

/// One datagram as a receiver got it.
#[derive(Clone, Copy)]
struct Got {
    seq: u16,
    at: Timestamp,
    /// When it left the sender (its send-time stamp), on the run's clock.
    sent: Option<Timestamp>,
    len: u32,
}

/// Receives until `stop`: what arrived, in order.
fn receive(rx: UdpReceiver, clock: Clock, stop: &AtomicBool) -> Vec<Got> {
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
        });
    }
    got
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
    pub dest: RtpUrl,
    pub receivers: RtpReceivers,
}

/// The engine's receivers for flow `f` (a rate controller's: `cc`), each opened by `open` in
/// its host with its URL; a group's report to the sender by unicast, at `feedback_to`.
pub(super) fn session_receivers(
    f: &FlowDecl,
    urls: Vec<(usize, RtpUrl)>,
    feedback_to: Option<std::net::SocketAddr>,
    clock: Clock,
    seed: u64,
    open: impl Fn(usize, ReceiverRunConfig) -> Result<Receiver, String>,
) -> Result<RtpReceivers, String> {
    let FlowKind::Rtp { cc, .. } = f.kind else {
        return Err(format!("flow '{}' is not RTP", f.name));
    };
    let kind = cc.receiver();
    let mut out = Vec::with_capacity(urls.len());
    for (i, (host, url)) in urls.into_iter().enumerate() {
        let mut cfg = ReceiverRunConfig::new(url);
        cfg.session.ssrc = 0x5256_0000 | i as u32;
        cfg.session.cname = format!("{}-{i}", f.name);
        cfg.session.seed = seed ^ i as u64;
        cfg.session.cc = kind;
        // A crowd of receivers keeps no histograms (the lab's meter measures delay).
        cfg.session.histogram_digits = 0;
        cfg.feedback_to = feedback_to;
        let sink = Arc::new(Mutex::new(GotSink {
            clock,
            got: Vec::new(),
        }));
        cfg.sink = Some(metronome_rt::receiver::PayloadSinkHandle(sink.clone()));
        out.push((open(host, cfg)?, sink));
    }
    Ok(RtpReceivers::Sessions(out))
}

/// Runs RTP flow `run` (sender in its host, receivers in theirs) and says what each receiver
/// measured, with frame figures for video.
pub(super) fn rtp_flow(
    run: RtpFlowRun,
    st: &Stage,
) -> Result<(FlowReport, Option<FlowVideo>), String> {
    let f = run.f;
    let FlowKind::Rtp {
        rate_bps,
        video,
        ref content,
        cc,
        start_bps,
        mtu,
        ..
    } = f.kind
    else {
        return Err(format!("flow '{}' is not RTP", f.name));
    };
    // With a rate controller, `rate` is the most on the wire, and the source starts at
    // `start_rate` (as in the simulator).
    let k = crate::model::ts_per_packet(mtu);
    let ts_share = (k * 188) as f64 / (k * 188 + crate::model::RTP_TS_OVERHEAD) as f64;
    let (start, max_ts) = match cc {
        RtpCc::Fixed => (rate_bps, None),
        _ => (
            start_bps.unwrap_or(rate_bps / 4).min(rate_bps),
            Some((rate_bps as f64 * ts_share) as u64),
        ),
    };
    let (noted, notes) = NotingSource::new(source(f, start, video, content)?);
    let noted = noted.with_ts_per_packet(k);
    let targets: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());
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
        // The sender's stream server starts its first packet a preroll after it is started.
        let mut cfg = SenderConfig::new(vec![run.dest], 0x4d54_0000 | from as u32, st.s.seed);
        cfg.send_time_ext = true;
        cfg.duration = Some(f.duration + Duration::from_millis(500));
        cfg.lock_memory = false;
        cfg.mtu = mtu;
        if cc != RtpCc::Fixed {
            cfg.cc = Some(cc.name().to_string());
            cfg.max_bitrate = max_ts;
        }
        let preroll = cfg.preroll;
        let start = (st.origin + f.start)
            .as_nanos()
            .saturating_sub(preroll.as_nanos() as u64);
        let outcome = if super::programs::sleep_until(st, Timestamp::from_nanos(start)) {
            // The run's own stop flag: Ctrl-C ends the stream as it ends the rest.
            let stop = st.stop.clone();
            st.hosts
                .run_in(from, || {
                    run_sender(Box::new(noted), cfg, stop, |status| {
                        // The controller's target, each second (MPEG-TS bits to wire bits).
                        let at = (f.start + status.elapsed).as_nanos() as u64;
                        let wire = (status.target_bitrate_bps as f64 / ts_share) as u64;
                        targets
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((at, wire));
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
        let got: Vec<Vec<Got>> = rx.into_iter().filter_map(|h| h.join().ok()).collect();
        (outcome, got)
    });
    let outcome = outcome?;
    let mut noted = std::mem::take(&mut *notes.lock().unwrap_or_else(|e| e.into_inner()));
    // If the sender stopped before the source's end: what it noted so far.
    noted.finish();
    let map = FrameMap {
        sent: noted.frames,
        epoch: Timestamp::ZERO,
        picture: video,
        content: content.clone(),
        // A source error stops the sender: the flow fails with it.
        source_error: None,
        // Made on the driver's producer thread, in real time.
        making_s: 0.0,
        ..FrameMap::default()
    };
    let targets = targets.into_inner().unwrap_or_else(|e| e.into_inner());
    let (mut report, video) = report(f, rate_bps, &outcome, map, got, st);
    report.rate_control = Some(metronome_netsim::sim::flows::RateControl {
        controller: cc.name().into(),
        changes: targets.windows(2).filter(|w| w[0].1 != w[1].1).count() as u64,
        points: targets,
    });
    Ok((report, video))
}

fn report(
    f: &FlowDecl,
    rate_bps: u64,
    out: &SenderOutcome,
    mut map: FrameMap,
    got: Vec<Vec<Got>>,
    st: &Stage,
) -> (FlowReport, Option<FlowVideo>) {
    let sent = out.packets;
    let rel = |t: Timestamp| Timestamp::ZERO + t.saturating_since(st.origin);
    // The stream's epoch on the run's clock: each packet left at its release or later, so the
    // earliest (send time − release) of what arrived is the epoch plus the least lateness.
    let release = |k: usize| {
        let due = &map.sent.packet_due;
        due.get(k).or(due.last()).copied().unwrap_or(Duration::ZERO)
    };
    let index = |seq: u16| seq.wrapping_sub(out.first_seq) as usize;
    let epoch = got
        .iter()
        .flatten()
        .filter_map(|g| {
            g.sent.map(|s| {
                s.as_nanos()
                    .saturating_sub(release(index(g.seq)).as_nanos() as u64)
            })
        })
        .min()
        .map(Timestamp::from_nanos);
    let mut arrivals = Vec::with_capacity(f.to.len());
    let receivers =
        f.to.iter()
            .zip(got)
            .map(|(node, got)| {
                let mut meter = Meter::new(st.s.interval, st.s.histograms);
                // Sequence numbers extended from the first sent, over a stream of a bounded length.
                let mut at_k = vec![Timestamp::MAX; sent as usize];
                let mut last = 0u64;
                for g in &got {
                    let near = last & !0xffff | index(g.seq) as u64;
                    let k = [near.wrapping_sub(0x1_0000), near, near + 0x1_0000]
                        .into_iter()
                        .min_by_key(|c| c.abs_diff(last))
                        .unwrap_or(near);
                    last = k;
                    let at = rel(g.at);
                    meter.record(at, k, sent, g.len + OVERHEAD, rel(g.sent.unwrap_or(g.at)));
                    if let Some(a) = at_k.get_mut(k as usize) {
                        *a = (*a).min(at);
                    }
                }
                arrivals.push(at_k);
                ReceiverReport::from_meter(node.clone(), &mut meter, sent, f.duration)
            })
            .collect();
    let mut report = FlowReport {
        name: f.name.clone(),
        kind: "rtp".into(),
        src: f.from.clone(),
        target_bps: rate_bps,
        start_ns: f.start.as_nanos() as u64,
        duration_ns: f.duration.as_nanos() as u64,
        sent_packets: sent,
        // RTP bytes, and IPv4 and UDP headers: bytes on the wire, as the simulator counts.
        sent_bytes: out.bytes + OVERHEAD as u64 * sent,
        receivers,
        rate_control: None,
    };
    let video = match (map.picture.is_some(), epoch) {
        (true, Some(e)) => {
            map.epoch = rel(e);
            let refs: Vec<&[Timestamp]> = arrivals.iter().map(Vec::as_slice).collect();
            Some(view_flow(f, &mut report, &map, &refs))
        }
        _ => None,
    };
    (report, video)
}
