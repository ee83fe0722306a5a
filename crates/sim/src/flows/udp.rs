//! UDP at a constant bit rate or in a square wave, as iperf sends it, and iperf's measuring
//! receiver: loss from the datagrams' numbers, RFC 3550 jitter of the transit time, delay.
//!
//! Rates count UDP payload bits, as iperf's `-b` does; each datagram is `payload_bytes + 28`
//! bytes on the wire (IPv4 and UDP headers). Datagrams leave evenly spaced (iperf 2's pacing;
//! the spacing is exact to the nanosecond over the run, not rounded per packet).

use super::{destination, Flow};
use crate::net::Net;
use crate::packet::{Body, Dst, FlowId, Packet};
use metronome_link::meter::Meter;
use metronome_link::report::{FlowReport, ReceiverReport};
use metronome_link::topology::NodeId;
use metronome_link::traffic::RatePattern;
use metronome_link::traffic::UdpSchedule;
use metronome_time::Micros;
use metronome_time::Timestamp;
use metronome_time::IPV4_UDP_OVERHEAD;
use std::time::Duration;

/// How a UDP flow sends: from where to whom, how big, how fast, and when.
#[derive(Clone, Debug)]
pub struct UdpFlowConfig {
    /// The flow's name in reports.
    pub name: String,
    /// The sending node.
    pub src: NodeId,
    /// The receiving nodes: one is unicast, more than one a multicast tree from `src`.
    pub receivers: Vec<NodeId>,
    /// UDP payload per datagram (iperf's `-l`; 1470 by default in iperf 2).
    pub payload_bytes: u32,
    /// Payload bit rate over time: constant or a square wave.
    pub rate: RatePattern,
    /// When the first datagram leaves, after the start of the run.
    pub start: Duration,
    /// How long the flow sends, from `start`.
    pub duration: Duration,
    /// Bin width of the per-interval figures (zero: none).
    pub interval: Duration,
    /// Keep full delay and inter-arrival distributions per receiver.
    pub histograms: bool,
}

/// An iperf-like UDP flow: a sender pacing numbered datagrams by its [`UdpFlowConfig`] and a
/// measuring receiver at each receiving node.
pub struct UdpFlow {
    cfg: UdpFlowConfig,
    id: FlowId,
    dst: Dst,
    sent: u64,
    sent_bytes: u64,
    /// Time of the next datagram.
    next: Timestamp,
    schedule: UdpSchedule,
    meters: Vec<Meter>,
    stopped: bool,
}

impl UdpFlow {
    /// The flow of `cfg`, not yet bound to a network ([`Sim::add_flow`](crate::Sim::add_flow)
    /// binds it).
    pub fn new(cfg: UdpFlowConfig) -> Self {
        let meters = cfg
            .receivers
            .iter()
            .map(|_| Meter::new(cfg.interval, cfg.histograms))
            .collect();
        UdpFlow {
            id: FlowId(u32::MAX),
            dst: Dst::Node(cfg.src),
            next: Timestamp::ZERO + cfg.start,
            schedule: UdpSchedule::new(cfg.payload_bytes, cfg.rate),
            cfg,
            sent: 0,
            sent_bytes: 0,
            meters,
            stopped: false,
        }
    }

    fn end(&self) -> Timestamp {
        Timestamp::ZERO + self.cfg.start + self.cfg.duration
    }

    fn start_time(&self) -> Timestamp {
        Timestamp::ZERO + self.cfg.start
    }

    /// The next datagram after one due at `now` by the schedule, or the end of the flow.
    fn schedule_next(&mut self, now: Timestamp, net: &mut Net) {
        let since = now.saturating_since(self.start_time());
        match self.schedule.next_after(since) {
            Some(t) => {
                self.next = self.start_time() + t;
                net.wake(self.next, self.id, 0);
            }
            None => self.stopped = true,
        }
    }
}

impl Flow for UdpFlow {
    fn bind(&mut self, id: FlowId, net: &mut Net) {
        self.id = id;
        self.dst = destination(net, id, self.cfg.src, &self.cfg.receivers);
    }

    fn start(&mut self, _now: Timestamp, net: &mut Net) {
        net.wake(self.next, self.id, 0);
    }

    fn on_wake(&mut self, now: Timestamp, ep: u32, net: &mut Net) {
        if ep != 0 || self.stopped {
            return;
        }
        if now >= self.end() {
            self.stopped = true;
            return;
        }
        if self
            .schedule
            .rate()
            .rate_at(now.saturating_since(self.start_time()))
            == 0
        {
            // Nothing to send: wait for the pattern's next period, or stop.
            self.schedule_next(now, net);
            return;
        }
        let size = self.cfg.payload_bytes + IPV4_UDP_OVERHEAD as u32;
        let pkt = Packet {
            id: net.packet_id(),
            flow: self.id,
            src: self.cfg.src,
            dst: self.dst,
            size,
            sent_at: now,
            body: Body::Probe { seq: self.sent },
        };
        self.sent += 1;
        self.sent_bytes += size as u64;
        net.send(now, self.cfg.src, pkt);
        self.schedule_next(now, net);
    }

    fn on_packet(&mut self, now: Timestamp, ep: u32, pkt: Packet, _net: &mut Net) {
        let Some(meter) = self.meters.get_mut((ep as usize).wrapping_sub(1)) else {
            return;
        };
        if let Body::Probe { seq } = pkt.body {
            meter.record(now, seq, self.sent, pkt.size, pkt.sent_at);
        }
    }

    fn done(&self) -> bool {
        self.stopped
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }

    fn report(&mut self, _end: Timestamp, net: &Net) -> FlowReport {
        let active = self.cfg.duration;
        let receivers = self
            .cfg
            .receivers
            .iter()
            .zip(&mut self.meters)
            .map(|(&n, m)| {
                ReceiverReport::from_meter(
                    net.topology().node_name(n).to_string(),
                    m,
                    self.sent,
                    active,
                )
            })
            .collect();
        FlowReport {
            repair: None,
            name: self.cfg.name.clone(),
            kind: "udp".into(),
            src: net.topology().node_name(self.cfg.src).to_string(),
            target_bps: self.cfg.rate.peak_bps(),
            start_us: Micros::from(self.cfg.start),
            duration_us: Micros::from(active),
            sent_packets: self.sent,
            sent_bytes: self.sent_bytes,
            receivers,
            rate_control: None,
        }
    }
}
