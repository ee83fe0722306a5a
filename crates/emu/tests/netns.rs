//! Network-namespace mode with real programs: iperf3 (from Debian) in two namespaces joined
//! only by the emulator. UDP: iperf3's loss is what the link model, fed the packets' arrivals,
//! drops (replayed in virtual time). TCP (the kernel's): the rate is the link's, less headers.
//! Hosts of a star routed by destination: a multicast group crosses a shared link once and is
//! copied where its receivers' paths part.
//! Needs root, `ip` and iperf3; every namespace and process is removed, also on failure.

use metronome_emu::fabric::{Datagram, Fabric, HostNet, HostPath, Input};
use metronome_emu::netns::{remove_stale, Hosts, NetnsPair, TcpWindow};
use metronome_link::{Link, LinkConfig, SendOutcome};
use metronome_rt::clock::Clock;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A child process killed when dropped (a failing test leaves no iperf3 behind).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs iperf3's client in `a` against a one-off server in `b`, through links `ab` and `ba`;
/// the client's JSON and the fabric's record of what entered it.
fn iperf3(
    tag: &str,
    ab: LinkConfig,
    ba: LinkConfig,
    client_args: &[&str],
) -> (serde_json::Value, Vec<Input>) {
    iperf3_windowed(tag, ab, ba, client_args, TcpWindow::default())
}

/// [`iperf3`], with `a`'s TCP to `b` given `window`.
fn iperf3_windowed(
    tag: &str,
    ab: LinkConfig,
    ba: LinkConfig,
    client_args: &[&str],
    window: TcpWindow,
) -> (serde_json::Value, Vec<Input>) {
    let have = std::process::Command::new("iperf3")
        .arg("--version")
        .output()
        .is_ok();
    assert!(
        have,
        "iperf3 is missing: install it with `apt-get install iperf3` (scripts/test.sh does)"
    );
    remove_stale();
    let pair = NetnsPair::create(tag).expect("namespaces (this test needs root)");
    let links: Vec<Link<Datagram>> = vec![Link::new(ab, 5), Link::new(ba, 6)];
    let routes = pair.routes();
    let mut fabric = Fabric::new(links, routes, Clock::new()).unwrap();
    fabric.record_inputs(true);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let f = s.spawn(|| fabric.run(&stop, Some(Duration::from_secs(30))));
        let _server = Running(
            pair.command(false, "iperf3")
                .args(["-s", "-1", "-B", &pair.addr_b.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        pair.set_tcp_window(window).expect("the route's TCP window");
        std::thread::sleep(Duration::from_millis(500));
        let client = pair
            .command(true, "iperf3")
            .args(["-c", &pair.addr_b.to_string(), "-J"])
            .args(client_args)
            .stderr(Stdio::null())
            .output()
            .unwrap();
        stop.store(true, Ordering::Relaxed);
        let stats = f.join().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&client.stdout).unwrap_or_else(|e| {
            panic!(
                "iperf3 said no JSON ({e}): {}",
                String::from_utf8_lossy(&client.stdout)
            )
        });
        assert!(v.get("error").is_none(), "iperf3: {v}");
        (v, stats.inputs)
    })
}

#[test]
fn iperf3_udp_loses_what_the_link_model_drops() {
    // Seed 001's poor client: 10 Mbit/s, 20 ms, netem limit 2; iperf at 2 Mbit/s, 1470 bytes.
    let ab = LinkConfig {
        rate_bps: Some(10_000_000),
        delay: Duration::from_millis(20),
        netem_limit: Some(2),
        ..LinkConfig::default()
    };
    let ba = LinkConfig {
        delay: Duration::from_millis(20),
        ..LinkConfig::default()
    };
    let (v, inputs) = iperf3(
        "udp",
        ab.clone(),
        ba,
        &["-u", "-b", "2M", "-l", "1470", "-t", "4"],
    );
    let sum = &v["end"]["sum"];
    let lost_percent = sum["lost_percent"].as_f64().unwrap();
    // The same arrivals through the same model: the datagrams of the iperf3 stream (UDP to
    // port 5201, 1498 bytes on the wire) it lets through.
    let mut model = Link::new(ab, 5);
    let (mut offered, mut passed) = (0u64, 0u64);
    for i in inputs.iter().filter(|i| i.route == 0) {
        let big = i.len >= 1400;
        let outcome = model.send(i.at, i.len, ());
        if big {
            offered += 1;
            passed += u64::from(outcome == SendOutcome::Queued);
        }
    }
    let model_loss = 100.0 * (1.0 - passed as f64 / offered as f64);
    eprintln!("iperf3 UDP: lost {lost_percent:.2} %, the model {model_loss:.2} % of {offered}");
    assert!(
        (lost_percent - model_loss).abs() <= 1.0,
        "iperf3 lost {lost_percent:.2} %, the model {model_loss:.2} % of {offered}"
    );
    // Evenly spaced, 2 of every 4 would pass; iperf3's 1 ms timer spaces them a little unevenly.
    assert!((40.0..70.0).contains(&lost_percent), "{lost_percent}");
}

#[test]
fn kernel_tcp_gets_the_links_rate() {
    let ab = LinkConfig {
        rate_bps: Some(10_000_000),
        delay: Duration::from_millis(10),
        queue_limit_packets: Some(100),
        ..LinkConfig::default()
    };
    let ba = LinkConfig {
        delay: Duration::from_millis(10),
        ..LinkConfig::default()
    };
    // -O 2: leave slow start out of the figure.
    let (v, _) = iperf3("tcp", ab, ba, &["-t", "6", "-O", "2"]);
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    // Linux's segments carry 1448 bytes in 1500 (timestamps on): the goodput is 96.5 % of it.
    let expect = 10_000_000.0 * 1448.0 / 1500.0;
    eprintln!("iperf3 TCP: {bps:.0} bit/s received, link less headers {expect:.0}");
    assert!(
        (bps - expect).abs() / expect < 0.02,
        "{bps:.0} bit/s, expected {expect:.0}"
    );
}

/// With a window clamp (ns-2's `window_`), the kernel's TCP keeps at most that many segments
/// in flight: on a path whose bandwidth-delay product is larger, it carries the window per
/// round trip, not the link's rate.
#[test]
fn kernel_tcp_keeps_to_its_window_clamp() {
    let ab = LinkConfig {
        rate_bps: Some(10_000_000),
        delay: Duration::from_millis(20),
        queue_limit_packets: Some(100),
        ..LinkConfig::default()
    };
    let ba = LinkConfig {
        delay: Duration::from_millis(20),
        ..LinkConfig::default()
    };
    let window = TcpWindow {
        initial: Some(2),
        max: Some(10),
    };
    let (v, _) = iperf3_windowed("wnd", ab, ba, &["-t", "6", "-O", "2"], window);
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    // Ten segments of 1448 bytes per round trip: 40 ms of propagation and a segment's 1.2 ms
    // at 10 Mbit/s (the link then idles: no queue builds).
    let rtt = 0.040 + 1500.0 * 8.0 / 10e6;
    let expect = 10.0 * 1448.0 * 8.0 / rtt;
    eprintln!("iperf3 TCP, window 10: {bps:.0} bit/s received, window per RTT {expect:.0}");
    assert!(
        bps < 1.05 * expect && bps > 0.8 * expect,
        "{bps:.0} bit/s with a window of 10 segments, expected about {expect:.0} (the link carries 9.65 Mbit/s)"
    );
}

/// A star: a sender behind a shared link 0, two receivers behind links 1 and 2 (the second
/// lossy). A multicast datagram crosses link 0 once; each receiver gets what its own link
/// passes. Unicast to one receiver crosses only its links.
#[test]
fn multicast_crosses_a_shared_link_once_and_is_copied_where_paths_part() {
    use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
    remove_stale();
    let hosts = Hosts::create("mc", &["src", "r1", "r2"]).expect("namespaces (needs root)");
    let group = Ipv4Addr::new(239, 77, 0, 1);
    let addr = |k: usize| hosts.hosts()[k].addr;
    let link = |loss: f64| {
        Link::new(
            LinkConfig {
                delay: Duration::from_millis(2),
                loss: metronome_link::LossModel::Bernoulli(loss),
                ..LinkConfig::default()
            },
            9,
        )
    };
    let links: Vec<Link<Datagram>> = vec![link(0.0), link(0.0), link(0.3)];
    let net = HostNet {
        devices: hosts.hosts().iter().map(|h| h.tun.clone()).collect(),
        paths: vec![
            HostPath {
                from: 0,
                dst: group,
                to: vec![(1, vec![0, 1]), (2, vec![0, 2])],
            },
            HostPath {
                from: 0,
                dst: addr(1),
                to: vec![(1, vec![0, 1])],
            },
        ],
    };
    let fabric = Fabric::routed(links, net, Clock::new()).unwrap();
    let open = |k: usize, join: bool| {
        hosts
            .run_in(k, move || {
                let s = UdpSocket::bind("0.0.0.0:5000").unwrap();
                if join {
                    s.join_multicast_v4(&group, &Ipv4Addr::UNSPECIFIED).unwrap();
                }
                s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                s
            })
            .unwrap()
    };
    let (r1, r2) = (open(1, true), open(2, true));
    let tx = hosts
        .run_in(0, || UdpSocket::bind("0.0.0.0:0").unwrap())
        .unwrap();
    let stop = AtomicBool::new(false);
    let count = |s: &UdpSocket, stop: &AtomicBool| {
        let (mut mc, mut uc) = (0u32, 0u32);
        let mut buf = [0u8; 2048];
        // Until `stop`, and then until the socket is empty: a receiver the host held back
        // still counts what the kernel keeps for it.
        let mut stopping = false;
        loop {
            if !stopping && stop.load(Ordering::Relaxed) {
                stopping = true;
                s.set_nonblocking(true).unwrap();
            }
            match s.recv_from(&mut buf) {
                Ok((n, _)) => match &buf[..n.min(1)] {
                    b"m" => mc += 1,
                    b"u" => uc += 1,
                    _ => {}
                },
                Err(_) if stopping => return (mc, uc),
                Err(_) => {}
            }
        }
    };
    let n = 400u32;
    let (stats, got1, got2) = std::thread::scope(|s| {
        let f = s.spawn(|| fabric.run(&stop, None));
        let stop_rx = AtomicBool::new(false);
        std::thread::scope(|s2| {
            let h1 = s2.spawn(|| count(&r1, &stop_rx));
            let h2 = s2.spawn(|| count(&r2, &stop_rx));
            std::thread::sleep(Duration::from_millis(100));
            for _ in 0..n {
                tx.send_to(b"m", SocketAddrV4::new(group, 5000)).unwrap();
                tx.send_to(b"u", SocketAddrV4::new(addr(1), 5000)).unwrap();
                std::thread::sleep(Duration::from_micros(500));
            }
            // The fabric stops reading and lets what is in flight arrive; then the receivers
            // empty their sockets.
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::Relaxed);
            let stats = f.join().unwrap();
            stop_rx.store(true, Ordering::Relaxed);
            (stats, h1.join().unwrap(), h2.join().unwrap())
        })
    });
    let [l0, l1, l2] = [&stats.links[0], &stats.links[1], &stats.links[2]];
    eprintln!(
        "r1 {got1:?} r2 {got2:?} links {:?}",
        [l0.sent, l1.sent, l2.sent]
    );
    // Link 0 carried each multicast datagram once, and each unicast one.
    assert_eq!(l0.sent, 2 * n as u64, "{stats:?}");
    assert_eq!(l1.sent, 2 * n as u64);
    assert_eq!(l2.sent, n as u64, "r2 gets the group only");
    assert_eq!(got1, (n, n), "lossless to r1");
    assert_eq!(got2.1, 0);
    assert_eq!(
        got2.0 as u64,
        l2.sent - l2.lost,
        "r2 gets what its link passes"
    );
    assert!(l2.lost > 60 && l2.lost < 180, "30 % of {n}: {}", l2.lost);
    drop(hosts);
    let left = String::from_utf8(
        std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let me = format!("mt{}-mc-", std::process::id());
    assert!(!left.contains(&me), "namespaces left: {left}");
}

/// A host's TCP toward one peer starts from the window it is given: the route to that peer
/// carries `initcwnd` (what the kernel's TCP reads when a connection starts), and no other
/// route changes.
#[test]
fn a_hosts_tcp_to_a_peer_starts_from_the_window_it_is_given() {
    let hosts = Hosts::create("iw", &["a", "b"]).expect("namespaces (needs root)");
    let peer = hosts.hosts()[1].addr;
    let window = TcpWindow {
        initial: Some(2),
        max: None,
    };
    hosts
        .set_tcp_window(0, 1, window)
        .expect("ip route replace");
    let routes = |k: usize| {
        let out = hosts
            .command(k, "ip")
            .args(["-4", "route", "show"])
            .output()
            .expect("ip route show");
        String::from_utf8(out.stdout).unwrap()
    };
    let a = routes(0);
    let to_peer: Vec<&str> = a.lines().filter(|l| l.contains("initcwnd")).collect();
    assert_eq!(to_peer.len(), 1, "{a}");
    assert!(
        to_peer[0].starts_with(&format!("{peer} dev tun0")) && to_peer[0].contains("initcwnd 2"),
        "{a}"
    );
    assert!(
        !routes(1).contains("initcwnd"),
        "the peer's routes are its own"
    );
    // The peer ACKs what it gets from a at once (ns-2's TCPSink): its route back has quickack.
    hosts.set_quick_ack(1, 0).expect("ip route replace");
    let b = routes(1);
    let back: Vec<&str> = b.lines().filter(|l| l.contains("quickack 1")).collect();
    let me = hosts.hosts()[0].addr;
    assert!(
        back.len() == 1 && back[0].starts_with(&format!("{me} dev tun0")),
        "{b}"
    );
    // A route's metrics are written as a whole: a later one keeps the earlier.
    hosts.set_quick_ack(0, 1).expect("ip route replace");
    let a = routes(0);
    assert!(
        a.lines()
            .any(|l| l.contains("initcwnd 2") && l.contains("quickack 1")),
        "{a}"
    );
    // Two asks for one host pair's route cannot both hold.
    let other = TcpWindow {
        initial: Some(3),
        max: None,
    };
    let e = hosts.set_tcp_window(0, 1, other).unwrap_err().to_string();
    assert!(e.contains("initial_window 2 and 3"), "{e}");
}
