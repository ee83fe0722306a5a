//! Links that change over time, from scenario files: a rate square wave and a Mahimahi trace
//! file, seen in a UDP flow's throughput over time.

use metronome_config::scenario::ScenarioFile;
use metronome_lab::run::{run, RunOptions};
use metronome_testkit::TempDir;

fn run_text(tag: &str, text: &str, files: &[(&str, &str)]) -> metronome_lab::results::Summary {
    let dir = TempDir::new(&format!("vary-{tag}"));
    for (name, body) in files {
        std::fs::write(dir.0.join(name), body).unwrap();
    }
    let path = dir.0.join("s.toml");
    std::fs::write(&path, text).unwrap();
    let file = ScenarioFile::parse(text, &path.to_string_lossy()).unwrap();
    let opts = RunOptions {
        jobs: 1,
        ..RunOptions::new(dir.0.join("out"))
    };
    run(&file, &opts).unwrap()
}

#[test]
fn a_square_wave_link_shows_in_the_throughput_over_time() {
    // 8 Mbit/s for the first half of every 2 s, 2 Mbit/s for the second; 10 Mbit/s offered.
    let text = r#"name = "square"
duration = "8s"
interval = "1s"
[links.wan]
rate = "8mbit"
square = { period = "2s", duty = 0.5, low = { rate = "2mbit" } }
queue_packets = 20
[topology]
shape = "chain"
nodes = ["a", "b"]
link = "wan"
[[flow]]
kind = "udp"
from = "a"
to = "b"
rate = "10mbit"
"#;
    let s = run_text("square", text, &[]);
    let iv = &s.points[0].flows[0].receivers[0].intervals;
    for (i, bin) in iv.iter().take(8).enumerate() {
        let mbps = bin.bytes as f64 * 8.0 / 1e6;
        let want = if i % 2 == 0 { 8.0 } else { 2.0 };
        assert!(
            (mbps - want).abs() / want < 0.03,
            "second {i}: {mbps} Mbit/s"
        );
    }
}

#[test]
fn a_mahimahi_trace_file_is_the_links_capacity() {
    // 2 opportunities per ms: 24.064 Mbit/s.
    let trace: String = (1..=100)
        .flat_map(|ms| [ms, ms])
        .map(|ms| format!("{ms}\n"))
        .collect();
    let text = r#"name = "trace"
duration = "5s"
[links.cell]
delivery_file = "cell.trace"
queue_packets = 100
[links.lan]
[topology]
shape = "chain"
nodes = ["a", "b"]
links = ["cell"]
[[flow]]
kind = "udp"
from = "a"
to = "b"
rate = "40mbit"
"#;
    let s = run_text("trace", text, &[("cell.trace", &trace)]);
    let r = &s.points[0].flows[0].receivers[0];
    let got = r.bytes as f64 * 8.0 / 5.0;
    assert!((got - 24_064_000.0).abs() / 24_064_000.0 < 0.02, "{got}");
}

#[test]
fn schedule_errors_name_the_profile() {
    let bad = r#"name = "x"
[links.wan]
rate = "8mbit"
schedule = [{ at = "2s", rate = "2mbit" }, { at = "1s", rate = "4mbit" }]
[topology]
shape = "chain"
nodes = ["a", "b"]
link = "wan"
[[flow]]
kind = "udp"
from = "a"
to = "b"
rate = "1mbit"
"#;
    let f = ScenarioFile::parse(bad, "x.toml").unwrap();
    let e = f.resolve(&f.points()[0]).unwrap_err().to_string();
    assert!(
        e.starts_with("x.toml line 2") && e.contains("[links.wan]: schedule step 2"),
        "{e}"
    );
    let typo = bad.replace(
        "at = \"1s\", rate = \"4mbit\"",
        "at = \"3s\", rat = \"4mbit\"",
    );
    let e = ScenarioFile::parse(&typo, "x.toml")
        .unwrap()
        .resolve_all()
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown key 'rat'"), "{e}");
}
