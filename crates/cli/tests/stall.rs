//! Truthful timing on real sockets: a running `metronome serve` is stopped (SIGSTOP) for 300 ms
//! while `metronome recv` records every packet's kernel arrival time. The RTP timestamp is the
//! time a packet was due to leave, so transit (arrival − timestamp) shows what the sender did:
//! - before the stall and after catching up, transit is the same (within 1 ms): the schedule
//!   never shifted;
//! - while catching up, packets arrive no faster than the configured catch-up rate;
//! - every packet is sent and none is lost: what was sent matches real time.
//!
//! The file source is read ahead of time, so the producer never holds the sender back. Loopback
//! only; both programs are bounded and killed if the test fails.

mod common;

use common::{bin, port_pair, tmp_dir, ts_file, Running};
use std::time::Duration;

/// One received packet, from `recv --trace`.
struct Arrival {
    at_ns: u64,
    ext_seq: u64,
    /// Arrival minus RTP timestamp, in 90 kHz ticks (an arbitrary but constant offset).
    transit_ticks: i64,
    size: u64,
}

fn read_trace(path: &std::path::Path) -> Vec<Arrival> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (at, seq, transit, size, verdict) = (
        col("arrival_ns"),
        col("ext_seq"),
        col("transit_ticks"),
        col("size"),
        col("verdict"),
    );
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[verdict] == "in-order")
        .map(|f| Arrival {
            at_ns: f[at].parse().unwrap(),
            ext_seq: f[seq].parse().unwrap(),
            transit_ticks: f[transit].parse().unwrap(),
            size: f[size].parse().unwrap(),
        })
        .collect()
}

fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// A 5 s `serve` of the test file with `--late late`, stopped for 300 ms at 2 s, with `recv`
/// tracing every packet: the arrivals, in order, and what `serve` printed.
fn stalled_run(late: &str) -> (Vec<Arrival>, common::Outcome) {
    let file = ts_file();
    // One directory per policy: the tests run at the same time.
    let dir = tmp_dir(&format!("stall-{}", late.replace('=', "-")));
    let trace = dir.join("trace.csv");
    let port = port_pair();
    let url = format!("rtp://127.0.0.1:{port}");
    let mut recv = Running::spawn(
        bin()
            .args(["recv", &url, "--duration", "30", "--trace"])
            .arg(&trace),
    );
    recv.wait_for("listening on", Duration::from_secs(20));
    let serve = Running::spawn(
        bin()
            .args(["serve", "--loop", "--duration", "5", "--late", late, "-i"])
            .arg(&file)
            .arg(&url),
    );
    // Past its 200 ms preroll and a second and a half of calm.
    std::thread::sleep(Duration::from_millis(2000));
    serve.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(300));
    serve.signal(libc::SIGCONT);
    let sent = serve.finish_within(Duration::from_secs(20));
    assert!(sent.succeeded(), "{}", sent.report());
    std::thread::sleep(Duration::from_millis(300));
    recv.interrupt();
    let got = recv.finish_within(Duration::from_secs(20));
    assert!(got.succeeded(), "{}", got.report());
    let a = read_trace(&trace);
    let _ = std::fs::remove_dir_all(dir);
    (a, sent)
}

/// The packet count in `serve`'s summary line "sent N packets, …".
fn sent_packets(sent: &common::Outcome) -> u64 {
    sent.stdout
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("sent ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no 'sent N packets' line: {}", sent.report()))
}

/// Every packet sent arrived, in order, with consecutive sequence numbers.
fn assert_whole(a: &[Arrival], sent: &common::Outcome) {
    // 1.2 Mbit/s of TS: about 110 packets a second.
    assert!(a.len() > 400, "only {} packets", a.len());
    let first = a[0].ext_seq;
    for (i, p) in a.iter().enumerate() {
        assert_eq!(
            p.ext_seq,
            first + i as u64,
            "packet {i} is missing or out of order"
        );
    }
    assert_eq!(sent_packets(sent), a.len() as u64, "{}", sent.report());
}

#[test]
fn after_a_300ms_stall_the_sender_catches_up_at_its_rate_and_keeps_its_schedule() {
    let (a, sent) = stalled_run("catch-up=2");
    // No loss, no reordering: every packet sent arrived, in order.
    assert_whole(&a, &sent);

    // The schedule before the stall, and at the end: the same within 1 ms (90 ticks). A packet
    // can leave late (the machine is busy: on a loaded core a whole second of packets can
    // leave 2 ms late) but never early, so the schedule is the lower edge of transit, its
    // minimum over a window, not its median.
    let t0 = a[0].at_ns;
    let window = |from_ms: u64, to_ms: u64| -> Vec<&Arrival> {
        a.iter()
            .filter(|p| p.at_ns >= t0 + from_ms * 1_000_000 && p.at_ns < t0 + to_ms * 1_000_000)
            .collect()
    };
    let edge = |w: Vec<&Arrival>| w.iter().map(|p| p.transit_ticks).min().unwrap();
    let end_ms = (a.last().unwrap().at_ns - t0) / 1_000_000;
    let (on_time_before, on_time_after) = (
        edge(window(300, 1500)),
        edge(window(end_ms - 1000, end_ms + 1)),
    );
    assert!(
        (on_time_after - on_time_before).abs() <= 90,
        "the schedule moved: least transit {} ms before the stall, {} ms at the end",
        on_time_before as f64 / 90.0,
        on_time_after as f64 / 90.0
    );
    let before = median(window(300, 1500).iter().map(|p| p.transit_ticks).collect());
    println!(
        "transit before the stall: least {:.3} ms, median {:.3} ms; at the end: least {:.3} ms",
        on_time_before as f64 / 90.0,
        before as f64 / 90.0,
        on_time_after as f64 / 90.0
    );
    // The stall shows as transit, about 300 ms: packets kept the time they were due.
    let worst = a.iter().map(|p| p.transit_ticks - before).max().unwrap();
    assert!(worst > 250 * 90, "worst transit {} ms", worst as f64 / 90.0);

    // The stream's rate, from the packets before the stall: bytes over their RTP time span.
    let calm = window(300, 1500);
    let span_ns = calm.last().unwrap().at_ns - calm[0].at_ns;
    let rate_bps =
        calm.iter().skip(1).map(|p| p.size * 8).sum::<u64>() as f64 * 1e9 / span_ns as f64;
    // While catching up (transit more than 2 ms above its level), arrivals keep to 2× that
    // rate: any 20 consecutive caught-up packets take at least their bytes at 2× the rate,
    // less 10% for the kernel's timestamp granularity and the estimate of the rate.
    let late: Vec<&Arrival> = a
        .iter()
        .filter(|p| p.transit_ticks - before > 180)
        .collect();
    assert!(late.len() >= 20, "only {} packets caught up", late.len());
    for w in late.windows(20) {
        if w[19].ext_seq - w[0].ext_seq != 19 {
            continue;
        }
        let bits = w.iter().skip(1).map(|p| p.size * 8).sum::<u64>() as f64;
        let took_s = (w[19].at_ns - w[0].at_ns) as f64 / 1e9;
        let bound_s = bits / (2.0 * rate_bps) * 0.9;
        assert!(
            took_s >= bound_s,
            "20 caught-up packets in {:.2} ms, faster than 2 × {:.0} kbit/s allows ({:.2} ms)",
            took_s * 1e3,
            rate_bps / 1e3,
            bound_s / 0.9 * 1e3
        );
    }
}

/// With `--late drop-late=20ms` the packets more than 20 ms late are dropped, the rest of the
/// stream leaves on time, and the dropped ones took no sequence number: the receiver sees a
/// whole stream (no loss to report to a congestion controller), with the stall as a step in
/// the RTP timestamps.
#[test]
fn after_a_300ms_stall_drop_late_drops_without_a_sequence_gap() {
    let (a, sent) = stalled_run("drop-late=20ms");
    assert_whole(&a, &sent);
    let dropped: u64 = sent
        .stdout
        .lines()
        .find_map(|l| {
            // "stalls 1 (0 packets caught up late, 31 dropped), underruns …"
            let l = l.trim().strip_prefix("stalls ")?;
            l.split(" dropped)")
                .next()?
                .rsplit(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no 'stalls' line: {}", sent.report()));
    // 300 ms of about 110 packets a second, less the last 20 ms: some 30 dropped.
    assert!((20..=40).contains(&dropped), "{dropped}: {}", sent.report());
    // Nothing that left was more than the limit late (plus the kernel's and recv's delay).
    let base = median(a.iter().take(100).map(|p| p.transit_ticks).collect());
    let worst = a.iter().map(|p| p.transit_ticks - base).max().unwrap();
    assert!(
        worst < 30 * 90,
        "a packet {} ms late left",
        worst as f64 / 90.0
    );
}

/// A live source whose encoder cannot keep up (4K at 60 fps on two CPUs) must not become slow
/// motion: its producer skips the frames it can no longer deliver, the mux keeps its rate with
/// null packets, and the stream sends what real time asks for.
#[test]
fn a_live_source_too_slow_for_real_time_skips_frames_and_keeps_the_rate() {
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let url = format!("rtp://{}", sink.local_addr().unwrap());
    let out = common::run(
        bin().args([
            "serve",
            "--size",
            "3840x2160",
            "--fps",
            "60",
            "--bitrate",
            "20M",
            "--mux-rate",
            "25M",
            "--duration",
            "3",
            "--json",
            &url,
        ]),
        Duration::from_secs(60),
    );
    assert!(out.succeeded(), "{}", out.report());
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let streamed_s = v["duration_us"].as_f64().unwrap() / 1e6 - 0.2;
    // 25 Mbit/s in 1328-byte packets, for the time the stream ran (after its 200 ms preroll).
    let real_time = 25e6 / (1328.0 * 8.0) * streamed_s;
    let packets = v["packets"].as_f64().unwrap();
    assert!(
        packets > 0.9 * real_time,
        "{packets} packets sent, {real_time:.0} due: the stream fell behind real time \
         ({} frames skipped)\n{}",
        v["frames_skipped"],
        out.report()
    );
}
