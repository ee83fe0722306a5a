//! `metronome lab` end to end: run a built-in scenario in shards, merge them with `lab report`,
//! compare two runs, and read a broken scenario's error.

mod common;

use common::{assert_durations_in_us, assert_one_vocabulary};
use metronome_testkit::TempDir;
use std::process::Command;

fn metronome(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_metronome"))
        .args(args)
        .output()
        .expect("the metronome binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `out`, a `--json` command's stdout: one document alone, valid against schema `name`.
fn valid_json(out: &str, name: &str) -> serde_json::Value {
    let v = serde_json::from_str(out).unwrap_or_else(|e| panic!("{name}: not JSON alone: {e}"));
    common::assert_valid(&v, name);
    v
}

#[test]
fn shards_merge_into_one_report_and_runs_compare() {
    let tmp = TempDir::new("cli-lab-shards");
    let d = |s: &str| tmp.0.join(s).to_string_lossy().into_owned();
    let (ok, list, _) = metronome(&["lab", "list"]);
    assert!(ok && list.contains("seed001-udp"), "{list}");
    let (ok, list, err) = metronome(&["lab", "list", "--json"]);
    assert!(ok, "{err}");
    let v = valid_json(&list, "lab-list");
    assert!(v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["name"] == "seed001-udp"));
    // A built-in printed by `lab show` is the same scenario as the built-in: one shard runs
    // from the printed file, the other by name, and they merge.
    let (ok, text, err) = metronome(&["lab", "show", "seed001-udp"]);
    assert!(ok, "{err}");
    std::fs::write(tmp.0.join("shown.toml"), text).unwrap();
    for (i, scenario) in [d("shown.toml"), "seed001-udp".into()].iter().enumerate() {
        let shard = format!("{i}/2");
        let dir = d(&format!("s{i}"));
        let (ok, out, err) = metronome(&[
            "lab", "run", scenario, "--out", &dir, "--shard", &shard, "--json",
        ]);
        assert!(ok, "{out}\n{err}");
        // stdout is the one document: where the results went, and the shard's summary.
        let v = valid_json(&out, "lab-run");
        assert_eq!(v["results"], dir.as_str());
        assert_eq!(v["summary"]["points"].as_array().unwrap().len(), 5);
    }
    let (ok, out, err) = metronome(&[
        "lab",
        "report",
        &d("s0"),
        &d("s1"),
        "--out",
        &d("merged"),
        "--json",
    ]);
    assert!(ok, "{out}\n{err}");
    let v = valid_json(&out, "lab-report");
    assert_eq!(
        (&v["merged"], &v["points"], &v["total_points"]),
        (&2.into(), &10.into(), &10.into())
    );
    // The sweep as a Slurm job array, written (not submitted): the scripts, as JSON.
    let (ok, out, err) = metronome(&[
        "lab",
        "slurm",
        "seed001-udp",
        "--shards",
        "2",
        "--out",
        &d("slurm"),
        "--json",
    ]);
    assert!(ok, "{out}\n{err}");
    let v = valid_json(&out, "lab-slurm");
    assert!(v["submitted"].is_null());
    for script in v["scripts"].as_array().unwrap() {
        assert!(
            std::path::Path::new(script.as_str().unwrap()).is_file(),
            "{script}"
        );
    }
    let summary = std::fs::read_to_string(tmp.0.join("merged/summary.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(v["schema"], "metronome.lab.summary/3");
    assert_durations_in_us(&v);
    common::assert_valid(&v, "lab-summary");
    assert_eq!(v["points"].as_array().unwrap().len(), 10);
    assert!(std::fs::read_to_string(tmp.0.join("merged/report.html"))
        .unwrap()
        .contains("Seed 001"));

    let (ok, out, err) = metronome(&["lab", "run", "seed001-udp", "--out", &d("whole"), "--quiet"]);
    assert!(ok, "{out}\n{err}");
    let (ok, out, err) = metronome(&["lab", "compare", &d("whole"), &d("merged"), "--json"]);
    assert!(ok, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_one_vocabulary(&v);
    common::assert_valid(&v, "lab-compare");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 30);
    // Same scenario, same seed: the shards measured exactly what the whole run did.
    for r in rows {
        for figure in [
            "loss_percent",
            "throughput_bps",
            "jitter_us",
            "mean_delay_us",
        ] {
            assert_eq!(r[figure][0], r[figure][1], "{figure} in {r}");
        }
    }
    // A directory that is not empty is not overwritten.
    let (ok, _, err) = metronome(&["lab", "run", "seed001-udp", "--out", &d("whole"), "--quiet"]);
    assert!(!ok && err.contains("not empty"), "{err}");
}

/// A TCP flow, and a group of three viewers behind equal links of their own, 2 s.
const TCP_AND_GROUP: &str = r#"
name = "tcp-and-group"
duration = "2s"
[links.lan]
rate = "1gbit"
[links.edge]
rate = "20mbit"
delay = "10ms"
[topology]
shape = "star"
center = "switch"
leaves = [
  { node = "server", link = "lan" },
  { node = "v1", link = "edge" },
  { node = "v2", link = "edge" },
  { node = "v3", link = "edge" },
  { node = "t", link = "edge" },
]
[[flow]]
name = "bulk"
kind = "tcp"
from = "server"
to = "t"
[[flow]]
name = "group"
kind = "udp"
from = "server"
to = ["v1", "v2", "v3"]
rate = "2mbit"
payload = 1200
"#;

#[test]
fn compare_says_n_a_for_tcp_and_names_equal_receivers_once() {
    let tmp = TempDir::new("cli-lab-compare");
    let d = |s: &str| tmp.0.join(s).to_string_lossy().into_owned();
    std::fs::write(tmp.0.join("s.toml"), TCP_AND_GROUP).unwrap();
    for out in ["a", "b"] {
        let (ok, o, err) = metronome(&["lab", "run", &d("s.toml"), "--out", &d(out), "--quiet"]);
        assert!(ok, "{o}\n{err}");
    }
    let (ok, out, err) = metronome(&["lab", "compare", &d("a"), &d("b"), "--json"]);
    assert!(ok, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    common::assert_valid(&v, "lab-compare");
    let rows = v["rows"].as_array().unwrap();
    let row = |flow: &str| rows.iter().find(|r| r["flow"] == flow).unwrap();
    // TCP has no per-packet jitter or delay here: null, not 0.
    let bulk = row("bulk");
    assert!(
        bulk["jitter_us"].is_null() && bulk["mean_delay_us"].is_null(),
        "{bulk}"
    );
    // Three viewers that saw the same: one row that names them.
    assert_eq!(rows.len(), 2, "{out}");
    let group = row("group");
    assert_eq!(group["receiver"], "v1–v3 (3 receivers)", "{group}");
    assert!(group["jitter_us"].is_array(), "{group}");
    let (ok, text, err) = metronome(&["lab", "compare", &d("a"), &d("b")]);
    assert!(ok, "{err}");
    let bulk_line = text.lines().find(|l| l.contains("bulk")).unwrap();
    assert_eq!(bulk_line.matches("n/a").count(), 4, "{text}");
}

#[test]
fn a_broken_scenario_is_refused_with_its_line() {
    let tmp = TempDir::new("cli-lab-broken");
    let path = tmp.0.join("bad.toml");
    std::fs::write(
        &path,
        "name = \"bad\"\n[links.l]\nrate = \"10mbit\"\ndelay = \"20 parsecs\"\n",
    )
    .unwrap();
    let p = path.to_string_lossy().into_owned();
    let (ok, _, err) = metronome(&[
        "lab",
        "run",
        &p,
        "--out",
        &tmp.0.join("o").to_string_lossy(),
    ]);
    assert!(!ok);
    assert!(
        err.contains("bad.toml line 4") && err.contains("15ms"),
        "{err}"
    );
    let (ok, _, err) = metronome(&["lab", "run", "no-such-scenario"]);
    assert!(!ok && err.contains("built in: seed001-udp"), "{err}");
}

#[test]
fn bench_sim_reports_speed_against_the_wall_clock() {
    let (ok, out, err) = metronome(&[
        "bench",
        "sim",
        "--json",
        "--small-media",
        "5s",
        "--large-receivers",
        "200",
        "--large-media",
        "2s",
        "--replicates",
        "1",
    ]);
    assert!(ok, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_one_vocabulary(&v);
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    // Beside ns-3 (scripts/test.sh installs it): the same dumbbell in both, speed of each.
    let ns3 = v["ns3"]["cases"]
        .as_array()
        .unwrap_or_else(|| panic!("no ns3: {v:#}"));
    assert_eq!(ns3.len(), 3, "{v:#}");
    for c in ns3 {
        for side in ["metronome", "ns3"] {
            assert!(c[side]["events_per_s"].as_f64().unwrap() > 0.0, "{c:#}");
        }
    }
    assert_eq!(cases[0]["receivers"], 45);
    assert_eq!(cases[0]["tcp_flows"], 1);
    assert_eq!(cases[1]["receivers"], 200);
    // seed002-tcp at each point (TFMCC, ASMP), its video's work timed apart.
    for (c, cc) in cases[2..].iter().zip(["tfmcc", "asmp"]) {
        assert_eq!(c["name"], format!("seed002-tcp cc={cc}"), "{c}");
        assert_eq!(
            (c["receivers"].as_u64(), c["tcp_flows"].as_u64()),
            (Some(45), Some(1))
        );
        let (wall, video, net) = (
            c["wall_us"].as_f64().unwrap(),
            c["video_us"].as_f64().unwrap(),
            c["network_us"].as_f64().unwrap(),
        );
        // Each is rounded to the nanosecond.
        assert!(video > 0.0 && (wall - video - net).abs() <= 0.002, "{c}");
    }
    for c in cases {
        assert!(c["events"].as_u64().unwrap() > 1000, "{c}");
        assert!(c["sim_to_wall"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["delivered_packets"].as_u64().unwrap() > 0, "{c}");
    }
    // seed002-tcp whole, as `lab run` runs it: its parts add up to its points' work.
    let w = &v["whole_run"];
    assert_eq!(
        (w["points"].as_u64(), w["target_wall_us"].as_f64()),
        (Some(2), Some(120e6)),
        "{w}"
    );
    let part = |k: &str| w[k].as_f64().unwrap();
    assert!(part("ladder_us") > 0.0 && part("judging_us") > 0.0, "{w}");
    assert!(part("sending_us") >= 0.0 && part("network_us") > 0.0, "{w}");
    assert!(part("wall_us") > 0.0, "{w}");
    assert!(v["host"].is_object(), "{v}");
}

/// `lab run`'s table on stdout says a group's receivers that saw the same once, and a TCP
/// flow's packet figures are n/a (its bytes are counted as the application reads them).
#[test]
fn the_printed_table_collapses_equal_receivers_and_says_n_a_for_tcp() {
    let tmp = TempDir::new("cli-lab-table");
    let scenario = tmp.0.join("group.toml");
    std::fs::write(
        &scenario,
        r#"name = "group"
duration = "2s"

[links.access]
rate = "10mbit"
delay = "5ms"

[topology]
shape = "dumbbell"
routers = ["a", "b"]
bottleneck = "access"
left = [{ node = "server", link = "access" }, { node = "tcp_sender", link = "access" }]
right = [{ prefix = "R", count = 4, link = "access" }, { node = "tcp_receiver", link = "access" }]

[[flow]]
name = "video"
kind = "rtp"
from = "server"
to = "R*"
rate = "1mbit"

[[flow]]
name = "tcp"
kind = "tcp"
from = "tcp_sender"
to = "tcp_receiver"
"#,
    )
    .unwrap();
    let out_dir = tmp.0.join("run").to_string_lossy().into_owned();
    let (ok, out, err) = metronome(&["lab", "run", &scenario.to_string_lossy(), "--out", &out_dir]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("video          → R1–R4 (4 receivers)"),
        "{out}"
    );
    assert!(!out.contains("→ R2"), "{out}");
    let tcp = out
        .lines()
        .skip_while(|l| !l.contains("→ tcp_receiver"))
        .nth(1);
    assert!(
        tcp.is_some_and(|l| l.contains("jitter         n/a  delay         n/a")),
        "{out}"
    );
}
