//! `trace = "pcap"`: each host's packets, sent and received, in a capture file that tcpdump
//! (Debian's `tcpdump`) reads: as many packets as the summary counts, RTP and RTCP on their
//! ports, TCP segments with the hosts' addresses, every checksum right.

use metronome_config::scenario::ScenarioFile;
use metronome_lab::run::{run, RunOptions};
use metronome_testkit::TempDir;
use std::process::Command;

const SCENARIO: &str = r#"name = "capture"
seed = 3
duration = "1s"
drain = "500ms"
trace = "pcap"

[links.l]
rate = "20mbit"
delay = "5ms"
loss = 0.01

[topology]
shape = "chain"
nodes = ["a", "b"]
link = "l"

[[flow]]
name = "rtp"
kind = "rtp"
from = "a"
to = "b"
rate = "2mbit"

[[flow]]
name = "udp"
kind = "udp"
from = "a"
to = "b"
rate = "1mbit"

[[flow]]
name = "tcp"
kind = "tcp"
from = "a"
to = "b"
"#;

/// tcpdump's lines for `file`, one per packet, with a filter.
fn tcpdump(file: &std::path::Path, filter: &str) -> Vec<String> {
    let out = Command::new("tcpdump")
        .args(["-nn", "-r"])
        .arg(file)
        .args(filter.split_whitespace())
        .output()
        .expect("tcpdump runs (Debian's tcpdump)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('\t'))
        .map(String::from)
        .collect()
}

#[test]
fn each_hosts_packets_are_a_capture_file_tcpdump_reads() {
    let file = ScenarioFile::parse(SCENARIO, "capture.toml").unwrap();
    let dir = TempDir::new("lab-pcap");
    let s = run(&file, &RunOptions::new(dir.0.join("run"))).unwrap();
    let point = dir.0.join("run/points/p000");
    assert!(
        !point.join("packets.csv").exists(),
        "only the captures were asked for"
    );
    let b = point.join("b.pcap");
    let flow = |name: &str| s.points[0].flows.iter().find(|f| f.name == name).unwrap();
    // What reached b: the UDP flow's datagrams (flow 1: port 5010) and the RTP packets (flow
    // 0: port 5000), as many as the summary counts received.
    let received = |name: &str| flow(name).receivers[0].packets;
    let rtp = tcpdump(&b, "dst host 10.0.0.2 and udp dst port 5000");
    let udp = tcpdump(&b, "dst host 10.0.0.2 and udp dst port 5010");
    assert_eq!(
        rtp.len() as u64,
        received("rtp"),
        "{:?}",
        &rtp[..3.min(rtp.len())]
    );
    assert_eq!(udp.len() as u64, received("udp"));
    // The sender's RTCP reaches b on the RTP port + 1, and tcpdump reads it as RTCP: a
    // sender report.
    let rtcp = Command::new("tcpdump")
        .args(["-nn", "-T", "rtcp", "-r"])
        .arg(&b)
        .args(["udp", "port", "5001"])
        .output()
        .unwrap();
    let rtcp = String::from_utf8_lossy(&rtcp.stdout);
    assert!(
        rtcp.contains("10.0.0.1.5001 > 10.0.0.2.5001:  sr @"),
        "{rtcp}"
    );
    // TCP both ways between the hosts' addresses.
    let tcp = tcpdump(&point.join("a.pcap"), "tcp");
    assert!(tcp
        .iter()
        .any(|l| l.contains("10.0.0.1.") && l.contains("> 10.0.0.2.")));
    assert!(tcp
        .iter()
        .any(|l| l.contains("10.0.0.2.") && l.contains("> 10.0.0.1.")));
    // Every checksum is right (tcpdump -vv checks them: "sum ok", "correct").
    for f in ["a.pcap", "b.pcap"] {
        let all = Command::new("tcpdump")
            .args(["-nn", "-vv", "-r"])
            .arg(point.join(f))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&all.stdout);
        assert!(text.lines().count() > 100, "{f}");
        let wrong = ["(incorrect", "bad cksum", "bad udp cksum"];
        assert!(!wrong.iter().any(|w| text.contains(w)), "{f}: {text}");
        assert!(
            text.contains("[udp sum ok]") && text.contains("(correct)"),
            "{f}"
        );
    }
}
