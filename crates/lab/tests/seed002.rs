//! Seed 002's TCP experiment in the simulator, as built in: TFMCC and ASMP multicasting the
//! test pattern to 45 receivers beside one TCP flow across a 4 Mbit/s dumbbell, the video's
//! rendition picked per GOP from seed 002's ladder at the controller's rate.

use metronome_lab::builtin;
use metronome_lab::run::{run, RunOptions};
use metronome_spec::scenario::ScenarioFile;

#[test]
fn tfmcc_and_asmp_share_the_dumbbell_with_tcp_within_a_factor_of_two() {
    let b = builtin::find("seed002-tcp").unwrap();
    let file = ScenarioFile::parse(b.text, "builtin:seed002-tcp").unwrap();
    let dir = std::env::temp_dir().join(format!("metronome-lab-seed002-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = run(&file, &RunOptions::new(dir.clone()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = s.unwrap();
    assert_eq!(s.points.len(), 2);
    // Seed 002's conclusions, each with a figure on both sides (whether they hold is the
    // report's to say, with why where they differ).
    let checked = metronome_lab::claims::check(&s);
    assert_eq!(checked.len(), 6);
    for c in &checked {
        let (l, r) = c
            .values
            .clone()
            .unwrap_or_else(|e| panic!("{}: {e}", c.claim.text));
        println!(
            "claim: {} — {l:.3} {} {r:.3}: {:?}",
            c.claim.text,
            c.claim.op.symbol(),
            c.holds()
        );
        assert!(
            c.holds().is_some_and(|h| h || !c.claim.note.is_empty()),
            "{}: differs without a note",
            c.claim.text
        );
    }
    for p in &s.points {
        let cc = &p.params["cc"];
        assert!(p.warnings.is_empty(), "{cc}: {:?}", p.warnings);
        let video = &p.flows[0];
        let rc = video
            .rate_control
            .as_ref()
            .expect("the controller's figures");
        assert_eq!(&rc.controller, cc);
        // The controller moved the rate, and the source followed it: the video sent more
        // than it started at (500 kbit/s) and less than the bottleneck.
        assert!(rc.changes > 10, "{cc}: {rc:?}");
        let sent_bps = video.sent_bytes as f64 * 8e9 / video.duration_ns as f64;
        assert!(
            sent_bps > 600_000.0 && sent_bps < 4_000_000.0,
            "{cc}: {sent_bps}"
        );
        // 45 receivers behind one bottleneck, none lost on the access links: alike.
        assert_eq!(video.receivers.len(), 45);
        let first = &video.receivers[0];
        assert!(video.receivers.iter().all(|r| r.packets == first.packets));
        // TCP-friendly as TFMCC defines it: within a factor of two of the TCP flow.
        let fair = p.fairness.as_ref().expect("two flows share the bottleneck");
        println!(
            "{cc}: video {:.3} Mbit/s, TCP {:.3} Mbit/s, Jain's index {:.3}, {} target changes; frames lost {:?}",
            fair.flows[0].throughput_bps / 1e6,
            fair.flows[1].throughput_bps / 1e6,
            fair.jain_index,
            rc.changes,
            first.frames.map(|f| (f.lost, f.frames))
        );
        assert!(fair.max_ratio < 2.0, "{cc}: {fair:?}");
        assert!(fair.jain_index > 0.9, "{cc}: {fair:?}");
        // The bottleneck is used: the two flows carry most of its 4 Mbit/s.
        let total: f64 = fair.flows.iter().map(|f| f.throughput_bps).sum();
        assert!(total > 3_200_000.0, "{cc}: {total}");
        // Every frame judged: 73 s at 25 frames/s.
        let fr = first.frames.expect("frame figures");
        assert_eq!(fr.frames, 1825, "{cc}");
        assert!(fr.pictures.is_some(), "{cc}");
    }
}
