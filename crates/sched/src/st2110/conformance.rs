//! Receiver-side measurement of ST 2110-21 conformance: Cinst (network compatibility model)
//! and VRX (virtual receiver buffer model), per frame and overall, against both sender classes.

use super::format::{FrameFormat, Limits, Nanos, ReadSchedule};
use super::report::{ClassResult, ConformanceSummary, FrameReport, Verdict};
use super::schedule::FrameSchedule;
use metronome_time::Micros;
use metronome_time::{Distribution, MediaClock, RtpTime, RtpTsUnwrapper, Timestamp};
use std::time::Duration;

/// Buckets of the Cinst histogram at most (2 × a wide CMAX of 512 + 2).
const MAX_BUCKETS: usize = 1026;

/// One received packet of the video stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Receive time (a kernel timestamp in the driver).
    pub at: Timestamp,
    /// The RTP timestamp: the frame's epoch on the 90 kHz clock, the same in all its packets.
    pub rtp_ts: RtpTime,
    /// The RTP marker bit: the last packet of the frame (RFC 4175 §4.1).
    pub marker: bool,
}

/// How the receiver places frame epochs on its own clock.
///
/// ST 2110 senders and receivers share PTP, so a frame's epoch is known from its RTP
/// timestamp. Metronome's receiver has no common clock with the sender's run, so frame `k`
/// frames after the anchor frame begins at `anchor + ⌊k × TFRAME⌋`, `k` being the RTP
/// timestamp difference in frames (rounded: the 90 kHz timestamps are floored to ticks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpochAnchor {
    /// The frame whose RTP timestamp is `rtp_ts` began at `at` (same process, or a real
    /// common clock).
    Known {
        /// When the anchor frame's epoch was, on the receiver's clock.
        at: Timestamp,
        /// The anchor frame's RTP timestamp (90 kHz).
        rtp_ts: RtpTime,
    },
    /// The first packet received arrived `offset` after its frame's epoch: usually the
    /// declared schedule's `offset(0)`, assuming that packet was on time and the network
    /// delay is negligible (loopback). A constant delay is then absorbed by the anchor;
    /// only variation relative to the first packet is measured.
    FirstPacket {
        /// How long after its frame's epoch the first packet is assumed to have arrived.
        offset: Duration,
    },
}

impl EpochAnchor {
    /// The anchor for a receiver of a sender using `schedule`, taken from its first packet.
    pub fn first_packet_of(schedule: &FrameSchedule) -> Self {
        EpochAnchor::FirstPacket {
            offset: schedule.offset(0),
        }
    }
}

/// The frame being received.
#[derive(Clone, Copy, Debug)]
struct Open {
    rtp_ts: RtpTime,
    ext: u64,
    epoch_ns: i128,
    tpr0_ns: i128,
    received: u32,
    cinst_max: u32,
    vrx_max: i64,
    vrx_min: i64,
    first: u64,
    last: u64,
}

/// The measurement, fed one [`Arrival`] at a time. Allocation-free per packet.
pub struct Conformance {
    schedule: ReadSchedule,
    npackets: u32,
    limits: Limits,
    trs: Nanos,
    tdrain: Nanos,
    tframe: Nanos,
    rate: (u32, u32),
    troffset_ns: i128,
    anchor: EpochAnchor,
    /// (epoch in ns, extended RTP timestamp) of the anchor frame, from the first packet.
    origin: Option<(i128, u64)>,
    unwrap: RtpTsUnwrapper,
    // Network compatibility model: a bucket drained every TDRAIN on a grid from `t0`.
    t0: Option<u64>,
    last_at: u64,
    level: u32,
    drains: u64,
    open: Option<Open>,
    closed_ext: Option<u64>,
    last_frame: Option<FrameReport>,
    frames: u64,
    incomplete: u64,
    packets: u64,
    stray: u64,
    cinst_max: u32,
    hist: Vec<u64>,
    vrx_max: i64,
    vrx_min: i64,
    narrow_bad: u64,
    wide_bad: u64,
    spread: Distribution,
    latency: Distribution,
}

impl Conformance {
    /// A receiver judging `format` against the `schedule` read schedule.
    pub fn new(format: &FrameFormat, schedule: ReadSchedule, anchor: EpochAnchor) -> Self {
        let limits = format.limits(schedule);
        Conformance {
            schedule,
            npackets: format.npackets(),
            limits,
            trs: format.trs_exact(schedule),
            tdrain: format.tdrain_exact(),
            tframe: format.rate().tframe(),
            rate: (format.rate().num(), format.rate().den()),
            troffset_ns: format.troffset().as_nanos() as i128,
            anchor,
            origin: None,
            unwrap: RtpTsUnwrapper::new(),
            t0: None,
            last_at: 0,
            level: 0,
            drains: 0,
            open: None,
            closed_ext: None,
            last_frame: None,
            frames: 0,
            incomplete: 0,
            packets: 0,
            stray: 0,
            cinst_max: 0,
            hist: vec![0; (2 * limits.cmax_wide as usize + 2).min(MAX_BUCKETS)],
            vrx_max: i64::MIN,
            vrx_min: i64::MAX,
            narrow_bad: 0,
            wide_bad: 0,
            spread: Distribution::new(),
            latency: Distribution::new(),
        }
    }
    /// A receiver of a sender using `schedule`, judged on that sender type's read schedule.
    pub fn for_sender(schedule: &FrameSchedule, anchor: EpochAnchor) -> Self {
        Conformance::new(schedule.format(), schedule.read_schedule(), anchor)
    }
    /// CMAX and VRX_FULL of both sender classes for the format and read schedule judged.
    pub fn limits(&self) -> Limits {
        self.limits
    }
    /// The frame closed most recently.
    pub fn last_frame(&self) -> Option<&FrameReport> {
        self.last_frame.as_ref()
    }

    /// Takes one packet. Returns the report of the frame this packet closed: its own (it
    /// carries the marker) or the previous one (this packet opens a newer frame before the
    /// previous frame's marker came). Both are counted either way; `last_frame` has the newer.
    pub fn on_packet(&mut self, a: Arrival) -> Option<FrameReport> {
        let t = a.at.as_nanos().max(self.last_at);
        let ext = self.unwrap.unwrap_rtp(a.rtp_ts);
        if self.origin.is_none() {
            self.origin = Some(self.resolve_anchor(a, ext));
        }
        self.packets += 1;
        let cinst = self.network_model(t);
        let mut closed = None;
        match self.open {
            Some(f) if ext == f.ext => {}
            Some(f) if ext < f.ext => return self.stray_packet(),
            Some(_) => closed = self.close(false),
            None if self.closed_ext.is_some_and(|c| ext <= c) => return self.stray_packet(),
            None => {}
        }
        if self.open.is_none() {
            self.open = Some(self.open_frame(a.rtp_ts, ext, t));
        }
        let Some(f) = self.open.as_mut() else {
            return closed;
        };
        f.received = f.received.saturating_add(1);
        f.last = t;
        f.cinst_max = f.cinst_max.max(cinst);
        // VRX: packets arrived minus packets read; reads at TPR0 + j × TRS, j < NPACKETS.
        let since = t as i128 - f.tpr0_ns;
        let reads = if since < 0 {
            0
        } else {
            (self.trs.periods_in(since as u64) + 1).min(self.npackets as u64)
        };
        let vrx = f.received as i64 - reads as i64;
        f.vrx_max = f.vrx_max.max(vrx);
        f.vrx_min = f.vrx_min.min(vrx);
        if a.marker {
            closed = self.close(true);
        }
        closed
    }

    /// Closes the frame in progress (the end of a measurement), as incomplete.
    pub fn finish(&mut self) -> Option<FrameReport> {
        self.close(false)
    }

    /// Everything measured so far, with the verdict. The frame in progress is not counted;
    /// call [`Conformance::finish`] first to include it.
    pub fn summary(&self) -> ConformanceSummary {
        let class = |cmax, vrx_full, bad| ClassResult {
            cmax,
            vrx_full,
            violating_frames: bad,
            conformant: self.frames > 0 && bad == 0,
        };
        let narrow = class(
            self.limits.cmax_narrow,
            self.limits.vrx_full_narrow,
            self.narrow_bad,
        );
        let wide = class(
            self.limits.cmax_wide,
            self.limits.vrx_full_wide,
            self.wide_bad,
        );
        let verdict = match (self.frames, narrow.conformant, wide.conformant) {
            (0, _, _) => Verdict::NoFrames,
            (_, true, _) if self.schedule == ReadSchedule::Gapped => Verdict::Narrow,
            (_, true, _) => Verdict::NarrowLinear,
            (_, false, true) => Verdict::Wide,
            _ => Verdict::NotConformant,
        };
        let measured = self.frames > 0;
        ConformanceSummary {
            read_schedule: self.schedule,
            npackets: self.npackets,
            trs_us: Micros::from_micros_f64(self.trs.as_f64() / 1e3),
            tdrain_us: Micros::from_micros_f64(self.tdrain.as_f64() / 1e3),
            troffset_us: Micros::from_nanos(self.troffset_ns as i64),
            frames: self.frames,
            incomplete_frames: self.incomplete,
            packets: self.packets,
            stray_packets: self.stray,
            cinst_max: self.cinst_max,
            cinst_histogram: self.hist.clone(),
            vrx_max: if measured { self.vrx_max } else { 0 },
            vrx_min: if measured { self.vrx_min } else { 0 },
            narrow,
            wide,
            verdict,
            spread: self.spread.summary(),
            latency: self.latency.summary(),
        }
    }

    fn resolve_anchor(&self, a: Arrival, ext: u64) -> (i128, u64) {
        match self.anchor {
            EpochAnchor::Known { at, rtp_ts } => {
                let delta = i64::from(rtp_ts.delta(a.rtp_ts));
                (at.as_nanos() as i128, ext.saturating_add_signed(delta))
            }
            EpochAnchor::FirstPacket { offset } => {
                (a.at.as_nanos() as i128 - offset.as_nanos() as i128, ext)
            }
        }
    }

    /// The network compatibility model: the bucket level this packet finds (packets still
    /// queued ahead of it), after the drains since the previous packet.
    fn network_model(&mut self, t: u64) -> u32 {
        let t0 = *self.t0.get_or_insert(t);
        let drains = self.tdrain.periods_in(t - t0);
        let drained = drains - self.drains;
        let cinst = u32::try_from((self.level as u64).saturating_sub(drained)).unwrap_or(0);
        self.level = cinst.saturating_add(1);
        self.drains = drains;
        self.last_at = t;
        self.cinst_max = self.cinst_max.max(cinst);
        let last = self.hist.len() - 1;
        self.hist[(cinst as usize).min(last)] += 1;
        cinst
    }

    fn stray_packet(&mut self) -> Option<FrameReport> {
        self.stray += 1;
        None
    }

    fn open_frame(&self, rtp_ts: RtpTime, ext: u64, t: u64) -> Open {
        let (epoch0, ext0) = self.origin.unwrap_or((0, ext));
        // Frames since the anchor: Δticks / (90000 × den / num), rounded to nearest.
        let (num, den) = self.rate;
        let k = MediaClock::VIDEO_90K.frames_nearest(ext as i128 - ext0 as i128, num, den);
        let epoch_ns = epoch0 + self.tframe.times_floor(k);
        Open {
            rtp_ts,
            ext,
            epoch_ns,
            tpr0_ns: epoch_ns + self.troffset_ns,
            received: 0,
            cinst_max: 0,
            vrx_max: i64::MIN,
            vrx_min: i64::MAX,
            first: t,
            last: t,
        }
    }

    fn close(&mut self, complete: bool) -> Option<FrameReport> {
        let f = self.open.take()?;
        let l = self.limits;
        let ok = |cmax: u32, vrx_full: u32| {
            f.cinst_max <= cmax && f.vrx_max <= vrx_full as i64 && f.vrx_min >= 0
        };
        let clamp = |ns: i128| ns.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        let r = FrameReport {
            rtp_ts: f.rtp_ts,
            packets: f.received,
            complete,
            cinst_max: f.cinst_max,
            vrx_max: f.vrx_max,
            vrx_min: f.vrx_min,
            first_offset_ns: clamp(f.first as i128 - f.epoch_ns),
            last_offset_ns: clamp(f.last as i128 - f.epoch_ns),
            spread_ns: f.last - f.first,
            narrow: ok(l.cmax_narrow, l.vrx_full_narrow),
            wide: ok(l.cmax_wide, l.vrx_full_wide),
        };
        self.frames += 1;
        self.incomplete += u64::from(!complete);
        self.narrow_bad += u64::from(!r.narrow);
        self.wide_bad += u64::from(!r.wide);
        self.vrx_max = self.vrx_max.max(r.vrx_max);
        self.vrx_min = self.vrx_min.min(r.vrx_min);
        self.spread.record(r.spread_ns);
        self.latency.record(r.last_offset_ns.max(0) as u64);
        self.closed_ext = Some(f.ext);
        self.last_frame = Some(r);
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::st2110::FrameRate;

    #[test]
    fn bucket_and_virtual_buffer_by_hand() {
        // 1000 fps, 10 packets: linear TRS 100 µs, TDRAIN 90.9 µs, TPR0 at 38.222 µs.
        let f = FrameFormat::new(FrameRate::new(1000, 1), 10, 1080);
        let anchor = EpochAnchor::Known {
            at: Timestamp::ZERO,
            rtp_ts: RtpTime(0),
        };
        let mut c = Conformance::new(&f, ReadSchedule::Linear, anchor);
        let mut feed = |us, marker| {
            c.on_packet(Arrival {
                at: Timestamp::from_micros(us),
                rtp_ts: RtpTime(0),
                marker,
            })
        };
        // Cinst 0, 1, 2 at once; at 100 µs one drain (level 3 → 2); at 300 µs two more (→ 1).
        // VRX 1, 2, 3; then 4 − 1 read = 3; then 5 − 3 reads = 2.
        for (us, marker) in [(0, false), (0, false), (0, false), (100, false)] {
            assert!(feed(us, marker).is_none());
        }
        let r = feed(300, true).unwrap();
        assert_eq!((r.cinst_max, r.vrx_max, r.vrx_min), (2, 3, 1));
        assert_eq!((r.first_offset_ns, r.last_offset_ns), (0, 300_000));
        assert!(r.narrow && r.wide && r.complete);
        let s = c.summary();
        assert_eq!(&s.cinst_histogram[..4], &[1, 2, 2, 0]);
        assert_eq!(s.verdict, Verdict::NarrowLinear);
    }
}
