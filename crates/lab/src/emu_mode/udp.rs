//! UDP flows on real sockets: one paced sender thread for every flow (each datagram at its
//! time, from a socket in its host), a receiver per receiving host that measures with the
//! kernel's receive timestamps, as the simulator's iperf-like flow measures.

use metronome_netsim::sim::flows::{FlowReport, ReceiverReport};
use metronome_netsim::sim::meter::Meter;
use metronome_rt::clock::Clock;
use metronome_rt::udp::UdpReceiver;
use metronome_rt::wait::{WaitMode, Waiter};
use metronome_spec::scenario::{FlowDecl, FlowKind, RateShape};
use metronome_time::Timestamp;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// IPv4 and UDP headers.
const OVERHEAD: u32 = 28;

/// A UDP flow's rate, gap by gap, as the simulator's flow computes it.
pub(super) struct Pacer {
    pub payload: u32,
    pub rate: RateShape,
    pub carry: u128,
}

impl Pacer {
    fn rate_at(&self, since_start: Duration) -> u64 {
        match self.rate {
            RateShape::Constant(r) => r,
            RateShape::Square {
                high_bps,
                low_bps,
                period,
                duty,
            } => {
                let p = period.as_nanos().max(1);
                let phase = since_start.as_nanos() % p;
                if (phase as f64) < duty * p as f64 {
                    high_bps
                } else {
                    low_bps
                }
            }
        }
    }

    /// The next send time after one at `since_start`.
    fn next(&mut self, since_start: Duration) -> Option<Duration> {
        let rate = self.rate_at(since_start);
        if rate == 0 {
            let RateShape::Square { period, .. } = self.rate else {
                return None;
            };
            let p = period.as_nanos().max(1);
            self.carry = 0;
            return Some(Duration::from_nanos(
                ((since_start.as_nanos() / p + 1) * p) as u64,
            ));
        }
        let numer = self.payload as u128 * 8 * 1_000_000_000 + self.carry;
        self.carry = numer % rate as u128;
        Some(since_start + Duration::from_nanos((numer / rate as u128) as u64))
    }

    pub(super) fn peak(&self) -> u64 {
        match self.rate {
            RateShape::Constant(r) => r,
            RateShape::Square {
                high_bps, low_bps, ..
            } => high_bps.max(low_bps),
        }
    }
}

/// One flow's sender state.
pub(super) struct Sending<'a> {
    pub f: &'a FlowDecl,
    pub sock: UdpSocket,
    pub to: SocketAddr,
    pub pacer: Pacer,
    /// Time of the next datagram from the flow's start (`None`: done).
    pub next: Option<Duration>,
    pub sent: u64,
    pub bytes: u64,
}

/// Sends every flow from one thread, each datagram at its time (the earliest due first): one
/// waiting thread, not one per flow, so that senders do not take the emulator's CPU.
/// Returns each flow's (datagrams, bytes on the wire) sent; ends early when `stop` is set.
pub(super) fn send_all(
    flows: Vec<Sending>,
    clock: Clock,
    origin: Timestamp,
    stop: &AtomicBool,
) -> Vec<(u64, u64)> {
    let mut flows = flows;
    let mut waiter = Waiter::new(WaitMode::SleepSpin);
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        let due = |x: &Sending| x.next.map(|t| origin + x.f.start + t);
        let Some(i) = (0..flows.len())
            .filter(|&i| due(&flows[i]).is_some())
            .min_by_key(|&i| due(&flows[i]))
        else {
            break;
        };
        let x = &mut flows[i];
        let t = x.next.expect("filtered");
        if t >= x.f.duration {
            x.next = None;
            continue;
        }
        if x.pacer.rate_at(t) == 0 {
            x.next = x.pacer.next(t);
            continue;
        }
        waiter.wait_until(clock.mono_ns_from_timestamp(origin + x.f.start + t));
        let now = clock.now();
        let len = x.pacer.payload as usize;
        buf[..8].copy_from_slice(&x.sent.to_be_bytes());
        buf[8..16].copy_from_slice(&now.as_nanos().to_be_bytes());
        if x.sock.send_to(&buf[..len], x.to).is_ok() {
            x.sent += 1;
            x.bytes += (x.pacer.payload + OVERHEAD) as u64;
        }
        x.next = x.pacer.next(t);
    }
    flows.iter().map(|x| (x.sent, x.bytes)).collect()
}

/// Receives until `stop`: a meter of what arrived, on the run's timeline from `origin`.
pub(super) fn receive(
    rx: UdpReceiver,
    clock: Clock,
    origin: Timestamp,
    bound: u64,
    mut meter: Meter,
    stop: &AtomicBool,
) -> Meter {
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        let Ok(meta) = rx.recv(&mut buf) else {
            continue;
        };
        if meta.len < 16 {
            continue;
        }
        let (at, _) = clock.arrival(meta.kernel_rx_realtime_ns);
        let seq = u64::from_be_bytes(buf[..8].try_into().expect("8 bytes"));
        let sent =
            Timestamp::from_nanos(u64::from_be_bytes(buf[8..16].try_into().expect("8 bytes")));
        let rel = |t: Timestamp| Timestamp::ZERO + t.saturating_since(origin);
        meter.record(rel(at), seq, bound, meta.len as u32 + OVERHEAD, rel(sent));
    }
    meter
}

pub(super) fn udp_report(f: &FlowDecl, meters: &mut [Meter], sent: u64, bytes: u64) -> FlowReport {
    let target = match f.kind {
        FlowKind::Udp { rate, .. } => match rate {
            RateShape::Constant(r) => r,
            RateShape::Square {
                high_bps, low_bps, ..
            } => high_bps.max(low_bps),
        },
        _ => 0,
    };
    FlowReport {
        name: f.name.clone(),
        kind: "udp".into(),
        src: f.from.clone(),
        target_bps: target,
        start_ns: f.start.as_nanos() as u64,
        duration_ns: f.duration.as_nanos() as u64,
        sent_packets: sent,
        sent_bytes: bytes,
        receivers: f
            .to
            .iter()
            .zip(meters.iter_mut())
            .map(|(m, meter)| ReceiverReport::from_meter(m.clone(), meter, sent, f.duration))
            .collect(),
    }
}
