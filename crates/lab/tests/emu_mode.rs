//! seed001-udp in emu mode: the same scenario file on real sockets, through the emulator's
//! links (the simulator's link model, in real time). What must hold on any host, however
//! busy: every datagram the simulator sends is sent, the netem limit passes no more than its
//! fluid bound, nothing arrives faster than the link's delay. How close emu comes to sim is
//! printed (and measured by `lab compare`), not asserted: it depends on the host's load.

use metronome_lab::results::{Shard, Summary};
use metronome_lab::run::{run, Mode, RunOptions};
use metronome_spec::scenario::ScenarioFile;

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_mode(text: &str, mode: Mode, dir: &std::path::Path) -> Summary {
    let file = ScenarioFile::parse(text, "a built-in scenario, shortened").unwrap();
    let opts = RunOptions {
        mode,
        jobs: 2,
        shard: Shard { index: 0, count: 1 },
        seed: None,
        out: dir.to_path_buf(),
        progress: false,
    };
    run(&file, &opts).unwrap()
}

#[test]
fn seed001_udp_runs_on_real_sockets() {
    let tmp =
        TempDir(std::env::temp_dir().join(format!("metronome-emu-mode-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&tmp.0);
    // The built-in file, 2 s per point and the model's own holding time only, to stay short.
    let text = metronome_lab::builtin::find("seed001-udp")
        .unwrap()
        .text
        .replace("duration = \"10s\"", "duration = \"2s\"")
        .replace(
            "hold_extra = [\"0ms\", \"1.2ms\"]",
            "hold_extra = [\"0ms\"]",
        );
    let sim = run_mode(&text, Mode::Sim, &tmp.0.join("sim"));
    let emu = run_mode(&text, Mode::Emu, &tmp.0.join("emu"));
    assert_eq!(emu.mode, "emu");
    assert_eq!(emu.points.len(), 5);
    let mut table = String::new();
    for (ps, pe) in sim.points.iter().zip(&emu.points) {
        assert_eq!(ps.params, pe.params);
        let facts = pe.emu.as_ref().expect("emu facts");
        for (fs, fe) in ps.flows.iter().zip(&pe.flows) {
            assert_eq!(
                fe.sent_packets, fs.sent_packets,
                "{}: the same datagrams are sent",
                fe.name
            );
            let (rs, re) = (&fs.receivers[0], &fe.receivers[0]);
            let cf = pe
                .closed_form
                .iter()
                .find(|c| c.receiver == re.node)
                .unwrap();
            table.push_str(&format!(
                "{:>7} {:>8}: loss sim {:5.1} emu {:5.1} %, delay sim {:6.3} emu {:6.3} ms (emulator p99 {:.0} µs; {})\n",
                pe.params["rate"], re.node, rs.loss_percent, re.loss_percent,
                rs.mean_delay_ns as f64 / 1e6, re.mean_delay_ns as f64 / 1e6,
                facts.lateness_p99_us, facts.host
            ));
            // netem's limit passes at most L per holding time, whatever the arrivals.
            assert!(re.loss_percent >= cf.fluid_loss_percent - 1.0, "{table}");
            // No datagram beats 20 ms of delay plus its serialization.
            if re.packets > 0 {
                assert!(re.min_delay_ns >= 20_000_000, "{table}");
            }
        }
    }
    eprintln!("{table}");
}

/// seed001-tcp in emu mode: the kernel's TCP (iperf3 in namespaces joined only by the
/// emulator) through the same tbf-like links: below the limit it carries what is offered, at
/// the limit the limit less headers. Needs root and iperf3.
#[test]
fn seed001_tcp_runs_kernel_tcp_through_the_emulator() {
    let tmp =
        TempDir(std::env::temp_dir().join(format!("metronome-emu-tcp-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&tmp.0);
    let text = metronome_lab::builtin::find("seed001-tcp")
        .unwrap()
        .text
        .replace("duration = \"10s\"", "duration = \"3s\"")
        .replace(
            "limit = [\"2mbit\", \"4mbit\", \"6mbit\", \"8mbit\", \"10mbit\", \"15mbit\", \"20mbit\"]",
            "limit = [\"4mbit\", \"20mbit\"]",
        )
        .replace(
            "bitrate = [\"2mbit\", \"4mbit\", \"6mbit\", \"8mbit\", \"10mbit\"]",
            "bitrate = [\"2mbit\", \"10mbit\"]",
        );
    let emu = run_mode(&text, Mode::Emu, &tmp.0.join("emu"));
    assert_eq!(emu.points.len(), 4);
    for p in &emu.points {
        let got = p.flows[0].receivers[0].throughput_bps;
        let exp = &p.tcp_expected[0];
        let offered = exp.app_bps as f64;
        let at = format!(
            "{:?}: {got:.0} bit/s, expected {:.0}",
            p.params, exp.expected_goodput_bps
        );
        if offered < exp.bottleneck_bps as f64 * 0.9 {
            assert!((got - offered).abs() / offered < 0.05, "{at}");
        } else {
            // Linux's segments carry 1448 bytes in 1500 (timestamps), a little less than the
            // 1460 the expectation counts.
            assert!(got <= exp.expected_goodput_bps * 1.01, "{at}");
            assert!(got >= exp.expected_goodput_bps * 0.7, "{at}");
        }
    }
    assert!(!String::from_utf8_lossy(
        &std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout
    )
    .contains("-f0-"));
}
