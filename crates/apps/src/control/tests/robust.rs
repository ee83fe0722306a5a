//! Hostile and unlucky clients: malformed and oversize requests, silence, floods, garbage, and
//! shutting down under load.

use super::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::net::Shutdown;

#[test]
fn a_malformed_request_line_is_400() {
    let (server, _) = start(quick(), Fake::default());
    let addr = server.local_addr();
    for raw in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET\x01 / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\n\r\n",
    ] {
        let r = raw_call(addr, raw).expect("an answer");
        assert_eq!((r.status, r.error()), (400, "bad-request"), "{raw:?}");
        assert!(r.message().contains("HTTP/1.1"), "{r:?}");
    }
}

#[test]
fn an_oversize_head_or_too_many_headers_is_431() {
    let (server, _) = start(quick(), Fake::default());
    let addr = server.local_addr();
    let long = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\nX-Long: {}\r\n\r\n", "a".repeat(9000));
    let r = raw_call(addr, long.as_bytes()).unwrap();
    assert_eq!((r.status, r.error()), (431, "header-too-large"));
    // An unfinished head that has already passed the limit is refused without waiting for more.
    let unfinished = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\nX-Long: {}", "a".repeat(9000));
    assert_eq!(raw_call(addr, unfinished.as_bytes()).unwrap().status, 431);
    let mut many = String::from(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\n",
    );
    for i in 0..40 {
        many += &format!("X-H{i}: v\r\n");
    }
    many += "\r\n";
    let r = raw_call(addr, many.as_bytes()).unwrap();
    assert_eq!(r.status, 431);
    assert!(r.message().contains("32 headers"), "{r:?}");
}

#[test]
fn an_oversize_body_is_413_before_it_is_read() {
    let (server, _) = start(quick(), Fake::default());
    let raw = "POST /streams HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\nContent-Type: application/json\r\n\
               Content-Length: 100000\r\n\r\n{";
    let r = raw_call(server.local_addr(), raw.as_bytes()).unwrap();
    assert_eq!((r.status, r.error()), (413, "body-too-large"));
    assert_eq!(r.header("connection"), Some("close"));
}

#[test]
fn slow_and_silent_clients_make_room_for_prompt_ones_and_time_out() {
    let limits = ControlLimits {
        read_timeout: Duration::from_millis(300),
        max_connections: 2,
        ..quick()
    };
    let (server, _) = start(limits, Fake::default());
    let addr = server.local_addr();
    let t0 = Stopwatch::start();
    let mut silent = Client::connect(addr);
    let mut partial = Client::connect(addr);
    partial.send(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\n");
    std::thread::sleep(Duration::from_millis(50));
    // Full: the client trickling a request is closed to make room, and a prompt one is
    // served at once.
    assert_eq!(call(addr, "GET", "/health", None).status, 200);
    assert!(t0.elapsed() < Duration::from_millis(250));
    assert!(partial.closed(), "closed to make room, without an answer");
    // Full again (the silent one and a newcomer): the silent one goes next.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(call(addr, "GET", "/health", None).status, 200);
    assert!(silent.closed());
    // With room to spare, a request that does not arrive whole in time is answered 408, and a
    // client that says nothing is closed after the same time.
    let t1 = Stopwatch::start();
    let mut partial = Client::connect(addr);
    partial.send(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\n");
    let late = partial.reply().expect("a 408");
    assert_eq!((late.status, late.error()), (408, "timeout"));
    let waited = t1.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    let mut silent = Client::connect(addr);
    assert!(silent.closed());
    assert_eq!(server.panicked(), 0);
}

#[test]
fn one_address_cannot_take_every_connection() {
    let limits = ControlLimits {
        max_connections: 8,
        max_per_address: 2,
        ..quick()
    };
    let fake = Fake {
        list_delay: Duration::from_millis(300),
        ..Fake::default()
    };
    let (server, _) = start(limits, fake);
    let addr = server.local_addr();
    // Two requests in progress from this address hold its two places...
    let busy: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || call(addr, "GET", "/streams", None).status))
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    // ...so a third is told to come back, though the server has room.
    let third = call(addr, "GET", "/health", None);
    assert_eq!((third.status, third.error()), (503, "busy"));
    assert_eq!(third.header("retry-after"), Some("1"));
    for b in busy {
        assert_eq!(b.join().unwrap(), 200);
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(call(addr, "GET", "/health", None).status, 200);
    assert_eq!(server.panicked(), 0);
}

#[test]
fn forty_concurrent_clients_are_served_or_told_to_wait() {
    let limits = ControlLimits {
        max_connections: 4,
        ..quick()
    };
    let fake = Fake {
        list_delay: Duration::from_millis(150),
        ..Fake::default()
    };
    let (server, fake) = start(limits, fake);
    let addr = server.local_addr();
    let t0 = Stopwatch::start();
    let clients: Vec<_> = (0..40)
        .map(|_| std::thread::spawn(move || call(addr, "GET", "/streams", None).status))
        .collect();
    let statuses: Vec<u16> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let ok = statuses.iter().filter(|&&s| s == 200).count();
    let busy = statuses.iter().filter(|&&s| s == 503).count();
    assert_eq!(ok + busy, 40, "{statuses:?}");
    assert!(ok >= 4 && busy >= 1, "{statuses:?}");
    assert!(fake.max_active.load(Ordering::SeqCst) <= 4);
    assert!(t0.elapsed() < Duration::from_secs(4));
    assert_eq!(server.panicked(), 0);
}

/// Byte strings that look more or less like requests.
fn garbage() -> impl Strategy<Value = Vec<u8>> {
    let heads = prop::sample::select(vec![
        "",
        "GET / HTTP/1.1\r\n",
        "POST /streams HTTP/1.1\r\nContent-Length: 12\r\n",
        "GET /streams/",
        "DELETE /streams/a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "POST /streams HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n",
    ]);
    let tails = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..1500),
        "[ -~\r\n]{0,600}".prop_map(String::into_bytes),
    ];
    (heads, tails).prop_map(|(h, t)| [h.as_bytes(), &t].concat())
}

#[test]
fn garbage_gets_an_http_answer_or_a_close_and_never_a_panic() {
    let (server, _) = start(quick(), Fake::default());
    let addr = server.local_addr();
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let t0 = Stopwatch::start();
    runner
        .run(&garbage(), |bytes| {
            let mut c = Client::connect(addr);
            let _ = c.stream.write_all(&bytes);
            let _ = c.stream.shutdown(Shutdown::Write);
            let mut got = Vec::new();
            let _ = c.stream.read_to_end(&mut got);
            let valid = got.is_empty()
                || (got.starts_with(b"HTTP/1.1 ")
                    && got.len() > 12
                    && got[9..12].iter().all(u8::is_ascii_digit)
                    && got.windows(4).any(|w| w == b"\r\n\r\n"));
            prop_assert!(valid, "answer {:?}", String::from_utf8_lossy(&got));
            Ok(())
        })
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(4));
    assert_eq!(call(addr, "GET", "/health", None).status, 200);
    assert_eq!(server.panicked(), 0);
}

#[test]
fn shutdown_is_prompt_with_connections_open() {
    let (server, _) = start(ControlLimits::default(), Fake::default());
    let addr = server.local_addr();
    let mut kept = Client::connect(addr);
    kept.send(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-token-0123456789\r\n\r\n");
    assert_eq!(kept.reply().unwrap().status, 200);
    let _silent = Client::connect(addr);
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Stopwatch::start();
    server.shutdown();
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    assert!(kept.closed());
    assert!(TcpStream::connect(addr).is_err(), "the port is closed");
}

#[test]
fn dropping_the_server_stops_it() {
    let (server, _) = start(quick(), Fake::default());
    let addr = server.local_addr();
    assert_eq!(call(addr, "GET", "/health", None).status, 200);
    let t0 = Stopwatch::start();
    drop(server);
    assert!(t0.elapsed() < Duration::from_millis(1500));
    assert!(TcpStream::connect(addr).is_err());
}

#[test]
fn unusable_limits_are_refused() {
    let fake: Arc<dyn StreamControl> = Arc::new(Fake::default());
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let limits = ControlLimits {
        max_connections: 0,
        ..ControlLimits::default()
    };
    let access = ControlAccess::new(TOKEN).unwrap();
    let e = ControlServer::start_with(addr, fake, access, limits).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
}
