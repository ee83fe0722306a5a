//! Seed 001's video experiment in the simulator: the encoded test pattern at each ladder
//! bitrate over the three clients' links, without and with loss repair; frames lost and frame
//! delay per client.

use metronome_config::scenario::ScenarioFile;
use metronome_lab::builtin;
use metronome_lab::run::{run, RunOptions};

#[test]
fn frames_are_lost_where_the_link_model_drops_packets_and_repairs_need_room() {
    let b = builtin::find("seed001-video").unwrap();
    let file = ScenarioFile::parse(b.text, "builtin:seed001-video").unwrap();
    let dir = std::env::temp_dir().join(format!("metronome-lab-video-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = RunOptions::new(dir.clone());
    let s = run(&file, &opts);
    // Every frame of every receiver, and the traces, are in the point's directory.
    let frames_csv = std::fs::read_to_string(dir.join("points/p000/video-good.frames.csv"));
    let sent_csv = std::fs::read_to_string(dir.join("points/p000/video-good.sent.csv"));
    let good_csv = std::fs::read_to_string(dir.join("points/p000/video-good.good.packets.csv"));
    let _ = std::fs::remove_dir_all(&dir);
    let s = s.unwrap();
    // Five rates, each without repair, with retransmission, FEC and both.
    assert_eq!(s.points.len(), 20);
    let frames_csv = frames_csv.unwrap();
    assert_eq!(frames_csv.lines().count(), 1 + 300);
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
    assert_eq!(good.len() as u64, s.points[0].flows[2].receivers[0].packets);
    for p in &s.points {
        let rate = &p.params["rate"];
        for r in p.flows.iter().flat_map(|f| &f.receivers) {
            let rate = format!("{rate} {}", p.params["repair"]);
            let fr = r.frames.expect("a video flow has frame figures");
            // 10 s at 30 frames/s.
            assert_eq!(fr.frames, 300, "{rate} {}", r.node);
            // A frame not shown needs a packet lost (after repair) or a frame complete after
            // its play-out time (an I-frame the constant-rate mux spreads over more than the
            // 200 ms); a lost packet carrying video loses a frame.
            let lost = r.repair.map_or(r.lost, |v| v.lost_after);
            if lost == 0 {
                assert_eq!(fr.lost, fr.missed_deadline, "{rate} {}", r.node);
            } else {
                assert!(fr.lost > 0, "{rate} {}", r.node);
            }
            if fr.lost < fr.frames {
                // The 20 ms link delay, at least; the frame's spread over the constant-rate
                // mux adds to it.
                assert!(
                    fr.mean_delay_us.as_nanos_u64() > 21_000_000,
                    "{rate} {}: {fr:?}",
                    r.node
                );
            }
            assert_eq!(fr.lost_i + fr.lost_p, fr.lost, "{rate} {}", r.node);
            // What the screen showed, against the source's pictures: a viewer that lost
            // nothing sees what the encoder made (the pattern is easy at these rates); one that
            // lost frames sees worse.
            let q = fr.pictures.expect("pictures for the test pattern");
            assert_eq!(q.mos_frames.iter().sum::<u64>(), 300);
            if lost == 0 {
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
            } else if fr.lost - fr.missed_deadline.min(fr.lost) > 10 {
                assert!(q.psnr_y_db < 35.0, "{rate} {}: {q:?}", r.node);
                // Losses take MOS from some window of frames (MIV, against the video as sent).
                assert!(q.miv_max_percent > 0.0, "{rate} {}: {q:?}", r.node);
            }
            if fr.lost_i == 10 {
                // No I-frame arrived: the decoder never made a picture.
                assert_eq!(q.blank_frames, 300, "{rate} {}: {q:?}", r.node);
            }
            match r.node.as_str() {
                // Two places in netem's queue for 20 ms (about 1 Mbit/s): at 2 Mbit/s and
                // more, about half the packets or more do not fit, and nearly every frame is
                // damaged, repaired or not (retransmissions bring back a few at 2 Mbit/s).
                "poor" => assert!(fr.lost_percent > 85.0, "{rate}: {fr:?}"),
                // 20 places (about 10.5 Mbit/s): nothing lost below 10 Mbit/s that is not
                // repaired, but where FEC's 20 % and retransmissions together pass the
                // queue's room (8 Mbit/s with both): there repairs push out originals, and
                // a few of the losses stay.
                "good" if rate == "8mbit rtx+fec" => {
                    assert!(lost * 100 <= r.lost, "{rate}: {lost} of {}", r.lost)
                }
                "good" if !rate.starts_with("10mbit") => assert_eq!(lost, 0, "{rate}"),
                _ => {}
            }
        }
        // The report's series: one per receiver, every frame (300 < 600 points).
        assert_eq!(p.frame_series.len(), 3);
        assert!(p
            .frame_series
            .iter()
            .all(|s| s.step == 1 && s.psnr_y_db.len() == 300 && s.delay_us.len() == 300));
    }
    repairs_help_where_the_queue_has_room_and_not_past_its_capacity(&s);
}

/// The recovery column, at the rates where it tells most: where the
/// loss is a full queue (seed 001's links lose nothing at random), a repair needs room in the
/// same queue. FEC's packets rebuild what they cost where the queue has room for them;
/// retransmissions cannot beat the moderate link's capacity at 6 Mbit/s.
fn repairs_help_where_the_queue_has_room_and_not_past_its_capacity(
    s: &metronome_lab::results::Summary,
) {
    // (frames not shown, packets lost by the network, lost after repair) of a client.
    let at = |rate: &str, repair: &str, node: &str| {
        let p = s
            .points
            .iter()
            .find(|p| p.params["rate"] == rate && p.params["repair"] == repair)
            .unwrap();
        let r = p
            .flows
            .iter()
            .flat_map(|f| &f.receivers)
            .find(|r| r.node == node)
            .unwrap();
        let after = r.repair.map_or(r.lost, |v| v.lost_after);
        (r.frames.unwrap().lost, r.lost, after)
    };
    // 4 Mbit/s on the moderate link: FEC's 20 % more packets overflow its queue, and FEC
    // rebuilds nearly all it lost.
    let (none, fec) = (
        at("4mbit", "none", "moderate"),
        at("4mbit", "fec", "moderate"),
    );
    assert_eq!(none.1, 0, "{none:?}");
    assert!(fec.1 > 100 && fec.2 * 100 < fec.1, "{fec:?}");
    assert!(fec.0 <= none.0 + 2, "{fec:?} against {none:?}");
    // 8 Mbit/s on the good link: the same, every packet rebuilt.
    let (none, fec) = (at("8mbit", "none", "good"), at("8mbit", "fec", "good"));
    assert!(
        fec.1 > 100 && fec.2 == 0 && fec.0 == none.0,
        "{fec:?} against {none:?}"
    );
    // 6 Mbit/s on the moderate link: a fifth of the packets do not fit; retransmissions need
    // the same room, and the frames not shown stay within a few of none's.
    let (none, rtx) = (
        at("6mbit", "none", "moderate"),
        at("6mbit", "rtx", "moderate"),
    );
    assert!(none.1 > 1000, "{none:?}");
    assert!(
        rtx.0 + 5 >= none.0 && rtx.2 > none.1 / 2,
        "{rtx:?} against {none:?}"
    );
    // The poor link (two places in its queue) shows almost nothing with any repair.
    for repair in ["none", "rtx", "fec", "rtx+fec"] {
        assert!(at("6mbit", repair, "poor").0 > 290, "{repair}");
    }
}
