//! `metronome bench raw` smoke test: one small case, both systems measured.

mod common;

use common::assert_one_vocabulary;
use serde_json::Value;
use std::process::Command;

#[test]
fn bench_raw_measures_both_systems() {
    let out = Command::new(env!("CARGO_BIN_EXE_metronome"))
        .args([
            "bench",
            "raw",
            "--cases",
            "176x144",
            "--duration",
            "1",
            "--json",
        ])
        .output()
        .expect("metronome runs");
    assert!(
        out.status.success(),
        "bench raw failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_one_vocabulary(&v);
    let runs = v["runs"].as_array().expect("runs");
    let find = |system: &str| {
        runs.iter()
            .find(|r| r["system"] == system)
            .unwrap_or_else(|| panic!("no {system} run in {v:#}"))
    };
    for system in ["metronome", "gstreamer", "gstreamer→metronome-recv"] {
        let r = find(system);
        assert!(r["error"].is_null(), "{system}: {}", r["error"]);
        assert!(
            r["frames_sent"].as_u64().unwrap_or(0) > 0,
            "{system}: {r:#}"
        );
        assert!(
            r["sender_cpu_per_frame_us"].as_f64().unwrap_or(0.0) > 0.0,
            "{system}: {r:#}"
        );
    }
    for system in ["metronome", "gstreamer→metronome-recv"] {
        let r = find(system);
        assert!(
            r["frames_received"].as_u64().unwrap_or(0) > 0,
            "{system}: {r:#}"
        );
    }
    assert!(!v["ratios"].as_array().expect("ratios").is_empty());
}
