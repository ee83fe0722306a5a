//! [`BatchSender`]: batches to one destination with UDP GSO, `sendmmsg` or `sendto`.

use super::{errno_name, getsockopt_int};
use crate::udp::socket::{bind, local_addr, local_any, new_udp, set_send_options};
use crate::udp::tuning::{tune_buffers, BufferReport};
use crate::udp::{SocketOptions, UdpError};
use crate::url::RtpUrl;
use socket2::{SockAddr, Socket};
use std::fmt;
use std::io;
use std::mem::zeroed;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

/// Most datagrams in one GSO send: the kernel's UDP_MAX_SEGMENTS (64 before Linux 6.13 raised it
/// to 128). Fewer when the segments are large: one GSO send carries at most 64 KiB of payload.
pub const GSO_MAX_SEGMENTS: usize = 64;
/// Most datagrams in one `sendmmsg` call.
const MMSG_BATCH: usize = 64;
/// Payload bytes one GSO send may carry: a whole IP packet's worth before segmentation.
const GSO_MAX_PAYLOAD_V4: usize = 65_535 - 20 - 8;
const GSO_MAX_PAYLOAD_V6: usize = 65_535 - 8;
/// IP + UDP header bytes.
const HEADERS_V4: usize = 20 + 8;
const HEADERS_V6: usize = 40 + 8;

/// How a batch leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendPath {
    /// UDP GSO: runs of equal-size datagrams (the last may be shorter) in one `sendmsg` each;
    /// lone datagrams with `sendto`.
    Gso,
    /// One `sendmmsg` per up to 64 datagrams.
    Mmsg,
    /// One `sendto` per datagram.
    Plain,
}

impl SendPath {
    fn from_u8(v: u8) -> SendPath {
        match v {
            0 => SendPath::Gso,
            1 => SendPath::Mmsg,
            _ => SendPath::Plain,
        }
    }
}

/// Whether UDP GSO is in use, and if not, why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoStatus {
    /// In use for segments of at most `max_segment` bytes (the path MTU less the headers).
    On {
        /// Largest datagram GSO may carry, bytes: the path MTU less the IP and UDP headers.
        max_segment: usize,
    },
    /// The kernel does not know UDP_SEGMENT (before Linux 4.18).
    Unsupported,
    /// A GSO send failed with this errno, so GSO was turned off for this sender; the batch that
    /// failed, and every one after it, went out with `sendmmsg`.
    Disabled {
        /// The raw OS error number (e.g. `libc::EIO`) the failed GSO send returned.
        errno: i32,
    },
}

impl fmt::Display for GsoStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            GsoStatus::On { max_segment } => {
                write!(f, "UDP GSO on (segments up to {max_segment} bytes)")
            }
            GsoStatus::Unsupported => write!(
                f,
                "UDP GSO unavailable: this kernel has no UDP_SEGMENT (Linux 4.18+); sending with \
                 sendmmsg"
            ),
            GsoStatus::Disabled { errno } => write!(
                f,
                "UDP GSO turned off: a segmented send failed with {} ({}); the outgoing device \
                 or route cannot segment UDP (no checksum offload, a tunnel, IPsec); sending with \
                 sendmmsg",
                errno_name(errno),
                io::Error::from_raw_os_error(errno)
            ),
        }
    }
}

/// A batch that stopped part-way: `sent` datagrams (the first ones) had left.
#[derive(Debug, thiserror::Error)]
#[error("{source} ({sent} datagrams of the batch had been sent)")]
pub struct BatchError {
    /// Datagrams of the batch that had left before the failure: the first `sent` ones. The
    /// caller may resend from there.
    pub sent: usize,
    /// Why the send that failed did (see [`UdpError::from_send`]).
    pub source: UdpError,
}

/// High-rate media out to one destination.
#[derive(Debug)]
pub struct BatchSender {
    socket: Socket,
    dest: RtpUrl,
    dest_sa: SockAddr,
    buffer: BufferReport,
    /// The path asked for ([`SendPath`] as u8).
    path: AtomicU8,
    /// 0 while GSO works; the errno that turned it off otherwise.
    gso_errno: AtomicI32,
    gso_supported: bool,
    /// Largest segment GSO may carry: path MTU − IP/UDP headers (larger ones fragment).
    max_segment: usize,
    /// Largest payload of one GSO send.
    max_payload: usize,
}

impl BatchSender {
    /// Opens a socket for `dest` set up like [`crate::udp::UdpSender::open`]'s (source address,
    /// TTL, multicast interface and loop), with a send buffer of `o.buffer_bytes` (see
    /// [`BatchSender::buffer_report`]), and finds the path MTU and whether the kernel has UDP GSO.
    /// `o.read_timeout` is not used. Fails with [`UdpError::Unreachable`] if there is no route.
    pub fn open(dest: &RtpUrl, o: &SocketOptions) -> Result<BatchSender, UdpError> {
        let socket = new_udp(&dest.addr)?;
        bind(&socket, local_any(dest))?;
        set_send_options(&socket, dest)?;
        Self::from_socket(socket, dest, o)
    }

    /// A batch sender on a socket already bound and set up for `dest` (an RTSP session's server
    /// port, see [`crate::udp::bind_pair`]): tunes its send buffer, finds the path MTU and
    /// whether the kernel has UDP GSO.
    pub fn from_socket(
        socket: Socket,
        dest: &RtpUrl,
        o: &SocketOptions,
    ) -> Result<BatchSender, UdpError> {
        let buffer = tune_buffers(&socket, o.buffer_bytes, false);
        let mtu = path_mtu(dest)?;
        let v4 = dest.addr.is_ipv4();
        let headers = if v4 { HEADERS_V4 } else { HEADERS_V6 };
        let gso_supported = getsockopt_int(&socket, libc::SOL_UDP, libc::UDP_SEGMENT).is_ok();
        Ok(BatchSender {
            socket,
            dest: *dest,
            dest_sa: SockAddr::from(dest.addr),
            buffer,
            path: AtomicU8::new(SendPath::Gso as u8),
            gso_errno: AtomicI32::new(0),
            gso_supported,
            max_segment: mtu.saturating_sub(headers),
            max_payload: if v4 {
                GSO_MAX_PAYLOAD_V4
            } else {
                GSO_MAX_PAYLOAD_V6
            },
        })
    }

    /// Where every datagram goes: the destination the sender was opened for.
    pub fn destination(&self) -> &RtpUrl {
        &self.dest
    }

    /// What the send buffer request got, with the sysctl to run when the kernel capped it.
    pub fn buffer_report(&self) -> &BufferReport {
        &self.buffer
    }

    /// The address and port the datagrams leave from (the source address a receiver sees).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        local_addr(&self.socket)
    }

    /// The underlying socket, for options not wrapped here.
    pub fn socket(&self) -> &Socket {
        &self.socket
    }

    /// Whether GSO is in use, and if not, why (a sentence for the user: `{}`).
    pub fn gso_status(&self) -> GsoStatus {
        let errno = self.gso_errno.load(Ordering::Relaxed);
        if !self.gso_supported {
            GsoStatus::Unsupported
        } else if errno != 0 {
            GsoStatus::Disabled { errno }
        } else {
            GsoStatus::On {
                max_segment: self.max_segment,
            }
        }
    }

    /// The path batches take now: the one asked for, except GSO when it is unavailable
    /// (then `sendmmsg`).
    pub fn path(&self) -> SendPath {
        match SendPath::from_u8(self.path.load(Ordering::Relaxed)) {
            SendPath::Gso if !matches!(self.gso_status(), GsoStatus::On { .. }) => SendPath::Mmsg,
            p => p,
        }
    }

    /// Chooses the path (GSO by default); returns the one that will be taken.
    pub fn set_path(&self, path: SendPath) -> SendPath {
        self.path.store(path as u8, Ordering::Relaxed);
        self.path()
    }

    /// Sends one datagram (any size up to 65507 bytes; the kernel fragments what exceeds the MTU).
    pub fn send(&self, packet: &[u8]) -> Result<usize, UdpError> {
        self.plain(packet)
            .map_err(|e| UdpError::from_send(self.dest.addr, e))
    }

    /// Sends every packet as its own datagram, in order. Runs of equal-size packets (a shorter
    /// one may end a run) go out with one GSO `sendmsg` each, up to [`GSO_MAX_SEGMENTS`] and
    /// 64 KiB; packets larger than the path MTU go out one by one. Returns the number sent (all).
    pub fn send_batch(&self, packets: &[&[u8]]) -> Result<usize, BatchError> {
        self.send_all(&List(packets))
    }

    /// Sends `buf` cut into datagrams of `segment_size` bytes (the last one gets what is left).
    pub fn send_segments(&self, buf: &[u8], segment_size: usize) -> Result<usize, BatchError> {
        if segment_size == 0 {
            return Err(BatchError {
                sent: 0,
                source: UdpError::Send {
                    addr: self.dest.addr,
                    source: io::Error::new(io::ErrorKind::InvalidInput, "segment size 0"),
                },
            });
        }
        self.send_all(&Segments {
            buf,
            seg: segment_size,
        })
    }

    fn send_all<P: Packets>(&self, p: &P) -> Result<usize, BatchError> {
        let n = p.count();
        let mut i = 0;
        while i < n {
            let step = match self.path() {
                SendPath::Gso => self.gso_step(p, i),
                SendPath::Mmsg => self.mmsg_step(p, i),
                SendPath::Plain => self.plain(p.packet(i)).map(|_| i + 1),
            };
            match step {
                Ok(next) => i = next,
                Err(e) => {
                    return Err(BatchError {
                        sent: i,
                        source: UdpError::from_send(self.dest.addr, e),
                    })
                }
            }
        }
        Ok(n)
    }

    /// The end of the GSO run that starts at `i`: packets of the same size as packet `i`, and
    /// one shorter (non-empty) packet to close it, within the segment and payload limits.
    fn gso_run<P: Packets>(&self, p: &P, i: usize) -> usize {
        let n = p.count();
        let seg = p.packet(i).len();
        if seg == 0 || seg > self.max_segment {
            return i + 1;
        }
        let max = GSO_MAX_SEGMENTS.min(self.max_payload / seg);
        let mut j = i + 1;
        while j < n && j - i < max && p.packet(j).len() == seg {
            j += 1;
        }
        if j < n && j - i < max && (1..seg).contains(&p.packet(j).len()) {
            j += 1;
        }
        j
    }

    fn gso_step<P: Packets>(&self, p: &P, i: usize) -> io::Result<usize> {
        let end = self.gso_run(p, i);
        if end - i < 2 {
            return self.plain(p.packet(i)).map(|_| i + 1);
        }
        match self.send_gso(p, i, end) {
            Ok(()) => Ok(end),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL)) => {
                // The device or route cannot take segmented UDP: off for good, and this run
                // goes out another way. `gso_status` says so.
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                let _ =
                    self.gso_errno
                        .compare_exchange(0, errno, Ordering::Relaxed, Ordering::Relaxed);
                self.mmsg_step(p, i)
            }
            Err(e) => Err(e),
        }
    }

    fn send_gso<P: Packets>(&self, p: &P, i: usize, end: usize) -> io::Result<()> {
        let seg = p.packet(i).len();
        // SAFETY (zeroed): iovec and msghdr are plain C data; all-zero is valid.
        let mut iov: [libc::iovec; GSO_MAX_SEGMENTS] = unsafe { zeroed() };
        let iovlen = match p.contiguous(i, end) {
            Some(b) => {
                iov[0] = iovec(b);
                1
            }
            None => {
                for (slot, j) in iov.iter_mut().zip(i..end) {
                    *slot = iovec(p.packet(j));
                }
                end - i
            }
        };
        let mut ctrl = Ctrl([0; 32]);
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_name = self.dest_sa.as_ptr() as *mut libc::c_void;
        msg.msg_namelen = self.dest_sa.len();
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iovlen;
        msg.msg_control = ctrl.0.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is pure arithmetic.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(2) } as _;
        // SAFETY: `ctrl` is 8-aligned and holds CMSG_SPACE(2) = 24 ≤ 32 bytes, so the first
        // header and its 2 data bytes lie within it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = libc::UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(2) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg as u16);
        }
        loop {
            // SAFETY: `msg` points at live locals (`iov`, `ctrl`), the packets `iov` describes,
            // and `dest_sa`; the kernel only reads them (the *mut casts are the C types').
            let r = unsafe { libc::sendmsg(self.socket.as_raw_fd(), &msg, 0) };
            if r >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    fn mmsg_step<P: Packets>(&self, p: &P, i: usize) -> io::Result<usize> {
        let k = (p.count() - i).min(MMSG_BATCH);
        // SAFETY (zeroed): iovec and mmsghdr are plain C data; all-zero is valid.
        let mut iov: [libc::iovec; MMSG_BATCH] = unsafe { zeroed() };
        let mut hdrs: [libc::mmsghdr; MMSG_BATCH] = unsafe { zeroed() };
        for (j, (v, h)) in iov.iter_mut().zip(hdrs.iter_mut()).take(k).enumerate() {
            *v = iovec(p.packet(i + j));
            h.msg_hdr.msg_name = self.dest_sa.as_ptr() as *mut libc::c_void;
            h.msg_hdr.msg_namelen = self.dest_sa.len();
            h.msg_hdr.msg_iov = v;
            h.msg_hdr.msg_iovlen = 1;
        }
        loop {
            // SAFETY: hdrs[..k] point at live `iov` entries, the packets and `dest_sa`.
            let r =
                unsafe { libc::sendmmsg(self.socket.as_raw_fd(), hdrs.as_mut_ptr(), k as _, 0) };
            if r > 0 {
                return Ok(i + r as usize);
            }
            let e = if r == 0 {
                io::ErrorKind::WriteZero.into()
            } else {
                io::Error::last_os_error()
            };
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    fn plain(&self, packet: &[u8]) -> io::Result<usize> {
        loop {
            match self.socket.send_to(packet, &self.dest_sa) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }
}

/// The path MTU to `url` (a connected probe socket set up like the real one; IP_MTU), checking
/// the route on the way. 1500 if the kernel will not say.
fn path_mtu(url: &RtpUrl) -> Result<usize, UdpError> {
    let probe = new_udp(&url.addr)?;
    bind(&probe, local_any(url))?;
    set_send_options(&probe, url)?;
    probe
        .connect(&url.addr.into())
        .map_err(|source| UdpError::Unreachable {
            addr: url.addr,
            source,
        })?;
    let (level, name) = if url.addr.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_MTU)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    };
    Ok(getsockopt_int(&probe, level, name)
        .ok()
        .and_then(|m| usize::try_from(m).ok())
        .unwrap_or(1500))
}

/// Room for one UDP_SEGMENT control message (CMSG_SPACE(2) = 24).
#[repr(C, align(8))]
struct Ctrl([u8; 32]);

fn iovec(b: &[u8]) -> libc::iovec {
    libc::iovec {
        iov_base: b.as_ptr() as *mut libc::c_void,
        iov_len: b.len(),
    }
}

/// A batch of datagrams, however the caller holds them.
trait Packets {
    fn count(&self) -> usize;
    fn packet(&self, i: usize) -> &[u8];
    /// Packets `i..end` as one slice, if they are stored back to back.
    fn contiguous(&self, _i: usize, _end: usize) -> Option<&[u8]> {
        None
    }
}

struct List<'a, 'b>(&'a [&'b [u8]]);

impl Packets for List<'_, '_> {
    fn count(&self) -> usize {
        self.0.len()
    }
    fn packet(&self, i: usize) -> &[u8] {
        self.0[i]
    }
}

struct Segments<'a> {
    buf: &'a [u8],
    seg: usize,
}

impl Packets for Segments<'_> {
    fn count(&self) -> usize {
        self.buf.len().div_ceil(self.seg)
    }
    fn packet(&self, i: usize) -> &[u8] {
        self.contiguous(i, i + 1).unwrap_or_default()
    }
    fn contiguous(&self, i: usize, end: usize) -> Option<&[u8]> {
        let len = self.buf.len();
        self.buf
            .get((i * self.seg).min(len)..(end * self.seg).min(len))
    }
}
