use super::parse::*;
use super::*;
use std::io::BufRead;
use std::net::TcpListener;
use std::sync::mpsc;

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

#[test]
fn controls_resolve_like_ffmpeg_and_gstreamer() {
    let b = url("rtsp://h:8554/live");
    let r = |c: Option<&str>| resolve_control(&b, c).unwrap().to_string();
    assert_eq!(r(None), "rtsp://h:8554/live");
    assert_eq!(r(Some("*")), "rtsp://h:8554/live");
    assert_eq!(r(Some("trackID=0")), "rtsp://h:8554/live/trackID=0");
    assert_eq!(
        r(Some("rtsp://other/x/stream=1")),
        "rtsp://other/x/stream=1"
    );
    assert_eq!(r(Some("/abs/track")), "rtsp://h:8554/abs/track");
    let slash = url("rtsp://h:8554/test/");
    assert_eq!(
        resolve_control(&slash, Some("stream=0"))
            .unwrap()
            .to_string(),
        "rtsp://h:8554/test/stream=0"
    );
}

#[test]
fn session_and_transport_headers() {
    assert_eq!(
        parse_session("abc123;timeout=30"),
        Some(("abc123".into(), Duration::from_secs(30)))
    );
    assert_eq!(
        parse_session(" 9F2 ; Timeout = 8"),
        Some(("9F2".into(), Duration::from_secs(8)))
    );
    assert_eq!(
        parse_session("x;timeout=soon"),
        Some(("x".into(), DEFAULT_SESSION_TIMEOUT))
    );
    assert_eq!(parse_session(";timeout=5"), None);
    let t = parse_transport(
        "RTP/AVP;multicast;destination=239.255.42.1;ttl=1;port=5000-5001;mode=\"PLAY\",RTP/AVP;unicast",
    );
    assert!(t.multicast);
    assert_eq!(t.destination_ip(), Some("239.255.42.1".parse().unwrap()));
    assert_eq!((t.port, t.ttl), (Some((5000, Some(5001))), Some(1)));
    let t = parse_transport("RTP/AVP/TCP;unicast;interleaved=2-3;ssrc=DEADBEEF");
    assert_eq!(t.interleaved, Some((2, Some(3))));
    assert_eq!(t.ssrc, Some(metronome_wire::Ssrc(0xdead_beef)));
    let t = parse_transport(
        "RTP/AVP;unicast;client_port=5004-5005;server_port=6970-6971;source=10.0.0.1",
    );
    assert_eq!(t.client_port, Some((5004, Some(5005))));
    assert_eq!(t.server_port, Some((6970, Some(6971))));
    assert_eq!(t.source_ip(), Some("10.0.0.1".parse().unwrap()));
    // rtsp-types' own parser asserts on this one; ours shrugs, and says what it could not read.
    let t = parse_transport("RTP/AVP;dest_addr=\"\\\";client_port=x-");
    assert_eq!((t.client_port, t.destination_ip()), (None, None));
    assert_eq!(t.rtsp2_parameter, Some("dest_addr"));
    // The quote opened in dest_addr never closes: the rest is its value, not a client_port.
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    let t = parse_transport("RTP/AVP;unicast;client_port=x-");
    assert_eq!(t.errors, vec!["bad client_port \"x-\"".to_string()]);
}

#[test]
fn framing_is_bounded() {
    assert_eq!(split_frame(b""), Ok(None));
    assert_eq!(split_frame(b"\r\n$"), Ok(Some(Split::Skip(2))));
    assert_eq!(split_frame(b"$\x00\x00"), Ok(None));
    assert_eq!(
        split_frame(b"$\x01\x00\x02ab"),
        Ok(Some(Split::Data { channel: 1, len: 2 }))
    );
    assert_eq!(split_frame(b"$\x01\x00\x03ab"), Ok(None));
    let m = b"RTSP/1.0 200 OK\r\nCSeq: 1\r\ncontent-length: 3\r\n\r\nabc";
    assert_eq!(split_frame(m), Ok(Some(Split::Message(m.len()))));
    assert_eq!(split_frame(&m[..m.len() - 1]), Ok(None));
    let big = format!(
        "RTSP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n",
        MAX_BODY_BYTES + 1
    );
    assert!(split_frame(big.as_bytes()).unwrap_err().contains("64 KiB"));
    let long = vec![b'a'; MAX_HEAD_BYTES + 1];
    assert!(split_frame(&long).unwrap_err().contains("16 KiB"));
    let bad = b"RTSP/1.0 200 OK\r\nContent-Length: -1\r\n\r\n";
    assert!(split_frame(bad).unwrap_err().contains("Content-Length"));
}

/// A scripted server: answers each request with what `answer` returns for (method, cseq,
/// request text), then writes `after` (raw bytes) once PLAY is answered. The requests come
/// back on the channel.
fn mock(
    answer: impl Fn(&str, u32, &str) -> String + Send + 'static,
    after_play: Vec<u8>,
) -> (String, mpsc::Receiver<String>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = std::io::BufReader::new(s);
        loop {
            let mut req = String::new();
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                if line == "\r\n" && !req.is_empty() {
                    break;
                }
                req.push_str(&line);
            }
            let method = req.split(' ').next().unwrap_or("").to_string();
            let cseq = req
                .lines()
                .find_map(|l| l.strip_prefix("CSeq: "))
                .and_then(|c| c.trim().parse().ok())
                .unwrap_or(0);
            let _ = tx.send(req.clone());
            let _ = w.write_all(answer(&method, cseq, &req).as_bytes());
            if method == "PLAY" {
                let _ = w.write_all(&after_play);
            }
        }
    });
    (format!("rtsp://127.0.0.1:{port}/live"), rx)
}

fn ok(cseq: u32, extra: &str, body: &str) -> String {
    let cl = if body.is_empty() {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    format!("RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\n{extra}{cl}\r\n{body}")
}

const SDP: &str = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=x\r\nc=IN IP4 0.0.0.0\r\nt=0 0\r\na=control:*\r\nm=video 0 RTP/AVP 33\r\na=rtpmap:33 MP2T/90000\r\na=control:trackID=0\r\n";

#[test]
fn interleaved_session_end_to_end() {
    let mut after = Vec::new();
    after.extend_from_slice(b"$\x00\x00\x03abc");
    after.extend_from_slice(b"$\x01\x00\x01z");
    after.extend_from_slice(b"$\x00\x00\x02de");
    let (u, reqs) = mock(
        |m, c, _| match m {
            "OPTIONS" => ok(
                c,
                "Public: OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN\r\n",
                "",
            ),
            "DESCRIBE" => ok(
                c,
                "Content-Type: application/sdp\r\nContent-Base: rtsp://127.0.0.1/base/\r\n",
                SDP,
            ),
            "SETUP" => ok(
                c,
                "Session: s1;timeout=4\r\nTransport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n",
                "",
            ),
            _ => ok(c, "Session: s1\r\n", ""),
        },
        after,
    );
    let mut c = RtspClient::connect(&u, &RtspClientConfig::default()).unwrap();
    let public = c.options().unwrap();
    assert!(public.contains(&"DESCRIBE".to_string()));
    let d = c.describe().unwrap();
    assert_eq!(d.base.as_str(), "rtsp://127.0.0.1/base/");
    let media = d.media_url(0).unwrap();
    assert_eq!(media.as_str(), "rtsp://127.0.0.1/base/trackID=0");
    let s = c.setup(&media, TransportRequest::Tcp).unwrap();
    assert_eq!(s.session, "s1");
    assert_eq!(s.timeout, Duration::from_secs(4));
    assert_eq!(c.keep_alive_interval(), Duration::from_secs(2));
    assert_eq!(
        s.transport,
        Transport::Interleaved {
            rtp_channel: 0,
            rtcp_channel: 1
        }
    );
    c.play(&d.aggregate_url()).unwrap();
    // No GET_PARAMETER in Public: keep-alives are OPTIONS, answered in the data stream.
    c.send_keep_alive().unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        if let Some((ch, data)) = c.read_interleaved().unwrap() {
            got.push((ch, data.to_vec()));
        }
    }
    assert_eq!(
        got,
        vec![
            (0, b"abc".to_vec()),
            (1, b"z".to_vec()),
            (0, b"de".to_vec())
        ]
    );
    drop(c);
    let all: Vec<String> = reqs.iter().collect();
    let methods: Vec<&str> = all.iter().map(|r| r.split(' ').next().unwrap()).collect();
    assert_eq!(
        methods,
        ["OPTIONS", "DESCRIBE", "SETUP", "PLAY", "OPTIONS", "TEARDOWN"]
    );
    assert!(all[2].starts_with("SETUP rtsp://127.0.0.1/base/trackID=0 RTSP/1.0\r\n"));
    assert!(all[2].contains("Transport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n"));
    assert!(all[3].starts_with("PLAY rtsp://127.0.0.1/base/ RTSP/1.0\r\n"));
    assert!(all[3].contains("Session: s1\r\n"), "{}", all[3]);
    assert!(all[5].contains("Session: s1\r\n"));
}

#[test]
fn udp_setup_and_keep_alive_thread() {
    let (u, reqs) = mock(
        |m, c, _| {
            match m {
            "OPTIONS" => ok(c, "Public: OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN, GET_PARAMETER\r\n", ""),
            "DESCRIBE" => ok(c, "Content-Type: application/sdp\r\n", SDP),
            "SETUP" => ok(
                c,
                "Session: 77;timeout=2\r\nTransport: RTP/AVP;unicast;client_port=40000-40001;server_port=6970-6971\r\n",
                "",
            ),
            _ => ok(c, "", ""),
        }
        },
        Vec::new(),
    );
    let mut c = RtspClient::connect(&u, &RtspClientConfig::default()).unwrap();
    c.options().unwrap();
    let d = c.describe().unwrap();
    // No Content-Base: the request URL is the base.
    assert_eq!(d.media_url(0).unwrap().as_str(), format!("{u}/trackID=0"));
    let s = c
        .setup(
            &d.media_url(0).unwrap(),
            TransportRequest::Udp { rtp_port: 40000 },
        )
        .unwrap();
    assert_eq!(
        s.transport,
        Transport::Udp {
            client_rtp_port: 40000,
            server_rtp_port: Some(6970),
            source: None
        }
    );
    c.play(&d.aggregate_url()).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let t = std::thread::spawn(move || c.keep_alive_until(&st));
    // Timeout 2 s: a keep-alive every second.
    let mut seen = Vec::new();
    while !seen.iter().any(|m: &String| m == "GET_PARAMETER") {
        let r = reqs.recv_timeout(Duration::from_secs(3)).unwrap();
        seen.push(r.split(' ').next().unwrap().to_string());
    }
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap().unwrap();
    let r = reqs.recv_timeout(Duration::from_secs(3)).unwrap();
    assert!(r.starts_with("TEARDOWN "), "{r}");
    assert!(r.contains("Session: 77\r\n"));
}

#[test]
fn errors_say_what_happened() {
    let (u, _reqs) = mock(
        |m, c, _| {
            match m {
            "OPTIONS" => format!(
                "RTSP/1.0 401 Unauthorized\r\nCSeq: {c}\r\nWWW-Authenticate: Digest realm=\"x\", nonce=\"y\"\r\n\r\n"
            ),
            _ => format!("RTSP/1.0 453 Not Enough Bandwidth\r\nCSeq: {c}\r\n\r\n"),
        }
        },
        Vec::new(),
    );
    let mut c = RtspClient::connect(&u, &RtspClientConfig::default()).unwrap();
    let e = c.options().unwrap_err();
    assert_eq!(e.status(), Some(401));
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("{u}: server answered 401 Unauthorized to OPTIONS")),
        "{msg}"
    );
    assert!(
        msg.contains("give them in the URL (rtsp://USER:PASSWORD@HOST/PATH)"),
        "{msg}"
    );
    let e = c.describe().unwrap_err().to_string();
    assert!(
        e.contains("server answered 453 Not Enough Bandwidth to DESCRIBE"),
        "{e}"
    );

    let e = RtspClient::connect("http://h/x", &RtspClientConfig::default()).unwrap_err();
    assert!(e.to_string().contains("not rtsp"), "{e}");
    // A port nobody listens on.
    let p = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = RtspClient::connect(
        &format!("rtsp://127.0.0.1:{p}/x"),
        &RtspClientConfig::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("cannot connect to 127.0.0.1:") && e.contains("Is the server running"),
        "{e}"
    );
}

#[test]
fn silence_and_garbage() {
    let (u, _r) = mock(|_, _, _| String::new(), Vec::new());
    let cfg = RtspClientConfig {
        response_timeout: Duration::from_millis(200),
        ..RtspClientConfig::default()
    };
    let mut c = RtspClient::connect(&u, &cfg).unwrap();
    let e = c.options().unwrap_err().to_string();
    assert!(e.contains("no answer to OPTIONS within 0.2 s"), "{e}");

    let (u, _r) = mock(|_, _, _| "HTTP/1.1 200 OK\r\n\r\n".into(), Vec::new());
    let mut c = RtspClient::connect(&u, &cfg).unwrap();
    let e = c.options().unwrap_err().to_string();
    assert!(e.contains("not an RTSP/1.0 message"), "{e}");

    let (u, _r) = mock(
        |_, c, _| {
            format!(
                "RTSP/1.0 200 OK\r\nCSeq: {c}\r\nX: {}\r\n\r\n",
                "a".repeat(20_000)
            )
        },
        Vec::new(),
    );
    let mut c = RtspClient::connect(&u, &cfg).unwrap();
    let e = c.options().unwrap_err().to_string();
    assert!(e.contains("response head longer than 16 KiB"), "{e}");
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn server_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(Some(Split::Message(n))) = split_frame(&b) {
                let _ = Message::<Vec<u8>>::parse(&b[..n]);
            }
            let text = String::from_utf8_lossy(&b);
            let _ = parse_transport(&text);
            let _ = parse_session(&text);
            let _ = resolve_control(&url("rtsp://h/x"), Some(&text));
        }

        #[test]
        fn rtsp_like_bytes_never_panic(
            status in "RTSP/1.0 [0-9]{3} [A-Za-z ]{0,10}",
            hs in proptest::collection::vec("[A-Za-z-]{1,12}: [ -~]{0,30}", 0..6),
            body in "[ -~]{0,40}",
        ) {
            let text = format!("{status}\r\n{}\r\n\r\n{body}", hs.join("\r\n"));
            if let Ok(Some(Split::Message(n))) = split_frame(text.as_bytes()) {
                let _ = Message::<Vec<u8>>::parse(&text.as_bytes()[..n]);
            }
        }
    }
}
