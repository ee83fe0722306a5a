//! The fabric: two routes share a bottleneck, one of them crosses a second link after it.
//! Replaying the datagrams' recorded arrivals through the same links in virtual time (each
//! entering the next link when the previous one delivers it) delivers exactly the datagrams
//! the fabric delivered, whatever the host's load.

use metronome_emu::fabric::{Datagram, Fabric, Input, Route};
use metronome_link::{EventQueue, Link, LinkConfig, LossModel};
use metronome_rt::clock::Clock;
use metronome_rt::wait::{WaitMode, Waiter};
use metronome_time::IPV4_UDP_OVERHEAD;
use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

fn links() -> Vec<LinkConfig> {
    vec![
        // 0: a shared 8 Mbit/s bottleneck with a short queue.
        LinkConfig {
            rate_bps: Some(8_000_000),
            delay: Duration::from_millis(5),
            queue_limit_packets: Some(6),
            ..LinkConfig::default()
        },
        // 1: a lossy access link behind it, for route 1 only.
        LinkConfig {
            delay: Duration::from_millis(3),
            loss: LossModel::Bernoulli(0.05),
            ..LinkConfig::default()
        },
    ]
}

/// Receives until `stop` is set and then until its socket is empty (a receiver the host
/// starved for a while still counts what the kernel holds for it); `count` follows along.
fn receive(sock: UdpSocket, stop: &AtomicBool, count: &AtomicUsize) -> BTreeSet<u64> {
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut got = BTreeSet::new();
    let mut buf = [0u8; 2048];
    let mut stopping = false;
    loop {
        if !stopping && stop.load(Ordering::Relaxed) {
            stopping = true;
            sock.set_nonblocking(true).unwrap();
        }
        match sock.recv(&mut buf) {
            Ok(n) if n >= 8 => {
                got.insert(u64::from_be_bytes(buf[..8].try_into().unwrap()));
                count.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) => {}
            Err(_) if stopping => return got,
            Err(_) => {}
        }
    }
}

/// Waits until `count` has not moved for `quiet` (at most `limit`).
fn wait_until_quiet(count: &AtomicUsize, quiet: Duration, limit: Duration) {
    let now = || Duration::from_nanos(metronome_rt::clock::mono_ns());
    let start = now();
    let (mut last, mut since) = (count.load(Ordering::Relaxed), now());
    while now() - start < limit {
        std::thread::sleep(Duration::from_millis(20));
        let n = count.load(Ordering::Relaxed);
        if n != last {
            (last, since) = (n, now());
        } else if now() - since >= quiet {
            return;
        }
    }
}

/// The recorded inputs through fresh links in virtual time: numbers delivered, per route.
fn replay(routes: &[Vec<usize>], inputs: &[Input], seed: u64) -> Vec<BTreeSet<u64>> {
    let mut links: Vec<Link<(usize, usize, u64, usize)>> = links()
        .into_iter()
        .enumerate()
        .map(|(i, c)| Link::new(c, seed + i as u64))
        .collect();
    let mut out = vec![BTreeSet::new(); routes.len()];
    // Arrivals and deliveries in time order, as the fabric moves them.
    let mut arrivals = EventQueue::new();
    for i in inputs {
        let n = u64::from_be_bytes(i.head[..8].try_into().unwrap());
        arrivals.push(i.at, (i.route as usize, 0usize, n, i.len));
    }
    loop {
        let next_link = links
            .iter()
            .enumerate()
            .filter_map(|(k, l)| l.poll_timeout().map(|t| (t, k)))
            .min();
        let next_in = arrivals.peek_time();
        let (at, item) = match (next_in, next_link) {
            (Some(a), Some((b, _))) if a <= b => arrivals.pop().unwrap(),
            (Some(_), None) => arrivals.pop().unwrap(),
            (_, Some((b, k))) => {
                let (at, mut item) = links[k].poll_deliver(b).unwrap();
                item.1 += 1;
                (at, item)
            }
            (None, None) => break,
        };
        let (r, hop, n, len) = item;
        match routes[r].get(hop) {
            Some(&l) => {
                links[l].send(at, len + IPV4_UDP_OVERHEAD, item);
            }
            None => {
                out[r].insert(n);
            }
        }
    }
    out
}

#[test]
fn the_fabric_delivers_what_its_links_deliver_in_virtual_time() {
    let seed = 40;
    let sinks: Vec<UdpSocket> = (0..2).map(|_| metronome_testkit::udp_sink()).collect();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let paths = vec![vec![0], vec![0, 1]];
    let routes: Vec<Route> = paths
        .iter()
        .zip(&sinks)
        .map(|(p, s)| Route::udp(any, p.clone(), s.local_addr().unwrap()))
        .collect();
    let links: Vec<Link<Datagram>> = links()
        .into_iter()
        .enumerate()
        .map(|(i, c)| Link::new(c, seed + i as u64))
        .collect();
    let mut fabric = Fabric::new(links, routes, Clock::new()).unwrap();
    fabric.record_inputs(true);
    let to: Vec<SocketAddr> = (0..2).map(|r| fabric.input_addr(r).unwrap()).collect();
    let (stop_fabric, stop_rx) = (AtomicBool::new(false), AtomicBool::new(false));
    let count = AtomicUsize::new(0);
    let (stats, got) = std::thread::scope(|s| {
        let f = s.spawn(|| fabric.run(&stop_fabric, None));
        let rx: Vec<_> = sinks
            .into_iter()
            .map(|k| s.spawn(|| receive(k, &stop_rx, &count)))
            .collect();
        // Two senders of 1000-byte datagrams, 6 Mbit/s each, into 8 Mbit/s: the queue fills.
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut w = Waiter::new(WaitMode::SleepSpin);
        let start = metronome_rt::clock::mono_ns();
        let mut buf = [0u8; 1000];
        for i in 0..1200u64 {
            w.wait_until(start + i * 666_667);
            buf[..8].copy_from_slice(&i.to_be_bytes());
            tx.send_to(&buf, to[(i % 2) as usize]).unwrap();
        }
        // The fabric stops once nothing has come out of it for a while (not after a fixed
        // time: a loaded host may hold its thread back), then lets what is in flight arrive;
        // the receivers then empty their sockets.
        wait_until_quiet(&count, Duration::from_millis(300), Duration::from_secs(20));
        stop_fabric.store(true, Ordering::Relaxed);
        let stats = f.join().unwrap();
        stop_rx.store(true, Ordering::Relaxed);
        let got: Vec<BTreeSet<u64>> = rx.into_iter().map(|h| h.join().unwrap()).collect();
        (stats, got)
    });
    assert_eq!(stats.received, 1200, "{stats:?}");
    let model = replay(&paths, &stats.inputs, seed);
    assert_eq!(
        got, model,
        "the fabric and its links in virtual time differ"
    );
    // Both effects happened: queue drops on the shared link, loss on route 1's own link.
    assert!(stats.links[0].dropped_queue > 50, "{:?}", stats.links[0]);
    assert!(stats.links[1].lost > 0, "{:?}", stats.links[1]);
    assert_eq!(stats.delivered as usize, got[0].len() + got[1].len());
}
