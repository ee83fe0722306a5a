//! A moving uncompressed test pattern of any size, rate and sampling.
//!
//! Every frame is a pure function of its index: 75 % colour bars over the top three quarters, a
//! grey ramp below, a white box that moves with the index, and the index itself as 32 black or
//! white pixel groups (most significant bit first) at the start of the first rows, which
//! [`RawTestPattern::decode_index`] reads back. Rendering copies precomputed rows and paints two
//! small regions, so it keeps up with large frames at high rates.

use super::convert::{pack10, rgb_to_ycbcr601};
use super::format::{Depth, Sampling, VideoFormat};
use super::{RawFrame, RawSource};
use crate::MediaError;

/// Bits of the frame index painted into the first rows.
const INDEX_BITS: usize = 32;
/// Rows carrying the index (fewer if the frame has fewer rows).
const INDEX_ROWS: usize = 4;

const BARS: [[u8; 3]; 8] = [
    [191, 191, 191],
    [191, 191, 0],
    [0, 191, 191],
    [0, 191, 0],
    [191, 0, 191],
    [191, 0, 0],
    [0, 0, 191],
    [0, 0, 0],
];

/// The pgroup octets (RFC 4175 §4.3) of a uniform colour given as 8-bit R'G'B'.
pub fn uniform_pgroup(fmt: &VideoFormat, rgb: [u8; 3]) -> ([u8; 6], usize) {
    let [y, cb, cr] = rgb_to_ycbcr601(rgb);
    match (fmt.sampling, fmt.depth) {
        (Sampling::Rgb, _) => ([rgb[0], rgb[1], rgb[2], 0, 0, 0], 3),
        (Sampling::Ycbcr420, _) => ([y, y, y, y, cb, cr], 6),
        (Sampling::Ycbcr422, Depth::Eight) => ([cb, y, cr, y, 0, 0], 4),
        (Sampling::Ycbcr422, Depth::Ten) => {
            let s = |v: u8| u16::from(v) << 2;
            let p = pack10([s(cb), s(y), s(cr), s(y)]);
            ([p[0], p[1], p[2], p[3], p[4], 0], 5)
        }
    }
}

/// The built-in uncompressed test source. Unbounded unless given a frame limit.
#[derive(Clone, Debug)]
pub struct RawTestPattern {
    format: VideoFormat,
    bars_row: Vec<u8>,
    ramp_row: Vec<u8>,
    white: ([u8; 6], usize),
    black: ([u8; 6], usize),
    next_index: u64,
    limit: Option<u64>,
}

impl RawTestPattern {
    /// An unbounded pattern of `format` (colour bars, a ramp, a moving box, the frame index;
    /// see the module), starting at frame 0; [`MediaError::Config`] for a format that does
    /// not validate.
    pub fn new(format: VideoFormat) -> Result<RawTestPattern, MediaError> {
        format.validate()?;
        let pg = format.pgroup();
        let n = format.pgroups_per_row();
        let mut bars_row = Vec::with_capacity(format.row_bytes());
        let mut ramp_row = Vec::with_capacity(format.row_bytes());
        for p in 0..n {
            let x = p as u64 * u64::from(pg.xinc);
            let bar = (x * 8 / u64::from(format.width)) as usize;
            let (b, len) = uniform_pgroup(&format, BARS[bar.min(7)]);
            bars_row.extend_from_slice(&b[..len]);
            let g = (x * 255 / u64::from(format.width.max(2) - 1).max(1)).min(255) as u8;
            let (r, len) = uniform_pgroup(&format, [g, g, g]);
            ramp_row.extend_from_slice(&r[..len]);
        }
        Ok(RawTestPattern {
            format,
            bars_row,
            ramp_row,
            white: uniform_pgroup(&format, [255, 255, 255]),
            black: uniform_pgroup(&format, [0, 0, 0]),
            next_index: 0,
            limit: None,
        })
    }

    /// Stops after `frames` frames.
    pub fn with_frame_limit(mut self, frames: u64) -> RawTestPattern {
        self.limit = Some(frames);
        self
    }

    /// Renders frame `index` into `frame` (reshaped to this pattern's format).
    pub fn render(&self, index: u64, frame: &mut RawFrame) {
        frame.reshape(self.format);
        frame.index = index;
        let fmt = self.format;
        let (rows, row_bytes, pgb) = (fmt.rows(), fmt.row_bytes(), fmt.pgroup().bytes as usize);
        let bars_end = rows - rows / 4;
        for (r, row) in frame.data.chunks_exact_mut(row_bytes).enumerate() {
            row.copy_from_slice(if r < bars_end {
                &self.bars_row
            } else {
                &self.ramp_row
            });
        }
        // The moving box: an eighth of the smaller side, in pgroups, bouncing across the frame.
        let per_row = fmt.pgroups_per_row();
        let box_w = (per_row / 8).max(1);
        let box_h = (rows / 8).max(1);
        let x = bounce(index * 3, per_row - box_w);
        let y = bounce(index * 2, rows - box_h);
        let (white, _) = self.white;
        for r in y..y + box_h {
            let row = &mut frame.data[r * row_bytes..][..row_bytes];
            for pg in row[x * pgb..(x + box_w) * pgb].chunks_exact_mut(pgb) {
                pg.copy_from_slice(&white[..pgb]);
            }
        }
        // The index, most significant bit first.
        let bits = INDEX_BITS.min(per_row);
        for r in 0..INDEX_ROWS.min(rows) {
            let row = &mut frame.data[r * row_bytes..][..row_bytes];
            for (b, pg) in row[..bits * pgb].chunks_exact_mut(pgb).enumerate() {
                let on = (index >> (bits - 1 - b)) & 1 == 1;
                let (c, _) = if on { self.white } else { self.black };
                pg.copy_from_slice(&c[..pgb]);
            }
        }
    }

    /// Reads back the index painted by [`render`](Self::render) (the low 32 bits, or fewer for
    /// frames narrower than 32 pgroups), or `None` if the first row does not hold one.
    pub fn decode_index(frame: &RawFrame) -> Option<u64> {
        let fmt = frame.format;
        let pgb = fmt.pgroup().bytes as usize;
        let bits = INDEX_BITS.min(fmt.pgroups_per_row());
        let (white, _) = uniform_pgroup(&fmt, [255, 255, 255]);
        let (black, _) = uniform_pgroup(&fmt, [0, 0, 0]);
        let row = frame.data.get(..bits * pgb)?;
        let mut v = 0u64;
        for pg in row.chunks_exact(pgb) {
            let bit = if pg == &white[..pgb] {
                1
            } else if pg == &black[..pgb] {
                0
            } else {
                return None;
            };
            v = (v << 1) | bit;
        }
        Some(v)
    }
}

/// Position `t` on a path that goes 0 → `span` → 0 → ...
fn bounce(t: u64, span: usize) -> usize {
    if span == 0 {
        return 0;
    }
    let span = span as u64;
    let t = t % (2 * span);
    (if t <= span { t } else { 2 * span - t }) as usize
}

impl RawSource for RawTestPattern {
    fn format(&self) -> VideoFormat {
        self.format
    }
    fn next_frame(&mut self, into: &mut RawFrame) -> Result<bool, MediaError> {
        if self.limit.is_some_and(|l| self.next_index >= l) {
            return Ok(false);
        }
        self.render(self.next_index, into);
        self.next_index += 1;
        Ok(true)
    }
    fn describe(&self) -> String {
        format!("raw test pattern {}", self.format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_formats() -> Vec<VideoFormat> {
        let mut v = Vec::new();
        for (s, d) in [
            (Sampling::Ycbcr422, Depth::Eight),
            (Sampling::Ycbcr422, Depth::Ten),
            (Sampling::Ycbcr420, Depth::Eight),
            (Sampling::Rgb, Depth::Eight),
        ] {
            for (w, h) in [(2, 2), (64, 48), (720, 576), (18, 6)] {
                v.push(VideoFormat::new(w, h, s, d, 50, 1).unwrap());
            }
        }
        v
    }

    #[test]
    fn frames_differ_and_carry_their_index() {
        for fmt in all_formats() {
            let mut src = RawTestPattern::new(fmt).unwrap().with_frame_limit(3);
            let mut a = RawFrame::new(fmt);
            let mut b = RawFrame::new(fmt);
            assert!(src.next_frame(&mut a).unwrap());
            assert!(src.next_frame(&mut b).unwrap());
            assert_eq!((a.index, b.index), (0, 1));
            assert_eq!(a.data.len(), fmt.frame_bytes());
            assert_ne!(a.data, b.data, "{fmt}");
            let bits = INDEX_BITS.min(fmt.pgroups_per_row()) as u32;
            if bits > 1 {
                assert_eq!(RawTestPattern::decode_index(&b), Some(1), "{fmt}");
            }
            assert!(src.next_frame(&mut a).unwrap());
            assert!(!src.next_frame(&mut a).unwrap());
        }
    }

    #[test]
    fn large_indices_decode_and_buffers_are_reused() {
        let fmt = VideoFormat::new(720, 576, Sampling::Ycbcr422, Depth::Eight, 25, 1).unwrap();
        let p = RawTestPattern::new(fmt).unwrap();
        let mut f = RawFrame::new(fmt);
        let ptr = f.data.as_ptr();
        p.render(0xdead_beef, &mut f);
        assert_eq!(f.data.as_ptr(), ptr);
        assert_eq!(RawTestPattern::decode_index(&f), Some(0xdead_beef));
        // The first bar is 75 % white: Y' = 180 in BT.601 limited range (frame 0's box is in
        // the top left corner, above row 72).
        p.render(0, &mut f);
        assert_eq!(f.data[200 * fmt.row_bytes() + 4 * 40 + 1], 180);
        assert_eq!(f.data[4 * 40 + 1], 235); // the box
        assert_eq!(f.data[4 * 20 + 1], 16); // bit 20 of index 0
    }

    #[test]
    fn bounce_stays_in_range() {
        for t in 0..100 {
            assert!(bounce(t, 7) <= 7);
        }
        assert_eq!(bounce(9, 0), 0);
        assert_eq!((bounce(7, 7), bounce(8, 7), bounce(14, 7)), (7, 6, 0));
    }
}
