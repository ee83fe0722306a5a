//! The RTSP server under hostile and heavy load: slowloris, a thousand idle connections, a
//! thousand abandoned sessions, and clients that set up, play and tear down over and over. Its
//! memory, threads and descriptors are read from /proc while it serves, and again after its
//! timeouts have reclaimed everything. All on loopback, bounded in count and time.

mod common;

use common::{now, RtspServer};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A small test source: many sessions of it are light.
const SMALL: [&str; 6] = ["--size", "160x120", "--fps", "10", "--mux-rate", "600000"];

/// What /proc says of a process.
#[derive(Clone, Copy, Debug)]
struct Usage {
    /// Resident memory, KiB.
    rss_kib: u64,
    /// Locked memory, KiB.
    locked_kib: u64,
    threads: u64,
    fds: u64,
}

fn usage(pid: u32) -> Usage {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as u64;
    Usage {
        rss_kib: field("VmRSS:"),
        locked_kib: field("VmLck:"),
        threads: field("Threads:"),
        fds,
    }
}

/// Lets this process hold a few thousand sockets (the soft limit is often 1024).
fn allow_descriptors(n: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the one struct passed, alive across both.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        if lim.rlim_cur < n {
            lim.rlim_cur = n.min(lim.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        }
    }
    assert!(
        lim.rlim_cur >= n,
        "this test needs {n} descriptors (ulimit -n)"
    );
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Waits until every stream in `conns` is closed by the server (a read sees the end), within
/// `limit`; returns how many were.
fn closed_by_server(conns: &mut [TcpStream], limit: Duration) -> usize {
    let deadline = now() + limit;
    let mut closed = 0;
    for s in conns.iter_mut() {
        let left = deadline.saturating_duration_since(now());
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        let mut b = [0u8; 256];
        loop {
            match s.read(&mut b) {
                Ok(0) => {
                    closed += 1;
                    break;
                }
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    closed += 1;
                    break;
                }
                Err(_) => break,
            }
        }
    }
    closed
}

/// Polls `pid`'s usage until `ok` holds or `limit` passes; returns the last reading.
fn settle(pid: u32, limit: Duration, ok: impl Fn(&Usage) -> bool) -> Usage {
    let deadline = now() + limit;
    loop {
        let u = usage(pid);
        if ok(&u) || now() >= deadline {
            return u;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

const CONNS: usize = 1000;
/// The target for idle connections: 64 MiB plus 24 KiB each.
const TARGET_BASE_KIB: u64 = 64 << 10;
const TARGET_EACH_KIB: u64 = 24;

fn server_for(clients: usize, timeouts: &str) -> RtspServer {
    let n = clients.to_string();
    RtspServer::start(
        &[
            &SMALL[..],
            &[
                "--rtsp-idle-timeout",
                timeouts,
                "--rtsp-session-timeout",
                timeouts,
                "--rtsp-max-connections",
                &n,
                "--rtsp-max-per-address",
                &n,
                "--rtsp-max-sessions",
                &n,
                "--rtsp-max-sessions-per-address",
                &n,
            ],
        ]
        .concat(),
    )
}

/// Idle connections held at once: `METRONOME_IDLE_CONNS` (the 10,000 fit), else 1,000.
fn idle_connections() -> usize {
    std::env::var("METRONOME_IDLE_CONNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CONNS)
        .clamp(1, 15_000)
}

/// 1,000 idle connections (or `METRONOME_IDLE_CONNS`), then 1,000 abandoned sessions (set up,
/// never played, never torn down, their connections silent): memory stays within the target
/// while they are held, and memory, locked memory, threads and descriptors come back after the
/// timeouts reclaim them.
#[test]
fn idle_connections_and_abandoned_sessions_cost_bounded_memory_and_are_given_back() {
    let idle_n = idle_connections();
    allow_descriptors((idle_n + 2 * CONNS) as u64 + 256);
    let server = server_for(idle_n.max(CONNS), "3s");
    let pid = server.child.id();
    let addr = server.addr;
    std::thread::sleep(Duration::from_millis(500));
    let base = usage(pid);
    let target = |n: usize| TARGET_BASE_KIB + TARGET_EACH_KIB * n as u64;
    let back = |b: u64, now: u64| now <= b + b / 10;

    // Idle connections, each having asked one thing (so that each has been read and answered).
    let mut conns: Vec<TcpStream> = (0..idle_n)
        .map(|_| {
            let mut s = connect(addr);
            let (status, _) = request(&mut s, "OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n");
            assert_eq!(status, 200);
            s
        })
        .collect();
    let idle = usage(pid);
    let t0 = now();
    assert_eq!(
        closed_by_server(&mut conns, Duration::from_secs(10)),
        idle_n
    );
    let reclaimed_after = t0.elapsed();
    drop(conns);
    let after_idle = settle(pid, Duration::from_secs(5), |u| {
        back(base.rss_kib, u.rss_kib) && u.fds <= base.fds
    });

    // Abandoned sessions, SETUP then silence: half over UDP (each binds a port pair), half
    // interleaved (each reserves its connection's media queue).
    let mut conns: Vec<TcpStream> = (0..CONNS)
        .map(|i| {
            let mut s = connect(addr);
            let transport = if i % 2 == 0 {
                "RTP/AVP;unicast;client_port=5000-5001"
            } else {
                "RTP/AVP/TCP;unicast;interleaved=0-1"
            };
            let (status, session) = request(
                &mut s,
                &format!(
                    "SETUP rtsp://{addr}/test/trackID=0 RTSP/1.0\r\nCSeq: 1\r\n\
                     Transport: {transport}\r\n\r\n"
                ),
            );
            assert_eq!(status, 200, "session {i}");
            assert!(!session.is_empty());
            s
        })
        .collect();
    let sessions = usage(pid);
    // The sessions time out (3 s), then their connections idle out (3 s more).
    assert_eq!(closed_by_server(&mut conns, Duration::from_secs(15)), CONNS);
    drop(conns);
    let after_sessions = settle(pid, Duration::from_secs(5), |u| {
        back(base.rss_kib, u.rss_kib) && u.fds <= base.fds && u.threads <= base.threads
    });
    let (_, log) = server.stop();

    let per = |u: &Usage, n: usize| (u.rss_kib.saturating_sub(base.rss_kib)) as f64 / n as f64;
    println!("baseline:            {base:?}");
    println!(
        "{idle_n} idle conns:     {idle:?} ({:.1} KiB each)",
        per(&idle, idle_n)
    );
    println!("after idle timeout:  {after_idle:?} (closed within {reclaimed_after:.1?})");
    println!(
        "{CONNS} sessions:       {sessions:?} ({:.1} KiB each)",
        per(&sessions, CONNS)
    );
    println!("after timeouts:      {after_sessions:?}");
    let timed_out = log.iter().filter(|l| l.contains("timed out")).count();
    assert!(timed_out >= CONNS, "{timed_out} session time-outs logged");
    let held = [
        ("idle connections", idle, idle_n),
        ("abandoned sessions", sessions, CONNS),
    ];
    for (what, u, n) in held {
        let target = target(n);
        assert!(
            u.rss_kib <= target,
            "{what}: RSS {} KiB over the target {target} KiB",
            u.rss_kib
        );
        assert!(
            u.locked_kib <= base.locked_kib + base.locked_kib / 10 + 64,
            "{what}: locked memory grew from {} to {} KiB: only the pacers' memory is locked",
            base.locked_kib,
            u.locked_kib
        );
        assert!(
            u.threads <= base.threads + 2,
            "{what}: {} threads against {} at the start: no thread per client",
            u.threads,
            base.threads
        );
    }
    for (what, u) in [("idle", after_idle), ("sessions", after_sessions)] {
        assert!(
            back(base.rss_kib, u.rss_kib),
            "after the {what} were reclaimed RSS is {} KiB, over 110 % of the {} KiB baseline",
            u.rss_kib,
            base.rss_kib
        );
        assert!(
            u.fds <= base.fds,
            "{} descriptors left, {} at the start",
            u.fds,
            base.fds
        );
    }
    assert!(after_sessions.threads <= base.threads);
}

/// Playing sessions abandoned (PLAY, then silence: no request, no receiver report) with a
/// session timeout far shorter than the idle timeout: each connection closes with its
/// session, within seconds of the session timeout, not after the idle timeout; descriptors and
/// memory come back then.
#[test]
fn abandoned_playing_sessions_give_their_connections_back_with_their_timeout() {
    const N: usize = 50;
    let n = (N + 8).to_string();
    let server = RtspServer::start(
        &[
            &SMALL[..],
            &[
                "--rtsp-session-timeout",
                "2s",
                "--rtsp-idle-timeout",
                "60s",
                "--rtsp-max-sessions",
                &n,
                "--rtsp-max-sessions-per-address",
                &n,
                "--rtsp-max-per-address",
                &n,
            ],
        ]
        .concat(),
    );
    let (pid, addr) = (server.child.id(), server.addr);
    std::thread::sleep(Duration::from_millis(500));
    let base = usage(pid);
    // Where the media goes: sockets held, never read (what a crashed player leaves).
    let mut sinks = Vec::new();
    let mut conns: Vec<TcpStream> = (0..N)
        .map(|i| {
            let (rtp, rtcp) = udp_pair();
            let port = rtp.local_addr().unwrap().port();
            sinks.push((rtp, rtcp));
            let mut s = connect(addr);
            let (status, session) = request(
                &mut s,
                &format!(
                    "SETUP rtsp://{addr}/test/trackID=0 RTSP/1.0\r\nCSeq: 1\r\n\
                     Transport: RTP/AVP;unicast;client_port={port}-{}\r\n\r\n",
                    port + 1
                ),
            );
            assert_eq!(status, 200, "session {i}");
            let (status, _) = request(
                &mut s,
                &format!(
                    "PLAY rtsp://{addr}/test RTSP/1.0\r\nCSeq: 2\r\nSession: {session}\r\n\r\n"
                ),
            );
            assert_eq!(status, 200, "play {i}");
            s
        })
        .collect();
    let playing = usage(pid);
    let t0 = now();
    assert_eq!(closed_by_server(&mut conns, Duration::from_secs(20)), N);
    let closed_after = t0.elapsed();
    drop(conns);
    let back = settle(pid, Duration::from_secs(10), |u| {
        u.fds <= base.fds && u.rss_kib <= base.rss_kib + base.rss_kib / 10
    });
    let (_, log) = server.stop();
    println!("baseline {base:?}\n{N} playing {playing:?}\nclosed within {closed_after:.1?}, then {back:?}");
    assert!(
        closed_after < Duration::from_secs(10),
        "the connections closed {closed_after:.1?} after the sessions went silent: with their \
         2 s session timeout, not the 60 s idle timeout"
    );
    assert!(back.fds <= base.fds, "{back:?} against {base:?}");
    assert!(
        back.rss_kib <= base.rss_kib + base.rss_kib / 10,
        "{back:?} against {base:?}"
    );
    let closed = log
        .iter()
        .filter(|l| l.contains("its sessions timed out"))
        .count();
    assert!(
        closed >= N,
        "{closed} connections closed for their sessions' timeout"
    );
}

/// At the very start of a flood every place is held by connections too young to close to make
/// room: a newcomer then waits until one is old enough (100 ms of silence), instead of getting
/// 503 as the first DESCRIBE at the start of a slowloris did.
#[test]
fn a_newcomer_at_the_start_of_a_flood_waits_for_a_place_instead_of_a_503() {
    let server = RtspServer::start(
        &[
            &SMALL[..],
            &[
                "--rtsp-max-connections",
                "40",
                "--rtsp-max-per-address",
                "40",
            ],
        ]
        .concat(),
    );
    let addr = server.addr;
    // Forty connections that say nothing: every place, each just taken.
    let flood: Vec<TcpStream> = (0..40).map(|_| connect(addr)).collect();
    let t0 = now();
    let mut s = connect(addr);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (status, _) = request(
        &mut s,
        &format!("DESCRIBE rtsp://{addr}/test RTSP/1.0\r\nCSeq: 1\r\n\r\n"),
    );
    let waited = t0.elapsed();
    let mut flood = flood;
    let closed = closed_by_server(&mut flood, Duration::from_secs(2));
    let (_, log) = server.stop();
    println!("answered {status} after {waited:?}; {closed} of the flood closed");
    assert_eq!(status, 200, "{log:?}");
    assert!(waited < Duration::from_millis(1500), "{waited:?}");
    assert!(closed >= 1, "a silent holder made room");
    assert!(!log.iter().any(|l| l.contains("(503)")), "{log:?}");
}

/// Two UDP sockets on loopback, on an even port and the one above.
fn udp_pair() -> (std::net::UdpSocket, std::net::UdpSocket) {
    let p = common::port_pair();
    (
        std::net::UdpSocket::bind(("127.0.0.1", p)).unwrap(),
        std::net::UdpSocket::bind(("127.0.0.1", p + 1)).unwrap(),
    )
}

/// Slowloris: 300 connections that send one byte every 2 s, for 20 s (bounded). Meanwhile a
/// prompt client's OPTIONS or DESCRIBE every 200 ms is answered, each within 100 ms at p99, and
/// ffprobe plays the mount: a slow client holds no place a prompt one needs (it is closed to
/// make room, or by the request deadline).
#[test]
#[allow(clippy::disallowed_methods)] // the client's own latency, measured by the test
fn slow_clients_cannot_keep_prompt_ones_out() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let server = RtspServer::start(&SMALL);
    let addr = server.addr;
    let stop = AtomicBool::new(false);
    let trickle = b"OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n";
    let (latencies, probed) = std::thread::scope(|scope| {
        let stop = &stop;
        scope.spawn(move || {
            let mut slow: Vec<(TcpStream, usize)> = (0..300)
                .filter_map(|_| TcpStream::connect(addr).ok().map(|s| (s, 0)))
                .collect();
            while !stop.load(Ordering::Relaxed) {
                slow.retain_mut(|(s, k)| {
                    let byte = trickle[*k % trickle.len()];
                    *k += 1;
                    s.write_all(&[byte]).is_ok()
                });
                for _ in 0..20 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        });
        std::thread::sleep(Duration::from_millis(500));
        let probe = scope.spawn(move || {
            std::thread::sleep(Duration::from_secs(8));
            std::process::Command::new("ffprobe")
                .args(["-v", "error", "-rw_timeout", "5000000", "-show_streams"])
                .arg(format!("rtsp://{addr}/test"))
                .output()
                .map(|o| {
                    o.status.success()
                        && String::from_utf8_lossy(&o.stdout).contains("codec_name=h264")
                })
                .unwrap_or(false)
        });
        let mut latencies = Vec::new();
        let start = now();
        let mut k = 0;
        while start.elapsed() < Duration::from_secs(20) {
            k += 1;
            let t0 = now();
            let mut s = connect(addr);
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let text = if k % 2 == 0 {
                format!("DESCRIBE rtsp://{addr}/test RTSP/1.0\r\nCSeq: 7\r\n\r\n")
            } else {
                "OPTIONS * RTSP/1.0\r\nCSeq: 7\r\n\r\n".to_string()
            };
            let (status, _) = request(&mut s, &text);
            latencies.push((status, t0.elapsed()));
            std::thread::sleep(Duration::from_millis(200));
        }
        let probed = probe.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        (latencies, probed)
    });
    let answered = latencies.iter().filter(|(s, _)| *s == 200).count();
    let mut times: Vec<Duration> = latencies.iter().map(|(_, t)| *t).collect();
    times.sort();
    let p99 = times[(times.len() * 99).div_ceil(100) - 1];
    println!(
        "{answered} of {} answered 200, p99 {p99:?}, max {:?}, ffprobe {probed}",
        latencies.len(),
        times.last().unwrap()
    );
    assert_eq!(answered, latencies.len(), "{latencies:?}");
    assert!(p99 < Duration::from_millis(100), "{times:?}");
    assert!(probed, "ffprobe could not play the mount");
    server.stop();
}

/// A small, low-rate MPEG-TS file (160x120 MPEG-2 at 150 kbit/s, 4 s) for many sessions at once.
fn light_ts_file() -> std::path::PathBuf {
    common::ts_file_made("light.ts", "160x120", 10, 4, "100k", "150k")
}

/// How long the soak runs: `METRONOME_SOAK_SECS` (the soak is 600), else 40 s in the
/// suite.
fn soak_time() -> Duration {
    let secs = std::env::var("METRONOME_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40u64);
    Duration::from_secs(secs.clamp(5, 3600))
}

/// What the soak's clients saw.
#[derive(Default, Debug)]
struct Tally {
    cycles: u64,
    /// Responses by status, for SETUP, PLAY and TEARDOWN together.
    statuses: std::collections::BTreeMap<u16, u64>,
    reconnects: u64,
}

/// A soak: 200 clients repeat SETUP, PLAY and TEARDOWN (over UDP and interleaved, and
/// reconnecting now and then) for the soak time, in two equal halves. Every request is
/// answered. After each half the server's threads and descriptors are back to their baseline,
/// its locked memory too, and its memory within 10 % of it (glibc's heap keeps some pages that
/// hold a few live allocations among free ones); and the second half adds nothing to what the
/// first left: nothing grows with the number of sessions played.
#[test]
fn a_soak_of_setup_play_teardown_leaves_nothing_behind() {
    const CLIENTS: usize = 200;
    allow_descriptors(4 * CLIENTS as u64 + 256);
    let file = light_ts_file();
    let soak = soak_time();
    let spec = format!("name=clip,source={},loop=true", file.display());
    let server = RtspServer::start_for(
        &[
            "--stream",
            &spec,
            "--rtsp-max-per-address",
            "400",
            "--rtsp-max-sessions",
            "400",
            "--rtsp-max-sessions-per-address",
            "400",
        ],
        soak + Duration::from_secs(90),
    );
    let pid = server.child.id();
    let addr = server.addr;
    // Where the UDP sessions' media goes: one socket, drained.
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let sink_port = sink.local_addr().unwrap().port();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let server = std::sync::Mutex::new(server);
    let halves = std::thread::scope(|scope| {
        let (stop, sink) = (&stop, &sink);
        scope.spawn(move || {
            let mut b = [0u8; 2048];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = sink.recv(&mut b);
            }
        });
        // The baseline is the server after its first clients (one over each transport): what
        // is set up once, on first use, is not what a soak should give back.
        for i in 0..2 {
            soak_client(addr, i, sink_port, now() + Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_secs(6));
        let base = usage(pid);
        let mut halves = vec![(Tally::default(), base, base)];
        for _ in 0..2 {
            let (tally, peak) = soak_half(&server, pid, addr, sink_port, soak / 2);
            let after = settle(pid, Duration::from_secs(12), |u| {
                u.rss_kib <= base.rss_kib + base.rss_kib / 20
                    && u.fds <= base.fds
                    && u.threads <= base.threads
            });
            halves.push((tally, peak, after));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        halves
    });
    server.into_inner().unwrap().stop();
    let base = halves[0].1;
    println!("soak of {soak:?} in two halves, {CLIENTS} clients");
    println!("baseline:  {base:?}");
    for (k, (tally, peak, after)) in halves.iter().enumerate().skip(1) {
        println!("half {k}: {tally:?}\n  peak:    {peak:?}\n  after:   {after:?}");
        let answered: u64 = tally.statuses.values().sum();
        let ok = tally.statuses.get(&200).copied().unwrap_or(0);
        assert!(tally.cycles >= CLIENTS as u64, "{tally:?}");
        // Every request is answered; a PLAY may be refused by admission control (453) when
        // the clients' streams do not fit, but nothing else fails.
        assert_eq!(
            tally.statuses.get(&0),
            None,
            "requests without an answer: {tally:?}"
        );
        assert!(
            tally.statuses.keys().all(|s| [200, 453].contains(s)),
            "{tally:?}"
        );
        assert!(ok * 10 >= answered * 9, "most requests succeed: {tally:?}");
        assert!(
            after.rss_kib <= base.rss_kib + base.rss_kib / 10,
            "RSS {} KiB after half {k}, {} KiB before",
            after.rss_kib,
            base.rss_kib
        );
        assert!(
            after.locked_kib <= base.locked_kib,
            "{after:?} against {base:?}"
        );
        assert!(after.fds <= base.fds, "{after:?} against {base:?}");
        assert!(after.threads <= base.threads, "{after:?} against {base:?}");
    }
    let (first, second) = (halves[1].2.rss_kib, halves[2].2.rss_kib);
    assert!(
        second <= first + base.rss_kib / 50,
        "RSS grew from {first} to {second} KiB over the second half: something is kept per session"
    );
}

/// One half of the soak: 200 clients until `length` has passed; what they saw and the server's
/// peak memory. A server that ends during it fails the test with its log.
fn soak_half(
    server: &std::sync::Mutex<RtspServer>,
    pid: u32,
    addr: SocketAddr,
    sink_port: u16,
    length: Duration,
) -> (Tally, Usage) {
    let start = now();
    let mut peak = usage(pid);
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..200)
            .map(|i| scope.spawn(move || soak_client(addr, i, sink_port, start + length)))
            .collect();
        while now() < start + length {
            std::thread::sleep(Duration::from_millis(500));
            let mut srv = server.lock().unwrap();
            if let Ok(Some(status)) = srv.child.try_wait() {
                let log: Vec<String> = srv.log.try_iter().collect();
                panic!(
                    "the server ended ({status}) during the soak:\n{}",
                    log.join("\n")
                );
            }
            drop(srv);
            let u = usage(pid);
            if u.rss_kib > peak.rss_kib {
                peak = u;
            }
        }
        clients.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let mut all = Tally::default();
    for t in &tallies {
        all.cycles += t.cycles;
        all.reconnects += t.reconnects;
        for (s, n) in &t.statuses {
            *all.statuses.entry(*s).or_insert(0) += n;
        }
    }
    (all, peak)
}

/// One soak client: SETUP, PLAY, a moment of media, TEARDOWN, until `until`; every eighth
/// cycle on a new connection. Even clients use UDP, odd ones interleaved.
fn soak_client(addr: SocketAddr, i: usize, sink_port: u16, until: Instant) -> Tally {
    let mut t = Tally::default();
    let url = format!("rtsp://{addr}/clip");
    let transport = if i % 2 == 0 {
        format!("RTP/AVP;unicast;client_port={sink_port}-{}", sink_port + 1)
    } else {
        "RTP/AVP/TCP;unicast;interleaved=0-1".to_string()
    };
    let mut s = connect(addr);
    let mut cseq = 0;
    let mut send = |s: &mut TcpStream, t: &mut Tally, what: String| -> (u16, String) {
        cseq += 1;
        let text = what.replace("CSEQ", &cseq.to_string());
        let r = request(s, &text);
        *t.statuses.entry(r.0).or_insert(0) += 1;
        r
    };
    while now() < until {
        if t.cycles > 0 && t.cycles % 8 == 0 {
            s = connect(addr);
            t.reconnects += 1;
        }
        let (status, session) = send(
            &mut s,
            &mut t,
            format!(
                "SETUP {url}/trackID=0 RTSP/1.0\r\nCSeq: CSEQ\r\nTransport: {transport}\r\n\r\n"
            ),
        );
        if status != 200 {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        let (status, _) = send(
            &mut s,
            &mut t,
            format!("PLAY {url} RTSP/1.0\r\nCSeq: CSEQ\r\nSession: {session}\r\n\r\n"),
        );
        if status == 200 {
            std::thread::sleep(Duration::from_millis(50 + (i as u64 * 37) % 200));
        }
        send(
            &mut s,
            &mut t,
            format!("TEARDOWN {url} RTSP/1.0\r\nCSeq: CSEQ\r\nSession: {session}\r\n\r\n"),
        );
        t.cycles += 1;
    }
    let _ = s.shutdown(std::net::Shutdown::Both);
    t
}

/// Sends one request and reads its response head: the status and the Session header. `$`
/// frames before it (interleaved media) are skipped.
fn request(s: &mut TcpStream, text: &str) -> (u16, String) {
    s.write_all(text.as_bytes()).unwrap();
    let mut buf: Vec<u8> = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        // Skip whole `$` frames at the front.
        while buf.first() == Some(&b'$') && buf.len() >= 4 {
            let len = 4 + u16::from_be_bytes([buf[2], buf[3]]) as usize;
            if buf.len() < len {
                break;
            }
            buf.drain(..len);
        }
        if buf.first() != Some(&b'$') {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]);
                let status = head
                    .split(' ')
                    .nth(1)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let session = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Session: "))
                    .map(|v| v.split(';').next().unwrap_or("").to_string())
                    .unwrap_or_default();
                return (status, session);
            }
        }
        match s.read(&mut b) {
            Ok(0) | Err(_) => return (0, String::new()),
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
}
