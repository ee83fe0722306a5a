//! Seed 001's video experiment in the simulator: the encoded test pattern at each ladder
//! bitrate over the three clients' links; frames lost and frame delay per client.

use metronome_lab::builtin;
use metronome_lab::run::{run, RunOptions};
use metronome_spec::scenario::ScenarioFile;

#[test]
fn frames_are_lost_where_the_link_model_drops_packets() {
    let b = builtin::find("seed001-video").unwrap();
    let file = ScenarioFile::parse(b.text, "builtin:seed001-video").unwrap();
    let dir = std::env::temp_dir().join(format!("metronome-lab-video-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = RunOptions::new(dir.clone());
    let s = run(&file, &opts);
    // Every frame of every receiver, and the traces, are in the point's directory.
    let frames_csv = std::fs::read_to_string(dir.join("points/p000/video.frames.csv"));
    let sent_csv = std::fs::read_to_string(dir.join("points/p000/video.sent.csv"));
    let good_csv = std::fs::read_to_string(dir.join("points/p000/video.good.packets.csv"));
    let _ = std::fs::remove_dir_all(&dir);
    let s = s.unwrap();
    assert_eq!(s.points.len(), 5);
    let frames_csv = frames_csv.unwrap();
    assert_eq!(frames_csv.lines().count(), 1 + 3 * 300);
    assert!(frames_csv.starts_with(metronome_lab::video::FRAMES_HEADER));
    let sent = metronome_quality::trace::read_frames(sent_csv.unwrap().as_bytes()).unwrap();
    assert_eq!(sent.len(), 300);
    // One I-frame a second (openh264's IDR interval), P-frames between.
    let i_frames = sent
        .iter()
        .filter(|f| f.kind == metronome_quality::playout::FrameType::I)
        .count();
    assert_eq!(i_frames, 10);
    let good = metronome_quality::trace::read_packets(good_csv.unwrap().as_bytes()).unwrap();
    assert_eq!(good.len() as u64, s.points[0].flows[0].receivers[2].packets);
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
            assert_eq!(fr.lost_i + fr.lost_p, fr.lost, "{rate} {}", r.node);
            // What the screen showed, against the source's pictures: a viewer that lost
            // nothing sees what the encoder made (the pattern is easy at these rates); one that
            // lost frames sees worse.
            let q = fr.pictures.expect("pictures for the test pattern");
            assert_eq!(q.mos_frames.iter().sum::<u64>(), 300);
            if fr.lost == 0 {
                assert!(
                    q.psnr_y_db > 40.0 && q.mos >= 4.5,
                    "{rate} {}: {q:?}",
                    r.node
                );
                assert!(
                    q.ssim > 0.98 && q.blank_frames == 0,
                    "{rate} {}: {q:?}",
                    r.node
                );
            } else {
                assert!(q.psnr_y_db < 35.0, "{rate} {}: {q:?}", r.node);
                // Losses take MOS from some window of frames (MIV, against the video as sent).
                assert!(q.miv_max_percent > 0.0, "{rate} {}: {q:?}", r.node);
            }
            if fr.lost_i == 10 {
                // No I-frame arrived: the decoder never made a picture.
                assert_eq!(q.blank_frames, 300, "{rate} {}: {q:?}", r.node);
            }
            match r.node.as_str() {
                // Two places in netem's queue for 20 ms: most frames are damaged at any rate.
                "poor" => assert!(fr.lost_percent > 90.0, "{rate}: {fr:?}"),
                // 20 places: nothing lost below 10 Mbit/s.
                "good" if rate != "10mbit" => assert_eq!(fr.lost, 0, "{rate}"),
                _ => {}
            }
        }
        // The report's series: one per receiver, every frame (300 < 600 points).
        assert_eq!(p.frame_series.len(), 3);
        assert!(p
            .frame_series
            .iter()
            .all(|s| s.step == 1 && s.psnr_y_db.len() == 300 && s.delay_ns.len() == 300));
    }
}
