//! Network-namespace mode with real programs: iperf3 (from Debian) in two namespaces joined
//! only by the emulator. UDP: iperf3's loss is what the link model, fed the packets' arrivals,
//! drops (replayed in virtual time). TCP (the kernel's): the rate is the link's, less headers.
//! Needs root, `ip` and iperf3; every namespace and process is removed, also on failure.

use metronome_emu::fabric::{Datagram, Fabric, Input};
use metronome_emu::netns::{remove_stale, NetnsPair};
use metronome_netsim::{Link, LinkConfig, SendOutcome};
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
    net: u8,
    ab: LinkConfig,
    ba: LinkConfig,
    client_args: &[&str],
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
    let pair = NetnsPair::create(tag, net).expect("namespaces (this test needs root)");
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
        201,
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
    let (v, _) = iperf3("tcp", 202, ab, ba, &["-t", "6", "-O", "2"]);
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
