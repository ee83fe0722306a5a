//! A multicast group's receivers that saw the same thing are one row of the report, named by
//! their range; a receiver that saw something else keeps its own row.

use metronome_config::scenario::ScenarioFile;
use metronome_lab::run::{run, RunOptions};
use metronome_testkit::TempDir;

/// One UDP group of six: five behind clean links, one behind a lossy one.
const SCENARIO: &str = r#"name = "crowd"
seed = 3
duration = "2s"

[sweep]
rate = ["1mbit", "2mbit"]

[links.clean]
rate = "10mbit"
delay = "5ms"

[links.lossy]
rate = "10mbit"
delay = "5ms"
loss = 0.05

[topology]
shape = "dumbbell"
routers = ["r1", "r2"]
bottleneck = "clean"
left = [{ node = "server", link = "clean" }]
right = [
  { prefix = "R", count = 5, link = "clean" },
  { node = "far", link = "lossy" },
]

[[flow]]
name = "tv"
kind = "udp"
from = "server"
to = ["R1", "R2", "R3", "R4", "R5", "far"]
rate = "${rate}"
"#;

#[test]
fn receivers_with_the_same_figures_are_one_row() {
    let file = ScenarioFile::parse(SCENARIO, "crowd.toml").unwrap();
    let dir = TempDir::new("lab-report-receivers");
    let out = dir.join("run");
    let s = run(&file, &RunOptions::new(out.clone())).unwrap();
    let far = s.points[0].flows[0]
        .receivers
        .iter()
        .find(|r| r.node == "far")
        .unwrap();
    assert!(far.loss_percent > 0.0, "the lossy link lost nothing");
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    // Per point: one row for R1–R5, one for far.
    let row = |who: &str| format!("<td>tv</td><td>udp</td><td>{who}</td>");
    assert_eq!(
        report.matches(&row("R1–R5 (5 receivers)")).count(),
        2,
        "not one row for R1–R5 in each point's table"
    );
    assert_eq!(report.matches(&row("far")).count(), 2);
    assert!(!report.contains(&row("R2")));
    // Across the sweep: one table for the five, one for far.
    assert!(report.contains("<h3>tv → R1–R5 (5 receivers): packets lost, %</h3>"));
    assert!(report.contains("<h3>tv → far: packets lost, %</h3>"));
    assert!(!report.contains("tv → R2"));
}
