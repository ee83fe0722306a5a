//! Test video with content (issue 14): scenes of known, different complexity, from FFmpeg's
//! lavfi sources or the built-in pattern's own scenes. Over a link that loses nothing, what
//! the viewer saw is what the encoder made at the flow's rate, so quality falls where the
//! content is hard to code, scene by scene, as in seed 002's concatenated sequence.

use metronome_config::scenario::ScenarioFile;
use metronome_lab::run::{run, RunOptions};

/// Each 4 s scene's mean PSNR of Y (100 frames at 25 fps) for `content`.
fn scene_psnr(content: &str, tag: &str) -> Vec<f64> {
    let text = format!(
        r#"
name = "content"
seed = 1
duration = "12s"
drain = "1s"
interval = "1s"

[links.l]
rate = "100mbit"
delay = "10ms"

[topology]
shape = "chain"
nodes = ["a", "b"]
link = "l"

[[flow]]
name = "video"
kind = "rtp"
from = "a"
to = "b"
rate = "2mbit"
video = "320x180@25"
content = {content}
"#
    );
    let file = ScenarioFile::parse(&text, "content.toml").unwrap();
    let dir = std::env::temp_dir().join(format!("metronome-content-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = RunOptions {
        jobs: 1,
        ..RunOptions::new(dir.clone())
    };
    let s = run(&file, &opts);
    let rows = std::fs::read_to_string(dir.join("points/p000/video.frames.csv"));
    let _ = std::fs::remove_dir_all(&dir);
    let s = s.unwrap();
    let fr = s.points[0].flows[0].receivers[0].frames.unwrap();
    assert_eq!((fr.frames, fr.lost), (300, 0));
    let rows = rows.unwrap();
    let psnr: Vec<f64> = rows
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(9).unwrap().parse().unwrap())
        .collect();
    assert_eq!(psnr.len(), 300);
    psnr.chunks(100)
        .map(|c| c.iter().sum::<f64>() / c.len() as f64)
        .collect()
}

#[test]
fn quality_falls_where_the_content_is_hard_to_code() {
    // FFmpeg's sources: a test card, a zooming fractal, the game of life (seeded, so the
    // lab can make the same pictures again to compare with).
    let lavfi = scene_psnr(
        r#"["testsrc2", "mandelbrot", "life=seed=1:ratio=0.3:mold=10"]"#,
        "lavfi",
    );
    eprintln!("lavfi scenes, PSNR Y dB: {lavfi:.2?}");
    assert!(
        lavfi[0] > lavfi[1] + 3.0 && lavfi[1] > lavfi[2] + 3.0,
        "{lavfi:?}"
    );
    // The pattern's scenes: static bars, moving boxes, then high-motion texture.
    let pattern = scene_psnr(r#""pattern""#, "pattern");
    eprintln!("pattern scenes, PSNR Y dB: {pattern:.2?}");
    assert!(pattern[0] > pattern[2] + 5.0, "{pattern:?}");
    assert!(pattern[1] > pattern[2] + 5.0, "{pattern:?}");
}
