//! `metronome quality REFERENCE RECEIVED`: PSNR, SSIM and MOS of a received video against its
//! reference, frame by frame (Y4M files, or raw YUV with `--size`), as FFmpeg's `psnr` and
//! `ssim` filters and Evalvid's MOS table compute them.

use clap::Args;
use metronome_quality::compare::{streams, FrameQuality, RunQuality};
use metronome_quality::y4m::{Format, Reader};
use metronome_quality::Chroma;
use serde::Serialize;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub(crate) struct QualityArgs {
    /// The reference video: .y4m (ffmpeg -f yuv4mpegpipe), or raw planar YUV with --size
    pub reference: PathBuf,
    /// The received (decoded) video, in the same format
    pub received: PathBuf,
    /// For raw YUV files: the picture size, WIDTHxHEIGHT
    #[arg(long, value_name = "WxH")]
    pub size: Option<String>,
    /// For raw YUV files: the chroma sampling
    #[arg(long, default_value = "420", value_parser = ["420", "422", "444", "mono"])]
    pub chroma: String,
    /// Write one CSV row per frame here (frame, PSNR Y/U/V/YUV in dB, SSIM Y/U/V/All, MOS)
    #[arg(long, value_name = "FILE")]
    pub frames: Option<PathBuf>,
    /// Threads (frames compared at once) [default: the number of CPUs]
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print JSON only (the fields are on `Report` in quality.rs and `RunQuality`)
    #[arg(long)]
    pub json: bool,
}

/// The JSON document `--json` prints.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct Report<'a> {
    reference: String,
    received: String,
    /// Identical frames get this PSNR (dB), not infinity.
    psnr_cap_db: f64,
    #[serde(flatten)]
    run: &'a RunQuality,
}

fn open(p: &Path, raw: Option<Format>) -> Result<Reader<BufReader<File>>, String> {
    let f = File::open(p).map_err(|e| format!("cannot open {}: {e}", p.display()))?;
    // Small: frames are read straight into the pictures, not through this buffer.
    let r = BufReader::with_capacity(16 << 10, f);
    let is_y4m = p.extension().is_some_and(|e| e.eq_ignore_ascii_case("y4m"));
    match (is_y4m, raw) {
        (false, Some(f)) => Reader::raw(r, f),
        (true, _) | (false, None) => Reader::y4m(r),
    }
    .map_err(|e| format!("{}: {e}", p.display()))
}

fn raw_format(a: &QualityArgs) -> Result<Option<Format>, String> {
    let Some(size) = &a.size else { return Ok(None) };
    let bad = || format!("--size {size}: write it as WIDTHxHEIGHT, like 1920x1080");
    let (w, h) = size.split_once('x').ok_or_else(bad)?;
    Ok(Some(Format {
        width: w.parse().map_err(|_| bad())?,
        height: h.parse().map_err(|_| bad())?,
        chroma: match a.chroma.as_str() {
            "422" => Chroma::C422,
            "444" => Chroma::C444,
            "mono" => Chroma::Mono,
            _ => Chroma::C420,
        },
        fps: (25, 1),
    }))
}

fn csv_row(w: &mut impl Write, q: &FrameQuality) -> std::io::Result<()> {
    writeln!(
        w,
        "{},{:.4},{:.4},{:.4},{:.4},{:.6},{:.6},{:.6},{:.6},{}",
        q.frame,
        q.psnr.y_db,
        q.psnr.u_db,
        q.psnr.v_db,
        q.psnr.yuv_db,
        q.ssim.y,
        q.ssim.u,
        q.ssim.v,
        q.ssim.all,
        q.mos
    )
}

/// Compares the two files; the run's figures.
pub(crate) fn compare_files(
    reference: &Path,
    received: &Path,
    raw: Option<Format>,
    threads: usize,
    frames: Option<&Path>,
) -> Result<RunQuality, String> {
    let a = open(reference, raw)?;
    let b = open(received, raw)?;
    let mut csv = match frames {
        Some(p) => {
            let f = File::create(p).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
            let mut w = BufWriter::new(f);
            writeln!(
                w,
                "frame,psnr_y_db,psnr_u_db,psnr_v_db,psnr_yuv_db,ssim_y,ssim_u,ssim_v,ssim_all,mos"
            )
            .map_err(|e| e.to_string())?;
            Some(w)
        }
        None => None,
    };
    let mut write_err = None;
    let run = streams(a, b, threads, |q| {
        if let Some(w) = &mut csv {
            if let Err(e) = csv_row(w, q) {
                write_err.get_or_insert(e);
            }
        }
    })
    .map_err(|e| e.to_string())?;
    if let Some(mut w) = csv {
        if let Some(e) = write_err.or_else(|| w.flush().err()) {
            return Err(format!("cannot write the frames CSV: {e}"));
        }
    }
    Ok(run)
}

pub(crate) fn run(a: QualityArgs) -> Result<(), String> {
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let run = compare_files(
        &a.reference,
        &a.received,
        raw_format(&a)?,
        threads,
        a.frames.as_deref(),
    )?;
    if run.frames == 0 {
        // PSNR over no frame would read as a perfect 100 dB.
        return Err(format!(
            "no frame was compared: {} holds no whole frame of the reference's size; check \
             that it is the received video and that --size and --chroma match it",
            a.received.display()
        ));
    }
    if a.json {
        let r = Report {
            reference: a.reference.display().to_string(),
            received: a.received.display().to_string(),
            psnr_cap_db: metronome_quality::psnr::CAP_DB,
            run: &run,
        };
        println!("{}", crate::report::to_json(&r).map_err(|e| e.to_string())?);
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    let _ = print_human(&mut out, &run);
    Ok(())
}

fn print_human(out: &mut impl Write, r: &RunQuality) -> std::io::Result<()> {
    writeln!(out, "{} frames compared", r.frames)?;
    if r.frames_missing > 0 {
        writeln!(
            out,
            "{} reference frames beyond the received video's end (not compared)",
            r.frames_missing
        )?;
    }
    let g = r.psnr_global;
    writeln!(
        out,
        "PSNR (of the mean MSE, as FFmpeg): Y {:.3} U {:.3} V {:.3} YUV {:.3} dB",
        g.y_db, g.u_db, g.v_db, g.yuv_db
    )?;
    let m = r.psnr_mean;
    writeln!(
        out,
        "PSNR (mean of frames, as Evalvid; identical frames {} dB): Y {:.3} YUV {:.3} dB",
        metronome_quality::psnr::CAP_DB,
        m.y_db,
        m.yuv_db
    )?;
    writeln!(
        out,
        "SSIM: Y {:.6} U {:.6} V {:.6} All {:.6} ({:.3} dB)",
        r.ssim.y,
        r.ssim.u,
        r.ssim.v,
        r.ssim.all,
        metronome_quality::ssim::db(r.ssim.all)
    )?;
    writeln!(
        out,
        "MOS (Evalvid's table, from PSNR-Y): mean {:.2}; frames with MOS 1..5: {:?}",
        r.mos_mean, r.mos_frames
    )
}
