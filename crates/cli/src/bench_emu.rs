//! `metronome bench emu`: the emulator's throughput and the accuracy of the delay it adds,
//! through one link in network-namespace mode, beside the kernel's own tbf on a veth pair in
//! the same run (this kernel has no netem: tbf shapes the rate and adds no delay). iperf3 and
//! the kernel's TCP measure both. Needs root and iperf3.

use crate::args::{parse_duration, parse_rate};
use clap::Args;
use metronome_emu::netns::{remove_stale, NetnsPair};
use metronome_link::{Link, LinkConfig};
use metronome_rt::clock::Clock;
use metronome_rt::host::HostWatch;
use metronome_time::Micros;
use serde::Serialize;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Args, Debug)]
pub(crate) struct EmuArgs {
    /// The link's rate
    #[arg(long, value_parser = parse_rate, default_value = "1gbit")]
    pub rate: u64,
    /// The emulated link's delay (each way)
    #[arg(long, value_parser = parse_duration, default_value = "20ms")]
    pub delay: Duration,
    /// How long iperf3 runs in each case
    #[arg(long, value_parser = crate::args::parse_run_length, default_value = "8s")]
    pub duration: Duration,
    /// Print JSON only
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Case {
    name: &'static str,
    /// What iperf3's receiver got (TCP payload), bit/s.
    throughput_bps: f64,
    /// `throughput_bps` against the link's rate less 52 bytes of headers per 1500.
    share_of_link: f64,
    /// How late the emulator handed packets to the receiving host against its model (when
    /// its write began; the emulator only).
    delay_error_p50_us: Option<Micros>,
    delay_error_p99_us: Option<Micros>,
    delay_error_max_us: Option<Micros>,
    /// How long a write to the receiving host's TUN device took at p99: the receiving
    /// kernel's stack runs in it (the emulator only).
    write_p99_us: Option<Micros>,
    /// How the emulator's data thread was scheduled (the emulator only).
    thread: Option<String>,
    /// Packets the emulated link dropped from its full queue (the emulator only).
    queue_drops: Option<u64>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct EmuBench {
    benchmark: &'static str,
    rate_bps: u64,
    delay_us: Micros,
    cases: Vec<Case>,
    /// The emulator's throughput over the kernel tbf's, in the same run.
    throughput_ratio: f64,
    host: Option<metronome_rt::host::HostLoad>,
}

/// A process killed when dropped.
pub(crate) struct Running(pub(crate) Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// iperf3 from `a` to `b` (a one-off server in `b`): the receiver's bit/s.
fn iperf3(pair_a: &str, pair_b: &str, addr_b: &str, secs: u64) -> Result<f64, String> {
    let _server = Running(
        Command::new("ip")
            .args(["netns", "exec", pair_b, "iperf3", "-s", "-1", "-B", addr_b])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!("cannot start iperf3 ({e}): install it (apt-get install iperf3)")
            })?,
    );
    std::thread::sleep(Duration::from_millis(500));
    let out = Command::new("ip")
        .args([
            "netns", "exec", pair_a, "iperf3", "-c", addr_b, "-J", "-O", "2",
        ])
        .args(["-t", &secs.to_string()])
        .output()
        .map_err(|e| format!("cannot run iperf3: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("iperf3 printed no JSON ({e})"))?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or_else(|| format!("iperf3 failed: {}", v["error"]))
}

/// TCP buffers for a long fat path in namespace `ns`, for both cases: Linux lets a socket's
/// send buffer grow to 4 MB by default, less than 1 Gbit/s × 40 ms of round trip, which holds
/// one TCP flow near 600 Mbit/s however fast the link; the link should be what limits it.
fn long_fat_tcp(ns: &str) -> Result<(), String> {
    for key in [
        "net.ipv4.tcp_rmem=4096 131072 33554432",
        "net.ipv4.tcp_wmem=4096 16384 33554432",
    ] {
        ip(&["netns", "exec", ns, "sysctl", "-q", "-w", key])?;
    }
    Ok(())
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {} failed: {} (this benchmark needs root)",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Two namespaces joined by a veth pair shaped by the kernel's tbf; deleted when dropped.
struct VethPair(String, String);

impl VethPair {
    fn create(rate: u64) -> Result<VethPair, String> {
        let pid = std::process::id();
        let p = VethPair(format!("mt{pid}-tbf-a"), format!("mt{pid}-tbf-b"));
        ip(&["netns", "add", &p.0])?;
        ip(&["netns", "add", &p.1])?;
        ip(&[
            "link", "add", "va", "netns", &p.0, "type", "veth", "peer", "name", "vb", "netns", &p.1,
        ])?;
        for (ns, dev, addr) in [(&p.0, "va", "10.78.0.1/24"), (&p.1, "vb", "10.78.0.2/24")] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            long_fat_tcp(ns)?;
        }
        // tbf at the rate; a bucket of 1 ms at the rate (at least 64 KB) and 20 ms of queue.
        let burst = (rate / 8 / 1000).max(65_536).to_string();
        let out = Command::new("ip")
            .args([
                "netns", "exec", &p.0, "tc", "qdisc", "add", "dev", "va", "root", "tbf",
            ])
            .args([
                "rate",
                &rate.to_string(),
                "burst",
                &burst,
                "latency",
                "20ms",
            ])
            .output()
            .map_err(|e| format!("cannot run tc: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "tc tbf failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(p)
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.0]);
        let _ = ip(&["netns", "del", &self.1]);
    }
}

fn emulated(a: &EmuArgs, secs: u64) -> Result<Case, String> {
    let pair = NetnsPair::create("bench").map_err(|e| e.to_string())?;
    long_fat_tcp(&pair.a)?;
    long_fat_tcp(&pair.b)?;
    let link = LinkConfig {
        rate_bps: Some(a.rate),
        delay: a.delay,
        // Twice the path's bandwidth-delay product, in 1500-byte packets.
        queue_limit_packets: Some(
            ((a.rate as f64 * a.delay.as_secs_f64() * 2.0 * 2.0 / 12_000.0) as usize).max(100),
        ),
        ..LinkConfig::default()
    };
    let back = LinkConfig {
        delay: a.delay,
        ..LinkConfig::default()
    };
    let [there, back] = pair
        .fabrics(Link::new(link, 1), Link::new(back, 2), Clock::new())
        .map_err(|e| e.to_string())?;
    let stop = AtomicBool::new(false);
    let (bps, stats) = std::thread::scope(|s| {
        let f = s.spawn(|| there.run(&stop, None));
        let g = s.spawn(|| back.run(&stop, None));
        let bps = iperf3(&pair.a, &pair.b, &pair.addr_b.to_string(), secs);
        stop.store(true, Ordering::Relaxed);
        let _ = g.join();
        (bps, f.join())
    });
    // The delay error of the data direction.
    let stats = stats.map_err(|_| "the emulator's thread failed".to_string())?;
    let late = stats.lateness.summary();
    let write = stats.write_time.summary();
    let bps = bps?;
    Ok(Case {
        name: "emulator (namespaces, TUN)",
        throughput_bps: bps,
        share_of_link: bps / (a.rate as f64 * 1448.0 / 1500.0),
        delay_error_p50_us: Some(late.p50_us),
        delay_error_p99_us: Some(late.p99_us),
        delay_error_max_us: Some(late.max_us),
        write_p99_us: Some(write.p99_us),
        thread: Some(stats.thread.clone()),
        queue_drops: stats.links.first().map(|l| l.dropped_queue),
    })
}

fn kernel(a: &EmuArgs, secs: u64) -> Result<Case, String> {
    let veth = VethPair::create(a.rate)?;
    let bps = iperf3(&veth.0, &veth.1, "10.78.0.2", secs)?;
    Ok(Case {
        name: "kernel tbf (veth)",
        throughput_bps: bps,
        share_of_link: bps / (a.rate as f64 * 1448.0 / 1500.0),
        delay_error_p50_us: None,
        delay_error_p99_us: None,
        delay_error_max_us: None,
        write_p99_us: None,
        thread: None,
        queue_drops: None,
    })
}

pub(crate) fn run(a: EmuArgs) -> Result<(), Box<dyn std::error::Error>> {
    remove_stale();
    let secs = a.duration.as_secs().max(3);
    let watch = HostWatch::start();
    let mut progress = crate::progress::Progress::start("bench emu", 2, Some(2.0 * secs as f64));
    let emu = emulated(&a, secs)?;
    progress.step("the emulator");
    let tbf = kernel(&a, secs)?;
    progress.step("kernel tbf");
    let bench = EmuBench {
        benchmark: "emu",
        rate_bps: a.rate,
        delay_us: Micros::from(a.delay),
        throughput_ratio: emu.throughput_bps / tbf.throughput_bps.max(1.0),
        cases: vec![emu, tbf],
        host: watch.finish(0),
    };
    if a.json {
        println!("{}", crate::report::to_json(&bench)?);
        return Ok(());
    }
    println!(
        "one link at {:.0} Mbit/s, {:.0} ms each way; iperf3 TCP for {secs} s",
        a.rate as f64 / 1e6,
        bench.delay_us.as_millis_f64()
    );
    for c in &bench.cases {
        let err = match (
            c.delay_error_p50_us.map(Micros::as_micros_f64),
            c.delay_error_p99_us.map(Micros::as_micros_f64),
        ) {
            (Some(p50), Some(p99)) => {
                format!(
                    "; handed over p50 {p50:.0} µs, p99 {p99:.0} µs after the model's time (a write took {:.0} µs at p99); {} queue drops",
                    c.write_p99_us.map(Micros::as_micros_f64).unwrap_or(0.0),
                    c.queue_drops.unwrap_or(0)
                )
            }
            _ => String::new(),
        };
        println!(
            "  {:<28} {:8.1} Mbit/s ({:5.1} % of the link less headers){err}",
            c.name,
            c.throughput_bps / 1e6,
            c.share_of_link * 100.0
        );
    }
    println!("  emulator / kernel tbf: {:.3}", bench.throughput_ratio);
    if let Some(t) = bench.cases.iter().find_map(|c| c.thread.as_ref()) {
        println!("  the emulator's thread: {t}");
    }
    if let Some(h) = &bench.host {
        println!("  {}", h.line());
    }
    Ok(())
}
