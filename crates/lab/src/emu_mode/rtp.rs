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
use metronome_rt::sender::{run_sender, SenderConfig, SenderOutcome};
use metronome_rt::udp::UdpReceiver;
use metronome_rt::url::RtpUrl;
use metronome_spec::scenario::{FlowDecl, FlowKind, VideoContent, VideoDecl};
use metronome_time::Timestamp;
use metronome_wire::rtp::RtpView;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The send-time extension's id (the packetizer's).
const SEND_TIME_ID: u8 = metronome_wire::rtp::SEND_TIME_EXT_ID;
/// IPv4 and UDP headers.
const OVERHEAD: u32 = 28;

/// The PID of the constant-rate placeholder stream's packets.
const CBR_PID: u16 = 0x100;

/// Constant-rate MPEG-TS with no null packets: the simulator's `CbrTs`, as a source.
struct CbrTs {
    interval: Duration,
    i: u64,
    count: u64,
}

impl TsSource for CbrTs {
    fn next_packet(&mut self, out: &mut [u8; 188]) -> Result<Option<Duration>, MediaError> {
        if self.i >= self.count {
            return Ok(None);
        }
        out.fill(0xff);
        out[0] = 0x47;
        out[1] = (CBR_PID >> 8) as u8;
        out[2] = CBR_PID as u8;
        out[3] = 0x10 | (self.i & 0x0f) as u8;
        let due = self.interval * self.i as u32;
        self.i += 1;
        Ok(Some(due))
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
    match video {
        None => {
            let packets = f.duration.as_nanos() / (interval.as_nanos() * 7).max(1);
            Ok(Box::new(CbrTs {
                interval,
                i: 0,
                count: packets as u64 * metronome_media::frames::TS_PER_RTP as u64,
            }))
        }
        Some(v) => {
            let s = crate::video::test_source(v, content, rate_bps, f.duration, None)
                .map_err(|e| format!("flow '{}': {e}", f.name))?;
            Ok(Box::new(s))
        }
    }
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

/// An RTP flow's plan: where it sends, its receivers' sockets (opened in their hosts).
pub(super) struct RtpFlowRun<'a> {
    pub f: &'a FlowDecl,
    pub dest: RtpUrl,
    pub receivers: Vec<UdpReceiver>,
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
        ..
    } = f.kind
    else {
        return Err(format!("flow '{}' is not RTP", f.name));
    };
    let (noted, notes) = NotingSource::new(source(f, rate_bps, video, content)?);
    let stop_rx = AtomicBool::new(false);
    let from = super::host_index(st.names, &f.from);
    let (outcome, got) = std::thread::scope(|scope| {
        let rx: Vec<_> = run
            .receivers
            .into_iter()
            .map(|r| {
                let stop = &stop_rx;
                scope.spawn(move || receive(r, st.clock, stop))
            })
            .collect();
        // The sender's stream server starts its first packet a preroll after it is started.
        let mut cfg = SenderConfig::new(vec![run.dest], 0x4d54_0000 | from as u32, st.s.seed);
        cfg.send_time_ext = true;
        cfg.duration = Some(f.duration + Duration::from_millis(500));
        cfg.lock_memory = false;
        let preroll = cfg.preroll;
        let start = (st.origin + f.start)
            .as_nanos()
            .saturating_sub(preroll.as_nanos() as u64);
        let outcome = if super::programs::sleep_until(st, Timestamp::from_nanos(start)) {
            // The run's own stop flag: Ctrl-C ends the stream as it ends the rest.
            let stop = st.stop.clone();
            st.hosts
                .run_in(from, || run_sender(Box::new(noted), cfg, stop, |_| {}))
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
    };
    Ok(report(f, rate_bps, &outcome, map, got, st))
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
        rate_control: Some(metronome_netsim::sim::flows::RateControl {
            controller: "fixed".into(),
            ..Default::default()
        }),
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
