//! TFRC and GCC, each to one viewer across seed 002's dumbbell (4 Mbit/s, 10 ms, 50 packets
//! of drop-tail queue), alone and beside a TCP flow: the built-in `unicast-cc` and
//! `unicast-cc-tcp`.

use metronome_config::scenario::ScenarioFile;
use metronome_lab::builtin;
use metronome_lab::results::Summary;
use metronome_lab::run::{run, RunOptions};

fn run_builtin(name: &str) -> Summary {
    let b = builtin::find(name).unwrap();
    let file = ScenarioFile::parse(b.text, &format!("builtin:{name}")).unwrap();
    let dir = std::env::temp_dir().join(format!("metronome-lab-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = run(&file, &RunOptions::new(dir.clone()));
    let _ = std::fs::remove_dir_all(&dir);
    s.unwrap()
}

/// (throughput bit/s, loss %, mean one-way delay ms) of `flow`'s receiver at the point of `cc`.
fn figures(s: &Summary, cc: &str, flow: &str) -> (f64, f64, f64) {
    let p = s.points.iter().find(|p| p.params["cc"] == cc).unwrap();
    let r = &p.flows.iter().find(|f| f.name == flow).unwrap().receivers[0];
    (
        r.throughput_bps,
        r.loss_percent,
        r.mean_delay_us.as_millis_f64(),
    )
}

#[test]
fn alone_gcc_finds_the_link_by_delay_and_tfrc_by_loss() {
    let s = run_builtin("unicast-cc");
    let (tfrc, gcc) = (figures(&s, "tfrc", "video"), figures(&s, "gcc", "video"));
    println!("alone: tfrc {tfrc:?}, gcc {gcc:?}");
    for c in metronome_lab::claims::check(&s) {
        println!("claim: {}: {:?}", c.claim.text, c.values);
        assert_eq!(c.holds(), Some(true), "{}", c.claim.text);
    }
    // Both ramp up to most of the 4 Mbit/s link (GCC 8 % a second from 500 kbit/s, so its
    // mean over 40 s is lower); GCC loses nothing and keeps the delay near the 20 ms path's.
    assert!(tfrc.0 > 2.5e6 && gcc.0 > 1.8e6, "{tfrc:?} {gcc:?}");
    assert_eq!(gcc.1, 0.0);
    assert!(tfrc.1 > 0.0);
    assert!(gcc.2 < 35.0 && tfrc.2 > gcc.2 + 10.0, "{tfrc:?} {gcc:?}");
}

#[test]
fn beside_tcp_both_are_tcp_friendly_and_tfrc_the_more_even() {
    let s = run_builtin("unicast-cc-tcp");
    for p in &s.points {
        let cc = &p.params["cc"];
        let fair = p.fairness.as_ref().expect("two flows");
        println!(
            "{cc}: video {:.2} Mbit/s, TCP {:.2} Mbit/s, Jain {:.3}",
            fair.flows[0].throughput_bps / 1e6,
            fair.flows[1].throughput_bps / 1e6,
            fair.jain_index
        );
        // The link is used, and both are TCP-friendly by TFMCC's definition: within a factor
        // of two of the TCP flow.
        let total: f64 = fair.flows.iter().map(|f| f.throughput_bps).sum();
        assert!(total > 3.2e6, "{cc}: {total}");
        assert!(fair.max_ratio < 2.0, "{cc}: {fair:?}");
    }
    let jain = |cc: &str| {
        let p = s.points.iter().find(|p| p.params["cc"] == cc).unwrap();
        p.fairness.as_ref().unwrap().jain_index
    };
    // TFRC is TCP-friendly as designed; GCC nearly as much.
    assert!(jain("tfrc") > 0.95 && jain("gcc") > 0.9);
    // The claim that GCC is as fair is checked and, here, not met: the report says why.
    let c = metronome_lab::claims::check(&s);
    assert_eq!(c.len(), 1);
    assert!(c[0]
        .holds()
        .is_some_and(|h| h || !c[0].claim.note.is_empty()));
}
