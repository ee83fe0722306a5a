//! Who may drive the control API: the token, Host, Origin, JSON bodies, the destination
//! allow-list.

use super::*;

/// One request with exactly the head lines `headers` (each ending in CRLF) besides
/// `Connection` and the body's; the answer.
fn call_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: Option<&str>,
) -> Reply {
    let mut raw = format!("{method} {path} HTTP/1.1\r\n{headers}Connection: close\r\n");
    match body {
        Some(b) => raw += &format!("Content-Length: {}\r\n\r\n{b}", b.len()),
        None => raw += "\r\n",
    }
    raw_call(addr, raw.as_bytes()).expect("an answer")
}

fn authed() -> String {
    format!("Host: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n")
}

const JSON: &str = "Content-Type: application/json\r\n";

#[test]
fn without_the_token_only_health_answers() {
    let (server, _) = start(quick(), Fake::default());
    let addr = server.local_addr();
    let host = "Host: 127.0.0.1\r\n";
    let r = call_with(addr, "GET", "/streams", host, None);
    assert_eq!((r.status, r.error()), (401, "unauthorized"), "{r:?}");
    assert_eq!(
        r.header("WWW-Authenticate"),
        Some("Bearer realm=\"metronome control API\"")
    );
    assert!(r.message().contains("Authorization: Bearer"), "{r:?}");
    let wrong = format!("{host}Authorization: Bearer not-the-token-0123456789\r\n");
    let r = call_with(addr, "GET", "/metrics", &wrong, None);
    assert_eq!(r.status, 401);
    assert!(r
        .header("WWW-Authenticate")
        .unwrap()
        .contains("invalid_token"));
    let basic = format!("{host}Authorization: Basic {TOKEN}\r\n");
    assert_eq!(call_with(addr, "GET", "/", &basic, None).status, 401);
    let add = format!("{host}{JSON}");
    let spec = r#"{"name":"a","destination":"rtp://127.0.0.1:5004"}"#;
    assert_eq!(
        call_with(addr, "POST", "/streams", &add, Some(spec)).status,
        401
    );
    assert_eq!(call_with(addr, "GET", "/health", host, None).status, 200);
    assert_eq!(
        call_with(addr, "GET", "/streams", &authed(), None).status,
        200
    );
    let lower = format!("{host}authorization: bearer {TOKEN}\r\n");
    assert_eq!(call_with(addr, "GET", "/streams", &lower, None).status, 200);
}

#[test]
fn a_name_the_operator_did_not_list_is_refused() {
    let fake = Arc::new(Fake::default());
    let access = ControlAccess::new(TOKEN)
        .unwrap()
        .with_hosts(["Metronome.Example".to_string()]);
    let server =
        ControlServer::start_with("127.0.0.1:0".parse().unwrap(), fake, access, quick()).unwrap();
    let addr = server.local_addr();
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let port = addr.port();
    for ok in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "[::1]:8089".to_string(),
        "metronome.example".to_string(),
    ] {
        let r = call_with(
            addr,
            "GET",
            "/streams",
            &format!("Host: {ok}\r\n{auth}"),
            None,
        );
        assert_eq!(r.status, 200, "{ok}: {r:?}");
    }
    // DNS rebinding: the attacker's name, now pointing here.
    let r = call_with(
        addr,
        "GET",
        "/streams",
        &format!("Host: evil.example:{port}\r\n{auth}"),
        None,
    );
    assert_eq!((r.status, r.error()), (403, "forbidden-host"), "{r:?}");
    assert!(r.message().contains("--control-host"), "{r:?}");
    let r = call_with(addr, "GET", "/health", "Host: evil.example\r\n", None);
    assert_eq!(r.status, 403);
    let r = call_with(addr, "GET", "/streams", &auth, None);
    assert_eq!(r.status, 400, "HTTP/1.1 without Host: {r:?}");
    let two = format!("Host: 127.0.0.1\r\nHost: evil.example\r\n{auth}");
    assert_eq!(call_with(addr, "GET", "/streams", &two, None).status, 400);
}

#[test]
fn a_page_from_another_origin_is_refused_even_with_the_token() {
    let (server, fake) = start(quick(), Fake::default());
    let addr = server.local_addr();
    let spec = r#"{"name":"a","destination":"rtp://127.0.0.1:5004"}"#;
    let from = |origin: &str| format!("{}Origin: {origin}\r\n{JSON}", authed());
    let r = call_with(
        addr,
        "POST",
        "/streams",
        &from("http://evil.example"),
        Some(spec),
    );
    assert_eq!((r.status, r.error()), (403, "forbidden-origin"), "{r:?}");
    let r = call_with(addr, "POST", "/streams", &from("null"), Some(spec));
    assert_eq!(r.status, 403);
    assert!(fake.streams.lock().unwrap().is_empty());
    // The API's own origin (a page it served, were there one) is let in.
    let r = call_with(
        addr,
        "POST",
        "/streams",
        &from("http://127.0.0.1"),
        Some(spec),
    );
    assert_eq!(r.status, 201, "{r:?}");
}

#[test]
fn bodies_must_say_they_are_json() {
    let (server, fake) = start(quick(), Fake::default());
    let addr = server.local_addr();
    let spec = r#"{"name":"a","destination":"rtp://127.0.0.1:5004"}"#;
    // What a cross-site form or a fetch without a preflight may send.
    for head in [
        String::new(),
        "Content-Type: text/plain\r\n".to_string(),
        "Content-Type: application/x-www-form-urlencoded\r\n".to_string(),
    ] {
        let r = call_with(
            addr,
            "POST",
            "/streams",
            &format!("{}{head}", authed()),
            Some(spec),
        );
        assert_eq!(
            (r.status, r.error()),
            (415, "unsupported-media-type"),
            "{head}: {r:?}"
        );
        assert!(r.message().contains("application/json"), "{r:?}");
    }
    let patch = format!("{}Content-Type: text/plain\r\n", authed());
    let r = call_with(
        addr,
        "PATCH",
        "/streams/a",
        &patch,
        Some(r#"{"bitrate":"1mbit"}"#),
    );
    assert_eq!(r.status, 415);
    assert!(fake.streams.lock().unwrap().is_empty());
}

#[test]
fn streams_go_only_to_the_allowed_destinations() {
    let (server, fake) = start(quick(), Fake::default());
    let addr = server.local_addr();
    let post = |name: &str, dest: &str, extra: &str| {
        let spec = format!(r#"{{"name":"{name}","destination":{dest}{extra}}}"#);
        call_with(
            addr,
            "POST",
            "/streams",
            &format!("{}{JSON}", authed()),
            Some(&spec),
        )
    };
    // The issue's request: 11.9 MB to another host in 4.7 s. Now refused.
    let r = post("x", r#""rtp://10.0.0.3:29000""#, "");
    assert_eq!(
        (r.status, r.error()),
        (403, "forbidden-destination"),
        "{r:?}"
    );
    assert!(
        r.message().contains("10.0.0.3") && r.message().contains("127.0.0.0/8"),
        "{r:?}"
    );
    assert!(r.message().contains("--allow-destination"), "{r:?}");
    // One bad destination among good ones refuses the stream.
    let r = post("y", r#"["rtp://127.0.0.1:5004","rtp://8.8.8.8:5004"]"#, "");
    assert_eq!(r.status, 403);
    let r = post("z", r#""rtp://[::ffff:10.0.0.3]:5004""#, "");
    assert_eq!(r.status, 403, "a v4-mapped address: {r:?}");
    let r = post(
        "m",
        r#""rtp://127.0.0.1:5004""#,
        r#","multicast":"rtp://224.0.0.1:5004""#,
    );
    assert_eq!(r.status, 403, "an RTSP group outside the list: {r:?}");
    assert!(fake.streams.lock().unwrap().is_empty());
    assert_eq!(post("a", r#""rtp://127.0.0.3:29000""#, "").status, 201);
    assert_eq!(
        post("g", r#""rtp://239.255.0.1:5004?ttl=1""#, "").status,
        201
    );

    let wide = ControlAccess::new(TOKEN)
        .unwrap()
        .with_destinations(vec!["10.0.0.0/8".parse().unwrap()]);
    let fake = Arc::new(Fake::default());
    let server =
        ControlServer::start_with("127.0.0.1:0".parse().unwrap(), fake, wide, quick()).unwrap();
    let spec = r#"{"name":"x","destination":"rtp://10.0.0.3:29000"}"#;
    let r = call_with(
        server.local_addr(),
        "POST",
        "/streams",
        &format!("{}{JSON}", authed()),
        Some(spec),
    );
    assert_eq!(r.status, 201, "{r:?}");
}
