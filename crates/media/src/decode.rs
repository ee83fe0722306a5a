//! Decoding through FFmpeg's libavcodec: what a viewer's player makes of the frames that
//! reached it. MPEG-4 Part 2 (what Evalvid-RA's ladder is encoded with) and H.264 of any
//! profile, B-frames included.
//!
//! A player decodes the frames it has, in decode order, and a frame whose reference was lost
//! is still decoded against the picture the decoder has instead, with the errors that brings
//! (drift until the next I-frame): libavcodec's own error concealment (motion-vector guessing
//! and deblocking, its defaults), as FFmpeg decodes Evalvid's reconstructed files. One thread,
//! so that the pictures are the same on every run and every machine.
//!
//! Pictures come out in display order, each with the number of the frame it belongs to: the
//! number rides through the decoder as the packet's PTS, which libavcodec carries across
//! reordering.

use crate::MediaError;
use ffmpeg_next as ff;
use metronome_quality::viewer::Decode;
use metronome_quality::{Chroma, Picture};
use std::collections::VecDeque;

/// A video codec FFmpeg decodes (and the ladder encodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VideoCodec {
    /// MPEG-4 Part 2 Visual (ISO/IEC 14496-2): Evalvid's and seed 002's codec.
    Mpeg4Part2,
    /// H.264 / AVC (ITU-T H.264), any profile, as Annex B access units.
    H264,
}

impl VideoCodec {
    fn id(self) -> ff::codec::Id {
        match self {
            VideoCodec::Mpeg4Part2 => ff::codec::Id::MPEG4,
            VideoCodec::H264 => ff::codec::Id::H264,
        }
    }

    /// FFmpeg's name of the codec (`mpeg4`, `h264`), as messages and scenarios write it.
    pub fn name(self) -> &'static str {
        match self {
            VideoCodec::Mpeg4Part2 => "mpeg4",
            VideoCodec::H264 => "h264",
        }
    }
}

/// FFmpeg's libraries, set up once (quiet: a decoder meeting a damaged frame says so on
/// stderr otherwise, for every frame).
pub(crate) fn init() -> Result<(), MediaError> {
    static INIT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    INIT.get_or_init(|| {
        ff::init().map_err(|e| format!("FFmpeg's libraries would not start: {e}"))?;
        ff::util::log::set_level(ff::util::log::Level::Quiet);
        Ok(())
    })
    .clone()
    .map_err(MediaError::Codec)
}

/// The libavcodec linked in, as `MAJOR.MINOR.MICRO` (what encodes the ladder: part of its
/// cache key).
pub fn libavcodec_version() -> String {
    let v = ff::codec::version();
    format!("{}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff)
}

/// Counters of what the decoder met.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Coded frames handed to the decoder (empty ones included).
    pub frames: u64,
    /// Pictures that came out of it.
    pub pictures: u64,
    /// Frames the decoder refused (a concealed picture may still come for others).
    pub errors: u64,
}

/// The largest picture taken from the decoder (8192×4320).
const MAX_SAMPLES: usize = 8192 * 4320;

/// One video stream's decoder.
pub struct VideoDecoder {
    decoder: ff::decoder::Video,
    frame: ff::frame::Video,
    /// To 8-bit 4:2:0 when the stream is anything else (4:2:2 or 10-bit H.264).
    scaler: Option<(ff::software::scaling::Context, ff::frame::Video)>,
    /// Pictures taken out to make room for input, not yet received.
    pending: VecDeque<(u32, Picture)>,
    stats: DecodeStats,
}

impl std::fmt::Debug for VideoDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VideoDecoder")
            .field("stats", &self.stats)
            .finish()
    }
}

impl VideoDecoder {
    /// A decoder of `codec`; `config` is the stream's out-of-band configuration, if it has
    /// one (MPEG-4's VOL header from the SDP's `config=`, H.264's parameter sets); in-band
    /// headers work without it.
    pub fn new(codec: VideoCodec, config: Option<&[u8]>) -> Result<VideoDecoder, MediaError> {
        init()?;
        let found = ff::codec::decoder::find(codec.id()).ok_or_else(|| {
            MediaError::Codec(format!(
                "this FFmpeg has no {} decoder: install Debian's libavcodec59",
                codec.name()
            ))
        })?;
        let mut ctx = ff::codec::context::Context::new_with_codec(found);
        ctx.set_threading(ff::threading::Config {
            kind: ff::threading::Type::None,
            count: 1,
            safe: true,
        });
        if let Some(extra) = config.filter(|c| !c.is_empty()) {
            set_extradata(&mut ctx, extra)?;
        }
        let decoder = ctx.decoder().video().map_err(|e| {
            MediaError::Codec(format!("cannot open the {} decoder: {e}", codec.name()))
        })?;
        Ok(VideoDecoder {
            decoder,
            frame: ff::frame::Video::empty(),
            scaler: None,
            pending: VecDeque::new(),
            stats: DecodeStats::default(),
        })
    }

    /// What the decoder has met so far.
    pub fn stats(&self) -> DecodeStats {
        self.stats
    }

    /// The next decoded picture, if one is ready.
    fn take(&mut self, out: &mut Picture) -> Option<u32> {
        loop {
            self.decoder.receive_frame(&mut self.frame).ok()?;
            let Some(k) = self.frame.pts().and_then(|p| u32::try_from(p).ok()) else {
                continue;
            };
            if self.copy_out(out) {
                self.stats.pictures += 1;
                return Some(k);
            }
        }
    }

    /// The decoded frame into `out` as packed 8-bit 4:2:0.
    fn copy_out(&mut self, out: &mut Picture) -> bool {
        let (w, h) = (self.frame.width() as usize, self.frame.height() as usize);
        if w == 0 || h == 0 || w * h > MAX_SAMPLES {
            return false;
        }
        let src = match self.frame.format() {
            ff::format::Pixel::YUV420P | ff::format::Pixel::YUVJ420P => &self.frame,
            other => {
                let fresh = self.scaler.as_ref().is_none_or(|(s, _)| {
                    s.input().format != other
                        || s.input().width != w as u32
                        || s.input().height != h as u32
                });
                if fresh {
                    let Ok(s) = ff::software::scaling::Context::get(
                        other,
                        w as u32,
                        h as u32,
                        ff::format::Pixel::YUV420P,
                        w as u32,
                        h as u32,
                        ff::software::scaling::Flags::POINT,
                    ) else {
                        return false;
                    };
                    self.scaler = Some((s, ff::frame::Video::empty()));
                }
                let Some((s, conv)) = self.scaler.as_mut() else {
                    return false;
                };
                if s.run(&self.frame, conv).is_err() {
                    return false;
                }
                &*conv
            }
        };
        packed_420(src, w, h, out);
        true
    }
}

/// Copies frame `f` (planar 4:2:0, any strides) into `out`, planes packed.
fn packed_420(f: &ff::frame::Video, w: usize, h: usize, out: &mut Picture) {
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    out.width = w;
    out.height = h;
    out.chroma = Chroma::C420;
    out.data.clear();
    out.data.reserve(w * h + 2 * cw * ch);
    for (p, (pw, ph)) in [(w, h), (cw, ch), (cw, ch)].into_iter().enumerate() {
        let stride = f.stride(p);
        let data = f.data(p);
        for row in 0..ph {
            out.data
                .extend_from_slice(&data[row * stride..row * stride + pw]);
        }
    }
}

/// Gives `ctx` the stream's configuration as extradata (copied into memory libavcodec owns,
/// with the zeroed padding it reads past the end).
fn set_extradata(ctx: &mut ff::codec::context::Context, extra: &[u8]) -> Result<(), MediaError> {
    let pad = ff::ffi::AV_INPUT_BUFFER_PADDING_SIZE as usize;
    // SAFETY: av_mallocz returns zeroed memory of the size asked for, or null (checked); the
    // copy stays within it; the context takes ownership (freed with it by libavcodec).
    unsafe {
        let buf = ff::ffi::av_mallocz(extra.len() + pad) as *mut u8;
        if buf.is_null() {
            return Err(MediaError::Codec(
                "out of memory for the decoder's configuration".into(),
            ));
        }
        std::ptr::copy_nonoverlapping(extra.as_ptr(), buf, extra.len());
        let raw = ctx.as_mut_ptr();
        (*raw).extradata = buf;
        (*raw).extradata_size = extra.len() as i32;
    }
    Ok(())
}

impl Decode for VideoDecoder {
    fn send(&mut self, frame: u32, coded: &[u8]) -> bool {
        self.stats.frames += 1;
        if coded.is_empty() {
            self.stats.errors += 1;
            return false;
        }
        let mut packet = ff::Packet::copy(coded);
        packet.set_pts(Some(i64::from(frame)));
        loop {
            match self.decoder.send_packet(&packet) {
                Ok(()) => return true,
                // Its output must be taken first: keep it for `receive`.
                Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => {
                    let mut pic = Picture::black(2, 2, Chroma::C420);
                    match self.take(&mut pic) {
                        Some(k) => self.pending.push_back((k, pic)),
                        None => {
                            self.stats.errors += 1;
                            return false;
                        }
                    }
                }
                Err(_) => {
                    self.stats.errors += 1;
                    return false;
                }
            }
        }
    }

    fn receive(&mut self, out: &mut Picture) -> Option<u32> {
        if let Some((k, pic)) = self.pending.pop_front() {
            *out = pic;
            return Some(k);
        }
        self.take(out)
    }

    fn drain(&mut self) {
        let _ = self.decoder.send_eof();
    }
}
