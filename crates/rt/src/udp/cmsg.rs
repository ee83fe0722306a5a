//! The control messages a UDP receive returns, parsed in one place for both receive paths
//! (`recvmsg` in [`super::recv`], `recvmmsg` with GRO in `batch::recv`).

use std::mem::size_of;

/// What the kernel said about a received message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Control {
    /// SCM_TIMESTAMPNS: the kernel's receive time, CLOCK_REALTIME ns.
    pub kernel_rx_realtime_ns: Option<u64>,
    /// SO_RXQ_OVFL: datagrams the socket has dropped so far for lack of buffer.
    pub dropped_total: Option<u32>,
    /// UDP_GRO: the size of each datagram coalesced into the message.
    pub gro_segment: Option<usize>,
}

/// Parses the control messages of `msg`.
///
/// # Safety
/// `msg` must be a message header that a successful `recvmsg`/`recvmmsg` filled in: its
/// `msg_control` points to a live buffer holding `msg_controllen` bytes of control messages
/// written by the kernel.
pub(crate) unsafe fn parse(msg: &libc::msghdr) -> Control {
    let mut out = Control::default();
    // SAFETY: as the caller promises, the kernel wrote well-formed cmsgs within
    // `msg_controllen`; the CMSG_* macros stay within it, and each payload is read unaligned
    // after its length is checked.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            let h = &*c;
            let data = libc::CMSG_DATA(c);
            let data_len = (h.cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
            match (h.cmsg_level, h.cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS)
                    if data_len >= size_of::<libc::timespec>() =>
                {
                    let ts = std::ptr::read_unaligned(data.cast::<libc::timespec>());
                    out.kernel_rx_realtime_ns =
                        Some((ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64);
                }
                (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) if data_len >= 4 => {
                    out.dropped_total = Some(std::ptr::read_unaligned(data.cast::<u32>()));
                }
                (libc::SOL_UDP, libc::UDP_GRO) if data_len >= 4 => {
                    let s = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                    out.gro_segment = usize::try_from(s).ok().filter(|&s| s > 0);
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    out
}
