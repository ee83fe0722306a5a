//! Programs started through `process::with_default_signals` begin with default signal
//! dispositions and an empty mask even when this process ignores and blocks signals, as a
//! test suite run as a background job (`nohup … &`) does: its shell ignores SIGINT.

use metronome_rt::process::with_default_signals;
use std::process::{Child, Command};
use std::time::Duration;

/// The `SigIgn` and `SigBlk` masks of process `pid`, from /proc.
fn ignored_and_blocked(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let mask = |key: &str| {
        let line = status.lines().find(|l| l.starts_with(key)).unwrap();
        u64::from_str_radix(line[key.len()..].trim(), 16).unwrap()
    };
    (mask("SigIgn:"), mask("SigBlk:"))
}

/// Sends SIGINT and waits about 2 s (200 naps of 10 ms): the signal that ended the child, if it ended.
fn interrupt(child: &mut Child) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    // SAFETY: kill(2) on a child not yet waited for.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    for _ in 0..200 {
        if let Some(status) = child.try_wait().unwrap() {
            return status.signal();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn children_start_with_default_signals_whatever_the_parent_inherited() {
    let bit = |sig: i32| 1u64 << (sig - 1);
    // SAFETY: setting a disposition and this thread's mask with valid arguments.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }

    // What a plain child gets: SIGINT ignored, SIGTERM blocked. Interrupting it does nothing.
    let mut plain = Command::new("sleep").arg("30").spawn().unwrap();
    let (ign, blk) = ignored_and_blocked(plain.id());
    assert_ne!(ign & bit(libc::SIGINT), 0, "SigIgn {ign:x}");
    assert_ne!(blk & bit(libc::SIGTERM), 0, "SigBlk {blk:x}");
    assert_eq!(
        interrupt(&mut plain),
        None,
        "an inherited SIG_IGN outlives SIGINT"
    );

    let mut cmd = Command::new("sleep");
    cmd.arg("30");
    let mut child = with_default_signals(&mut cmd).spawn().unwrap();
    assert_eq!(ignored_and_blocked(child.id()), (0, 0));
    assert_eq!(interrupt(&mut child), Some(libc::SIGINT));
}
