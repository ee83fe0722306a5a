//! The ioctls `linuxvideo` 0.3.5 does not expose with what Metronome needs from them.

use std::io;
use std::os::fd::RawFd;

pub(super) const BUF_TYPE_VIDEO_CAPTURE: u32 = 1;
pub(super) const MEMORY_MMAP: u32 = 1;
pub(super) const CAP_TIMEPERFRAME: u32 = 0x1000;

/// `struct v4l2_capability`
#[repr(C)]
pub(super) struct Capability {
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
pub(super) struct RequestBuffers {
    pub count: u32,
    pub type_: u32,
    pub memory: u32,
    pub capabilities: u32,
    pub flags: u8,
    pub reserved: [u8; 3],
}

/// `struct v4l2_timecode`
#[repr(C)]
pub(super) struct Timecode {
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
pub(super) union BufferM {
    pub offset: u32,
    pub userptr: libc::c_ulong,
    pub planes: *mut libc::c_void,
    pub fd: i32,
}

/// `struct v4l2_buffer`
#[repr(C)]
pub(super) struct Buffer {
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
pub(super) struct CaptureParm {
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
pub(super) union StreamParmU {
    pub capture: CaptureParm,
    pub raw: [u8; 200],
}

/// `struct v4l2_streamparm`
#[repr(C)]
pub(super) struct StreamParm {
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
pub(super) const VIDIOC_QUERYCAP: u64 = ioc(2, 0, size_of::<Capability>());
pub(super) const VIDIOC_REQBUFS: u64 = ioc(3, 8, size_of::<RequestBuffers>());
pub(super) const VIDIOC_QUERYBUF: u64 = ioc(3, 9, size_of::<Buffer>());
pub(super) const VIDIOC_QBUF: u64 = ioc(3, 15, size_of::<Buffer>());
pub(super) const VIDIOC_DQBUF: u64 = ioc(3, 17, size_of::<Buffer>());
pub(super) const VIDIOC_STREAMON: u64 = ioc(1, 18, size_of::<i32>());
pub(super) const VIDIOC_STREAMOFF: u64 = ioc(1, 19, size_of::<i32>());
pub(super) const VIDIOC_G_PARM: u64 = ioc(3, 21, size_of::<StreamParm>());

/// `ioctl(fd, req, arg)`, retried on EINTR.
///
/// # Safety
/// `arg` must point to a valid, writable value of the type `req` is defined with.
pub(super) unsafe fn ioctl<T>(fd: RawFd, req: u64, arg: *mut T) -> io::Result<()> {
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
pub(super) fn zeroed<T: PlainData>() -> T {
    // SAFETY: `PlainData` is implemented only for the repr(C) structs above, made of
    // integers, arrays of them, raw pointers and unions of those: all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// The structs above: integers, raw pointers and unions of them only.
pub(super) trait PlainData {}
impl PlainData for Capability {}
impl PlainData for RequestBuffers {}
impl PlainData for Buffer {}
impl PlainData for StreamParm {}

/// A NUL-terminated name field as text (lossy: drivers copy USB strings, cut at the field).
pub(super) fn name(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).trim().to_string()
}
