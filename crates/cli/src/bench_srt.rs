//! `metronome bench srt`: loss repair beside SRT on the same emulated link, in one run.
//!
//! Two network namespaces joined by the emulator (`crates/emu`): a link at `--link-rate` with
//! `--delay` each way and random loss both ways (the receiver's feedback is lost too), its queue
//! 100 ms at its rate or netem's `limit` (`--netem-limit`, as seed 001's links). The same
//! stream, Metronome's live test source as RTP/MP2T with send-time stamps, crosses it three
//! ways at each loss level:
//!
//! - **bare**: RTP, nothing repaired (what the link alone delivers, and the path's own delay);
//! - **metronome-rtx**: RTP with RFC 4585 NACKs and RFC 4588 retransmissions, the receiver's
//!   play-out delay set to the latency budget (it asks only for what can still make it);
//! - **srt**: the same RTP packets into `srt-live-transmit` (Debian's srt-tools) in the
//!   sending namespace, SRT across the link with `latency` set to the budget, and out of a second
//!   `srt-live-transmit` to the receiver in the receiving namespace.
//!
//! Each packet's send time is its RTP timestamp (RFC 2250: the transmission time) on the clock
//! its send-time stamps give; a packet is **in time** if it reached the receiver within the
//! path's own delay (the bare stream's least one-way delay) plus the latency budget, and for
//! SRT a hand-over allowance more ([`ALLOWANCE`]): SRT hands every packet over at the budget
//! (its TSBPD buffer) plus a little, and that is its play-out; Metronome's receiver hands
//! packets over as they come, and a player's jitter buffer holds them to the budget. Overhead is the forward link's bytes per
//! packet over the bare stream's. Needs root and srt-tools.

use crate::args::{parse_duration, parse_rate, SourceArgs};
use crate::bench_emu::Running;
use clap::Args;
use metronome_apps::receiver::{PayloadSink, PayloadSinkHandle, Receiver, ReceiverRunConfig};
use metronome_apps::sender::{run_sender, SenderConfig, SenderOutcome};
use metronome_config::repair::Repair;
use metronome_emu::fabric::FabricStats;
use metronome_emu::netns::{remove_stale, NetnsPair};
use metronome_link::{Link, LinkConfig, LossModel};
use metronome_rt::clock::Clock;
use metronome_rt::host::HostWatch;
use metronome_rt::url::RtpUrl;
use metronome_session::receiver::{PacketRecord, ReceiverRepair};
use metronome_session::repair::{NackCounters, RTX_PAYLOAD_TYPE};
use metronome_time::Micros;
use metronome_time::{Distribution, RtpTime};
use metronome_wire::rtp::{RtpView, SEND_TIME_EXT_ID};
use metronome_wire::SeqNo;
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Args, Debug)]
pub(crate) struct SrtArgs {
    /// The stream's rate (the live test source's constant mux rate)
    #[arg(long, value_parser = parse_rate, default_value = "4M")]
    pub rate: u64,
    /// The emulated link's rate
    #[arg(long, value_parser = parse_rate, default_value = "20M")]
    pub link_rate: u64,
    /// The emulated link's delay, each way
    #[arg(long, value_parser = parse_duration, default_value = "20ms")]
    pub delay: Duration,
    /// Random loss on the link, each way; the three cases run at each value (0.01 or 1%)
    #[arg(long, value_parser = crate::emu::parse_prob, value_delimiter = ',', default_value = "1%,3%,5%")]
    pub loss: Vec<f64>,
    /// netem's `limit` on the forward link instead of its 100 ms queue: packets held, those
    /// still serving their delay included (seed 001's links: 10 on the moderate one)
    #[arg(long)]
    pub netem_limit: Option<usize>,
    /// The latency budget of both: SRT's `latency`, Metronome's receiver play-out delay
    #[arg(long, value_parser = parse_duration, default_value = "120ms")]
    pub latency: Duration,
    /// How long each case streams
    #[arg(long, value_parser = crate::args::parse_run_length, default_value = "10s")]
    pub duration: Duration,
    /// Print JSON only
    #[arg(long)]
    pub json: bool,
}

/// How late after the budget a packet may reach the receiver and still count as in time.
/// SRT hands each packet over at its latency plus a little: through srt-live-transmit on
/// loopback here, with `latency=120`, 0.7 ms later at least, 5.9 ms at the median and 13 ms at
/// most (600 packets, 2026-12-02); its play-out is then, so its packets count as in time then.
const ALLOWANCE: Duration = Duration::from_millis(15);
/// Where the stream goes inside the namespaces.
const RTP_PORT: u16 = 5004;
const SRT_PORT: u16 = 6000;
const SRT_OUT_PORT: u16 = 5008;
/// At most this many arrivals are kept per case (a bound on memory whatever the arguments).
const MAX_ARRIVALS: usize = 4_000_000;
/// The longest case: RTP timestamps (90 kHz) are compared as 32-bit differences, good for 6 h.
const MAX_DURATION: Duration = Duration::from_secs(3600);
/// How long SRT's ends are given to connect: a handshake packet the link loses is sent again
/// 250 ms later.
const SRT_CONNECT: Duration = Duration::from_millis(1500);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Way {
    Bare,
    Rtx,
    Srt,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Bare => "bare",
            Way::Rtx => "metronome-rtx",
            Way::Srt => "srt",
        }
    }
}

/// What one case measured.
#[derive(Serialize, schemars::JsonSchema)]
struct Case {
    name: &'static str,
    /// Packets the sender sent.
    sent: u64,
    /// Packets that reached the receiver by their deadline (`deadline_us` after they left, and
    /// `allowance_us` more for SRT).
    in_time: u64,
    /// Packets that reached it later.
    late: u64,
    /// Packets that never reached it.
    missing: u64,
    in_time_percent: f64,
    /// How long after the path's own delay packets reached the receiver, over those that did.
    added_delay: metronome_time::Summary,
    /// Bytes offered to the forward link (IPv4 and UDP headers included).
    forward_bytes: u64,
    /// Forward bytes per packet sent over the bare stream's, less one, %.
    overhead_percent: f64,
    /// What went back over the reverse link (NACKs and reports, SRT's ACKs and NAKs), bit/s,
    /// over the case's whole run (its set-up and drain too).
    feedback_bps: f64,
    /// Retransmissions sent: Metronome's RTX packets, or SRT's as it counted them in its last
    /// statistics report (it reports every 100 packets).
    repairs_sent: Option<u64>,
    /// Packets the link models lost: forward, back.
    link_lost: [u64; 2],
    /// What Metronome's receiver asked for and got back (metronome-rtx only).
    #[serde(skip_serializing_if = "Option::is_none")]
    nack: Option<NackCounters>,
}

/// Metronome's figure over SRT's.
#[derive(Serialize, schemars::JsonSchema)]
struct Ratios {
    in_time: f64,
    forward_bytes: f64,
    /// The added delay's 99th percentile: how long before the slowest packets were in the
    /// receiver's hands (SRT's TSBPD holds them all for the budget).
    added_delay_p99: f64,
}

/// The three cases at one loss level.
#[derive(Serialize, schemars::JsonSchema)]
struct Level {
    loss_percent: f64,
    /// The path's own delay: the bare stream's least one-way delay.
    path_delay_us: Micros,
    /// The deadline after a packet leaves: path delay and latency budget (SRT's packets
    /// have `allowance_us` more).
    deadline_us: Micros,
    cases: Vec<Case>,
    /// metronome-rtx over srt.
    rtx_over_srt: Ratios,
}

#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct SrtBench {
    benchmark: &'static str,
    rate_bps: u64,
    link_rate_bps: u64,
    /// netem's `limit` on the forward link (packets held, those serving their delay
    /// included), if given; else its queue holds 100 ms at its rate (at least 50 packets).
    netem_limit: Option<usize>,
    delay_us: Micros,
    latency_us: Micros,
    allowance_us: Micros,
    duration_us: Micros,
    srt_version: String,
    levels: Vec<Level>,
    host: Option<metronome_rt::host::HostLoad>,
}

/// One packet as the receiver got it.
#[derive(Clone, Copy)]
struct Arrival {
    seq: SeqNo,
    rtp_ts: RtpTime,
    at_unix_ns: u64,
    /// Its send-time stamp (a retransmission's is its own, so none is kept for those).
    sent_unix_ns: Option<u64>,
}

/// Notes every packet the receiver session takes (repairs as the packets they repair).
#[derive(Default)]
struct Arrivals(Vec<Arrival>);

impl PayloadSink for Arrivals {
    fn payload(&mut self, _: &PacketRecord, _: &[u8]) {}
    fn packet(&mut self, rec: &PacketRecord, arrival_unix_ns: u64, datagram: &[u8]) {
        if self.0.len() >= MAX_ARRIVALS {
            return;
        }
        let sent = RtpView::parse(datagram)
            .ok()
            .filter(|_| !rec.repaired)
            .and_then(|p| p.send_time(SEND_TIME_EXT_ID))
            .map(|t| t.to_unix_nanos());
        self.0.push(Arrival {
            seq: rec.seq,
            rtp_ts: rec.rtp_ts,
            at_unix_ns: arrival_unix_ns,
            sent_unix_ns: sent,
        });
    }
}

/// What one case's stream did, before judging.
struct Streamed {
    sender: SenderOutcome,
    arrivals: Vec<Arrival>,
    repairs_sent: Option<u64>,
    nack: Option<NackCounters>,
    /// How long the case ran, set-up to drain (what the link counters cover).
    elapsed: Duration,
}

/// Each packet's one-way delay, ns, by its index from the first sent (`None`: never arrived):
/// its first arrival less its send time, which is its RTP timestamp (90 kHz) on the clock
/// the send-time stamps give.
fn delays(arrivals: &[Arrival], first_seq: SeqNo, sent: u64) -> Vec<Option<i64>> {
    let mut out = vec![None; (sent as usize).min(MAX_ARRIVALS)];
    let Some(ts0) = arrivals.first().map(|a| a.rtp_ts) else {
        return out;
    };
    let ts_ns = |ts: RtpTime| i64::from(ts.delta(ts0)) * 1_000_000_000 / 90_000;
    // The earliest stamp against its timestamp: the epoch plus the sender's least lateness.
    let Some(offset) = arrivals
        .iter()
        .filter_map(|a| a.sent_unix_ns.map(|s| s as i64 - ts_ns(a.rtp_ts)))
        .min()
    else {
        return out;
    };
    let mut last = 0u64;
    for a in arrivals {
        let k = SeqNo(a.seq.since(first_seq)).extend_near(last);
        // A stray number (not of this run's packets) does not move the unwrapping.
        let Some(slot) = out.get_mut(k as usize) else {
            continue;
        };
        last = k;
        let delay = a.at_unix_ns as i64 - (offset + ts_ns(a.rtp_ts));
        if slot.is_none() {
            *slot = Some(delay);
        }
    }
    out
}

/// A case's figures from what its stream did and what the links carried.
fn judge(
    a: &SrtArgs,
    way: Way,
    s: &Streamed,
    links: [&FabricStats; 2],
    path_ns: i64,
    bare_per_packet: f64,
) -> Case {
    let sent = s.sender.packets;
    let allowance = if way == Way::Srt {
        ALLOWANCE
    } else {
        Duration::ZERO
    };
    let deadline = path_ns + (a.latency + allowance).as_nanos() as i64;
    let mut added = Distribution::new();
    let (mut in_time, mut late) = (0, 0);
    for d in delays(&s.arrivals, SeqNo(s.sender.first_seq), sent)
        .into_iter()
        .flatten()
    {
        added.record((d - path_ns).max(0) as u64);
        if d <= deadline {
            in_time += 1;
        } else {
            late += 1;
        }
    }
    let link = |k: usize| links[k].links.first().cloned().unwrap_or_default();
    let (fwd, back) = (link(0), link(1));
    let per_packet = fwd.bytes_sent as f64 / sent.max(1) as f64;
    Case {
        name: way.name(),
        sent,
        in_time,
        late,
        missing: sent - in_time - late,
        in_time_percent: in_time as f64 * 100.0 / sent.max(1) as f64,
        added_delay: added.summary(),
        forward_bytes: fwd.bytes_sent,
        overhead_percent: (per_packet / bare_per_packet.max(1.0) - 1.0) * 100.0,
        feedback_bps: back.bytes_sent as f64 * 8.0 / s.elapsed.as_secs_f64().max(1e-3),
        repairs_sent: s.repairs_sent,
        link_lost: [fwd.lost, back.lost],
        nack: s.nack,
    }
}

/// The bare stream's least one-way delay, ns: the path's own.
fn path_delay(s: &Streamed) -> i64 {
    delays(&s.arrivals, SeqNo(s.sender.first_seq), s.sender.packets)
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(0)
}

/// The forward link (rate, delay, loss, a queue of 100 ms at its rate or netem's `limit`) and
/// the reverse one (delay and loss).
fn links(a: &SrtArgs, loss: f64, seed: u64) -> [Link<metronome_emu::fabric::Datagram>; 2] {
    let loss = if loss > 0.0 {
        LossModel::Bernoulli(loss)
    } else {
        LossModel::None
    };
    let forward = LinkConfig {
        rate_bps: Some(a.link_rate),
        delay: a.delay,
        loss,
        queue_limit_packets: match a.netem_limit {
            Some(_) => None,
            None => Some(((a.link_rate / 10 / 12_000) as usize).max(50)),
        },
        netem_limit: a.netem_limit,
        ..LinkConfig::default()
    };
    let back = LinkConfig {
        delay: a.delay,
        loss,
        ..LinkConfig::default()
    };
    [Link::new(forward, seed), Link::new(back, seed ^ 0x5eed)]
}

/// Runs one case on a fresh pair of namespaces: its stream, then its figures.
fn run_case(
    a: &SrtArgs,
    loss: f64,
    way: Way,
    stop: &Arc<AtomicBool>,
) -> Result<(Streamed, [FabricStats; 2]), String> {
    let pair = NetnsPair::create("srt").map_err(|e| e.to_string())?;
    let [ab, ba] = links(a, loss, 0x5274 + (loss * 1e4) as u64);
    let [there, back] = pair
        .fabrics(ab, ba, Clock::new())
        .map_err(|e| e.to_string())?;
    let links_stop = AtomicBool::new(false);
    let clock = Clock::new();
    let started = clock.now();
    std::thread::scope(|s| {
        let f = s.spawn(|| there.run(&links_stop, None));
        let g = s.spawn(|| back.run(&links_stop, None));
        let streamed = {
            // The links stop however the stream ends (a panic too), or the scope would wait.
            let _stop_links = StopOnDrop(&links_stop);
            stream(a, &pair, way, stop).map(|mut s| {
                s.elapsed = clock.now().saturating_since(started);
                s
            })
        };
        let stats = [f.join(), g.join()];
        let [Ok(f), Ok(g)] = stats else {
            return Err("the emulator's thread failed".to_string());
        };
        Ok((streamed?, [f, g]))
    })
}

/// The receiver's configuration for `way`, listening at `url`.
fn receiver_config(
    a: &SrtArgs,
    way: Way,
    url: RtpUrl,
    sink: PayloadSinkHandle,
) -> ReceiverRunConfig {
    let mut cfg = ReceiverRunConfig::new(url);
    cfg.sink = Some(sink);
    cfg.session.histogram_digits = 0;
    if way == Way::Rtx {
        cfg.session.repair = Some(ReceiverRepair::new(RTX_PAYLOAD_TYPE, a.latency));
    }
    cfg
}

/// Streams one case: the receiver in namespace b, SRT's two ends for `Way::Srt`, the sender
/// in namespace a; then waits for what is in flight.
fn stream(
    a: &SrtArgs,
    pair: &NetnsPair,
    way: Way,
    stop: &Arc<AtomicBool>,
) -> Result<Streamed, String> {
    let lo = Ipv4Addr::LOCALHOST;
    let (listen, dest) = match way {
        Way::Srt => (
            SocketAddr::from((lo, SRT_OUT_PORT)),
            SocketAddr::from((lo, RTP_PORT)),
        ),
        _ => {
            let b = SocketAddr::from((pair.addr_b, RTP_PORT));
            (b, b)
        }
    };
    let sink = Arc::new(Mutex::new(Arrivals::default()));
    let cfg = receiver_config(
        a,
        way,
        RtpUrl::unicast(listen),
        PayloadSinkHandle(sink.clone()),
    );
    let receiver = pair
        .run_in(false, || Receiver::open(cfg))
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("the receiver: {e}"))?;
    let scratch = Scratch::new()?;
    let srt = match way {
        Way::Srt => Some(SrtEnds::start(a, pair, &scratch.0)?),
        _ => None,
    };
    let rx_stop = AtomicBool::new(false);
    let (sent, got) = std::thread::scope(|s| {
        let rx = s.spawn(|| receiver.run(&rx_stop, |_, _| {}));
        let sent = send(a, pair, way, dest, stop);
        // What is in flight arrives (SRT holds each packet for the budget).
        std::thread::sleep(a.latency + a.delay * 2 + Duration::from_millis(300));
        rx_stop.store(true, Ordering::Relaxed);
        (sent, rx.join())
    });
    let repairs = match (way, &srt) {
        (Way::Srt, Some(ends)) => ends.retransmitted(),
        _ => None,
    };
    drop(srt);
    let sender = sent?;
    let got = got
        .map_err(|_| "the receiver's thread panicked".to_string())?
        .map_err(|e| format!("the receiver: {e}"))?;
    let arrivals = std::mem::take(&mut sink.lock().unwrap_or_else(|e| e.into_inner()).0);
    let repairs_sent = match way {
        Way::Rtx => sender.repair.as_ref().map(|r| r.packets),
        _ => repairs,
    };
    Ok(Streamed {
        sender,
        arrivals,
        repairs_sent,
        nack: got.receiver.repair.map(|r| r.nack),
        elapsed: Duration::ZERO,
    })
}

/// Metronome's sender in namespace a: the live test source at the stream's rate, to `dest`.
fn send(
    a: &SrtArgs,
    pair: &NetnsPair,
    way: Way,
    dest: SocketAddr,
    stop: &Arc<AtomicBool>,
) -> Result<SenderOutcome, String> {
    let source = SourceArgs::test_pattern(a.rate)
        .open()
        .map_err(|e| format!("the test source: {e}"))?;
    let mut cfg = SenderConfig::new(
        vec![RtpUrl::unicast(dest)],
        metronome_wire::Ssrc(0x5352_5400),
        0x5352_5400,
    );
    cfg.duration = Some(a.duration);
    cfg.send_time_ext = true;
    cfg.lock_memory = false;
    if way == Way::Rtx {
        cfg.repair = Repair::Rtx;
        cfg.playout_delay = Some(a.latency);
    }
    pair.run_in(true, || run_sender(source, cfg, stop.clone(), |_| {}))
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("the sender: {e}"))
}

/// Sets the flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A directory of this run's own (made afresh, for its owner only), removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, String> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!("metronome-bench-srt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `srt-live-transmit` at both ends: UDP in namespace a into an SRT caller, an SRT listener in
/// namespace b out to the receiver; killed when dropped.
struct SrtEnds {
    _listener: Running,
    _caller: Running,
    caller_stats: PathBuf,
}

impl SrtEnds {
    fn start(a: &SrtArgs, pair: &NetnsPair, scratch: &Path) -> Result<SrtEnds, String> {
        let ms = a.latency.as_millis();
        let spawn = |in_a: bool, input: String, output: String, stats: &Path| {
            pair.command(in_a, "srt-live-transmit")
                .args(["-q", "-s:100", "-pf:json", "-f"])
                .arg(format!("-statsout:{}", stats.display()))
                .args([input, output])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map(Running)
                .map_err(|e| format!("cannot start srt-live-transmit ({e}): install srt-tools"))
        };
        let listener = spawn(
            false,
            format!("srt://:{SRT_PORT}?mode=listener&latency={ms}"),
            format!("udp://127.0.0.1:{SRT_OUT_PORT}"),
            &scratch.join("listener.json"),
        )?;
        std::thread::sleep(Duration::from_millis(300));
        let caller_stats = scratch.join("caller.json");
        let caller = spawn(
            true,
            format!("udp://127.0.0.1:{RTP_PORT}"),
            format!("srt://{}:{SRT_PORT}?latency={ms}", pair.addr_b),
            &caller_stats,
        )?;
        // The handshake: a few round trips over the emulated link, again if one is lost.
        std::thread::sleep(a.delay * 8 + SRT_CONNECT);
        let mut ends = SrtEnds {
            _listener: listener,
            _caller: caller,
            caller_stats,
        };
        for p in [&mut ends._listener, &mut ends._caller] {
            if let Ok(Some(status)) = p.0.try_wait() {
                return Err(format!("srt-live-transmit exited at once ({status})"));
            }
        }
        Ok(ends)
    }

    /// The caller's retransmissions in its last statistics report.
    fn retransmitted(&self) -> Option<u64> {
        let text = std::fs::read_to_string(&self.caller_stats).ok()?;
        let last = text.lines().rev().find(|l| l.starts_with('{'))?;
        let v: serde_json::Value = serde_json::from_str(last).ok()?;
        v["send"]["packetsRetransmitted"].as_u64()
    }
}

/// The three cases at loss `loss`.
fn level(a: &SrtArgs, loss: f64, stop: &Arc<AtomicBool>) -> Result<Level, String> {
    let (bare, bare_links) = run_case(a, loss, Way::Bare, stop)?;
    let path_ns = path_delay(&bare);
    let bare_bytes = bare_links[0].links.first().map_or(0, |l| l.bytes_sent);
    let bare_per_packet = bare_bytes as f64 / bare.sender.packets.max(1) as f64;
    let mut cases = vec![judge(
        a,
        Way::Bare,
        &bare,
        [&bare_links[0], &bare_links[1]],
        path_ns,
        bare_per_packet,
    )];
    for way in [Way::Rtx, Way::Srt] {
        if stop.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        let (s, l) = run_case(a, loss, way, stop)?;
        if stop.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        cases.push(judge(a, way, &s, [&l[0], &l[1]], path_ns, bare_per_packet));
    }
    let ratio = |f: &dyn Fn(&Case) -> f64| f(&cases[1]) / f(&cases[2]).max(1e-9);
    let rtx_over_srt = Ratios {
        in_time: ratio(&|c| c.in_time as f64),
        forward_bytes: ratio(&|c| c.forward_bytes as f64),
        added_delay_p99: ratio(&|c| c.added_delay.p99_us.as_micros_f64()),
    };
    Ok(Level {
        loss_percent: loss * 100.0,
        path_delay_us: Micros::from_nanos(path_ns),
        deadline_us: Micros::from_nanos(path_ns) + Micros::from(a.latency),
        cases,
        rtx_over_srt,
    })
}

fn srt_version() -> Result<String, String> {
    let out = std::process::Command::new("srt-live-transmit")
        .arg("-version")
        .output()
        .map_err(|e| format!("cannot run srt-live-transmit ({e}): install srt-tools"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("SRT Library version: "))
        .map(|v| v.split(',').next().unwrap_or(v).trim().to_string())
        .unwrap_or_default())
}

pub(crate) fn run(a: SrtArgs, stop: Arc<AtomicBool>) -> Result<(), Box<dyn std::error::Error>> {
    if a.duration > MAX_DURATION {
        return Err(format!(
            "--duration {:?} is longer than a case may run ({} s): give a shorter one",
            a.duration,
            MAX_DURATION.as_secs()
        )
        .into());
    }
    let srt_version = srt_version()?;
    remove_stale();
    let watch = HostWatch::start();
    let mut levels = Vec::with_capacity(a.loss.len());
    // Three cases a loss level (bare, Metronome's RTX, SRT), each its duration.
    let expected = a.loss.len() as f64 * 3.0 * a.duration.as_secs_f64();
    let mut progress = crate::progress::Progress::start("bench srt", a.loss.len(), Some(expected));
    for &loss in &a.loss {
        levels.push(level(&a, loss, &stop)?);
        progress.step(&format!(
            "{:.1} % loss: bare, metronome-rtx, srt",
            loss * 100.0
        ));
    }
    let bench = SrtBench {
        benchmark: "srt",
        rate_bps: a.rate,
        link_rate_bps: a.link_rate,
        netem_limit: a.netem_limit,
        delay_us: Micros::from(a.delay),
        latency_us: Micros::from(a.latency),
        allowance_us: Micros::from(ALLOWANCE),
        duration_us: Micros::from(a.duration),
        srt_version,
        levels,
        host: watch.finish(0),
    };
    if a.json {
        println!("{}", crate::report::to_json(&bench)?);
    } else {
        print_summary(&bench);
    }
    Ok(())
}

fn print_summary(b: &SrtBench) {
    let limit = b
        .netem_limit
        .map_or(String::new(), |n| format!(", netem limit {n} packets"));
    println!(
        "{:.1} Mbit/s of RTP/MP2T over a {:.0} Mbit/s link{limit}, {:.1} ms each way; latency budget {:.0} ms (SRT {})",
        b.rate_bps as f64 / 1e6,
        b.link_rate_bps as f64 / 1e6,
        b.delay_us.as_millis_f64(),
        b.latency_us.as_millis_f64(),
        b.srt_version
    );
    for l in &b.levels {
        println!(
            "{:.1} % random loss both ways (path delay {:.1} ms, deadline {:.1} ms after sending, SRT's {:.0} ms later for its hand-over):",
            l.loss_percent,
            l.path_delay_us.as_millis_f64(),
            l.deadline_us.as_millis_f64(),
            b.allowance_us.as_millis_f64()
        );
        for c in &l.cases {
            println!(
                "  {:<14} in time {:6.2} % ({} of {}, {} late, {} missing); added delay p50 {:6.1} ms, p99 {:6.1} ms; overhead {:5.1} %; feedback {:6.1} kbit/s; repairs {}",
                c.name,
                c.in_time_percent,
                c.in_time,
                c.sent,
                c.late,
                c.missing,
                c.added_delay.p50_us.as_millis_f64(),
                c.added_delay.p99_us.as_millis_f64(),
                c.overhead_percent,
                c.feedback_bps / 1e3,
                c.repairs_sent.map_or("-".to_string(), |n| n.to_string()),
            );
            if let Some(n) = &c.nack {
                println!(
                    "  {:<14} its receiver: {} missing, {} asked, {} recovered in time, {} given up",
                    "", n.missing, n.asked, n.recovered, n.given_up
                );
            }
        }
        let r = &l.rtx_over_srt;
        println!(
            "  metronome-rtx / srt: in time ×{:.3}, forward bytes ×{:.3}, added delay p99 ×{:.3}",
            r.in_time, r.forward_bytes, r.added_delay_p99
        );
    }
    if let Some(h) = &b.host {
        println!("  {}", h.line());
    }
}
