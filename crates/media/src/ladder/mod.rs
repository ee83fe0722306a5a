//! Evalvid-RA's ladder: the same content encoded once per quantizer (seed 002: MPEG-4 Part 2 at
//! quantizer scales 2–31, CIF, 25 fps, GOP 12; its Table 2), from which a VBR controller picks
//! each GOP's rung. The frames are kept as the encoder made them, in decode order; every rung
//! has the same GOPs (fixed length, closed), so a rung can change at any GOP.
//!
//! Encoding is the slow part, so a ladder is kept in a cache ([`cache`]) under a key made of
//! the content's identity and every encoder setting: a second run with the same content and
//! settings reads it back instead of encoding again.

pub mod cache;
pub mod source;

use crate::encode::{CodedFrame, EncoderConfig, FixedQuantizer};
use crate::pattern::{Frame, Pictures};
use crate::MediaError;
use metronome_quality::{Chroma, Picture};
use std::path::Path;
use std::sync::Arc;

/// Seed 002's Table 2: the *highway* clip (73.4 s, CIF, 25 fps, GOP 12) encoded by FFmpeg's
/// MPEG-4 Part 2 encoder at each quantizer scale, kbit/s, as printed: not monotonic at the
/// coarse end (q 22, 25 and 28 above their neighbours).
pub const SEED002_TABLE2_KBPS: [(u32, f64); 30] = [
    (2, 2614.4),
    (3, 1420.5),
    (4, 929.1),
    (5, 651.1),
    (6, 452.9),
    (7, 362.0),
    (8, 294.0),
    (9, 234.8),
    (10, 219.0),
    (11, 197.4),
    (12, 179.0),
    (13, 166.0),
    (14, 139.7),
    (15, 135.4),
    (16, 129.9),
    (17, 113.6),
    (18, 107.6),
    (19, 102.6),
    (20, 96.9),
    (21, 92.8),
    (22, 103.2),
    (23, 85.1),
    (24, 81.6),
    (25, 92.7),
    (26, 76.6),
    (27, 73.8),
    (28, 86.1),
    (29, 69.5),
    (30, 67.4),
    (31, 65.5),
];

/// What a ladder is: the content, how it is encoded, at which quantizers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LadderSpec {
    /// The encoder's settings (its `quantizer` is each rung's own).
    pub encoder: EncoderConfig,
    /// The rungs' quantizers, finest first.
    pub quantizers: Vec<u32>,
    /// Frames of content.
    pub frames: u32,
    /// What the content is (a generator and its settings, or a file and its size and time):
    /// with the settings, the cache's key.
    pub content: String,
}

impl LadderSpec {
    /// The cache key's text: everything that changes what the encoder makes.
    pub fn key(&self) -> String {
        let e = &self.encoder;
        format!(
            "metronome-ladder 1|{}|{}|{}x{}@{}|gop {}|b {}|q {:?}|frames {}|libavcodec {}",
            self.content,
            e.codec.name(),
            e.width,
            e.height,
            e.fps,
            e.gop,
            e.b_frames,
            self.quantizers,
            self.frames,
            crate::decode::libavcodec_version()
        )
    }
}

/// One encoding of the content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rung {
    /// The quantizer it is encoded at (MPEG-4's quantizer scale, or H.264's QP).
    pub quantizer: u32,
    /// The coded frames in decode order.
    pub frames: Vec<CodedFrame>,
}

impl Rung {
    /// All its coded bytes.
    pub fn bytes(&self) -> u64 {
        self.frames.iter().map(|f| f.data.len() as u64).sum()
    }

    /// Its mean rate of coded video, bit/s, at `fps`.
    pub fn rate_bps(&self, fps: u32) -> f64 {
        let secs = self.frames.len() as f64 / f64::from(fps.max(1));
        if secs > 0.0 {
            self.bytes() as f64 * 8.0 / secs
        } else {
            0.0
        }
    }
}

/// The ladder: every rung, and how it was had.
#[derive(Debug)]
pub struct Ladder {
    /// What was encoded, and how.
    pub spec: LadderSpec,
    /// One rung per quantizer of the spec, in its order; every rung has the same frames.
    pub rungs: Vec<Rung>,
    /// Read from the cache rather than encoded.
    pub from_cache: bool,
}

impl Ladder {
    /// Encodes `pictures` (frames 0, 1, … in order) once per quantizer, in one pass over the
    /// content.
    pub fn build(spec: LadderSpec, pictures: &mut dyn Pictures) -> Result<Ladder, MediaError> {
        if spec.quantizers.is_empty() || spec.frames == 0 {
            return Err(MediaError::Config(
                "a ladder needs at least one quantizer and one frame".into(),
            ));
        }
        let mut encoders = spec
            .quantizers
            .iter()
            .map(|&q| {
                FixedQuantizer::new(EncoderConfig {
                    quantizer: q,
                    ..spec.encoder
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (w, h) = (spec.encoder.width, spec.encoder.height);
        let mut frame = Frame::new(w, h)?;
        let mut picture = Picture::black(w as usize, h as usize, Chroma::C420);
        let mut rungs: Vec<Rung> = spec
            .quantizers
            .iter()
            .map(|&quantizer| Rung {
                quantizer,
                frames: Vec::with_capacity(spec.frames as usize),
            })
            .collect();
        for i in 0..u64::from(spec.frames) {
            pictures.picture(i, &mut frame)?;
            frame.copy_to(&mut picture);
            for (enc, rung) in encoders.iter_mut().zip(&mut rungs) {
                enc.push(&picture)?;
                rung.frames.extend(std::iter::from_fn(|| enc.pop()));
            }
        }
        for (enc, rung) in encoders.iter_mut().zip(&mut rungs) {
            enc.finish()?;
            rung.frames.extend(std::iter::from_fn(|| enc.pop()));
        }
        Ok(Ladder {
            spec,
            rungs,
            from_cache: false,
        })
    }

    /// The ladder of `spec` from the cache in `dir` if it holds it, else encoded from the
    /// pictures `content` makes, and stored there. Without a cache directory, encoded.
    pub fn load_or_build(
        spec: LadderSpec,
        dir: Option<&Path>,
        content: impl FnOnce() -> Result<Box<dyn Pictures>, MediaError>,
    ) -> Result<Arc<Ladder>, MediaError> {
        if let Some(dir) = dir {
            if let Some(rungs) = cache::load(dir, &spec) {
                return Ok(Arc::new(Ladder {
                    spec,
                    rungs,
                    from_cache: true,
                }));
            }
        }
        let ladder = Ladder::build(spec, &mut *content()?)?;
        if let Some(dir) = dir {
            // A cache that cannot be written costs the next run an encoding, nothing more.
            let _ = cache::store(dir, &ladder);
        }
        Ok(Arc::new(ladder))
    }

    /// The rung at quantizer `q`; in a ladder without it, the next coarser one (a rate
    /// controller's choice of `q` is then not exceeded), or the coarsest.
    pub fn rung(&self, q: u32) -> &Rung {
        let coarsest = self.rungs.iter().max_by_key(|r| r.quantizer);
        self.rungs
            .iter()
            .filter(|r| r.quantizer >= q)
            .min_by_key(|r| r.quantizer)
            .or(coarsest)
            .expect("a ladder has a rung (checked when built)")
    }

    /// Frames in every rung.
    pub fn frames(&self) -> usize {
        self.rungs.first().map_or(0, |r| r.frames.len())
    }

    /// Bytes of GOP `g` (frames `g × gop …` in decode order) at quantizer `q`.
    pub fn gop_bytes(&self, q: u32, g: usize) -> u64 {
        let gop = self.spec.encoder.gop.max(1) as usize;
        self.rung(q)
            .frames
            .iter()
            .skip(g * gop)
            .take(gop)
            .map(|f| f.data.len() as u64)
            .sum()
    }
}

#[cfg(test)]
mod tests;
