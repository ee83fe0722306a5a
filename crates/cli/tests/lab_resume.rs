//! `metronome lab run` that does not finish every point keeps what it finished: stopped by
//! SIGTERM, killed outright, or with a point that fails. `lab report` draws what is there and
//! `lab run --resume DIR` finishes it, with the same figures as a run that was never stopped.

mod common;

use common::{lab_figures, sweep_scenario, Outcome, Running};
use metronome_testkit::TempDir;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Six points (two controllers, three replicates), each a few hundred ms of simulation in a
/// debug build: long enough to stop a run between its first and last point.
fn scenario() -> String {
    sweep_scenario("resume-test", 7, 3, "400s")
}

fn lab(args: &[&str]) -> Command {
    let mut c = common::bin();
    c.arg("lab").args(args);
    c
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A run of the scenario in `dir`, one point at a time, stopped by `signal` once its first
/// point is written.
fn stopped_run(scenario: &Path, dir: &Path, signal: libc::c_int) -> Outcome {
    let mut run = Running::spawn(&mut lab(&[
        "run",
        &s(scenario),
        "--out",
        &s(dir),
        "--jobs",
        "1",
    ]));
    run.wait_for("1/6 points done", Duration::from_secs(120));
    run.signal(signal);
    run.finish_within(Duration::from_secs(30))
}

/// The scenario written in `tmp`, and the directory of a run of it never stopped.
fn scenario_run_whole(tmp: &TempDir) -> (PathBuf, PathBuf) {
    let (path, whole) = (tmp.0.join("resume.toml"), tmp.0.join("whole"));
    std::fs::write(&path, scenario()).unwrap();
    common::run(
        &mut lab(&["run", &s(&path), "--out", &s(&whole), "-q"]),
        Duration::from_secs(300),
    )
    .expect_success();
    (path, whole)
}

#[test]
fn a_stopped_run_keeps_its_points_and_resume_finishes_it_as_if_never_stopped() {
    let tmp = TempDir::new("cli-lab-resume");
    let (scenario, whole) = scenario_run_whole(&tmp);
    let part = tmp.0.join("part");

    let stopped = stopped_run(&scenario, &part, libc::SIGTERM);
    assert!(!stopped.succeeded(), "{}", stopped.report());
    assert!(
        stopped
            .stderr
            .contains(&format!("lab run --resume {}", s(&part))),
        "{}",
        stopped.report()
    );
    // Said at the stop, before the points under way end; then how many stopped part-way
    // and how many never started, adding up with those kept.
    assert!(
        stopped
            .stderr
            .contains("lab: stopping: the points under way end or stop now"),
        "{}",
        stopped.report()
    );
    let counts = stopped
        .stderr
        .split_once(" points finished; ")
        .map(|(a, b)| (a.rsplit(' ').nth(2).unwrap_or(""), b))
        .unwrap_or_else(|| panic!("no count: {}", stopped.report()));
    let n = |s: &str| {
        s.split_whitespace()
            .next()
            .unwrap()
            .parse::<usize>()
            .unwrap()
    };
    let (finished, rest) = (n(counts.0), counts.1);
    let stopped_part_way = n(rest);
    let not_started = n(rest.split_once("part-way and ").unwrap().1);
    assert_eq!(
        finished + stopped_part_way + not_started,
        6,
        "{}",
        stopped.report()
    );
    // What finished is summarised and drawn at once, the report saying what is missing.
    let kept = lab_figures(&part);
    assert!((1..6).contains(&kept.len()), "{kept:?}");
    let report = std::fs::read_to_string(part.join("report.html")).unwrap();
    assert!(report.contains("Incomplete:"), "no notice in the report");
    // Running into it again afresh is refused, with the way to finish it.
    let again = common::run(
        &mut lab(&["run", &s(&scenario), "--out", &s(&part)]),
        Duration::from_secs(30),
    );
    assert!(
        !again.succeeded() && again.stderr.contains("--resume"),
        "{}",
        again.report()
    );

    // A resume killed in turn, once it finished a point: the first stop's summary is gone,
    // and what is drawn is every point now finished, not the first stop's. (With one point
    // left the resume would write its own summary before the kill: nothing to see then.)
    if kept.len() <= 4 {
        let mut resumed = Running::spawn(&mut lab(&["run", "--resume", &s(&part), "--jobs", "1"]));
        resumed.wait_for(
            &format!("1/{} points done", 6 - kept.len()),
            Duration::from_secs(120),
        );
        resumed.signal(libc::SIGKILL);
        resumed.finish_within(Duration::from_secs(30));
        assert!(!part.join("summary.json").exists());
        let drawn = common::run(&mut lab(&["report", &s(&part)]), Duration::from_secs(60));
        assert!(drawn.succeeded(), "{}", drawn.report());
        let more = lab_figures(&part);
        assert!(
            more.len() > kept.len(),
            "{} then {}",
            kept.len(),
            more.len()
        );
    }

    common::run(
        &mut lab(&["run", "--resume", &s(&part), "-q"]),
        Duration::from_secs(300),
    )
    .expect_success();
    assert_eq!(lab_figures(&part), lab_figures(&whole));
    let report = std::fs::read_to_string(part.join("report.html")).unwrap();
    assert!(!report.contains("Incomplete:"));
}

#[test]
fn a_killed_run_is_read_from_its_points_and_resumed() {
    let tmp = TempDir::new("cli-lab-killed");
    let (scenario, whole) = scenario_run_whole(&tmp);
    let part = tmp.0.join("part");
    // SIGKILL: no summary, no report; the run's settings and its finished points remain.
    stopped_run(&scenario, &part, libc::SIGKILL);
    assert!(!part.join("summary.json").exists());
    let drawn = common::run(&mut lab(&["report", &s(&part)]), Duration::from_secs(60));
    assert!(drawn.succeeded(), "{}", drawn.report());
    assert!(
        drawn.stderr.contains("points are here"),
        "{}",
        drawn.report()
    );
    let kept = lab_figures(&part);
    assert!((1..6).contains(&kept.len()), "{kept:?}");
    assert_eq!(kept[..], lab_figures(&whole)[..kept.len()]);

    common::run(
        &mut lab(&["run", "--resume", &s(&part), "--jobs", "2", "-q"]),
        Duration::from_secs(300),
    )
    .expect_success();
    assert_eq!(lab_figures(&part), lab_figures(&whole));
}

#[test]
fn a_failing_point_does_not_lose_the_others() {
    let tmp = TempDir::new("cli-lab-failing");
    // The bottleneck's capacity from a delivery trace, swept over two files; one is missing.
    let text = scenario()
        .replace("replicates = 3\n", "")
        .replace(
            "cc = [\"tfrc\", \"gcc\"]",
            "cc = [\"tfrc\"]\ntrace = [\"here.trace\", \"gone.trace\"]",
        )
        .replace(
            "[links.bottleneck]\nrate = \"4mbit\"",
            "[links.bottleneck]\ndelivery_file = \"${trace}\"",
        );
    let scenario = tmp.0.join("failing.toml");
    std::fs::write(&scenario, text).unwrap();
    let opportunities: String = (1..=100).map(|ms| format!("{ms}\n")).collect();
    std::fs::write(tmp.0.join("here.trace"), &opportunities).unwrap();
    let out = tmp.0.join("out");

    let ran = common::run(
        &mut lab(&["run", &s(&scenario), "--out", &s(&out), "-q"]),
        Duration::from_secs(300),
    );
    assert!(!ran.succeeded(), "{}", ran.report());
    assert!(
        ran.stderr
            .contains("1 of 2 points finished; 1 failed (p001: ")
            && ran.stderr.contains("gone.trace"),
        "{}",
        ran.report()
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["points"].as_array().unwrap().len(), 1);
    assert_eq!(v["failed"][0]["id"], "p001");
    assert_eq!(v["failed"][0]["params"]["trace"], "gone.trace");
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        report.contains("gone.trace"),
        "the report does not say why p001 failed"
    );

    // Once the cause is mended, --resume runs only the failed point.
    std::fs::write(tmp.0.join("gone.trace"), &opportunities).unwrap();
    let resumed = common::run(
        &mut lab(&["run", "--resume", &s(&out)]),
        Duration::from_secs(300),
    );
    assert!(resumed.succeeded(), "{}", resumed.report());
    assert!(
        resumed.stderr.contains("1/1 points done"),
        "{}",
        resumed.report()
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["points"].as_array().unwrap().len(), 2);
    assert!(v.get("failed").is_none(), "{v}");
}
