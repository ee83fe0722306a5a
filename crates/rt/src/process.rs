//! Programs Metronome starts (iperf3, FFmpeg, GStreamer, `ip`, commands of a lab scenario)
//! begin as a shell starts a foreground job: every signal at its default disposition and none
//! blocked, whatever this process inherited.
//!
//! Without this, a child inherits what its parent ignores and blocks: a test suite or a lab
//! started as a background job (`nohup … &`, as batch systems and some CI runners start jobs)
//! has SIGINT ignored, and so would every program it starts. Such a program ignores the SIGINT
//! it is stopped with (and loses its last report when killed two seconds later). `exec` resets
//! only the signals the parent *caught*; ignored ones stay ignored, and the mask is kept.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The highest signal number on Linux (`_NSIG − 1`, the last real-time signal).
const LAST_SIGNAL: libc::c_int = 64;

/// Makes `cmd` start its program with every signal at its default disposition and an empty
/// signal mask.
pub fn with_default_signals(cmd: &mut Command) -> &mut Command {
    // SAFETY: `reset_signals` runs in the child between fork and exec and makes only
    // async-signal-safe calls (rt_sigaction, sigemptyset, sigprocmask) on its own stack data;
    // it allocates nothing and takes no lock.
    unsafe { cmd.pre_exec(reset_signals) }
}

/// The kernel's `struct sigaction` for `rt_sigaction(2)` on x86-64 and aarch64 (glibc's
/// wrapper refuses the signals it keeps for itself, 32 and 33, which a parent may still have
/// left ignored).
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

fn reset_signals() -> io::Result<()> {
    let dfl = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    for sig in 1..=LAST_SIGNAL {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: rt_sigaction with a valid signal number, a pointer to a live, properly laid
        // out struct, no old action, and the kernel's sigset size (8 bytes).
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                &dfl as *const KernelSigaction,
                std::ptr::null_mut::<KernelSigaction>(),
                8usize,
            )
        };
    }
    // SAFETY: a zeroed `sigset_t` is a valid value, emptied again by sigemptyset; the old set
    // is not asked for.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
