//! H.264 encoding through openh264 (Constrained Baseline: no B-frames, so decode order is
//! presentation order and DTS = PTS).
//!
//! The encoder runs its rate control in bitrate mode with frame skipping off, so every input
//! frame yields exactly one access unit. IDR pictures come at a fixed interval (the GOP).

use crate::pattern::Frame;
use crate::MediaError;
use openh264::encoder::{
    BitRate, Complexity, Encoder, EncoderConfig, FrameRate, FrameType, IntraFramePeriod,
    RateControlMode, UsageType,
};
use openh264::formats::YUVSource;
use openh264::OpenH264API;

/// Encoder settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct H264Config {
    /// Picture width, pixels: even, not 0.
    pub width: u32,
    /// Picture height, pixels: even, not 0.
    pub height: u32,
    /// Frames per second (integer rates only).
    pub fps: u32,
    /// Target bitrate of the video elementary stream, bits per second.
    pub bitrate: u32,
    /// Frames from one IDR picture to the next; `0` means one second (`fps` frames).
    pub idr_interval: u32,
}

impl H264Config {
    /// Settings for a `width`×`height` picture at `fps` frames per second and `bitrate`
    /// bit/s, with an IDR picture every second. Checked by [`H264Encoder::new`], not here.
    pub fn new(width: u32, height: u32, fps: u32, bitrate: u32) -> H264Config {
        H264Config {
            width,
            height,
            fps,
            bitrate,
            idr_interval: 0,
        }
    }
    /// The IDR interval in frames, with `0` resolved to one second.
    pub fn gop(&self) -> u32 {
        if self.idr_interval == 0 {
            self.fps
        } else {
            self.idr_interval
        }
    }
}

/// One encoded picture: Annex-B bytes (start-code-prefixed NAL units), borrowed from the encoder.
#[derive(Debug)]
pub struct AccessUnit<'a> {
    /// The Annex B bytes; valid until the encoder's next call.
    pub data: &'a [u8],
    /// Whether openh264 coded it as an IDR picture (a point to start decoding from).
    pub idr: bool,
    /// The index of the frame this access unit encodes (0 for the first frame given to the encoder).
    pub index: u64,
}

/// The openh264 encoder with a reused output buffer.
pub struct H264Encoder {
    config: H264Config,
    encoder: Encoder,
    out: Vec<u8>,
    frames: u64,
}

impl std::fmt::Debug for H264Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H264Encoder")
            .field("config", &self.config)
            .field("frames", &self.frames)
            .finish()
    }
}

impl H264Encoder {
    /// An encoder for `config`: bitrate rate control, no frame skipping, one thread.
    /// [`MediaError::Config`] for an odd or zero size, `fps` 0 or a bitrate under 10 kbit/s;
    /// [`MediaError::Encoder`] if openh264 will not start.
    pub fn new(config: H264Config) -> Result<H264Encoder, MediaError> {
        if config.width == 0 || config.height == 0 || config.width % 2 + config.height % 2 != 0 {
            return Err(MediaError::Config(format!(
                "H.264 frame size {}x{} must be even and non-zero",
                config.width, config.height
            )));
        }
        if config.fps == 0 || config.bitrate < 10_000 {
            return Err(MediaError::Config(format!(
                "H.264 needs fps > 0 (got {}) and a bitrate of at least 10 kbit/s (got {} bit/s)",
                config.fps, config.bitrate
            )));
        }
        let enc_config = EncoderConfig::new()
            .bitrate(BitRate::from_bps(config.bitrate))
            .max_frame_rate(FrameRate::from_hz(config.fps as f32))
            .rate_control_mode(RateControlMode::Bitrate)
            // One access unit per frame: the mux counts on it and the frame count tests check it.
            .skip_frames(false)
            .usage_type(UsageType::CameraVideoRealTime)
            .complexity(Complexity::Low)
            // IDRs exactly every `gop` frames, not also at scene cuts.
            .scene_change_detect(false)
            .intra_frame_period(IntraFramePeriod::from_num_frames(config.gop()))
            // One thread keeps the output deterministic and leaves the other core to the pacer.
            .num_threads(1);
        let mut encoder = Encoder::with_api_config(OpenH264API::from_source(), enc_config)
            .map_err(|e| MediaError::Encoder(format!("cannot create the encoder: {e}")))?;
        quiet_warnings(&mut encoder);
        Ok(H264Encoder {
            config,
            encoder,
            out: Vec::with_capacity((config.width * config.height) as usize),
            frames: 0,
        })
    }

    /// The settings it was made with.
    pub fn config(&self) -> &H264Config {
        &self.config
    }

    /// Encodes the next frame. Frame `n` is an IDR picture when `n % gop == 0`.
    pub fn encode(&mut self, frame: &Frame) -> Result<AccessUnit<'_>, MediaError> {
        if (frame.width(), frame.height())
            != (self.config.width as usize, self.config.height as usize)
        {
            return Err(MediaError::Config(format!(
                "frame is {}x{}, the encoder was set up for {}x{}",
                frame.width(),
                frame.height(),
                self.config.width,
                self.config.height
            )));
        }
        let index = self.frames;
        if index > 0 && index % self.config.gop() as u64 == 0 {
            self.encoder.force_intra_frame();
        }
        let ms = index * 1000 / self.config.fps as u64;
        let bs = self
            .encoder
            .encode_at(&I420(frame), openh264::Timestamp::from_millis(ms))
            .map_err(|e| MediaError::Encoder(format!("frame {index}: {e}")))?;
        let idr = bs.frame_type() == FrameType::IDR;
        self.out.clear();
        bs.write_vec(&mut self.out);
        self.frames += 1;
        if self.out.is_empty() {
            return Err(MediaError::Encoder(format!(
                "frame {index}: the encoder returned no data (frame type {:?})",
                bs.frame_type()
            )));
        }
        Ok(AccessUnit {
            data: &self.out,
            idr,
            index,
        })
    }
}

/// openh264 logs warnings to stderr while it initialises (at the first frame), among them one
/// that frame skipping is off, which is deliberate here. Keep its log to errors. The trace
/// level is the one option openh264 accepts before initialisation (welsEncoderExt.cpp, SetOption).
fn quiet_warnings(encoder: &mut Encoder) {
    let mut level: u32 = openh264_sys2::WELS_LOG_ERROR as u32;
    // SAFETY: the encoder object exists (created in `with_api_config`); SetOption with
    // ENCODER_OPTION_TRACE_LEVEL reads one u32 through the pointer, which outlives the call.
    let rc = unsafe {
        encoder.raw_api().set_option(
            openh264_sys2::ENCODER_OPTION_TRACE_LEVEL,
            (&raw mut level).cast(),
        )
    };
    // A failure only means the warnings stay; nothing depends on it.
    let _ = rc;
}

/// Adapts [`Frame`] to openh264's input trait.
struct I420<'a>(&'a Frame);

impl YUVSource for I420<'_> {
    fn dimensions(&self) -> (usize, usize) {
        (self.0.width(), self.0.height())
    }
    fn strides(&self) -> (usize, usize, usize) {
        let w = self.0.width();
        (w, w / 2, w / 2)
    }
    fn y(&self) -> &[u8] {
        self.0.y()
    }
    fn u(&self) -> &[u8] {
        self.0.u()
    }
    fn v(&self) -> &[u8] {
        self.0.v()
    }
}

/// Iterates over the NAL units of an Annex-B byte stream (H.264 Annex B.1), without start codes.
pub fn nal_units(annex_b: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = annex_b;
    std::iter::from_fn(move || {
        let start = find_start_code(rest)?;
        let body = &rest[start..];
        let end = find_start_code(body).map_or(body.len(), |next| {
            // Back up over the start code (and a leading zero of a 4-byte one).
            let mut e = next - 3;
            while e > 0 && body[e - 1] == 0 {
                e -= 1;
            }
            e
        });
        rest = &body[end..];
        Some(&body[..end])
    })
}

/// The index just past the next 00 00 01 start code.
fn find_start_code(b: &[u8]) -> Option<usize> {
    b.windows(3).position(|w| w == [0, 0, 1]).map(|p| p + 3)
}

/// The NAL unit type (H.264 §7.4.1): 5 = IDR slice, 7 = SPS, 8 = PPS, 9 = access unit delimiter.
pub fn nal_type(nal: &[u8]) -> Option<u8> {
    nal.first().map(|b| b & 0x1f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::TestPattern;

    #[test]
    fn idr_every_gop_and_rate_near_target() {
        let cfg = H264Config::new(320, 180, 30, 500_000);
        let mut enc = H264Encoder::new(cfg).unwrap();
        // Scenes of one second: static, moderate, then high motion, which needs rate control.
        let pattern = TestPattern::new(30, 1).unwrap();
        let mut frame = Frame::new(320, 180).unwrap();
        let mut bytes = 0usize;
        for i in 0..90u64 {
            pattern.render(i, &mut frame);
            let au = enc.encode(&frame).unwrap();
            assert_eq!(au.index, i);
            assert_eq!(au.idr, i % 30 == 0, "frame {i}: IDR flag");
            let types: Vec<u8> = nal_units(au.data).filter_map(nal_type).collect();
            assert_eq!(types.contains(&5), au.idr, "frame {i}: NAL types {types:?}");
            if au.idr {
                assert!(
                    types.contains(&7) && types.contains(&8),
                    "IDR without SPS/PPS: {types:?}"
                );
            }
            if i >= 60 {
                bytes += au.data.len();
            }
        }
        let rate = bytes as f64 * 8.0;
        assert!(
            rate > 350_000.0 && rate < 650_000.0,
            "high motion at 500 kbit/s gave {rate} bit/s"
        );
    }

    #[test]
    fn nal_splitting() {
        let s = [
            0, 0, 0, 1, 9, 0xf0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 3,
        ];
        let nals: Vec<&[u8]> = nal_units(&s).collect();
        assert_eq!(
            nals,
            vec![&[9u8, 0xf0][..], &[0x67, 1, 2][..], &[0x68, 3][..]]
        );
        assert_eq!(nal_units(&[1, 2, 3]).count(), 0);
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(H264Encoder::new(H264Config::new(321, 180, 30, 500_000)).is_err());
        assert!(H264Encoder::new(H264Config::new(320, 180, 0, 500_000)).is_err());
    }
}
