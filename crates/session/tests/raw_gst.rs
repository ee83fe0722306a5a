//! RFC 4175 interop with GStreamer (rtpvrawpay / rtpvrawdepay, Debian's 1.22), pixel-exact:
//!
//! - GStreamer → us: `videotestsrc ! tee` writes the raw frames and, through rtpvrawpay and
//!   rtpstreampay (RFC 4571 framing), the RTP packets to files; our depayloader must rebuild
//!   exactly the raw frames, and our payloader must cut the same frames into byte-identical
//!   RTP payloads (UYVY and I420, 64x48 and 720x576).
//! - us → GStreamer: our packets through rtpstreamdepay ! rtpvrawdepay must come out as exactly
//!   our frames, with caps built from our SDP fmtp.
//! - ffmpeg reads the Y4M files we write, as the pixels we wrote.
//!
//! These shell out to gst-launch-1.0 and ffmpeg, and fail with a clear message without them.

use metronome_media::uncompressed::convert::{from_rfc4175, to_rfc4175, Layout};
use metronome_media::uncompressed::{
    Colorimetry, Depth, RawFrame, Sampling, VideoFormat, Y4mWriter,
};
use metronome_session::rfc4175::{
    fmtp, RawDepayloader, RawEvent, RawPayloader, RawPayloaderConfig,
};
use metronome_testkit::TempDir;
use metronome_time::Timestamp;
use metronome_wire::rtp::RtpView;
use metronome_wire::PayloadType;
use metronome_wire::Ssrc;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs a tool with a time limit; panics with what to install if it is missing.
fn run(tool: &str, args: &[String], install: &str) {
    let mut child = Command::new(tool)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run {tool} ({e}): install {install} to run the RFC 4175 interop tests")
        });
    for _ in 0..300 {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut s) = child.stderr.take() {
                std::io::Read::read_to_string(&mut s, &mut err).ok();
            }
            assert!(
                status.success(),
                "{tool} {}: {status}\n{err}",
                args.join(" ")
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().ok();
    panic!("{tool} {} took more than 15 s", args.join(" "));
}

fn gst(pipeline: &str) {
    let mut args = vec!["-q".to_string()];
    args.extend(pipeline.split_whitespace().map(str::to_string));
    run(
        "gst-launch-1.0",
        &args,
        "gstreamer1.0-tools and gstreamer1.0-plugins-good (Debian)",
    );
}

/// RTP packets from an RFC 4571 stream (2-byte big-endian length, then the packet).
fn read_rtp_stream(path: &PathBuf) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let mut rest = &bytes[..];
    let mut out = Vec::new();
    while let [a, b, tail @ ..] = rest {
        let n = usize::from(u16::from_be_bytes([*a, *b]));
        assert!(tail.len() >= n, "truncated RFC 4571 stream");
        out.push(tail[..n].to_vec());
        rest = &tail[n..];
    }
    out
}

fn gst_format(layout: Layout) -> (&'static str, Sampling) {
    match layout {
        Layout::Uyvy => ("UYVY", Sampling::Ycbcr422),
        Layout::I420 => ("I420", Sampling::Ycbcr420),
        _ => unreachable!(),
    }
}

/// GStreamer pays `frames` frames of snow; returns (raw frames file bytes, RTP packets).
fn gst_pay(layout: Layout, w: u32, h: u32, mtu: usize, frames: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
    let dir = TempDir::new("raw-gst");
    let (name, _) = gst_format(layout);
    let tag = format!("{name}-{w}x{h}-{mtu}");
    let (raw, rtp) = (
        dir.join(format!("{tag}.raw")),
        dir.join(format!("{tag}.rtps")),
    );
    gst(&format!(
        "videotestsrc num-buffers={frames} pattern=snow ! video/x-raw,format={name},width={w},height={h},framerate=25/1 \
         ! tee name=t t. ! queue ! filesink location={} \
         t. ! queue ! rtpvrawpay mtu={mtu} ! rtpstreampay ! filesink location={}",
        raw.display(),
        rtp.display()
    ));
    (std::fs::read(&raw).unwrap(), read_rtp_stream(&rtp))
}

fn from_gstreamer(layout: Layout, w: u32, h: u32, mtu: usize) {
    let (_, sampling) = gst_format(layout);
    let f = VideoFormat::new(w, h, sampling, Depth::Eight, 25, 1).unwrap();
    let (raw, pkts) = gst_pay(layout, w, h, mtu, 2);
    let frame_len = layout.frame_len(&f);
    assert_eq!(
        raw.len(),
        2 * frame_len,
        "GStreamer wrote unexpected frame sizes"
    );
    // Our depayloader rebuilds exactly GStreamer's frames.
    let mut d = RawDepayloader::new(f, Some(PayloadType(96))).unwrap();
    let mut got = Vec::new();
    for p in &pkts {
        for e in d.push(Timestamp::ZERO, p) {
            assert!(matches!(e, RawEvent::Complete(_)), "{e:?}");
            let mut out = vec![0u8; frame_len];
            from_rfc4175(&f, layout, &d.frame().unwrap().data, &mut out).unwrap();
            got.extend_from_slice(&out);
        }
    }
    assert_eq!(d.counters().dropped.total(), 0, "{:?}", d.counters());
    assert!(
        got == raw,
        "{layout:?} {w}x{h}: depayloaded frames differ from GStreamer's"
    );
    // Our payloader cuts the same frames into the same payloads, with the same markers.
    let mut cfg = RawPayloaderConfig::new(Ssrc(1), &f);
    cfg.max_payload = mtu - 12;
    let mut p = RawPayloader::new(cfg, f).unwrap();
    let mut ours = Vec::new();
    let mut buf = vec![0u8; p.packet_capacity()];
    for (i, chunk) in raw.chunks_exact(frame_len).enumerate() {
        let mut fr = RawFrame::new(f);
        fr.index = i as u64;
        to_rfc4175(&f, layout, chunk, &mut fr.data).unwrap();
        let mut pk = p.begin_frame(&fr).unwrap();
        while let Some(info) = pk.next_packet(&mut buf).unwrap() {
            ours.push(buf[..info.len].to_vec());
        }
    }
    assert_eq!(ours.len(), pkts.len(), "packet count");
    for (k, (a, b)) in ours.iter().zip(&pkts).enumerate() {
        let (a, b) = (RtpView::parse(a).unwrap(), RtpView::parse(b).unwrap());
        assert_eq!(a.marker(), b.marker(), "marker of packet {k}");
        assert!(a.payload() == b.payload(), "payload of packet {k} differs");
    }
}

fn to_gstreamer(layout: Layout, w: u32, h: u32) {
    let dir = TempDir::new("raw-gst");
    let (name, sampling) = gst_format(layout);
    let f = VideoFormat::new(w, h, sampling, Depth::Eight, 25, 1).unwrap();
    let mut p = RawPayloader::new(RawPayloaderConfig::new(Ssrc(7), &f), f).unwrap();
    let mut stream = Vec::new();
    let mut want = Vec::new();
    let mut buf = vec![0u8; p.packet_capacity()];
    for i in 0..2u64 {
        let mut fr = RawFrame::new(f);
        fr.index = i;
        ChaCha8Rng::seed_from_u64(i).fill_bytes(&mut fr.data);
        let mut out = vec![0u8; layout.frame_len(&f)];
        from_rfc4175(&f, layout, &fr.data, &mut out).unwrap();
        want.extend_from_slice(&out);
        let mut pk = p.begin_frame(&fr).unwrap();
        while let Some(info) = pk.next_packet(&mut buf).unwrap() {
            stream.extend_from_slice(&(info.len as u16).to_be_bytes());
            stream.extend_from_slice(&buf[..info.len]);
        }
    }
    let tag = format!("ours-{name}-{w}x{h}");
    let (rtp, raw) = (
        dir.join(format!("{tag}.rtps")),
        dir.join(format!("{tag}.raw")),
    );
    std::fs::write(&rtp, &stream).unwrap();
    // Caps from our own fmtp: every parameter as a string, as an SDP would give them.
    let params: String = fmtp(&f, Colorimetry::Bt601)
        .split("; ")
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            format!(",{k}=(string){v}")
        })
        .collect();
    gst(&format!(
        "filesrc location={} ! application/x-rtp-stream,media=video,clock-rate=90000,encoding-name=RAW,payload=96{params} \
         ! rtpstreamdepay ! rtpvrawdepay ! video/x-raw,format={name} ! filesink location={}",
        rtp.display(),
        raw.display()
    ));
    let got = std::fs::read(&raw).unwrap();
    assert_eq!(got.len(), want.len(), "GStreamer wrote {} bytes", got.len());
    assert!(
        got == want,
        "{name} {w}x{h}: GStreamer's frames differ from ours"
    );
}

#[test]
fn gstreamer_uyvy_small_packets() {
    from_gstreamer(Layout::Uyvy, 64, 48, 400);
}

#[test]
fn gstreamer_i420_small_packets() {
    from_gstreamer(Layout::I420, 64, 48, 400);
}

#[test]
fn gstreamer_uyvy_720x576() {
    from_gstreamer(Layout::Uyvy, 720, 576, 1400);
    to_gstreamer(Layout::Uyvy, 720, 576);
}

#[test]
fn gstreamer_i420_720x576() {
    from_gstreamer(Layout::I420, 720, 576, 1400);
    to_gstreamer(Layout::I420, 720, 576);
}

#[test]
fn ffmpeg_reads_our_y4m_as_written() {
    let dir = TempDir::new("raw-gst");
    for (s, d, pix) in [
        (Sampling::Ycbcr420, Depth::Eight, "yuv420p"),
        (Sampling::Ycbcr422, Depth::Eight, "yuv422p"),
        (Sampling::Ycbcr422, Depth::Ten, "yuv422p10le"),
        (Sampling::Rgb, Depth::Eight, "yuv444p"),
    ] {
        let f = VideoFormat::new(64, 48, s, d, 25, 1).unwrap();
        let layout = match pix {
            "yuv420p" => Layout::I420,
            "yuv422p" => Layout::Yuv422p,
            "yuv444p" => Layout::Yuv444p, // RGB: Y4M has none, we write BT.601 Y'CbCr
            _ => Layout::Yuv422p10le,
        };
        let y4m = dir.join(format!("out-{pix}.y4m"));
        let raw = dir.join(format!("out-{pix}.raw"));
        let mut w = Y4mWriter::new(std::fs::File::create(&y4m).unwrap(), f).unwrap();
        let mut want = Vec::new();
        for i in 0..2 {
            let mut fr = RawFrame::new(f);
            ChaCha8Rng::seed_from_u64(i).fill_bytes(&mut fr.data);
            if d == Depth::Ten {
                // Keep the 10-bit samples in the legal range so nothing is clipped.
                for pg in fr.data.chunks_exact_mut(5) {
                    let s =
                        metronome_media::uncompressed::convert::unpack10(pg).map(|x| 64 + x % 876);
                    pg.copy_from_slice(&metronome_media::uncompressed::convert::pack10(s));
                }
            }
            w.write_frame(&fr).unwrap();
            let mut out = vec![0u8; layout.frame_len(&f)];
            from_rfc4175(&f, layout, &fr.data, &mut out).unwrap();
            want.extend_from_slice(&out);
        }
        w.flush().unwrap();
        drop(w);
        let args: Vec<String> = [
            "-v",
            "error",
            "-y",
            "-i",
            &y4m.display().to_string(),
            "-f",
            "rawvideo",
            "-pix_fmt",
            pix,
            &raw.display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        run("ffmpeg", &args, "ffmpeg");
        assert!(
            std::fs::read(&raw).unwrap() == want,
            "{pix}: ffmpeg read other pixels"
        );
    }
}
