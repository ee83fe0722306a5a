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
use crate::video::{view_flow, FlowVideo, FrameMap, FrameNoter, VIDEO_PID};
use metronome_media::{MediaError, TsSource};
use metronome_netsim::sim::flows::{FlowReport, ReceiverReport};
use metronome_netsim::sim::meter::Meter;
use metronome_rt::clock::Clock;
use metronome_rt::sender::{run_sender, SenderConfig, SenderOutcome};
use metronome_rt::udp::UdpReceiver;
use metronome_rt::url::RtpUrl;
use metronome_spec::scenario::{FlowDecl, FlowKind, VideoDecl};
use metronome_time::Timestamp;
use metronome_wire::rtp::RtpView;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// TS packets per RTP packet (RFC 2250, as the packetizer makes them).
const TS_PER_RTP: usize = 7;
/// The send-time extension's id (the packetizer's).
const SEND_TIME_ID: u8 = metronome_wire::rtp::SEND_TIME_EXT_ID;
/// IPv4 and UDP headers.
const OVERHEAD: u32 = 28;

/// What a source handed out: each TS packet's due time, and the frames (seven TS packets to
/// an RTP packet, as the packetizer makes them).
#[derive(Default)]
struct Notes {
    dues: Vec<Duration>,
    map: FrameMap,
    noter: FrameNoter,
    /// The source has ended (its last access unit and packet are noted).
    ended: bool,
}

/// A source that notes every TS packet it hands out.
struct Noted {
    inner: Box<dyn TsSource>,
    notes: Arc<Mutex<Notes>>,
}

impl TsSource for Noted {
    fn next_packet(&mut self, out: &mut [u8; 188]) -> Result<Option<Duration>, MediaError> {
        let r = self.inner.next_packet(out)?;
        let mut guard = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        let n = &mut *guard;
        match r {
            Some(due) => {
                n.dues.push(due);
                n.noter.ts(&mut n.map, out, due);
                if n.dues.len() % TS_PER_RTP == 0 {
                    n.noter.end_packet(&mut n.map);
                }
            }
            None if !n.ended => {
                n.ended = true;
                if n.dues.len() % TS_PER_RTP != 0 {
                    n.noter.end_packet(&mut n.map);
                }
                n.noter.finish(&mut n.map);
            }
            None => {}
        }
        Ok(r)
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn nominal_bitrate(&self) -> Option<u64> {
        self.inner.nominal_bitrate()
    }
    fn catch_up_to(&mut self, now: Duration) -> u64 {
        self.inner.catch_up_to(now)
    }
    fn is_live(&self) -> bool {
        self.inner.is_live()
    }
}

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
        out[1] = (VIDEO_PID >> 8) as u8;
        out[2] = VIDEO_PID as u8;
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
) -> Result<Box<dyn TsSource>, String> {
    let interval = Duration::from_nanos(188 * 8 * 1_000_000_000 / rate_bps.max(1));
    match video {
        None => {
            let packets = f.duration.as_nanos() / (interval.as_nanos() * 7).max(1);
            Ok(Box::new(CbrTs {
                interval,
                i: 0,
                count: packets as u64 * TS_PER_RTP as u64,
            }))
        }
        Some(v) => {
            let s = crate::video::test_source(v, rate_bps, f.duration)
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
        rate_bps, video, ..
    } = f.kind
    else {
        return Err(format!("flow '{}' is not RTP", f.name));
    };
    let notes = Arc::new(Mutex::new(Notes {
        map: FrameMap {
            picture: video,
            ..FrameMap::default()
        },
        ..Notes::default()
    }));
    let noted = Noted {
        inner: source(f, rate_bps, video)?,
        notes: notes.clone(),
    };
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
    let mut notes = std::mem::take(&mut *notes.lock().unwrap_or_else(|e| e.into_inner()));
    if !notes.ended {
        // The sender stopped before the source's end: what it noted so far.
        if notes.dues.len() % TS_PER_RTP != 0 {
            notes.noter.end_packet(&mut notes.map);
        }
        notes.noter.finish(&mut notes.map);
    }
    Ok(report(
        f,
        rate_bps,
        &outcome,
        notes,
        got,
        st,
        video.is_some(),
    ))
}

fn report(
    f: &FlowDecl,
    rate_bps: u64,
    out: &SenderOutcome,
    notes: Notes,
    got: Vec<Vec<Got>>,
    st: &Stage,
    video: bool,
) -> (FlowReport, Option<FlowVideo>) {
    let sent = out.packets;
    let rel = |t: Timestamp| Timestamp::ZERO + t.saturating_since(st.origin);
    // The stream's epoch on the run's clock: each packet left at its release or later, so the
    // earliest (send time − release) of what arrived is the epoch plus the least lateness.
    let release = |k: usize| {
        notes
            .dues
            .get(k * TS_PER_RTP + TS_PER_RTP - 1)
            .or(notes.dues.last())
            .copied()
            .unwrap_or(Duration::ZERO)
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
    };
    let video = match (video, epoch) {
        (true, Some(e)) => {
            let mut map = notes.map;
            map.epoch = rel(e);
            let refs: Vec<&[Timestamp]> = arrivals.iter().map(Vec::as_slice).collect();
            Some(view_flow(f, &mut report, &map, &refs))
        }
        _ => None,
    };
    (report, video)
}
