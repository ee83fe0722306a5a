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
//! | `YU12`      | YCbCr-4:2:0 8-bit  | I420 → payload (`convert::to_rfc4175`)              |
//! | `RGB3`      | RGB 8-bit          | none: R G B is the RFC 4175 order                      |
//!
//! Capture time: a buffer flagged `V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC` carries the CLOCK_MONOTONIC
//! time the driver took the frame (its end, or its start of exposure with
//! `V4L2_BUF_FLAG_TSTAMP_SRC_SOE`); it is moved onto CLOCK_REALTIME with the offset between the
//! two clocks sampled when the frame is dequeued ([`metronome_rt::clock::Clock`]), so a wall-clock step
//! during a long run is followed. A buffer without a usable timestamp is stamped with the
//! dequeue time, and [`V4l2Source::describe`] says so.
//!
//! Nothing is allocated per frame: the frame buffer is the caller's, the I420 scratch frame for
//! 4:2:0 is allocated at open.

mod convert;
mod sys;
#[cfg(test)]
mod tests;

use convert::format_name;
pub use convert::*;

use linuxvideo::format::{Format, PixFormat, PixelFormat};
use linuxvideo::{BufType, CapabilityFlags, Device, Fract, VideoCaptureDevice};
use metronome_media::uncompressed::convert::Layout;
use metronome_media::uncompressed::{RawFrame, RawSource, VideoFormat};
use metronome_media::MediaError;
use metronome_rt::clock::Clock;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::time::Duration;

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
        let card = capture_card(path, &device)?;
        let (ww, wh) = match want {
            Some((w, h, _)) => (w, h),
            None => match device.format(BufType::VIDEO_CAPTURE) {
                Ok(Format::VideoCapture(f)) => (f.width(), f.height()),
                _ => (640, 480),
            },
        };
        let (capture, cap) = negotiate(path, &card, device, (ww, wh))?;
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
        let polled =
            metronome_rt::poll::wait_readable(&[self.fd()], left.max(Duration::from_millis(1)))
                .map_err(|e| {
                    self.read_error(e.kind(), format!("waiting for a frame: {}", reason(&e)))
                })?;
        Ok((polled.ready > 0, polled.error))
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

/// The card's name, if `device` is a single-planar capture node with streaming I/O; else
/// why it cannot be captured from.
fn capture_card(path: &Path, device: &Device) -> Result<String, V4l2Error> {
    let p = path.display();
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
    Ok(card)
}

/// Sets the first format of [`PREFERENCE`] that the device offers and keeps, at `size`
/// (the driver may change the size; the caller reads it back).
fn negotiate(
    path: &Path,
    card: &str,
    device: Device,
    (ww, wh): (u32, u32),
) -> Result<(CaptureFormat, VideoCaptureDevice), V4l2Error> {
    let p = path.display();
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
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Err(open_error(path, &e)),
            Err(e) => refused.push(format!("{} ({})", format_name(c.fourcc), reason(&e))),
        }
    }
    let Some((capture, cap)) = chosen else {
        return Err(V4l2Error(format!(
            "{p} ({card}) refused every format Metronome can send: {}",
            refused.join(", ")
        )));
    };
    Ok((capture, cap))
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
