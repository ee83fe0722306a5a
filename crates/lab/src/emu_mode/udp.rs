//! UDP flows on real sockets: one paced sender thread for every flow (each datagram at its
//! time, from a socket in its host), a receiver per receiving host that measures with the
//! kernel's receive timestamps, as the simulator's iperf-like flow measures.

use metronome_config::scenario::{FlowDecl, FlowKind};
use metronome_link::meter::Meter;
use metronome_link::report::{FlowReport, ReceiverReport};
use metronome_link::traffic::UdpSchedule;
use metronome_rt::clock::Clock;
use metronome_rt::udp::UdpReceiver;
use metronome_rt::wait::{WaitMode, Waiter};
use metronome_time::Micros;
use metronome_time::Timestamp;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// IPv4 and UDP headers.
const OVERHEAD: u32 = metronome_time::IPV4_UDP_OVERHEAD as u32;

/// One flow's sender state.
pub(super) struct Sending<'a> {
    pub f: &'a FlowDecl,
    pub sock: UdpSocket,
    pub to: SocketAddr,
    /// UDP payload per datagram (room for the number and the send time: at least 16).
    pub payload: u32,
    /// When its datagrams leave: the simulator's own schedule.
    pub schedule: UdpSchedule,
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
        if x.schedule.rate().rate_at(t) == 0 {
            x.next = x.schedule.next_after(t);
            continue;
        }
        waiter.wait_until(clock.mono_ns_from_timestamp(origin + x.f.start + t));
        let now = clock.now();
        let len = x.payload as usize;
        buf[..8].copy_from_slice(&x.sent.to_be_bytes());
        buf[8..16].copy_from_slice(&now.as_nanos().to_be_bytes());
        if x.sock.send_to(&buf[..len], x.to).is_ok() {
            x.sent += 1;
            x.bytes += (x.payload + OVERHEAD) as u64;
        }
        x.next = x.schedule.next_after(t);
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
        FlowKind::Udp { rate, .. } => crate::model::rate_pattern(rate).peak_bps(),
        _ => 0,
    };
    FlowReport {
        repair: None,
        name: f.name.clone(),
        kind: "udp".into(),
        src: f.from.clone(),
        target_bps: target,
        start_us: Micros::from(f.start),
        duration_us: Micros::from(f.duration),
        sent_packets: sent,
        sent_bytes: bytes,
        receivers: f
            .to
            .iter()
            .zip(meters.iter_mut())
            .map(|(m, meter)| ReceiverReport::from_meter(m.clone(), meter, sent, f.duration))
            .collect(),
        rate_control: None,
    }
}
