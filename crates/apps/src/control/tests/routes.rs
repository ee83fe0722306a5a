//! Every route and status code, and keep-alive.

use super::*;

const CAM1: &str = r#"{"name":"cam1","destination":"rtp://127.0.0.1:5004","bitrate":"4mbit",
    "period":"15ms","deadline":"10ms"}"#;

#[test]
fn index_and_health_answer_json() {
    let (server, _) = start(quick(), Fake::default());
    let addr = server.local_addr();
    let index = call(addr, "GET", "/", None);
    assert_eq!(index.status, 200);
    assert_eq!(index.header("content-type"), Some("application/json"));
    let routes = index.body["routes"].as_array().unwrap();
    assert!(routes
        .iter()
        .any(|r| r["method"] == "POST" && r["path"] == "/streams"));
    let health = call(addr, "GET", "/health", None);
    assert_eq!(
        (health.status, health.body.clone()),
        (200, json!({ "ok": true }))
    );
    assert_eq!(call(addr, "GET", "/health?verbose=1", None).status, 200);
    server.shutdown();
}

#[test]
fn a_stream_is_added_listed_got_and_removed() {
    let (server, fake) = start(quick(), Fake::default());
    let addr = server.local_addr();
    let added = call(addr, "POST", "/streams", Some(CAM1));
    assert_eq!(added.status, 201, "{added:?}");
    assert_eq!(added.header("location"), Some("/streams/cam1"));
    assert_eq!(added.body["state"], "running");
    assert_eq!(
        fake.streams.lock().unwrap()["cam1"].bitrate,
        Some(4_000_000)
    );
    let list = call(addr, "GET", "/streams", None);
    assert_eq!(
        (list.status, list.body.clone()),
        (200, json!({ "streams": ["cam1"] }))
    );
    let one = call(addr, "GET", "/streams/cam1", None);
    assert_eq!(one.status, 200);
    assert_eq!(one.body["spec"]["name"], "cam1");
    assert_eq!(call(addr, "GET", "/streams/cam1/", None).status, 200);
    let again = call(addr, "POST", "/streams", Some(CAM1));
    assert_eq!((again.status, again.error()), (409, "exists"));
    let removed = call(addr, "DELETE", "/streams/cam1", None);
    assert_eq!(
        (removed.status, removed.body["state"].clone()),
        (200, json!("removed"))
    );
    let gone = call(addr, "GET", "/streams/cam1", None);
    assert_eq!((gone.status, gone.error()), (404, "not-found"));
    assert!(gone.message().contains("GET /streams"), "{gone:?}");
    let twice = call(addr, "DELETE", "/streams/cam1", None);
    assert_eq!((twice.status, twice.error()), (404, "not-found"));
}

#[test]
fn admission_refusal_is_409_refused_and_a_panic_is_500() {
    let (server, _) = start(quick(), Fake::default());
    let addr = server.local_addr();
    let spec = r#"{"name":"refuse1","destination":"rtp://127.0.0.1:5004"}"#;
    let refused = call(addr, "POST", "/streams", Some(spec));
    assert_eq!((refused.status, refused.error()), (409, "refused"));
    assert!(refused.message().contains("deadlines"));
    let spec = r#"{"name":"boom","destination":"rtp://127.0.0.1:5004"}"#;
    let failed = call(addr, "POST", "/streams", Some(spec));
    assert_eq!((failed.status, failed.error()), (500, "internal"));
    assert_eq!(call(addr, "GET", "/health", None).status, 200);
    assert_eq!(server.panicked(), 0);
}

#[test]
fn unknown_paths_are_404_and_wrong_methods_405_with_allow() {
    let (server, _) = start(quick(), Fake::default());
    let addr = server.local_addr();
    for path in ["/nope", "/streams/a/b", "/streamsx", "*"] {
        let r = call(addr, "GET", path, None);
        assert_eq!((r.status, r.error()), (404, "not-found"), "{path}");
        assert!(r.message().contains("GET /"), "{r:?}");
    }
    for (method, path, allow) in [
        ("DELETE", "/streams", "GET, POST"),
        ("PUT", "/streams/cam1", "GET, PATCH, DELETE"),
        ("POST", "/health", "GET"),
        ("DELETE", "/", "GET"),
    ] {
        let r = call(addr, method, path, None);
        assert_eq!(
            (r.status, r.error()),
            (405, "method-not-allowed"),
            "{method} {path}"
        );
        assert_eq!(r.header("allow"), Some(allow));
    }
}

#[test]
fn bad_bodies_are_400_naming_the_problem() {
    let (server, fake) = start(quick(), Fake::default());
    let addr = server.local_addr();
    let r = call(addr, "POST", "/streams", Some("{\"name\": \"a\",\n oops}"));
    assert_eq!((r.status, r.error()), (400, "bad-json"));
    assert!(r.message().contains("line 2 column"), "{r:?}");
    let r = call(addr, "POST", "/streams", Some(""));
    assert_eq!((r.status, r.error()), (400, "bad-json"));
    let typo = r#"{"name":"a","destination":"rtp://h:1","perod":"15ms"}"#;
    let r = call(addr, "POST", "/streams", Some(typo));
    assert_eq!((r.status, r.error()), (400, "invalid"));
    assert!(r.message().contains("unknown field `perod`"), "{r:?}");
    let late = r#"{"name":"a","destination":"rtp://h:1","period":"10ms","deadline":"20ms"}"#;
    let r = call(addr, "POST", "/streams", Some(late));
    assert_eq!((r.status, r.error()), (400, "invalid"));
    assert!(r.message().contains("longer than its period"), "{r:?}");
    let r = call(
        addr,
        "POST",
        "/streams",
        Some(r#"{"name":"a b","destination":"x"}"#),
    );
    assert_eq!((r.status, r.error()), (400, "invalid"));
    assert!(fake.streams.lock().unwrap().is_empty());
}

#[test]
fn framing_errors_have_their_own_status() {
    let (server, _) = start(quick(), Fake::default());
    let addr = server.local_addr();
    let form = b"POST /streams HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\nContent-Type: application/x-www-form-urlencoded\r\n\
                 Content-Length: 3\r\n\r\na=b";
    let r = raw_call(addr, form).unwrap();
    assert_eq!((r.status, r.error()), (415, "unsupported-media-type"));
    let r = raw_call(addr, b"POST /streams HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\n\r\n").unwrap();
    assert_eq!((r.status, r.error()), (411, "length-required"));
    let chunked =
        b"POST /streams HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
    let r = raw_call(addr, chunked).unwrap();
    assert_eq!((r.status, r.error()), (411, "length-required"));
    assert!(r.message().contains("Content-Length"), "{r:?}");
    let r = raw_call(addr, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\nContent-Length: -1\r\n\r\n").unwrap();
    assert_eq!((r.status, r.error()), (400, "bad-request"));
    let two = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab";
    assert_eq!(raw_call(addr, two).unwrap().status, 400);
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let (server, _) = start(quick(), Fake::default());
    let mut c = Client::connect(server.local_addr());
    c.send(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\n\r\n");
    let first = c.reply().unwrap();
    assert_eq!(
        (first.status, first.header("connection")),
        (200, Some("keep-alive"))
    );
    let body = r#"{"name":"k","destination":"rtp://127.0.0.1:5004"}"#;
    let post = format!(
        "POST /streams HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\nContent-Type: application/json; charset=utf-8\r\n\
         Expect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    c.send(post.as_bytes());
    c.send(body.as_bytes());
    assert_eq!(c.reply().unwrap().status, 201);
    // Two pipelined requests in one write, the second asking to close.
    c.send(b"GET /streams/k HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\n\r\nGET /streams HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\nConnection: close\r\n\r\n");
    assert_eq!(c.reply().unwrap().status, 200);
    let last = c.reply().unwrap();
    assert_eq!(
        (last.status, last.header("connection")),
        (200, Some("close"))
    );
    assert!(c.closed());
}

#[test]
fn http10_closes_by_default_and_connections_have_a_request_quota() {
    let (server, _) = start(quick(), Fake::default());
    let mut c = Client::connect(server.local_addr());
    c.send(b"GET /health HTTP/1.0\r\n\r\n");
    assert_eq!(c.reply().unwrap().header("connection"), Some("close"));
    assert!(c.closed());
    let limits = ControlLimits {
        max_requests_per_connection: 3,
        ..quick()
    };
    let (server, _) = start(limits, Fake::default());
    let mut c = Client::connect(server.local_addr());
    for i in 1..=3 {
        c.send(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\n\r\n");
        let r = c.reply().unwrap();
        let expected = if i < 3 { "keep-alive" } else { "close" };
        assert_eq!(r.header("connection"), Some(expected), "request {i}");
    }
    assert!(c.closed());
}

#[test]
fn patch_turns_a_running_streams_rate_and_says_what_is_wrong() {
    let (server, fake) = start(quick(), Fake::default());
    let addr = server.local_addr();
    assert_eq!(call(addr, "POST", "/streams", Some(CAM1)).status, 201);
    let r = call(
        addr,
        "PATCH",
        "/streams/cam1",
        Some(r#"{"bitrate":"2mbit"}"#),
    );
    assert_eq!(
        (r.status, r.body["target_bitrate_bps"].clone()),
        (200, json!(2_000_000))
    );
    assert_eq!(
        fake.streams.lock().unwrap()["cam1"].bitrate,
        Some(2_000_000)
    );
    let r = call(
        addr,
        "PATCH",
        "/streams/cam1",
        Some(r#"{"bitrate":3000000}"#),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        fake.streams.lock().unwrap()["cam1"].bitrate,
        Some(3_000_000)
    );
    for bad in [
        r#"{"bitrate":"fast"}"#,
        r#"{"bitrate":-1}"#,
        r#"{"bitrate":"2mbit","fps":25}"#,
        r#"{"rate":"2mbit"}"#,
        r#"[]"#,
    ] {
        let r = call(addr, "PATCH", "/streams/cam1", Some(bad));
        assert_eq!((r.status, r.error()), (400, "invalid"), "{bad}: {r:?}");
    }
    let r = call(addr, "PATCH", "/streams/cam1", Some("{oops"));
    assert_eq!((r.status, r.error()), (400, "bad-json"));
    assert!(r.message().contains("bitrate"), "{r:?}");
    let r = call(
        addr,
        "PATCH",
        "/streams/cam1",
        Some(r#"{"bitrate":"20mbit"}"#),
    );
    assert_eq!((r.status, r.error()), (409, "refused"));
    let r = call(
        addr,
        "PATCH",
        "/streams/nope",
        Some(r#"{"bitrate":"2mbit"}"#),
    );
    assert_eq!((r.status, r.error()), (404, "not-found"));
    assert_eq!(
        fake.streams.lock().unwrap()["cam1"].bitrate,
        Some(3_000_000)
    );
}
