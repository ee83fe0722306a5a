//! The device-free half of the V4L2 source: which formats it captures and how a captured
//! buffer becomes RFC 4175 payload order, and how its timestamp reaches the wall clock.

use metronome_media::uncompressed::convert::{to_rfc4175, Layout};
use metronome_media::uncompressed::{Depth, Sampling, VideoFormat};
use std::time::Duration;

/// Capture buffers asked of the driver.
pub const BUFFERS: u32 = 4;
/// How long `next_frame` waits for a usable frame once the camera runs.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(2);
/// How long it waits for the first frame (cameras take a while to start and set exposure).
pub const FIRST_FRAME_TIMEOUT: Duration = Duration::from_secs(5);

/// `V4L2_BUF_FLAG_TIMESTAMP_MASK`, `_MONOTONIC`, `V4L2_BUF_FLAG_TSTAMP_SRC_MASK`, `_SOE`,
/// `V4L2_BUF_FLAG_ERROR` (videodev2.h).
pub const BUF_FLAG_TIMESTAMP_MASK: u32 = 0x0000_e000;
pub const BUF_FLAG_TIMESTAMP_MONOTONIC: u32 = 0x0000_2000;
pub const BUF_FLAG_TSTAMP_SRC_MASK: u32 = 0x0007_0000;
pub const BUF_FLAG_TSTAMP_SRC_SOE: u32 = 0x0001_0000;
pub const BUF_FLAG_ERROR: u32 = 0x0000_0040;

/// A buffer timestamp further in the future than this, or older than [`MAX_TIMESTAMP_AGE_NS`],
/// is not believed.
pub const MAX_TIMESTAMP_AHEAD_NS: u64 = 1_000_000;
pub const MAX_TIMESTAMP_AGE_NS: u64 = 10_000_000_000;

/// The pixel formats Metronome captures, best first.
pub const PREFERENCE: [[u8; 4]; 5] = [*b"UYVY", *b"YUYV", *b"NV12", *b"YU12", *b"RGB3"];

/// How a captured buffer becomes RFC 4175 payload order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conversion {
    /// Rows copied (UYVY is the 4:2:2 8-bit pgroup order).
    Uyvy,
    /// Octets swapped pairwise within each pgroup.
    Yuyv,
    /// Chroma de-interleaved into an I420 frame, then I420 → payload order.
    Nv12,
    /// I420 → payload order.
    I420,
    /// Rows copied (RGB3 is the RGB 8-bit pgroup order).
    Rgb24,
}

/// A V4L2 pixel format Metronome can send, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaptureFormat {
    pub fourcc: [u8; 4],
    pub sampling: Sampling,
    pub depth: Depth,
    pub conversion: Conversion,
}

/// What the V4L2 pixel format `fourcc` is sent as; `None` if Metronome cannot send it.
pub fn capture_format(fourcc: [u8; 4]) -> Option<CaptureFormat> {
    let (sampling, conversion) = match &fourcc {
        b"UYVY" => (Sampling::Ycbcr422, Conversion::Uyvy),
        b"YUYV" => (Sampling::Ycbcr422, Conversion::Yuyv),
        b"NV12" => (Sampling::Ycbcr420, Conversion::Nv12),
        b"YU12" => (Sampling::Ycbcr420, Conversion::I420),
        b"RGB3" => (Sampling::Rgb, Conversion::Rgb24),
        _ => return None,
    };
    Some(CaptureFormat {
        fourcc,
        sampling,
        depth: Depth::Eight,
        conversion,
    })
}

/// The first of `offered` in [`PREFERENCE`] order that Metronome can send.
pub fn choose_format(offered: &[[u8; 4]]) -> Option<CaptureFormat> {
    PREFERENCE
        .iter()
        .find(|f| offered.contains(f))
        .and_then(|&f| capture_format(f))
}

/// A fourcc as text (non-printable octets escaped).
pub fn fourcc_str(f: [u8; 4]) -> String {
    f.iter()
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect::<String>()
        .trim_end()
        .to_string()
}

/// The name a person knows a capture format by (`RGB3` is RGB24, `YU12` is I420).
pub(super) fn format_name(f: [u8; 4]) -> String {
    match &f {
        b"RGB3" => "RGB24".into(),
        _ => fourcc_str(f),
    }
}

/// Octets of one line of the first plane at `width` pixels, without padding.
pub fn tight_bytes_per_line(conv: Conversion, width: usize) -> usize {
    match conv {
        Conversion::Uyvy | Conversion::Yuyv => 2 * width,
        Conversion::Rgb24 => 3 * width,
        Conversion::Nv12 | Conversion::I420 => width,
    }
}

/// Octets a captured buffer must hold for `conv` at `width`×`height` with `bpl` octets per line
/// of the first plane (the last line of the last plane need not be padded). For 4:2:0 the chroma
/// follows the luma plane: NV12 as `height / 2` interleaved lines of `bpl` octets, I420 as two
/// planes of `bpl / 2` octets per line (V4L2's single-planar layouts).
pub fn needed_bytes(conv: Conversion, width: usize, height: usize, bpl: usize) -> usize {
    let h = height.max(1);
    match conv {
        Conversion::Uyvy | Conversion::Yuyv | Conversion::Rgb24 => {
            bpl * (h - 1) + tight_bytes_per_line(conv, width)
        }
        Conversion::Nv12 => bpl * h + bpl * (h / 2).saturating_sub(1) + width,
        Conversion::I420 => {
            let c = bpl / 2;
            bpl * h + c * (h / 2) + c * (h / 2).saturating_sub(1) + width / 2
        }
    }
}

/// Converts one line of YUYV (Y'0 C'b Y'1 C'r) to UYVY, the RFC 4175 4:2:2 8-bit pgroup order
/// (C'b Y'0 C'r Y'1). Converts as many whole pgroups as both slices hold.
pub fn yuyv_row_to_uyvy(src: &[u8], dst: &mut [u8]) {
    for (s, d) in src.chunks_exact(4).zip(dst.chunks_exact_mut(4)) {
        d.copy_from_slice(&[s[1], s[0], s[3], s[2]]);
    }
}

/// Copies an NV12 frame (luma plane, then interleaved C'b C'r lines, `bpl` octets per line) into
/// a tight I420 frame (`w·h + 2·(w/2)·(h/2)` octets). `None` if `src` or `dst` is too short.
pub fn nv12_to_i420(w: usize, h: usize, bpl: usize, src: &[u8], dst: &mut [u8]) -> Option<()> {
    let (cw, ch) = (w / 2, h / 2);
    if dst.len() < w * h + 2 * cw * ch {
        return None;
    }
    let (y, uv) = dst.split_at_mut(w * h);
    let (u, v) = uv.split_at_mut(cw * ch);
    for l in 0..h {
        y[l * w..][..w].copy_from_slice(src.get(l * bpl..l * bpl + w)?);
    }
    let base = bpl * h;
    for r in 0..ch {
        let line = src.get(base + r * bpl..base + r * bpl + 2 * cw)?;
        for (p, cbcr) in line.chunks_exact(2).enumerate() {
            u[r * cw + p] = cbcr[0];
            v[r * cw + p] = cbcr[1];
        }
    }
    Some(())
}

/// Copies a single-planar I420 frame whose lines are padded (luma `bpl`, chroma `bpl / 2` octets
/// per line) into a tight I420 frame. `None` if `src` or `dst` is too short.
pub fn i420_strided_to_tight(
    w: usize,
    h: usize,
    bpl: usize,
    src: &[u8],
    dst: &mut [u8],
) -> Option<()> {
    let (cw, ch, cbpl) = (w / 2, h / 2, bpl / 2);
    if dst.len() < w * h + 2 * cw * ch {
        return None;
    }
    let (y, uv) = dst.split_at_mut(w * h);
    let (u, v) = uv.split_at_mut(cw * ch);
    for l in 0..h {
        y[l * w..][..w].copy_from_slice(src.get(l * bpl..l * bpl + w)?);
    }
    let (ub, vb) = (bpl * h, bpl * h + cbpl * ch);
    for r in 0..ch {
        u[r * cw..][..cw].copy_from_slice(src.get(ub + r * cbpl..ub + r * cbpl + cw)?);
        v[r * cw..][..cw].copy_from_slice(src.get(vb + r * cbpl..vb + r * cbpl + cw)?);
    }
    Some(())
}

/// Why a captured buffer was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// It holds fewer octets than a frame of the negotiated format needs.
    Short { got: usize, need: usize },
    /// The driver flagged it `V4L2_BUF_FLAG_ERROR` (its data may be corrupt).
    Flagged,
    /// The driver returned a buffer index it never gave out.
    BadIndex,
}

/// Converts one captured buffer `src` (`conv` layout, `bpl` octets per line of the first plane)
/// into `dst`, a frame of `fmt` in RFC 4175 payload order. `scratch` is an I420 frame of `fmt`
/// (used for 4:2:0; may be empty otherwise). A short buffer is refused, never read past.
pub fn to_payload(
    conv: Conversion,
    fmt: &VideoFormat,
    bpl: usize,
    src: &[u8],
    scratch: &mut [u8],
    dst: &mut [u8],
) -> Result<(), Skip> {
    let (w, h) = (fmt.width as usize, fmt.height as usize);
    let need = needed_bytes(conv, w, h, bpl);
    let short = Skip::Short {
        got: src.len(),
        need,
    };
    if src.len() < need || bpl < tight_bytes_per_line(conv, w) || dst.len() != fmt.frame_bytes() {
        return Err(short);
    }
    match conv {
        Conversion::Uyvy | Conversion::Rgb24 | Conversion::Yuyv => {
            let row = fmt.row_bytes();
            for (r, d) in dst.chunks_exact_mut(row).enumerate() {
                let s = src.get(r * bpl..r * bpl + row).ok_or(short)?;
                if conv == Conversion::Yuyv {
                    yuyv_row_to_uyvy(s, d);
                } else {
                    d.copy_from_slice(s);
                }
            }
        }
        Conversion::Nv12 | Conversion::I420 => {
            let len = Layout::I420.frame_len(fmt);
            let tight = if conv == Conversion::I420 && bpl == w {
                &src[..len]
            } else {
                let scratch = scratch.get_mut(..len).ok_or(short)?;
                if conv == Conversion::Nv12 {
                    nv12_to_i420(w, h, bpl, src, scratch).ok_or(short)?;
                } else {
                    i420_strided_to_tight(w, h, bpl, src, scratch).ok_or(short)?;
                }
                &*scratch
            };
            to_rfc4175(fmt, Layout::I420, tight, dst).map_err(|_| short)?;
        }
    }
    Ok(())
}

/// The CLOCK_REALTIME nanoseconds of a buffer's capture: its timestamp (`sec`, `usec`) is
/// CLOCK_MONOTONIC when `flags` say `V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC`, and moves onto the wall
/// clock by `realtime_minus_mono_ns` (CLOCK_REALTIME − CLOCK_MONOTONIC, as
/// `Clock::realtime_offset_ns` gives it). `None` when the timestamp is not usable: another
/// clock or a copied timestamp, zero, malformed, more than [`MAX_TIMESTAMP_AHEAD_NS`] after
/// `mono_now_ns` or more than [`MAX_TIMESTAMP_AGE_NS`] before it.
pub fn capture_realtime_ns(
    flags: u32,
    sec: i64,
    usec: i64,
    mono_now_ns: u64,
    realtime_minus_mono_ns: i128,
) -> Option<u64> {
    if flags & BUF_FLAG_TIMESTAMP_MASK != BUF_FLAG_TIMESTAMP_MONOTONIC {
        return None;
    }
    if sec < 0 || !(0..1_000_000).contains(&usec) || (sec == 0 && usec == 0) {
        return None;
    }
    let mono = i128::from(sec) * 1_000_000_000 + i128::from(usec) * 1000;
    let now = i128::from(mono_now_ns);
    if mono > now + i128::from(MAX_TIMESTAMP_AHEAD_NS)
        || now - mono > i128::from(MAX_TIMESTAMP_AGE_NS)
    {
        return None;
    }
    u64::try_from(mono + realtime_minus_mono_ns).ok()
}
