//! [`V4l2Source`]: frames from a V4L2 camera (`/dev/videoN`) in RFC 4175 payload order, each
//! stamped with the instant it was captured.
//!
//! The device is opened and its format negotiated with `linuxvideo` (QUERYCAP, ENUM_FMT, G_FMT,
//! S_FMT, S_PARM). Streaming (REQBUFS, QUERYBUF, mmap, QBUF, DQBUF, STREAMON) is done here with
//! the ioctls themselves, because `linuxvideo` 0.3.5 does not give a dequeued buffer's timestamp
//! and flags, and those are the capture time.
//!
//! Pixel formats, best first:
//!
//! | V4L2 fourcc | sent as            | conversion                                            |
//! |-------------|--------------------|-------------------------------------------------------|
//! | `UYVY`      | YCbCr-4:2:2 8-bit  | none: UYVY is the pgroup order C'b Y'0 C'r Y'1        |
//! | `YUYV`      | YCbCr-4:2:2 8-bit  | each 4 octets Y'0 C'b Y'1 C'r swapped to C'b Y'0 C'r Y'1 |
//! | `NV12`      | YCbCr-4:2:0 8-bit  | chroma de-interleaved to I420, then I420 → payload    |
//! | `YU12`      | YCbCr-4:2:0 8-bit  | I420 → payload ([`convert::to_rfc4175`])              |
//! | `RGB3`      | RGB 8-bit          | none: R G B is the RFC 4175 order                      |
//!
//! Capture time: a buffer flagged `V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC` carries the CLOCK_MONOTONIC
//! time the driver took the frame (its end, or its start of exposure with
//! `V4L2_BUF_FLAG_TSTAMP_SRC_SOE`); it is moved onto CLOCK_REALTIME with the offset between the
//! two clocks sampled when the frame is dequeued ([`crate::clock::Clock`]), so a wall-clock step
//! during a long run is followed. A buffer without a usable timestamp is stamped with the
//! dequeue time, and [`V4l2Source::describe`] says so.
//!
//! Nothing is allocated per frame: the frame buffer is the caller's, the I420 scratch frame for
//! 4:2:0 is allocated at open.

use crate::clock::Clock;
use linuxvideo::format::{Format, PixFormat, PixelFormat};
use linuxvideo::{BufType, CapabilityFlags, Device, Fract, VideoCaptureDevice};
use metronome_media::raw::convert::{to_rfc4175, Layout};
use metronome_media::raw::{Depth, RawFrame, RawSource, Sampling, VideoFormat};
use metronome_media::MediaError;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
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
fn format_name(f: [u8; 4]) -> String {
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
/// [`Clock::realtime_offset_ns`] gives it). `None` when the timestamp is not usable: another
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

/// A V4L2 camera could not be opened or set up; the message says what happened and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct V4l2Error(pub String);

/// "No such file or directory" rather than "No such file or directory (os error 2)".
fn reason(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// The message for a failure to open the node or to ask it what it is.
fn open_error(path: &Path, e: &io::Error) -> V4l2Error {
    let p = path.display();
    let why = reason(e);
    V4l2Error(match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENXIO) => format!(
            "no V4L2 device at {p} ({why}): connect a camera, or load the test driver with \
             `modprobe vivid`"
        ),
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "no permission to open {p} ({why}): add yourself to the `video` group (`sudo usermod \
             -aG video $USER`, then log in again)"
        ),
        Some(libc::EBUSY) => format!(
            "{p} is busy ({why}): another program is using the camera; close it and try again"
        ),
        Some(libc::ENOTTY) | Some(libc::EINVAL) => format!(
            "{p} is not a V4L2 video device (it does not answer VIDIOC_QUERYCAP: {why}): give a \
             /dev/videoN capture node (`v4l2-ctl --list-devices` lists them)"
        ),
        _ => format!("cannot open the V4L2 device {p}: {why}"),
    })
}

/// Opens `path` as a V4L2 device, with the messages of [`open_error`].
fn open_device(path: &Path) -> Result<Device, V4l2Error> {
    match std::fs::metadata(path) {
        Err(e) => return Err(open_error(path, &e)),
        Ok(m) if !m.file_type().is_char_device() => {
            let kind = if m.is_dir() {
                "a directory"
            } else if m.is_file() {
                "a regular file"
            } else {
                "not a character device"
            };
            return Err(V4l2Error(format!(
                "{} is not a V4L2 video device ({kind}): give a /dev/videoN capture node \
                 (`v4l2-ctl --list-devices` lists them), or leave out --raw-format … to send a file",
                path.display()
            )));
        }
        Ok(_) => {}
    }
    Device::open(path).map_err(|e| open_error(path, &e))
}

/// An S_FMT, S_PARM or streaming request the device refused.
fn setup_error(path: &Path, what: &str, e: &io::Error) -> V4l2Error {
    if e.raw_os_error() == Some(libc::EBUSY) {
        return open_error(path, e);
    }
    V4l2Error(format!("{}: {what} failed: {}", path.display(), reason(e)))
}

/// The ioctls `linuxvideo` 0.3.5 does not expose with what Metronome needs from them.
mod sys {
    use std::io;
    use std::os::fd::RawFd;

    pub const BUF_TYPE_VIDEO_CAPTURE: u32 = 1;
    pub const MEMORY_MMAP: u32 = 1;
    pub const CAP_TIMEPERFRAME: u32 = 0x1000;

    /// `struct v4l2_capability`
    #[repr(C)]
    pub struct Capability {
        pub driver: [u8; 16],
        pub card: [u8; 32],
        pub bus_info: [u8; 32],
        pub version: u32,
        pub capabilities: u32,
        pub device_caps: u32,
        pub reserved: [u32; 3],
    }

    /// `struct v4l2_requestbuffers`
    #[repr(C)]
    pub struct RequestBuffers {
        pub count: u32,
        pub type_: u32,
        pub memory: u32,
        pub capabilities: u32,
        pub flags: u8,
        pub reserved: [u8; 3],
    }

    /// `struct v4l2_timecode`
    #[repr(C)]
    pub struct Timecode {
        pub type_: u32,
        pub flags: u32,
        pub frames: u8,
        pub seconds: u8,
        pub minutes: u8,
        pub hours: u8,
        pub userbits: [u8; 4],
    }

    /// The `m` union of `struct v4l2_buffer`.
    #[repr(C)]
    pub union BufferM {
        pub offset: u32,
        pub userptr: libc::c_ulong,
        pub planes: *mut libc::c_void,
        pub fd: i32,
    }

    /// `struct v4l2_buffer`
    #[repr(C)]
    pub struct Buffer {
        pub index: u32,
        pub type_: u32,
        pub bytesused: u32,
        pub flags: u32,
        pub field: u32,
        pub timestamp: libc::timeval,
        pub timecode: Timecode,
        pub sequence: u32,
        pub memory: u32,
        pub m: BufferM,
        pub length: u32,
        pub reserved2: u32,
        pub request_fd: i32,
    }

    /// `struct v4l2_captureparm`
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct CaptureParm {
        pub capability: u32,
        pub capturemode: u32,
        /// Seconds per frame: numerator, denominator.
        pub timeperframe: [u32; 2],
        pub extendedmode: u32,
        pub readbuffers: u32,
        pub reserved: [u32; 4],
    }

    /// The `parm` union of `struct v4l2_streamparm`.
    #[repr(C)]
    pub union StreamParmU {
        pub capture: CaptureParm,
        pub raw: [u8; 200],
    }

    /// `struct v4l2_streamparm`
    #[repr(C)]
    pub struct StreamParm {
        pub type_: u32,
        pub parm: StreamParmU,
    }

    // The layouts of videodev2.h on 64-bit Linux. (Elsewhere the sizes differ with the C ABI the
    // same way, and a size the kernel does not know makes the request fail with ENOTTY, since the
    // size is part of the request number.)
    #[cfg(target_pointer_width = "64")]
    const _: () = {
        assert!(size_of::<Capability>() == 104);
        assert!(size_of::<RequestBuffers>() == 20);
        assert!(size_of::<Buffer>() == 88);
        assert!(size_of::<StreamParm>() == 204);
    };

    /// `_IOC(dir, 'V', nr, size)` (asm-generic/ioctl.h: read = 2, write = 1).
    const fn ioc(dir: u64, nr: u64, size: usize) -> u64 {
        (dir << 30) | ((size as u64) << 16) | ((b'V' as u64) << 8) | nr
    }
    pub const VIDIOC_QUERYCAP: u64 = ioc(2, 0, size_of::<Capability>());
    pub const VIDIOC_REQBUFS: u64 = ioc(3, 8, size_of::<RequestBuffers>());
    pub const VIDIOC_QUERYBUF: u64 = ioc(3, 9, size_of::<Buffer>());
    pub const VIDIOC_QBUF: u64 = ioc(3, 15, size_of::<Buffer>());
    pub const VIDIOC_DQBUF: u64 = ioc(3, 17, size_of::<Buffer>());
    pub const VIDIOC_STREAMON: u64 = ioc(1, 18, size_of::<i32>());
    pub const VIDIOC_STREAMOFF: u64 = ioc(1, 19, size_of::<i32>());
    pub const VIDIOC_G_PARM: u64 = ioc(3, 21, size_of::<StreamParm>());

    /// `ioctl(fd, req, arg)`, retried on EINTR.
    ///
    /// # Safety
    /// `arg` must point to a valid, writable value of the type `req` is defined with.
    pub unsafe fn ioctl<T>(fd: RawFd, req: u64, arg: *mut T) -> io::Result<()> {
        loop {
            // SAFETY: the caller guarantees `arg` matches `req`; `fd` is only read by the kernel.
            if unsafe { libc::ioctl(fd, req as _, arg) } != -1 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// A zeroed value of a videodev2.h struct (all of them are plain data, valid as zeros).
    pub fn zeroed<T: PlainData>() -> T {
        // SAFETY: `PlainData` is implemented only for the repr(C) structs above, made of
        // integers, arrays of them, raw pointers and unions of those: all-zero is a valid value.
        unsafe { std::mem::zeroed() }
    }

    /// The structs above: integers, raw pointers and unions of them only.
    pub trait PlainData {}
    impl PlainData for Capability {}
    impl PlainData for RequestBuffers {}
    impl PlainData for Buffer {}
    impl PlainData for StreamParm {}

    /// A NUL-terminated name field as text (lossy: drivers copy USB strings, cut at the field).
    pub fn name(field: &[u8]) -> String {
        let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
        String::from_utf8_lossy(&field[..end]).trim().to_string()
    }
}

/// One mmap'ed capture buffer.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

/// The capture buffers, mapped read-only; unmapped on drop.
struct Mappings(Vec<Mapping>);

// SAFETY: the mappings are owned by this value alone (nothing else holds the pointers); moving
// them to another thread moves that ownership, and they are read only through `&self`.
unsafe impl Send for Mappings {}

impl Mappings {
    fn get(&self, index: u32) -> Option<&[u8]> {
        let m = self.0.get(index as usize)?;
        // SAFETY: `ptr` is a live PROT_READ mapping of `len` bytes until `drop`; the driver writes
        // it only while the buffer is queued, and it is read only between DQBUF and QBUF.
        Some(unsafe { std::slice::from_raw_parts(m.ptr, m.len) })
    }
}

impl Drop for Mappings {
    fn drop(&mut self) {
        for m in &self.0 {
            // SAFETY: each mapping was returned by mmap with this length and is unmapped once.
            unsafe { libc::munmap(m.ptr.cast(), m.len) };
        }
    }
}

/// Counts of captured buffers that were not sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    pub short: u64,
    pub flagged: u64,
    pub bad_index: u64,
}

impl Skipped {
    pub fn total(&self) -> u64 {
        self.short + self.flagged + self.bad_index
    }
    fn count(&mut self, s: Skip) {
        match s {
            Skip::Short { .. } => self.short += 1,
            Skip::Flagged => self.flagged += 1,
            Skip::BadIndex => self.bad_index += 1,
        }
    }
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} truncated or wrong-sized, {} flagged as errors by the driver, {} with a bad index",
            self.short, self.flagged, self.bad_index
        )
    }
}

/// Frames from a V4L2 camera: a [`RawSource`] that is [self-timed](RawSource::self_timed).
pub struct V4l2Source {
    // Fields drop in this order after `Drop::drop` has stopped streaming: the mappings, then the
    // device (closing its descriptor).
    mappings: Mappings,
    device: VideoCaptureDevice,
    path: String,
    card: String,
    capture: CaptureFormat,
    format: VideoFormat,
    bytes_per_line: usize,
    scratch: Vec<u8>,
    clock: Clock,
    streaming: bool,
    /// The driver's buffers carry CLOCK_MONOTONIC timestamps.
    monotonic: bool,
    /// They mark the start of exposure (else the end of the frame).
    start_of_exposure: bool,
    /// Frames stamped at dequeue because their timestamp was not usable.
    dequeue_stamped: u64,
    skipped: Skipped,
    notes: Vec<String>,
    index: u64,
}

impl V4l2Source {
    /// Opens the capture device at `path`, negotiates a pixel format Metronome can send (UYVY,
    /// YUYV, NV12, YU12, RGB24, in that order), the size and frame rate of `want` (width, height,
    /// frames per second) if given, and maps its buffers. Streaming starts with the first frame.
    pub fn open(path: &Path, want: Option<(u32, u32, u32)>) -> Result<V4l2Source, V4l2Error> {
        let p = path.display().to_string();
        let device = open_device(path)?;
        let (card, caps) = query_cap(device.as_raw_fd()).map_err(|e| open_error(path, &e))?;
        if !caps.contains(CapabilityFlags::VIDEO_CAPTURE) {
            let why = if caps.contains(CapabilityFlags::VIDEO_CAPTURE_MPLANE) {
                "it captures with the multi-planar API only, which Metronome does not support"
            } else {
                "it is not a video capture node (an output, metadata or codec node?)"
            };
            return Err(V4l2Error(format!(
                "{p} ({card}) cannot be captured from: {why}. `v4l2-ctl --list-devices` lists the \
                 nodes of each camera; try another"
            )));
        }
        if !caps.contains(CapabilityFlags::STREAMING) {
            return Err(V4l2Error(format!(
                "{p} ({card}) does not support streaming I/O, which Metronome captures with: use \
                 another camera or driver"
            )));
        }
        let offered: Vec<[u8; 4]> = device
            .formats(BufType::VIDEO_CAPTURE)
            .filter_map(Result::ok)
            .map(|d| d.pixel_format().as_fourcc())
            .collect();
        let candidates: Vec<CaptureFormat> = PREFERENCE
            .iter()
            .filter(|f| offered.contains(f))
            .filter_map(|&f| capture_format(f))
            .collect();
        if candidates.is_empty() {
            let list: Vec<String> = offered.iter().map(|&f| fourcc_str(f)).collect();
            return Err(V4l2Error(format!(
                "{p} ({card}) cannot capture in UYVY, YUYV, NV12, YU12 or RGB24 (it offers {}): \
                 use a camera that gives uncompressed video, or record it to a file with \
                 `ffmpeg -f v4l2 -i {p} -pix_fmt yuv422p out.y4m` and send that with -i out.y4m",
                if list.is_empty() {
                    "no formats".to_string()
                } else {
                    list.join(", ")
                }
            )));
        }
        let (ww, wh) = match want {
            Some((w, h, _)) => (w, h),
            None => match device.format(BufType::VIDEO_CAPTURE) {
                Ok(Format::VideoCapture(f)) => (f.width(), f.height()),
                _ => (640, 480),
            },
        };
        // S_FMT with each candidate until the driver keeps one (it may substitute another).
        let mut device = Some(device);
        let mut refused = Vec::new();
        let mut chosen = None;
        for c in candidates {
            let dev = match device.take() {
                Some(d) => d,
                None => open_device(path)?,
            };
            let pf = PixelFormat::from_fourcc(c.fourcc);
            match dev.video_capture(PixFormat::new(ww, wh, pf)) {
                Ok(cap) if cap.format().pixel_format() == pf => {
                    chosen = Some((c, cap));
                    break;
                }
                Ok(cap) => refused.push(format!(
                    "{} (it gave {})",
                    format_name(c.fourcc),
                    fourcc_str(cap.format().pixel_format().as_fourcc())
                )),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    return Err(open_error(path, &e))
                }
                Err(e) => refused.push(format!("{} ({})", format_name(c.fourcc), reason(&e))),
            }
        }
        let Some((capture, cap)) = chosen else {
            return Err(V4l2Error(format!(
                "{p} ({card}) refused every format Metronome can send: {}",
                refused.join(", ")
            )));
        };
        let (width, height) = (cap.format().width(), cap.format().height());
        let mut notes = Vec::new();
        if want.is_some() && (width, height) != (ww, wh) {
            notes.push(format!(
                "asked for {ww}x{wh}, the camera gives {width}x{height}"
            ));
        }
        let fd = cap.as_raw_fd();
        let (fps_num, fps_den) = frame_rate(&cap, fd, want.map(|w| w.2), &mut notes);
        let format = VideoFormat::new(
            width,
            height,
            capture.sampling,
            capture.depth,
            fps_num,
            fps_den,
        )
        .map_err(|e| {
            V4l2Error(format!(
                "{p} ({card}) gives {width}x{height} {} at {fps_num}/{fps_den}, which Metronome \
                 cannot send ({e}): ask for another --size or --fps",
                format_name(capture.fourcc)
            ))
        })?;
        let tight = tight_bytes_per_line(capture.conversion, width as usize);
        let bytes_per_line = match cap.format().bytes_per_line() as usize {
            0 => tight,
            b if b < tight => {
                return Err(V4l2Error(format!(
                    "{p} ({card}): the driver reports {b} bytes per line for {width} pixels of {} \
                     (at least {tight} are needed); this is a driver bug",
                    format_name(capture.fourcc)
                )))
            }
            b => b,
        };
        let (mappings, flags) = map_buffers(fd).map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) => V4l2Error(format!(
                "{p} ({card}) does not support memory-mapped streaming, which Metronome captures \
                 with: use another camera or driver"
            )),
            _ => setup_error(path, "allocating capture buffers", &e),
        })?;
        set_nonblocking(fd).map_err(|e| setup_error(path, "setting O_NONBLOCK", &e))?;
        let scratch = match capture.conversion {
            Conversion::Nv12 | Conversion::I420 => vec![0u8; Layout::I420.frame_len(&format)],
            _ => Vec::new(),
        };
        let monotonic = flags & BUF_FLAG_TIMESTAMP_MASK == BUF_FLAG_TIMESTAMP_MONOTONIC;
        Ok(V4l2Source {
            mappings,
            device: cap,
            path: p,
            card,
            capture,
            format,
            bytes_per_line,
            scratch,
            clock: Clock::new(),
            streaming: false,
            monotonic,
            start_of_exposure: flags & BUF_FLAG_TSTAMP_SRC_MASK == BUF_FLAG_TSTAMP_SRC_SOE,
            dequeue_stamped: 0,
            skipped: Skipped::default(),
            notes,
            index: 0,
        })
    }

    /// Captured buffers not sent so far, by reason.
    pub fn skipped(&self) -> Skipped {
        self.skipped
    }

    /// Frames stamped with their dequeue time because the driver's timestamp was not usable.
    pub fn dequeue_stamped(&self) -> u64 {
        self.dequeue_stamped
    }

    fn fd(&self) -> RawFd {
        self.device.as_raw_fd()
    }

    fn read_error(&self, kind: io::ErrorKind, msg: String) -> MediaError {
        MediaError::Read {
            path: self.path.clone(),
            source: io::Error::new(kind, msg),
        }
    }

    /// Queues every buffer and starts the stream.
    fn start(&mut self) -> Result<(), MediaError> {
        for i in 0..self.mappings.0.len() as u32 {
            queue(self.fd(), i).map_err(|e| {
                self.read_error(
                    e.kind(),
                    format!("queueing capture buffer {i}: {}", reason(&e)),
                )
            })?;
        }
        let mut ty = sys::BUF_TYPE_VIDEO_CAPTURE as i32;
        // SAFETY: VIDIOC_STREAMON takes a pointer to the buffer type, an int.
        unsafe { sys::ioctl(self.fd(), sys::VIDIOC_STREAMON, &mut ty) }.map_err(|e| {
            self.read_error(
                e.kind(),
                format!("starting the camera (VIDIOC_STREAMON): {}", reason(&e)),
            )
        })?;
        self.streaming = true;
        Ok(())
    }

    /// Waits until a buffer is ready or `left` has passed; whether one is (or an error is
    /// signalled, which DQBUF then reports).
    fn wait_ready(&self, left: Duration) -> Result<(bool, bool), MediaError> {
        let mut pfd = libc::pollfd {
            fd: self.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok((false, false));
            }
            return Err(self.read_error(e.kind(), format!("waiting for a frame: {}", reason(&e))));
        }
        let err = pfd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0;
        Ok((r > 0 && (pfd.revents & libc::POLLIN != 0 || err), err))
    }

    fn timeout_error(&self, timeout: Duration) -> MediaError {
        let skipped = if self.skipped.total() > 0 {
            format!(
                " ({} buffers skipped: {})",
                self.skipped.total(),
                self.skipped
            )
        } else {
            String::new()
        };
        self.read_error(
            io::ErrorKind::TimedOut,
            format!(
                "the camera delivered no {}frame in {} s{skipped}: check that it is connected, \
                 uncovered and not stopped by another program",
                if skipped.is_empty() { "" } else { "usable " },
                timeout.as_secs()
            ),
        )
    }
}

/// The card name and the capabilities of the opened node (VIDIOC_QUERYCAP).
fn query_cap(fd: RawFd) -> io::Result<(String, CapabilityFlags)> {
    let mut cap: sys::Capability = sys::zeroed();
    // SAFETY: VIDIOC_QUERYCAP fills a v4l2_capability.
    unsafe { sys::ioctl(fd, sys::VIDIOC_QUERYCAP, &mut cap) }?;
    const DEVICE_CAPS: u32 = 0x8000_0000;
    let bits = if cap.capabilities & DEVICE_CAPS != 0 {
        cap.device_caps
    } else {
        cap.capabilities
    };
    let mut card = sys::name(&cap.card);
    if card.is_empty() {
        card = sys::name(&cap.driver);
    }
    Ok((card, CapabilityFlags::from_bits_truncate(bits)))
}

/// The capture parameters (VIDIOC_G_PARM).
fn get_parm(fd: RawFd) -> io::Result<sys::CaptureParm> {
    let mut parm: sys::StreamParm = sys::zeroed();
    parm.type_ = sys::BUF_TYPE_VIDEO_CAPTURE;
    // SAFETY: VIDIOC_G_PARM fills a v4l2_streamparm.
    unsafe { sys::ioctl(fd, sys::VIDIOC_G_PARM, &mut parm) }?;
    // SAFETY: for a capture buffer type the driver fills the `capture` member; any bits are a
    // valid CaptureParm (plain integers).
    Ok(unsafe { parm.parm.capture })
}

/// Frames per second of a time per frame `num/den` seconds, reduced; `None` if either is zero.
fn fps_of(num: u32, den: u32) -> Option<(u32, u32)> {
    if num == 0 || den == 0 {
        return None;
    }
    let (mut a, mut b) = (den, num);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    Some((den / a, num / a))
}

/// Sets the frame rate `want` if given and the camera lets it, and returns the rate in use.
fn frame_rate(
    cap: &VideoCaptureDevice,
    fd: RawFd,
    want: Option<u32>,
    notes: &mut Vec<String>,
) -> (u32, u32) {
    let settable = get_parm(fd).is_ok_and(|p| p.capability & sys::CAP_TIMEPERFRAME != 0);
    let mut rate = None;
    if let Some(fps) = want.filter(|&f| f > 0) {
        if settable {
            match cap.set_frame_interval(Fract::new(1, fps)) {
                Ok(got) => rate = fps_of(got.numerator(), got.denominator()),
                Err(e) => notes.push(format!("setting {fps} fps failed: {}", reason(&e))),
            }
        } else {
            notes.push(format!(
                "the camera does not let its rate be set (asked {fps} fps)"
            ));
        }
    }
    if rate.is_none() {
        rate = get_parm(fd)
            .ok()
            .and_then(|p| fps_of(p.timeperframe[0], p.timeperframe[1]));
    }
    match rate {
        Some(r) => {
            if let Some(fps) = want.filter(|&f| f > 0 && settable) {
                if r != (fps, 1) {
                    notes.push(format!(
                        "asked for {fps} fps, the camera gives {}/{}",
                        r.0, r.1
                    ));
                }
            }
            r
        }
        None => {
            let fps = want.filter(|&f| f > 0).unwrap_or(30);
            notes.push(format!(
                "the camera does not report its frame rate; sent as {fps} fps"
            ));
            (fps, 1)
        }
    }
}

/// Asks for [`BUFFERS`] mmap buffers and maps them; also returns the flags QUERYBUF reported
/// (they carry the timestamp type).
fn map_buffers(fd: RawFd) -> io::Result<(Mappings, u32)> {
    let mut req: sys::RequestBuffers = sys::zeroed();
    req.count = BUFFERS;
    req.type_ = sys::BUF_TYPE_VIDEO_CAPTURE;
    req.memory = sys::MEMORY_MMAP;
    // SAFETY: VIDIOC_REQBUFS takes a v4l2_requestbuffers.
    unsafe { sys::ioctl(fd, sys::VIDIOC_REQBUFS, &mut req) }?;
    if req.count == 0 {
        return Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            "the driver gave no capture buffers",
        ));
    }
    let mut maps = Mappings(Vec::with_capacity(req.count as usize));
    let mut flags = 0;
    for i in 0..req.count {
        let mut b: sys::Buffer = sys::zeroed();
        b.index = i;
        b.type_ = sys::BUF_TYPE_VIDEO_CAPTURE;
        b.memory = sys::MEMORY_MMAP;
        // SAFETY: VIDIOC_QUERYBUF fills a v4l2_buffer.
        unsafe { sys::ioctl(fd, sys::VIDIOC_QUERYBUF, &mut b) }?;
        flags = b.flags;
        // SAFETY: for MMAP buffers the driver sets `m.offset`.
        let offset = unsafe { b.m.offset };
        let len = b.length as usize;
        // SAFETY: maps `len` bytes of the device at the offset the driver gave, read-only and
        // shared; the result is checked for MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        maps.0.push(Mapping {
            ptr: ptr.cast(),
            len,
        });
    }
    Ok((maps, flags))
}

/// Queues buffer `index` for capture (VIDIOC_QBUF).
fn queue(fd: RawFd, index: u32) -> io::Result<()> {
    let mut b: sys::Buffer = sys::zeroed();
    b.index = index;
    b.type_ = sys::BUF_TYPE_VIDEO_CAPTURE;
    b.memory = sys::MEMORY_MMAP;
    // SAFETY: VIDIOC_QBUF takes a v4l2_buffer.
    unsafe { sys::ioctl(fd, sys::VIDIOC_QBUF, &mut b) }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor this process owns; F_GETFL/F_SETFL take no pointers.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Drop for V4l2Source {
    fn drop(&mut self) {
        if self.streaming {
            let mut ty = sys::BUF_TYPE_VIDEO_CAPTURE as i32;
            // SAFETY: VIDIOC_STREAMOFF takes a pointer to the buffer type; it dequeues every
            // buffer, so the driver no longer writes the mappings dropped next.
            let _ = unsafe { sys::ioctl(self.fd(), sys::VIDIOC_STREAMOFF, &mut ty) };
        }
    }
}

impl RawSource for V4l2Source {
    fn format(&self) -> VideoFormat {
        self.format
    }

    /// Blocks until the camera has captured a frame (at most [`FRAME_TIMEOUT`], or
    /// [`FIRST_FRAME_TIMEOUT`] for the first), converts it into `into` and stamps its capture
    /// time. Truncated, wrong-sized or error-flagged buffers are counted and skipped.
    fn next_frame(&mut self, into: &mut RawFrame) -> Result<bool, MediaError> {
        let timeout = if self.streaming {
            FRAME_TIMEOUT
        } else {
            self.start()?;
            FIRST_FRAME_TIMEOUT
        };
        into.reshape(self.format);
        let deadline = self.clock.now() + timeout;
        loop {
            let left = deadline.saturating_since(self.clock.now());
            if left.is_zero() {
                return Err(self.timeout_error(timeout));
            }
            let (ready, err) = self.wait_ready(left)?;
            if !ready {
                continue;
            }
            let mut b: sys::Buffer = sys::zeroed();
            b.type_ = sys::BUF_TYPE_VIDEO_CAPTURE;
            b.memory = sys::MEMORY_MMAP;
            // SAFETY: VIDIOC_DQBUF fills a v4l2_buffer.
            if let Err(e) = unsafe { sys::ioctl(self.fd(), sys::VIDIOC_DQBUF, &mut b) } {
                if e.kind() == io::ErrorKind::WouldBlock && !err {
                    continue;
                }
                let msg = match e.raw_os_error() {
                    Some(libc::ENODEV) => "the camera was disconnected".to_string(),
                    Some(libc::EAGAIN) => {
                        "the camera reported an error (is it still connected?)".to_string()
                    }
                    _ => format!(
                        "taking a frame from the camera (VIDIOC_DQBUF): {}",
                        reason(&e)
                    ),
                };
                return Err(self.read_error(e.kind(), msg));
            }
            // The clocks are read right after the dequeue: the offset between them now, and the
            // dequeue time if the buffer's own timestamp is not usable.
            let now = Clock::new();
            let mono_now = now.epoch_mono_ns();
            let offset = now.realtime_offset_ns();
            let conv = self.capture.conversion;
            let converted = match self.mappings.get(b.index) {
                None => Err(Skip::BadIndex),
                Some(_) if b.flags & BUF_FLAG_ERROR != 0 => Err(Skip::Flagged),
                Some(mem) => {
                    let used = (b.bytesused as usize).min(mem.len());
                    to_payload(
                        conv,
                        &self.format,
                        self.bytes_per_line,
                        &mem[..used],
                        &mut self.scratch,
                        &mut into.data,
                    )
                }
            };
            if (b.index as usize) < self.mappings.0.len() {
                queue(self.fd(), b.index).map_err(|e| {
                    self.read_error(
                        e.kind(),
                        format!(
                            "giving a buffer back to the camera (VIDIOC_QBUF): {}",
                            reason(&e)
                        ),
                    )
                })?;
            }
            if let Err(s) = converted {
                self.skipped.count(s);
                continue;
            }
            // time_t and suseconds_t are i64 on 64-bit Linux, narrower on some 32-bit targets.
            #[allow(clippy::unnecessary_cast)]
            let (sec, usec) = (b.timestamp.tv_sec as i64, b.timestamp.tv_usec as i64);
            let stamp = capture_realtime_ns(b.flags, sec, usec, mono_now, offset);
            self.monotonic |= stamp.is_some();
            into.capture_ns = stamp.unwrap_or_else(|| {
                self.dequeue_stamped += 1;
                u64::try_from(i128::from(mono_now) + offset).unwrap_or(0)
            });
            into.index = self.index;
            self.index += 1;
            return Ok(true);
        }
    }

    fn describe(&self) -> String {
        let mut s = format!(
            "V4L2 {} ({}) {}x{} {} at {}/{}",
            self.path,
            self.card,
            self.format.width,
            self.format.height,
            format_name(self.capture.fourcc),
            self.format.fps_num,
            self.format.fps_den
        );
        let mut notes = self.notes.clone();
        if !self.monotonic {
            notes.push(
                "capture time = dequeue time: the driver gives no monotonic timestamps".into(),
            );
        } else if self.dequeue_stamped > 0 {
            notes.push(format!(
                "{} frames stamped at dequeue (unusable driver timestamp)",
                self.dequeue_stamped
            ));
        } else if self.start_of_exposure {
            notes.push("capture time = start of exposure".into());
        }
        if self.skipped.total() > 0 {
            notes.push(format!("skipped {}", self.skipped));
        }
        if !notes.is_empty() {
            s.push_str(&format!("; {}", notes.join("; ")));
        }
        s
    }

    fn self_timed(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(w: u32, h: u32, s: Sampling) -> VideoFormat {
        VideoFormat::new(w, h, s, Depth::Eight, 30, 1).unwrap()
    }

    #[test]
    fn fourcc_choice_and_preference() {
        let c = |f: &[u8; 4]| capture_format(*f).map(|c| (c.sampling, c.depth, c.conversion));
        assert_eq!(
            c(b"UYVY"),
            Some((Sampling::Ycbcr422, Depth::Eight, Conversion::Uyvy))
        );
        assert_eq!(
            c(b"YUYV"),
            Some((Sampling::Ycbcr422, Depth::Eight, Conversion::Yuyv))
        );
        assert_eq!(
            c(b"NV12"),
            Some((Sampling::Ycbcr420, Depth::Eight, Conversion::Nv12))
        );
        assert_eq!(
            c(b"YU12"),
            Some((Sampling::Ycbcr420, Depth::Eight, Conversion::I420))
        );
        assert_eq!(
            c(b"RGB3"),
            Some((Sampling::Rgb, Depth::Eight, Conversion::Rgb24))
        );
        assert_eq!(c(b"MJPG"), None);
        assert_eq!(c(b"H264"), None);
        let pick = |l: &[&[u8; 4]]| {
            let v: Vec<[u8; 4]> = l.iter().map(|f| **f).collect();
            choose_format(&v).map(|c| c.fourcc)
        };
        assert_eq!(pick(&[b"MJPG", b"YUYV", b"UYVY"]), Some(*b"UYVY"));
        assert_eq!(pick(&[b"RGB3", b"YU12", b"NV12"]), Some(*b"NV12"));
        assert_eq!(pick(&[b"RGB3", b"MJPG"]), Some(*b"RGB3"));
        assert_eq!(pick(&[b"MJPG", b"H264"]), None);
        assert_eq!(fourcc_str(*b"MJPG"), "MJPG");
        assert_eq!(fourcc_str(*b"Y16 "), "Y16");
        assert_eq!(fourcc_str([b'A', 0, 0xff, b'B']), "A\\x00\\xffB");
    }

    #[test]
    fn yuyv_row_becomes_uyvy() {
        // Y'0 C'b Y'1 C'r  →  C'b Y'0 C'r Y'1
        let src = [0x10, 0x80, 0x20, 0x90, 0x30, 0x81, 0x40, 0x91];
        let mut dst = [0u8; 8];
        yuyv_row_to_uyvy(&src, &mut dst);
        assert_eq!(dst, [0x80, 0x10, 0x90, 0x20, 0x81, 0x30, 0x91, 0x40]);
    }

    #[test]
    fn packed_frames_with_padded_lines() {
        // 4x2 YUYV, 10 bytes per line (2 of padding, 0xEE).
        let f = fmt(4, 2, Sampling::Ycbcr422);
        let src = [
            1, 2, 3, 4, 5, 6, 7, 8, 0xee, 0xee, //
            11, 12, 13, 14, 15, 16, 17, 18, 0xee, 0xee,
        ];
        let mut dst = vec![0u8; f.frame_bytes()];
        to_payload(Conversion::Yuyv, &f, 10, &src, &mut [], &mut dst).unwrap();
        assert_eq!(
            dst,
            [2, 1, 4, 3, 6, 5, 8, 7, 12, 11, 14, 13, 16, 15, 18, 17]
        );
        // The same bytes as UYVY are copied as they are, padding dropped; the last line need
        // not be padded.
        to_payload(Conversion::Uyvy, &f, 10, &src[..18], &mut [], &mut dst).unwrap();
        assert_eq!(
            dst,
            [1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 16, 17, 18]
        );
        // RGB24 2x1.
        let f = fmt(2, 1, Sampling::Rgb);
        let mut dst = vec![0u8; 6];
        to_payload(
            Conversion::Rgb24,
            &f,
            6,
            &[9, 8, 7, 6, 5, 4],
            &mut [],
            &mut dst,
        )
        .unwrap();
        assert_eq!(dst, [9, 8, 7, 6, 5, 4]);
    }

    #[test]
    fn nv12_to_payload_order() {
        // 4x2: one row of two 4:2:0 pgroups Y'00 Y'01 Y'10 Y'11 C'b C'r.
        let f = fmt(4, 2, Sampling::Ycbcr420);
        let tight = [1, 2, 3, 4, 5, 6, 7, 8, 10, 20, 11, 21];
        let mut i420 = [0u8; 12];
        nv12_to_i420(4, 2, 4, &tight, &mut i420).unwrap();
        assert_eq!(i420, [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 20, 21]);
        let want = [1, 2, 5, 6, 10, 20, 3, 4, 7, 8, 11, 21];
        let mut scratch = vec![0u8; Layout::I420.frame_len(&f)];
        let mut dst = vec![0u8; f.frame_bytes()];
        to_payload(Conversion::Nv12, &f, 4, &tight, &mut scratch, &mut dst).unwrap();
        assert_eq!(dst, want);
        // Lines padded to 6 bytes.
        let padded = [
            1, 2, 3, 4, 0xee, 0xee, 5, 6, 7, 8, 0xee, 0xee, 10, 20, 11, 21, 0xee, 0xee,
        ];
        dst.fill(0);
        to_payload(Conversion::Nv12, &f, 6, &padded, &mut scratch, &mut dst).unwrap();
        assert_eq!(dst, want);
        // I420 (YU12), tight and padded (luma 6, chroma 3 bytes per line).
        let i420_tight = [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 20, 21];
        dst.fill(0);
        to_payload(Conversion::I420, &f, 4, &i420_tight, &mut scratch, &mut dst).unwrap();
        assert_eq!(dst, want);
        let i420_padded = [
            1, 2, 3, 4, 0xee, 0xee, 5, 6, 7, 8, 0xee, 0xee, 10, 11, 0xee, 20, 21, 0xee,
        ];
        dst.fill(0);
        to_payload(
            Conversion::I420,
            &f,
            6,
            &i420_padded,
            &mut scratch,
            &mut dst,
        )
        .unwrap();
        assert_eq!(dst, want);
    }

    #[test]
    fn short_and_wrong_sized_buffers_are_refused_not_read_past() {
        let f = fmt(4, 2, Sampling::Ycbcr420);
        let mut scratch = vec![0u8; Layout::I420.frame_len(&f)];
        let mut dst = vec![0u8; f.frame_bytes()];
        for conv in [Conversion::Nv12, Conversion::I420] {
            for n in [0, 1, 11] {
                assert_eq!(
                    to_payload(conv, &f, 4, &vec![0; n], &mut scratch, &mut dst),
                    Err(Skip::Short { got: n, need: 12 })
                );
            }
        }
        // A scratch frame too small, or a destination of the wrong size: refused too.
        assert!(to_payload(Conversion::Nv12, &f, 4, &[0; 12], &mut [0; 5], &mut dst).is_err());
        assert!(to_payload(Conversion::Nv12, &f, 4, &[0; 12], &mut scratch, &mut [0; 3]).is_err());
        let f = fmt(4, 2, Sampling::Ycbcr422);
        let mut dst = vec![0u8; f.frame_bytes()];
        assert_eq!(
            to_payload(Conversion::Yuyv, &f, 10, &[0; 17], &mut [], &mut dst),
            Err(Skip::Short { got: 17, need: 18 })
        );
        // Fewer bytes per line than a line holds.
        assert!(to_payload(Conversion::Uyvy, &f, 6, &[0; 64], &mut [], &mut dst).is_err());
        assert_eq!(
            needed_bytes(Conversion::I420, 640, 480, 640),
            640 * 480 * 3 / 2
        );
        assert_eq!(
            needed_bytes(Conversion::Nv12, 640, 480, 640),
            640 * 480 * 3 / 2
        );
        assert_eq!(
            needed_bytes(Conversion::Uyvy, 640, 480, 1280),
            640 * 480 * 2
        );
    }

    #[test]
    fn monotonic_timestamps_move_onto_the_wall_clock() {
        let offset: i128 = 1_700_000_000_000_000_000 - 100_000_000_000;
        let now = 100_600_000_000u64; // CLOCK_MONOTONIC 100.6 s
        let mono = BUF_FLAG_TIMESTAMP_MONOTONIC;
        assert_eq!(
            capture_realtime_ns(mono, 100, 500_000, now, offset),
            Some(1_700_000_000_500_000_000)
        );
        // Start-of-exposure flag: still a monotonic timestamp.
        assert_eq!(
            capture_realtime_ns(mono | BUF_FLAG_TSTAMP_SRC_SOE, 100, 1, now, offset),
            Some(1_700_000_000_000_001_000)
        );
        // Copied or unknown timestamps, zero, malformed, future or stale: not used.
        assert_eq!(capture_realtime_ns(0x4000, 100, 0, now, offset), None);
        assert_eq!(capture_realtime_ns(0, 100, 0, now, offset), None);
        assert_eq!(capture_realtime_ns(mono, 0, 0, now, offset), None);
        assert_eq!(capture_realtime_ns(mono, 100, 1_000_000, now, offset), None);
        assert_eq!(capture_realtime_ns(mono, -1, 0, now, offset), None);
        assert_eq!(capture_realtime_ns(mono, 100, 601_001, now, offset), None);
        assert_eq!(
            capture_realtime_ns(mono, 100, 601_000, now, offset),
            Some(1_700_000_000_601_000_000)
        );
        assert_eq!(capture_realtime_ns(mono, 90, 599_999, now, offset), None);
        // A negative wall-clock result is refused, not wrapped.
        assert_eq!(
            capture_realtime_ns(mono, 100, 0, now, -200_000_000_000),
            None
        );
    }

    #[test]
    fn frame_rate_of_time_per_frame() {
        assert_eq!(fps_of(1, 30), Some((30, 1)));
        assert_eq!(fps_of(1001, 30000), Some((30000, 1001)));
        assert_eq!(fps_of(2, 50), Some((25, 1)));
        assert_eq!(fps_of(0, 30), None);
        assert_eq!(fps_of(1, 0), None);
    }

    #[test]
    fn opening_what_is_not_a_camera_says_so() {
        let e = V4l2Source::open(Path::new("/dev/video-metronome-none"), None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with(
                "no V4L2 device at /dev/video-metronome-none (No such file or directory)"
            ) && e.contains("modprobe vivid"),
            "{e}"
        );
        let e = V4l2Source::open(Path::new("/dev/null"), Some((640, 480, 30)))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("/dev/null is not a V4L2 video device"), "{e}");
        assert!(e.contains("v4l2-ctl --list-devices"), "{e}");
        let file = std::env::temp_dir().join(format!("metronome-v4l2-{}", std::process::id()));
        std::fs::write(&file, b"not a camera").unwrap();
        let e = V4l2Source::open(&file, None).err().unwrap().to_string();
        std::fs::remove_file(&file).unwrap();
        assert!(
            e.contains("is not a V4L2 video device (a regular file)"),
            "{e}"
        );
        let e = V4l2Source::open(&std::env::temp_dir(), None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("is not a V4L2 video device (a directory)"),
            "{e}"
        );
    }

    /// A camera stand-in: a frame every 5 ms (the format says 25 fps), captured 3 ms before
    /// `next_frame` returns it.
    struct FakeCamera {
        format: VideoFormat,
        clock: Clock,
        n: u64,
    }

    impl RawSource for FakeCamera {
        fn format(&self) -> VideoFormat {
            self.format
        }
        fn next_frame(&mut self, into: &mut RawFrame) -> Result<bool, MediaError> {
            std::thread::sleep(Duration::from_millis(5));
            into.reshape(self.format);
            into.data.fill(self.n as u8);
            into.index = self.n;
            into.capture_ns = self.clock.realtime_ns() - 3_000_000;
            self.n += 1;
            Ok(true)
        }
        fn describe(&self) -> String {
            "fake camera".into()
        }
        fn self_timed(&self) -> bool {
            true
        }
    }

    /// The sender does not hold a self-timed source to the frame grid (on the grid, 10 frames at
    /// 25 fps after a 200 ms preroll take about half a second; these come every 5 ms), and keeps
    /// the capture time the source set (the receiver's latency includes the 3 ms before
    /// `next_frame` returned).
    #[test]
    fn a_self_timed_source_is_sent_when_ready_with_its_capture_time() {
        use metronome_sched::SenderType;

        let f = fmt(64, 48, Sampling::Ycbcr422);
        let clock = Clock::new();
        let src = Box::new(FakeCamera {
            format: f,
            clock,
            n: 0,
        });
        let t0 = clock.now();
        let (s, r) = crate::raw::tests::loopback(src, 10, |cfg| cfg.model = SenderType::Burst);
        let took = clock.now().saturating_since(t0);
        assert_eq!((s.frames_sent, s.ended_by), (10, "frames"));
        assert_eq!(s.frames_not_ready, 0);
        assert!(took < Duration::from_millis(300), "took {took:?}");
        assert_eq!(r.frames_complete, 10, "{r:?}");
        assert!(r.latency_us.min >= 3000.0, "{:?}", r.latency_us);
    }

    #[test]
    fn ioctl_numbers_match_videodev2_h() {
        // The values of videodev2.h on 64-bit Linux.
        if cfg!(target_pointer_width = "64") {
            assert_eq!(sys::VIDIOC_QUERYCAP, 0x8068_5600);
            assert_eq!(sys::VIDIOC_REQBUFS, 0xc014_5608);
            assert_eq!(sys::VIDIOC_QUERYBUF, 0xc058_5609);
            assert_eq!(sys::VIDIOC_QBUF, 0xc058_560f);
            assert_eq!(sys::VIDIOC_DQBUF, 0xc058_5611);
            assert_eq!(sys::VIDIOC_STREAMON, 0x4004_5612);
            assert_eq!(sys::VIDIOC_STREAMOFF, 0x4004_5613);
            assert_eq!(sys::VIDIOC_G_PARM, 0xc0cc_5615);
        }
    }
}
