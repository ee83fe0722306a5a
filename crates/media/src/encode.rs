//! Encoding at a fixed quantizer through FFmpeg's libavcodec, as Evalvid-RA's ladder is made
//! (`ffmpeg -c:v mpeg4 -qscale:v Q`, one clip per quantizer): MPEG-4 Part 2 at a quantizer
//! scale of 2–31, or H.264 (x264) at a fixed QP.
//!
//! The coded frames come out in decode order, each with its display number and type. Headers
//! stay in band, as in Evalvid's `.m4v` files: MPEG-4's VOS/VOL headers and H.264's parameter
//! sets precede every I-frame, so that a receiver can start at any GOP and a rung can change
//! at any GOP. GOPs are closed, so that a GOP decodes from its own frames alone.

use crate::decode::{init, VideoCodec};
use crate::MediaError;
use ffmpeg_next as ff;
use metronome_quality::playout::FrameType;
use metronome_quality::Picture;
use std::collections::VecDeque;

/// FFmpeg's λ per quantizer step (`FF_QP2LAMBDA`): `-qscale:v Q` asks for a λ of `Q × 118`.
const QP2LAMBDA: i32 = 118;

/// How a clip is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EncoderConfig {
    /// MPEG-4 Part 2 (FFmpeg's `mpeg4`) or H.264 (`libx264`).
    pub codec: VideoCodec,
    /// Picture width, pixels: even, not 0.
    pub width: u32,
    /// Picture height, pixels: even, not 0.
    pub height: u32,
    /// Frames per second, at least 1 (the encoder's time base is `1/fps`).
    pub fps: u32,
    /// Frames per GOP (an I-frame every `gop` frames).
    pub gop: u32,
    /// B-frames between references (0: none, as seed 002's ladder).
    pub b_frames: u32,
    /// MPEG-4's quantizer scale (2–31) or H.264's QP (0–51).
    pub quantizer: u32,
}

impl EncoderConfig {
    /// Seed 002's: MPEG-4 Part 2, CIF at 25 fps, GOP 12, no B-frames, at `quantizer`.
    pub fn seed002(quantizer: u32) -> Self {
        EncoderConfig {
            codec: VideoCodec::Mpeg4Part2,
            width: 352,
            height: 288,
            fps: 25,
            gop: 12,
            b_frames: 0,
            quantizer,
        }
    }

    fn check(&self) -> Result<(), MediaError> {
        let q = match self.codec {
            VideoCodec::Mpeg4Part2 => 2..=31,
            VideoCodec::H264 => 0..=51,
        };
        if !q.contains(&self.quantizer) {
            return Err(MediaError::Config(format!(
                "{} quantizer {} is outside {}–{}",
                self.codec.name(),
                self.quantizer,
                q.start(),
                q.end()
            )));
        }
        if self.width == 0 || self.height == 0 || self.width % 2 != 0 || self.height % 2 != 0 {
            return Err(MediaError::Config(format!(
                "{}x{}: the encoders need an even, non-zero size",
                self.width, self.height
            )));
        }
        if self.fps == 0 || self.gop == 0 {
            return Err(MediaError::Config("fps and gop must be at least 1".into()));
        }
        Ok(())
    }
}

/// One coded frame, as the encoder made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodedFrame {
    /// Its display number (its picture's index in the clip).
    pub frame: u32,
    /// I, P or B, read from its bitstream ([`frame_type`]).
    pub kind: FrameType,
    /// The coded bitstream of the frame, headers in band (MPEG-4 elementary stream, or
    /// H.264 Annex B).
    pub data: Vec<u8>,
}

/// A fixed-quantizer encoder: pictures in, coded frames out in decode order.
pub struct FixedQuantizer {
    cfg: EncoderConfig,
    encoder: ff::encoder::Video,
    frame: ff::frame::Video,
    packet: ff::Packet,
    next: i64,
    out: VecDeque<CodedFrame>,
}

impl FixedQuantizer {
    /// Opens FFmpeg's encoder for `cfg`, single-threaded so that the output is the same on
    /// every run. [`MediaError::Config`] for settings out of range, [`MediaError::Codec`] when
    /// this FFmpeg lacks the encoder or will not open it.
    pub fn new(cfg: EncoderConfig) -> Result<Self, MediaError> {
        cfg.check()?;
        init()?;
        let name = match cfg.codec {
            VideoCodec::Mpeg4Part2 => "mpeg4",
            VideoCodec::H264 => "libx264",
        };
        let codec = ff::codec::encoder::find_by_name(name).ok_or_else(|| {
            MediaError::Codec(format!(
                "this FFmpeg has no {name} encoder: install Debian's libavcodec59"
            ))
        })?;
        let mut enc = ff::codec::context::Context::new_with_codec(codec)
            .encoder()
            .video()
            .map_err(|e| MediaError::Codec(format!("cannot make the {name} encoder: {e}")))?;
        enc.set_width(cfg.width);
        enc.set_height(cfg.height);
        enc.set_format(ff::format::Pixel::YUV420P);
        enc.set_time_base((1, cfg.fps as i32));
        enc.set_frame_rate(Some((cfg.fps as i32, 1)));
        enc.set_gop(cfg.gop);
        enc.set_max_b_frames(cfg.b_frames as usize);
        enc.set_threading(ff::threading::Config {
            kind: ff::threading::Type::None,
            count: 1,
            safe: true,
        });
        let mut opts = ff::Dictionary::new();
        match cfg.codec {
            VideoCodec::Mpeg4Part2 => {
                let mut flags = ff::codec::Flags::QSCALE;
                if cfg.b_frames > 0 {
                    // A GOP's B-frames refer to nothing before its I-frame. FFmpeg's MPEG-4
                    // encoder refuses a closed GOP with scene-change detection on ("not yet
                    // implemented"); the ladder wants the fixed GOP anyway.
                    flags |= ff::codec::Flags::CLOSED_GOP;
                    opts.set("sc_threshold", "1000000000");
                }
                enc.set_flags(flags);
                enc.set_global_quality(cfg.quantizer as i32 * QP2LAMBDA);
            }
            VideoCodec::H264 => {
                opts.set("qp", &cfg.quantizer.to_string());
                opts.set("preset", "veryfast");
                // A fixed GOP with no scene-cut I-frames, as the MPEG-4 ladder has.
                opts.set("x264-params", "scenecut=0:open-gop=0");
            }
        }
        let encoder = enc
            .open_as_with(codec, opts)
            .map_err(|e| MediaError::Codec(format!("cannot open the {name} encoder: {e}")))?;
        Ok(FixedQuantizer {
            frame: ff::frame::Video::new(ff::format::Pixel::YUV420P, cfg.width, cfg.height),
            packet: ff::Packet::empty(),
            cfg,
            encoder,
            next: 0,
            out: VecDeque::new(),
        })
    }

    /// The settings it was made with.
    pub fn config(&self) -> &EncoderConfig {
        &self.cfg
    }

    /// Encodes the next picture (8-bit 4:2:0 of the configured size).
    pub fn push(&mut self, pic: &Picture) -> Result<(), MediaError> {
        let (w, h) = (self.cfg.width as usize, self.cfg.height as usize);
        if pic.width != w || pic.height != h || pic.chroma != metronome_quality::Chroma::C420 {
            return Err(MediaError::Config(format!(
                "a {}x{} {:?} picture for a {w}x{h} 4:2:0 encoder",
                pic.width, pic.height, pic.chroma
            )));
        }
        for p in 0..3 {
            let (src, pw, ph) = pic.plane(p);
            let stride = self.frame.stride(p);
            let dst = self.frame.data_mut(p);
            for row in 0..ph {
                dst[row * stride..row * stride + pw]
                    .copy_from_slice(&src[row * pw..(row + 1) * pw]);
            }
        }
        self.frame.set_pts(Some(self.next));
        self.next += 1;
        if self.cfg.codec == VideoCodec::Mpeg4Part2 {
            // As `ffmpeg -qscale:v` does: every picture asks for the quantizer's λ.
            // SAFETY: the frame is ours and allocated; `quality` is a plain int field.
            unsafe { (*self.frame.as_mut_ptr()).quality = self.cfg.quantizer as i32 * QP2LAMBDA };
        }
        self.encoder
            .send_frame(&self.frame)
            .map_err(|e| MediaError::Codec(format!("encoding frame {}: {e}", self.next - 1)))?;
        self.collect();
        Ok(())
    }

    /// No more pictures: what the encoder holds comes out.
    pub fn finish(&mut self) -> Result<(), MediaError> {
        self.encoder
            .send_eof()
            .map_err(|e| MediaError::Codec(format!("ending the encoder: {e}")))?;
        self.collect();
        Ok(())
    }

    /// The next coded frame, in decode order.
    pub fn pop(&mut self) -> Option<CodedFrame> {
        self.out.pop_front()
    }

    fn collect(&mut self) {
        while self.encoder.receive_packet(&mut self.packet).is_ok() {
            let Some(data) = self.packet.data() else {
                continue;
            };
            let frame = self
                .packet
                .pts()
                .and_then(|p| u32::try_from(p).ok())
                .unwrap_or(0);
            self.out.push_back(CodedFrame {
                frame,
                kind: frame_type(self.cfg.codec, data),
                data: data.to_vec(),
            });
        }
    }
}

/// A coded frame's type, from its bitstream: MPEG-4's `vop_coding_type` (ISO/IEC 14496-2
/// §6.2.5), H.264's `slice_type` of its first slice (ITU-T H.264 §7.3.3).
pub fn frame_type(codec: VideoCodec, data: &[u8]) -> FrameType {
    match codec {
        VideoCodec::Mpeg4Part2 => start_codes(data)
            .find(|&(code, _)| code == 0xb6)
            .and_then(|(_, rest)| rest.first())
            .map_or(FrameType::Other, |b| match b >> 6 {
                0 => FrameType::I,
                1 | 3 => FrameType::P,
                _ => FrameType::B,
            }),
        VideoCodec::H264 => start_codes(data)
            .filter(|&(header, _)| matches!(header & 0x1f, 1 | 5))
            .find_map(|(_, rest)| h264_slice_type(rest))
            .unwrap_or(FrameType::Other),
    }
}

/// Each start code's next byte (MPEG-4's start code value, H.264's NAL header) and what
/// follows it.
fn start_codes(data: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i + 3 < data.len() {
            if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
                let at = i + 3;
                i = at + 1;
                return Some((data[at], &data[at + 1..]));
            }
            i += 1;
        }
        None
    })
}

/// The type of an H.264 slice from the bytes after its NAL header.
fn h264_slice_type(rbsp: &[u8]) -> Option<FrameType> {
    // Enough bytes for the two Exp-Golomb codes, without emulation prevention bytes.
    let mut bits = Vec::with_capacity(8);
    let mut zeros = 0;
    for &b in rbsp.iter().take(16) {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        bits.push(b);
    }
    let mut r = BitReader {
        data: &bits,
        pos: 0,
    };
    let _first_mb = r.ue()?;
    Some(match r.ue()? % 5 {
        0 | 3 => FrameType::P,
        1 => FrameType::B,
        _ => FrameType::I,
    })
}

struct BitReader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl BitReader<'_> {
    fn bit(&mut self) -> Option<u32> {
        let b = self.data.get(self.pos / 8)?;
        let v = (b >> (7 - self.pos % 8)) & 1;
        self.pos += 1;
        Some(u32::from(v))
    }

    /// An unsigned Exp-Golomb code (H.264 §9.1).
    fn ue(&mut self) -> Option<u32> {
        let mut zeros = 0;
        while self.bit()? == 0 {
            zeros += 1;
            if zeros > 31 {
                return None;
            }
        }
        let mut v = 0u32;
        for _ in 0..zeros {
            v = (v << 1) | self.bit()?;
        }
        Some((1u32 << zeros) - 1 + v)
    }
}

#[cfg(test)]
mod tests;
