//! Socket buffers sized for the user: ask for what the stream needs, see what the kernel granted,
//! and when it capped the request, say which sysctl did it and the exact command that lifts it.
//!
//! The request itself is [`super::socket::set_buffer`] (SO_RCVBUFFORCE / SO_SNDBUFFORCE first,
//! which root or CAP_NET_ADMIN may use past the limit, then SO_RCVBUF / SO_SNDBUF, which the kernel
//! clamps at `net.core.rmem_max` / `net.core.wmem_max`). This module reads the result back and
//! judges it; [`classify`] is the pure part, testable without touching any sysctl.

use super::socket::set_buffer;
use socket2::SockRef;
use std::fmt;
use std::os::fd::AsFd;
use std::time::Duration;

/// The largest buffer the kernel can grant: it stores twice the request in an `int`.
pub const MAX_SOCKET_BUFFER: usize = i32::MAX as usize / 2;

/// What a socket buffer request got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferReport {
    /// `true` for the receive buffer (SO_RCVBUF), `false` for the send buffer (SO_SNDBUF).
    pub recv: bool,
    /// Bytes asked for.
    pub wanted: usize,
    /// What the kernel reports back (getsockopt): twice the request it accepted, the second half
    /// being its allowance for per-packet bookkeeping (`man 7 socket`).
    pub granted: usize,
    /// The sysctl that capped the request below `wanted`, if one did.
    pub capped_by: Option<&'static str>,
    /// When capped: what happened and the exact command that lifts the cap.
    pub advice: Option<String>,
}

impl BufferReport {
    /// The request the kernel accepted (half of [`BufferReport::granted`]).
    pub fn accepted(&self) -> usize {
        self.granted / 2
    }

    /// True when the kernel accepted less than was wanted.
    pub fn is_capped(&self) -> bool {
        self.accepted() < self.wanted
    }
}

impl fmt::Display for BufferReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} bytes wanted, {} accepted ({} reported by the kernel)",
            option_name(self.recv),
            self.wanted,
            self.accepted(),
            self.granted
        )?;
        if let Some(a) = &self.advice {
            write!(f, "; {a}")?;
        }
        Ok(())
    }
}

fn option_name(recv: bool) -> &'static str {
    if recv {
        "SO_RCVBUF"
    } else {
        "SO_SNDBUF"
    }
}

/// The sysctl that caps SO_RCVBUF (`recv`) or SO_SNDBUF for processes without CAP_NET_ADMIN.
pub fn limit_sysctl(recv: bool) -> &'static str {
    if recv {
        "net.core.rmem_max"
    } else {
        "net.core.wmem_max"
    }
}

/// The current value of [`limit_sysctl`], read from /proc/sys; `None` if it cannot be read.
pub fn read_limit(recv: bool) -> Option<usize> {
    let path = if recv {
        "/proc/sys/net/core/rmem_max"
    } else {
        "/proc/sys/net/core/wmem_max"
    };
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Asks for a `wanted`-byte receive (`recv`) or send buffer on `socket`, forced if permitted,
/// and reports what was granted, with advice when the kernel capped it.
///
/// Works on any socket: `socket2::Socket`, `std::net::UdpSocket`, ...
pub fn tune_buffers(socket: &impl AsFd, wanted: usize, recv: bool) -> BufferReport {
    let s = SockRef::from(socket);
    let granted = set_buffer(&s, wanted, recv);
    report(wanted, granted, recv)
}

/// Judges a buffer that was already set (`granted` as getsockopt reports it), reading the limit
/// from /proc.
pub(crate) fn report(wanted: usize, granted: usize, recv: bool) -> BufferReport {
    let limit = if granted / 2 < wanted {
        read_limit(recv)
    } else {
        None
    };
    classify(wanted, granted, recv, limit)
}

/// The pure part of [`tune_buffers`]: given what was wanted, what the kernel reported
/// (`granted`, doubled) and the current limit sysctl value (`limit`, if known), says whether and
/// by what the request was capped, and what to run.
pub fn classify(wanted: usize, granted: usize, recv: bool, limit: Option<usize>) -> BufferReport {
    let mut r = BufferReport {
        recv,
        wanted,
        granted,
        capped_by: None,
        advice: None,
    };
    if !r.is_capped() {
        return r;
    }
    let opt = option_name(recv);
    if wanted > MAX_SOCKET_BUFFER {
        r.advice = Some(format!(
            "the kernel accepted {} bytes for {opt}, and no socket buffer can be larger than \
             {MAX_SOCKET_BUFFER} bytes: lower the rate or the latency this stream needs",
            r.accepted()
        ));
        return r;
    }
    let sysctl = limit_sysctl(recv);
    r.capped_by = Some(sysctl);
    let now = match limit {
        Some(l) => format!(" ({sysctl} = {l})"),
        None => String::new(),
    };
    r.advice = Some(format!(
        "the kernel capped {opt} at {} bytes{now} but this stream needs {wanted}: run as root \
         (which uses {opt}FORCE), or raise the limit with `{}`",
        r.accepted(),
        sysctl_command(sysctl, wanted)
    ));
    r
}

/// The command that sets `sysctl` to `value`, e.g. `sysctl -w net.core.rmem_max=33554432`.
pub fn sysctl_command(sysctl: &str, value: usize) -> String {
    format!("sysctl -w {sysctl}={value}")
}

/// A buffer size for a stream: enough for one burst of `burst_bytes` (a frame sent at line rate)
/// and for twice the bytes that arrive during `latency` at `bitrate_bps`, whichever is larger;
/// rounded up to a whole MiB and at most [`MAX_SOCKET_BUFFER`].
///
/// The kernel counts a packet's whole allocation against the buffer, not only its payload; the
/// doubling it applies to every request is what covers that, so these are payload bytes.
pub fn wanted_for(bitrate_bps: u64, burst_bytes: usize, latency: Duration) -> usize {
    const MIB: u128 = 1 << 20;
    let in_flight = (bitrate_bps as u128 * latency.as_nanos()).div_ceil(8 * 1_000_000_000);
    let bytes = (2 * in_flight).max(burst_bytes as u128).max(1);
    let rounded = bytes.div_ceil(MIB) * MIB;
    rounded.min(MAX_SOCKET_BUFFER as u128) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wanted_for_takes_the_larger_need_in_whole_mib() {
        // 2.5 Gbit/s for 10 ms: 3.125 MB in flight, doubled 6.25 MB, rounded up to 6 MiB.
        let w = wanted_for(2_500_000_000, 5_184_000, Duration::from_millis(10));
        assert_eq!(w, 6 << 20);
        // A 1080p 4:2:2 10-bit frame burst dominates at short latency.
        let w = wanted_for(2_500_000_000, 5_184_000, Duration::from_millis(1));
        assert_eq!(w, 5 << 20);
        assert_eq!(wanted_for(0, 0, Duration::ZERO), 1 << 20);
        assert_eq!(
            wanted_for(u64::MAX, 0, Duration::from_secs(10)),
            MAX_SOCKET_BUFFER
        );
    }

    #[test]
    fn capped_request_names_the_sysctl_and_the_command() {
        let r = classify(32 << 20, 2 * (4 << 20), true, Some(4 << 20));
        assert!(r.is_capped());
        assert_eq!(r.capped_by, Some("net.core.rmem_max"));
        let a = r.advice.as_deref().unwrap();
        assert!(a.contains("sysctl -w net.core.rmem_max=33554432"), "{a}");
        assert!(a.contains("(net.core.rmem_max = 4194304)"), "{a}");
        assert!(a.contains("4194304 bytes"), "{a}");
        let s = classify(512 << 20, 2 * 212992, false, None);
        assert_eq!(s.capped_by, Some("net.core.wmem_max"));
        assert!(s
            .advice
            .unwrap()
            .contains("sysctl -w net.core.wmem_max=536870912"));
    }

    #[test]
    fn granted_request_has_no_advice() {
        let r = classify(8 << 20, 16 << 20, true, Some(4 << 20));
        assert!(!r.is_capped());
        assert_eq!(r.capped_by, None);
        assert_eq!(r.advice, None);
        assert_eq!(r.accepted(), 8 << 20);
    }

    #[test]
    fn beyond_the_kernel_maximum_no_sysctl_helps() {
        let r = classify(usize::MAX, MAX_SOCKET_BUFFER * 2, true, Some(4 << 20));
        assert_eq!(r.capped_by, None);
        assert!(r.advice.unwrap().contains("no socket buffer can be larger"));
    }
}
