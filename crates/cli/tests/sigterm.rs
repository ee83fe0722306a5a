//! `metronome serve` and `metronome recv` stop on SIGTERM (what `timeout`, systemd and
//! `docker stop` send) as they do on Ctrl-C: they end their run, print their summary (recv its
//! JSON) and exit 0. Loopback only; every child is bounded and killed if the test fails.

mod common;

use common::{bin, port_pair, Outcome, Running};
use serde_json::Value;
use std::time::Duration;

/// How long a program may take to stop after SIGTERM (it takes a fraction of a second).
const STOP_LIMIT: Duration = Duration::from_secs(10);

/// Sends SIGTERM to `running`, then waits up to [`STOP_LIMIT`] for it to exit and asserts that
/// it did so by itself, with status 0.
fn terminate(mut running: Running) -> Outcome {
    if running.has_exited() {
        panic!(
            "it ended before SIGTERM: {}",
            running.finish_within(Duration::ZERO).report()
        );
    }
    running.signal(libc::SIGTERM);
    let out = running.finish_within(STOP_LIMIT);
    assert!(
        out.succeeded(),
        "SIGTERM did not end it cleanly: {}",
        out.report()
    );
    out
}

#[test]
fn serve_and_recv_stop_cleanly_on_sigterm() {
    let port = port_pair();
    let url = format!("rtp://127.0.0.1:{port}");
    // No --duration: only a signal ends either of them (the test's deadline kills them).
    let mut recv = Running::spawn(bin().args(["recv", &url, "--json"]));
    recv.wait_for("listening on", Duration::from_secs(20));
    let serve = Running::spawn(bin().args(["serve", &url]));
    std::thread::sleep(Duration::from_secs(2));

    // The sender first, so that the receiver has the whole stream when it stops.
    let sent = terminate(serve);
    // Its human summary, as on Ctrl-C: "  sent N packets, … ended by stopped".
    let line = sent
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("sent "))
        .unwrap_or_else(|| panic!("no 'sent' line in the summary: {}", sent.report()));
    assert!(line.ends_with("ended by stopped"), "{}", sent.report());
    let packets: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(packets > 0, "{}", sent.report());
    assert!(sent.stdout.starts_with("sender: "), "{}", sent.report());

    let got = terminate(recv);
    let v: Value = serde_json::from_str(&got.stdout)
        .unwrap_or_else(|e| panic!("recv's stdout is not JSON ({e}): {}", got.report()));
    assert_eq!(v["ended_by"].as_str(), Some("stopped"), "{v}");
    let received = v["sources"][0]["received"].as_u64().unwrap_or(0);
    assert!(received > 0, "recv received nothing: {v}");
    assert!(
        v["counters"]["rtp_packets"].as_u64().unwrap_or(0) > 0,
        "{v}"
    );
}

/// `serve -i PIPE` with no writer on the named pipe: SIGTERM ends the wait within 2 s (it
/// once blocked in open(2) and ignored it), with a line that says nothing was sent.
#[test]
fn serve_waiting_for_a_named_pipes_writer_stops_on_sigterm() {
    let dir = common::tmp_dir("sigterm-fifo");
    let pipe = dir.join("in.ts");
    let c = std::ffi::CString::new(pipe.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut server = Running::spawn(bin().args([
        "serve",
        "-i",
        pipe.to_str().unwrap(),
        &format!("rtp://127.0.0.1:{}", port_pair()),
        "--duration",
        "60",
    ]));
    server.wait_for("waiting for a writer", Duration::from_secs(20));
    let asked = common::now();
    server.signal(libc::SIGTERM);
    let out = server.finish_within(STOP_LIMIT);
    assert!(
        common::now() - asked < Duration::from_secs(2),
        "{}",
        out.report()
    );
    assert!(
        out.status.is_some_and(|s| s.code() == Some(1)),
        "{}",
        out.report()
    );
    assert!(out.stderr.contains("nothing was sent"), "{}", out.report());
}

/// Raw video from a file at one frame a minute: a frame's packets are paced over its minute,
/// yet `--duration` ends the run at its end (it once ran 56 s for 3 s) and SIGTERM within 2 s.
#[test]
fn raw_video_at_one_frame_a_minute_stops_at_its_duration_and_on_sigterm() {
    common::require("ffmpeg", "ffmpeg");
    let dir = common::tmp_dir("sigterm-slow-raw");
    let clip = dir.join("slow.y4m");
    let made = std::process::Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg("testsrc=size=160x120:rate=1/60")
        .args(["-frames:v", "2", "-pix_fmt", "yuv422p"])
        .arg(&clip)
        .status()
        .unwrap();
    assert!(made.success());
    let dest = format!("rtp://127.0.0.1:{}", port_pair());
    let raw = |extra: &[&str]| {
        let mut c = bin();
        c.args(["serve", "--raw", "-i", clip.to_str().unwrap(), &dest])
            .args(extra);
        c
    };
    let started = common::now();
    let out = common::run(&mut raw(&["--duration", "2s"]), Duration::from_secs(30));
    let took = common::now() - started;
    assert!(out.succeeded(), "{}", out.report());
    assert!(
        took < Duration::from_secs(6),
        "{took:?} for --duration 2s: {}",
        out.report()
    );

    let server = Running::spawn(&mut raw(&[]));
    std::thread::sleep(Duration::from_secs(2));
    let asked = common::now();
    server.signal(libc::SIGTERM);
    let out = server.finish_within(STOP_LIMIT);
    assert!(out.succeeded(), "{}", out.report());
    let took = common::now() - asked;
    assert!(
        took < Duration::from_secs(2),
        "{took:?} after SIGTERM: {}",
        out.report()
    );
}
