//! `replicates = N`: each sweep point runs N times with seeds N apart, and claims are judged
//! from the replicates' 95 % confidence intervals, in the summary and the report.

use metronome_config::scenario::ScenarioFile;
use metronome_lab::claims::{check, Verdict};
use metronome_lab::run::{run, RunOptions};
use metronome_testkit::TempDir;

/// UDP at two rates through a link that drops 2 % of packets at random: loss varies from seed
/// to seed around the same mean at both rates, throughput does not.
const SCENARIO: &str = r#"name = "replicated"
seed = 7
replicates = 5
duration = "2s"

[sweep]
rate = ["1mbit", "2mbit"]

[links.lossy]
rate = "10mbit"
delay = "5ms"
loss = 0.02

[topology]
shape = "chain"
nodes = ["a", "b"]
link = "lossy"

[[flow]]
name = "udp"
kind = "udp"
from = "a"
to = "b"
rate = "${rate}"

[[claim]]
text = "the faster flow carries more"
source = "arithmetic"
flow = "udp"
metric = "throughput_mbps"
lhs = [{ rate = "2mbit" }]
op = ">"
rhs = [{ rate = "1mbit" }]

[[claim]]
text = "the faster flow carries less"
source = "a wrong guess"
flow = "udp"
metric = "throughput_mbps"
lhs = [{ rate = "2mbit" }]
op = "<"
rhs = [{ rate = "1mbit" }]

[[claim]]
text = "the faster flow loses a smaller share"
source = "a guess the link does not bear out: its loss is random, whatever the rate"
flow = "udp"
metric = "loss_percent"
lhs = [{ rate = "2mbit" }]
op = "<"
rhs = [{ rate = "1mbit" }]
evidence = ["throughput_mbps", "bottleneck_drop_percent"]
"#;

#[test]
fn replicates_run_with_their_own_seeds_and_claims_get_intervals() {
    let file = ScenarioFile::parse(SCENARIO, "replicated.toml").unwrap();
    let dir = TempDir::new("lab-replicates");
    let out = dir.join("run");
    let s = run(&file, &RunOptions::new(out.clone())).unwrap();
    assert_eq!(s.points.len(), 10);
    // Each point's replicates: seeds 7 to 11, and different draws of the same loss.
    for rate in ["1mbit", "2mbit"] {
        let reps: Vec<_> = s
            .points
            .iter()
            .filter(|p| p.params["rate"] == rate)
            .collect();
        let seeds: Vec<u64> = reps.iter().map(|p| p.seed).collect();
        assert_eq!(seeds, [7, 8, 9, 10, 11], "{rate}");
        let names: Vec<&str> = reps
            .iter()
            .map(|p| p.params["replicate"].as_str())
            .collect();
        assert_eq!(names, ["1", "2", "3", "4", "5"]);
        let losses: Vec<f64> = reps
            .iter()
            .map(|p| p.flows[0].receivers[0].loss_percent)
            .collect();
        let distinct = losses
            .iter()
            .filter(|l| (**l - losses[0]).abs() > 1e-9)
            .count();
        assert!(distinct > 0, "{rate}: {losses:?}");
        assert!(losses.iter().all(|l| (0.5..5.0).contains(l)), "{losses:?}");
    }
    assert!(s
        .scenario
        .sweep
        .iter()
        .any(|(k, v)| k == "replicate" && v.len() == 5));

    let claims = check(&s);
    let verdicts: Vec<Verdict> = claims.iter().map(|c| c.verdict()).collect();
    for c in &claims {
        println!(
            "{}: {} vs {}, difference {}: {:?}",
            c.claim.text,
            c.left().show(3),
            c.right().show(3),
            c.difference().show(3),
            c.verdict()
        );
        assert_eq!(c.replicates.len(), 5, "{}", c.claim.text);
        assert!(c.difference().half_width.is_some_and(|h| h > 0.0));
    }
    assert_eq!(verdicts[0], Verdict::Agrees);
    assert_eq!(verdicts[1], Verdict::Differs);
    // 2 % random loss at both rates: the interval of the difference holds zero.
    assert_eq!(verdicts[2], Verdict::Inconclusive);
    let d = claims[2].difference();
    assert!(d.mean.abs() < d.half_width.unwrap(), "{d:?}");
    // Its evidence, at the same points: twice the throughput, and no queue drops (the loss is
    // the link's own).
    let ev = &claims[2].evidence;
    let labels: Vec<String> = ev.iter().map(|e| e.evidence.label()).collect();
    assert_eq!(
        labels,
        ["throughput_mbps of udp", "bottleneck_drop_percent"]
    );
    let (l, r) = (ev[0].left().unwrap().mean, ev[0].right().unwrap().mean);
    assert!((l / r - 2.0).abs() < 0.1, "{l} {r}");
    assert_eq!(ev[1].left().unwrap().mean, 0.0);
    assert_eq!(ev[1].replicates.as_ref().unwrap().len(), 5);

    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    // The claims' cells: a mean with its interval under it.
    assert!(report.contains("inconclusive") && report.contains("<br>±\u{a0}"));
    assert!(
        report.contains(
            "<tr class=\"evidence\"><td>↳</td><td></td><td class=\"text\"><code>throughput_mbps of udp</code>"
        ),
        "no evidence row"
    );
    // The verdict at the top, before any table.
    let verdict = "<strong>Verdict:</strong> of 3 claims of the source, 1 agree, 1 differ, \
                   1 inconclusive (<a href=\"#claims\">claims checked</a>; judged from 5 \
                   replicates by 95 % confidence intervals)";
    let at = report.find(verdict).expect("no verdict line");
    assert!(at < report.find("<table").unwrap());
    // Each side says which point it is, and prose reads from the left.
    assert!(
        report.contains("<br><span class=\"at\">rate = 2mbit</span></td><td>&gt;</td>"),
        "no side label"
    );
    assert!(report.contains("<td class=\"text\">the faster flow carries more</td>"));
    assert!(report.contains("Across replicates"));
    // The replicates' table says how well they pin the figures down.
    let known = report
        .split("Across replicates")
        .nth(1)
        .and_then(|r| r.split("<strong>Verdict:</strong> ").nth(1))
        .expect("no verdict line on the replicates' table");
    assert!(
        known.contains(
            " figures are known within ±10 % of their mean, or ±0.1 percentage points for a \
             share (95 % interval); the least certain: "
        ),
        "{}",
        &known[..200]
    );
    // Across the sweep, a cell is its replicates' mean and interval, drawn as a band.
    assert!(
        report.contains("b, 95 % interval"),
        "no band named for receiver b"
    );
    assert!(report.contains("<polygon"), "the sweep plot has no band");

    // Every metric over each point's replicates, in replicates.csv: the mean and Student's
    // interval of the five losses, worked here from the points themselves.
    let csv = std::fs::read_to_string(out.join("replicates.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("rate,flow,metric,n,mean,ci95_low,ci95_high")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    for rate in ["1mbit", "2mbit"] {
        let losses: Vec<f64> = s
            .points
            .iter()
            .filter(|p| p.params["rate"] == rate)
            .map(|p| p.flows[0].receivers[0].loss_percent)
            .collect();
        let mean = losses.iter().sum::<f64>() / 5.0;
        let sd = (losses.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
        let half = 2.776 * sd / 5f64.sqrt();
        let row = rows
            .iter()
            .find(|r| r[0] == rate && r[1] == "udp" && r[2] == "loss_percent")
            .unwrap_or_else(|| panic!("no loss row for {rate} in\n{csv}"));
        let num = |i: usize| row[i].parse::<f64>().unwrap();
        assert_eq!(row[3], "5");
        assert!((num(4) - mean).abs() < 1e-9, "{row:?} against {mean}");
        assert!((num(5) - (mean - half)).abs() < 1e-9, "{row:?}");
        assert!((num(6) - (mean + half)).abs() < 1e-9, "{row:?}");
    }
    // One flow: no Jain's index; no frames: no frame metrics.
    assert!(rows
        .iter()
        .all(|r| r[2] != "jain_index" && r[2] != "psnr_y_db"));
    assert!(rows
        .iter()
        .any(|r| r[0] == "2mbit" && r[2] == "throughput_mbps"));
}
