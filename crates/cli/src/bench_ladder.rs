//! `metronome bench ladder`: seed 002's video as Evalvid-RA makes it, and what judging it
//! costs.
//!
//! 1. **Encoding, once.** The ladder of a clip (default: 73.4 s of generated high-motion CIF at
//!    25 fps, GOP 12, the length of the paper's *highway*) encoded at every quantizer into an
//!    empty cache, then had again: the second time from the cache, and byte for byte the same.
//! 2. **The rungs beside the paper's Table 2**: each rung's coded rate, and the paper's.
//! 3. **Judging a viewer's video on one core**: a rung's frames decoded by FFmpeg's libavcodec
//!    (as the lab decodes what viewers received) and every picture compared with the source's
//!    frame (PSNR, SSIM, Evalvid's MOS), against FFmpeg's own program doing the same on the same
//!    stream and source frames (`-threads 1`, its `psnr` and `ssim` filters) in the same run. The
//!    source frames are made before the clock starts, for both.

use clap::Args;
use metronome_config::scenario::{CodedVideo, VideoCodecDecl, VideoContent, VideoDecl};
use metronome_lab::ladder as lab_ladder;
use metronome_lab::video::pictures_of;
use metronome_media::ladder::{Ladder, Rung, SEED002_TABLE2_KBPS};
use metronome_media::pattern::Frame;
use metronome_quality::viewer::Decode;
use metronome_quality::{compare, psnr, y4m, Chroma, Picture};
use metronome_rt::clock::{mono_ns, thread_cpu_s};
use metronome_rt::host::HostWatch;
use metronome_time::Micros;
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// Seconds of content: more than none, at most a day.
fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a length of content: give seconds, e.g. 20"
        )),
    }
}

#[derive(Args, Debug)]
pub(crate) struct LadderBenchArgs {
    /// Seconds of content in the ladder (the paper's clip: 73.4)
    #[arg(long, default_value_t = 73.4, value_parser = positive_seconds)]
    pub seconds: f64,
    /// What is encoded: "motion" (generated high motion), "motion=seed=N", a .y4m or .yuv
    /// file of the picture's size, or an FFmpeg lavfi source such as "testsrc2"
    #[arg(long, default_value = "motion")]
    pub content: String,
    /// The codec: mpeg4 (MPEG-4 Part 2, the paper's) or h264
    #[arg(long, default_value = "mpeg4")]
    pub codec: String,
    /// The finest and coarsest quantizer, "LO-HI" (the paper's: 2-31)
    #[arg(long, default_value = "2-31")]
    pub quantizers: String,
    /// Picture size and rate, WIDTHxHEIGHT@FPS
    #[arg(long, default_value = "352x288@25")]
    pub picture: String,
    /// The rungs judged (each decoded and compared with the source)
    #[arg(long, value_delimiter = ',', default_value = "2,8,31")]
    pub judge: Vec<u32>,
    /// Seconds of each judged rung (whole GOPs from the start)
    #[arg(long, default_value_t = 20.0, value_parser = positive_seconds)]
    pub judge_seconds: f64,
    /// Print JSON only
    #[arg(long)]
    pub json: bool,
}

/// Seed 002's GOP.
const GOP: u32 = 12;

#[derive(Serialize, schemars::JsonSchema)]
struct Encoding {
    frames: u64,
    rungs: usize,
    encode_us: Micros,
    from_cache_us: Micros,
    /// Encoding over reading back from the cache.
    speedup: f64,
    /// The second ladder came from the cache and is byte for byte the first.
    reused_identical: bool,
    cache_bytes: u64,
}

#[derive(Serialize, schemars::JsonSchema)]
struct RungRate {
    quantizer: u32,
    rate_bps: f64,
    /// Seed 002's Table 2 at this quantizer (MPEG-4 only).
    paper_bps: Option<f64>,
    ratio_to_paper: Option<f64>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Side {
    name: &'static str,
    wall_us: Micros,
    cpu_us: Micros,
    /// Seconds of video judged per second of CPU.
    times_real_time: f64,
    psnr_y_db: f64,
    ssim: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Judged {
    quantizer: u32,
    frames: u64,
    mean_mos: f64,
    metronome: Side,
    ffmpeg: Side,
    /// Metronome's speed over FFmpeg's, CPU time.
    ratio: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct LadderBench {
    benchmark: &'static str,
    optimized: bool,
    content: String,
    codec: String,
    picture: String,
    encoding: Encoding,
    rungs: Vec<RungRate>,
    judged: Vec<Judged>,
    host: Option<metronome_rt::host::HostLoad>,
}

/// What the arguments declare, as a lab flow would.
struct Setup {
    v: VideoDecl,
    content: VideoContent,
    coded: CodedVideo,
    frames: u32,
}

fn setup(a: &LadderBenchArgs) -> Result<Setup, String> {
    let v: VideoDecl = a.picture.parse()?;
    let content = VideoContent::parse(std::slice::from_ref(&a.content))?;
    let codec = match a.codec.as_str() {
        "mpeg4" => VideoCodecDecl::Mpeg4,
        "h264" => VideoCodecDecl::H264,
        other => return Err(format!("--codec {other}: write mpeg4 or h264")),
    };
    let bad_q = || format!("--quantizers {}: write LO-HI, like 2-31", a.quantizers);
    let (lo, hi) = a.quantizers.split_once('-').ok_or_else(bad_q)?;
    let q = (
        lo.trim().parse().map_err(|_| bad_q())?,
        hi.trim().parse().map_err(|_| bad_q())?,
    );
    if q.0 > q.1 || q.0 == 0 {
        return Err(bad_q());
    }
    let frames = (a.seconds * f64::from(v.fps)).round();
    if !(1.0..=1e6).contains(&frames) {
        return Err(format!(
            "--seconds {}: from one frame to 10^6 frames",
            a.seconds
        ));
    }
    Ok(Setup {
        v,
        content,
        coded: CodedVideo {
            codec,
            quantizers: q,
            b_frames: 0,
        },
        frames: frames as u32,
    })
}

pub(crate) fn run(a: LadderBenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("metronome-bench-ladder-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = setup(&a).and_then(|s| measure(&a, &s, &dir));
    let _ = std::fs::remove_dir_all(&dir);
    let bench = result?;
    if a.json {
        println!("{}", crate::report::to_json(&bench)?);
    } else {
        print_summary(&bench);
    }
    Ok(())
}

fn print_summary(b: &LadderBench) {
    let e = &b.encoding;
    println!(
        "ladder of {} ({} frames of {}, {}, {} rungs)",
        b.content, e.frames, b.picture, b.codec, e.rungs
    );
    println!(
        "  encoded in {:.1} s; from the cache in {:.3} s ({:.0} times faster, {}, {:.1} MB)",
        e.encode_us.as_secs_f64(),
        e.from_cache_us.as_secs_f64(),
        e.speedup,
        if e.reused_identical {
            "the same bytes"
        } else {
            "NOT the same bytes"
        },
        e.cache_bytes as f64 / 1e6
    );
    println!("  quantizer   kbit/s   seed 002 (Table 2)   ratio");
    for r in &b.rungs {
        let paper = r
            .paper_bps
            .map_or("-".to_string(), |p| format!("{:.1}", p / 1e3));
        let ratio = r.ratio_to_paper.map_or("-".into(), |x| format!("{x:.2}"));
        println!(
            "  {:>9} {:>8.1} {:>20} {:>7}",
            r.quantizer,
            r.rate_bps / 1e3,
            paper,
            ratio
        );
    }
    for j in &b.judged {
        println!(
            "  judging q{} ({} frames, mean MOS {:.2}) on one core:",
            j.quantizer, j.frames, j.mean_mos
        );
        for s in [&j.metronome, &j.ffmpeg] {
            println!(
                "    {:<40} {:>6.1} x real time ({:.2} s CPU, {:.2} s wall), PSNR-Y {:.3} dB, SSIM {:.4}",
                s.name, s.times_real_time, s.cpu_us.as_secs_f64(), s.wall_us.as_secs_f64(), s.psnr_y_db, s.ssim
            );
        }
        println!(
            "    metronome / ffmpeg: {:.2}; target: Metronome at least 20 x real time",
            j.ratio
        );
    }
    if !b.optimized {
        println!("  (a debug build: run `cargo run --release -- bench ladder` to measure)");
    }
    if let Some(h) = &b.host {
        println!(
            "  {} (FFmpeg, run here, counts among the other processes)",
            h.line()
        );
    }
}

fn measure(a: &LadderBenchArgs, s: &Setup, dir: &Path) -> Result<LadderBench, String> {
    let watch = HostWatch::start();
    let spec = lab_ladder::spec(s.v, &s.content, s.coded, GOP, s.frames)?;
    let cache = dir.join("cache");
    let frames = u64::from(s.frames);
    let build = || {
        let t = mono_ns();
        let l = Ladder::load_or_build(spec.clone(), Some(&cache), || {
            pictures_of(s.v, &s.content, frames).map_err(metronome_media::MediaError::Config)
        })
        .map_err(|e| format!("the ladder: {e}"))?;
        Ok::<_, String>((l, (mono_ns() - t) as f64 / 1e9))
    };
    let steps = 2 + a.judge.len();
    let mut progress = crate::progress::Progress::start("bench ladder", steps, None);
    let (first, encode_s) = build()?;
    progress.step("the ladder encoded");
    let (second, cached_s) = build()?;
    progress.step("the ladder again, from the cache");
    let encoding = Encoding {
        frames,
        rungs: first.rungs.len(),
        encode_us: Micros::from_secs_f64(encode_s),
        from_cache_us: Micros::from_secs_f64(cached_s),
        speedup: encode_s / cached_s.max(1e-9),
        reused_identical: !first.from_cache && second.from_cache && first.rungs == second.rungs,
        cache_bytes: dir_bytes(&cache.join("ladders")),
    };
    let fps = s.v.fps;
    let rungs = first
        .rungs
        .iter()
        .map(|r| rung_rate(r, fps, s.coded))
        .collect();
    let mut judged = Vec::new();
    for &q in &a.judge {
        judged.push(judge(&first, q, s, a.judge_seconds, dir)?);
        progress.step(&format!("quantizer {q} judged, by Metronome and by FFmpeg"));
    }
    Ok(LadderBench {
        benchmark: "ladder",
        optimized: !cfg!(debug_assertions),
        content: a.content.clone(),
        codec: s.coded.codec.name().into(),
        picture: a.picture.clone(),
        encoding,
        rungs,
        judged,
        host: watch.finish(0),
    })
}

fn rung_rate(r: &Rung, fps: u32, coded: CodedVideo) -> RungRate {
    let rate_bps = r.rate_bps(fps);
    let paper_bps = (coded.codec == VideoCodecDecl::Mpeg4)
        .then(|| SEED002_TABLE2_KBPS.iter().find(|(q, _)| *q == r.quantizer))
        .flatten()
        .map(|(_, k)| k * 1e3);
    RungRate {
        quantizer: r.quantizer,
        rate_bps,
        paper_bps,
        ratio_to_paper: paper_bps.map(|p| rate_bps / p),
    }
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Rung `q`'s first whole GOPs within `seconds`, judged by Metronome and by FFmpeg.
fn judge(ladder: &Ladder, q: u32, s: &Setup, seconds: f64, dir: &Path) -> Result<Judged, String> {
    let rung = ladder.rung(q);
    let gops = ((seconds * f64::from(s.v.fps)) as usize / GOP as usize).max(1);
    let n = (gops * GOP as usize).min(rung.frames.len());
    let coded = &rung.frames[..n];
    let sources = source_pictures(s, n)?;
    let video_s = n as f64 / f64::from(s.v.fps.max(1));
    let (ours, mos) = judge_ours(ladder, coded, &sources, video_s)?;
    let stream = dir.join(format!("q{}.es", rung.quantizer));
    let reference = dir.join("source.y4m");
    write_inputs(coded, &sources, s, &stream, &reference)?;
    drop(sources);
    let theirs = judge_ffmpeg(ladder, &stream, &reference, video_s)?;
    Ok(Judged {
        quantizer: rung.quantizer,
        frames: n as u64,
        mean_mos: mos,
        ratio: ours.times_real_time / theirs.times_real_time.max(1e-9),
        metronome: ours,
        ffmpeg: theirs,
    })
}

/// The content's first `n` frames, as the lab makes them to judge against.
fn source_pictures(s: &Setup, n: usize) -> Result<Vec<Picture>, String> {
    let mut pictures = pictures_of(s.v, &s.content, n as u64)?;
    let mut frame = Frame::new(s.v.width, s.v.height).map_err(|e| e.to_string())?;
    (0..n)
        .map(|i| {
            pictures
                .picture(i as u64, &mut frame)
                .map_err(|e| e.to_string())?;
            let mut p = Picture::black(s.v.width as usize, s.v.height as usize, Chroma::C420);
            frame.copy_to(&mut p);
            Ok(p)
        })
        .collect()
}

/// Decode and compare on this thread: CPU time, wall time, the figures.
fn judge_ours(
    ladder: &Ladder,
    coded: &[metronome_media::encode::CodedFrame],
    sources: &[Picture],
    video_s: f64,
) -> Result<(Side, f64), String> {
    let codec = ladder.spec.encoder.codec;
    let mut decoder =
        metronome_media::decode::VideoDecoder::new(codec, None).map_err(|e| e.to_string())?;
    let blank = sources
        .first()
        .map(|p| Picture::black(p.width, p.height, Chroma::C420))
        .ok_or("nothing to judge")?;
    let share = psnr::plane_share(&blank);
    let mut out = blank.clone();
    let mut totals = psnr::Totals::default();
    let (mut ssim, mut mos, mut shown) = (0.0, 0u64, 0u64);
    let (t, cpu) = (mono_ns(), thread_cpu_s());
    let mut take = |decoder: &mut metronome_media::decode::VideoDecoder| {
        while let Some(k) = decoder.receive(&mut out) {
            let Some(reference) = sources.get(k as usize) else {
                continue;
            };
            let f = compare::frame(reference, &out, u64::from(k));
            totals.add(&f.psnr, share);
            ssim += f.ssim.all;
            mos += u64::from(f.mos);
            shown += 1;
        }
    };
    for f in coded {
        decoder.send(f.frame, &f.data);
        take(&mut decoder);
    }
    decoder.drain();
    take(&mut decoder);
    let (cpu_s, wall_s) = (thread_cpu_s() - cpu, (mono_ns() - t) as f64 / 1e9);
    if shown != sources.len() as u64 {
        return Err(format!(
            "the decoder gave {shown} pictures of {} frames",
            sources.len()
        ));
    }
    let side = Side {
        name: "metronome (libavcodec + PSNR, SSIM)",
        wall_us: Micros::from_secs_f64(wall_s),
        cpu_us: Micros::from_secs_f64(cpu_s),
        times_real_time: video_s / cpu_s.max(1e-9),
        psnr_y_db: totals.global().y_db,
        ssim: ssim / shown as f64,
    };
    Ok((side, mos as f64 / shown as f64))
}

/// The rung as an elementary stream, and the source frames as Y4M, for FFmpeg.
fn write_inputs(
    coded: &[metronome_media::encode::CodedFrame],
    sources: &[Picture],
    s: &Setup,
    stream: &Path,
    reference: &Path,
) -> Result<(), String> {
    let io = |e: std::io::Error| format!("writing FFmpeg's inputs: {e}");
    let mut es = std::io::BufWriter::new(std::fs::File::create(stream).map_err(io)?);
    for f in coded {
        es.write_all(&f.data).map_err(io)?;
    }
    es.flush().map_err(io)?;
    let format = y4m::Format {
        width: s.v.width as usize,
        height: s.v.height as usize,
        chroma: Chroma::C420,
        fps: (s.v.fps, 1),
    };
    let file = std::io::BufWriter::new(std::fs::File::create(reference).map_err(io)?);
    let mut w = y4m::Writer::new(file, format).map_err(io)?;
    for p in sources {
        w.write(p).map_err(io)?;
    }
    w.into_inner().flush().map_err(io)
}

/// CPU seconds (user and system) of this process's waited-for children.
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// FFmpeg decoding the same stream on one thread, its psnr and ssim filters on one thread.
fn judge_ffmpeg(
    ladder: &Ladder,
    stream: &Path,
    reference: &Path,
    video_s: f64,
) -> Result<Side, String> {
    let demuxer = match ladder.spec.encoder.codec {
        metronome_media::decode::VideoCodec::H264 => "h264",
        _ => "m4v",
    };
    let graph = "[0:v]split[a0][a1];[1:v]split[b0][b1];[a0][b0]psnr;[a1][b1]ssim";
    let (t, cpu) = (mono_ns(), children_cpu_s());
    let out = Command::new("ffmpeg")
        .args([
            "-hide_banner",
            "-nostdin",
            "-loglevel",
            "info",
            "-threads",
            "1",
        ])
        .args(["-f", demuxer, "-i"])
        .arg(stream)
        .arg("-i")
        .arg(reference)
        .args(["-filter_threads", "1", "-filter_complex_threads", "1"])
        .args(["-filter_complex", graph, "-f", "null", "-"])
        .output()
        .map_err(|e| format!("cannot run ffmpeg ({e}): install it (apt-get install ffmpeg)"))?;
    let (cpu_s, wall_s) = (children_cpu_s() - cpu, (mono_ns() - t) as f64 / 1e9);
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("ffmpeg judging the rung: {}", log.trim()));
    }
    let figure = |line: &str, key: &str| -> Option<f64> {
        let at = line.find(key)? + key.len();
        line[at..].split_whitespace().next()?.parse().ok()
    };
    let psnr_y_db = log
        .lines()
        .find(|l| l.contains("PSNR y:"))
        .and_then(|l| figure(l, "PSNR y:"));
    let ssim = log
        .lines()
        .find(|l| l.contains("SSIM Y:"))
        .and_then(|l| figure(l, "All:"));
    let (Some(psnr_y_db), Some(ssim)) = (psnr_y_db, ssim) else {
        return Err(format!("ffmpeg said no PSNR or SSIM: {}", log.trim()));
    };
    Ok(Side {
        name: "ffmpeg -threads 1 (psnr, ssim filters)",
        wall_us: Micros::from_secs_f64(wall_s),
        cpu_us: Micros::from_secs_f64(cpu_s),
        times_real_time: video_s / cpu_s.max(1e-9),
        psnr_y_db,
        ssim,
    })
}
