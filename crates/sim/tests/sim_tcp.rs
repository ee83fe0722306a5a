//! TCP by smoltcp in virtual time: the goodput follows the bottleneck (less headers), under a
//! serializer and under a tc-tbf token bucket, with Reno and CUBIC; a limited transfer
//! completes exactly; loss is recovered; the same seed replays.

use metronome_link::report::FlowReport;
use metronome_link::{LinkConfig, LossModel};
use metronome_sim::flows::tcp::{TcpCongestion, TcpFlow, TcpFlowConfig};
use metronome_sim::trace::TraceLevel;
use metronome_sim::Sim;
use metronome_time::Timestamp;
use std::time::Duration;

/// A 1460-byte segment is 1500 bytes on the wire (20 bytes of IPv4, 20 of TCP): smoltcp
/// sends no timestamps option, so data segments carry no TCP options.
const GOODPUT_SHARE: f64 = 1460.0 / 1500.0;

fn run(
    fwd: LinkConfig,
    cc: TcpCongestion,
    secs: u64,
    bytes: Option<u64>,
    seed: u64,
) -> (FlowReport, String) {
    run_with(fwd, cc, secs, bytes, seed, (None, true))
}

/// [`run`] with at most `max_window` segments in flight, the receiver delaying its ACKs or
/// not.
fn run_with(
    fwd: LinkConfig,
    cc: TcpCongestion,
    secs: u64,
    bytes: Option<u64>,
    seed: u64,
    (max_window, delayed_ack): (Option<u32>, bool),
) -> (FlowReport, String) {
    let mut sim = Sim::new(seed, TraceLevel::Packets);
    let a = sim.add_node("a");
    let b = sim.add_node("b");
    let back = LinkConfig {
        delay: Duration::from_millis(20),
        ..LinkConfig::default()
    };
    sim.add_link(a, b, fwd, back);
    sim.add_flow(Box::new(TcpFlow::new(TcpFlowConfig {
        name: "bulk".into(),
        src: a,
        dst: b,
        congestion: cc,
        bytes,
        app_rate_bps: None,
        start: Duration::ZERO,
        duration: Duration::from_secs(secs),
        buffer_bytes: 1 << 20,
        max_window,
        delayed_ack,
        mtu: metronome_sim::flows::tcp::DEFAULT_MTU,
        interval: Duration::from_secs(1),
        seed,
    })));
    sim.run_until(Timestamp::from_secs(secs + 2));
    let out = sim.finish();
    (out.flows[0].clone(), out.trace.to_csv())
}

/// The median of the per-second goodput bins after the first `skip` seconds (slow start),
/// the close left out: what the connection carries while it is not recovering from a loss.
/// smoltcp recovers one loss per window by fast retransmit but several (a drop-tail queue
/// overflowing in slow start or at the top of a CUBIC cycle) by its retransmission timer,
/// whose minimum is RFC 6298's 1 s, so such seconds carry little; the median skips them.
fn steady_goodput(f: &FlowReport, skip: usize) -> f64 {
    let iv = &f.receivers[0].intervals;
    let mut bins: Vec<f64> = iv[skip..iv.len().saturating_sub(2)]
        .iter()
        .map(|i| i.bytes as f64 * 8.0)
        .collect();
    bins.sort_by(f64::total_cmp);
    bins[bins.len() / 2]
}

/// 10 Mbit/s, 20 ms, a queue of 100 packets.
fn ten_mbit_20ms() -> LinkConfig {
    LinkConfig {
        rate_bps: Some(10_000_000),
        delay: Duration::from_millis(20),
        queue_limit_packets: Some(100),
        ..LinkConfig::default()
    }
}

/// The mean goodput of the per-second bins after the first `skip` seconds, the close left
/// out.
fn steady_mean(f: &FlowReport, skip: usize) -> f64 {
    let iv = &f.receivers[0].intervals;
    let bins = &iv[skip..iv.len().saturating_sub(2)];
    bins.iter().map(|i| i.bytes as f64 * 8.0).sum::<f64>() / bins.len().max(1) as f64
}

/// Goodput over the whole transfer.
fn mean_goodput(f: &FlowReport, secs: u64) -> f64 {
    f.receivers[0].bytes as f64 * 8.0 / secs as f64
}

#[test]
fn goodput_is_the_link_rate_less_headers() {
    for cc in [TcpCongestion::Reno, TcpCongestion::Cubic] {
        let fwd = ten_mbit_20ms();
        let (f, _) = run(fwd, cc, 20, None, 7);
        let got = steady_goodput(&f, 2);
        let expect = 10_000_000.0 * GOODPUT_SHARE;
        let bins: Vec<u64> = f.receivers[0].intervals.iter().map(|i| i.bytes).collect();
        assert!(
            (got - expect).abs() / expect < 0.03,
            "{cc:?}: {got:.0} bit/s, expected {expect:.0}; bytes per second {bins:?}"
        );
        // Recoveries by timeout cost at most a quarter of the time.
        let mean = mean_goodput(&f, 20);
        assert!(mean > 0.75 * expect, "{cc:?}: {mean:.0} bit/s; {bins:?}");
    }
}

/// With `max_window` (ns-2's `window_`) the sender keeps at most that many segments in
/// flight: on a path whose bandwidth-delay product is larger it carries the window per round
/// trip, not the link's rate.
#[test]
fn goodput_keeps_to_the_window_cap() {
    for cc in [TcpCongestion::Reno, TcpCongestion::Cubic] {
        for w in [1u32, 10, 25] {
            let (f, _) = run_with(ten_mbit_20ms(), cc, 10, None, 7, (Some(w), false));
            // The mean, not the median bin: at one segment per round trip a second's bin
            // holds 24 or 25 of them.
            let got = steady_mean(&f, 2);
            // w segments of 1460 bytes per round trip: 40 ms of propagation and a segment's
            // 1.2 ms at 10 Mbit/s (the ACK's way back has no rate; no queue builds).
            let rtt = 0.040 + 1500.0 * 8.0 / 10e6;
            let expect = w as f64 * 1460.0 * 8.0 / rtt;
            assert!(
                (got - expect).abs() / expect < 0.02,
                "{cc:?}: {got:.0} bit/s with a window of {w} segments, expected {expect:.0}"
            );
        }
    }
}

/// With `delayed_ack = false` (ns-2's TCPSink) the receiver ACKs every segment at once; by
/// default it ACKs about every second one (smoltcp's delayed ACK).
#[test]
fn the_receiver_acks_every_segment_unless_it_delays() {
    // Packets `event` at node `node` (0 the sender, 1 the receiver), from the trace
    // (time_ns, event, node, ...).
    let count = |csv: &str, event: &str, node: &str| {
        csv.lines()
            .filter(|l| {
                let mut c = l.split(',').skip(1);
                c.next() == Some(event) && c.next() == Some(node)
            })
            .count() as f64
    };
    for (delayed, lo, hi) in [(false, 0.99, 1.01), (true, 0.45, 0.7)] {
        // A window under the path's bandwidth-delay product: no queue builds, nothing lost.
        let (_, csv) = run_with(
            ten_mbit_20ms(),
            TcpCongestion::Reno,
            5,
            None,
            7,
            (Some(30), delayed),
        );
        let (got, acks) = (count(&csv, "delivered", "1"), count(&csv, "sent", "1"));
        eprintln!("delayed_ack = {delayed}: {acks} ACKs for {got} segments");
        assert!(
            got > 1000.0 && (lo..=hi).contains(&(acks / got)),
            "delayed_ack = {delayed}: {acks} ACKs for {got} segments"
        );
    }
}

#[test]
fn goodput_follows_a_token_bucket_limit() {
    for mbps in [2u64, 4, 6, 8, 10] {
        let rate = mbps * 1_000_000;
        // tc qdisc … tbf rate R burst 32kbit latency 20ms, as seed 001 set it: a 4 KiB bucket
        // and a queue of R·20 ms plus the bucket.
        let fwd = LinkConfig {
            rate_bps: Some(rate),
            burst_bytes: Some(4096),
            queue_limit_bytes: Some((rate / 8 / 50) as usize + 4096),
            delay: Duration::from_millis(1),
            ..LinkConfig::default()
        };
        let (f, _) = run(fwd, TcpCongestion::Cubic, 20, None, 3);
        let got = steady_goodput(&f, 3);
        let expect = rate as f64 * GOODPUT_SHARE;
        assert!(
            (got - expect).abs() / expect < 0.05,
            "{mbps} Mbit/s: {got:.0} bit/s; bins {:?}",
            f.receivers[0].intervals
        );
    }
}

#[test]
fn a_limited_transfer_completes_exactly_even_with_loss() {
    for loss in [0.0, 0.01] {
        let fwd = LinkConfig {
            rate_bps: Some(20_000_000),
            delay: Duration::from_millis(10),
            loss: LossModel::Bernoulli(loss),
            queue_limit_packets: Some(200),
            ..LinkConfig::default()
        };
        let n = 3_000_000;
        let (f, trace) = run(fwd, TcpCongestion::Reno, 30, Some(n), 11);
        assert_eq!(f.receivers[0].bytes, n, "loss {loss}");
        if loss > 0.0 {
            // Segments were lost on the link and sent again.
            assert!(trace.contains(",loss"), "no loss at {loss}");
            assert!(
                f.sent_packets as f64 > n as f64 / 1460.0,
                "{}",
                f.sent_packets
            );
        }
    }
}

#[test]
fn the_same_seed_replays_a_tcp_run() {
    let fwd = LinkConfig {
        rate_bps: Some(5_000_000),
        delay: Duration::from_millis(15),
        jitter: Duration::from_millis(2),
        loss: LossModel::Bernoulli(0.005),
        queue_limit_packets: Some(30),
        ..LinkConfig::default()
    };
    let seed = 99;
    let (_, one) = run(fwd.clone(), TcpCongestion::Cubic, 5, None, seed);
    let (_, two) = run(fwd, TcpCongestion::Cubic, 5, None, seed);
    assert!(one == two, "seed {seed}: two runs differ");
}
