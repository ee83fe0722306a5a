//! Measures render and encode time per frame of the test source over one full scene cycle
//! (static, moderate, high motion), with a second thread spinning to stand in for the pacer.
//!
//! `cargo run --release -p metronome-media --example encode_speed [WxH@bitrate ...]`

use metronome_media::h264::{H264Config, H264Encoder};
use metronome_media::{Frame, Scene, TestPattern, TestSource, TestSourceConfig, TsSource};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: Vec<(u32, u32, u32)> = if args.is_empty() {
        vec![
            (640, 360, 3_500_000),
            (960, 540, 3_500_000),
            (1280, 720, 3_500_000),
        ]
    } else {
        args.iter()
            .map(|a| parse(a).expect("WxH@bitrate, e.g. 640x360@3500000"))
            .collect()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    for &(w, h, bitrate) in &runs {
        measure(w, h, bitrate);
    }
    for &(w, h, bitrate) in &runs {
        mux_slack(w, h, bitrate);
    }
    stop.store(true, Ordering::Relaxed);
    spinner.join().unwrap();
}

fn parse(a: &str) -> Option<(u32, u32, u32)> {
    let (size, rate) = a.split_once('@')?;
    let (w, h) = size.split_once('x')?;
    Some((w.parse().ok()?, h.parse().ok()?, rate.parse().ok()?))
}

#[allow(clippy::disallowed_methods)] // a benchmark measures wall time; it is not part of the core
fn measure(w: u32, h: u32, bitrate: u32) {
    let fps = 30;
    let pattern = TestPattern::new(fps, 4).unwrap();
    let mut frame = Frame::new(w, h).unwrap();
    let mut enc = H264Encoder::new(H264Config::new(w, h, fps, bitrate)).unwrap();
    let scenes = [Scene::Static, Scene::Moderate, Scene::HighMotion];
    let mut render = [Duration::ZERO; 3];
    let mut encode = [Duration::ZERO; 3];
    let mut worst = [Duration::ZERO; 3];
    let mut bytes = [0usize; 3];
    let frames = 12 * fps as u64;
    for i in 0..frames {
        let t0 = Instant::now();
        let scene = pattern.render(i, &mut frame);
        let t1 = Instant::now();
        let n = enc.encode(&frame).unwrap().data.len();
        let t2 = Instant::now();
        let k = scenes.iter().position(|s| *s == scene).unwrap();
        render[k] += t1 - t0;
        encode[k] += t2 - t1;
        worst[k] = worst[k].max(t2 - t1);
        bytes[k] += n;
    }
    let per = (frames / 3) as u32;
    for k in 0..3 {
        println!(
            "{w}x{h}@{fps} {:>4} kbit/s target: {:<10} render {:5.2} ms, encode {:5.2} ms/frame (worst {:5.2} ms), {:5} kbit/s",
            bitrate / 1000,
            format!("{:?}", scenes[k]),
            (render[k] / per).as_secs_f64() * 1e3,
            (encode[k] / per).as_secs_f64() * 1e3,
            worst[k].as_secs_f64() * 1e3,
            bytes[k] * 8 / 4 / 1000,
        );
    }
}

/// Runs 24 s (two scene cycles) through the 5 Mbit/s mux and reports how close frames came to
/// their PTS.
fn mux_slack(w: u32, h: u32, bitrate: u32) {
    let cfg = TestSourceConfig {
        width: w,
        height: h,
        video_bitrate: bitrate,
        duration: Some(Duration::from_secs(24)),
        ..TestSourceConfig::default()
    };
    let mut src = TestSource::new(cfg).unwrap();
    let mut pkt = [0u8; 188];
    while src.next_packet(&mut pkt).unwrap().is_some() {}
    let s = src.mux_stats();
    println!(
        "{w}x{h} at {} kbit/s in a 5 Mbit/s mux: {} frames, {} late, min PTS slack {:.1} ms, max queue {} kB, {:.1}% null packets",
        bitrate / 1000,
        s.frames_out,
        s.late_frames,
        s.min_slack_ns.unwrap_or(0) as f64 / 1e6,
        s.max_queued_bytes / 1000,
        s.null_packets as f64 * 100.0 / s.packets as f64
    );
}
