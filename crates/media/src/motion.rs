//! Generated high-motion content, made to be hard to code as natural video is: the ground
//! seen in perspective from a camera that drives forward over it (rows nearer the bottom are
//! nearer, larger and faster, so no block simply translates), sways and zooms, with textured
//! vehicles crossing at their own speeds and a little sensor grain. The ground's texture has
//! fine detail at every scale (octaves of value noise, each 0.85 of the coarser one's
//! amplitude). Every frame moves every pixel, so an encoder codes real residuals in every
//! P-frame, and the detail survives only at fine quantizers: across the MPEG-4 ladder
//! (quantizer 2 to 31, CIF) the picture goes from excellent (41 dB) to poor (24 dB) and the
//! rate falls 35-fold, as with seed 002's *highway* clip (its Table 2 and the MOS scale).
//!
//! A pure function of the frame index and the seed: the lab draws the same pictures again to
//! judge what viewers saw.

use crate::pattern::{Frame, Pictures};
use crate::MediaError;

/// Side of the square texture the camera looks at (a power of two: coordinates wrap).
const TEX: usize = 1024;
/// Each octave's amplitude against the coarser one's (1/f noise would be 0.5; more keeps the
/// fine detail a camera's picture of a real scene has).
const OCTAVE_GAIN: f64 = 0.85;
/// The sensor's grain: each pixel of each frame moves by up to this much, independently.
const GRAIN: i32 = 1;

/// High-motion generated pictures.
pub struct Motion {
    fps: f64,
    /// Luma texture, `TEX`×`TEX`.
    luma: Vec<u8>,
    /// Chroma textures, `TEX/2`×`TEX/2` each.
    cb: Vec<u8>,
    cr: Vec<u8>,
    vehicles: Vec<Vehicle>,
}

impl std::fmt::Debug for Motion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Motion").field("fps", &self.fps).finish()
    }
}

/// A textured box crossing the picture.
#[derive(Clone, Copy, Debug)]
struct Vehicle {
    /// Where it is at t = 0 and how fast it goes, in picture fractions per second.
    x0: f64,
    y: f64,
    speed: f64,
    w: f64,
    h: f64,
    /// Where in the texture its skin comes from.
    skin: (usize, usize),
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A `size`×`size` texture of 1/f noise around `mean`, spread ±`spread`.
fn texture(size: usize, rng: &mut Rng, mean: f64, spread: f64) -> Vec<u8> {
    let mut acc = vec![0f64; size * size];
    let mut cell = size / 4;
    let mut amp = 1.0;
    let mut total = 0.0;
    while cell >= 1 {
        let n = size / cell;
        let lattice: Vec<f64> = (0..n * n).map(|_| rng.unit() * 2.0 - 1.0).collect();
        for y in 0..size {
            let (gy, fy) = (y / cell, (y % cell) as f64 / cell as f64);
            for x in 0..size {
                let (gx, fx) = (x / cell, (x % cell) as f64 / cell as f64);
                let at = |i: usize, j: usize| lattice[(j % n) * n + (i % n)];
                let top = at(gx, gy) * (1.0 - fx) + at(gx + 1, gy) * fx;
                let bottom = at(gx, gy + 1) * (1.0 - fx) + at(gx + 1, gy + 1) * fx;
                acc[y * size + x] += amp * (top * (1.0 - fy) + bottom * fy);
            }
        }
        total += amp;
        amp *= OCTAVE_GAIN;
        cell /= 2;
    }
    acc.iter()
        .map(|v| (mean + spread * v / total * 1.8).clamp(16.0, 235.0) as u8)
        .collect()
}

/// Sample of a wrapping texture at a sub-pixel position (bilinear).
fn sample(tex: &[u8], size: usize, x: f64, y: f64) -> u8 {
    let m = size - 1;
    let (xf, yf) = (x.floor(), y.floor());
    let (fx, fy) = (x - xf, y - yf);
    let (x0, y0) = ((xf as i64 as usize) & m, (yf as i64 as usize) & m);
    let (x1, y1) = ((x0 + 1) & m, (y0 + 1) & m);
    let p = |xx: usize, yy: usize| f64::from(tex[yy * size + xx]);
    let top = p(x0, y0) * (1.0 - fx) + p(x1, y0) * fx;
    let bottom = p(x0, y1) * (1.0 - fx) + p(x1, y1) * fx;
    (top * (1.0 - fy) + bottom * fy + 0.5) as u8
}

/// The grain of pixel `i` in frame `index`: a hash of both, within ±[`GRAIN`].
fn grain(index: u64, i: usize) -> i32 {
    let mut h = (index << 32 | i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 32;
    (h % (2 * GRAIN as u64 + 1)) as i32 - GRAIN
}

impl Motion {
    /// The content at `fps`, from `seed` (the same seed draws the same pictures).
    pub fn new(fps: u32, seed: u64) -> Result<Motion, MediaError> {
        if fps == 0 {
            return Err(MediaError::Config(
                "motion content: fps must be non-zero".into(),
            ));
        }
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let luma = texture(TEX, &mut rng, 120.0, 240.0);
        let cb = texture(TEX / 2, &mut rng, 128.0, 40.0);
        let cr = texture(TEX / 2, &mut rng, 128.0, 40.0);
        let vehicles = (0..6)
            .map(|i| Vehicle {
                x0: rng.unit(),
                y: 0.15 + 0.12 * i as f64,
                speed: (0.25 + 0.5 * rng.unit()) * if i % 2 == 0 { 1.0 } else { -1.0 },
                w: 0.12 + 0.1 * rng.unit(),
                h: 0.07 + 0.03 * rng.unit(),
                skin: (
                    (rng.next() % TEX as u64) as usize,
                    (rng.next() % TEX as u64) as usize,
                ),
            })
            .collect();
        Ok(Motion {
            fps: f64::from(fps),
            luma,
            cb,
            cr,
            vehicles,
        })
    }

    /// Where the camera looks at time `t` s: the texture position of the picture's top left,
    /// and the texture pixels per picture pixel.
    fn camera(&self, t: f64) -> (f64, f64, f64) {
        let x = 170.0 * t + 6.0 * (t * 7.3).sin();
        let y = 55.0 * t + 4.0 * (t * 5.1).cos() + 30.0 * (t * 0.4).sin();
        let zoom = 1.0 + 0.25 * (t * 0.3).sin();
        (x, y, zoom)
    }

    /// The vehicle covering picture point (`u`, `v`) (fractions of the picture) at `t`, and
    /// where in its skin that point is.
    fn vehicle_at(&self, t: f64, u: f64, v: f64, w: usize, h: usize) -> Option<(f64, f64)> {
        self.vehicles.iter().find_map(|c| {
            let x = (c.x0 + c.speed * t).rem_euclid(1.0 + c.w) - c.w;
            let (du, dv) = (u - x, v - c.y);
            (du >= 0.0 && du < c.w && dv >= 0.0 && dv < c.h).then_some((
                c.skin.0 as f64 + du * w as f64,
                c.skin.1 as f64 + dv * h as f64,
            ))
        })
    }
}

impl Pictures for Motion {
    fn picture(&mut self, index: u64, frame: &mut Frame) -> Result<(), MediaError> {
        let t = index as f64 / self.fps;
        let (w, h) = (frame.width(), frame.height());
        let (yp, up, vp) = frame.planes_mut();
        for row in 0..h {
            for col in 0..w {
                let (tx, ty) = self.look(t, col as f64, row as f64, w, h);
                let grain = grain(index, row * w + col);
                yp[row * w + col] =
                    (i32::from(sample(&self.luma, TEX, tx, ty)) + grain).clamp(16, 235) as u8;
            }
        }
        let (cw, ch) = (w / 2, h / 2);
        for row in 0..ch {
            for col in 0..cw {
                let (tx, ty) = self.look(t, 2.0 * col as f64, 2.0 * row as f64, w, h);
                up[row * cw + col] = sample(&self.cb, TEX / 2, tx / 2.0, ty / 2.0);
                vp[row * cw + col] = sample(&self.cr, TEX / 2, tx / 2.0, ty / 2.0);
            }
        }
        Ok(())
    }
}

impl Motion {
    /// Where in the texture picture point (`x`, `y`) looks at time `t`: a vehicle's skin, or
    /// the ground seen in perspective by a camera that drives forward (rows nearer the bottom
    /// are nearer, larger and faster), sways and shakes.
    fn look(&self, t: f64, x: f64, y: f64, w: usize, h: usize) -> (f64, f64) {
        let (u, v) = (x / w as f64, y / h as f64);
        if let Some(skin) = self.vehicle_at(t, u, v, w, h) {
            return skin;
        }
        let (cx, cy, zoom) = self.camera(t);
        // Nearness of the row: 0.35 at the top, 2 at the bottom.
        let near = 0.35 + 1.65 * v;
        let tx = cx + (x - w as f64 / 2.0) * zoom / near;
        let ty = 3.0 * cy + 220.0 / near;
        (tx, ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_pictures_and_every_frame_moves() {
        let mut a = Motion::new(25, 7).unwrap();
        let mut b = Motion::new(25, 7).unwrap();
        let (mut fa, mut fb) = (Frame::new(176, 144).unwrap(), Frame::new(176, 144).unwrap());
        a.picture(30, &mut fa).unwrap();
        b.picture(30, &mut fb).unwrap();
        assert_eq!(fa, fb);
        b.picture(31, &mut fb).unwrap();
        let changed = fa.y().iter().zip(fb.y()).filter(|(x, y)| x != y).count();
        assert!(changed > fa.y().len() * 9 / 10, "{changed}");
    }
}
