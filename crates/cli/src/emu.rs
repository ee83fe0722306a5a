//! `metronome emu`: the lab's link model between real sockets. `emu relay` is UDP relay mode:
//! no privileges needed; point a sender at the relay and the relay at the receiver.

use crate::args::{parse_duration, parse_rate};
use clap::{Args, Subcommand};
use metronome_emu::netns;
use metronome_emu::relay::{Relay, RelayConfig};
use metronome_link::Link;
use metronome_link::{JitterModel, LinkConfig, LossModel};
use metronome_rt::clock::Clock;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub(crate) enum EmuCommand {
    /// Relay UDP datagrams from --listen to --to through one emulated link (rate, queue,
    /// delay, jitter, loss), in real time, until Ctrl-C or --duration
    #[command(after_help = crate::examples::EMU_RELAY)]
    Relay(RelayArgs),
    /// Two network namespaces joined only by the emulated link (as root): run any program in
    /// them with `ip netns exec NAME …` (kernel TCP, iperf3, ffmpeg, Metronome). Both are
    /// deleted when it ends (Ctrl-C, SIGTERM, --duration)
    #[command(after_help = crate::examples::EMU_PAIR)]
    Pair(PairArgs),
}

// Doc comments here are `--help` text: `<pid>` is a placeholder, not HTML.
#[allow(rustdoc::invalid_html_tags)]
#[derive(Args, Debug)]
pub(crate) struct PairArgs {
    /// The link from the first namespace to the second
    #[command(flatten)]
    pub link: LinkArgs,
    /// The link back: the same as the link there, but with this delay if given
    #[arg(long, value_parser = parse_duration)]
    pub back_delay: Option<Duration>,
    /// Stop after this long (default: at Ctrl-C)
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// A name for the namespaces (mt<pid>-NAME<n>-0 and -1)
    #[arg(long, default_value = "pair")]
    pub name: String,
    /// Print JSON lines only: one as the namespaces are ready (their names and addresses,
    /// `metronome schema emu-pair-ready`), one at the end (what each way carried and dropped,
    /// `emu-pair`)
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct RelayArgs {
    /// Where senders send to
    #[arg(long)]
    pub listen: SocketAddr,
    /// Where the relay sends what the link delivers
    #[arg(long)]
    pub to: SocketAddr,
    #[command(flatten)]
    pub link: LinkArgs,
    /// Stop after this long (default: at Ctrl-C)
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Print JSON only
    #[arg(long)]
    pub json: bool,
}

/// One direction of an emulated link.
#[derive(Args, Debug)]
pub(crate) struct LinkArgs {
    /// Link rate (none: infinite)
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<u64>,
    /// With --rate: a tc-tbf token bucket of this many bytes instead of a serializer
    #[arg(long)]
    pub burst: Option<usize>,
    /// Propagation delay
    #[arg(long, value_parser = parse_duration, default_value = "0")]
    pub delay: Duration,
    /// Jitter added to the delay
    #[arg(long, value_parser = parse_duration, default_value = "0")]
    pub jitter: Duration,
    /// uniform, normal, pareto or paretonormal (netem's); add -reorder to let packets overtake
    #[arg(long, default_value = "uniform", value_parser = parse_jitter)]
    pub jitter_distribution: JitterModel,
    /// Random loss probability (0.01 or 1%)
    #[arg(long, value_parser = parse_prob, default_value = "0")]
    pub loss: f64,
    /// Drop-tail queue limit in packets
    #[arg(long)]
    pub queue_packets: Option<usize>,
    /// Drop-tail queue limit in bytes
    #[arg(long)]
    pub queue_bytes: Option<usize>,
    /// netem's `limit`: packets held, those still serving their delay included
    #[arg(long)]
    pub netem_limit: Option<usize>,
    /// Seeds the link's randomness
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl LinkArgs {
    fn config(&self) -> Result<LinkConfig, metronome_link::ConfigError> {
        let link = LinkConfig {
            rate_bps: self.rate,
            burst_bytes: self.burst,
            delay: self.delay,
            jitter: self.jitter,
            jitter_model: self.jitter_distribution,
            loss: if self.loss > 0.0 {
                LossModel::Bernoulli(self.loss)
            } else {
                LossModel::None
            },
            queue_limit_packets: self.queue_packets,
            queue_limit_bytes: self.queue_bytes,
            netem_limit: self.netem_limit,
            ..LinkConfig::default()
        };
        link.validate().map(|()| link)
    }
}

pub(crate) fn parse_prob(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("'{s}' is not a probability: write 0.01 or 1%"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("'{s}' is outside 0..1 (0%..100%)"))
    }
}

fn parse_jitter(s: &str) -> Result<JitterModel, String> {
    let (name, reorder) = match s.strip_suffix("-reorder") {
        Some(n) => (n, true),
        None => (s, false),
    };
    match name {
        "uniform" if !reorder => Ok(JitterModel::Uniform),
        "normal" => Ok(JitterModel::Normal { reorder }),
        "pareto" => Ok(JitterModel::Pareto { reorder }),
        "paretonormal" => Ok(JitterModel::ParetoNormal { reorder }),
        _ => Err(format!(
            "'{s}' is not a jitter distribution: uniform, normal, pareto or paretonormal \
             (the last three with -reorder to let packets overtake)"
        )),
    }
}

/// Namespace mode: the pair, the fabric between, until stopped; then both are deleted.
fn pair(a: PairArgs, stop: Arc<AtomicBool>) -> Result<(), Box<dyn std::error::Error>> {
    let removed = netns::remove_stale();
    if removed > 0 {
        eprintln!("removed {removed} namespaces left by runs that were killed");
    }
    let ab = a.link.config()?;
    let mut ba = ab.clone();
    if let Some(d) = a.back_delay {
        ba.delay = d;
    }
    let p = netns::NetnsPair::create(&a.name)?;
    let [there, back] = p.fabrics(
        Link::new(ab, a.link.seed),
        Link::new(ba, a.link.seed + 1),
        Clock::new(),
    )?;
    let namespaces = [
        Namespace {
            name: p.a.clone(),
            address: p.addr_a.to_string(),
        },
        Namespace {
            name: p.b.clone(),
            address: p.addr_b.to_string(),
        },
    ];
    if a.json {
        let ready = PairReady {
            schema_version: crate::report::SCHEMA_VERSION,
            namespaces: namespaces.clone(),
        };
        println!("{}", crate::report::rounded(&ready)?);
    } else {
        println!(
            "ready: {} ({}) ⇄ {} ({}); run programs with `ip netns exec NAME …`",
            p.a, p.addr_a, p.b, p.addr_b
        );
    }
    use std::io::Write as _;
    std::io::stdout().flush()?;
    let (s, t) = std::thread::scope(|scope| {
        let b = scope.spawn(|| back.run(&stop, a.duration));
        let s = there.run(&stop, a.duration);
        (s, b.join().unwrap_or_default())
    });
    drop(p);
    let report = PairReport {
        namespaces,
        there: Direction::of(&s),
        back: Direction::of(&t),
    };
    let out = crate::report::Output::of(a.json, true);
    crate::report::print_outcome(out, &report, |r| {
        format!(
            "carried {} packets; a → b: {} lost, {} queue drops; b → a: {} lost, {} queue drops\n",
            r.there.delivered + r.back.delivered,
            r.there.lost,
            r.there.dropped_queue,
            r.back.lost,
            r.back.dropped_queue
        )
    })?;
    Ok(())
}

/// One of `emu pair`'s namespaces.
#[derive(Serialize, Clone, schemars::JsonSchema)]
pub(crate) struct Namespace {
    /// Its name, for `ip netns exec NAME …`.
    name: String,
    /// Its address on the link (IPv4).
    address: String,
}

/// `emu pair --json`'s first line, once the namespaces are up: where to run programs.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct PairReady {
    schema_version: u32,
    /// The first namespace (`there` starts in it), then the second.
    namespaces: [Namespace; 2],
}

/// `emu pair --json`'s last line: what each way of the link did.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct PairReport {
    /// As in the first line.
    namespaces: [Namespace; 2],
    /// From the first namespace to the second.
    there: Direction,
    /// From the second back to the first.
    back: Direction,
}

/// One way of `emu pair`'s link: its fabric's and its link model's counters.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct Direction {
    /// Datagrams read from the sending namespace.
    received: u64,
    /// Datagrams handed to the receiving namespace.
    delivered: u64,
    /// Bytes handed to the receiving namespace (whole IP packets).
    delivered_bytes: u64,
    /// Dropped by the loss model.
    lost: u64,
    /// Dropped at the queue's limit (or by a token bucket smaller than the packet).
    dropped_queue: u64,
    /// Dropped because the emulator held as many datagrams as it may.
    overflow: u64,
    /// Addressed where no path leads (IPv6, IGMP, …): dropped.
    unroutable: u64,
    /// Writes into the receiving namespace that failed.
    send_errors: u64,
    /// The longest a packet waited in the link's queue, µs.
    max_queue_delay_us: metronome_time::Micros,
    /// How late packets were handed over against the link model's time, µs.
    lateness: metronome_time::Summary,
}

impl Direction {
    fn of(s: &metronome_emu::fabric::FabricStats) -> Direction {
        let link = s.links.first().cloned().unwrap_or_default();
        Direction {
            received: s.received,
            delivered: s.delivered,
            delivered_bytes: link.bytes_delivered,
            lost: link.lost,
            dropped_queue: link.dropped_queue,
            overflow: s.overflow,
            unroutable: s.unroutable,
            send_errors: s.send_errors,
            max_queue_delay_us: metronome_time::Micros::from(link.max_queue_delay),
            lateness: s.lateness.summary(),
        }
    }
}

#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct RelayReport {
    listen: SocketAddr,
    to: SocketAddr,
    received: u64,
    forwarded: u64,
    lost: u64,
    dropped_queue: u64,
    overflow: u64,
    truncated: u64,
    socket_drops: u64,
    send_errors: u64,
    /// How late datagrams left against the link model's delivery time, µs.
    lateness: metronome_time::Summary,
}

pub(crate) fn run(
    cmd: EmuCommand,
    stop: Arc<AtomicBool>,
) -> Result<(), Box<dyn std::error::Error>> {
    let a = match cmd {
        EmuCommand::Relay(a) => a,
        EmuCommand::Pair(p) => return pair(p, stop),
    };
    let link = a.link.config()?;
    let mut cfg = RelayConfig::new(a.listen, a.to, link);
    cfg.seed = a.link.seed;
    let relay = Relay::open(cfg)?;
    if !a.json {
        eprintln!(
            "relaying {} → {} (Ctrl-C ends it)",
            relay.local_addr()?,
            a.to
        );
    }
    let s = relay.run(&stop, a.duration);
    let report = RelayReport {
        listen: a.listen,
        to: a.to,
        received: s.received,
        forwarded: s.forwarded,
        lost: s.lost,
        dropped_queue: s.dropped_queue,
        overflow: s.overflow,
        truncated: s.truncated,
        socket_drops: s.socket_drops,
        send_errors: s.send_errors,
        lateness: s.lateness.summary(),
    };
    if a.json {
        println!("{}", crate::report::to_json(&report)?);
    } else {
        println!(
            "received {}, forwarded {}, lost {}, queue drops {}, overflow {}, truncated {}",
            report.received,
            report.forwarded,
            report.lost,
            report.dropped_queue,
            report.overflow,
            report.truncated
        );
        println!("lateness against the model: {}", report.lateness);
    }
    Ok(())
}
