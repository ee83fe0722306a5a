//! `serve --config FILE` reads FILE again on SIGHUP: pushed streams gone stop, new ones start,
//! RTSP mounts and users are replaced, and a session playing goes on through it. A file that
//! does not parse changes nothing. All on loopback, bounded in time.

mod common;

use common::RtspServer;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpStream, UdpSocket};
use std::time::Duration;

/// One RTSP request on `conn`, its status and headers (the body read and dropped).
fn ask(conn: &mut BufReader<TcpStream>, request: &str) -> (u16, String) {
    conn.get_mut().write_all(request.as_bytes()).unwrap();
    let mut head = String::new();
    loop {
        let mut line = String::new();
        conn.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        head.push_str(&line);
    }
    let len = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_string())
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    conn.read_exact(&mut body).unwrap();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head)
}

fn connect(server: &RtspServer) -> BufReader<TcpStream> {
    let s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    BufReader::new(s)
}

fn describe(server: &RtspServer, mount: &str) -> u16 {
    let url = server.url(mount);
    ask(
        &mut connect(server),
        &format!("DESCRIBE {url} RTSP/1.0\r\nCSeq: 1\r\n\r\n"),
    )
    .0
}

/// A UDP socket on loopback that gives up reading after `timeout`.
fn udp(timeout: Duration) -> UdpSocket {
    let s = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s
}

/// Datagrams that reach `s` within `window`.
fn count(s: &UdpSocket, window: Duration) -> usize {
    let (mut buf, mut n, end) = ([0u8; 2048], 0, common::now() + window);
    while common::now() < end {
        if s.recv(&mut buf).is_ok() {
            n += 1;
        }
    }
    n
}

/// Waits for a line of the server's log containing `what`; all lines seen so far on failure.
fn wait_log(server: &RtspServer, what: &str, seen: &mut Vec<String>) {
    let deadline = common::now() + Duration::from_secs(10);
    while common::now() < deadline {
        if let Ok(l) = server.log.recv_timeout(Duration::from_millis(200)) {
            let hit = l.contains(what);
            seen.push(l);
            if hit {
                return;
            }
        }
    }
    panic!(
        "the server did not say '{what}'; it said:\n{}",
        seen.join("\n")
    );
}

/// Two UDP sockets on an even port and the next, as an RTSP client binds for `client_port`.
fn port_pair() -> (UdpSocket, UdpSocket, u16) {
    for _ in 0..100 {
        let a = udp(Duration::from_millis(100));
        let p = a.local_addr().unwrap().port();
        if p % 2 == 1 {
            continue;
        }
        if let Ok(b) = UdpSocket::bind((Ipv4Addr::LOCALHOST, p + 1)) {
            return (a, b, p);
        }
    }
    panic!("no free port pair");
}

fn stream(name: &str, dest: Option<u16>) -> String {
    let dest = dest.map_or(String::new(), |p| {
        format!("destination = \"rtp://127.0.0.1:{p}\"\n")
    });
    format!("[[stream]]\nname = \"{name}\"\nsize = \"160x120\"\nfps = 10\nbitrate = \"600kbit\"\n{dest}")
}

#[test]
fn sighup_reloads_streams_mounts_and_users_and_a_playing_session_goes_on() {
    let dir = common::tmp_dir("serve-reload");
    let cfg = dir.0.join("serve.toml");
    let (pushed_a, pushed_c) = (
        udp(Duration::from_millis(100)),
        udp(Duration::from_millis(100)),
    );
    let (port_a, port_c) = (
        pushed_a.local_addr().unwrap().port(),
        pushed_c.local_addr().unwrap().port(),
    );
    std::fs::write(&cfg, stream("a", Some(port_a)) + &stream("b", None)).unwrap();
    let server = RtspServer::start_for(
        &["--config", cfg.to_str().unwrap()],
        Duration::from_secs(60),
    );
    let mut log = Vec::new();
    assert!(
        count(&pushed_a, Duration::from_millis(800)) > 0,
        "a is pushed"
    );
    assert_eq!(describe(&server, "d"), 404);

    // A client plays b over UDP, and keeps playing through the reload.
    let (media, _rtcp, rtp_port) = port_pair();
    let rtcp_port = rtp_port + 1;
    let mut c = connect(&server);
    let url = server.url("b");
    let (status, head) = ask(
        &mut c,
        &format!("SETUP {url}/trackID=0 RTSP/1.0\r\nCSeq: 1\r\nTransport: RTP/AVP;unicast;client_port={rtp_port}-{rtcp_port}\r\n\r\n"),
    );
    assert_eq!(status, 200, "{head}");
    let session = head
        .lines()
        .find_map(|l| l.strip_prefix("Session: "))
        .map(|s| s.split(';').next().unwrap().trim().to_string())
        .expect("a session");
    let (status, head) = ask(
        &mut c,
        &format!("PLAY {url} RTSP/1.0\r\nCSeq: 2\r\nSession: {session}\r\n\r\n"),
    );
    assert_eq!(status, 200, "{head}");
    assert!(count(&media, Duration::from_millis(800)) > 0, "b plays");

    // a goes, c comes (pushed), d is a new mount, and only b and d are public.
    std::fs::write(
        &cfg,
        stream("b", None)
            + &stream("c", Some(port_c))
            + &stream("d", None)
            + "[rtsp_auth]\npublic = [\"b\", \"d\"]\n",
    )
    .unwrap();
    // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGHUP) };
    wait_log(&server, "RTSP mounts now b, c, d", &mut log);
    wait_log(&server, "'a' stopped (gone from the config)", &mut log);
    assert!(
        count(&pushed_c, Duration::from_millis(800)) > 0,
        "c is pushed: {log:?}"
    );
    let _ = count(&pushed_a, Duration::from_millis(300));
    assert_eq!(
        count(&pushed_a, Duration::from_millis(500)),
        0,
        "a still flows"
    );
    assert_eq!(describe(&server, "d"), 200);
    // c is not public: credentials are asked for (as for a mount gone, whose name a stranger
    // learns nothing about).
    assert_eq!(describe(&server, "c"), 401);
    assert_eq!(describe(&server, "a"), 401);
    assert!(
        count(&media, Duration::from_millis(800)) > 0,
        "b stopped at the reload"
    );
    // The session is still the server's.
    let (status, _) = ask(
        &mut c,
        &format!("GET_PARAMETER {url} RTSP/1.0\r\nCSeq: 3\r\nSession: {session}\r\n\r\n"),
    );
    assert_eq!(status, 200);

    // A file that does not parse changes nothing.
    std::fs::write(&cfg, "[[stream]\nname = \n").unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGHUP) };
    wait_log(&server, "not reloaded", &mut log);
    assert_eq!(describe(&server, "d"), 200);
    assert!(count(&pushed_c, Duration::from_millis(500)) > 0);
    assert!(count(&media, Duration::from_millis(500)) > 0);

    let (out, rest) = server.stop();
    assert!(out.contains("c"), "{out}\n{rest:?}");
}

/// The RTSP server's limits come from the config file as from their options: with
/// `rtsp_max_sessions = 1` a second SETUP is refused (503) while the first session holds, and
/// sessions time out after the file's `rtsp_session_timeout`.
#[test]
fn the_config_file_sets_the_rtsp_limits() {
    let dir = common::tmp_dir("serve-config-limits");
    let cfg = dir.0.join("serve.toml");
    let settings = "rtsp_max_sessions = 1\nrtsp_session_timeout = \"30s\"\n\
                    overload = \"refuse\"\nencode_cost = \"5%\"\n";
    std::fs::write(&cfg, settings.to_string() + &stream("b", None)).unwrap();
    let server = RtspServer::start_for(
        &["--config", cfg.to_str().unwrap()],
        Duration::from_secs(30),
    );
    let url = server.url("b");
    let setup = |c: &mut BufReader<TcpStream>| {
        let (_media, _rtcp, rtp) = port_pair();
        ask(
            c,
            &format!("SETUP {url}/trackID=0 RTSP/1.0\r\nCSeq: 1\r\nTransport: RTP/AVP;unicast;client_port={rtp}-{}\r\n\r\n", rtp + 1),
        )
    };
    let (mut first, mut second) = (connect(&server), connect(&server));
    let (status, head) = setup(&mut first);
    assert_eq!(status, 200, "{head}");
    // The session timeout the server announces (RFC 2326 §12.37) is the file's.
    assert!(head.contains(";timeout=30"), "{head}");
    let (status, head) = setup(&mut second);
    assert_eq!(
        status, 503,
        "a second session past rtsp_max_sessions = 1: {head}"
    );
    drop(server);
}
