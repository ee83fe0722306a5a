//! RTP packets of raw video (RFC 4175) back into frames, sans-IO.
//!
//! One depayloader per stream (the driver filters the SSRC). It owns two pre-allocated frames:
//! the one being reassembled and the last one finished, which [`RawDepayloader::frame`] lends
//! out. Every segment of a packet is checked before any byte is copied (line and offset inside
//! the frame and aligned to the pgroup, length a whole number of pgroups that stays in its
//! line: RFC 4175 §4.1, §4.3), so a malformed packet is dropped whole, counted by its reason,
//! and never writes outside the frame. A frame ends at its marker (§4.1) or when a packet of a
//! newer timestamp arrives; it is complete when every pgroup arrived. Nothing allocates per
//! packet.

use super::coverage::Coverage;
use super::events::{FrameComplete, FrameLost, FramePartial, RawEvent, RawEvents};
use metronome_time::{MediaClock, RtpTime, Timestamp};
use metronome_video::{RawFrame, VideoFormat};
use metronome_wire::rfc4175::{Rfc4175Error, Rfc4175View, SegmentHeader, CAPTURE_TIME_EXT_ID};
use metronome_wire::rtp::RtpView;
use metronome_wire::{PayloadType, SeqUnwrapper};
use serde::Serialize;

/// Consecutive packets older than the current frame after which the stream is taken to have
/// restarted (its timestamps jumped back) and the depayloader starts over.
const RESYNC_AFTER_LATE: u32 = 256;
/// A timestamp gap longer than this (at 90 kHz) is a discontinuity, not lost frames.
const MAX_LOST_SECONDS: u64 = 10;

/// Packets dropped as malformed or unusable, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RawDrops {
    /// Not an RTP packet at all.
    pub not_rtp: u64,
    /// An RTP packet whose payload type is not the one configured.
    pub wrong_payload_type: u64,
    /// Payload shorter than the payload header and one sample row header (§4.1).
    pub too_short: u64,
    /// The C bit of the last header that fits is still set (§4.1).
    pub unterminated_headers: u64,
    /// Less sample data than the headers declare.
    pub data_too_short: u64,
    /// A segment header with a Length of 0.
    pub zero_length: u64,
    /// Length not a multiple of the pgroup (§4.3).
    pub length_not_pgroup_multiple: u64,
    /// F set: interlaced video is not supported.
    pub field_bit: u64,
    /// Line No at or past the frame's height.
    pub line_out_of_range: u64,
    /// Line No not the first line of a pgroup (odd for 4:2:0).
    pub line_misaligned: u64,
    /// Offset (in pixels) at or past the frame's width.
    pub offset_out_of_range: u64,
    /// Offset not at a pgroup boundary (odd for 4:2:2 and 4:2:0).
    pub offset_misaligned: u64,
    /// Offset plus length runs past the end of the line.
    pub past_line_end: u64,
}

impl RawDrops {
    /// Packets dropped for any reason: the sum of every field.
    pub fn total(&self) -> u64 {
        self.not_rtp
            + self.wrong_payload_type
            + self.too_short
            + self.unterminated_headers
            + self.data_too_short
            + self.zero_length
            + self.length_not_pgroup_multiple
            + self.field_bit
            + self.line_out_of_range
            + self.line_misaligned
            + self.offset_out_of_range
            + self.offset_misaligned
            + self.past_line_end
    }
}

/// What the depayloader saw. Every packet pushed counts in exactly one of `used`, `duplicates`,
/// `late` and `dropped`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RawCounters {
    /// Packets pushed, whatever became of them.
    pub packets_in: u64,
    /// Packets whose data went into a frame.
    pub used: u64,
    /// Well-formed packets that brought no pgroup not already received.
    pub duplicates: u64,
    /// Packets of a frame already finished, or older than the one in progress.
    pub late: u64,
    /// Packets dropped whole as malformed or unusable, by reason.
    pub dropped: RawDrops,
    /// Sample data bytes of used packets.
    pub data_bytes: u64,
    /// Frames that ended with their marker and every pgroup ([`RawEvent::Complete`]).
    pub frames_complete: u64,
    /// Frames that ended with pgroups missing or without their marker ([`RawEvent::Partial`]).
    pub frames_partial: u64,
    /// Frames that never showed up, from the timestamp step between frames (the smallest step
    /// seen, else the configured rate; best effort).
    pub frames_lost: u64,
    /// Frames that ended without the marker (a newer timestamp arrived first).
    pub frames_without_marker: u64,
    /// Timestamp jumps too large to be loss, and restarts after a run of late packets.
    pub discontinuities: u64,
}

impl RawCounters {
    /// `used + duplicates + late + dropped`: equals `packets_in`.
    pub fn accounted(&self) -> u64 {
        self.used + self.duplicates + self.late + self.dropped.total()
    }
}

#[derive(Clone, Copy, Debug)]
struct Geom {
    pgb: usize,
    xinc: usize,
    yinc: usize,
    width: usize,
    height: usize,
    row_bytes: usize,
    per_row: usize,
}

#[derive(Clone, Copy, Debug)]
struct InProgress {
    rtp_ts: RtpTime,
    first_arrival: Timestamp,
    capture_ns: Option<u64>,
    /// Extended sequence numbers: the expected first, the lowest and highest seen.
    expected_start: u64,
    low: u64,
    high: u64,
    packets: u64,
    bytes: u64,
}

/// The RFC 4175 depayloader of one stream.
pub struct RawDepayloader {
    format: VideoFormat,
    payload_type: Option<PayloadType>,
    geom: Geom,
    working: RawFrame,
    finished: RawFrame,
    finished_complete: bool,
    have_finished: bool,
    coverage: Coverage,
    cur: Option<InProgress>,
    /// Timestamp and highest sequence number of the last frame that ended, and whether it
    /// ended with its marker.
    last_end: Option<(RtpTime, u64, bool)>,
    seq: SeqUnwrapper,
    late_run: u32,
    /// The smallest timestamp step seen between consecutive frames: the frame period when the
    /// configured rate is unknown or wrong (an SDP without `exactframerate`).
    min_step: Option<u32>,
    frames_out: u64,
    counters: RawCounters,
}

impl RawDepayloader {
    /// A depayloader for `format` (validated); `payload_type` filters packets if given.
    pub fn new(
        format: VideoFormat,
        payload_type: Option<PayloadType>,
    ) -> Result<RawDepayloader, String> {
        format.validate().map_err(|e| e.to_string())?;
        let pg = format.pgroup();
        Ok(RawDepayloader {
            format,
            payload_type,
            geom: Geom {
                pgb: pg.bytes as usize,
                xinc: pg.xinc as usize,
                yinc: pg.yinc as usize,
                width: format.width as usize,
                height: format.height as usize,
                row_bytes: format.row_bytes(),
                per_row: format.pgroups_per_row(),
            },
            working: RawFrame::new(format),
            finished: RawFrame::new(format),
            finished_complete: false,
            have_finished: false,
            coverage: Coverage::new(format.frame_pgroups()),
            cur: None,
            last_end: None,
            seq: SeqUnwrapper::new(),
            late_run: 0,
            min_step: None,
            frames_out: 0,
            counters: RawCounters::default(),
        })
    }

    /// The video format the depayloader was made for.
    pub fn format(&self) -> VideoFormat {
        self.format
    }
    /// What the depayloader has seen so far.
    pub fn counters(&self) -> &RawCounters {
        &self.counters
    }
    /// The last frame that ended (complete or partial; see [`Self::frame_is_complete`]), or
    /// `None` before the first. Missing parts of a partial frame hold older pictures' pixels.
    /// Its `index` counts finished frames; `capture_ns` is the sender's capture time, or 0.
    pub fn frame(&self) -> Option<&RawFrame> {
        self.have_finished.then_some(&self.finished)
    }
    /// Whether the frame [`Self::frame`] lends out ended complete (marker and every pgroup).
    pub fn frame_is_complete(&self) -> bool {
        self.have_finished && self.finished_complete
    }

    /// Takes one RTP packet received at `now`.
    pub fn push(&mut self, now: Timestamp, packet: &[u8]) -> RawEvents {
        let mut events = RawEvents::default();
        self.counters.packets_in += 1;
        let Ok(rtp) = RtpView::parse(packet) else {
            self.counters.dropped.not_rtp += 1;
            return events;
        };
        if self.payload_type.is_some_and(|pt| pt != rtp.payload_type()) {
            self.counters.dropped.wrong_payload_type += 1;
            return events;
        }
        let view = match Rfc4175View::parse(rtp.payload()) {
            Ok(v) => v,
            Err(e) => {
                let d = &mut self.counters.dropped;
                match e {
                    Rfc4175Error::Unterminated => d.unterminated_headers += 1,
                    Rfc4175Error::DataTooShort { .. } => d.data_too_short += 1,
                    _ => d.too_short += 1,
                }
                return events;
            }
        };
        for s in view.segments() {
            if let Err(reason) = self.check(&s.header) {
                *reason(&mut self.counters.dropped) += 1;
                return events;
            }
        }
        let ts = rtp.timestamp();
        let seq = self.seq.unwrap(rtp.sequence());
        if !self.assign_frame(now, ts, seq, &mut events) {
            return events;
        }
        // Copy: every segment was checked above.
        let g = self.geom;
        let mut new_pgroups = 0;
        for s in view.segments() {
            let row = usize::from(s.header.line) / g.yinc;
            let pg = usize::from(s.header.offset) / g.xinc;
            let at = row * g.row_bytes + pg * g.pgb;
            if let Some(dst) = self.working.data.get_mut(at..at + s.data.len()) {
                dst.copy_from_slice(s.data);
                new_pgroups += self
                    .coverage
                    .set_range(row * g.per_row + pg, s.data.len() / g.pgb);
            }
        }
        let Some(cur) = self.cur.as_mut() else {
            return events;
        };
        cur.low = cur.low.min(seq);
        cur.high = cur.high.max(seq);
        if new_pgroups == 0 {
            self.counters.duplicates += 1;
        } else {
            self.counters.used += 1;
            self.counters.data_bytes += view.data_len() as u64;
            cur.packets += 1;
            cur.bytes += (new_pgroups * g.pgb) as u64;
        }
        if cur.capture_ns.is_none() {
            cur.capture_ns = rtp.send_time(CAPTURE_TIME_EXT_ID).map(|t| t.0);
        }
        if rtp.marker() {
            let end = cur.high;
            self.finish(now, end, true, &mut events);
        }
        events
    }

    /// Ends the frame in progress (at the end of the stream), as partial or complete.
    pub fn flush(&mut self, now: Timestamp) -> RawEvents {
        let mut events = RawEvents::default();
        if let Some(cur) = self.cur {
            self.finish(now, cur.high, false, &mut events);
        }
        events
    }

    /// Checks a segment against the frame (RFC 4175 §4.1, §4.3); the error names its counter.
    fn check(&self, h: &SegmentHeader) -> Result<(), fn(&mut RawDrops) -> &mut u64> {
        let g = self.geom;
        let (len, line, off) = (
            usize::from(h.length),
            usize::from(h.line),
            usize::from(h.offset),
        );
        if h.field {
            return Err(|d| &mut d.field_bit);
        }
        if len == 0 {
            return Err(|d| &mut d.zero_length);
        }
        if len % g.pgb != 0 {
            return Err(|d| &mut d.length_not_pgroup_multiple);
        }
        if line >= g.height {
            return Err(|d| &mut d.line_out_of_range);
        }
        if line % g.yinc != 0 {
            return Err(|d| &mut d.line_misaligned);
        }
        if off >= g.width {
            return Err(|d| &mut d.offset_out_of_range);
        }
        if off % g.xinc != 0 {
            return Err(|d| &mut d.offset_misaligned);
        }
        if off / g.xinc + len / g.pgb > g.per_row {
            return Err(|d| &mut d.past_line_end);
        }
        Ok(())
    }

    /// Makes the frame of `ts` the one in progress, ending the previous one if `ts` is newer.
    /// `false` if the packet is late (its frame has ended or is older).
    fn assign_frame(&mut self, now: Timestamp, ts: RtpTime, seq: u64, ev: &mut RawEvents) -> bool {
        let reference = self.cur.map(|c| c.rtp_ts).or(self.last_end.map(|e| e.0));
        if self.cur.is_some_and(|c| c.rtp_ts == ts) {
            self.late_run = 0;
            return true;
        }
        if let Some(r) = reference {
            if ts.delta(r) <= 0 {
                self.late_run += 1;
                if self.late_run < RESYNC_AFTER_LATE {
                    self.counters.late += 1;
                    return false;
                }
                // The sender restarted with older timestamps: start over.
                self.counters.discontinuities += 1;
                if let Some(c) = self.cur {
                    self.finish(now, c.high, false, ev);
                }
                self.last_end = None;
                return self.assign_frame(now, ts, seq, ev);
            }
        }
        self.late_run = 0;
        if let Some(c) = self.cur {
            self.finish(now, seq.saturating_sub(1).max(c.high), false, ev);
        }
        let mut expected_start = seq;
        if let Some((r, high, marker)) = self.last_end {
            let step = ts.since(r);
            let configured =
                MediaClock::VIDEO_90K.frame_ticks(1, self.format.fps_num, self.format.fps_den);
            let period = self.min_step.map_or(configured, u64::from).max(1);
            let ratio = step as f64 / period as f64;
            let mut frames = ratio.round() as u64;
            if self.min_step.is_none() && (ratio - ratio.round()).abs() > 0.1 {
                frames = 1; // not a whole number of configured periods: the rate is unknown
            }
            if u64::from(step) > MAX_LOST_SECONDS * 90_000 {
                self.counters.discontinuities += 1;
            } else if frames > 1 {
                self.counters.frames_lost += frames - 1;
                ev.push(RawEvent::Lost(FrameLost {
                    count: frames - 1,
                    before_rtp_ts: ts,
                }));
            }
            if u64::from(step) <= MAX_LOST_SECONDS * 90_000 {
                self.min_step = Some(self.min_step.map_or(step, |m| m.min(step)));
            }
            if marker && seq > high && seq - high < 1 << 15 {
                expected_start = high + 1;
            }
        }
        self.coverage.clear();
        self.cur = Some(InProgress {
            rtp_ts: ts,
            first_arrival: now,
            capture_ns: None,
            expected_start,
            low: seq,
            high: seq,
            packets: 0,
            bytes: 0,
        });
        true
    }

    /// Ends the frame in progress; `end` is the last sequence number that belonged to it.
    fn finish(&mut self, now: Timestamp, end: u64, marker: bool, ev: &mut RawEvents) {
        let Some(cur) = self.cur.take() else {
            return;
        };
        let complete = marker && self.coverage.is_full();
        std::mem::swap(&mut self.working, &mut self.finished);
        self.finished.index = self.frames_out;
        self.finished.capture_ns = cur.capture_ns.unwrap_or(0);
        self.frames_out += 1;
        self.have_finished = true;
        self.finished_complete = complete;
        self.last_end = Some((cur.rtp_ts, end.max(cur.high), marker));
        if complete {
            self.counters.frames_complete += 1;
            ev.push(RawEvent::Complete(FrameComplete {
                rtp_ts: cur.rtp_ts,
                first_arrival: cur.first_arrival,
                completed_at: now,
                capture_ns: cur.capture_ns,
                bytes: cur.bytes,
                packets: cur.packets,
            }));
            return;
        }
        if !marker {
            self.counters.frames_without_marker += 1;
        }
        self.counters.frames_partial += 1;
        let start = cur.expected_start.min(cur.low);
        let span = end.max(cur.high).saturating_sub(start) + 1;
        let total = self.format.frame_bytes() as u64;
        ev.push(RawEvent::Partial(FramePartial {
            rtp_ts: cur.rtp_ts,
            first_arrival: cur.first_arrival,
            ended_at: now,
            capture_ns: cur.capture_ns,
            received_bytes: cur.bytes,
            missing_bytes: total.saturating_sub(cur.bytes),
            packets: cur.packets,
            missing_packets: span.saturating_sub(cur.packets),
            marker,
        }));
    }
}
