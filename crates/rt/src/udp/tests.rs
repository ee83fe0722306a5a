//! Loopback tests of the UDP sockets: unicast, multicast, fan-out, RTCP, errors.

use super::*;
use crate::clock::Clock;
use crate::url::RtpUrl;
use std::sync::atomic::{AtomicU8, Ordering};

const LO: Ipv4Addr = Ipv4Addr::LOCALHOST;

fn opts() -> SocketOptions {
    SocketOptions {
        buffer_bytes: 1 << 20,
        read_timeout: Some(Duration::from_secs(2)),
    }
}

fn lo_receiver() -> (UdpReceiver, SocketAddr) {
    let r = UdpReceiver::open(&RtpUrl::unicast((LO, 0).into()), &opts()).unwrap();
    let a = r.local_addr().unwrap();
    (r, a)
}

/// A fresh 239.255.77.x group per test, so parallel tests do not hear each other.
fn group() -> Ipv4Addr {
    static NEXT: AtomicU8 = AtomicU8::new(1);
    Ipv4Addr::new(239, 255, 77, NEXT.fetch_add(1, Ordering::Relaxed))
}

#[test]
fn unicast_round_trip_with_kernel_timestamp() {
    let clock = Clock::new();
    let (rx, at) = lo_receiver();
    assert!(rx.recv_buffer() >= 1 << 20, "granted {}", rx.recv_buffer());
    let tx = UdpSender::open(&RtpUrl::unicast(at), &opts()).unwrap();
    assert_eq!(tx.send(b"hello").unwrap(), 5);
    let mut buf = [0u8; 64];
    let m = rx.recv(&mut buf).unwrap();
    assert_eq!(&buf[..m.len], b"hello");
    assert_eq!(
        m.src,
        tx.local_addr()
            .map(|a| SocketAddr::new(LO.into(), a.port()))
            .unwrap()
    );
    assert!(!m.truncated);
    assert_eq!(m.dropped_total, Some(0));
    let ts = m
        .kernel_rx_realtime_ns
        .expect("SO_TIMESTAMPNS gave no timestamp");
    let age = clock.realtime_ns() as i128 - ts as i128;
    assert!(
        (0..1_000_000_000).contains(&age),
        "kernel timestamp {age} ns from now"
    );
    assert!(clock.timestamp_from_realtime_ns(ts) <= clock.now());
}

/// The socket's drop count has every datagram a full buffer turned away, also those no later
/// datagram reports (SO_RXQ_OVFL is carried only by a datagram accepted after the drops).
#[test]
fn drops_count_what_a_full_buffer_turned_away() {
    let tiny = SocketOptions {
        buffer_bytes: 1,
        read_timeout: Some(Duration::from_millis(50)),
    };
    let rx = UdpReceiver::open(&RtpUrl::unicast((LO, 0).into()), &tiny).unwrap();
    assert_eq!(rx.drops(), Some(0));
    let tx = UdpSender::open(&RtpUrl::unicast(rx.local_addr().unwrap()), &opts()).unwrap();
    const SENT: u64 = 50;
    for _ in 0..SENT {
        tx.send(&[7u8; 1200]).unwrap();
    }
    let mut buf = [0u8; 2048];
    let mut read = 0;
    let mut stamped = 0;
    while let Ok(m) = rx.recv(&mut buf) {
        read += 1;
        stamped = m.dropped_total.unwrap();
    }
    let dropped = rx.drops().unwrap();
    assert!(dropped > 0, "read {read} of {SENT}");
    assert_eq!(dropped + read, SENT);
    // The datagrams that got in came before the drops: none of them carries the count.
    assert_eq!(stamped, 0);
}

#[test]
fn truncation_and_timeout_are_reported() {
    let (rx, at) = lo_receiver();
    rx.socket()
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let tx = UdpSender::open(&RtpUrl::unicast(at), &opts()).unwrap();
    tx.send(&[7u8; 100]).unwrap();
    let mut small = [0u8; 10];
    let m = rx.recv(&mut small).unwrap();
    assert!(m.truncated && m.len == 10);
    assert!(is_timeout(&rx.recv(&mut small).unwrap_err()));
}

#[test]
fn multicast_round_trip_on_loopback() {
    let g = group();
    let src = RtpUrl::multicast((g, 0).into(), Some(LO));
    let rx = UdpReceiver::open(&src, &opts()).unwrap();
    let port = rx.local_addr().unwrap().port();
    // A second receiver shares the port (SO_REUSEPORT) and hears the same datagrams.
    let rx2 = UdpReceiver::open(&RtpUrl::multicast((g, port).into(), Some(LO)), &opts()).unwrap();
    let dest =
        RtpUrl::parse_destination(&format!("rtp://{g}:{port}?ttl=1&iface=127.0.0.1")).unwrap();
    let tx = UdpSender::open(&dest, &opts()).unwrap();
    tx.send(b"group").unwrap();
    let mut buf = [0u8; 64];
    for r in [&rx, &rx2] {
        let m = r.recv(&mut buf).unwrap();
        assert_eq!(&buf[..m.len], b"group");
        assert!(m.kernel_rx_realtime_ns.is_some());
    }
}

#[test]
fn send_to_many_reaches_three_receivers() {
    let rxs: Vec<_> = (0..3).map(|_| lo_receiver()).collect();
    let mut dests: Vec<SocketAddr> = rxs.iter().map(|(_, a)| *a).collect();
    let tx = UdpSender::open(&RtpUrl::unicast(dests[0]), &opts()).unwrap();
    let out = tx.send_to_many(b"fan", &dests);
    assert_eq!((out.sent, out.failed), (3, 0), "{:?}", out.first_error);
    let mut buf = [0u8; 16];
    for (r, _) in &rxs {
        let m = r.recv(&mut buf).unwrap();
        assert_eq!(&buf[..m.len], b"fan");
    }
    // An IPv6 destination on an IPv4 socket fails alone; the others still get the packet.
    dests.insert(1, "[::1]:9".parse().unwrap());
    let out = tx.send_to_many(b"fan2", &dests);
    assert_eq!((out.sent, out.failed), (3, 1));
    assert!(out.first_error.unwrap().to_string().contains("[::1]:9"));
    for (r, _) in &rxs {
        let m = r.recv(&mut buf).unwrap();
        assert_eq!(&buf[..m.len], b"fan2");
    }
    // More destinations than one batch.
    let many = vec![rxs[0].1; FANOUT_BATCH + 5];
    assert_eq!(tx.send_to_many(b"x", &many).sent, FANOUT_BATCH + 5);
}

#[test]
fn unicast_rtcp_round_trip() {
    // The receiver binds port+1 of its source URL; port 0 (a free port) stands in here.
    let mut rx = RtcpSocket::open_for_receiver(&RtpUrl::unicast((LO, 0).into()), &opts()).unwrap();
    let rtcp_at = rx.local_addr().unwrap();
    assert!(matches!(rx.send(b"rr"), Err(UdpError::NoPeer)));
    let dest = RtpUrl::unicast(SocketAddr::new(LO.into(), rtcp_at.port() - 1));
    let tx = RtcpSocket::open_for_sender(&dest, &opts()).unwrap();
    assert_eq!(tx.peer(), Some(rtcp_at));
    tx.send(b"SR").unwrap();
    let mut buf = [0u8; 16];
    let m = rx.recv(&mut buf).unwrap();
    assert_eq!(&buf[..m.len], b"SR");
    rx.set_peer(m.src);
    rx.send(b"RR").unwrap();
    let m = tx.recv(&mut buf).unwrap();
    assert_eq!(&buf[..m.len], b"RR");
    assert_eq!(m.src, rtcp_at);
}

#[test]
fn multicast_rtcp_everyone_hears_everyone() {
    let g = group();
    let port = crate::ports::free_udp_run(2).unwrap();
    let url = RtpUrl::multicast((g, port).into(), Some(LO));
    let tx = RtcpSocket::open_for_sender(&url, &opts()).unwrap();
    let rx = RtcpSocket::open_for_receiver(&url, &opts()).unwrap();
    assert_eq!(tx.peer(), Some(url.rtcp_addr()));
    let mut buf = [0u8; 16];
    tx.send(b"SR").unwrap();
    for s in [&rx, &tx] {
        let m = s.recv(&mut buf).unwrap();
        assert_eq!(&buf[..m.len], b"SR");
    }
    rx.send(b"RR").unwrap();
    for s in [&tx, &rx] {
        let m = s.recv(&mut buf).unwrap();
        assert_eq!(&buf[..m.len], b"RR");
    }
}

#[test]
fn unreachable_destinations_fail_at_open_with_advice() {
    // Loopback interface, external destination: EINVAL from the route lookup.
    let url = RtpUrl::parse_destination("rtp://10.1.2.3:5004?iface=127.0.0.1").unwrap();
    let e = UdpSender::open(&url, &opts()).unwrap_err();
    assert!(matches!(e, UdpError::Unreachable { .. }), "{e}");
    assert!(
        e.to_string().starts_with("cannot reach 10.1.2.3:5004: "),
        "{e}"
    );
    let e = UdpError::from_send(
        "10.1.2.3:5004".parse().unwrap(),
        io::Error::from_raw_os_error(libc::ENETUNREACH),
    );
    assert_eq!(
        e.to_string(),
        "cannot reach 10.1.2.3:5004: no route (ENETUNREACH); check the address and the interface"
    );
    // In a network namespace of its own (no routes, lo down) the kernel says ENETUNREACH.
    let got = std::thread::spawn(|| {
        // SAFETY: unshare affects only this thread, which exits at the end of the closure.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return None; // not root: skip
        }
        let url = RtpUrl::parse_destination("rtp://10.1.2.3:5004").unwrap();
        Some(UdpSender::open(&url, &opts()).unwrap_err().to_string())
    })
    .join()
    .unwrap();
    if let Some(msg) = got {
        assert!(msg.contains("ENETUNREACH"), "{msg}");
    }
}

#[test]
fn bind_conflicts_are_explained() {
    let (_rx, at) = lo_receiver();
    let e = UdpReceiver::open(&RtpUrl::unicast(at), &opts()).unwrap_err();
    assert!(e.to_string().contains("EADDRINUSE"), "{e}");
}
