//! A flow's source as the lab makes it for the simulator (`model::flow_source`: constant-rate
//! MPEG-TS, the encoded test pattern, or a ladder's frames as coded), for the real-time server
//! to send: emu mode's hosts and `metronome serve --codec` both send it. The server opens it
//! once it has numbered and timed the stream; it notes which frame each packet carries as it
//! makes it, so that frames are judged exactly as in sim mode.

use crate::model::{self, Frames, Numbering, RtpPlan};
use metronome_apps::streams::{PacketShape, RtpSourcePlan, StartInfo};
use metronome_config::scenario::{FlowDecl, RtpCc, VideoContent};
use metronome_media::ladder::Ladder;
use metronome_media::payload::sdp::{rtp_format, RtpFormat};
use metronome_session::sender::RtpSource;
use metronome_time::Timestamp;
use metronome_wire::rtp::SendTimeExt;
use std::sync::{Arc, Mutex};

/// A flow's source, to be opened by the real-time server (see the module).
pub struct ServedFlow {
    f: FlowDecl,
    plan: RtpPlan,
    /// What opening it made: the flow's frames (video), for the report.
    frames: Arc<Mutex<Option<Frames>>>,
    /// A ladder's video, held from [`ServedFlow::rtp_format`] until it is opened (which then
    /// finds it instead of encoding it again).
    ladder: Option<Arc<Ladder>>,
}

impl ServedFlow {
    pub fn new(f: &FlowDecl, plan: RtpPlan) -> ServedFlow {
        ServedFlow {
            f: f.clone(),
            plan,
            frames: Arc::new(Mutex::new(None)),
            ladder: None,
        }
    }

    /// Where the flow's frames will be once it is opened (`Some(None)`: opened, no video).
    pub fn frames(&self) -> Arc<Mutex<Option<Frames>>> {
        self.frames.clone()
    }

    /// The send-time extension its packets carry (the server must then stamp it).
    pub fn send_time(&self) -> SendTimeExt {
        self.plan.send_time
    }

    /// The source's units per bit on the wire (TS bits, or 1 for a source counted there).
    pub fn source_per_wire(plan: &RtpPlan) -> f64 {
        let shape = plan.packet_shape();
        shape.source_bits as f64 / (shape.wire_bytes * 8).max(1) as f64
    }

    /// A ladder's video: what its SDP says of it (encoding the ladder now, or reading it from
    /// the cache); `None` for MPEG-TS.
    pub fn rtp_format(&mut self) -> Result<Option<RtpFormat>, String> {
        let (Some((v, content)), Some(coded)) = (&self.plan.video, self.plan.coded) else {
            return Ok(None);
        };
        let ladder = model::flow_ladder(&self.f, *v, content, coded, &self.plan)?;
        let first = ladder
            .rungs
            .first()
            .and_then(|r| r.frames.first())
            .ok_or_else(|| format!("flow '{}': the ladder has no frames", self.f.name))?;
        let format = rtp_format(ladder.spec.encoder.codec, &first.data)
            .map_err(|e| format!("flow '{}': {e}", self.f.name))?;
        self.ladder = Some(ladder);
        Ok(Some(format))
    }
}

/// What a video shows, in a few words.
fn content_name(c: &VideoContent) -> String {
    match c {
        VideoContent::Pattern => "the test pattern".into(),
        VideoContent::Motion(seed) => format!("high-motion content (seed {seed})"),
        VideoContent::File(p) => p.display().to_string(),
        VideoContent::Lavfi(s) => format!("lavfi {}", s.join(", ")),
        VideoContent::Scenes(s) => format!("{} scenes of generated content", s.len()),
    }
}

impl RtpSourcePlan for ServedFlow {
    fn describe(&self) -> String {
        match (&self.plan.video, self.plan.coded) {
            (Some((v, content)), Some(coded)) => format!(
                "flow '{}': {}x{}@{} {} as a {} ladder, quantizers {}–{}",
                self.f.name,
                v.width,
                v.height,
                v.fps,
                content_name(content),
                coded.codec.name(),
                coded.quantizers.0,
                coded.quantizers.1
            ),
            _ => format!("flow '{}' as the lab makes it", self.f.name),
        }
    }
    /// In the source's units. With a controller the scenario's start rate is on the wire, as
    /// the simulator's controller takes it (its `rate` too is the most on the wire).
    fn start_rate(&self) -> u64 {
        let start = self.plan.start_bps();
        if self.plan.cc == RtpCc::Fixed {
            return start;
        }
        (start as f64 * Self::source_per_wire(&self.plan)).round() as u64
    }
    fn shape(&self) -> PacketShape {
        self.plan.packet_shape()
    }
    fn open(
        self: Box<Self>,
        start: &StartInfo,
        epoch: Timestamp,
    ) -> Result<Box<dyn RtpSource>, String> {
        let n = Numbering {
            ssrc: start.ssrc,
            seq: start.seq,
            rtp_ts_base: start.rtptime,
            epoch,
        };
        let made = model::flow_source(&self.f, &self.plan, &n)?;
        *self.frames.lock().unwrap_or_else(|e| e.into_inner()) = Some(made.frames);
        Ok(made.source)
    }
}
