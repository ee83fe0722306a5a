//! Seed 002's video in the lab, as Evalvid-RA makes and sends it: a flow's content encoded once
//! per quantizer of its ladder (`metronome_media::ladder`, kept in the cache between runs and
//! shared by the points of a run), and sent by `metronome_media::ladder::source::LadderSource`:
//! each GOP at the rung the VBR controller picks from the rate controller's target, every
//! frame as coded, over RTP (RFC 6416 / RFC 6184), paced over its frame interval. Which frame
//! each packet carries, each frame's bytes and type, and each GOP's rung are noted for the
//! viewers' judgement and the report.

use crate::video::{lock_frames, SharedFrames};
use metronome_config::scenario::{CodedVideo, VideoCodecDecl, VideoContent, VideoDecl};
use metronome_media::decode::VideoCodec;
use metronome_media::encode::EncoderConfig;
use metronome_media::ladder::source::{LadderSource, LadderSourceConfig};
use metronome_media::ladder::{cache, Ladder, LadderSpec};
use metronome_media::payload::PayloaderConfig;
use metronome_session::sender::{RtpSource, SourceError, SourcePacket};
use metronome_time::Timestamp;
use metronome_wire::rtp::SendTimeExt;
use metronome_wire::PayloadType;
use metronome_wire::{SeqNo, Ssrc};
use std::sync::{Arc, Mutex, Weak};

/// The codec of a declared ladder.
pub fn codec(c: VideoCodecDecl) -> VideoCodec {
    match c {
        VideoCodecDecl::Mpeg4 => VideoCodec::Mpeg4Part2,
        VideoCodecDecl::H264 => VideoCodec::H264,
    }
}

/// The ladder's spec for a flow: its picture, content, codec, quantizers, GOP; `frames` long.
pub fn spec(
    v: VideoDecl,
    content: &VideoContent,
    coded: CodedVideo,
    gop: u32,
    frames: u32,
) -> Result<LadderSpec, String> {
    let content_key = match content {
        VideoContent::Pattern => format!("pattern scenes of {} s", crate::video::SCENE_SECS),
        VideoContent::Motion(seed) => {
            format!("motion v{} seed {seed}", metronome_media::motion::VERSION)
        }
        VideoContent::Lavfi(sources) => format!(
            "lavfi {} scenes of {} s",
            sources.join(","),
            crate::video::SCENE_SECS
        ),
        VideoContent::File(path) => {
            metronome_media::clip::Clip::identity(path).map_err(|e| e.to_string())?
        }
        // The paces' figures, not their names: a pace tuned draws other pictures.
        VideoContent::Scenes(scenes) => format!(
            "motion v{} scenes {}",
            metronome_media::motion::VERSION,
            scenes
                .iter()
                .map(|(p, n)| format!("{:?}:{n}", crate::video::pace(*p)))
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    Ok(LadderSpec {
        encoder: EncoderConfig {
            codec: codec(coded.codec),
            width: v.width,
            height: v.height,
            fps: v.fps,
            gop,
            b_frames: coded.b_frames,
            quantizer: coded.quantizers.0,
        },
        quantizers: (coded.quantizers.0..=coded.quantizers.1).collect(),
        frames,
        content: content_key,
    })
}

/// The ladders this process has: points running at once share one, and it is encoded (or read
/// from the cache) once.
static LADDERS: Mutex<Vec<(String, Weak<Ladder>)>> = Mutex::new(Vec::new());

/// The ladder of `spec`: this process's, the cache's, or encoded now from `content` at `v`.
pub fn ladder(
    spec: LadderSpec,
    v: VideoDecl,
    content: &VideoContent,
) -> Result<Arc<Ladder>, String> {
    let key = spec.key();
    // Held while encoding: a second point waits for the first's ladder instead of encoding too.
    let mut held = LADDERS.lock().unwrap_or_else(|e| e.into_inner());
    held.retain(|(_, w)| w.strong_count() > 0);
    if let Some(l) = held
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(l);
    }
    let frames = u64::from(spec.frames);
    let made = Ladder::load_or_build(spec, cache::default_dir().as_deref(), || {
        crate::video::pictures_of(v, content, frames).map_err(metronome_media::MediaError::Config)
    })
    .map_err(|e| format!("the video's ladder: {e}"))?;
    held.push((key, Arc::downgrade(&made)));
    Ok(made)
}

/// The coarsest rung's rate on the wire, bit/s: the least the flow sends when its packets
/// are spread over their frames' intervals, so the rate controller's floor then (a ladder
/// sent at the controller's rate has none: it queues).
pub fn floor_bps(ladder: &Ladder, max_payload: usize, overhead: u32) -> u64 {
    let Some(r) = ladder.rungs.iter().max_by_key(|r| r.quantizer) else {
        return 0;
    };
    let fps = f64::from(ladder.spec.encoder.fps.max(1));
    let secs = r.frames.len() as f64 / fps;
    let wire: u64 = r
        .frames
        .iter()
        .map(|f| {
            let len = f.data.len() as u64;
            len + len.div_ceil(max_payload.max(1) as u64).max(1) * u64::from(overhead)
        })
        .sum();
    if secs > 0.0 {
        (wire as f64 * 8.0 / secs) as u64
    } else {
        0
    }
}

/// A ladder as an RTP source that notes every frame it sends into its flow's map (see the
/// module).
pub struct LadderVideo {
    source: LadderSource,
    frames: SharedFrames,
    /// The least it sends, bit/s on the wire (its coarsest rung, or 0 if it is sent at the
    /// controller's rate): the bottom of its range.
    floor_bps: u64,
}

impl LadderVideo {
    /// `ladder` sent as `cfg` says (from its epoch), noted into `frames`.
    pub fn new(ladder: Arc<Ladder>, cfg: LadderSourceConfig, frames: SharedFrames) -> Self {
        {
            let mut map = lock_frames(&frames);
            map.codec = ladder.spec.encoder.codec;
            map.epoch = cfg.epoch;
        }
        LadderVideo {
            source: LadderSource::new(ladder, cfg),
            frames,
            floor_bps: 0,
        }
    }

    /// It never sends less than `floor_bps` on the wire (see [`floor_bps`]): the bottom of
    /// the range a driver's rate knob keeps it in.
    pub fn with_floor(mut self, floor_bps: u64) -> Self {
        self.floor_bps = floor_bps;
        self
    }

    /// Notes packet `p` (and its frame, on its first packet).
    fn note(&self, p: &metronome_media::ladder::source::LadderPacket) {
        let mut map = lock_frames(&self.frames);
        let k = p.frame as usize;
        let s = &mut map.sent;
        s.packets.push(Some((p.frame, p.frame)));
        s.payload_bytes.push(p.payload_len as u32);
        s.packet_due.push(p.due);
        if p.first_of_frame {
            let position = s.frame_due.len().max(k + 1);
            s.frame_due.resize(position, std::time::Duration::ZERO);
            s.coded.resize(position, Vec::new());
            s.kinds
                .resize(position, metronome_quality::playout::FrameType::Other);
            s.frame_due[k] = p.made;
            let decision = self.source.decisions().last().copied();
            let order_len = map.decode_order.len();
            if let Some((_, kind, bytes)) = self.source.frame_at(order_len) {
                map.sent.coded[k] = bytes.to_vec();
                map.sent.kinds[k] = kind;
            }
            map.decode_order.push(p.frame);
            if let Some(d) = decision {
                if map.rungs.last().is_none_or(|r| r.0 != d.0) {
                    map.rungs.push(d);
                }
            }
        }
    }
}

impl RtpSource for LadderVideo {
    fn next_packet(&mut self, buf: &mut [u8]) -> Result<Option<SourcePacket>, SourceError> {
        let epoch = self.source.config().epoch;
        let Some(p) = self
            .source
            .next_noted(buf)
            .map_err(|e| SourceError(e.to_string()))?
        else {
            return Ok(None);
        };
        self.note(&p);
        Ok(Some(SourcePacket {
            len: p.len,
            wire_len: p.len,
            due: epoch + p.due,
            payload_len: p.payload_len,
        }))
    }

    fn describe(&self) -> String {
        self.source.describe()
    }

    fn nominal_bitrate(&self) -> Option<u64> {
        self.source.nominal_bitrate()
    }

    fn follow_rate(&mut self, rate: u64) -> Result<(), SourceError> {
        self.source.follow_rate(rate)
    }
    fn rate_reported(&mut self, rate: u64) {
        self.source.rate_reported(rate)
    }

    fn rate_range(&self) -> Option<std::ops::RangeInclusive<u64>> {
        let r = self.source.rate_range()?;
        Some(self.floor_bps.min(*r.end())..=*r.end())
    }

    fn set_rate(&mut self, rate: u64) -> Result<(), SourceError> {
        self.source.set_rate(rate)
    }

    fn is_live(&self) -> bool {
        true
    }

    fn next_due(&self) -> Option<Timestamp> {
        self.source.next_due()
    }

    fn leaves_at_rate(&self) -> bool {
        self.source.leaves_at_rate()
    }

    fn note_queue(&mut self, packets: usize) {
        self.source.note_queue(packets)
    }
}

/// The payload type a ladder's packets carry, and the SDP of a `serve --coded` stream names.
pub const PAYLOAD_TYPE: PayloadType = PayloadType(96);

/// The payloader's settings for a flow: RTP payload of at most `mtu` less RTP (12 bytes, and
/// the send-time extension if it is carried), UDP and IPv4 (28).
pub fn payloader(
    ssrc: Ssrc,
    initial_seq: SeqNo,
    mtu: Option<u32>,
    send_time: SendTimeExt,
) -> PayloaderConfig {
    let headers = 12 + send_time.bytes() + metronome_time::IPV4_UDP_OVERHEAD;
    PayloaderConfig {
        ssrc,
        payload_type: PAYLOAD_TYPE,
        max_payload: (mtu.unwrap_or(1500) as usize)
            .saturating_sub(headers)
            .max(100),
        initial_seq,
        send_time,
    }
}
