//! The RTSP server against a plain socket client: every class of bad request, session
//! timeouts, interleaved and UDP delivery, ranges, multicast, many clients at once, receiver
//! reports and the log. What it admits is `rtsp_admission.rs`'s. All on loopback, bounded in
//! time.

mod common;

use common::rtsp_client::*;
use common::{ts_file, RtspServer};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

#[test]
fn options_describe_setup_play_teardown_over_udp() {
    let server = RtspServer::start(&small_test_source());
    let mut c = Client::connect(&server, "test");
    let r = c.req("OPTIONS", "*", &[]);
    assert_eq!(r.status, 200);
    for m in [
        "DESCRIBE",
        "SETUP",
        "PLAY",
        "PAUSE",
        "TEARDOWN",
        "GET_PARAMETER",
    ] {
        assert!(r.header("public").contains(m), "{r:?}");
    }
    let url = c.url.clone();
    let r = c.req("DESCRIBE", &url, &[("Accept", "application/sdp")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), "application/sdp");
    let sdp = String::from_utf8(r.body.clone()).unwrap();
    assert!(sdp.contains("a=rtpmap:33 MP2T/90000"), "{sdp}");
    assert!(sdp.contains("a=control:trackID=0"), "{sdp}");
    let (rtp, rtcp, port) = client_ports();
    let r = c.setup(
        &format!("RTP/AVP;unicast;client_port={}-{}", port, port + 1),
        None,
    );
    assert_eq!(r.status, 200, "{r:?}");
    let session = r.session();
    assert_eq!(session.len(), 32, "128-bit id: {session}");
    assert!(r.header("transport").contains("server_port="), "{r:?}");
    let r = c.play(&session, None);
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.header("rtp-info").contains("seq="), "{r:?}");
    // Media arrives on the client port, from the server port it announced, and so do SRs.
    let mut buf = [0u8; 2048];
    let (n, _) = rtp.recv_from(&mut buf).expect("RTP on client_port");
    assert_eq!(buf[1] & 0x7f, 33, "MP2T payload");
    assert!(n > 12);
    let (n, _) = rtcp.recv_from(&mut buf).expect("an SR on the RTCP port");
    assert_eq!(buf[1], 200, "sender report first: {:?}", &buf[..n]);
    let r = c.req("TEARDOWN", &url, &[("Session", &session)]);
    assert_eq!(r.status, 200);
    let r = c.req("GET_PARAMETER", &url, &[("Session", &session)]);
    assert_eq!(r.status, 454, "the session is gone");
    server.stop();
}

#[test]
fn interleaved_delivery_carries_rtp_and_rtcp_on_the_connection() {
    let server = RtspServer::start(&small_test_source());
    let mut c = Client::connect(&server, "test");
    let r = c.setup("RTP/AVP/TCP;unicast;interleaved=0-1", None);
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.header("transport").contains("interleaved=0-1"), "{r:?}");
    let s = r.session();
    assert_eq!(c.play(&s, None).status, 200);
    let mut rtp = 0;
    let mut rtcp = 0;
    for _ in 0..400 {
        match c.read_frame() {
            (0, n) if n > 12 => rtp += 1,
            (1, _) => rtcp += 1,
            f => panic!("unexpected frame {f:?}"),
        }
        if rtp > 50 && rtcp > 0 {
            break;
        }
    }
    assert!(rtp > 50 && rtcp > 0, "rtp {rtp}, rtcp {rtcp}");
    // A request in the middle of the media still gets its answer.
    let url = c.url.clone();
    let r = c.req("GET_PARAMETER", &url, &[("Session", &s)]);
    assert_eq!(r.status, 200);
    server.stop();
}

#[test]
fn bad_requests_get_the_standard_status_and_the_connection_survives() {
    let server = RtspServer::start(&small_test_source());
    let mut c = Client::connect(&server, "test");
    let url = c.url.clone();
    // Garbage, then a request without CSeq, then a good one on the same connection.
    assert_eq!(c.raw(b"HELLO\r\n\r\n").status, 400);
    assert_eq!(c.raw(b"OPTIONS * RTSP/1.0\r\n\r\n").status, 400);
    assert_eq!(
        c.raw(format!("OPTIONS {url} RTSP/2.0\r\nCSeq: 9\r\n\r\n").as_bytes())
            .status,
        505
    );
    // A head over the limit.
    let big = format!(
        "OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let r = c.raw(big.as_bytes());
    assert!(r.status == 400 || r.status == 413, "{r:?}");
    assert_eq!(c.req("OPTIONS", "*", &[]).status, 200);
    assert_eq!(
        c.req("DESCRIBE", &format!("rtsp://{}/nope", server.addr), &[])
            .status,
        404
    );
    assert_eq!(c.req("ANNOUNCE", &url, &[]).status, 405);
    assert_eq!(c.req("FLY", &url, &[]).status, 501);
    let bogus = "0123456789abcdef0123456789abcdef";
    assert_eq!(c.play(bogus, None).status, 454);
    // Transports: another profile, a destination that is not the client, no client_port.
    for t in [
        "RTP/SAVP;unicast;client_port=5000-5001",
        "RTP/AVP;unicast;client_port=5000-5001;destination=10.1.2.3",
        "RTP/AVP;unicast",
        "RTP/AVP;multicast",
    ] {
        let r = c.setup(t, None);
        assert_eq!(r.status, 461, "{t}: {r:?}");
    }
    // Out of order: PAUSE while only set up; SETUP while playing.
    let r = c.setup("RTP/AVP/TCP;unicast;interleaved=0-1", None);
    assert_eq!(r.status, 200);
    let s = r.session();
    assert_eq!(c.req("PAUSE", &url, &[("Session", &s)]).status, 455);
    assert_eq!(c.play(&s, None).status, 200);
    assert_eq!(
        c.setup("RTP/AVP/TCP;unicast;interleaved=2-3", Some(&s))
            .status,
        455
    );
    // Aggregate control of another mount's presentation.
    let other = format!("rtsp://{}/other/trackID=0", server.addr);
    let r = c.req(
        "SETUP",
        &other,
        &[
            ("Transport", "RTP/AVP/TCP;interleaved=4-5"),
            ("Session", &s),
        ],
    );
    assert!(r.status == 459 || r.status == 404, "{r:?}");
    // A session is bound to its connection: another connection cannot use it.
    let mut thief = Client::connect(&server, "test");
    assert_eq!(thief.req("TEARDOWN", &url, &[("Session", &s)]).status, 454);
    assert_eq!(c.req("TEARDOWN", &url, &[("Session", &s)]).status, 200);
    let (_, log) = server.stop();
    assert!(!log.iter().any(|l| l.contains("panicked")), "{log:?}");
}

#[test]
fn a_silent_session_times_out_and_everything_is_reclaimed() {
    let mut args = small_test_source().to_vec();
    args.extend(["--rtsp-session-timeout", "2s"]);
    let server = RtspServer::start(&args);
    let mut c = Client::connect(&server, "test");
    let (rtp, _rtcp, port) = client_ports();
    let r = c.setup(
        &format!("RTP/AVP;unicast;client_port={}-{}", port, port + 1),
        None,
    );
    assert!(r.header("session").contains("timeout=2"), "{r:?}");
    let s = r.session();
    assert_eq!(c.play(&s, None).status, 200);
    let mut buf = [0u8; 2048];
    rtp.recv_from(&mut buf).expect("media flows");
    // No keep-alive and no receiver reports: gone after the timeout, and the media stops.
    std::thread::sleep(Duration::from_millis(3500));
    assert_stops(&rtp);
    // Its connection was as silent: closed with it, so that it costs nothing until the idle
    // timeout. The session is gone for a new connection too.
    let closed = c.r.fill_buf().map_or(true, |b| b.is_empty());
    assert!(closed, "the silent connection closes with its session");
    let mut c = Client::connect(&server, "test");
    let url = c.url.clone();
    assert_eq!(c.req("GET_PARAMETER", &url, &[("Session", &s)]).status, 454);
    // A keep-alive holds a session open past the timeout.
    let s = c
        .setup("RTP/AVP/TCP;unicast;interleaved=0-1", None)
        .session();
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(c.req("GET_PARAMETER", &url, &[("Session", &s)]).status, 200);
    }
    server.stop();
}

#[test]
fn a_file_plays_from_a_range_pauses_and_resumes() {
    let file = ts_file();
    let spec = format!("name=clip,source={}", file.display());
    let server = RtspServer::start(&["--stream", &spec]);
    let mut c = Client::connect(&server, "clip");
    let url = c.url.clone();
    let sdp = String::from_utf8(c.req("DESCRIBE", &url, &[]).body).unwrap();
    assert!(
        sdp.contains("a=range:npt=0-6") || sdp.contains("a=range:npt=0-5.9"),
        "{sdp}"
    );
    let s = c
        .setup("RTP/AVP/TCP;unicast;interleaved=0-1", None)
        .session();
    let r = c.play(&s, Some("npt=2-"));
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.header("range").starts_with("npt=2"), "{r:?}");
    for _ in 0..20 {
        c.read_frame();
    }
    let r = c.req("PAUSE", &url, &[("Session", &s)]);
    assert_eq!(r.status, 200);
    let r = c.play(&s, None);
    assert_eq!(r.status, 200);
    let start: f64 = r
        .header("range")
        .trim_start_matches("npt=")
        .split('-')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (2.0..6.0).contains(&start),
        "resumes where it paused: {r:?}"
    );
    assert_eq!(c.play(&s, Some("npt=60-")).status, 457, "past the end");
    server.stop();
}

#[test]
fn multicast_clients_share_the_mount_group() {
    let group = "rtp://239.255.42.7:5170?ttl=1&iface=127.0.0.1";
    let spec = format!("name=m,multicast={group},size=160x120,fps=10,bitrate=600kbit");
    let server = RtspServer::start(&["--stream", &spec]);
    let mut a = Client::connect(&server, "m");
    let r = a.setup("RTP/AVP;multicast", None);
    assert_eq!(r.status, 200, "{r:?}");
    let t = r.header("transport").to_string();
    assert!(
        t.contains("destination=239.255.42.7") && t.contains("port=5170-5171"),
        "{t}"
    );
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    sock.set_reuse_address(true).unwrap();
    sock.bind(&SocketAddr::from(([239, 255, 42, 7], 5170)).into())
        .unwrap();
    sock.join_multicast_v4(&Ipv4Addr::new(239, 255, 42, 7), &Ipv4Addr::LOCALHOST)
        .unwrap();
    let sock: UdpSocket = sock.into();
    sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let sa = r.session();
    assert_eq!(a.play(&sa, None).status, 200);
    let mut b = Client::connect(&server, "m");
    let sb = b.setup("RTP/AVP;multicast", None).session();
    assert_eq!(b.play(&sb, None).status, 200);
    let mut buf = [0u8; 2048];
    sock.recv_from(&mut buf)
        .expect("the group carries the stream");
    // The group keeps going while one member remains, and stops with the last.
    let url = a.url.clone();
    assert_eq!(a.req("TEARDOWN", &url, &[("Session", &sa)]).status, 200);
    sock.recv_from(&mut buf).expect("still flowing for b");
    assert_eq!(b.req("TEARDOWN", &url, &[("Session", &sb)]).status, 200);
    assert_stops(&sock);
    server.stop();
}

/// A mount that repairs and has a group announces, in its DESCRIBE, that its group stream
/// tells viewers which losses it is repairing (RFC 6642's TLLEI); one without a group does not.
#[test]
fn a_repairing_mount_with_a_group_announces_its_tllei() {
    let group = "rtp://239.255.42.9:5174?ttl=1&iface=127.0.0.1";
    let server = RtspServer::start(&[
        "--stream",
        &format!("name=m,multicast={group},repair=rtx,size=160x120,fps=10"),
        "--stream",
        "name=u,repair=rtx,size=160x120,fps=10",
    ]);
    for (mount, tllei) in [("m", true), ("u", false)] {
        let mut c = Client::connect(&server, mount);
        let url = c.url.clone();
        let r = c.req("DESCRIBE", &url, &[("Accept", "application/sdp")]);
        assert_eq!(r.status, 200, "{r:?}");
        let sdp = String::from_utf8(r.body).unwrap();
        assert!(sdp.contains("a=rtcp-fb:33 nack\r\n"), "{sdp}");
        assert_eq!(sdp.contains("a=rtcp-fb:33 nack tllei\r\n"), tllei, "{sdp}");
    }
    server.stop();
}

#[test]
fn many_clients_at_once_each_get_their_stream() {
    let file = ts_file();
    let spec = format!("name=clip,source={},loop=true", file.display());
    let server = RtspServer::start(&["--stream", &spec]);
    let clients = 24;
    let handles: Vec<_> = (0..clients)
        .map(|i| {
            let addr = server.addr;
            let url = server.url("clip");
            std::thread::spawn(move || {
                let s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut c = Client {
                    r: BufReader::new(s.try_clone().unwrap()),
                    w: s,
                    cseq: 0,
                    url: url.clone(),
                };
                let t = format!(
                    "RTP/AVP/TCP;unicast;interleaved={}-{}",
                    2 * (i % 4),
                    2 * (i % 4) + 1
                );
                let r = c.setup(&t, None);
                assert_eq!(r.status, 200, "client {i}: {r:?}");
                let s = r.session();
                assert_eq!(c.play(&s, None).status, 200, "client {i}");
                let mut rtp = 0;
                while rtp < 100 {
                    let (ch, _) = c.read_frame();
                    if ch == 2 * (i % 4) as u8 {
                        rtp += 1;
                    }
                }
                assert_eq!(c.req("TEARDOWN", &url, &[("Session", &s)]).status, 200);
                rtp
            })
        })
        .collect();
    for h in handles {
        // Each client returns only once it has read 100 RTP frames; a failure panics.
        h.join().unwrap();
    }
    // The server is still there, with nothing left over.
    let mut c = Client::connect(&server, "clip");
    assert_eq!(c.req("OPTIONS", "*", &[]).status, 200);
    server.stop();
}

#[test]
fn idle_connections_are_closed_and_receiver_reports_are_read() {
    let mut args = small_test_source().to_vec();
    args.extend(["--rtsp-idle-timeout", "1s"]);
    let server = RtspServer::start(&args);
    // A connection that says nothing is closed after the idle timeout.
    let mut idle = TcpStream::connect(server.addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 16];
    assert_eq!(idle.read(&mut b).unwrap(), 0, "closed by the server");
    // A receiver report sent on the RTCP channel reaches the stream's statistics.
    let mut c = Client::connect(&server, "test");
    let r = c.setup("RTP/AVP/TCP;unicast;interleaved=0-1", None);
    let ssrc = ssrc_of(&r);
    let s = r.session();
    assert_eq!(c.play(&s, None).status, 200);
    for _ in 0..20 {
        c.read_frame();
    }
    c.w.write_all(&interleaved_rr(ssrc)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let url = c.url.clone();
    assert_eq!(c.req("TEARDOWN", &url, &[("Session", &s)]).status, 200);
    let (summary, _) = server.stop();
    assert!(
        summary.contains("1 reports, lost 3, jitter 1.00 ms"),
        "the report shows in the summary:\n{summary}"
    );
}

#[test]
fn receiver_reports_keep_a_session_alive_after_pause_and_play() {
    let mut args = small_test_source().to_vec();
    args.extend(["--rtsp-session-timeout", "2s"]);
    let server = RtspServer::start(&args);
    let mut c = Client::connect(&server, "test");
    let r = c.setup("RTP/AVP/TCP;unicast;interleaved=0-1", None);
    let (ssrc, s) = (ssrc_of(&r), r.session());
    let url = c.url.clone();
    assert_eq!(c.play(&s, None).status, 200);
    // More reports before the pause than after it: the count must start again with the
    // resumed stream.
    for _ in 0..12 {
        c.w.write_all(&interleaved_rr(ssrc)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(c.req("PAUSE", &url, &[("Session", &s)]).status, 200);
    assert_eq!(c.play(&s, None).status, 200);
    // From here on only receiver reports, no requests, for twice the timeout.
    let report = interleaved_rr(ssrc);
    alive_on_reports_alone(&mut c, &s, |c| c.w.write_all(&report).unwrap());
    server.stop();
}

/// Whether session `s`, with a 2 s timeout, is still alive after 4 s of no requests but a
/// receiver report every half second (`send` sends one).
fn alive_on_reports_alone(c: &mut Client, s: &str, mut send: impl FnMut(&mut Client)) {
    for _ in 0..8 {
        send(c);
        std::thread::sleep(Duration::from_millis(500));
    }
    let url = c.url.clone();
    assert_eq!(
        c.req("GET_PARAMETER", &url, &[("Session", s)]).status,
        200,
        "the reports kept the resumed session alive"
    );
}

/// After PAUSE and PLAY the session's stream is a new one with its SSRC: a client's reports
/// that still echo a sender report from before the pause (its first ones do) are taken, and
/// keep the session alive, rather than dropped as forged. A raw mount's sessions too, whose
/// every PLAY starts a sender of its own.
#[test]
fn reports_echoing_a_sender_report_from_before_a_pause_are_taken_after_play() {
    let mut args = small_test_source().to_vec();
    args.extend(["--rtsp-session-timeout", "2s"]);
    echoes_from_before_a_pause_are_taken(&args, "test");
    let raw = [
        "--raw", "--size", "160x120", "--fps", "25", "--pacing", "burst",
    ];
    let mut args = raw.to_vec();
    args.extend(["--rtsp-session-timeout", "2s"]);
    echoes_from_before_a_pause_are_taken(&args, "raw");
}

/// A server with `args` (a 2 s session timeout): a session of `mount` played over UDP, paused
/// and played again, is kept alive by reports echoing its first stream's first sender report.
fn echoes_from_before_a_pause_are_taken(args: &[&str], mount: &str) {
    let server = RtspServer::start(args);
    let mut c = Client::connect(&server, mount);
    let (_rtp, rtcp, port) = client_ports();
    let r = c.setup(
        &format!("RTP/AVP;unicast;client_port={port}-{}", port + 1),
        None,
    );
    assert_eq!(r.status, 200, "{r:?}");
    let (ssrc, s) = (ssrc_of(&r), r.session());
    let url = c.url.clone();
    assert_eq!(c.play(&s, None).status, 200);
    // The stream's first sender report: the middle of its NTP time, and where it came from.
    let mut buf = [0u8; 1500];
    let (lsr, server_rtcp) = loop {
        let (n, from) = rtcp.recv_from(&mut buf).expect("no sender report");
        if n >= 16 && buf[1] == 200 {
            break (u32::from_be_bytes(buf[10..14].try_into().unwrap()), from);
        }
    };
    assert_eq!(c.req("PAUSE", &url, &[("Session", &s)]).status, 200);
    assert_eq!(c.play(&s, None).status, 200);
    // From here on only reports echoing that one, no requests, for twice the timeout.
    let report = rr_echoing(ssrc, lsr);
    alive_on_reports_alone(&mut c, &s, |_| {
        rtcp.send_to(&report, server_rtcp).unwrap();
    });
    server.stop();
}

/// A Content-Length that cannot be honoured (2^63, or given twice) is answered (413, 400) with
/// `Connection: close`, and the connection then closes instead of swallowing what follows;
/// other connections are served as before.
#[test]
fn an_untrustworthy_content_length_is_answered_and_the_connection_closed() {
    use std::io::Read;
    let server = RtspServer::start(&small_test_source());
    for (head, status) in [
        (
            "SET_PARAMETER * RTSP/1.0\r\nCSeq: 4\r\nContent-Length: 9223372036854775808\r\n\r\n",
            413,
        ),
        (
            "OPTIONS * RTSP/1.0\r\nCSeq: 4\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
            400,
        ),
    ] {
        let mut c = Client::connect(&server, "test");
        let r = c.raw(head.as_bytes());
        assert_eq!(r.status, status, "{r:?}");
        assert_eq!(r.header("connection"), "close", "{r:?}");
        assert_eq!(r.header("cseq"), "4", "{r:?}");
        // A request that follows is not answered: the server has closed the connection.
        let _ = c.w.write_all(b"OPTIONS * RTSP/1.0\r\nCSeq: 5\r\n\r\n");
        let mut rest = Vec::new();
        // The end of the stream (or a reset): no answer to the second request.
        let _ = c.r.read_to_end(&mut rest);
        assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
        assert_eq!(
            Client::connect(&server, "test")
                .req("OPTIONS", "*", &[])
                .status,
            200
        );
    }
    server.stop();
}

/// A log line for each client that connects, plays, tears down and leaves (-v/-q/RUST_LOG
/// choose how many; info by default); -q keeps them out.
#[test]
fn each_client_that_connects_plays_and_leaves_gets_a_log_line() {
    for quiet in [false, true] {
        let mut args = small_test_source().to_vec();
        if quiet {
            args.push("-q");
        }
        let server = RtspServer::start(&args);
        let mut c = Client::connect(&server, "test");
        let r = c.setup("RTP/AVP/TCP;unicast;interleaved=0-1", None);
        assert_eq!(r.status, 200);
        let s = r.session();
        assert_eq!(c.play(&s, None).status, 200);
        let url = c.url.clone();
        assert_eq!(c.req("TEARDOWN", &url, &[("Session", &s)]).status, 200);
        drop(c);
        std::thread::sleep(Duration::from_millis(500));
        let (_, lines) = server.stop();
        let log = lines.join("\n");
        let said = |what: &str| {
            lines
                .iter()
                .any(|l| l.contains("metronome::rtsp") && l.contains(what))
        };
        if quiet {
            assert!(!said("connected"), "{log}");
        } else {
            for what in [
                "connected (connection",
                " plays rtsp://",
                " tears down rtsp://",
                "left (connection",
            ] {
                assert!(said(what), "no '{what}' in:\n{log}");
            }
        }
    }
}
