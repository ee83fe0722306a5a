//! A synthetic moving test pattern: I420 frames that are a pure function of the frame index.
//!
//! Scenes of different coding difficulty follow one another and cycle, so an encoder sees
//! easy, moderate and hard content in every run:
//!
//! - [`Scene::Static`]: 75 % colour bars with a small moving frame counter (almost nothing changes);
//! - [`Scene::Moderate`]: a scrolling diagonal gradient with bouncing coloured boxes;
//! - [`Scene::HighMotion`]: a fast-moving, high-detail noise-and-ripple texture.
//!
//! The caller owns the [`Frame`]; [`TestPattern::render`] overwrites it in place and allocates nothing.

use crate::MediaError;

/// One I420 (YUV 4:2:0 planar, 8 bit, BT.601 limited range) picture: the Y plane, then U, then V,
/// each tightly packed (stride = plane width).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    width: usize,
    height: usize,
    data: Vec<u8>,
}

impl Frame {
    /// A black frame. Width and height must be even and non-zero (4:2:0 subsamples by two).
    pub fn new(width: u32, height: u32) -> Result<Frame, MediaError> {
        if width == 0 || height == 0 || width % 2 != 0 || height % 2 != 0 {
            return Err(MediaError::Config(format!(
                "frame size {width}x{height}: width and height must be even and non-zero (I420)"
            )));
        }
        let (w, h) = (width as usize, height as usize);
        let mut data = vec![128u8; w * h * 3 / 2];
        data[..w * h].fill(16);
        Ok(Frame {
            width: w,
            height: h,
            data,
        })
    }
    /// Width, pixels (even).
    pub fn width(&self) -> usize {
        self.width
    }
    /// Height, pixels (even).
    pub fn height(&self) -> usize {
        self.height
    }
    /// The luma plane: `width × height` bytes, row by row.
    pub fn y(&self) -> &[u8] {
        &self.data[..self.width * self.height]
    }
    /// The Cb plane: `width/2 × height/2` bytes, row by row.
    pub fn u(&self) -> &[u8] {
        let (y, c) = (self.width * self.height, self.width * self.height / 4);
        &self.data[y..y + c]
    }
    /// The Cr plane: `width/2 × height/2` bytes, row by row.
    pub fn v(&self) -> &[u8] {
        let (y, c) = (self.width * self.height, self.width * self.height / 4);
        &self.data[y + c..]
    }
    /// All three planes, mutably: (Y, U, V).
    pub fn planes_mut(&mut self) -> (&mut [u8], &mut [u8], &mut [u8]) {
        let (y, c) = (self.width * self.height, self.width * self.height / 4);
        let (yp, uv) = self.data.split_at_mut(y);
        let (up, vp) = uv.split_at_mut(c);
        (yp, up, vp)
    }
    /// The whole I420 buffer (Y, U, V back to back).
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }
    /// The whole I420 buffer, to be filled (by a picture source reading raw frames).
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
    /// Copies it into `out`, as the picture the quality metrics compare (4:2:0).
    pub fn copy_to(&self, out: &mut metronome_quality::Picture) {
        out.width = self.width;
        out.height = self.height;
        out.chroma = metronome_quality::Chroma::C420;
        out.data.clear();
        out.data.extend_from_slice(&self.data);
    }
}

/// What kind of content a frame shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scene {
    /// 75 % colour bars with a small moving frame counter: almost nothing changes, easy to
    /// code.
    Static,
    /// A scrolling diagonal gradient with bouncing coloured boxes: moderate motion.
    Moderate,
    /// A fast-moving, high-detail noise-and-ripple texture: hard to code.
    HighMotion,
}

impl Scene {
    const CYCLE: [Scene; 3] = [Scene::Static, Scene::Moderate, Scene::HighMotion];
}

/// Where a test source's pictures come from: the built-in pattern, or another generator (the
/// lab's FFmpeg lavfi scenes). Frames are asked for in increasing order; a source may be asked
/// to skip ahead (a sender that fell behind), never to go back.
pub trait Pictures: Send + std::fmt::Debug {
    /// Draws frame `index` into `frame`.
    fn picture(&mut self, index: u64, frame: &mut Frame) -> Result<(), MediaError>;
}

impl Pictures for TestPattern {
    fn picture(&mut self, index: u64, frame: &mut Frame) -> Result<(), MediaError> {
        self.render(index, frame);
        Ok(())
    }
}

/// The pattern generator: frame rate and scene length (the frame size is the [`Frame`]'s it
/// draws into). Rendering is deterministic.
#[derive(Clone, Debug)]
pub struct TestPattern {
    fps: u32,
    scene_frames: u64,
}

/// 75 % colour bars (white, yellow, cyan, green, magenta, red, blue) as BT.601 limited-range YUV.
const BARS: [[u8; 3]; 7] = [
    [180, 128, 128],
    [162, 44, 142],
    [131, 156, 44],
    [112, 72, 58],
    [84, 184, 198],
    [65, 100, 212],
    [35, 212, 114],
];

/// Moving boxes of the moderate scene: (Y, U, V) colour.
const BOXES: [[u8; 3]; 4] = [[82, 90, 240], [145, 54, 34], [41, 240, 110], [210, 16, 146]];

/// A 3x5 bitmap font for the digits 0-9; each row is three bits, most significant on the left.
const DIGITS: [[u8; 5]; 10] = [
    [7, 5, 5, 5, 7],
    [2, 6, 2, 2, 7],
    [7, 1, 7, 4, 7],
    [7, 1, 7, 1, 7],
    [5, 5, 7, 1, 1],
    [7, 4, 7, 1, 7],
    [7, 4, 7, 5, 7],
    [7, 1, 1, 1, 1],
    [7, 5, 7, 5, 7],
    [7, 5, 7, 1, 7],
];

impl TestPattern {
    /// `scene_secs`: how long each scene lasts before the next one starts (the cycle is three scenes).
    pub fn new(fps: u32, scene_secs: u32) -> Result<TestPattern, MediaError> {
        if fps == 0 || scene_secs == 0 {
            return Err(MediaError::Config(format!(
                "test pattern: fps ({fps}) and scene length ({scene_secs} s) must be non-zero"
            )));
        }
        Ok(TestPattern {
            fps,
            scene_frames: fps as u64 * scene_secs as u64,
        })
    }

    /// Frames per second (non-zero), which with the scene length sets a scene's frames.
    pub fn fps(&self) -> u32 {
        self.fps
    }

    /// The scene shown at frame `index`.
    pub fn scene_at(&self, index: u64) -> Scene {
        Scene::CYCLE[((index / self.scene_frames) % 3) as usize]
    }

    /// Draws frame `index` into `frame` (any even size) and returns its scene.
    pub fn render(&self, index: u64, frame: &mut Frame) -> Scene {
        let scene = self.scene_at(index);
        match scene {
            Scene::Static => self.draw_bars(index, frame),
            Scene::Moderate => draw_moderate(index, frame),
            Scene::HighMotion => draw_high_motion(index, frame),
        }
        scene
    }

    fn draw_bars(&self, index: u64, frame: &mut Frame) {
        let (w, h) = (frame.width, frame.height);
        let (yp, up, vp) = frame.planes_mut();
        for (row, line) in yp.chunks_exact_mut(w).enumerate() {
            for (x, px) in line.iter_mut().enumerate() {
                *px = if row < h * 3 / 4 {
                    BARS[x * 7 / w][0]
                } else {
                    16 + (x * 219 / w) as u8
                };
            }
        }
        let cw = w / 2;
        for (row, (ul, vl)) in up
            .chunks_exact_mut(cw)
            .zip(vp.chunks_exact_mut(cw))
            .enumerate()
        {
            for x in 0..cw {
                let (u, v) = if row * 2 < h * 3 / 4 {
                    let bar = BARS[x * 2 * 7 / w];
                    (bar[1], bar[2])
                } else {
                    (128, 128)
                };
                ul[x] = u;
                vl[x] = v;
            }
        }
        // The counter drifts one pixel a frame across the bottom band.
        let scale = (h / 60).max(1);
        let digits_w = 4 * scale * 6;
        let span = w.saturating_sub(digits_w).max(1);
        let x0 = (index as usize) % span;
        let y0 = h * 3 / 4 + scale;
        draw_number(yp, w, h, x0, y0, scale, index % 1_000_000);
    }
}

/// Draws `n` as six decimal digits (white on black) at (x0, y0) into the Y plane.
fn draw_number(yp: &mut [u8], w: usize, h: usize, x0: usize, y0: usize, scale: usize, n: u64) {
    let cell = 4 * scale;
    for i in 0..6 {
        let digit = (n / 10u64.pow(5 - i as u32) % 10) as usize;
        for gy in 0..6 * scale {
            for gx in 0..cell {
                let (x, y) = (x0 + i * cell + gx, y0 + gy);
                if x >= w || y >= h {
                    continue;
                }
                let (fx, fy) = (gx / scale, gy / scale);
                let on = fx < 3 && fy < 5 && DIGITS[digit][fy] & (4 >> fx) != 0;
                yp[y * w + x] = if on { 235 } else { 16 };
            }
        }
    }
}

/// A diagonal luma gradient scrolling 4 px/frame, slow chroma ramps, and four bouncing boxes.
fn draw_moderate(index: u64, frame: &mut Frame) {
    let (w, h) = (frame.width, frame.height);
    let t = index as usize;
    let (yp, up, vp) = frame.planes_mut();
    for (row, line) in yp.chunks_exact_mut(w).enumerate() {
        for (x, px) in line.iter_mut().enumerate() {
            let ramp = (x + row + 4 * t) % 512;
            let tri = if ramp < 256 { ramp } else { 511 - ramp };
            *px = 16 + (tri * 219 / 255) as u8;
        }
    }
    let cw = w / 2;
    for (row, (ul, vl)) in up
        .chunks_exact_mut(cw)
        .zip(vp.chunks_exact_mut(cw))
        .enumerate()
    {
        for x in 0..cw {
            ul[x] = 64 + triangle((x + t) * 256 / cw) as u8;
            vl[x] = 64 + triangle((row * 2 + t) * 256 / h) as u8;
        }
    }
    let side = (h / 6).max(2) & !1;
    for (k, colour) in BOXES.iter().enumerate() {
        let speed = 3 + 2 * k;
        let x = bounce(t * speed + k * 97, w.saturating_sub(side)) & !1;
        let y = bounce(t * (speed + 1) / 2 + k * 53, h.saturating_sub(side)) & !1;
        fill_rect(frame, x, y, side, side, *colour);
    }
}

/// A fast-moving, high-detail texture: smooth value noise (16 px cells) with a fine XOR
/// lattice on top, panning as a whole 12 px/frame right and 6 px/frame down (so motion search
/// can follow it), and a block that jumps across the picture every frame.
fn draw_high_motion(index: u64, frame: &mut Frame) {
    let (w, h) = (frame.width, frame.height);
    let t = index as usize;
    let (dx, dy) = (12 * t, 6 * t);
    let (yp, up, vp) = frame.planes_mut();
    for (row, line) in yp.chunks_exact_mut(w).enumerate() {
        let ty = row + dy;
        for (x, px) in line.iter_mut().enumerate() {
            let tx = x + dx;
            let fine = (((tx ^ ty) >> 1) & 3) as u32 * 14;
            *px = (16 + value_noise(tx, ty, 4, 0) * 3 / 4 + fine) as u8;
        }
    }
    let cw = w / 2;
    for (row, (ul, vl)) in up
        .chunks_exact_mut(cw)
        .zip(vp.chunks_exact_mut(cw))
        .enumerate()
    {
        for x in 0..cw {
            let (tx, ty) = (x + dx / 2, row + dy / 2);
            ul[x] = 64 + (value_noise(tx, ty, 3, 1) / 2) as u8;
            vl[x] = 64 + (value_noise(tx, ty, 3, 2) / 2) as u8;
        }
    }
    let side = (h / 5).max(2) & !1;
    let x = (hash2(t as u32, 7) as usize % w.saturating_sub(side).max(1)) & !1;
    let y = (hash2(t as u32, 11) as usize % h.saturating_sub(side).max(1)) & !1;
    fill_rect(frame, x, y, side, side, BOXES[t % BOXES.len()]);
}

/// Bilinearly interpolated lattice noise with cells of 2^`shift` pixels, in 0..=255.
fn value_noise(x: usize, y: usize, shift: u32, seed: u32) -> u32 {
    let (cx, cy) = ((x >> shift) as u32, (y >> shift) as u32);
    let mask = (1usize << shift) - 1;
    let (fx, fy) = ((x & mask) as u32, (y & mask) as u32);
    let lattice = |i: u32, j: u32| hash2(i.wrapping_add(seed.wrapping_mul(7919)), j) & 0xff;
    let one = 1u32 << shift;
    let top = lattice(cx, cy) * (one - fx) + lattice(cx + 1, cy) * fx;
    let bottom = lattice(cx, cy + 1) * (one - fx) + lattice(cx + 1, cy + 1) * fx;
    (top * (one - fy) + bottom * fy) >> (2 * shift)
}

/// A triangle wave of period 256 and peak 127 (no seams where it wraps).
fn triangle(v: usize) -> usize {
    let v = v % 256;
    if v < 128 {
        v
    } else {
        255 - v
    }
}

/// A position bouncing between 0 and `max` as `pos` grows.
fn bounce(pos: usize, max: usize) -> usize {
    if max == 0 {
        return 0;
    }
    let p = pos % (2 * max);
    if p < max {
        p
    } else {
        2 * max - p
    }
}

/// Fills a rectangle (clipped to the frame; x, y, w, h even) with one YUV colour.
fn fill_rect(frame: &mut Frame, x: usize, y: usize, rw: usize, rh: usize, c: [u8; 3]) {
    let (w, h) = (frame.width, frame.height);
    let (x1, y1) = ((x + rw).min(w), (y + rh).min(h));
    let (yp, up, vp) = frame.planes_mut();
    for row in y..y1 {
        yp[row * w + x..row * w + x1].fill(c[0]);
    }
    let cw = w / 2;
    for row in y / 2..y1 / 2 {
        up[row * cw + x / 2..row * cw + x1 / 2].fill(c[1]);
        vp[row * cw + x / 2..row * cw + x1 / 2].fill(c[2]);
    }
}

/// A small integer hash (deterministic, no RNG state).
fn hash2(x: u32, y: u32) -> u32 {
    let mut h = x.wrapping_mul(0x9e37_79b1) ^ y.wrapping_mul(0x85eb_ca77);
    h ^= h >> 15;
    h = h.wrapping_mul(0x2c1b_3c6d);
    h ^= h >> 12;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mean absolute luma difference between consecutive frames `i-1` and `i`.
    fn motion(p: &TestPattern, i: u64, a: &mut Frame, b: &mut Frame) -> f64 {
        p.render(i - 1, a);
        p.render(i, b);
        let sad: u64 = a
            .y()
            .iter()
            .zip(b.y())
            .map(|(x, y)| x.abs_diff(*y) as u64)
            .sum();
        sad as f64 / a.y().len() as f64
    }

    #[test]
    fn deterministic_and_scenes_differ_in_motion() {
        let p = TestPattern::new(30, 4).unwrap();
        let (mut a, mut b) = (Frame::new(320, 180).unwrap(), Frame::new(320, 180).unwrap());
        p.render(200, &mut a);
        p.render(7, &mut b);
        p.render(200, &mut b);
        assert_eq!(a, b, "the same index must give the same picture");
        assert_eq!(p.scene_at(0), Scene::Static);
        assert_eq!(p.scene_at(120), Scene::Moderate);
        assert_eq!(p.scene_at(240), Scene::HighMotion);
        assert_eq!(p.scene_at(360), Scene::Static);
        let still = motion(&p, 10, &mut a, &mut b);
        let moderate = motion(&p, 130, &mut a, &mut b);
        let high = motion(&p, 250, &mut a, &mut b);
        eprintln!(
            "mean |Δluma| per frame: static {still:.2}, moderate {moderate:.2}, high {high:.2}"
        );
        // Seen: static 1.27 (the moving counter), moderate 6.1, high 38.
        assert!(still < 2.0, "static scene changes too much: {still}");
        assert!(
            moderate > 3.0 * still.max(0.1),
            "moderate {moderate} vs static {still}"
        );
        assert!(
            high > 4.0 * moderate,
            "high motion {high} vs moderate {moderate}"
        );
    }

    #[test]
    fn odd_or_empty_sizes_are_refused_and_small_sizes_render() {
        assert!(Frame::new(641, 360).is_err());
        assert!(Frame::new(0, 2).is_err());
        let p = TestPattern::new(25, 1).unwrap();
        for (w, h) in [(2, 2), (16, 8), (18, 34)] {
            let mut f = Frame::new(w, h).unwrap();
            for i in [0, 25, 50, 75] {
                p.render(i, &mut f);
            }
            assert_eq!(f.as_bytes().len(), (w * h * 3 / 2) as usize);
        }
    }
}
