//! An idle server idles: with no stream and no client, `serve --rtsp` (and with it the pacing
//! core, which used to spin a whole CPU at SCHED_FIFO or nice −20) leaves the CPUs alone, in
//! every wait mode. Measured from the kernel's account of the process's CPU time.

mod common;

use common::RtspServer;
use std::time::Duration;

/// CPU time (user + system) the process has used, in seconds.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // "PID (COMM) STATE ..." — utime and stime are fields 14 and 15, 12 and 13 after COMM.
    let rest = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks as f64 / hz
}

#[test]
fn an_rtsp_server_with_no_client_uses_almost_no_cpu_in_any_wait_mode() {
    for wait in ["auto", "sleep-spin", "busy-poll"] {
        let server = RtspServer::start(&["--wait", wait]);
        let pid = server.child.id();
        // Past start-up (the send-cost calibration, the pacing core's set-up).
        std::thread::sleep(Duration::from_millis(500));
        let before = cpu_s(pid);
        std::thread::sleep(Duration::from_secs(2));
        let used = cpu_s(pid) - before;
        server.stop();
        // A spinning pacer would use 2 s; a few periodic wake-ups use a few hundredths.
        assert!(used < 0.2, "--wait {wait}: {used:.2} s of CPU in 2 s idle");
    }
}
