//! `metronome emu relay` between Metronome's own sender and receiver on loopback: the stream
//! crosses the emulated link (30 ms of delay) and the receiver measures that delay from the
//! sender's send-time stamps; the relay forwards every packet it got, and says how late it was.

mod common;

use common::{bin, json, port_pair};
use std::process::Stdio;
use std::time::Duration;

#[test]
fn a_stream_crosses_the_relay_with_the_links_delay() {
    let (relay_port, dest_port) = (port_pair(), port_pair());
    let recv = bin()
        .args([
            "recv",
            &format!("rtp://127.0.0.1:{dest_port}"),
            "--json",
            "--duration",
            "5",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let relay = bin()
        .args(["emu", "relay", "--json", "--duration", "4"])
        .args(["--listen", &format!("127.0.0.1:{relay_port}")])
        .args(["--to", &format!("127.0.0.1:{dest_port}")])
        .args(["--rate", "50mbit", "--delay", "30ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let sent = json(
        &bin()
            .args(["serve", &format!("rtp://127.0.0.1:{relay_port}"), "--json"])
            .args(["--duration", "2", "--send-time", "--mux-rate", "2M"])
            .output()
            .unwrap(),
    );
    let relay = json(&relay.wait_with_output().unwrap());
    let recv = json(&recv.wait_with_output().unwrap());
    let packets = sent["packets"].as_u64().unwrap();
    assert_eq!(relay["schema"], "metronome.emu.relay/1");
    assert_eq!(relay["received"].as_u64(), Some(packets), "{relay}");
    assert_eq!(relay["forwarded"].as_u64(), Some(packets), "{relay}");
    let src = &recv["sources"][0];
    assert_eq!(src["received"].as_u64(), Some(packets), "{recv}");
    // 30 ms of propagation plus 1344 bytes at 50 Mbit/s: no packet can be faster.
    let owd = &src["one_way_delay"];
    assert!(owd["min_us"].as_f64().unwrap() >= 30_000.0, "{owd}");
    assert_eq!(relay["lateness"]["count"].as_u64(), Some(packets));
}

#[test]
fn a_bad_link_option_is_refused_with_what_to_write() {
    let out = bin()
        .args([
            "emu",
            "relay",
            "--listen",
            "127.0.0.1:0",
            "--to",
            "127.0.0.1:9",
            "--loss",
            "150%",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("outside 0..1"), "{err}");
}
