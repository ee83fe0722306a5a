//! Generated high-motion content, made to code as seed 002's *highway* clip does: a camera
//! driving forward over textured ground seen in perspective (rows nearer the bottom are nearer,
//! larger and faster, so no block simply translates), swaying and zooming, under a smooth sky
//! (the top 40 %), with textured vehicles crossing the ground at their own speeds. The ground's
//! texture has detail at every scale (octaves of value noise, each 0.85 of the coarser one's
//! amplitude). Every ground pixel moves in every frame, so an encoder codes real residuals in
//! every P-frame, and the detail survives only at fine quantizers.
//!
//! Calibrated against Table 2 (MPEG-4 Part 2, CIF, 25 fps, GOP 12, 6 s of seed 1, FFmpeg's
//! `mpeg4` at `-qscale:v q`): 2267 / 1369 / 968 / 386 / 177 / 107 kbit/s at q 2 / 3 / 4 / 8 /
//! 16 / 31 against Table 2's 2614 / 1421 / 929 / 294 / 130 / 66 (0.87–1.64×), PSNR-Y 43.6 /
//! 40.9 / 39.0 / 35.1 / 31.8 / 29.3 dB: the fine end, where a shared 4 Mbit/s bottleneck puts
//! the video, as the clip's; the coarse end above it (the camera's motion costs vectors in
//! every P-frame, where the clip's road and sky are mostly skipped).
//!
//! A pure function of the frame index and the seed: the lab draws the same pictures again to
//! judge what viewers saw. [`VERSION`] names the generator in cache keys: change it with the
//! pictures.

use crate::pattern::{Frame, Pictures};
use crate::MediaError;

/// Side of the square texture the camera looks at (a power of two: coordinates wrap).
const TEX: usize = 1024;
/// The generator's version, for cache keys of what was made from its pictures.
pub const VERSION: u32 = 2;
/// Each octave's amplitude against the coarser one's (1/f noise would be 0.5; more keeps the
/// fine detail a camera's picture of a real scene has).
const OCTAVE_GAIN: f64 = 0.85;
/// The ground texture's contrast (luma levels either side of its mean, before clamping).
const SPREAD: f64 = 180.0;
/// The camera's speed against version 1's (which coded at 3–6 × Table 2's rates).
const SPEED: f64 = 0.3;
/// The share of the picture's height, from the top, that is sky.
const SKY: f64 = 0.4;
/// Vehicles crossing the ground.
const VEHICLES: usize = 3;

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

impl Motion {
    /// The content at `fps`, from `seed` (the same seed draws the same pictures).
    pub fn new(fps: u32, seed: u64) -> Result<Motion, MediaError> {
        if fps == 0 {
            return Err(MediaError::Config(
                "motion content: fps must be non-zero".into(),
            ));
        }
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let luma = texture(TEX, &mut rng, 120.0, SPREAD);
        let cb = texture(TEX / 2, &mut rng, 128.0, 40.0);
        let cr = texture(TEX / 2, &mut rng, 128.0, 40.0);
        let vehicles = (0..VEHICLES)
            .map(|i| Vehicle {
                x0: rng.unit(),
                // In lanes on the ground, below the sky.
                y: SKY + (0.9 - SKY) * i as f64 / VEHICLES as f64,
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
        let t = t * SPEED;
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
        let sky_rows = (SKY * h as f64) as usize;
        for row in 0..h {
            let v = row as f64 / h as f64;
            for col in 0..w {
                yp[row * w + col] = if row < sky_rows {
                    // A smooth gradient, brightest at the top.
                    (210.0 - 50.0 * v / SKY) as u8
                } else {
                    let (tx, ty) = self.look(t, col as f64, row as f64, w, h);
                    sample(&self.luma, TEX, tx, ty)
                };
            }
        }
        let (cw, ch) = (w / 2, h / 2);
        for row in 0..ch {
            for col in 0..cw {
                if 2 * row < sky_rows {
                    up[row * cw + col] = 140;
                    vp[row * cw + col] = 118;
                    continue;
                }
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
        // Every ground pixel moves (the sky is still).
        let ground = fa.y().len() * 6 / 10;
        let changed = fa.y().iter().zip(fb.y()).filter(|(x, y)| x != y).count();
        assert!(changed > ground * 9 / 10, "{changed} of {ground}");
    }
}
