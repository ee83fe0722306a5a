//! `metronome bench quality`: PSNR and SSIM frames per second on 1080p pairs, Metronome's
//! metrics against FFmpeg's `psnr` and `ssim` filters on the same files in the same run. The
//! pair is made here by FFmpeg: its `testsrc2` picture, and the same encoded with MPEG-4 part
//! 2 and decoded. Both read the same Y4M files from disk (the page cache, after a first read),
//! so each side's time includes reading them.

use clap::Args;
use metronome_rt::clock::mono_ns;
use metronome_rt::host::HostWatch;
use metronome_time::Micros;
use serde::Serialize;
use std::path::Path;
use std::process::Command;

#[derive(Args, Debug)]
pub(crate) struct QualityBenchArgs {
    /// Frames in the pair
    #[arg(long, default_value_t = 60)]
    pub frames: u32,
    /// Picture size
    #[arg(long, default_value = "1920x1080")]
    pub size: String,
    /// Print JSON only
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Case {
    name: &'static str,
    frames: u64,
    wall_us: Micros,
    frames_per_s: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct QualityBench {
    benchmark: &'static str,
    optimized: bool,
    size: String,
    threads: usize,
    metronome: Case,
    ffmpeg: Case,
    /// Metronome's frames per second over FFmpeg's (target: at least 2).
    ratio: f64,
    /// Both sides' figures of the pair, to show they computed the same thing.
    psnr_y_db: f64,
    ssim_all: f64,
    host: Option<metronome_rt::host::HostLoad>,
}

fn ffmpeg(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-nostdin", "-y", "-loglevel", "error"])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ffmpeg ({e}): install it (apt-get install ffmpeg)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ffmpeg {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn make_pair(dir: &Path, size: &str, frames: u32) -> Result<(), String> {
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let n = frames.to_string();
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        &format!("testsrc2=size={size}:rate=30"),
        "-frames:v",
        &n,
        "-pix_fmt",
        "yuv420p",
        &p("ref.y4m"),
    ])?;
    ffmpeg(&[
        "-i",
        &p("ref.y4m"),
        "-c:v",
        "mpeg4",
        "-qscale:v",
        "8",
        &p("coded.avi"),
    ])?;
    ffmpeg(&["-i", &p("coded.avi"), "-pix_fmt", "yuv420p", &p("dec.y4m")])
}

pub(crate) fn run(a: QualityBenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("metronome-bench-quality-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = measure(&a, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let bench = result?;
    if a.json {
        println!("{}", crate::report::to_json(&bench)?);
        return Ok(());
    }
    println!(
        "PSNR + SSIM of {} {} frames (same files, same run)",
        bench.metronome.frames, bench.size
    );
    for c in [&bench.metronome, &bench.ffmpeg] {
        println!(
            "  {:<28} {:>7.1} frames/s ({:.3} s)",
            c.name,
            c.frames_per_s,
            c.wall_us.as_secs_f64()
        );
    }
    println!(
        "  metronome / ffmpeg: {:.2} (target at least 2; {} threads)",
        bench.ratio, bench.threads
    );
    println!(
        "  the pair: PSNR-Y {:.3} dB, SSIM {:.5}",
        bench.psnr_y_db, bench.ssim_all
    );
    if !bench.optimized {
        println!("  (a debug build: run `cargo run --release -- bench quality` to measure)");
    }
    if let Some(h) = &bench.host {
        // FFmpeg, which this benchmark runs, is one of the "other processes".
        println!(
            "  {} (FFmpeg, run here, counts among the other processes)",
            h.line()
        );
    }
    Ok(())
}

fn measure(a: &QualityBenchArgs, dir: &Path) -> Result<QualityBench, String> {
    make_pair(dir, &a.size, a.frames)?;
    let (reference, received) = (dir.join("ref.y4m"), dir.join("dec.y4m"));
    // One untimed pass each way fills the page cache for both.
    let _ = std::fs::read(&reference);
    let _ = std::fs::read(&received);
    let watch = HostWatch::start();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let secs_since = |t0: u64| (mono_ns() - t0) as f64 / 1e9;
    let mut progress = crate::progress::Progress::start("bench quality", 2, None);
    let t = mono_ns();
    let run = crate::quality::compare_files(&reference, &received, None, threads, None)?;
    let ours = secs_since(t);
    progress.step("metronome's PSNR and SSIM");
    let graph = "[0:v]split[a0][a1];[1:v]split[b0][b1];[a0][b0]psnr;[a1][b1]ssim";
    let t = mono_ns();
    ffmpeg(&[
        "-i",
        &received.to_string_lossy(),
        "-i",
        &reference.to_string_lossy(),
        "-filter_complex",
        graph,
        "-f",
        "null",
        "-",
    ])?;
    let theirs = secs_since(t);
    progress.step("FFmpeg's psnr and ssim filters");
    let case = |name, wall_s: f64| Case {
        name,
        frames: run.frames,
        wall_us: Micros::from_secs_f64(wall_s),
        frames_per_s: run.frames as f64 / wall_s.max(1e-9),
    };
    let (m, f) = (
        case("metronome quality", ours),
        case("ffmpeg psnr + ssim filters", theirs),
    );
    Ok(QualityBench {
        benchmark: "quality",
        optimized: !cfg!(debug_assertions),
        size: a.size.clone(),
        threads,
        ratio: m.frames_per_s / f.frames_per_s.max(1e-9),
        metronome: m,
        ffmpeg: f,
        psnr_y_db: run.psnr_global.y_db,
        ssim_all: run.ssim.all,
        host: watch.finish(0),
    })
}
