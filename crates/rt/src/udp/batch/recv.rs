//! [`BatchReceiver`]: `recvmmsg` with UDP GRO, kernel receive timestamps and the drop counter.

use super::{setsockopt_int, sockaddr_to_std};
use crate::udp::socket::{bind, bind_multicast, local_addr, new_udp, set_recv_options};
use crate::udp::tuning::{report, BufferReport};
use crate::udp::{SocketOptions, UdpError};
use crate::url::RtpUrl;
use socket2::Socket;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Most messages one [`BatchReceiver::recv_batch`] call takes (the size of its stack arrays).
pub const RECV_BATCH_MAX: usize = 64;
/// The largest buffer the kernel hands over with GRO (64 KiB of coalesced datagrams).
const GRO_BUFFER: usize = 65_536;

/// High-rate media in: one bound socket, batches of datagrams per system call.
#[derive(Debug)]
pub struct BatchReceiver {
    socket: Socket,
    gro: AtomicBool,
    rxq_ovfl: bool,
    buffer: BufferReport,
    /// Highest SO_RXQ_OVFL count seen.
    dropped: AtomicU32,
}

impl BatchReceiver {
    /// Binds `source.addr` like [`crate::udp::UdpReceiver::open`] (joining multicast groups),
    /// with SO_TIMESTAMPNS, SO_RXQ_OVFL, a receive buffer of `o.buffer_bytes` (see
    /// [`BatchReceiver::buffer_report`]), `o.read_timeout`, and UDP GRO if the kernel has it.
    pub fn open(source: &RtpUrl, o: &SocketOptions) -> Result<BatchReceiver, UdpError> {
        let socket = new_udp(&source.addr)?;
        if source.is_multicast() {
            bind_multicast(&socket, source, source.addr)?;
        } else {
            bind(&socket, source.addr)?;
        }
        let (rxq_ovfl, granted) = set_recv_options(&socket, source.addr, o)?;
        let gro = setsockopt_int(&socket, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok();
        Ok(BatchReceiver {
            socket,
            gro: AtomicBool::new(gro),
            rxq_ovfl,
            buffer: report(o.buffer_bytes, granted, true),
            dropped: AtomicU32::new(0),
        })
    }

    /// Receives up to `bufs.slots()` messages with one `recvmmsg`: waits (up to the read timeout)
    /// for the first, then takes whatever else is queued. A timeout shows as an error with
    /// [`is_timeout`](crate::udp::is_timeout). With GRO a message may hold many datagrams; the
    /// returned iterator yields each datagram on its own.
    pub fn recv_batch<'b>(&self, bufs: &'b mut RecvBufs) -> io::Result<Datagrams<'b>> {
        bufs.filled = 0;
        let k = bufs.slots();
        // SAFETY (zeroed): iovec and mmsghdr are plain C data; all-zero is valid.
        let mut iov: [libc::iovec; RECV_BATCH_MAX] = unsafe { zeroed() };
        let mut hdrs: [libc::mmsghdr; RECV_BATCH_MAX] = unsafe { zeroed() };
        let slot_len = bufs.slot_len;
        let data = bufs.data.chunks_exact_mut(slot_len);
        let slots = iov
            .iter_mut()
            .zip(hdrs.iter_mut())
            .zip(data)
            .zip(bufs.names.iter_mut().zip(bufs.ctrl.iter_mut()));
        for (((v, h), d), (name, ctrl)) in slots.take(k) {
            v.iov_base = d.as_mut_ptr().cast();
            v.iov_len = d.len();
            let m = &mut h.msg_hdr;
            m.msg_name = (name as *mut libc::sockaddr_storage).cast();
            m.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            m.msg_iov = v;
            m.msg_iovlen = 1;
            m.msg_control = ctrl.0.as_mut_ptr().cast();
            m.msg_controllen = ctrl.0.len() as _;
        }
        let n = loop {
            // SAFETY: hdrs[..k] point at live `iov` entries, and through them and their name and
            // control fields at `bufs`' slots, each with its length.
            let r = unsafe {
                libc::recvmmsg(
                    self.socket.as_raw_fd(),
                    hdrs.as_mut_ptr(),
                    k as libc::c_uint,
                    libc::MSG_WAITFORONE,
                    std::ptr::null_mut(),
                )
            };
            if r >= 0 {
                break r as usize;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        let mut dropped = self.rxq_ovfl.then_some(0u32);
        for (h, (meta, name)) in hdrs
            .iter()
            .zip(bufs.metas.iter_mut().zip(bufs.names.iter()))
            .take(n)
        {
            *meta = parse(h, name, slot_len, &mut dropped);
        }
        if let Some(d) = dropped {
            self.dropped.fetch_max(d, Ordering::Relaxed);
        }
        bufs.filled = n;
        Ok(Datagrams {
            bufs,
            msg: 0,
            seg: 0,
            dropped_total: self.dropped_total(),
        })
    }

    /// Datagrams the socket dropped for lack of buffer since it was opened, as of the last batch
    /// (SO_RXQ_OVFL; with GRO one drop may be a message of many datagrams). `None` if the option
    /// could not be enabled.
    pub fn dropped_total(&self) -> Option<u32> {
        self.rxq_ovfl.then(|| self.dropped.load(Ordering::Relaxed))
    }

    /// Whether the kernel may coalesce datagrams (UDP GRO).
    pub fn gro(&self) -> bool {
        self.gro.load(Ordering::Relaxed)
    }

    /// Turns GRO on or off; returns whether it is on.
    pub fn set_gro(&self, on: bool) -> bool {
        if setsockopt_int(
            &self.socket,
            libc::SOL_UDP,
            libc::UDP_GRO,
            on as libc::c_int,
        )
        .is_ok()
        {
            self.gro.store(on, Ordering::Relaxed);
        }
        self.gro()
    }

    /// What the receive buffer request got, with the sysctl to run when the kernel capped it.
    pub fn buffer_report(&self) -> &BufferReport {
        &self.buffer
    }

    /// The address the socket is bound to: the actual port when it was opened with port 0.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        local_addr(&self.socket)
    }

    /// The underlying socket, for options not wrapped here.
    pub fn socket(&self) -> &Socket {
        &self.socket
    }
}

/// One message's result, read from its header and control messages.
fn parse(
    h: &libc::mmsghdr,
    name: &libc::sockaddr_storage,
    slot_len: usize,
    dropped: &mut Option<u32>,
) -> MsgMeta {
    let len = (h.msg_len as usize).min(slot_len);
    let mut m = MsgMeta {
        len,
        stride: len,
        src: sockaddr_to_std(name).unwrap_or(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))),
        kernel_rx_realtime_ns: None,
        truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
    };
    // SAFETY: recvmmsg succeeded and filled this message, whose control buffer is still live.
    let control = unsafe { super::super::cmsg::parse(&h.msg_hdr) };
    m.kernel_rx_realtime_ns = control.kernel_rx_realtime_ns;
    if let Some(d) = control.dropped_total {
        *dropped = Some(dropped.unwrap_or(0).max(d));
    }
    if let Some(s) = control.gro_segment {
        m.stride = s;
    }
    m
}

#[derive(Clone, Copy, Debug)]
struct MsgMeta {
    len: usize,
    /// Size of each datagram in the message (GRO's segment size; `len` without GRO).
    stride: usize,
    src: SocketAddr,
    kernel_rx_realtime_ns: Option<u64>,
    truncated: bool,
}

/// Room for SCM_TIMESTAMPNS (32), SO_RXQ_OVFL (24) and UDP_GRO (24) control messages, and spare.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct Ctrl([u8; 128]);

/// Pre-allocated room for one batch: `slots` buffers of `slot_len` bytes, with their addresses
/// and control-message space. Allocated once; reused by every [`BatchReceiver::recv_batch`].
pub struct RecvBufs {
    data: Box<[u8]>,
    slot_len: usize,
    names: Box<[libc::sockaddr_storage]>,
    ctrl: Box<[Ctrl]>,
    metas: Box<[MsgMeta]>,
    filled: usize,
}

impl std::fmt::Debug for RecvBufs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBufs")
            .field("slots", &self.slots())
            .field("slot_len", &self.slot_len)
            .field("filled", &self.filled)
            .finish()
    }
}

impl Default for RecvBufs {
    /// 64 slots of 64 KiB: room for a full GRO message in every slot.
    fn default() -> Self {
        RecvBufs::new(RECV_BATCH_MAX, GRO_BUFFER)
    }
}

impl RecvBufs {
    /// `slots` (1 to [`RECV_BATCH_MAX`]) buffers of `slot_len` bytes. With GRO on, a message can
    /// hold up to 64 KiB of coalesced datagrams: smaller slots cut it (reported as `truncated`).
    pub fn new(slots: usize, slot_len: usize) -> RecvBufs {
        let slots = slots.clamp(1, RECV_BATCH_MAX);
        let slot_len = slot_len.max(1);
        let empty = MsgMeta {
            len: 0,
            stride: 0,
            src: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            kernel_rx_realtime_ns: None,
            truncated: false,
        };
        RecvBufs {
            data: vec![0; slots * slot_len].into_boxed_slice(),
            slot_len,
            // SAFETY (zeroed): sockaddr_storage is plain C data; all-zero is valid.
            names: vec![unsafe { zeroed::<libc::sockaddr_storage>() }; slots].into_boxed_slice(),
            ctrl: vec![Ctrl([0; 128]); slots].into_boxed_slice(),
            metas: vec![empty; slots].into_boxed_slice(),
            filled: 0,
        }
    }

    /// Messages one batch can take.
    pub fn slots(&self) -> usize {
        self.metas.len()
    }

    /// Bytes of each slot: the longest message (with GRO, the most coalesced bytes) one slot
    /// takes before it is cut.
    pub fn slot_len(&self) -> usize {
        self.slot_len
    }
}

/// One received datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram<'b> {
    /// The datagram's UDP payload, borrowed from the batch's [`RecvBufs`].
    pub data: &'b [u8],
    /// The sender's address and port (`0.0.0.0:0` if the kernel gave one of an unknown
    /// family); datagrams coalesced by GRO share their message's.
    pub src: SocketAddr,
    /// Kernel receive time (SCM_TIMESTAMPNS, CLOCK_REALTIME ns); datagrams coalesced by GRO
    /// share their message's. See [`crate::clock::Clock::timestamp_from_realtime_ns`].
    pub kernel_rx_realtime_ns: Option<u64>,
    /// The message this datagram came in was longer than its slot and was cut.
    pub truncated: bool,
}

/// The datagrams of one batch, in arrival order, GRO messages cut back into datagrams.
#[derive(Debug)]
pub struct Datagrams<'b> {
    bufs: &'b RecvBufs,
    msg: usize,
    /// Next datagram within message `msg`.
    seg: usize,
    dropped_total: Option<u32>,
}

impl<'b> Datagrams<'b> {
    /// Messages (system-level receives) in the batch; datagrams may be more with GRO.
    pub fn messages(&self) -> usize {
        self.bufs.filled
    }

    /// The socket's drop counter after this batch (see [`BatchReceiver::dropped_total`]).
    pub fn dropped_total(&self) -> Option<u32> {
        self.dropped_total
    }
}

impl<'b> Iterator for Datagrams<'b> {
    type Item = Datagram<'b>;

    fn next(&mut self) -> Option<Datagram<'b>> {
        let b = self.bufs;
        while self.msg < b.filled {
            let m = &b.metas[self.msg];
            let start = self.seg * m.stride;
            // An empty datagram is still one datagram.
            let has_one = start < m.len || (m.len == 0 && self.seg == 0);
            if !has_one {
                self.msg += 1;
                self.seg = 0;
                continue;
            }
            self.seg += 1;
            let end = (start + m.stride).min(m.len);
            let slot = &b.data[self.msg * b.slot_len..][..m.len];
            return Some(Datagram {
                data: &slot[start..end],
                src: m.src,
                kernel_rx_realtime_ns: m.kernel_rx_realtime_ns,
                truncated: m.truncated,
            });
        }
        None
    }
}
