//! Loss repair in the lab (`repair = "rtx"`, `"fec"`), judged by the frames viewers showed:
//! the built-in repair-rtx scenario in the simulator, at 1, 3 and 5 % random loss and on seed
//! 001's moderate link, with and without NACK and retransmission; at 5 % in emu mode, where
//! the real-time server answers `metronome recv`'s NACKs through the emulator; and the
//! built-in repair-fec scenario in the simulator, with SMPTE 2022-1 FEC over 10 × 10 and 5 × 5
//! matrices and with retransmission and FEC together.

use metronome_config::scenario::ScenarioFile;
use metronome_lab::builtin;
use metronome_lab::results::PointResult;
use metronome_lab::run::{run, Mode, RunOptions};
use metronome_link::report::{FlowReport, RepairFigures, SenderRepairFigures};

/// Frames of flow `name` not shown in their slot at point `index`: not arrived, or complete
/// after their play-out time (`arrived` and `missed_deadline` of its frames.csv).
fn not_in_time(dir: &std::path::Path, index: usize, name: &str) -> usize {
    let csv = dir.join(format!("points/p{index:03}/{name}.frames.csv"));
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

/// One run at a time, here and in other test binaries (the machine's real-time slot): the emu
/// run measures real time, which the simulator's run beside it would disturb.
fn serial() -> metronome_testkit::RealtimeSlot {
    metronome_testkit::realtime_slot(env!("CARGO_TARGET_TMPDIR"))
}

#[test]
fn retransmission_shows_frames_that_random_loss_took_and_cannot_beat_a_full_queue() {
    let _one = serial();
    let b = builtin::find("repair-rtx").unwrap();
    let file = ScenarioFile::parse(b.text, "builtin:repair-rtx").unwrap();
    let dir = std::env::temp_dir().join(format!("metronome-lab-repair-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = run(&file, &RunOptions::new(dir.clone()));
    let html = std::fs::read_to_string(dir.join("report.html"));
    let late: Vec<usize> = (0..6).map(|i| not_in_time(&dir, i, "video")).collect();
    let _ = std::fs::remove_dir_all(&dir);
    let s = s.unwrap();
    assert_eq!(s.points.len(), 6);
    let html = html.unwrap();
    assert!(
        html.contains("Loss repair at the viewers: NACK and retransmission")
            && html.contains("<caption>Loss repair at the sender</caption>")
    );
    // Across the sweep, beside the frames lost, what the viewer saw with and without repair.
    assert!(html
        .contains("<caption>what the viewer saw: PSNR of Y, dB (mean over its slots)</caption>"));
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
        // Each repair counted is a retransmission that came in time for a lost packet, and
        // none came after its play-out time: the viewer asks only for what can still make
        // it, and the sender sends only that.
        assert!(
            v.repaired <= v.retransmissions && v.repaired <= lost && v.too_late == 0,
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
        // And the viewer sees it: near the encoder's picture with repair (53 dB at 1 %),
        // worse the more is lost without (41, 31, 24 dB at 1, 3, 5 %).
        let seen = |f: &FlowReport| f.receivers[0].frames.and_then(|fr| fr.pictures);
        let (without, with) = (
            seen(plain).unwrap().psnr_y_db,
            seen(repaired).unwrap().psnr_y_db,
        );
        assert!(
            with > without + 5.0,
            "{loss}: {without:.1} dB without, {with:.1} with"
        );
        // A 40 ms round trip, measured ask to repair.
        assert!(
            (40_000_000..60_000_000).contains(&v.rtt_us.as_nanos_u64()),
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
        // (and the budget's one burst); what gets through takes the room of originals, so
        // the link loses more than without repair, and much stays lost.
        let (moderate, alone) = (flow(rtx, "seed001"), flow(none, "seed001"));
        let tx = moderate.repair.expect("sender figures");
        let burst = 100.0 * (64.0 * 1500.0) / moderate.sent_bytes as f64;
        assert!(tx.overhead_percent <= 25.0 + burst, "{tx:?}");
        assert!(tx.over_budget > 0, "{tx:?}");
        let v = moderate.receivers[0].repair.unwrap();
        let (with, without) = (moderate.receivers[0].lost, alone.receivers[0].lost);
        assert!(
            v.repaired > 0 && with > without,
            "{with} lost, {without} without: {v:?}"
        );
        assert!(v.lost_after_percent > 15.0, "{v:?}");
    }
}

/// The built-in scenario cut to its random-loss stream at 5 %, for 6 s, with FEC over 5 x 5
/// beside none and retransmission.
fn five_percent_only() -> String {
    let b = builtin::find("repair-rtx").unwrap();
    let (sweep, five) = ("loss = [\"1%\", \"3%\", \"5%\"]", "loss = [\"5%\"]");
    let (ten, six) = ("duration = \"10s\"", "duration = \"6s\"");
    let (ways, three) = (
        "repair = [\"none\", \"rtx\"]",
        "repair = [\"none\", \"rtx\", \"fec:5x5\"]",
    );
    assert!(
        b.text.contains(sweep) && b.text.contains(ten) && b.text.contains(ways),
        "the scenario changed"
    );
    let text = b
        .text
        .replace(sweep, five)
        .replace(ten, six)
        .replace(ways, three);
    let cut = text.find("[[flow]]\nname = \"seed001\"").unwrap();
    text[..cut].to_string()
}

/// In emu mode the stream server sends the retransmissions (with the stream's packets, on its
/// pacing thread) and `recv`'s receiver session asks for them, through the emulator's lossy
/// link: the same recovery as in the simulator; and the server's FEC, which `recv`'s receivers
/// take on their FEC ports. Real time on a shared host varies, so the bounds are wider than
/// the simulator's; every count must still add up.
#[test]
fn the_real_time_server_repairs_what_the_emulated_link_loses() {
    let _one = serial();
    let text = five_percent_only();
    let file = ScenarioFile::parse(&text, "repair-rtx at 5 %").unwrap();
    let dir = std::env::temp_dir().join(format!("metronome-lab-repair-emu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = RunOptions {
        mode: Mode::Emu,
        ..RunOptions::new(dir.clone())
    };
    let s = run(&file, &opts);
    let late: Vec<usize> = (0..3).map(|i| not_in_time(&dir, i, "video")).collect();
    let _ = std::fs::remove_dir_all(&dir);
    let s = s.unwrap();
    let (none, rtx) = (&s.points[0], &s.points[1]);
    assert_eq!(&rtx.params["repair"][..], "rtx");
    assert_eq!(&rtx.params["loss"][..], "5%");
    let (plain, repaired) = (flow(none, "video"), flow(rtx, "video"));
    assert!(plain.repair.is_none() && plain.receivers[0].repair.is_none());
    let lost = repaired.receivers[0].lost;
    let v = repaired.receivers[0]
        .repair
        .expect("the viewer's repair figures");
    println!("emu at 5 %: {lost} lost, {v:?}; frames not in time {late:?}");
    assert!(lost > 20, "{lost}");
    assert!(
        v.repaired <= v.retransmissions && v.repaired <= lost,
        "{v:?}"
    );
    // Most losses come back: a lost packet can be asked for about three times within the
    // 200 ms play-out delay over the link's 40 ms round trip, however busy the host.
    assert!(v.lost_after * 5 <= lost, "{v:?}");
    assert!(late[1] * 3 < late[0], "frames not in time: {late:?}");
    // The emulated link's 40 ms round trip, ask to repair, and what the host adds (a
    // round trip beyond the play-out delay would have repaired nothing).
    assert!(
        (40_000_000..200_000_000).contains(&v.rtt_us.as_nanos_u64()),
        "{v:?}"
    );
    let tx = repaired.repair.expect("the server's repair figures");
    // What the viewer got is what was sent, less what the link lost of it again.
    assert!(tx.sent_packets >= v.retransmissions, "{tx:?} {v:?}");
    assert!(
        v.retransmissions * 10 >= tx.sent_packets * 8,
        "{tx:?} {v:?}"
    );
    let burst = 100.0 * (64.0 * 1500.0) / repaired.sent_bytes as f64;
    assert!(tx.overhead_percent <= 25.0 + burst, "{tx:?}");
    // FEC over 5 x 5: two FEC packets for every five, through the same lossy link; a 5 x 5
    // matrix at 4 Mbit/s lasts ~70 ms, so what it rebuilds comes within the play-out delay.
    let fec = flow(&s.points[2], "video");
    assert_eq!(&s.points[2].params["repair"][..], "fec:5x5");
    let (v, tx) = (fec.receivers[0].repair.unwrap(), fec.repair.unwrap());
    let lost = fec.receivers[0].lost;
    println!("emu FEC at 5 %: {lost} lost, {v:?}, {tx:?}");
    assert!((tx.fec_overhead_percent - 40.0).abs() < 1.5, "{tx:?}");
    assert!(v.fec_received <= tx.fec_packets && v.fec_received * 10 >= tx.fec_packets * 8);
    assert!(lost > 20 && v.fec_repaired * 5 >= lost * 4, "{lost}: {v:?}");
    assert!(
        v.repaired == 0 && v.nack_packets == 0,
        "FEC alone asks nothing: {v:?}"
    );
    assert!(late[2] * 3 < late[0], "frames not in time: {late:?}");
}

/// One way of repairing at one loss: the flow's report and its frames not shown in time.
struct Way<'a> {
    flow: &'a FlowReport,
    late: usize,
}

impl Way<'_> {
    fn viewer(&self) -> RepairFigures {
        self.flow.receivers[0]
            .repair
            .expect("viewer's repair figures")
    }
    fn sender(&self) -> SenderRepairFigures {
        self.flow.repair.expect("sender's repair figures")
    }
    fn lost(&self) -> u64 {
        self.flow.receivers[0].lost
    }
}

const WAYS: [&str; 5] = ["none", "rtx", "fec", "fec:5x5", "rtx+fec"];

#[test]
fn fec_shows_frames_random_loss_took_in_time_when_its_matrix_fits_the_play_out_delay() {
    let b = builtin::find("repair-fec").unwrap();
    let file = ScenarioFile::parse(b.text, "builtin:repair-fec").unwrap();
    let dir = std::env::temp_dir().join(format!("metronome-lab-fec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = run(&file, &RunOptions::new(dir.clone()));
    let html = std::fs::read_to_string(dir.join("report.html"));
    let late: Vec<[usize; 2]> = (0..15)
        .map(|i| {
            [
                not_in_time(&dir, i, "video"),
                not_in_time(&dir, i, "seed001"),
            ]
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    let s = s.unwrap();
    assert_eq!(s.points.len(), 15);
    let html = html.unwrap();
    assert!(
        html.contains("NACK and retransmission, FEC (SMPTE 2022-1)")
            && html.contains("<caption>Loss repair at the sender</caption>")
    );
    let (mut late_10x10, mut late_5x5) = (0, 0);
    for (points, late) in s.points.chunks(5).zip(late.chunks(5)) {
        let loss = &points[0].params["loss"];
        let ways: Vec<&str> = points.iter().map(|p| &p.params["repair"][..]).collect();
        assert_eq!(ways, WAYS);
        let way = |i: usize, name: &str| Way {
            flow: flow(&points[i], name),
            late: late[i][usize::from(name == "seed001")],
        };
        let [none, rtx, fec, fec5, both] = [0, 1, 2, 3, 4].map(|i| way(i, "video"));
        // What FEC costs: one packet in 10 per row and per column; one in 5 for 5 x 5.
        for (w, share) in [(&fec, 20.0), (&fec5, 40.0), (&both, 20.0)] {
            let tx = w.sender();
            assert!(
                (tx.fec_overhead_percent - share).abs() < 1.0,
                "{loss}: {tx:?}"
            );
            let v = w.viewer();
            // The link loses FEC packets as it loses the media's; each repair is of a loss.
            assert!(v.fec_received <= tx.fec_packets, "{loss}: {v:?} {tx:?}");
            assert!(v.fec_received * 10 >= tx.fec_packets * 9, "{loss}: {v:?}");
            assert!(v.fec_repaired + v.fec_too_late <= w.lost(), "{loss}: {v:?}");
        }
        assert!(none.flow.repair.is_none() && rtx.sender().fec_packets == 0);
        // Random loss: FEC over either matrix shows far more frames in time than none.
        for w in [&fec, &fec5] {
            assert!(
                w.late * 2 < none.late,
                "{loss}: {} vs {} frames",
                w.late,
                none.late
            );
            assert!(
                w.viewer().fec_repaired * 4 > w.lost() * 3,
                "{loss}: {:?}",
                w.viewer()
            );
        }
        // 5 x 5 rebuilds nearly everything; its column FEC comes within the 200 ms play-out
        // delay (a matrix is 25 packets, ~70 ms at 4 Mbit/s). A 10 x 10 matrix lasts ~270 ms:
        // what only a column can rebuild may come after its play-out time.
        assert!(
            fec5.viewer().lost_after * 20 <= fec5.lost(),
            "{loss}: {:?}",
            fec5.viewer()
        );
        late_10x10 += fec.viewer().fec_too_late;
        late_5x5 += fec5.viewer().fec_too_late;
        // Both: retransmissions ask for what FEC left (a loss waits for its row's FEC before
        // it is asked for), so as many frames in time as with retransmission alone, give or
        // take one, and less than half as much retransmitted.
        assert!(
            both.late <= rtx.late + 1,
            "{loss}: {} vs {}",
            both.late,
            rtx.late
        );
        assert!(both.viewer().lost_after <= 2, "{loss}: {:?}", both.viewer());
        assert!(
            both.sender().sent_packets * 2 <= rtx.sender().sent_packets,
            "{loss}: {:?} against {:?}",
            both.sender(),
            rtx.sender()
        );
        // Seed 001's moderate link loses what does not fit its 10-packet queue: FEC's extra
        // packets take its room (paced between the media's, they do get in), so the media
        // lose more and FEC, each row and column missing several, rebuilds almost nothing.
        let [none, _, fec, fec5, _] = [0, 1, 2, 3, 4].map(|i| way(i, "seed001"));
        for w in [&fec, &fec5] {
            let (v, tx) = (w.viewer(), w.sender());
            assert!(v.fec_received * 2 > tx.fec_packets, "{v:?} {tx:?}");
            assert!(w.lost() > none.lost(), "{} vs {}", w.lost(), none.lost());
            assert!(v.fec_repaired * 20 < w.lost(), "{v:?}");
            assert!(w.late >= none.late, "{} vs {}", w.late, none.late);
        }
    }
    assert!(late_10x10 > 0 && late_5x5 == 0, "{late_10x10} {late_5x5}");
}

/// Four viewers of one group behind a link that loses 3 % (docs/repair.md's group scenario,
/// cut to 4 s): the sender tells the group which losses it is repairing (RFC 6642 TLLEI), the
/// viewers ask far less than once each per loss, and the report says both.
#[test]
fn a_group_is_told_which_losses_are_being_repaired() {
    let text = r#"name = "group"
seed = 1
duration = "4s"
drain = "1s"

[links.lan]
rate = "10gbit"

[links.lossy]
rate = "20mbit"
delay = "20ms"
loss = "3%"

[links.access]
rate = "100mbit"
delay = "2ms"

[topology]
shape = "dumbbell"
bottleneck = "lossy"
left = [{ node = "server", link = "lan" }]
right = [
  { node = "v1", link = "access" },
  { node = "v2", link = "access" },
  { node = "v3", link = "access" },
  { node = "v4", link = "access" },
]

[[flow]]
name = "video"
kind = "rtp"
from = "server"
to = ["v1", "v2", "v3", "v4"]
rate = "2mbit"
video = "640x360@30"
playout_deadline = "600ms"
repair = "rtx"
"#;
    let file = ScenarioFile::parse(text, "group.toml").unwrap();
    let dir = std::env::temp_dir().join(format!("metronome-lab-group-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = run(&file, &RunOptions::new(dir.clone()));
    let html = std::fs::read_to_string(dir.join("report.html"));
    let _ = std::fs::remove_dir_all(&dir);
    let s = s.unwrap();
    let f = &s.points[0].flows[0];
    let tx = f.repair.expect("sender figures");
    let lost: u64 = f.receivers.iter().map(|r| r.lost).sum();
    let nacks: u64 = f
        .receivers
        .iter()
        .map(|r| r.repair.unwrap().nack_packets)
        .sum();
    assert!(lost > 40, "{lost}");
    assert!(
        tx.loss_notices > 0 && tx.noticed >= tx.loss_notices,
        "{tx:?}"
    );
    // A loss is shared by the four viewers: fewer than two asks per loss.
    assert!(nacks * 2 < lost, "{nacks} NACK packets for {lost} losses");
    assert!(f
        .receivers
        .iter()
        .all(|r| r.repair.unwrap().lost_after <= 1));
    let html = html.unwrap();
    assert!(html.contains("losses told to the group: numbers (TLLEIs)"));
    assert!(html.contains(&format!("<td>{} ({})</td>", tx.noticed, tx.loss_notices)));
}
