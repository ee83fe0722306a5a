//! Seed 001's TCP experiment in the simulator: the transfer rate follows the tbf limit rate,
//! less protocol overhead, and the offered bitrate below it.

use metronome_config::scenario::ScenarioFile;
use metronome_lab::builtin;
use metronome_lab::run::{run, RunOptions};
use std::collections::BTreeMap;

#[test]
fn tcp_follows_the_limit_rate_less_overhead() {
    let b = builtin::find("seed001-tcp").unwrap();
    let file = ScenarioFile::parse(b.text, "builtin:seed001-tcp").unwrap();
    let dir = std::env::temp_dir().join(format!("metronome-lab-tcp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = RunOptions::new(dir.clone());
    let s = run(&file, &opts);
    let report = std::fs::read_to_string(dir.join("report.html")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let s = s.unwrap();
    // A TCP flow's packets have no delay or jitter measured (its bytes are counted as the
    // application reads them): the report says n/a, not 0.000.
    assert!(
        report.contains("<td>tcp</td><td>client</td>")
            && report.contains("<td>n/a</td><td>n/a</td><td>n/a</td>")
            && !report.contains("<td>0.000</td><td>0.000</td><td>0.000</td>"),
        "TCP's delay is not n/a in the report"
    );
    assert_eq!(s.points.len(), 35);
    // The sweep's table opens with its verdict: the lowest and highest share of what TCP
    // should carry, over the 35 cells; checked against the points below.
    let verdict = report
        .split("<strong>Verdict:</strong> TCP carried ")
        .nth(1)
        .expect("no verdict line on the sweep's table");
    let shares: Vec<f64> = verdict
        .split(" % (")
        .take(2)
        .map(|v| v.rsplit(") to ").next().unwrap().parse().unwrap())
        .collect();
    let ratios: Vec<f64> = s
        .points
        .iter()
        .map(|p| {
            100.0 * p.flows[0].receivers[0].throughput_bps / p.tcp_expected[0].expected_goodput_bps
        })
        .collect();
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(0.0, f64::max);
    assert!(
        (shares[0] - lo).abs() < 0.051 && (shares[1] - hi).abs() < 0.051,
        "{shares:?} against {lo}..{hi}"
    );
    assert!(
        verdict.contains("a flow sharing the link gets less), over 35 cells."),
        "{}",
        &verdict[..200]
    );
    // goodput[bitrate][limit], Mbit/s
    let mut by_bitrate: BTreeMap<u64, Vec<(u64, f64)>> = BTreeMap::new();
    let mbit = |v: &str| v.trim_end_matches("mbit").parse::<u64>().unwrap();
    let mut table = String::new();
    for p in &s.points {
        let got = p.flows[0].receivers[0].throughput_bps;
        let exp = &p.tcp_expected[0];
        let (bitrate, limit) = (mbit(&p.params["bitrate"]), mbit(&p.params["limit"]));
        table.push_str(&format!(
            "limit {limit:>2} bitrate {bitrate:>2}: {:6.3} Mbit/s, expected {:6.3}\n",
            got / 1e6,
            exp.expected_goodput_bps / 1e6
        ));
        // Never more than the limit less headers, or the offered rate.
        assert!(got <= exp.expected_goodput_bps * 1.01, "seed 1\n{table}");
        let offered = bitrate as f64 * 1e6;
        if offered < exp.bottleneck_bps as f64 * 0.9 {
            // Room to spare: TCP carries what the application offers.
            assert!((got - offered).abs() / offered < 0.03, "seed 1\n{table}");
        } else {
            // At the limit: loss recovery (smoltcp's 1 s minimum RTO, no SACK) costs some.
            assert!(got > 0.75 * exp.expected_goodput_bps, "seed 1\n{table}");
        }
        by_bitrate.entry(bitrate).or_default().push((limit, got));
    }
    // A higher limit never carries less (within 2 %).
    for (bitrate, mut row) in by_bitrate {
        row.sort_by_key(|r| r.0);
        for w in row.windows(2) {
            assert!(
                w[1].1 >= w[0].1 * 0.98,
                "bitrate {bitrate}: {row:?}\n{table}"
            );
        }
    }
}
