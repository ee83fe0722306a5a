//! PSNR and SSIM against FFmpeg's own `psnr` and `ssim` filters (Debian's ffmpeg), on the same
//! pairs of videos: a clean encode, one with frozen frames (as a lost frame leaves the previous
//! one on screen), and a picture whose sides are not multiples of 4. Per frame and over the
//! run, PSNR within 0.01 dB (FFmpeg prints its per-frame figures to 2 decimals) and SSIM within
//! 0.0005.

use metronome_quality::compare::{streams, FrameQuality};
use metronome_quality::y4m::{Reader, Writer};
use metronome_quality::Picture;
use metronome_testkit::TempDir;
use std::path::Path;
use std::process::Command;

fn ffmpeg(args: &[&str]) -> String {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-nostdin", "-y"])
        .args(args)
        .output()
        .expect("ffmpeg is missing: apt-get install ffmpeg (scripts/test.sh does)");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ffmpeg {args:?}: {err}");
    err
}

fn reader(p: &Path) -> Reader<std::io::BufReader<std::fs::File>> {
    Reader::y4m(std::io::BufReader::new(std::fs::File::open(p).unwrap())).unwrap()
}

/// `key:value` fields of one stats line.
fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|v| v.strip_prefix(':')))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        .parse()
        .unwrap()
}

/// A summary figure from FFmpeg's log line ("PSNR y:… average:…", "SSIM Y:… All:…").
fn summary(log: &str, prefix: &str, key: &str) -> f64 {
    let line = log
        .lines()
        .find(|l| l.contains(prefix))
        .unwrap_or_else(|| panic!("no '{prefix}' in {log}"));
    let at = line.find(&format!("{key}:")).unwrap() + key.len() + 1;
    line[at..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn check(dir: &Path, reference: &Path, received: &Path) {
    let (psnr_log, ssim_log) = (dir.join("psnr.log"), dir.join("ssim.log"));
    let graph = format!(
        "[0:v]split[a0][a1];[1:v]split[b0][b1];[a0][b0]psnr=stats_file={};[a1][b1]ssim=stats_file={}",
        psnr_log.display(),
        ssim_log.display()
    );
    let log = ffmpeg(&[
        "-i",
        received.to_str().unwrap(),
        "-i",
        reference.to_str().unwrap(),
        "-filter_complex",
        &graph,
        "-f",
        "null",
        "-",
    ]);
    let mut ours: Vec<FrameQuality> = Vec::new();
    let run = streams(reader(reference), reader(received), 2, |q| ours.push(*q)).unwrap();
    let psnr_lines: Vec<String> = std::fs::read_to_string(&psnr_log)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let ssim_lines: Vec<String> = std::fs::read_to_string(&ssim_log)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(ours.len(), psnr_lines.len());
    assert_eq!(ours.len(), ssim_lines.len());
    let mut worst = (0.0f64, 0.0f64);
    for ((q, p), s) in ours.iter().zip(&psnr_lines).zip(&ssim_lines) {
        // FFmpeg prints "inf" for identical planes; ours is capped.
        let mut near_db = |ours: f64, key: &str| {
            if p.contains(&format!("{key}:inf")) {
                assert_eq!(ours, metronome_quality::psnr::CAP_DB);
            } else {
                let d = (ours - field(p, key)).abs();
                worst.0 = worst.0.max(d);
                assert!(d <= 0.01, "frame {}: {key} ours {ours} ffmpeg {p}", q.frame);
            }
        };
        near_db(q.psnr.y_db, "psnr_y");
        near_db(q.psnr.u_db, "psnr_u");
        near_db(q.psnr.v_db, "psnr_v");
        near_db(q.psnr.yuv_db, "psnr_avg");
        for (v, key) in [
            (q.ssim.y, "Y"),
            (q.ssim.u, "U"),
            (q.ssim.v, "V"),
            (q.ssim.all, "All"),
        ] {
            let d = (v - field(s, key)).abs();
            worst.1 = worst.1.max(d);
            assert!(
                d <= 0.0005,
                "frame {}: SSIM {key} ours {v} ffmpeg {s}",
                q.frame
            );
        }
    }
    // The run: FFmpeg's PSNR is that of the mean MSE; its SSIM the mean of the frames'.
    for (ours, key) in [
        (run.psnr_global.y_db, "y"),
        (run.psnr_global.yuv_db, "average"),
    ] {
        let theirs = summary(&log, "PSNR y:", key);
        if theirs.is_infinite() {
            assert_eq!(ours, metronome_quality::psnr::CAP_DB, "identical: the cap");
        } else {
            assert!(
                (ours - theirs).abs() <= 0.01,
                "PSNR {key}: ours {ours} ffmpeg {theirs}"
            );
        }
    }
    for (ours, key) in [(run.ssim.y, "Y"), (run.ssim.all, "All")] {
        let theirs = summary(&log, "SSIM Y:", key);
        assert!(
            (ours - theirs).abs() <= 0.0005,
            "SSIM {key}: ours {ours} ffmpeg {theirs}"
        );
    }
    eprintln!(
        "{}: {} frames, PSNR-Y {:.3} dB, SSIM {:.5}; worst differences {:.4} dB, {:.6}",
        received.file_name().unwrap().to_string_lossy(),
        run.frames,
        run.psnr_global.y_db,
        run.ssim.all,
        worst.0,
        worst.1
    );
}

/// A copy of `src` with every 5th frame replaced by the one before it (a frozen picture).
fn freeze(src: &Path, dst: &Path) {
    let mut r = reader(src);
    let mut w = Writer::new(std::fs::File::create(dst).unwrap(), r.format()).unwrap();
    let (mut cur, mut prev) = (Picture::black(2, 2, metronome_quality::Chroma::C420), None);
    let mut n = 0;
    while r.next_into(&mut cur).unwrap() {
        let shown = match (&prev, n % 5 == 4) {
            (Some(p), true) => p,
            _ => &cur,
        };
        w.write(shown).unwrap();
        prev = Some(shown.clone());
        n += 1;
    }
}

#[test]
fn psnr_and_ssim_agree_with_ffmpegs_filters() {
    let dir = TempDir::new("quality");
    std::fs::create_dir_all(&dir.0).unwrap();
    let d = |n: &str| dir.0.join(n);
    for (size, tag) in [("352x288", "cif"), ("350x286", "odd")] {
        let (reference, coded, decoded) = (
            d(&format!("{tag}-ref.y4m")),
            d(&format!("{tag}.avi")),
            d(&format!("{tag}-dec.y4m")),
        );
        ffmpeg(&[
            "-f",
            "lavfi",
            "-i",
            &format!("testsrc2=size={size}:rate=25"),
            "-frames:v",
            "20",
            "-pix_fmt",
            "yuv420p",
            reference.to_str().unwrap(),
        ]);
        // MPEG-4 part 2 at a coarse quantizer (seed 002's ladder's kind of encoder).
        ffmpeg(&[
            "-i",
            reference.to_str().unwrap(),
            "-c:v",
            "mpeg4",
            "-qscale:v",
            "12",
            coded.to_str().unwrap(),
        ]);
        ffmpeg(&[
            "-i",
            coded.to_str().unwrap(),
            "-pix_fmt",
            "yuv420p",
            decoded.to_str().unwrap(),
        ]);
        check(&dir.0, &reference, &decoded);
        if tag == "cif" {
            let frozen = d("cif-frozen.y4m");
            freeze(&decoded, &frozen);
            check(&dir.0, &reference, &frozen);
            // Identical videos: every frame at the cap, SSIM 1.
            check(&dir.0, &reference, &reference);
        }
    }
}
