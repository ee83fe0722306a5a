//! Checks against FFmpeg 5.1 (Debian's `ffmpeg` package, which the project's test command
//! installs): our muxed test source must probe and decode cleanly, and a file FFmpeg writes must
//! be timed by its PCRs.

use metronome_media::{TestSource, TestSourceConfig, TsAnalyzer, TsFileSource, TsSource};
use metronome_testkit::TempDir;
use metronome_wire::ts::{TsPacket, PCR_HZ};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Runs an FFmpeg tool; a missing tool fails the test with what to install.
fn run(tool: &str, args: &[&str]) -> std::process::Output {
    match Command::new(tool).args(args).output() {
        Ok(out) => out,
        Err(e) => panic!(
            "cannot run `{tool}` ({e}): install ffmpeg (Debian: `apt-get install -y ffmpeg`) so that {tool} is on PATH"
        ),
    }
}

fn ffprobe_value(file: &Path, args: &[&str]) -> String {
    let mut all = vec!["-v", "error"];
    all.extend_from_slice(args);
    all.push(file.to_str().unwrap());
    let out = run("ffprobe", &all);
    assert!(
        out.status.success(),
        "ffprobe {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn lines(s: &str) -> Vec<&str> {
    s.lines().map(str::trim).filter(|l| !l.is_empty()).collect()
}

#[test]
fn test_source_is_valid_h264_ts_for_ffmpeg() {
    let dir = TempDir::new("media-testsrc");
    let file = dir.join("testsrc.ts");
    let fps = 30;
    let cfg = TestSourceConfig {
        duration: Some(Duration::from_secs(5)),
        ..TestSourceConfig::default()
    };
    let mut src = TestSource::new(cfg).unwrap();
    let rate = src.nominal_bitrate().unwrap();
    let (mut bytes, mut pkt, mut an) = (Vec::new(), [0u8; 188], TsAnalyzer::new());
    let mut i = 0u64;
    while let Some(t) = src.next_packet(&mut pkt).unwrap() {
        // Constant rate: packet i is due at exactly i × 1504 / rate seconds (floored to ns),
        // and its PCR, when it has one, is the 1 s start offset plus that time in 27 MHz.
        assert_eq!(
            t.as_nanos(),
            i as u128 * 1504 * 1_000_000_000 / rate as u128,
            "packet {i}"
        );
        if let Some(pcr) = TsPacket::parse(&pkt).unwrap().pcr() {
            assert_eq!(pcr, PCR_HZ + i * 1504 * PCR_HZ / rate, "packet {i} PCR");
        }
        an.push(&pkt, t);
        bytes.extend_from_slice(&pkt);
        i += 1;
    }
    let r = an.finish();
    assert_eq!(r.first_error, None);
    assert_eq!((r.sync_errors, r.cc_errors, r.psi_errors), (0, 0, 0));
    assert!(r.pat_count >= 50 && r.pmt_count == r.pat_count, "{r:?}");
    assert!(
        r.max_pat_interval <= Duration::from_millis(100),
        "PAT every {:?}",
        r.max_pat_interval
    );
    assert!(
        r.max_pmt_interval <= Duration::from_millis(100),
        "PMT every {:?}",
        r.max_pmt_interval
    );
    assert!(
        r.max_pcr_interval <= Duration::from_millis(40),
        "PCR every {:?}",
        r.max_pcr_interval
    );
    assert_eq!(r.pes_count, 5 * fps);
    assert_eq!(r.random_access_count, 5, "one IDR a second, each flagged");
    assert_eq!(r.missing_aud, 0);
    assert_eq!(r.late_pes, 0, "a frame's last packet left after its PTS");
    assert!(r.min_pes_slack_ns.unwrap() > 0);
    assert_eq!(src.mux_stats().late_frames, 0);

    std::fs::write(&file, &bytes).unwrap();
    let codec = ffprobe_value(
        &file,
        &[
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=codec_name",
            "-of",
            "csv=p=0",
        ],
    );
    // ffprobe lists the stream once under its program and once on its own.
    assert_eq!(lines(&codec), ["h264", "h264"]);
    let frames = ffprobe_value(
        &file,
        &[
            "-count_frames",
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=nb_read_frames",
            "-of",
            "csv=p=0",
        ],
    );
    let expected = (5 * fps).to_string();
    assert_eq!(
        lines(&frames),
        [&expected, &expected],
        "decoded frame count"
    );
    let programs = ffprobe_value(&file, &["-show_programs", "-of", "flat"]);
    assert!(
        programs.contains("programs.program.0.pcr_pid=256"),
        "no PCR PID 0x100 in:\n{programs}"
    );
    assert!(
        programs.contains("programs.program.0.pmt_pid=4096"),
        "no PMT PID 0x1000 in:\n{programs}"
    );
    let decode = run(
        "ffmpeg",
        &[
            "-v",
            "error",
            "-i",
            file.to_str().unwrap(),
            "-f",
            "null",
            "-",
        ],
    );
    assert!(decode.status.success());
    assert_eq!(
        String::from_utf8_lossy(&decode.stderr),
        "",
        "ffmpeg reported decode errors"
    );
}

/// Writes the brief's reference file: 3 s of 320x240 MPEG-2 video, muxed at a constant 2 Mbit/s.
fn ffmpeg_reference_file(dir: &TempDir) -> PathBuf {
    let file = dir.join("ref.ts");
    let out = run(
        "ffmpeg",
        &[
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=320x240:rate=25",
            "-t",
            "3",
            "-c:v",
            "mpeg2video",
            "-b:v",
            "1M",
            "-muxrate",
            "2M",
            "-f",
            "mpegts",
            file.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "ffmpeg failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    file
}

fn read_all(src: &mut TsFileSource, limit: usize) -> Vec<Duration> {
    let mut pkt = [0u8; 188];
    let mut times = Vec::new();
    while times.len() < limit {
        match src.next_packet(&mut pkt).unwrap() {
            Some(t) => times.push(t),
            None => break,
        }
    }
    times
}

#[test]
fn ffmpeg_file_is_timed_by_its_pcrs() {
    let dir = TempDir::new("media-tsfile");
    let file = ffmpeg_reference_file(&dir);
    let len = std::fs::metadata(&file).unwrap().len();
    let packets = (len / 188) as usize;

    let mut src = TsFileSource::open(&file, false).unwrap();
    assert!(src.pcr_pid().is_some());
    let times = read_all(&mut src, usize::MAX);
    assert_eq!(times.len(), packets);
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "time went backwards"
    );
    let span = times.last().unwrap().as_secs_f64();
    assert!(
        (span - 3.0).abs() < 0.25,
        "the file lasts {span} s by its PCRs, expected about 3 s"
    );
    let rate = packets as f64 * 1504.0 / span;
    assert!(
        (rate - 2e6).abs() < 0.03 * 2e6,
        "rate by PCR {rate} bit/s, expected 2 Mbit/s"
    );
    let nominal = src.nominal_bitrate().unwrap() as f64;
    assert!((nominal - 2e6).abs() < 0.01 * 2e6, "nominal rate {nominal}");
    // Interpolation between PCRs of a constant-rate file: evenly spaced packets.
    let step = span / (packets - 1) as f64;
    let worst = times
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_secs_f64() - i as f64 * step).abs())
        .fold(0.0, f64::max);
    assert!(
        worst < 0.010,
        "packet times stray {worst} s from the constant-rate line"
    );
    let stats = src.stats();
    assert_eq!(
        (stats.rebases, stats.resyncs, stats.skipped_bytes),
        (0, 0, 0),
        "{stats:?}"
    );
    assert!(src.describe().contains("Mbit/s"), "{}", src.describe());

    // Looping: three passes, time keeps going up, at the same rate.
    let mut looped = TsFileSource::open(&file, true).unwrap();
    let times = read_all(&mut looped, 3 * packets + 1);
    assert_eq!(times.len(), 3 * packets + 1);
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "time went backwards across a loop"
    );
    let three = times[3 * packets].as_secs_f64();
    assert!(
        (three - 3.0 * packets as f64 * 1504.0 / 2e6).abs() < 0.1,
        "three passes took {three} s"
    );
    assert_eq!(looped.stats().loops, 3);
}

#[test]
fn truncated_ffmpeg_file_ends_cleanly() {
    let dir = TempDir::new("media-truncated");
    let file = ffmpeg_reference_file(&dir);
    let bytes = std::fs::read(&file).unwrap();
    let cut = dir.join("cut.ts");
    let keep = bytes.len() / 2 + 77;
    std::fs::write(&cut, &bytes[..keep]).unwrap();
    let mut src = TsFileSource::open(&cut, false).unwrap();
    let times = read_all(&mut src, usize::MAX);
    assert_eq!(times.len(), keep / 188);
    assert_eq!(src.stats().skipped_bytes, (keep % 188) as u64);
    let mut pkt = [0u8; 188];
    assert_eq!(src.next_packet(&mut pkt).unwrap(), None);
}

#[test]
fn non_ts_and_missing_files_are_refused() {
    let dir = TempDir::new("media-bad");
    let text = dir.join("notes.txt");
    std::fs::write(
        &text,
        "this is a text file, not a transport stream\n".repeat(30),
    )
    .unwrap();
    match TsFileSource::open(&text, false) {
        Err(e @ metronome_media::MediaError::NotTransportStream { .. }) => {
            assert!(e.to_string().contains("sync byte"), "{e}")
        }
        other => panic!("expected NotTransportStream, got {other:?}"),
    }
    match TsFileSource::open(dir.join("missing.ts"), false) {
        Err(e @ metronome_media::MediaError::Open { .. }) => {
            assert!(e.to_string().contains("missing.ts"))
        }
        other => panic!("expected Open, got {other:?}"),
    }
}
