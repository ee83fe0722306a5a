//! A multicast group's receivers that saw the same thing are one row of the report, named by
//! their range; a receiver that saw something else keeps its own row. Flows are judged for
//! fairness among those that shared a bottleneck, one table per bottleneck.

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

/// Two pairs of flows, each pair behind its own 10 Mbit/s link: two bottlenecks, each with
/// its own index; no index over all four, which share none.
const TWO_BOTTLENECKS: &str = r#"name = "two-bottlenecks"
seed = 1
duration = "2s"

[links.lan]
rate = "1gbit"

[links.edge]
rate = "10mbit"
delay = "5ms"

[topology]
shape = "star"
center = "switch"
leaves = [
  { node = "server", link = "lan" },
  { node = "v1", link = "edge" },
  { node = "v2", link = "edge" },
]

[[flow]]
name = "a1"
kind = "udp"
from = "server"
to = "v1"
rate = "8mbit"

[[flow]]
name = "a2"
kind = "udp"
from = "server"
to = "v1"
rate = "4mbit"

[[flow]]
name = "b1"
kind = "udp"
from = "server"
to = "v2"
rate = "6mbit"

[[flow]]
name = "b2"
kind = "udp"
from = "server"
to = "v2"
rate = "6mbit"
"#;

/// Two flows of 4.5 Mbit/s into one 10 Mbit/s link for 2 s, then a 2 s drain.
const NEARLY_FULL: &str = r#"name = "nearly-full"
seed = 1
duration = "2s"
drain = "2s"

[links.lan]
rate = "1gbit"

[links.edge]
rate = "10mbit"
delay = "5ms"

[topology]
shape = "star"
center = "switch"
leaves = [
  { node = "server", link = "lan" },
  { node = "v1", link = "edge" },
]

[[flow]]
name = "c1"
kind = "udp"
from = "server"
to = "v1"
rate = "4.5mbit"

[[flow]]
name = "c2"
kind = "udp"
from = "server"
to = "v1"
rate = "4.5mbit"
"#;

/// A link is busy by what it carried while its flows sent, not over the drain after them:
/// 9 Mbit/s (with headers, more) into 10 is a shared bottleneck, though over the run and its
/// drain it carried less than [`metronome_lab::fairness::BUSY`] of its rate.
#[test]
fn a_link_is_judged_busy_while_its_flows_send_not_over_the_drain() {
    let file = ScenarioFile::parse(NEARLY_FULL, "nearly-full.toml").unwrap();
    let dir = TempDir::new("lab-report-nearly-full");
    let s = run(&file, &RunOptions::new(dir.join("run"))).unwrap();
    let p = &s.points[0];
    let groups: Vec<Vec<&str>> = p
        .bottlenecks
        .iter()
        .map(|g| g.links.iter().map(String::as_str).collect())
        .collect();
    assert_eq!(groups, [vec!["switch→v1"]], "{p:?}");
    assert!(p.bottlenecks[0].fairness.jain_index > 0.99, "{p:?}");
}

#[test]
fn flows_are_judged_for_fairness_per_bottleneck_they_share() {
    let file = ScenarioFile::parse(TWO_BOTTLENECKS, "two.toml").unwrap();
    let dir = TempDir::new("lab-report-bottlenecks");
    let out = dir.join("run");
    let s = run(&file, &RunOptions::new(out.clone())).unwrap();
    let p = &s.points[0];
    assert!(p.fairness.is_none(), "the four flows share no link: {p:?}");
    let groups: Vec<(Vec<&str>, Vec<&str>)> = p
        .bottlenecks
        .iter()
        .map(|g| {
            let flows = g.fairness.flows.iter().map(|f| f.flow.as_str()).collect();
            (g.links.iter().map(String::as_str).collect(), flows)
        })
        .collect();
    assert_eq!(
        groups,
        [
            (vec!["switch→v1"], vec!["a1", "a2"]),
            (vec!["switch→v2"], vec!["b1", "b2"])
        ]
    );
    // 8 and 4 Mbit/s into 10 leave unequal shares (about 2:1, Jain's 0.9); 6 and 6 equal.
    let jain: Vec<f64> = p
        .bottlenecks
        .iter()
        .map(|g| g.fairness.jain_index)
        .collect();
    assert!(jain[0] < 0.95 && jain[1] > 0.99, "{jain:?}");
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(report.contains("Sharing the bottleneck at switch→v1:"));
    assert!(report.contains("Sharing the bottleneck at switch→v2:"));
}
