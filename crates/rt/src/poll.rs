//! Waiting for descriptors to become readable: the one `poll(2)` of the drivers (the sender's
//! RTCP sockets, the receiver's RTP and RTCP sockets, a V4L2 camera).

use std::os::fd::RawFd;
use std::time::Duration;

/// Descriptors one call waits for at most (no allocation).
pub const MAX_FDS: usize = 16;

/// What [`wait_readable`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Polled {
    /// Descriptors that are readable (or in error: a read will say so).
    pub ready: usize,
    /// Some descriptor reported an error or a hang-up.
    pub error: bool,
}

/// Waits until one of `fds` (the first [`MAX_FDS`]) is readable, or `timeout` (rounded up to
/// the millisecond). A signal ends the wait early with nothing ready.
pub fn wait_readable(fds: &[RawFd], timeout: Duration) -> std::io::Result<Polled> {
    let mut set = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; MAX_FDS];
    let n = fds.len().min(MAX_FDS);
    for (p, &fd) in set.iter_mut().zip(&fds[..n]) {
        p.fd = fd;
    }
    poll_set(&mut set[..n], timeout)
}

/// [`wait_readable`] for any number of descriptors, in `set` (kept by the caller from one
/// wait to the next, so that it allocates only when it grows).
pub fn wait_readable_in(
    fds: impl IntoIterator<Item = RawFd>,
    set: &mut Vec<libc::pollfd>,
    timeout: Duration,
) -> std::io::Result<Polled> {
    set.clear();
    set.extend(fds.into_iter().map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }));
    poll_set(set, timeout)
}

fn poll_set(set: &mut [libc::pollfd], timeout: Duration) -> std::io::Result<Polled> {
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
    // SAFETY: `set` is a valid slice of pollfd structs for the duration of the call.
    let r = unsafe { libc::poll(set.as_mut_ptr(), set.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(Polled::default());
        }
        return Err(e);
    }
    let bad = libc::POLLERR | libc::POLLHUP | libc::POLLNVAL;
    Ok(Polled {
        ready: set.iter().filter(|p| p.revents != 0).count(),
        error: set.iter().any(|p| p.revents & bad != 0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn readable_sockets_are_found_and_an_empty_one_times_out() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let fds = [a.as_raw_fd(), b.as_raw_fd()];
        let p = wait_readable(&fds, Duration::from_millis(5)).unwrap();
        assert_eq!(p, Polled::default());
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        let p = wait_readable(&fds, Duration::from_secs(5)).unwrap();
        assert_eq!((p.ready, p.error), (1, false));
        // Any number of them, in a set the caller keeps.
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut set = Vec::new();
        let more = [a.as_raw_fd(), c.as_raw_fd()];
        let p = wait_readable_in(more, &mut set, Duration::from_millis(5)).unwrap();
        assert_eq!(p, Polled::default());
        let all = [a.as_raw_fd(), b.as_raw_fd(), c.as_raw_fd()];
        let p = wait_readable_in(all, &mut set, Duration::from_secs(5)).unwrap();
        assert_eq!((p.ready, p.error, set.len()), (1, false, 3));
    }
}
