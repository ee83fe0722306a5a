//! Seed 001's video experiment in the simulator: the encoded test pattern at each ladder
//! bitrate over the three clients' links; frames lost and frame delay per client.

use metronome_lab::builtin;
use metronome_lab::results::Shard;
use metronome_lab::run::{run, RunOptions};
use metronome_spec::scenario::ScenarioFile;

#[test]
fn frames_are_lost_where_the_link_model_drops_packets() {
    let b = builtin::find("seed001-video").unwrap();
    let file = ScenarioFile::parse(b.text, "builtin:seed001-video").unwrap();
    let dir = std::env::temp_dir().join(format!("metronome-lab-video-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = RunOptions {
        mode: Default::default(),
        jobs: 2,
        shard: Shard { index: 0, count: 1 },
        seed: None,
        out: dir.clone(),
        progress: false,
        stop: Default::default(),
    };
    let s = run(&file, &opts);
    let _ = std::fs::remove_dir_all(&dir);
    let s = s.unwrap();
    assert_eq!(s.points.len(), 5);
    for p in &s.points {
        let rate = &p.params["rate"];
        let f = &p.flows[0];
        for r in &f.receivers {
            let fr = r.frames.expect("a video flow has frame figures");
            // 10 s at 30 frames/s.
            assert_eq!(fr.frames, 300, "{rate} {}", r.node);
            // A frame lost needs a packet lost; a lost packet carrying video loses a frame.
            if r.lost == 0 {
                assert_eq!(fr.lost, 0, "{rate} {}", r.node);
            } else {
                assert!(fr.lost > 0, "{rate} {}", r.node);
            }
            if fr.lost < fr.frames {
                // The 20 ms link delay, at least; the frame's spread over the constant-rate
                // mux adds to it.
                assert!(fr.mean_delay_ns > 21_000_000, "{rate} {}: {fr:?}", r.node);
            }
            match r.node.as_str() {
                // Two places in netem's queue for 20 ms: most frames are damaged at any rate.
                "poor" => assert!(fr.lost_percent > 90.0, "{rate}: {fr:?}"),
                // 20 places: nothing lost below 10 Mbit/s.
                "good" if rate != "10mbit" => assert_eq!(fr.lost, 0, "{rate}"),
                _ => {}
            }
        }
    }
}
