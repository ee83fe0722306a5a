//! The UDP relay on loopback: what it forwards is what the link model, fed the same arrival
//! times, delivers (replayed in virtual time, datagram by datagram), no datagram leaves before
//! the model's time, and the netem-limited link of seed 001's poor client loses about what the
//! simulator says.

use metronome_emu::relay::{Relay, RelayConfig};
use metronome_link::{Link, LinkConfig, LossModel, SendOutcome};
use metronome_rt::wait::{WaitMode, Waiter};
use metronome_time::IPV4_UDP_OVERHEAD;
use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Sends `n` datagrams of `payload` bytes, one every `gap`, each carrying its number.
fn send(to: SocketAddr, n: u64, payload: usize, gap: Duration) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut w = Waiter::new(WaitMode::SleepSpin);
    let start = metronome_rt::clock::mono_ns();
    let mut buf = vec![0u8; payload];
    for i in 0..n {
        w.wait_until(start + i * gap.as_nanos() as u64);
        buf[..8].copy_from_slice(&i.to_be_bytes());
        s.send_to(&buf, to).unwrap();
    }
}

/// Receives until quiet for 1.5 s; the numbers received.
fn receive(sock: UdpSocket) -> BTreeSet<u64> {
    sock.set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let mut got = BTreeSet::new();
    let mut buf = [0u8; 2048];
    while let Ok(n) = sock.recv(&mut buf) {
        if n >= 8 {
            got.insert(u64::from_be_bytes(buf[..8].try_into().unwrap()));
        }
    }
    got
}

fn run(
    link: LinkConfig,
    n: u64,
    payload: usize,
    gap: Duration,
) -> (metronome_emu::relay::RelayStats, BTreeSet<u64>) {
    let sink = metronome_testkit::udp_sink();
    let mut cfg = RelayConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        sink.local_addr().unwrap(),
        link,
    );
    cfg.record_inputs = true;
    cfg.seed = 7;
    let relay = Relay::open(cfg).unwrap();
    let at = relay.local_addr().unwrap();
    let stop = AtomicBool::new(false);
    let run_for = gap * n as u32 + Duration::from_millis(500);
    std::thread::scope(|s| {
        let r = s.spawn(|| relay.run(&stop, Some(run_for)));
        let got = s.spawn(move || receive(sink));
        send(at, n, payload, gap);
        (r.join().unwrap(), got.join().unwrap())
    })
}

/// The same datagrams through the same model in virtual time: the numbers it delivers.
fn replay(link: LinkConfig, seed: u64, inputs: &[metronome_emu::relay::Input]) -> BTreeSet<u64> {
    let mut l = Link::new(link, seed);
    let mut out = BTreeSet::new();
    for i in inputs {
        let n = u64::from_be_bytes(i.head[..8].try_into().unwrap());
        if l.send(i.at, i.len + IPV4_UDP_OVERHEAD, n) == SendOutcome::Queued {
            out.insert(n);
        }
    }
    out
}

#[test]
fn the_relay_forwards_what_the_model_delivers() {
    // Seed 001's poor client: 10 Mbit/s, 20 ms, netem limit 2; iperf at 2 Mbit/s.
    let link = LinkConfig {
        rate_bps: Some(10_000_000),
        delay: Duration::from_millis(20),
        netem_limit: Some(2),
        loss: LossModel::Bernoulli(0.01),
        ..LinkConfig::default()
    };
    let n = 600;
    let (stats, got) = run(link.clone(), n, 1470, Duration::from_nanos(5_880_000));
    assert_eq!(stats.received, n, "{stats:?}");
    assert_eq!(stats.inputs.len() as u64, n);
    // What arrived is exactly what the model lets through, given the arrival times it saw.
    let model = replay(link, 7, &stats.inputs);
    assert_eq!(got, model, "relay {stats:?}");
    assert_eq!(stats.forwarded, got.len() as u64);
    assert_eq!(stats.forwarded + stats.lost + stats.dropped_queue, n);
    // Evenly spaced, 2 of every 4 pass, less 1 % random loss; the sender's own timing on a
    // busy host can only move a few datagrams.
    let loss = 100.0 * (1.0 - got.len() as f64 / n as f64);
    assert!((40.0..65.0).contains(&loss), "{loss} % lost; {stats:?}");
    // Never early: lateness is measured from the model's time and is never negative by
    // construction; the relay says how late it was.
    let late = stats.lateness.summary();
    eprintln!("relay lateness: {late}");
    assert_eq!(late.count, stats.forwarded);
}

#[test]
fn an_ideal_link_forwards_everything_in_order() {
    let (stats, got) = run(LinkConfig::default(), 300, 200, Duration::from_micros(500));
    assert_eq!(stats.forwarded, 300, "{stats:?}");
    assert_eq!(got.len(), 300);
}
