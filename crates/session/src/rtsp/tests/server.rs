//! Methods other than SETUP, sessions, timeouts and teardown.

use super::*;

#[test]
fn options_lists_the_methods() {
    let mut h = Harness::new();
    for url in ["*", "live"] {
        let r = h.send(1, "OPTIONS", url, &[]);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Public").as_deref(), Some(PUBLIC_METHODS));
        assert_eq!(r.header("Server").as_deref(), Some("metronome"));
        assert!(r.text.starts_with("RTSP/1.0 200 OK\r\n"), "{}", r.text);
    }
}

#[test]
fn describe_returns_the_sdp_and_content_base() {
    let mut h = Harness::new();
    for url in ["live", "live/", "live?x=1"] {
        let r = h.send(1, "DESCRIBE", url, &["Accept: application/sdp"]);
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.header("Content-Type").as_deref(), Some("application/sdp"));
        assert_eq!(
            r.header("Content-Base").as_deref(),
            Some("rtsp://192.0.2.1/live/")
        );
        assert_eq!(r.body(), SDP.as_bytes());
        assert_eq!(r.header("Content-Length"), Some(SDP.len().to_string()));
    }
    let r = h.send(1, "DESCRIBE", "file", &["Accept: text/html, */*;q=0.1"]);
    assert_eq!(r.status, 200);
}

#[test]
fn describe_errors() {
    let mut h = Harness::new();
    assert_eq!(h.send(1, "DESCRIBE", "nope", &[]).status, 404);
    assert_eq!(h.send(1, "DESCRIBE", "", &[]).status, 404);
    assert_eq!(h.send(1, "DESCRIBE", "live/trackID=1", &[]).status, 404);
    assert_eq!(h.send(1, "DESCRIBE", "*", &[]).status, 400);
    for accept in [
        "text/html",
        "application/sdp;q=0",
        "application/json, text/*",
    ] {
        let r = h.send(1, "DESCRIBE", "live", &[&format!("Accept: {accept}")]);
        assert_eq!(r.status, 406, "{accept}");
        assert!(r.header(REASON_HEADER).is_some());
    }
}

#[test]
fn requests_without_a_valid_cseq_get_400() {
    let mut h = Harness::new();
    for text in [
        "OPTIONS * RTSP/1.0\r\n\r\n",
        "OPTIONS * RTSP/1.0\r\nCSeq: abc\r\n\r\n",
        "OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nCSeq: 2\r\n\r\n",
        "OPTIONS * RTSP/1.0\r\nCSeq: 99999999999\r\n\r\n",
    ] {
        let r = h.raw(1, text);
        assert_eq!(r.status, 400, "{text}");
        assert_eq!(r.header("CSeq"), None);
        assert!(r.text.starts_with("RTSP/1.0 400 Bad Request\r\n"));
    }
}

#[test]
fn other_versions_get_505() {
    let mut h = Harness::new();
    let req = rtsp_types::Request::builder(rtsp_types::Method::Options, rtsp_types::Version::V2_0)
        .header(rtsp_types::headers::CSEQ, "7")
        .build(Vec::new());
    let resp =
        Resp::new(
            h.server
                .handle_request(h.now, ConnId(1), peer(), local(), &req, &mut h.backend),
        );
    assert_eq!(resp.status, 505);
    assert_eq!(resp.header("CSeq").as_deref(), Some("7"));
}

#[test]
fn framing_errors_are_answered_with_their_status_and_cseq() {
    let h = Harness::new();
    let mut framer = Framer::new(FramerLimits::default());
    framer.push(b"OPTIONS * RTSP/2.0\r\nCSeq: 5\r\n\r\n");
    let err = framer.next_frame().unwrap().unwrap_err();
    let r = Resp::new(h.server.error_response(&err));
    assert_eq!(r.status, 505);
    assert_eq!(r.header("CSeq").as_deref(), Some("5"));
    assert!(r.header(REASON_HEADER).unwrap().contains("RTSP/2.0"));
    assert!(r
        .text
        .starts_with("RTSP/1.0 505 RTSP Version Not Supported\r\n"));
}

#[test]
fn methods_we_do_not_serve() {
    let mut h = Harness::new();
    for method in ["ANNOUNCE", "RECORD", "REDIRECT"] {
        let r = h.send(1, method, "live", &[]);
        assert_eq!(r.status, 405, "{method}");
        assert_eq!(r.header("Allow").as_deref(), Some(PUBLIC_METHODS));
    }
    for method in ["FOO", "setup", "GET"] {
        assert_eq!(h.send(1, method, "live", &[]).status, 501, "{method}");
    }
    let r = h.send(1, "OPTIONS", "*", &["Require: implicit-play"]);
    assert_eq!(r.status, 551);
    assert_eq!(r.header("Unsupported").as_deref(), Some("implicit-play"));
}

#[test]
fn play_pause_resume_teardown_on_a_file() {
    let mut h = Harness::new();
    let s = h.setup(1, "file");
    let id = Harness::id(&s);
    assert_eq!(
        h.server.session_info(id).unwrap().state,
        SessionState::Ready
    );

    let r = h.play(1, "file", &s, &["Range: npt=0.000-"]);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("Range").as_deref(), Some("npt=0.000-"));
    assert_eq!(
        r.header("RTP-Info").as_deref(),
        Some("url=rtsp://192.0.2.1/file/trackID=0;seq=4321;rtptime=987654")
    );
    assert_eq!(r.session(), s);
    assert_eq!(
        h.server.session_info(id).unwrap().state,
        SessionState::Playing
    );

    // PLAY while playing: the same answer, the backend is not asked again.
    let again = h.play(1, "file", &s, &[]);
    assert_eq!(again.status, 200);
    assert_eq!(again.header("RTP-Info"), r.header("RTP-Info"));

    assert_eq!(
        h.send(1, "PAUSE", "file/", &[&format!("Session: {s}")])
            .status,
        200
    );
    let info = h.server.session_info(id).unwrap();
    assert_eq!(info.state, SessionState::Ready);
    assert_eq!(info.paused_at, Some(Duration::from_secs(12)));

    // Resumes where PAUSE stopped.
    let r = h.play(1, "file", &s, &[]);
    assert_eq!(r.header("Range").as_deref(), Some("npt=12.000-"));

    // A seek while playing: pause, then play from the new position.
    let r = h.play(1, "file", &s, &["Range: npt=30.5-40"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Range").as_deref(), Some("npt=30.500-"));

    assert_eq!(
        h.send(1, "TEARDOWN", "file/", &[&format!("Session: {s}")])
            .status,
        200
    );
    assert_eq!(h.server.sessions(), 0);
    let secs = |s| Some(Duration::from_secs(s));
    assert_eq!(
        h.backend.actions()[1..],
        [
            Call::Play(id, secs(0)),
            Call::Pause(id),
            Call::Play(id, secs(12)),
            Call::Pause(id),
            Call::Play(id, Some(Duration::from_millis(30_500))),
            Call::Teardown(id),
        ]
    );
}

#[test]
fn live_streams_take_ranges_that_start_now_and_refuse_others() {
    let mut h = Harness::new();
    let s = h.setup(1, "live");
    let id = Harness::id(&s);
    // What players send to a live stream: no Range, now, or 0 (FFmpeg's npt=0.000-).
    for range in ["npt=now-", "npt=0.000-", "npt=0-", "npt"] {
        let r = h.play(1, "live", &s, &[&format!("Range: {range}")]);
        assert_eq!(r.status, 200, "{range}");
        assert_eq!(
            h.send(1, "PAUSE", "live", &[&format!("Session: {s}")])
                .status,
            200
        );
    }
    // A start in the stream's past or future, another unit, a malformed range: 457.
    for range in ["npt=1000-", "clock=19961108T142300Z-", "garbage", "npt=x-"] {
        let r = h.play(1, "live", &s, &[&format!("Range: {range}")]);
        assert_eq!(r.status, 457, "{range}");
    }
    // Scale: 1 is served; another speed is not; not a number is a bad request.
    assert_eq!(h.play(1, "live", &s, &["Scale: 1.0"]).status, 200);
    assert_eq!(
        h.send(1, "PAUSE", "live", &[&format!("Session: {s}")])
            .status,
        200
    );
    assert_eq!(h.play(1, "live", &s, &["Scale: 2"]).status, 457);
    assert_eq!(h.play(1, "live", &s, &["Scale: fast"]).status, 400);
    assert!(h.backend.actions().contains(&Call::Play(id, None)));
    assert!(!h
        .backend
        .actions()
        .iter()
        .any(|c| matches!(c, Call::Play(_, Some(_)))));
}

#[test]
fn invalid_ranges_on_files_get_457() {
    let mut h = Harness::new();
    let s = h.setup(1, "file");
    for range in [
        "npt=60-",
        "npt=70.5-80",
        "npt=0:01:00-",
        "clock=19961108T142300Z-",
        "npt=x-",
        "npt=-",
    ] {
        let r = h.play(1, "file", &s, &[&format!("Range: {range}")]);
        assert_eq!(r.status, 457, "{range}");
    }
    for range in ["npt=59.999-", "npt=now-", "npt=0:00:30-"] {
        let r = h.play(1, "file", &s, &[&format!("Range: {range}")]);
        assert_eq!(r.status, 200, "{range}");
        assert_eq!(
            h.send(1, "PAUSE", "file", &[&format!("Session: {s}")])
                .status,
            200
        );
    }
}

#[test]
fn state_errors_get_455() {
    let mut h = Harness::new();
    // PLAY and PAUSE before SETUP (Init).
    assert_eq!(h.send(1, "PLAY", "live", &[]).status, 455);
    assert_eq!(h.send(1, "PAUSE", "live", &[]).status, 455);
    let s = h.setup(1, "live");
    // PAUSE in Ready (RFC 2326 Appendix A).
    assert_eq!(
        h.send(1, "PAUSE", "live", &[&format!("Session: {s}")])
            .status,
        455
    );
    assert_eq!(h.play(1, "live", &s, &[]).status, 200);
    assert!(h
        .backend
        .actions()
        .iter()
        .all(|c| !matches!(c, Call::Pause(_))));
}

#[test]
fn unknown_and_foreign_sessions_get_454() {
    let mut h = Harness::new();
    let s = h.setup(1, "live");
    let unknown = "0123456789abcdef0123456789abcdef";
    for method in [
        "PLAY",
        "PAUSE",
        "TEARDOWN",
        "GET_PARAMETER",
        "SET_PARAMETER",
        "SETUP",
    ] {
        for (conn, session) in [(1, unknown), (2, s.as_str()), (1, "not-hex"), (1, "")] {
            let r = h.send(
                conn,
                method,
                "live/trackID=0",
                &[
                    &format!("Session: {session}"),
                    "Transport: RTP/AVP;unicast;client_port=5000-5001",
                ],
            );
            assert_eq!(r.status, 454, "{method} {conn} {session}");
        }
    }
    // Nothing happened to the session, which still belongs to connection 1.
    assert_eq!(h.backend.actions().len(), 1);
    assert_eq!(h.play(1, "live", &s, &[]).status, 200);
    // OPTIONS ignores a session it does not know.
    assert_eq!(
        h.send(2, "OPTIONS", "*", &[&format!("Session: {s}")])
            .status,
        200
    );
}

#[test]
fn aggregate_urls_must_name_the_session_mount() {
    let mut h = Harness::new();
    let s = h.setup(1, "live");
    assert_eq!(h.play(1, "file", &s, &[]).status, 459);
    for url in [
        "live",
        "live/",
        "live/trackID=0",
        "live/streamid=0",
        "live/stream=0",
    ] {
        assert_eq!(
            h.play(1, url.trim_end_matches('/'), &s, &[]).status,
            200,
            "{url}"
        );
    }
}

#[test]
fn parameters_keep_alive_and_refuse_names() {
    let mut h = Harness::new();
    let s = h.setup(1, "live");
    let session = format!("Session: {s}");
    for method in ["GET_PARAMETER", "SET_PARAMETER"] {
        let r = h.send(1, method, "live", &[&session]);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Session"), Some(format!("{s};timeout=60")));
        assert_eq!(h.send(1, method, "*", &[]).status, 200);
        let text = format!(
            "{method} {BASE}live RTSP/1.0\r\nCSeq: 99\r\n{session}\r\n\
             Content-Type: text/parameters\r\nContent-Length: 10\r\n\r\nposition\r\n"
        );
        assert_eq!(h.raw(1, &text).status, 451, "{method}");
    }
}

#[test]
fn silent_sessions_time_out_once() {
    let mut h = Harness::new();
    h.now = Timestamp::ZERO;
    let s = h.setup(1, "live");
    let id = Harness::id(&s);
    assert_eq!(h.server.poll_timeout(), Some(Timestamp::from_secs(60)));
    assert!(h
        .server
        .handle_timeout(Timestamp::from_secs(59), &mut h.backend)
        .is_empty());

    // A keep-alive request and an RTCP receiver report both push the expiry back.
    h.now = Timestamp::from_secs(30);
    assert_eq!(
        h.send(1, "GET_PARAMETER", "live", &[&format!("Session: {s}")])
            .status,
        200
    );
    assert_eq!(h.server.poll_timeout(), Some(Timestamp::from_secs(90)));
    h.server.touch(id, Timestamp::from_secs(80));
    h.server.touch(id, Timestamp::from_secs(70)); // never backwards
    assert_eq!(h.server.poll_timeout(), Some(Timestamp::from_secs(140)));
    assert_eq!(
        h.server.session_info(id).unwrap().expires,
        Timestamp::from_secs(140)
    );

    assert!(h
        .server
        .handle_timeout(Timestamp::from_secs(139), &mut h.backend)
        .is_empty());
    assert_eq!(
        h.server
            .handle_timeout(Timestamp::from_secs(140), &mut h.backend),
        [id]
    );
    assert_eq!(h.server.sessions(), 0);
    assert_eq!(h.server.poll_timeout(), None);
    h.now = Timestamp::from_secs(141);
    assert_eq!(
        h.send(1, "TEARDOWN", "live", &[&format!("Session: {s}")])
            .status,
        454
    );
    assert!(h
        .server
        .handle_timeout(Timestamp::MAX, &mut h.backend)
        .is_empty());
    assert!(h
        .server
        .connection_closed(ConnId(1), &mut h.backend)
        .is_empty());
    assert_eq!(h.backend.teardowns(), [id]);
}

#[test]
fn closing_a_connection_tears_down_its_sessions_once() {
    let mut h = Harness::new();
    let a = Harness::id(&h.setup(1, "live"));
    let b = Harness::id(&h.setup(1, "file"));
    let c = Harness::id(&h.setup(2, "live"));
    let mut closed = h.server.connection_closed(ConnId(1), &mut h.backend);
    closed.sort();
    let mut expected = vec![a, b];
    expected.sort();
    assert_eq!(closed, expected);
    assert_eq!(h.server.sessions(), 1);
    assert!(h
        .server
        .connection_closed(ConnId(1), &mut h.backend)
        .is_empty());
    let infos: Vec<SessionInfo> = h.server.session_infos().collect();
    assert_eq!(infos.len(), 1);
    assert_eq!((infos[0].id, infos[0].conn), (c, ConnId(2)));

    // TEARDOWN, then the connection closing, then time passing: one backend teardown.
    assert_eq!(
        h.send(2, "TEARDOWN", "live", &[&format!("Session: {:032x}", c.0)])
            .status,
        200
    );
    assert!(h
        .server
        .connection_closed(ConnId(2), &mut h.backend)
        .is_empty());
    assert!(h
        .server
        .handle_timeout(Timestamp::MAX, &mut h.backend)
        .is_empty());
    let mut torn = h.backend.teardowns();
    torn.sort();
    let mut all = vec![a, b, c];
    all.sort();
    assert_eq!(torn, all);
    // TEARDOWN without a session is valid in Init and does nothing.
    assert_eq!(h.send(2, "TEARDOWN", "live", &[]).status, 200);
    assert_eq!(h.backend.teardowns().len(), 3);
}

#[test]
fn refusals_map_to_their_status_with_a_safe_reason() {
    let cases = [
        (Refusal::NotFound, 404),
        (
            Refusal::NotEnoughBandwidth("link full\r\nX-Evil: 1".into()),
            453,
        ),
        (Refusal::UnsupportedTransport("no".into()), 461),
        (Refusal::InvalidRange("no".into()), 457),
        (Refusal::Unavailable("ports".into()), 503),
        (Refusal::Internal("oops".into()), 500),
    ];
    for (refusal, status) in cases {
        let mut h = Harness::new();
        h.backend.setup_refusal = Some(refusal.clone());
        let r = h.send(
            1,
            "SETUP",
            "live",
            &["Transport: RTP/AVP;unicast;client_port=5000-5001"],
        );
        assert_eq!(r.status, status);
        assert!(!r.text.contains("\r\nX-Evil"), "{}", r.text);
        assert!(r
            .header(REASON_HEADER)
            .unwrap()
            .contains(&refusal.to_string()[..6]));
        assert_eq!(h.server.sessions(), 0, "a refused SETUP makes no session");

        // The same refusal from PLAY leaves the session Ready.
        h.backend.setup_refusal = None;
        h.backend.play_refusal = Some(refusal);
        let s = h.setup(1, "live");
        assert_eq!(h.play(1, "live", &s, &[]).status, status);
        let info = h.server.session_info(Harness::id(&s)).unwrap();
        assert_eq!(info.state, SessionState::Ready);
        assert!(h.backend.teardowns().is_empty());
    }
}

#[test]
fn session_ids_are_random_and_seeded() {
    let ids = |seed| {
        let mut h = Harness::with(RtspConfig {
            seed,
            ..RtspConfig::default()
        });
        [h.setup(1, "live"), h.setup(1, "live")]
    };
    let [a, b] = ids([7; 32]);
    assert_eq!(a.len(), 32);
    assert!(a
        .bytes()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    assert_ne!(a, b);
    assert_eq!(ids([7; 32]), [a.clone(), b]);
    assert_ne!(ids([8; 32])[0], a);
}
