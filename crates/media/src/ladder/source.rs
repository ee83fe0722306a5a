//! A ladder sent as Evalvid-RA sends it: each GOP at the rung its VBR controller picks
//! (`metronome_cc::vbr`) from the rate the congestion controller allows, every frame as it was
//! coded, cut into RTP packets ([`crate::payload`]): variable bit rate, frame sizes that follow
//! the content, no padding.
//!
//! Times are on the stream's own timeline (from its first frame): frame `p` of the decode
//! order is made at `p · T`. Its `n` packets leave in one of two ways:
//!
//! - **At the congestion controller's rate**, as Evalvid-RA hands frames to a rate-based
//!   transport agent (TFRC, TFMCC, ASMP: RFC 5348 §4.6, RFC 4654 §3.7): every packet of a
//!   frame is due when the frame is made, and the sender session sends them at the rate of
//!   each moment ([`RtpSource::leaves_at_rate`]); what the rate does not carry waits in its
//!   queue. As in Evalvid-RA's build for TFRC (`vbr_rateadapt.cc`), that queue in packets
//!   ([`RtpSource::note_queue`]) scales each rate the VBR controller is told
//!   (`exp(−backlog / 1000)`), and the next GOP's size at the reference quantizer counts
//!   1.25 times. A driver makes each frame (and picks a GOP's rung) when it is due, within
//!   its lookahead ([`RtpSource::next_due`]).
//! - **Over the frame's interval** otherwise: `p · T + i · T / n`.
//!
//! Its RTP timestamp is
//! its presentation time, `k · T` for display frame `k`, moved later by the B-frame delay
//! where frames are reordered, so that no frame is presented before it is sent.

use super::Ladder;
use crate::decode::VideoCodec;
use crate::payload::{FramePayloader, PayloaderConfig};
use metronome_cc::{VbrConfig, VbrController, VbrDecision};
use metronome_quality::playout::FrameType;
use metronome_session::sender::{RtpSource, SourceError, SourcePacket};
use metronome_time::{RtpTime, Timestamp};
use metronome_wire::rtp::RtpError;
use std::sync::Arc;
use std::time::Duration;

/// How a [`LadderSource`] sends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LadderSourceConfig {
    /// How frames are cut into RTP packets (SSRC, payload type, largest payload, first
    /// sequence number).
    pub payloader: PayloaderConfig,
    /// The RTP timestamp of the stream's time zero (90 kHz clock).
    pub rtp_ts_base: RtpTime,
    /// Bytes each packet takes on the wire beyond its payload (RTP and its extensions, UDP,
    /// IP): what the congestion controller's rate counts.
    pub overhead_per_packet: u32,
    /// The VBR controller's reference quantizer.
    pub reference_q: u32,
    /// The most the stream may send, bit/s on the wire: the VBR controller's ceiling.
    pub max_bps: f64,
    /// The stream's time zero on the driver's clock (where [`RtpSource`] packets are due from).
    pub epoch: Timestamp,
    /// Packets leave at the rate the controller allows, queued behind it (see the module),
    /// rather than spread over their frame's interval.
    pub send_at_rate: bool,
}

/// A packet the source wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LadderPacket {
    /// The whole RTP packet written, bytes: header, extension and payload.
    pub len: usize,
    /// Of which RTP payload, bytes.
    pub payload_len: usize,
    /// When it is due to leave, on the stream's timeline.
    pub due: Duration,
    /// When its frame was made (handed to the sender), on the stream's timeline.
    pub made: Duration,
    /// The frame it carries (its display number).
    pub frame: u32,
    /// Whether it is that frame's first packet.
    pub first_of_frame: bool,
}

/// The ladder, sent (see the module).
pub struct LadderSource {
    ladder: Arc<Ladder>,
    cfg: LadderSourceConfig,
    vbr: VbrController,
    payloader: FramePayloader,
    /// The frame being sent: its decode position, packets in all, packets sent.
    frame: Option<(usize, usize, usize)>,
    /// The next frame's decode position.
    next: usize,
    /// This GOP's rung and the wire bytes it has sent.
    q: u32,
    gop_bytes: u64,
    /// Each GOP's decision, in order.
    decisions: Vec<(u32, VbrDecision)>,
    frame_interval: Duration,
    /// The presentation delay B-frames need, in frames.
    reorder_frames: u32,
    /// Packets in the sender's queue, as the driver last told.
    queued: usize,
}

impl LadderSource {
    /// Sends `ladder` from its first frame as `cfg` says, each GOP at the rung the VBR
    /// controller (Evalvid-RA's) picks, starting at the one it starts with.
    pub fn new(ladder: Arc<Ladder>, cfg: LadderSourceConfig) -> Self {
        let e = ladder.spec.encoder;
        let q_range = ladder.spec.quantizers.iter().copied();
        let vbr = VbrController::new(VbrConfig {
            reference_q: cfg.reference_q,
            min_q: q_range.clone().min().unwrap_or(2),
            max_q: q_range.max().unwrap_or(31),
            gop_frames: e.gop,
            fps: f64::from(e.fps),
            // Evalvid-RA's TFRC build, for rate-based agents with their send queue.
            open_loop_factor: if cfg.send_at_rate { 1.25 } else { 1.0 },
            max_bps: cfg.max_bps,
        });
        LadderSource {
            payloader: FramePayloader::new(e.codec, cfg.payloader),
            q: vbr.quantizer(),
            vbr,
            ladder,
            cfg,
            frame: None,
            next: 0,
            gop_bytes: 0,
            decisions: Vec::new(),
            frame_interval: Duration::from_nanos(1_000_000_000 / u64::from(e.fps.max(1))),
            reorder_frames: if e.b_frames > 0 { e.b_frames + 1 } else { 0 },
            queued: 0,
        }
    }

    /// The ladder it sends from.
    pub fn ladder(&self) -> &Arc<Ladder> {
        &self.ladder
    }

    /// The settings it was made with.
    pub fn config(&self) -> &LadderSourceConfig {
        &self.cfg
    }

    /// The codec the ladder is encoded with.
    pub fn codec(&self) -> VideoCodec {
        self.ladder.spec.encoder.codec
    }

    /// The rate the congestion controller allows now, bit/s on the wire: the VBR controller
    /// takes it with the sender's queue as last told.
    pub fn on_rate(&mut self, wire_bps: f64) {
        let backlog = if self.cfg.send_at_rate {
            self.queued as f64
        } else {
            0.0
        };
        self.vbr.on_rate(wire_bps, backlog);
    }

    /// The packets waiting in the sender's queue (see [`RtpSource::note_queue`]).
    pub fn on_queue(&mut self, packets: usize) {
        self.queued = packets;
    }

    /// When packet `i` of `n` of the frame made at `made` is due: when it is made, at the
    /// controller's rate (the sender session spaces them), else spread over the frame's
    /// interval.
    fn due(&self, made: Duration, (i, n): (usize, usize)) -> Duration {
        if self.cfg.send_at_rate {
            return made;
        }
        let spacing = self.frame_interval.as_nanos() as u64 / n.max(1) as u64;
        made + Duration::from_nanos(spacing * i as u64)
    }

    /// When its next packet is due, on the stream's timeline, at the controller's rate (its
    /// frame's time); `None` at the end, and when spread over frames (the driver goes by
    /// the last packet's due time).
    fn next_due_in_stream(&self) -> Option<Duration> {
        if !self.cfg.send_at_rate {
            return None;
        }
        let p = match self.frame {
            Some((p, n, i)) if i < n => p,
            _ => self.next,
        };
        (p < self.ladder.frames()).then(|| self.frame_interval * p as u32)
    }

    /// The rung of each GOP sent so far, with the controller's figures.
    pub fn decisions(&self) -> &[(u32, VbrDecision)] {
        &self.decisions
    }

    /// The frame at decode position `p` in the rung now sent: its display number, type and
    /// bytes.
    pub fn frame_at(&self, p: usize) -> Option<(u32, FrameType, &[u8])> {
        let f = self.ladder.rung(self.q).frames.get(p)?;
        Some((f.frame, f.kind, &f.data))
    }

    /// Writes the next packet into `out`, with the frame it carries; `None` at the content's
    /// end.
    pub fn next_noted(&mut self, out: &mut [u8]) -> Result<Option<LadderPacket>, RtpError> {
        loop {
            if self.frame.is_none() && !self.start_frame() {
                return Ok(None);
            }
            let Some((p, n, i)) = self.frame else {
                return Ok(None);
            };
            let ladder = Arc::clone(&self.ladder);
            let f = &ladder.rung(self.q).frames[p];
            let Some(o) = self.payloader.next(&f.data, out)? else {
                self.frame = None;
                continue;
            };
            let wire = o.payload_len as u64 + u64::from(self.cfg.overhead_per_packet);
            self.gop_bytes += wire;
            let made = self.frame_interval * p as u32;
            let due = self.due(made, (i, n));
            self.frame = Some((p, n, i + 1));
            return Ok(Some(LadderPacket {
                len: o.len,
                payload_len: o.payload_len,
                due,
                made,
                frame: f.frame,
                first_of_frame: i == 0,
            }));
        }
    }

    /// Takes the next frame (a new GOP's rung first, at a GOP boundary); false at the end.
    fn start_frame(&mut self) -> bool {
        let p = self.next;
        if p >= self.ladder.frames() {
            return false;
        }
        let gop = self.ladder.spec.encoder.gop.max(1) as usize;
        if p % gop == 0 && p > 0 {
            let g = p / gop;
            let open = self.wire_gop_bytes(self.cfg.reference_q, g);
            let d = self.vbr.next_gop(self.gop_bytes as f64, open as f64);
            self.q = d.quantizer;
            self.gop_bytes = 0;
            self.decisions.push((g as u32, d));
        } else if p == 0 {
            self.decisions.push((
                0,
                VbrDecision {
                    quantizer: self.q,
                    target_bytes: 0.0,
                    open_bytes: 0.0,
                    fill: 0.0,
                },
            ));
        }
        let ladder = self.ladder.clone();
        let f = &ladder.rung(self.q).frames[p];
        let clock_per_frame = 90_000 / u64::from(ladder.spec.encoder.fps.max(1));
        let pts = u64::from(f.frame + self.reorder_frames) * clock_per_frame;
        let rtp_ts = self.cfg.rtp_ts_base.add(pts as u32);
        let n = self.payloader.begin(&f.data, rtp_ts);
        self.frame = Some((p, n, 0));
        self.next = p + 1;
        true
    }

    /// GOP `g` at quantizer `q` on the wire: its coded bytes and each packet's overhead.
    fn wire_gop_bytes(&self, q: u32, g: usize) -> u64 {
        let gop = self.ladder.spec.encoder.gop.max(1) as usize;
        let max = self.cfg.payloader.max_payload.max(1) as u64;
        self.ladder
            .rung(q)
            .frames
            .iter()
            .skip(g * gop)
            .take(gop)
            .map(|f| {
                let len = f.data.len() as u64;
                len + len.div_ceil(max).max(1) * u64::from(self.cfg.overhead_per_packet)
            })
            .sum()
    }
}

impl RtpSource for LadderSource {
    fn next_packet(&mut self, buf: &mut [u8]) -> Result<Option<SourcePacket>, SourceError> {
        let epoch = self.cfg.epoch;
        Ok(self
            .next_noted(buf)
            .map_err(|e| SourceError(e.to_string()))?
            .map(|p| SourcePacket {
                len: p.len,
                wire_len: p.len,
                due: epoch + p.due,
                payload_len: p.payload_len,
            }))
    }

    fn describe(&self) -> String {
        let s = &self.ladder.spec;
        format!(
            "{} {}x{}@{} ladder of {} quantizers ({}), GOP {}",
            s.encoder.codec.name(),
            s.encoder.width,
            s.encoder.height,
            s.encoder.fps,
            s.quantizers.len(),
            s.content,
            s.encoder.gop
        )
    }

    fn nominal_bitrate(&self) -> Option<u64> {
        Some(self.cfg.max_bps as u64)
    }

    /// Evalvid-RA's VBR controller hears the congestion controller only at its reports
    /// ([`RtpSource::rate_reported`]): a change on the controller's own clock (TFRC's
    /// no-feedback timer, TFMCC's increase between reports, its start) is not averaged.
    fn follow_rate(&mut self, _rate: u64) -> Result<(), SourceError> {
        Ok(())
    }

    /// Evalvid-RA's VBR controller averages the rate of every report, changed or not (the
    /// source's units are the wire's).
    fn rate_reported(&mut self, rate: u64) {
        self.on_rate(rate as f64);
    }

    fn rate_range(&self) -> Option<std::ops::RangeInclusive<u64>> {
        Some(0..=self.cfg.max_bps as u64)
    }

    fn set_rate(&mut self, rate: u64) -> Result<(), SourceError> {
        self.on_rate(rate as f64);
        Ok(())
    }

    /// Made as it is sent: the rung of each GOP follows the rate of its time.
    fn is_live(&self) -> bool {
        true
    }

    fn next_due(&self) -> Option<Timestamp> {
        self.next_due_in_stream().map(|d| self.cfg.epoch + d)
    }

    fn leaves_at_rate(&self) -> bool {
        self.cfg.send_at_rate
    }

    fn note_queue(&mut self, packets: usize) {
        self.on_queue(packets);
    }
}

#[cfg(test)]
mod tests;
