//! Send-cost calibration: what one packet costs the pacing thread on this machine, measured at
//! start-up, so that admission control budgets real numbers rather than guesses.
//!
//! The measurement sends a burst of full-size RTP datagrams over loopback to a socket of our own
//! (loopback runs the receiver's half of the network stack inside the `send` call too, so it is
//! the dearer case), times every call, and takes a high quantile with a safety factor.

use crate::clock::mono_ns;
use metronome_time::Distribution;
use metronome_time::Micros;
use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

/// What a calibration measured and what admission control will use.
#[derive(Clone, Copy, Debug, Serialize, schemars::JsonSchema)]
pub struct Calibration {
    /// The budgeted cost of sending one packet to one destination.
    pub per_packet_us: Micros,
    /// Fixed cost of one job besides its sends: picking it, reading the clock, accounting.
    pub per_job_us: Micros,
    /// The cost of each further datagram of a UDP GSO send (raw video sends its packets in
    /// batches: one `sendmsg` costs about `per_packet_us`, every segment after the first this).
    pub per_segment_us: Micros,
    /// Median time of one `send` call, in the quietest round (the one whose p99 is budgeted).
    pub measured_p50_us: Micros,
    /// 99th-percentile time of one `send` call in the quietest round; `per_packet_us` is this
    /// times the safety factor 1.5 (at least 1 µs).
    pub measured_p99_us: Micros,
    /// Send calls timed, over all rounds (the quantiles come from one round of them); 0 when
    /// the cost was [`fixed`](Self::fixed) rather than measured.
    pub samples: u64,
    /// How the numbers were obtained.
    pub method: &'static str,
}

impl Calibration {
    /// A cost given by the user instead of measured.
    pub fn fixed(per_packet: Duration) -> Self {
        Calibration {
            per_packet_us: Micros::from(per_packet),
            per_job_us: Micros::from_micros(1),
            per_segment_us: Micros::from(per_packet),
            measured_p50_us: Micros::from(per_packet),
            measured_p99_us: Micros::from(per_packet),
            samples: 0,
            method: "given on the command line",
        }
    }
}

/// Safety factor on the measured p99: the pacing thread runs with a warm cache and at real-time
/// priority; the factor covers what the burst did not see (interrupts, cache misses).
const SAFETY: f64 = 1.5;

/// Rounds of sends measured, each after one uncounted warm-up burst.
const ROUNDS: usize = 5;
/// Bursts per round, and sends per burst (the sink is drained between bursts).
const BURSTS: usize = 4;
const PER_BURST: usize = 100;

/// Measures the cost of sending `packet_len`-byte datagrams. Takes a few milliseconds.
///
/// The p99 of one round of sends moves with whatever else the host does in those
/// milliseconds: one calibration of 1,900 sends gave 5 to 35 µs across restarts of the same
/// server on a shared VM, so the same streams were admitted before a restart and refused
/// after. So five rounds are timed, a few milliseconds apart, and the quietest round's p99
/// (the lowest) is budgeted, with the safety factor: what a send costs this machine, not
/// what a neighbour took that moment. A host that stays busier than that is the overload
/// watch's to see and say (the stream server's, in `metronome-apps`).
pub fn calibrate(packet_len: usize) -> std::io::Result<Calibration> {
    let sink = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    let _ = sink.set_recv_buffer_size(8 << 20);
    sink.bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).into())?;
    let sink: UdpSocket = sink.into();
    sink.set_nonblocking(true)?;
    let to = sink.local_addr()?;
    let tx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
    tx.connect(to)?;
    let packet = vec![0x80u8; packet_len.clamp(12, 65_000)];
    let mut drain = vec![0u8; 65_536];
    let mut all = Distribution::new();
    let mut quietest: Option<Distribution> = None;
    for round in 0..ROUNDS {
        if round > 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
        let mut dist = Distribution::new();
        // The first burst warms caches and the socket; it is not counted.
        for burst in 0..=BURSTS {
            for _ in 0..PER_BURST {
                let t0 = mono_ns();
                let r = tx.send(&packet);
                let t1 = mono_ns();
                r?;
                if burst > 0 {
                    dist.record(t1.saturating_sub(t0));
                }
            }
            while sink.recv(&mut drain).is_ok() {}
        }
        all.merge(&dist);
        if quietest
            .as_ref()
            .is_none_or(|q| dist.quantile_ns(0.99) < q.quantile_ns(0.99))
        {
            quietest = Some(dist);
        }
    }
    let quietest = quietest.expect("ROUNDS > 0");
    let p50 = Duration::from_nanos(quietest.quantile_ns(0.5));
    let p99 = Duration::from_nanos(quietest.quantile_ns(0.99));
    let per_packet = p99.mul_f64(SAFETY).max(Duration::from_micros(1));
    let per_segment = segment_cost(to, &packet, &sink, &mut drain)
        .unwrap_or(per_packet)
        .min(per_packet);
    Ok(Calibration {
        per_packet_us: Micros::from(per_packet),
        per_job_us: Micros::from_micros(1),
        per_segment_us: Micros::from(per_segment),
        measured_p50_us: Micros::from(p50),
        measured_p99_us: Micros::from(p99),
        samples: all.len(),
        method: "p99 of the quietest of 5 rounds of 400 loopback sends x1.5",
    })
}

/// Segments per GSO send measured.
const SEGMENTS: usize = 32;

/// What each segment after the first of a UDP GSO send costs: the p99 of a few hundred sends
/// of [`SEGMENTS`] datagrams, less one plain send, per segment, with the safety factor. `None`
/// where the kernel has no GSO (the sender then sends datagram by datagram).
fn segment_cost(
    to: SocketAddr,
    packet: &[u8],
    sink: &UdpSocket,
    drain: &mut [u8],
) -> Option<Duration> {
    let dest = crate::url::RtpUrl::unicast(to);
    let tx = crate::udp::BatchSender::open(&dest, &crate::udp::SocketOptions::default()).ok()?;
    if !matches!(tx.gso_status(), crate::udp::GsoStatus::On { .. }) {
        return None;
    }
    let seg = packet.len().min(1400);
    let buf = vec![0x80u8; seg * SEGMENTS];
    let mut batch = Distribution::new();
    let mut single = Distribution::new();
    for burst in 0..12 {
        for _ in 0..10 {
            let t0 = mono_ns();
            let sent = tx.send_segments(&buf, seg).ok()?;
            let t1 = mono_ns();
            let one = tx.send(&buf[..seg]).ok()?;
            let t2 = mono_ns();
            if sent != SEGMENTS || one != seg {
                return None;
            }
            if burst > 0 {
                batch.record(t1.saturating_sub(t0));
                single.record(t2.saturating_sub(t1));
            }
        }
        while sink.recv(drain).is_ok() {}
    }
    let extra = batch
        .quantile_ns(0.99)
        .saturating_sub(single.quantile_ns(0.5));
    let per = Duration::from_nanos(extra / (SEGMENTS as u64 - 1));
    Some(per.mul_f64(SAFETY).max(Duration::from_nanos(50)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_measures_a_plausible_cost() {
        let c = calibrate(1328).unwrap();
        assert_eq!(c.samples, (ROUNDS * BURSTS * PER_BURST) as u64);
        assert!(c.per_packet_us >= c.measured_p99_us, "{c:?}");
        // A loopback send is microseconds, not milliseconds, even on a loaded host; anything
        // outside this range means the measurement is broken.
        assert!(
            c.measured_p50_us.to_duration() > Duration::from_nanos(100),
            "{c:?}"
        );
        assert!(
            c.measured_p50_us.to_duration() < Duration::from_millis(5),
            "{c:?}"
        );
        // A segment of a GSO send costs no more than a send of its own.
        assert!(c.per_segment_us <= c.per_packet_us, "{c:?}");
        assert!(
            c.per_segment_us.to_duration() >= Duration::from_nanos(50),
            "{c:?}"
        );
    }
}
