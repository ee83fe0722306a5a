//! The high-rate UDP path (uncompressed video, Gbit/s): whole batches per system call.
//!
//! - [`BatchSender`]: one destination. [`BatchSender::send_batch`] (separate packets) and
//!   [`BatchSender::send_segments`] (one buffer cut into equal segments, the last possibly shorter)
//!   hand the kernel up to 64 datagrams per `sendmsg` with UDP GSO (a UDP_SEGMENT control message):
//!   the kernel, or the NIC, cuts them into separate datagrams. Without GSO they go out with
//!   `sendmmsg`, or one `sendto` each ([`SendPath`]). Datagrams larger than the path MTU are sent
//!   one by one and fragmented by the kernel.
//! - [`BatchReceiver`]: `recvmmsg` into pre-allocated [`RecvBufs`] with UDP GRO on: the kernel may
//!   hand over many same-size datagrams in one buffer with their size (UDP_GRO control message);
//!   [`Datagrams`] cuts them apart again. Kernel receive timestamps (SO_TIMESTAMPNS) and the drop
//!   counter (SO_RXQ_OVFL) come with every batch.
//!
//! Written on `libc` rather than quinn-udp 0.6: that crate sets IP_PMTUDISC_PROBE (DF) on every
//! socket it manages, which forbids the large fragmented datagrams this path must also carry; it
//! drops the SO_RXQ_OVFL counter; and it has no `sendmmsg` fallback. The control-message plumbing
//! is the same as in [`super::UdpReceiver`]. Nothing here allocates per batch: message headers and
//! control buffers are on the stack or in [`RecvBufs`].

mod recv;
mod send;

pub use recv::{BatchReceiver, Datagram, Datagrams, RecvBufs, RECV_BATCH_MAX};
pub use send::{BatchError, BatchSender, GsoStatus, SendPath, GSO_MAX_SEGMENTS};

pub(super) use super::recv::sockaddr_to_std;
pub(super) use super::socket::setsockopt_int;
use std::io;
use std::mem::size_of;

use std::os::fd::AsRawFd;

fn getsockopt_int(s: &impl AsRawFd, level: libc::c_int, name: libc::c_int) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are live, writable locals; `len` holds the size of `v`.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EIO => "EIO",
        libc::EINVAL => "EINVAL",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENOPROTOOPT => "ENOPROTOOPT",
        _ => "an error",
    }
}
