//! Loss repair in the lab (`repair = "rtx"`), judged by the frames viewers showed: the
//! built-in repair-rtx scenario in the simulator, at 1, 3 and 5 % random loss and on seed
//! 001's moderate link, with and without NACK and retransmission.

use metronome_lab::builtin;
use metronome_lab::results::PointResult;
use metronome_lab::run::{run, RunOptions};
use metronome_link::report::FlowReport;
use metronome_spec::scenario::ScenarioFile;

/// Frames of flow `video` not shown in their slot at point `index`: not arrived, or complete
/// after their play-out time (`arrived` and `missed_deadline` of its frames.csv).
fn not_in_time(dir: &std::path::Path, index: usize) -> usize {
    let csv = dir.join(format!("points/p{index:03}/video.frames.csv"));
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (arrived, missed) = (col("arrived"), col("missed_deadline"));
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[arrived] == "0" || f[missed] == "1")
        .count()
}

fn flow<'a>(p: &'a PointResult, name: &str) -> &'a FlowReport {
    p.flows.iter().find(|f| f.name == name).unwrap()
}

#[test]
fn retransmission_shows_frames_that_random_loss_took_and_cannot_beat_a_full_queue() {
    let b = builtin::find("repair-rtx").unwrap();
    let file = ScenarioFile::parse(b.text, "builtin:repair-rtx").unwrap();
    let dir = std::env::temp_dir().join(format!("metronome-lab-repair-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = run(&file, &RunOptions::new(dir.clone()));
    let html = std::fs::read_to_string(dir.join("report.html"));
    let late: Vec<usize> = (0..6).map(|i| not_in_time(&dir, i)).collect();
    let _ = std::fs::remove_dir_all(&dir);
    let s = s.unwrap();
    assert_eq!(s.points.len(), 6);
    assert!(html
        .unwrap()
        .contains("Loss repair (NACK and retransmission)"));
    for (pair, late) in s.points.chunks(2).zip(late.chunks(2)) {
        let (none, rtx) = (&pair[0], &pair[1]);
        let loss = &none.params["loss"];
        assert_eq!(
            (&none.params["repair"][..], &rtx.params["repair"][..]),
            ("none", "rtx")
        );
        let (plain, repaired) = (flow(none, "video"), flow(rtx, "video"));
        assert!(plain.repair.is_none() && plain.receivers[0].repair.is_none());
        // The network loses as much either way; after repair almost nothing is missing, and
        // far more frames are shown in time.
        let lost = repaired.receivers[0].lost;
        let v = repaired.receivers[0].repair.expect("repair figures");
        assert!(lost > 20, "{loss}: {lost}");
        assert!(
            v.repaired + v.lost_after == lost && v.too_late <= v.lost_after,
            "{loss}: {v:?}"
        );
        assert!(v.lost_after * 20 <= lost, "{loss}: {v:?}");
        // (The few left: a TS packet's RTP timestamp is its send time, so the viewer's
        // deadline for the last packets of a large I-frame is later than the frame's.)
        let (before, after) = (late[0], late[1]);
        assert!(
            after * 4 < before,
            "{loss}: {before} frames not in time without, {after} with"
        );
        // A 40 ms round trip, measured ask to repair.
        assert!(
            (40_000_000..60_000_000).contains(&v.rtt_ns),
            "{loss}: {v:?}"
        );
        // What repairs cost: about what was lost, nothing refused.
        let tx = repaired.repair.expect("sender figures");
        assert!(
            tx.overhead_percent < 2.0 * plain.receivers[0].loss_percent + 0.5,
            "{tx:?}"
        );
        assert_eq!((tx.too_late, tx.over_budget), (0, 0), "{loss}: {tx:?}");
        // Seed 001's moderate link loses what does not fit its 10-packet queue: the
        // retransmissions need the same room. The sender keeps to its quarter of the rate
        // (and the budget's one burst), and most of what it sends is lost again.
        let moderate = flow(rtx, "seed001");
        let tx = moderate.repair.expect("sender figures");
        let burst = 100.0 * (64.0 * 1500.0) / moderate.sent_bytes as f64;
        assert!(tx.overhead_percent <= 25.0 + burst, "{tx:?}");
        assert!(tx.over_budget > 0, "{tx:?}");
        let v = moderate.receivers[0].repair.unwrap();
        assert!(v.repaired * 2 < tx.sent_packets, "{v:?} {tx:?}");
        assert!(v.lost_after_percent > 15.0, "{v:?}");
    }
}
