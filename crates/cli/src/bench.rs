//! `metronome bench`: benchmarks that print JSON and a human summary, each run side by side with
//! its baseline in the same process and the same hour, and reported as ratios.

use crate::args::{parse_rate, SourceArgs};
use crate::progress::Progress;
use clap::{Args, Subcommand};
use metronome_apps::receiver::{Receiver, ReceiverOutcome, ReceiverRunConfig};
use metronome_apps::sender::{run_sender, SenderConfig, SenderOutcome};
use metronome_rt::pacing::{PacerKind, WaitPolicy};
use metronome_rt::ports::free_udp_run;
use metronome_rt::url::RtpUrl;
use metronome_time::Micros;
use metronome_time::Summary;
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub(crate) enum BenchCommand {
    /// Send lateness and receiver jitter: the real-time pacer (auto, sleep-then-spin, busy-poll)
    /// against a plain sleep-per-packet sender, in the same run
    #[command(after_help = crate::examples::BENCH_PACING)]
    Pacing(PacingArgs),
    /// Many streams under EDF, deadline-monotonic and a naive thread per stream: send lateness,
    /// deadline misses, receiver jitter, CPU, and admission (the source paper's experiment)
    #[command(after_help = crate::examples::BENCH_STREAMS)]
    Streams(crate::bench_streams::StreamsArgs),
    /// Uncompressed video (RFC 4175): Metronome against GStreamer (rtpvrawpay/rtpvrawdepay) on
    /// the same cases: frame latency, frames lost, CPU per frame, packets per second
    #[command(after_help = crate::examples::BENCH_RAW)]
    Raw(crate::bench_raw::RawArgs),
    /// The lab's simulator: 45 receivers and a TCP flow for 73 s, and 10,000 receivers for
    /// 60 s, against the wall clock (events per second, simulated time per wall-clock time)
    #[command(after_help = crate::examples::BENCH_SIM)]
    Sim(crate::bench_sim::SimArgs),
    /// Seed 002's dumbbell in Metronome's simulator and in ns-3 3.37 (built with g++ on first
    /// use): throughput, loss and queueing delay side by side, agreement where both model the
    /// same thing, and each simulator's speed on the same work
    #[command(after_help = crate::examples::BENCH_NS3)]
    Ns3(crate::bench_ns3::Ns3Args),
    /// The emulator (as root): throughput and the accuracy of its added delay through one link,
    /// beside the kernel's tbf on a veth pair in the same run, measured by iperf3
    #[command(after_help = crate::examples::BENCH_EMU)]
    Emu(crate::bench_emu::EmuArgs),
    /// Video quality metrics: PSNR and SSIM frames per second on 1080p pairs, against FFmpeg's
    /// psnr and ssim filters on the same files in the same run
    #[command(after_help = crate::examples::BENCH_QUALITY)]
    Quality(crate::bench_quality::QualityBenchArgs),
    /// Seed 002's video: a clip's quantizer ladder encoded once and had again from the cache,
    /// each rung's rate beside the paper's Table 2, and judging a viewer's video (decode, PSNR,
    /// SSIM) on one core against FFmpeg doing the same in the same run
    #[command(after_help = crate::examples::BENCH_LADDER)]
    Ladder(crate::bench_ladder::LadderBenchArgs),
    /// Viewers of one live test-source mount over RTSP: the server's CPU with one viewer and
    /// with 100, sessions sharing one encoder against an encoder per session, in the same run
    #[command(after_help = crate::examples::BENCH_VIEWERS)]
    Viewers(crate::bench_viewers::ViewersArgs),
    /// Loss repair beside SRT (as root): the same stream over the same lossy emulated link,
    /// bare, with Metronome's NACK and retransmission, and through srt-live-transmit at the
    /// same latency budget: packets in time, added delay, overhead, as ratios
    #[command(after_help = crate::examples::BENCH_SRT)]
    Srt(crate::bench_srt::SrtArgs),
}

#[derive(Args, Debug)]
pub(crate) struct PacingArgs {
    /// How long each of the four runs streams (the pacer's three waits, then the plain-sleep
    /// baseline)
    #[arg(long, value_parser = crate::args::parse_run_length, default_value = "10s")]
    pub duration: Duration,
    /// Stream rate (the test source's constant mux rate)
    #[arg(long, value_parser = parse_rate, default_value = "5M")]
    pub rate: u64,
    /// Print JSON only
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize, schemars::JsonSchema)]
struct PacingRun {
    name: &'static str,
    /// The scheduling policy the pacing thread got.
    pacer: metronome_rt::thread::GrantView,
    /// How it waited for each packet's time.
    wait: metronome_apps::sender::WaitName,
    packets: u64,
    lateness: Summary,
    stalls: u64,
    wait_modes: metronome_sched::WaitSelectorStats,
    pacer_cpu_percent: f64,
    receiver_packets: u64,
    receiver_lost: u64,
    receiver_jitter_us: Micros,
    receiver_interarrival: Summary,
    /// How busy the host was during this run.
    host: Option<metronome_rt::host::HostLoad>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct PacingBench {
    benchmark: &'static str,
    rate_bps: u64,
    duration_us: Micros,
    runs: Vec<PacingRun>,
    /// Baseline divided by Metronome's default (auto wait): how many times better it is.
    ratios: Ratios,
    /// The same for the forced wait modes.
    sleep_spin_ratios: Ratios,
    busy_poll_ratios: Ratios,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Ratios {
    lateness_p99: f64,
    lateness_p999: f64,
    lateness_max: f64,
    interarrival_p999_excess: f64,
}

pub(crate) fn run(
    b: BenchCommand,
    stop: Arc<AtomicBool>,
) -> Result<(), Box<dyn std::error::Error>> {
    match b {
        BenchCommand::Pacing(a) => pacing(a, stop),
        BenchCommand::Streams(a) => crate::bench_streams::run(a, stop),
        BenchCommand::Raw(a) => crate::bench_raw::run(a, stop),
        BenchCommand::Sim(a) => crate::bench_sim::run(a, &stop),
        BenchCommand::Ns3(a) => crate::bench_ns3::run(a, stop),
        BenchCommand::Emu(a) => crate::bench_emu::run(a),
        BenchCommand::Quality(a) => crate::bench_quality::run(a),
        BenchCommand::Ladder(a) => crate::bench_ladder::run(a),
        BenchCommand::Viewers(a) => crate::bench_viewers::run(a, stop),
        BenchCommand::Srt(a) => crate::bench_srt::run(a, stop),
    }
}

fn one_run(
    a: &PacingArgs,
    kind: PacerKind,
    wait: WaitPolicy,
    stop: &Arc<AtomicBool>,
) -> Result<(SenderOutcome, ReceiverOutcome), Box<dyn std::error::Error>> {
    let lo = Ipv4Addr::LOCALHOST;
    let url = RtpUrl::unicast(SocketAddr::from((lo, free_udp_run(2)?)));
    let mut rcfg = ReceiverRunConfig::new(url);
    rcfg.duration = Some(a.duration + Duration::from_secs(10));
    let receiver = Receiver::open(rcfg)?;
    let rx_stop = Arc::new(AtomicBool::new(false));
    let rx = {
        let rx_stop = rx_stop.clone();
        std::thread::spawn(move || receiver.run(&rx_stop, |_, _| {}))
    };
    let source = SourceArgs::test_pattern(a.rate).open()?;
    let seed = crate::serve::fresh_seed();
    let mut cfg = SenderConfig::new(vec![url], metronome_wire::Ssrc(seed as u32), seed);
    cfg.duration = Some(a.duration);
    cfg.pacer = kind;
    cfg.wait = wait;
    let sent = run_sender(source, cfg, stop.clone(), |_| {});
    std::thread::sleep(Duration::from_millis(200));
    rx_stop.store(true, Ordering::SeqCst);
    let got = rx.join().expect("receiver thread does not panic")?;
    Ok((sent?, got))
}

fn summarize(name: &'static str, s: &SenderOutcome, r: &ReceiverOutcome) -> PacingRun {
    let src = r.receiver.sources.first();
    PacingRun {
        name,
        pacer: s.realtime.clone(),
        wait: s.wait_mode,
        packets: s.packets,
        lateness: s.pacing.lateness,
        stalls: s.pacing.stalls,
        wait_modes: s.wait_modes,
        pacer_cpu_percent: s.pacer_cpu_percent,
        receiver_packets: src.map(|x| x.received).unwrap_or(0),
        receiver_lost: src.map(|x| x.lost).unwrap_or(0),
        receiver_jitter_us: src.map_or(Micros::ZERO, |x| x.jitter_us),
        receiver_interarrival: src.map(|x| x.interarrival).unwrap_or_default(),
        host: s.host.clone(),
    }
}

fn ratio(base: f64, ours: f64) -> f64 {
    base / ours.max(0.001)
}

/// Baseline over ours for each figure: how many times better ours is.
fn ratios_of(base: &PacingRun, ours: &PacingRun) -> Ratios {
    // Inter-arrival beyond the median: how far packets bunch up or spread out at the receiver.
    let excess = |x: &Summary| (x.p999_us.as_micros_f64() - x.p50_us.as_micros_f64()).abs();
    let lateness = |q: fn(&Summary) -> Micros| {
        ratio(
            q(&base.lateness).as_micros_f64(),
            q(&ours.lateness).as_micros_f64(),
        )
    };
    Ratios {
        lateness_p99: lateness(|s| s.p99_us),
        lateness_p999: lateness(|s| s.p999_us),
        lateness_max: lateness(|s| s.max_us),
        interarrival_p999_excess: ratio(
            excess(&base.receiver_interarrival),
            excess(&ours.receiver_interarrival),
        ),
    }
}

fn pacing(a: PacingArgs, stop: Arc<AtomicBool>) -> Result<(), Box<dyn std::error::Error>> {
    eprintln!(
        "bench pacing: {:.1} Mbit/s for {:.0} s with the real-time pacer (auto, sleep-spin, busy-poll), then with the plain-sleep baseline",
        a.rate as f64 / 1e6,
        a.duration.as_secs_f64()
    );
    let mut progress = Progress::start("bench pacing", 4, Some(4.0 * a.duration.as_secs_f64()));
    let mut run = |pacer, wait, label| {
        let r = one_run(&a, pacer, wait, &stop);
        progress.step(label);
        r
    };
    let (s1, r1) = run(PacerKind::Realtime, WaitPolicy::Auto, "metronome")?;
    let (s4, r4) = run(PacerKind::Realtime, WaitPolicy::SleepSpin, "sleep-spin")?;
    let (s3, r3) = run(PacerKind::Realtime, WaitPolicy::BusyPoll, "busy-poll")?;
    let (s2, r2) = run(PacerKind::PlainSleep, WaitPolicy::SleepSpin, "plain sleep")?;
    let ours = summarize("metronome", &s1, &r1);
    let sleepy = summarize("metronome-sleep-spin", &s4, &r4);
    let busy = summarize("metronome-busy-poll", &s3, &r3);
    let base = summarize("baseline-plain-sleep", &s2, &r2);
    let out = PacingBench {
        benchmark: "pacing",
        rate_bps: a.rate,
        duration_us: Micros::from(a.duration),
        sleep_spin_ratios: ratios_of(&base, &sleepy),
        busy_poll_ratios: ratios_of(&base, &busy),
        ratios: ratios_of(&base, &ours),
        runs: vec![ours, sleepy, busy, base],
    };
    if a.json {
        println!("{}", crate::report::to_json(&out)?);
    } else {
        print_pacing(&out);
    }
    Ok(())
}

/// The pacing bench in words, on stdout (`--json` gives the same figures as JSON alone).
fn print_pacing(out: &PacingBench) {
    for r in &out.runs {
        println!(
                "{:<22} lateness p50 {:>8.1} µs  p99 {:>8.1} µs  p99.9 {:>8.1} µs  max {:>9.1} µs | rx inter-arrival p50 {:>7.1} p99.9 {:>8.1} µs, jitter {:.4} ms, lost {} | pacer CPU {:.1}%",
                r.name,
                r.lateness.p50_us.as_micros_f64(),
                r.lateness.p99_us.as_micros_f64(),
                r.lateness.p999_us.as_micros_f64(),
                r.lateness.max_us.as_micros_f64(),
                r.receiver_interarrival.p50_us.as_micros_f64(),
                r.receiver_interarrival.p999_us.as_micros_f64(),
                r.receiver_jitter_us.as_millis_f64(),
                r.receiver_lost,
                r.pacer_cpu_percent
            );
    }
    for (name, r) in [
        ("metronome", &out.ratios),
        ("busy-poll", &out.busy_poll_ratios),
    ] {
        println!(
                "baseline / {name}: lateness p99 ×{:.1}, p99.9 ×{:.1}, max ×{:.1}; receiver inter-arrival p99.9 excess ×{:.1}",
                r.lateness_p99, r.lateness_p999, r.lateness_max, r.interarrival_p999_excess
            );
    }
    for r in &out.runs {
        if let Some(h) = &r.host {
            println!("{:<22} {}", r.name, h.line());
        }
    }
}
