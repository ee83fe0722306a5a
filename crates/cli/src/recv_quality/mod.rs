//! `metronome recv … --quality REFERENCE`: what a viewer of the live stream saw, judged against
//! the reference video, frame by frame.
//!
//! While the stream runs, every accepted RTP payload goes to a [`LiveViewer`] on the receiving
//! thread: a packet in sequence is taken at once, without a copy; after a gap, a short reorder
//! window puts packets back in sequence order, and a gap in the sequence numbers marks the
//! frame being assembled as damaged. MPEG-TS payloads go through the demuxer, whose PES
//! packets become access units (PTS from the PES header); coded video straight over RTP (an
//! SDP's MP4V-ES or H264) goes through `metronome_media::payload::depay` (a frame per RTP
//! timestamp, its presentation time). Each frame keeps the time its last packet arrived; the
//! coded frames are kept, up to [`MAX_CODED_BYTES`].
//!
//! At the end, a frame's display slot is its PTS, counted in frames of the reference's rate
//! from the earliest frame received (`--reference-start` skips reference frames, for a
//! receiver that joined late); frames came in decode order, which B-frames make another.
//! Evalvid's rules make the screen: a frame with a packet missing is lost; with
//! `--playout-deadline`, slot `j` is on screen at the first frame's arrival plus `j` frame
//! intervals plus the deadline (a player's buffer of that length), and seed 002's rule
//! decides what a late frame becomes. The frames that reached the player are decoded by
//! FFmpeg's decoder in decode order (H.264 of any profile or MPEG-4 Part 2, B-frames included,
//! with its error concealment; the SDP's configuration given to it), and each slot's picture
//! is compared with the reference's frame: PSNR, SSIM, MOS.
//!
//! Frame delay here is relative: from the first frame's arrival plus its slot's share of time,
//! as a receiver without the sender's clock can tell it (the cumulative jitter, seed 002's
//! Eq. 3–4, needs only differences and is exact).

use metronome_apps::receiver::PayloadSink;
use metronome_media::decode::{VideoCodec, VideoDecoder};
use metronome_media::demux::VideoDemux;
use metronome_media::encode::frame_type;
use metronome_media::payload::depay::FrameDepayloader;
use metronome_quality::compare;
use metronome_quality::playout::{
    reconstruct, FrameType, LateRule, Playout, Reconstruction, SentFrame,
};
use metronome_quality::psnr::{self, RunPsnr};
use metronome_quality::ssim::FrameSsim;
use metronome_quality::viewer::play;
use metronome_quality::y4m::Reader;
use metronome_quality::{mos, Chroma, Picture};
use metronome_session::receiver::PacketRecord;
use metronome_time::Micros;
use metronome_time::{RtpTime, RtpTsUnwrapper, Timestamp};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};

/// Packets held back to put reordered ones in sequence.
const REORDER_WINDOW: usize = 128;
/// Coded frames kept for the judgement at the end, bytes (about 15 minutes at 10 Mbit/s).
pub(crate) const MAX_CODED_BYTES: usize = 1 << 30;
/// Frames kept at most (a day at 60 fps is far beyond).
const MAX_FRAMES: usize = 1 << 22;

/// One access unit as it arrived.
struct Received {
    pts_90k: u64,
    data: Vec<u8>,
    damaged: bool,
    complete: Timestamp,
}

/// Collects the live stream's frames (see the module's documentation).
pub(crate) struct LiveViewer {
    ssrc: Option<metronome_wire::Ssrc>,
    pending: BTreeMap<u64, Pending>,
    next_seq: Option<u64>,
    assembly: Assembly,
    frames: Vec<Received>,
    kept_bytes: usize,
    counts: LiveCounts,
}

/// A packet held back to be put in sequence.
struct Pending {
    at: Timestamp,
    rtp_ts: RtpTime,
    marker: bool,
    payload: Vec<u8>,
}

/// How payloads become frames.
enum Assembly {
    /// MPEG-TS: the video's PES packets become access units; `last_video` is when the last
    /// TS packet of the video PID arrived (the open access unit's end so far).
    Ts {
        demux: VideoDemux,
        last_video: Option<Timestamp>,
    },
    /// Coded frames straight over RTP (RFC 6416, RFC 6184), each frame's presentation time
    /// its RTP timestamp extended to 64 bits (`unwrapped`); `config` the SDP's.
    Frames {
        depay: FrameDepayloader,
        config: Option<Vec<u8>>,
        unwrapped: RtpTsUnwrapper,
        last_at: Option<Timestamp>,
    },
}

impl Assembly {
    fn codec(&self) -> VideoCodec {
        match self {
            Assembly::Ts { .. } => VideoCodec::H264,
            Assembly::Frames { depay, .. } => depay.codec(),
        }
    }
}

/// What the viewer counted while receiving.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct LiveCounts {
    /// Packets of another SSRC than the first one seen (not judged).
    pub other_source_packets: u64,
    /// Packets that came after the reorder window had moved past them.
    pub too_late_packets: u64,
    /// Gaps in the sequence numbers (packets lost).
    pub gaps: u64,
    /// Payloads that were not whole TS packets, or malformed RTP payloads of coded video.
    pub bad_payloads: u64,
    /// Access units without a PTS (not placed).
    pub without_pts: u64,
    /// Frames not kept because the budget was spent.
    pub over_budget: u64,
}

impl Default for LiveViewer {
    /// A viewer of MPEG-TS.
    fn default() -> Self {
        LiveViewer::with(Assembly::Ts {
            demux: VideoDemux::new(),
            last_video: None,
        })
    }
}

impl PayloadSink for LiveViewer {
    fn payload(&mut self, rec: &PacketRecord, payload: &[u8]) {
        let (ssrc, ext_seq, arrival) = (rec.ssrc, rec.ext_seq, rec.arrival);
        let (rtp_ts, marker) = (rec.rtp_ts, rec.marker);
        if *self.ssrc.get_or_insert(ssrc) != ssrc {
            self.counts.other_source_packets += 1;
            return;
        }
        if self.next_seq.is_some_and(|n| ext_seq < n) {
            self.counts.too_late_packets += 1;
            return;
        }
        // In sequence with what was taken, nothing held: taken at once, without a copy.
        if self.pending.is_empty() && self.next_seq == Some(ext_seq) {
            self.take(ext_seq, arrival, rtp_ts, marker, payload);
            return;
        }
        let held = Pending {
            at: arrival,
            rtp_ts,
            marker,
            payload: payload.to_vec(),
        };
        self.pending.insert(ext_seq, held);
        while self.pending.len() > REORDER_WINDOW {
            self.flush_one();
        }
        // What now follows on from what was taken waits no longer.
        while self
            .next_seq
            .is_some_and(|n| self.pending.first_key_value().is_some_and(|(k, _)| *k == n))
        {
            self.flush_one();
        }
    }
}

impl LiveViewer {
    fn with(assembly: Assembly) -> Self {
        LiveViewer {
            ssrc: None,
            pending: BTreeMap::new(),
            next_seq: None,
            assembly,
            frames: Vec::new(),
            kept_bytes: 0,
            counts: LiveCounts::default(),
        }
    }

    /// A viewer of `codec` frames straight over RTP, `config` the SDP's (MPEG-4's VOL
    /// headers, H.264's parameter sets) if it gives one.
    pub(crate) fn coded(codec: VideoCodec, config: Option<Vec<u8>>) -> Self {
        LiveViewer::with(Assembly::Frames {
            depay: FrameDepayloader::new(codec),
            config,
            unwrapped: RtpTsUnwrapper::new(),
            last_at: None,
        })
    }

    fn flush_one(&mut self) {
        if let Some((seq, p)) = self.pending.pop_first() {
            self.take(seq, p.at, p.rtp_ts, p.marker, &p.payload);
        }
    }

    /// Packet `seq`'s payload, in sequence order: a gap before it damages the frame being
    /// assembled; the payload goes to the demuxer or the depayloader.
    fn take(&mut self, seq: u64, at: Timestamp, rtp_ts: RtpTime, marker: bool, payload: &[u8]) {
        let gap = self.next_seq.is_some_and(|n| seq > n);
        if gap {
            self.counts.gaps += 1;
        }
        self.next_seq = Some(seq + 1);
        let mut done = Vec::new();
        match &mut self.assembly {
            Assembly::Ts { demux, last_video } => {
                if gap {
                    demux.lost();
                }
                if payload.len() % 188 != 0 {
                    self.counts.bad_payloads += 1;
                }
                for ts in payload.chunks_exact(188) {
                    let video = demux.pid().is_some_and(|pid| {
                        u16::from_be_bytes([ts[1] & 0x1f, ts[2]]) == pid && ts[0] == 0x47
                    });
                    if let Some(au) = demux.push(ts) {
                        done.push((au.pts_90k, au.data, au.damaged, last_video.unwrap_or(at)));
                    }
                    if video {
                        *last_video = Some(at);
                    }
                }
            }
            Assembly::Frames {
                depay,
                unwrapped,
                last_at,
                ..
            } => {
                if gap {
                    depay.lost();
                }
                let malformed = depay.malformed();
                for f in depay.push(rtp_ts, marker, payload) {
                    // Ended by its marker (this packet), or by this packet's new timestamp.
                    let complete = if f.rtp_ts == rtp_ts {
                        at
                    } else {
                        last_at.unwrap_or(at)
                    };
                    let pts = unwrapped.unwrap_rtp(f.rtp_ts);
                    done.push((Some(pts), f.data, f.damaged, complete));
                }
                self.counts.bad_payloads += depay.malformed() - malformed;
                *last_at = Some(at);
            }
        }
        for (pts, data, damaged, complete) in done {
            self.keep(pts, data, damaged, complete);
        }
    }

    fn keep(&mut self, pts_90k: Option<u64>, data: Vec<u8>, damaged: bool, complete: Timestamp) {
        let Some(pts_90k) = pts_90k else {
            self.counts.without_pts += 1;
            return;
        };
        if self.kept_bytes + data.len() > MAX_CODED_BYTES || self.frames.len() >= MAX_FRAMES {
            self.counts.over_budget += 1;
            return;
        }
        self.kept_bytes += data.len();
        self.frames.push(Received {
            pts_90k,
            data,
            damaged,
            complete,
        });
    }

    /// The stream ended: what is held back goes through, the last frame completes.
    fn finish(&mut self) {
        while !self.pending.is_empty() {
            self.flush_one();
        }
        let last = match &mut self.assembly {
            Assembly::Ts { demux, last_video } => demux.finish().map(|au| {
                (
                    au.pts_90k,
                    au.data,
                    au.damaged,
                    last_video.unwrap_or(Timestamp::ZERO),
                )
            }),
            Assembly::Frames {
                depay,
                unwrapped,
                last_at,
                ..
            } => depay.finish().map(|f| {
                let pts = unwrapped.unwrap_rtp(f.rtp_ts);
                (
                    Some(pts),
                    f.data,
                    f.damaged,
                    last_at.unwrap_or(Timestamp::ZERO),
                )
            }),
        };
        if let Some((pts, data, damaged, complete)) = last {
            self.keep(pts, data, damaged, complete);
        }
    }

    /// Whether the video was found: MPEG-TS's H.264 stream (a PMT with stream type 0x1b), or
    /// any coded frame.
    fn video_found(&self) -> bool {
        match &self.assembly {
            Assembly::Ts { demux, .. } => demux.stream_type() == Some(0x1b),
            Assembly::Frames { .. } => !self.frames.is_empty(),
        }
    }

    /// The decoder's out-of-band configuration, if the stream has one.
    fn config(&self) -> Option<&[u8]> {
        match &self.assembly {
            Assembly::Frames { config, .. } => config.as_deref(),
            Assembly::Ts { .. } => None,
        }
    }
}

/// How the frames are played out and placed.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct JudgeOptions {
    pub deadline_ns: Option<u64>,
    pub late: LateRule,
    /// Reference frames to skip before the first frame received.
    pub reference_start: u64,
}

/// The judgement of a live run: what `recv --json` adds as `quality`.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct LiveQuality {
    pub reference: String,
    /// Display slots judged (from the first frame received to the last, or the reference's end).
    pub frames: u64,
    /// Frames lost (never shown), by type: I, P, other (never arrived, type unknown).
    pub frames_lost: u64,
    pub frames_lost_i: u64,
    pub frames_lost_p: u64,
    pub frames_lost_unknown: u64,
    pub frames_missed_deadline: u64,
    /// Frames whose packets all arrived but decoded to no picture.
    pub undecodable: u64,
    /// The PSNR of the slots' mean MSE (FFmpeg's), and the mean of the slots' PSNRs (Evalvid's,
    /// each capped at `psnr_cap_db`).
    pub psnr_global: RunPsnr,
    pub psnr_mean: RunPsnr,
    pub psnr_cap_db: f64,
    pub ssim: FrameSsim,
    pub mos_mean: f64,
    pub mos_frames: [u64; 5],
    /// Mean and largest frame delay relative to the first frame (see the module).
    pub mean_relative_delay_us: Micros,
    pub max_cumulative_jitter_us: Micros,
    /// The video's H.264 stream was found (a PMT with stream type 0x1b).
    pub video_found: bool,
    pub counts: LiveCounts,
}

/// Per-frame CSV header (`--quality-frames`).
pub(crate) const FRAMES_HEADER: &str = "frame,type,shown_frame,arrived,relative_delay_ns,cumulative_jitter_ns,missed_deadline,psnr_y_db,psnr_yuv_db,ssim,mos";

/// Where the video as the viewer saw it goes: Y4M (the reference's format), or raw planar
/// 4:2:0 (`.yuv`).
pub(crate) struct ShownVideo<'a> {
    pub out: &'a mut dyn Write,
    pub y4m: bool,
}

/// Judges what `viewer` collected against `reference` (read frame by frame); writes a CSV row
/// per slot to `frames`, and every slot's picture to `shown`, if given.
pub(crate) fn judge<'a, R: BufRead>(
    viewer: &mut LiveViewer,
    mut reference: Reader<R>,
    reference_name: &'a str,
    opts: JudgeOptions,
    frames: Option<&'a mut dyn Write>,
    shown_video: Option<ShownVideo<'a>>,
) -> Result<LiveQuality, String> {
    viewer.finish();
    let fmt = reference.format();
    let mut out = LiveQuality {
        reference: reference_name.to_string(),
        psnr_cap_db: psnr::CAP_DB,
        video_found: viewer.video_found(),
        counts: viewer.counts,
        ..LiveQuality::default()
    };
    if fmt.chroma != Chroma::C420 {
        return Err(format!(
            "{reference_name}: the reference is {}, the decoder makes 4:2:0: convert it (ffmpeg -i REF -pix_fmt yuv420p ref.y4m)",
            fmt.chroma.y4m_name()
        ));
    }
    let Some(slots) = Slots::of(viewer, fmt.fps) else {
        return Ok(out);
    };
    let playout = Playout {
        deadline_ns: opts.deadline_ns,
        late: opts.late,
        ..Playout::default()
    };
    let rec = reconstruct(&slots.sent, &slots.arrivals, playout);
    // The reference, from its first frame the stream is compared with.
    let mut reference_pic = Picture::black(fmt.width, fmt.height, Chroma::C420);
    for _ in 0..opts.reference_start {
        if !reference
            .next_into(&mut reference_pic)
            .map_err(|e| format!("{reference_name}: {e}"))?
        {
            return Err(format!(
                "{reference_name}: --reference-start {} is past its end",
                opts.reference_start
            ));
        }
    }
    let codec = viewer.assembly.codec();
    let mut decoder = VideoDecoder::new(codec, viewer.config()).map_err(|e| e.to_string())?;
    let video = match shown_video {
        Some(v) if v.y4m => Some(Sink::Y4m(
            metronome_quality::y4m::Writer::new(v.out, fmt)
                .map_err(|e| format!("cannot write the shown video: {e}"))?,
        )),
        Some(v) => Some(Sink::Raw(v.out)),
        None => None,
    };
    let mut scorer = Scorer::new(reference, reference_name, reference_pic, video, frames);
    let blank = Picture::black(fmt.width, fmt.height, Chroma::C420);
    let stats = play(
        &slots.sent,
        &rec,
        playout,
        &slots.coded,
        &slots.order,
        &mut decoder,
        &blank,
        |j, shown| scorer.frame(j, shown, &blank, (&rec, &slots.sent)),
    );
    if let Some(e) = scorer.failure.take() {
        return Err(e);
    }
    out.undecodable = stats.undecodable;
    scorer.fill(&mut out, &rec, &slots.sent);
    Ok(out)
}

/// The display slots from a viewer's first frame to its last: what the stream was to send in
/// each (frames made from what arrived), and in what order the decoder gets them.
struct Slots<'v> {
    /// Each slot's frame as sent: its type, size and when it was due (the first frame's
    /// completion plus the slot's frame interval).
    sent: Vec<SentFrame>,
    /// Each slot's coded frame (empty where nothing came).
    coded: Vec<&'v [u8]>,
    /// The slots in the order their frames came: the decode order.
    order: Vec<u32>,
    /// (slot, completion in ns) of each undamaged frame.
    arrivals: Vec<(u64, u64)>,
}

impl<'v> Slots<'v> {
    /// `None` when no frame came.
    fn of(viewer: &'v LiveViewer, fps: (u32, u32)) -> Option<Self> {
        let (num, den) = (u64::from(fps.0.max(1)), u64::from(fps.1.max(1)));
        // One frame in 90 kHz ticks, and in ns.
        let tick_frame = |ticks: u64| (ticks * num + 45_000 * den) / (90_000 * den);
        let interval_ns = 1_000_000_000 * den / num;
        let a0 = viewer.frames.first()?.complete;
        let (slot_of, slots) = display_slots(&viewer.frames, tick_frame);
        let codec = viewer.assembly.codec();
        let mut s = Slots {
            sent: (0..slots)
                .map(|k| SentFrame {
                    kind: FrameType::Other,
                    size_bytes: 0,
                    packets: vec![k as u64],
                    send_ns: (a0 + std::time::Duration::from_nanos(k as u64 * interval_ns))
                        .as_nanos(),
                })
                .collect(),
            coded: vec![&[]; slots],
            order: Vec::with_capacity(viewer.frames.len()),
            arrivals: Vec::new(),
        };
        for (f, slot) in viewer.frames.iter().zip(&slot_of) {
            let Some(k) = slot.map(|k| k as usize).filter(|&k| k < slots) else {
                continue;
            };
            s.order.push(k as u32);
            s.sent[k].kind = frame_type(codec, &f.data);
            s.sent[k].size_bytes = f.data.len() as u32;
            s.coded[k] = &f.data;
            if !f.damaged {
                s.arrivals.push((k as u64, f.complete.as_nanos()));
            }
        }
        Some(s)
    }
}

/// Scores each shown picture against the reference's next one, as the player shows it, and
/// writes the per-frame CSV row and the shown video.
struct Scorer<'a, R: BufRead> {
    reference: Reader<R>,
    reference_name: &'a str,
    reference_pic: Picture,
    video: Option<Sink<'a>>,
    frames: Option<&'a mut dyn Write>,
    totals: psnr::Totals,
    ssim_sum: FrameSsim,
    mos_all: Vec<u8>,
    /// The slot where the reference ended, if it did.
    ended_at: Option<usize>,
    failure: Option<String>,
}

impl<'a, R: BufRead> Scorer<'a, R> {
    fn new(
        reference: Reader<R>,
        reference_name: &'a str,
        reference_pic: Picture,
        video: Option<Sink<'a>>,
        frames: Option<&'a mut dyn Write>,
    ) -> Self {
        Scorer {
            reference,
            reference_name,
            reference_pic,
            video,
            frames,
            totals: psnr::Totals::default(),
            ssim_sum: FrameSsim::default(),
            mos_all: Vec::new(),
            ended_at: None,
            failure: None,
        }
    }

    /// Slot `j` showed `shown` (a picture of another format than the reference's stops the
    /// judgement: [`Self::failure`]).
    fn frame(
        &mut self,
        j: usize,
        shown: &Picture,
        blank: &Picture,
        (rec, sent): (&Reconstruction, &[SentFrame]),
    ) {
        if self.ended_at.is_some() || self.failure.is_some() {
            return;
        }
        match self.reference.next_into(&mut self.reference_pic) {
            Ok(true) => {}
            Ok(false) => {
                self.ended_at = Some(j);
                return;
            }
            Err(e) => {
                self.failure = Some(format!("{}: {e}", self.reference_name));
                return;
            }
        }
        // Until the first picture comes the screen is blank, of the reference's format; a
        // decoded picture of another one cannot be compared, and numbers made against blank
        // would be meaningless: the run's judgement stops with why.
        if !shown.same_format(&self.reference_pic) {
            let r = &self.reference_pic;
            self.failure = Some(format!(
                "{}: the reference is {}x{} {}, the stream's pictures are {}x{} {} (first at \
                 display slot {j}): nothing can be compared; give a reference of the stream's \
                 size and sampling (ffmpeg -i REF -vf scale={}:{} -pix_fmt yuv420p ref.y4m)",
                self.reference_name,
                r.width,
                r.height,
                r.chroma.y4m_name(),
                shown.width,
                shown.height,
                shown.chroma.y4m_name(),
                shown.width,
                shown.height
            ));
            return;
        }
        let picture = shown;
        let written = match self.video.as_mut() {
            Some(Sink::Y4m(w)) => w.write(picture),
            Some(Sink::Raw(w)) => w.write_all(&picture.data),
            None => Ok(()),
        };
        if let Err(e) = written {
            self.failure = Some(format!("cannot write the shown video: {e}"));
            return;
        }
        let q = compare::frame(&self.reference_pic, picture, j as u64);
        self.totals.add(&q.psnr, psnr::plane_share(blank));
        self.ssim_sum.y += q.ssim.y;
        self.ssim_sum.u += q.ssim.u;
        self.ssim_sum.v += q.ssim.v;
        self.ssim_sum.all += q.ssim.all;
        self.mos_all.push(q.mos);
        if let Some(w) = self.frames.as_mut() {
            let f = &rec.frames[j];
            let opt = |v: Option<i64>| v.map(|d| d.to_string()).unwrap_or_default();
            let _ = writeln!(
                w,
                "{j},{},{},{},{},{},{},{:.3},{:.3},{:.6},{}",
                f.kind.letter(),
                rec.slots[j].map(|k| k.to_string()).unwrap_or_default(),
                u8::from(f.arrived),
                opt(f.complete_ns.map(|c| c as i64 - sent[j].send_ns as i64)),
                opt(f.cumulative_jitter_ns),
                u8::from(f.missed_deadline),
                q.psnr.y_db,
                q.psnr.yuv_db,
                q.ssim.all,
                q.mos
            );
        }
    }

    /// The run's figures over the slots judged (up to where the reference ended).
    fn fill(&self, out: &mut LiveQuality, rec: &Reconstruction, sent: &[SentFrame]) {
        let judged = self.mos_all.len();
        let n = judged.max(1) as f64;
        let frames = &rec.frames[..judged.min(rec.frames.len())];
        out.frames = judged as u64;
        for f in frames.iter().filter(|f| !f.shown) {
            out.frames_lost += 1;
            match f.kind {
                FrameType::I => out.frames_lost_i += 1,
                FrameType::P | FrameType::B => out.frames_lost_p += 1,
                FrameType::Other => out.frames_lost_unknown += 1,
            }
        }
        out.frames_missed_deadline = frames.iter().filter(|f| f.missed_deadline).count() as u64;
        out.psnr_global = self.totals.global();
        out.psnr_mean = self.totals.mean();
        out.ssim = FrameSsim {
            y: self.ssim_sum.y / n,
            u: self.ssim_sum.u / n,
            v: self.ssim_sum.v / n,
            all: self.ssim_sum.all / n,
        };
        out.mos_mean = self.mos_all.iter().map(|m| f64::from(*m)).sum::<f64>() / n;
        out.mos_frames = mos::distribution(&self.mos_all);
        let delays: Vec<i64> = frames
            .iter()
            .zip(sent)
            .filter_map(|(f, s)| f.complete_ns.map(|c| c as i64 - s.send_ns as i64))
            .collect();
        out.mean_relative_delay_us = Micros::from_nanos(if delays.is_empty() {
            0
        } else {
            delays.iter().sum::<i64>() / delays.len() as i64
        });
        out.max_cumulative_jitter_us = Micros::from_nanos(
            frames
                .iter()
                .filter_map(|f| f.cumulative_jitter_ns)
                .max()
                .unwrap_or(0),
        );
    }
}

/// Each received frame's display slot (its PTS in frames from the earliest, B-frames that
/// come after the frames they precede included), and how many slots there are. A frame whose
/// slot another took already, or that lies too far from the first, is not placed.
fn display_slots(
    frames: &[Received],
    tick_frame: impl Fn(u64) -> u64,
) -> (Vec<Option<u64>>, usize) {
    const PTS_BITS: u32 = 33;
    let Some(first) = frames.first() else {
        return (Vec::new(), 0);
    };
    // PTS from the first frame's, unwrapped: a step is a signed 33-bit difference.
    let mut rel = Vec::with_capacity(frames.len());
    let (mut last, mut at) = (first.pts_90k, 0i64);
    for f in frames {
        let step = f.pts_90k.wrapping_sub(last) & ((1 << PTS_BITS) - 1);
        let step = if step >= 1 << (PTS_BITS - 1) {
            step as i64 - (1 << PTS_BITS)
        } else {
            step as i64
        };
        at += step;
        last = f.pts_90k;
        rel.push(at);
    }
    let lowest = rel.iter().copied().min().unwrap_or(0);
    let mut taken = std::collections::HashSet::new();
    let slot_of: Vec<Option<u64>> = rel
        .iter()
        .map(|&r| {
            let k = tick_frame((r - lowest) as u64);
            (k < MAX_FRAMES as u64 && taken.insert(k)).then_some(k)
        })
        .collect();
    let slots = slot_of.iter().flatten().max().map_or(0, |m| m + 1) as usize;
    (slot_of, slots)
}

enum Sink<'a> {
    Y4m(metronome_quality::y4m::Writer<&'a mut dyn Write>),
    Raw(&'a mut dyn Write),
}

/// The judgement in words, for the terminal.
pub(crate) fn human(q: &LiveQuality) -> String {
    if q.frames == 0 {
        return format!(
            "quality: no video frame was received to judge against {}{}\n",
            q.reference,
            if q.video_found {
                ""
            } else {
                " (no H.264 stream was found in the MPEG-TS)"
            }
        );
    }
    format!(
        "quality against {}: {} frames, {} lost (I {}, P {}, never arrived {}), {} missed the play-out deadline, {} undecodable\n  \
         PSNR Y {:.2} dB (mean of frames; {:.2} of the mean MSE), YUV {:.2} dB; SSIM {:.4}; MOS {:.2} (frames at MOS 1..5: {:?})\n  \
         cumulative jitter at most {:.1} ms\n",
        q.reference,
        q.frames,
        q.frames_lost,
        q.frames_lost_i,
        q.frames_lost_p,
        q.frames_lost_unknown,
        q.frames_missed_deadline,
        q.undecodable,
        q.psnr_mean.y_db,
        q.psnr_global.y_db,
        q.psnr_mean.yuv_db,
        q.ssim.all,
        q.mos_mean,
        q.mos_frames,
        q.max_cumulative_jitter_us.as_millis_f64()
    )
}

#[cfg(test)]
mod tests;
