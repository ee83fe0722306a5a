//! `metronome bench ns3`: seed 002's dumbbell (10 Mbit/s access links, a 4 Mbit/s, 10 ms
//! bottleneck, drop-tail queues of 50 packets) in Metronome's simulator and in ns-3 3.37, the
//! same traffic in both, read side by side in one run: each flow's throughput, loss and mean
//! queueing delay, and each simulator's speed on the same work.
//!
//! - **udp**: a 3 Mbit/s CBR flow and a 2 Mbit/s one switching on and off every 10 s, 978-byte
//!   payloads: the link is overloaded by a quarter half the time. Both simulators model the same
//!   thing here, so they must agree (the tolerances below); what separates them is ns-3's 2-byte
//!   PPP header on every packet (0.2 % more time on the wire per packet).
//! - **tcp-reno**, **tcp-cubic**: a 2 Mbit/s CBR flow beside a bulk TCP transfer. ns-3's TCP
//!   is set as close to smoltcp's as it allows (the segment size and buffers, no timestamps,
//!   no SACK), but the implementations still differ (ns-3's delayed ACKs and initial window,
//!   its NewReno's and CUBIC's details), so the numbers are shown, not judged; the CBR flow's
//!   queueing delay says how full each TCP keeps the queue.
//!
//! The ns-3 program is `crates/cli/ns3/dumbbell.cc`, built with g++ on first use and kept in
//! the cache directory (`$METRONOME_CACHE`, else `~/.cache/metronome`) under its source's hash.

use clap::Args;
use metronome_config::scenario::ScenarioFile;
use metronome_rt::host::HostWatch;
use metronome_time::Micros;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub(crate) struct Ns3Args {
    /// How long the flows send, in each simulator (plus 2 s for packets in flight)
    #[arg(long, value_parser = crate::args::parse_run_length, default_value = "73s")]
    pub media: Duration,
    /// Print JSON only
    #[arg(long)]
    pub json: bool,
}

const PROGRAM: &str = include_str!("../ns3/dumbbell.cc");
const NS3_LIBS: [&str; 7] = [
    "ns3-core",
    "ns3-network",
    "ns3-internet",
    "ns3-point-to-point",
    "ns3-applications",
    "ns3-traffic-control",
    "ns3-flow-monitor",
];
const INSTALL: &str = "apt-get install g++ ns3 libns3-dev libgsl-dev";
const PAYLOAD: u64 = 978;
const DRAIN_S: f64 = 2.0;

/// The network both simulators are given, written once: seed 002's dumbbell.
struct Dumbbell {
    access_bps: u64,
    access_delay_ms: u64,
    bottleneck_bps: u64,
    bottleneck_delay_ms: u64,
    /// Packets a link holds, the one on the wire included.
    queue: u32,
    square_period_s: u64,
}

const NET: Dumbbell = Dumbbell {
    access_bps: 10_000_000,
    access_delay_ms: 5,
    bottleneck_bps: 4_000_000,
    bottleneck_delay_ms: 10,
    queue: 50,
    square_period_s: 20,
};

impl Dumbbell {
    /// The path's delay for one packet of `bytes` on the wire when every queue is empty.
    fn empty_path_us(&self, bytes: u64) -> f64 {
        let serialize = |bps: u64| bytes as f64 * 8.0 / bps as f64 * 1e6;
        let delays = 2 * self.access_delay_ms + self.bottleneck_delay_ms;
        delays as f64 * 1e3 + 2.0 * serialize(self.access_bps) + serialize(self.bottleneck_bps)
    }

    /// The ns-3 program's arguments for this network.
    fn ns3_args(&self) -> Vec<String> {
        vec![
            format!("--accessBps={}", self.access_bps),
            format!("--accessDelayMs={}", self.access_delay_ms),
            format!("--bottleneckBps={}", self.bottleneck_bps),
            format!("--bottleneckDelayMs={}", self.bottleneck_delay_ms),
            format!("--queue={}", self.queue),
            format!("--squarePeriod={}", self.square_period_s),
        ]
    }
}

/// Where the UDP case must agree: each flow's loss within this many percentage points, its
/// throughput and its mean queueing delay within these fractions (ns-3's PPP header alone
/// makes 0.2 %; the flows' shares of the drops at a full queue depend on the packets' phases,
/// which the 2 bytes shift).
const LOSS_POINTS: f64 = 0.5;
const THROUGHPUT_SHARE: f64 = 0.01;
const QUEUEING_SHARE: f64 = 0.02;

/// One case: the traffic both simulators carry.
struct Case {
    name: &'static str,
    cbr_bps: u64,
    square_bps: u64,
    tcp: Option<&'static str>,
}

const CASES: [Case; 3] = [
    Case {
        name: "udp",
        cbr_bps: 3_000_000,
        square_bps: 2_000_000,
        tcp: None,
    },
    Case {
        name: "tcp-reno",
        cbr_bps: 2_000_000,
        square_bps: 0,
        tcp: Some("reno"),
    },
    Case {
        name: "tcp-cubic",
        cbr_bps: 2_000_000,
        square_bps: 0,
        tcp: Some("cubic"),
    },
];

/// What one flow did in one simulator.
#[derive(Serialize, Clone, Debug, schemars::JsonSchema)]
pub(crate) struct FlowFigures {
    pub name: String,
    pub sent_packets: u64,
    pub received_packets: u64,
    /// Packets sent and not received, percent (TCP: segments, retransmissions included).
    pub loss_percent: f64,
    /// Payload bits received by the end of the run (the 2 s drain included: TCP keeps
    /// sending what its buffer holds, in both simulators alike), per second of the flows'
    /// sending time.
    pub throughput_bps: f64,
    /// Mean one-way delay less the path's delay when empty (propagation and serialization of
    /// one packet on each link); absent where not measured (Metronome's TCP).
    pub mean_queueing_us: Option<Micros>,
}

/// One simulator's run of a case.
#[derive(Serialize, Clone, Debug, schemars::JsonSchema)]
pub(crate) struct Side {
    pub flows: Vec<FlowFigures>,
    pub events: u64,
    /// Wall-clock time of the simulation alone.
    pub wall_us: Micros,
    pub events_per_s: f64,
}

#[derive(Serialize, Clone, Debug, schemars::JsonSchema)]
pub(crate) struct CaseResult {
    pub name: String,
    /// Whether the two must agree (the UDP case) and did; `None`: compared, not judged.
    pub agrees: Option<bool>,
    /// Where they differ beyond the tolerances (judged cases only).
    pub differences: Vec<String>,
    pub metronome: Side,
    pub ns3: Side,
    /// ns-3's wall-clock time over Metronome's, on the same work.
    pub wall_ratio: f64,
}

#[derive(Serialize, Clone, Debug, schemars::JsonSchema)]
pub(crate) struct Ns3Comparison {
    pub ns3_version: String,
    pub media_us: Micros,
    pub cases: Vec<CaseResult>,
    /// Tolerances of the judged case.
    pub loss_tolerance_points: f64,
    pub throughput_tolerance: f64,
    pub queueing_tolerance: f64,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct Ns3Bench {
    benchmark: &'static str,
    optimized: bool,
    comparison: Ns3Comparison,
    host: Option<metronome_rt::host::HostLoad>,
}

pub(crate) fn run(a: Ns3Args, stop: Arc<AtomicBool>) -> Result<(), Box<dyn std::error::Error>> {
    let watch = HostWatch::start();
    let comparison = compare(a.media, &stop)?;
    let bench = Ns3Bench {
        benchmark: "ns3",
        optimized: !cfg!(debug_assertions),
        comparison,
        host: watch.finish(0),
    };
    if a.json {
        println!("{}", crate::report::to_json(&bench)?);
        return Ok(());
    }
    print_comparison(&bench.comparison);
    if !bench.optimized {
        println!("  (a debug build: run `cargo run --release -- bench ns3` to compare speed)");
    }
    if let Some(h) = &bench.host {
        println!("  {}", h.line());
    }
    let failed = bench
        .comparison
        .cases
        .iter()
        .any(|c| c.agrees == Some(false));
    if failed {
        return Err("the simulators disagree where they model the same thing (above)".into());
    }
    Ok(())
}

/// Every case in both simulators.
pub(crate) fn compare(media: Duration, stop: &AtomicBool) -> Result<Ns3Comparison, String> {
    let program = build_program()?;
    let scratch = std::env::temp_dir().join(format!("metronome-bench-ns3-{}", std::process::id()));
    let cases = run_cases(&program, media, stop, &scratch);
    // Whatever happened, the scratch goes.
    let _ = std::fs::remove_dir_all(&scratch);
    let (cases, version) = cases?;
    Ok(Ns3Comparison {
        ns3_version: version,
        media_us: Micros::from(media),
        cases,
        loss_tolerance_points: LOSS_POINTS,
        throughput_tolerance: THROUGHPUT_SHARE,
        queueing_tolerance: QUEUEING_SHARE,
    })
}

/// Each case in both simulators; ns-3's version.
fn run_cases(
    program: &Path,
    media: Duration,
    stop: &AtomicBool,
    scratch: &Path,
) -> Result<(Vec<CaseResult>, String), String> {
    let mut cases = Vec::new();
    let mut version = String::new();
    let mut progress = crate::progress::Progress::start("bench ns3", CASES.len(), None);
    for case in &CASES {
        if stop.load(Ordering::SeqCst) {
            return Err("stopped".into());
        }
        let metronome = run_metronome(case, media, scratch, stop)?;
        let (ns3, v) = run_ns3(program, case, media, stop)?;
        version = v;
        cases.push(judge(case, metronome, ns3));
        progress.step(&format!("{}: metronome and ns-3", case.name));
    }
    Ok((cases, version))
}

/// The ns-3 program, built on first use (g++, Debian's ns-3 3.37) and kept in the cache under
/// a hash of its source, the compiler's version and ns-3's libraries (an upgrade builds it
/// again).
fn build_program() -> Result<PathBuf, String> {
    let dir = metronome_media::ladder::cache::default_dir()
        .ok_or("no cache directory for the ns-3 program: set METRONOME_CACHE")?
        .join("ns3");
    let key = format!("{PROGRAM}\n{}\n{}", toolchain(), ns3_libraries());
    let hash = metronome_media::ladder::cache::fnv1a(key.as_bytes());
    let bin = dir.join(format!("dumbbell-{hash:016x}"));
    if bin.is_file() {
        return Ok(bin);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // Written and built under names of this process's own, then renamed: two runs at once do
    // not clash.
    let pid = std::process::id();
    let src = dir.join(format!("dumbbell-{hash:016x}.{pid}.cc"));
    let tmp = dir.join(format!("dumbbell-{hash:016x}.{pid}"));
    std::fs::write(&src, PROGRAM).map_err(|e| format!("cannot write {}: {e}", src.display()))?;
    let out = Command::new("g++")
        .args(["-std=c++17", "-O2", "-w"])
        .arg(&src)
        .arg("-o")
        .arg(&tmp)
        .args(NS3_LIBS.iter().map(|l| format!("-l{l}")))
        .stdin(Stdio::null())
        .output();
    let _ = std::fs::remove_file(&src);
    let out = out.map_err(|e| format!("cannot run g++ ({e}); to compare with ns-3: {INSTALL}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first: Vec<&str> = err.lines().take(4).collect();
        return Err(format!(
            "the ns-3 program did not build ({}); is ns-3 3.37 installed? {INSTALL}",
            first.join(" / ")
        ));
    }
    std::fs::rename(&tmp, &bin).map_err(|e| format!("cannot keep {}: {e}", bin.display()))?;
    Ok(bin)
}

/// `g++ --version`'s first line (empty if it does not run).
fn toolchain() -> String {
    Command::new("g++")
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default()
}

/// The ns-3 core library the program links (its versioned name), if it is where Debian puts it.
fn ns3_libraries() -> String {
    std::fs::read_dir("/usr/lib/x86_64-linux-gnu")
        .map(|d| {
            let mut v: Vec<String> = d
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("libns3") && n.contains("core.so."))
                .collect();
            v.sort();
            v.join(",")
        })
        .unwrap_or_default()
}

/// The case as a Metronome scenario: the same nodes, links and flows as the ns-3 program.
fn scenario(case: &Case, media: Duration) -> String {
    let mut text = format!(
        r#"name = "ns3-dumbbell-{name}"
duration = "{ms}ms"
drain = "{drain}s"
histograms = false
[links.access]
rate = "{access}bit"
delay = "{access_ms}ms"
queue_packets = {queue}
[links.bottleneck]
rate = "{bottleneck}bit"
delay = "{bottleneck_ms}ms"
queue_packets = {queue}
[topology]
shape = "dumbbell"
routers = ["router1", "router2"]
bottleneck = "bottleneck"
left = [{{ node = "cbr_src", link = "access" }}, {{ node = "square_src", link = "access" }}, {{ node = "tcp_src", link = "access" }}]
right = [{{ node = "cbr_dst", link = "access" }}, {{ node = "square_dst", link = "access" }}, {{ node = "tcp_dst", link = "access" }}]
[[flow]]
name = "cbr"
kind = "udp"
from = "cbr_src"
to = "cbr_dst"
payload = {PAYLOAD}
rate = "{cbr}bit"
"#,
        name = case.name,
        ms = media.as_millis(),
        drain = DRAIN_S,
        access = NET.access_bps,
        access_ms = NET.access_delay_ms,
        bottleneck = NET.bottleneck_bps,
        bottleneck_ms = NET.bottleneck_delay_ms,
        queue = NET.queue,
        cbr = case.cbr_bps,
    );
    if case.square_bps > 0 {
        text += &format!(
            "[[flow]]\nname = \"square\"\nkind = \"udp\"\nfrom = \"square_src\"\nto = \"square_dst\"\npayload = {PAYLOAD}\nsquare = {{ high = \"{}bit\", low = 0, period = \"{}s\" }}\n",
            case.square_bps, NET.square_period_s
        );
    }
    if let Some(cc) = case.tcp {
        text += &format!(
            "[[flow]]\nname = \"tcp\"\nkind = \"tcp\"\nfrom = \"tcp_src\"\nto = \"tcp_dst\"\ncc = \"{cc}\"\n"
        );
    }
    text
}

fn run_metronome(
    case: &Case,
    media: Duration,
    scratch: &Path,
    stop: &AtomicBool,
) -> Result<Side, String> {
    let file = ScenarioFile::parse(&scenario(case, media), "bench-ns3")
        .and_then(|f| f.with_replicates(1))
        .map_err(|e| e.to_string())?;
    let point = file.points().remove(0);
    let s = file.resolve(&point).map_err(|e| e.to_string())?;
    let r = metronome_lab::run::run_point(&point, &s, s.seed, (scratch, None), stop)?;
    let secs = media.as_secs_f64();
    let flows = r
        .flows
        .iter()
        .filter_map(|f| {
            let rx = f.receivers.first()?;
            let udp = f.kind != "tcp";
            Some(FlowFigures {
                name: f.name.clone(),
                sent_packets: f.sent_packets,
                received_packets: rx.packets,
                loss_percent: percent(f.sent_packets, rx.packets),
                throughput_bps: if udp {
                    (rx.packets * PAYLOAD * 8) as f64 / secs
                } else {
                    (rx.bytes * 8) as f64 / secs
                },
                mean_queueing_us: udp
                    .then(|| rx.mean_delay_us.as_micros_f64() - NET.empty_path_us(PAYLOAD + UDP_IP))
                    .map(Micros::from_micros_f64),
            })
        })
        .collect();
    let wall_s = (r.wall_us.as_secs_f64() - r.video_us.as_secs_f64()).max(1e-9);
    Ok(Side {
        flows,
        events: r.events,
        wall_us: Micros::from_secs_f64(wall_s),
        events_per_s: r.events as f64 / wall_s,
    })
}

/// IPv4 and UDP headers.
const UDP_IP: u64 = metronome_time::IPV4_UDP_OVERHEAD as u64;
/// ns-3's point-to-point header on the wire.
const PPP: u64 = 2;

fn percent(sent: u64, received: u64) -> f64 {
    if sent == 0 {
        return 0.0;
    }
    100.0 * sent.saturating_sub(received) as f64 / sent as f64
}

/// What the ns-3 program prints.
#[derive(Deserialize)]
struct Ns3Out {
    ns3_version: String,
    events: u64,
    wall_s: f64,
    flows: Vec<Ns3Flow>,
}

#[derive(Deserialize)]
struct Ns3Flow {
    name: String,
    tx_packets: u64,
    rx_packets: u64,
    rx_payload_bytes: u64,
    delay_sum_s: f64,
}

fn run_ns3(
    program: &Path,
    case: &Case,
    media: Duration,
    stop: &AtomicBool,
) -> Result<(Side, String), String> {
    let mut child = Command::new(program)
        .arg(format!("--duration={}", media.as_secs_f64()))
        .arg(format!("--drain={DRAIN_S}"))
        .arg(format!("--payload={PAYLOAD}"))
        .arg(format!("--cbrBps={}", case.cbr_bps))
        .arg(format!("--squareBps={}", case.square_bps))
        .arg(format!("--tcp={}", case.tcp.unwrap_or("none")))
        .args(NET.ns3_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if stop.load(Ordering::SeqCst) {
            let _ = child.kill();
            let _ = child.wait();
            return Err("stopped".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "ns-3 ({}) failed: {}",
            case.name,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let o: Ns3Out = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("ns-3's output does not read ({e})"))?;
    Ok((ns3_side(&o, media), o.ns3_version))
}

fn ns3_side(o: &Ns3Out, media: Duration) -> Side {
    let secs = media.as_secs_f64();
    let flows = ["cbr", "square", "tcp"]
        .iter()
        .filter_map(|name| o.flows.iter().find(|f| f.name == *name))
        .map(|f| FlowFigures {
            name: f.name.clone(),
            sent_packets: f.tx_packets,
            received_packets: f.rx_packets,
            loss_percent: percent(f.tx_packets, f.rx_packets),
            throughput_bps: (f.rx_payload_bytes * 8) as f64 / secs,
            mean_queueing_us: (f.name != "tcp" && f.rx_packets > 0)
                .then(|| {
                    f.delay_sum_s * 1e6 / f.rx_packets as f64
                        - NET.empty_path_us(PAYLOAD + UDP_IP + PPP)
                })
                .map(Micros::from_micros_f64),
        })
        .collect();
    let wall_s = o.wall_s.max(1e-9);
    Side {
        flows,
        events: o.events,
        wall_us: Micros::from_secs_f64(wall_s),
        events_per_s: o.events as f64 / wall_s,
    }
}

/// The two sides of a case, judged where they model the same thing.
fn judge(case: &Case, metronome: Side, ns3: Side) -> CaseResult {
    let judged = case.tcp.is_none();
    let differences = if judged {
        differences(&metronome, &ns3)
    } else {
        Vec::new()
    };
    CaseResult {
        name: case.name.to_string(),
        agrees: judged.then_some(differences.is_empty()),
        differences,
        wall_ratio: ns3.wall_us.as_micros_f64() / metronome.wall_us.as_micros_f64().max(1e-3),
        metronome,
        ns3,
    }
}

fn differences(m: &Side, n: &Side) -> Vec<String> {
    let mut out = Vec::new();
    for a in &m.flows {
        let Some(b) = n.flows.iter().find(|b| b.name == a.name) else {
            out.push(format!("{}: not in ns-3's output", a.name));
            continue;
        };
        if (a.loss_percent - b.loss_percent).abs() > LOSS_POINTS {
            out.push(format!(
                "{}: loss {:.2} % against ns-3's {:.2} %",
                a.name, a.loss_percent, b.loss_percent
            ));
        }
        if !within(a.throughput_bps, b.throughput_bps, THROUGHPUT_SHARE) {
            out.push(format!(
                "{}: {:.3} Mbit/s against ns-3's {:.3}",
                a.name,
                a.throughput_bps / 1e6,
                b.throughput_bps / 1e6
            ));
        }
        if let (Some(qa), Some(qb)) = (
            a.mean_queueing_us.map(Micros::as_micros_f64),
            b.mean_queueing_us.map(Micros::as_micros_f64),
        ) {
            if !within(qa, qb, QUEUEING_SHARE) && (qa - qb).abs() > 100.0 {
                out.push(format!(
                    "{}: queueing {:.2} ms against ns-3's {:.2} ms",
                    a.name,
                    qa / 1e3,
                    qb / 1e3
                ));
            }
        }
    }
    out
}

fn within(a: f64, b: f64, share: f64) -> bool {
    (a - b).abs() <= share * a.abs().max(b.abs())
}

fn print_comparison(c: &Ns3Comparison) {
    println!(
        "seed 002's dumbbell in Metronome's simulator and in ns-3 {} ({:.0} s of traffic)",
        c.ns3_version,
        c.media_us.as_secs_f64()
    );
    for case in &c.cases {
        let verdict = match case.agrees {
            Some(true) => "agree".to_string(),
            Some(false) => format!("DIFFER: {}", case.differences.join("; ")),
            None => "compared, not judged (the TCP implementations differ)".to_string(),
        };
        println!("  {}: {verdict}", case.name);
        for m in &case.metronome.flows {
            let Some(n) = case.ns3.flows.iter().find(|n| n.name == m.name) else {
                continue;
            };
            let q =
                |x: Option<Micros>| x.map_or("n/a".into(), |v| format!("{:.2}", v.as_millis_f64()));
            println!(
                "    {:<7} loss {:>6.2} / {:>6.2} %   {:>6.3} / {:>6.3} Mbit/s   queueing {:>7} / {:>7} ms   (Metronome / ns-3)",
                m.name,
                m.loss_percent,
                n.loss_percent,
                m.throughput_bps / 1e6,
                n.throughput_bps / 1e6,
                q(m.mean_queueing_us),
                q(n.mean_queueing_us)
            );
        }
        println!(
            "    speed: Metronome {:.3} s ({:.2} M events/s), ns-3 {:.3} s ({:.2} M events/s): ns-3 takes {:.1}x as long",
            case.metronome.wall_us.as_secs_f64(),
            case.metronome.events_per_s / 1e6,
            case.ns3.wall_us.as_secs_f64(),
            case.ns3.events_per_s / 1e6,
            case.wall_ratio
        );
    }
}
