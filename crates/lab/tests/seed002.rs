//! Seed 002's TCP experiment in the simulator, as built in: TFMCC and ASMP multicasting the
//! generated high-motion content to 45 receivers beside one TCP flow across a 4 Mbit/s
//! dumbbell, the video sent as Evalvid-RA sends it: each GOP at the rung (MPEG-4 quantizer
//! 2–31) its VBR controller picks from the controller's rate, every frame as coded.

use metronome_config::scenario::ScenarioFile;
use metronome_lab::builtin;
use metronome_lab::run::{run, RunOptions};
use metronome_testkit::TempDir;

/// Each frame's type and coded bytes, from a point's `video.sent.csv`.
fn sent_frames(dir: &std::path::Path, point: usize) -> Vec<(char, u64)> {
    let csv = std::fs::read_to_string(dir.join(format!("points/p{point:03}/video.sent.csv")))
        .expect("the sender's frame trace");
    csv.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[1].chars().next().unwrap(), f[2].parse().unwrap())
        })
        .collect()
}

#[test]
fn tfmcc_and_asmp_share_the_dumbbell_with_tcp_within_a_factor_of_two() {
    let b = builtin::find("seed002-tcp").unwrap();
    let file = ScenarioFile::parse(b.text, "builtin:seed002-tcp").unwrap();
    // Judged from 10 replicates as built in; one here, to keep the suite short (the
    // replicates' machinery is tests/replicates.rs's).
    assert_eq!(file.replicates, 10);
    let file = file.with_replicates(1).unwrap();
    let dir = TempDir::new("lab-seed002");
    let out = dir.join("run");
    let s = run(&file, &RunOptions::new(out.clone())).unwrap();
    assert_eq!(s.points.len(), 2);
    // Seed 002's conclusions, each with a figure on both sides. Whether each holds, and why
    // where it does not, is the report's (issue 27 judges them over replicates).
    let checked = metronome_lab::claims::check(&s);
    assert_eq!(checked.len(), 7);
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
        assert!(c.holds().is_some(), "{}", c.claim.text);
    }
    for (i, p) in s.points.iter().enumerate() {
        let cc = &p.params["cc"];
        assert!(p.warnings.is_empty(), "{cc}: {:?}", p.warnings);
        let video = &p.flows[0];
        let rc = video
            .rate_control
            .as_ref()
            .expect("the controller's figures");
        assert_eq!(&rc.controller, cc);
        assert!(rc.changes > 10, "{cc}: {rc:?}");
        // What is on the wire is the coded frames and each packet's headers (RTP 12, UDP and
        // IPv4 28; no send-time extension, as Evalvid-RA's packets, except TFMCC's 8 bytes of
        // abs-send-time, which its receivers need), nothing else: no padding, no mux; the
        // largest RTP payload is the seed's 978 bytes at MTU 1018 (970 with the extension).
        let ext = if cc == "tfmcc" { 8 } else { 0 };
        let frames = sent_frames(&out, i);
        let coded: u64 = frames.iter().map(|f| f.1).sum();
        let headers = video.sent_packets * (40 + ext);
        let packets =
            std::fs::read_to_string(out.join(format!("points/p{i:03}/video.R1.packets.csv")))
                .expect("a viewer's packet trace");
        let largest = packets
            .lines()
            .skip(1)
            .filter_map(|l| l.split(',').nth(2)?.parse::<u64>().ok())
            .max();
        assert_eq!(largest, Some(978 - ext), "{cc}");
        let ratio = video.sent_bytes as f64 / (coded + headers) as f64;
        println!(
            "{cc}: {} bytes on the wire, {coded} coded + {headers} of headers: ratio {ratio:.4}",
            video.sent_bytes
        );
        assert!((ratio - 1.0).abs() < 0.02, "{cc}: {ratio}");
        // Frame sizes follow the content and the frame type: I-frames larger, P-frames varying.
        let mean = |t: char| {
            let v: Vec<f64> = frames
                .iter()
                .filter(|f| f.0 == t)
                .map(|f| f.1 as f64)
                .collect();
            let m = v.iter().sum::<f64>() / v.len().max(1) as f64;
            let sd =
                (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len().max(1) as f64).sqrt();
            (m, sd / m.max(1.0), v.len())
        };
        let (i_mean, _, i_count) = mean('I');
        let (p_mean, p_cv, _) = mean('P');
        println!("{cc}: I-frames {i_count} of mean {i_mean:.0} B, P-frames mean {p_mean:.0} B, cv {p_cv:.2}");
        assert_eq!(i_count, 1825usize.div_ceil(12));
        // At one rung the motion content's P-frames alone vary by about a fifth (TFMCC, at
        // the finest rung from its first seconds on: 0.18); a constant rate, padded, by none.
        assert!(i_mean > 1.5 * p_mean && p_cv > 0.1, "{cc}: {p_cv}");
        let sent_bps = video.sent_bytes as f64 * 8e9 / video.duration_us.as_nanos_u64() as f64;
        assert!(
            sent_bps > 300_000.0 && sent_bps < 4_000_000.0,
            "{cc}: {sent_bps}"
        );
        // 45 receivers behind one bottleneck, none lost on the access links: alike.
        assert_eq!(video.receivers.len(), 45);
        let first = &video.receivers[0];
        assert!(video.receivers.iter().all(|r| r.packets == first.packets));
        // TCP-friendly as TFMCC defines it: within a factor of two of the TCP flow.
        let fair = p.fairness.as_ref().expect("two flows share the bottleneck");
        let fr = first.frames.expect("frame figures");
        let pics = fr.pictures.expect("pictures judged");
        println!(
            "{cc}: video {:.3} Mbit/s, TCP {:.3} Mbit/s, Jain's index {:.3}, {} target changes; frames lost {} of {}; PSNR-Y {:.2} dB, MOS {:.2} {:?}",
            fair.flows[0].throughput_bps / 1e6,
            fair.flows[1].throughput_bps / 1e6,
            fair.jain_index,
            rc.changes,
            fr.lost,
            fr.frames,
            pics.psnr_y_db,
            pics.mos,
            pics.mos_frames
        );
        assert!(fair.max_ratio < 2.0, "{cc}: {fair:?}");
        // The bottleneck is used: the two flows carry most of its 4 Mbit/s.
        let total: f64 = fair.flows.iter().map(|f| f.throughput_bps).sum();
        assert!(total > 3_000_000.0, "{cc}: {total}");
        // Every frame judged: 73 s at 25 frames/s.
        assert_eq!(fr.frames, 1825, "{cc}");
        // High-motion content at the rungs a shared 4 Mbit/s allows: the picture is neither
        // always excellent nor always bad; slots fall in several MOS classes.
        let classes = pics.mos_frames.iter().filter(|n| **n > 0).count();
        assert!(classes >= 3, "{cc}: {:?}", pics.mos_frames);
        // Each GOP's rung, as the VBR controller chose it.
        let rungs = std::fs::read_to_string(out.join(format!("points/p{i:03}/video.rungs.csv")))
            .expect("the rungs trace");
        let qs: Vec<u32> = rungs
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(2).unwrap().parse().unwrap())
            .collect();
        assert_eq!(qs.len(), 1825usize.div_ceil(12), "a rung per GOP");
        assert!(qs.iter().all(|q| (2..=31).contains(q)));
        let distinct: std::collections::BTreeSet<u32> = qs.iter().copied().collect();
        println!("{cc}: rungs used {distinct:?}");
        assert!(
            distinct.len() > 2,
            "{cc}: the rung moves with the rate: {qs:?}"
        );
    }
}
