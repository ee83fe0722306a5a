//! Writes `motion` content as Y4M on stdout: `motion_y4m WIDTH HEIGHT FPS FRAMES [SEED]`.
use metronome_media::motion::Motion;
use metronome_media::pattern::{Frame, Pictures};
use metronome_quality::y4m::{Format, Writer};
use metronome_quality::{Chroma, Picture};
use std::io::Write;

fn main() {
    let a: Vec<u64> = std::env::args()
        .skip(1)
        .map(|s| s.parse().unwrap())
        .collect();
    let (w, h, fps, n) = (a[0] as u32, a[1] as u32, a[2] as u32, a[3]);
    let seed = a.get(4).copied().unwrap_or(1);
    let mut m = Motion::new(fps, seed).unwrap();
    let mut f = Frame::new(w, h).unwrap();
    let mut p = Picture::black(w as usize, h as usize, Chroma::C420);
    let out = std::io::BufWriter::new(std::io::stdout().lock());
    let fmt = Format {
        width: w as usize,
        height: h as usize,
        chroma: Chroma::C420,
        fps: (fps, 1),
    };
    let mut wr = Writer::new(out, fmt).unwrap();
    for i in 0..n {
        m.picture(i, &mut f).unwrap();
        f.copy_to(&mut p);
        wr.write(&p).unwrap();
    }
    let _ = std::io::stdout().flush();
}
