//! A TCP bulk transfer by a real TCP implementation in virtual time: smoltcp's stack (RFC 9293
//! with RFC 5681 Reno or RFC 9438 CUBIC congestion control, window scaling, retransmission
//! timers) at each end, its IPv4 packets carried by the simulated network.
//!
//! smoltcp is sans-IO in the way the simulator needs: it reads no clock (every call takes an
//! `Instant`, which we give from virtual time, in µs) and its device is ours, a pair of packet
//! queues. The sender writes as fast as its send buffer takes data (or at most `rate` bit/s,
//! as iperf's `-b` limits a TCP test), the receiver reads everything at once, like an
//! application reading without pause.

use super::Flow;
use crate::net::Net;
use crate::packet::{Body, Dst, FlowId, Packet};
use metronome_link::meter::Meter;
use metronome_link::report::{FlowReport, ReceiverReport};
use metronome_link::topology::NodeId;
use metronome_time::Micros;
use metronome_time::Timestamp;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium, RxToken, TxToken};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, Ipv4Address};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

/// Which congestion control the sender runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TcpCongestion {
    /// RFC 5681.
    Reno,
    /// RFC 9438.
    #[default]
    Cubic,
}

/// How a TCP bulk transfer runs: its ends, congestion control, limits, buffers and timing.
#[derive(Clone, Debug)]
pub struct TcpFlowConfig {
    /// The flow's name in reports.
    pub name: String,
    /// The sending node (the connecting end).
    pub src: NodeId,
    /// The receiving node (the listening end).
    pub dst: NodeId,
    /// The sender's congestion control (CUBIC by default).
    pub congestion: TcpCongestion,
    /// Stop after this many bytes (`None`: send until `duration` is over).
    pub bytes: Option<u64>,
    /// At most this many bit/s from the application (`None`: as fast as TCP allows).
    pub app_rate_bps: Option<u64>,
    /// When the connection opens and the application starts writing, after the start of the
    /// run.
    pub start: Duration,
    /// How long the application writes, from `start`; then it closes the connection.
    pub duration: Duration,
    /// Send and receive buffers, bytes (the largest window: size them above the path's
    /// bandwidth-delay product).
    pub buffer_bytes: usize,
    /// The most segments in flight (ns-2's `window_`): the sender's buffer holds this many
    /// segments, and everything sent stays in it until acknowledged; the receiver's holds
    /// one more (`None`: `buffer_bytes` both).
    pub max_window: Option<u32>,
    /// Whether the receiver delays its ACKs (smoltcp's default: every second segment, or
    /// after 10 ms) or ACKs every segment at once (ns-2's `TCPSink`).
    pub delayed_ack: bool,
    /// The largest IP packet, bytes (segments fill it: MSS = mtu − 40).
    pub mtu: usize,
    /// Bin width of the receiver's per-interval figures.
    pub interval: Duration,
    /// Seeds both stacks' randomness (initial sequence numbers; the sink gets `seed ^ 1`) and
    /// picks the sender's local port.
    pub seed: u64,
}

/// IPv4 packets in and out of one stack, of at most `mtu` bytes.
struct Queues {
    rx: VecDeque<Rc<[u8]>>,
    tx: VecDeque<Vec<u8>>,
    mtu: usize,
}

/// The IP packet size TCP segments fill by default (Ethernet's).
pub const DEFAULT_MTU: usize = 1500;
const PORT: u16 = 5001;

impl Device for Queues {
    type RxToken<'a> = Rx;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _: Instant) -> Option<(Rx, Tx<'_>)> {
        let p = self.rx.pop_front()?;
        Some((Rx(p), Tx(&mut self.tx, self.mtu)))
    }

    fn transmit(&mut self, _: Instant) -> Option<Tx<'_>> {
        Some(Tx(&mut self.tx, self.mtu))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ip;
        c.max_transmission_unit = self.mtu;
        c
    }
}

struct Rx(Rc<[u8]>);

impl RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

struct Tx<'a>(&'a mut VecDeque<Vec<u8>>, usize);

impl TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = vec![0u8; len.min(self.1)];
        let r = f(&mut buf);
        self.0.push_back(buf);
        r
    }
}

/// One end: a stack with one socket.
struct End {
    iface: Interface,
    dev: Queues,
    sockets: SocketSet<'static>,
    socket: SocketHandle,
}

fn micros(t: Timestamp) -> Instant {
    Instant::from_micros((t.as_nanos() / 1000) as i64)
}

impl End {
    /// A stack at `addr` whose socket has a receive buffer of `rx` bytes and a send buffer
    /// of `tx`.
    fn new(
        addr: Ipv4Address,
        (rx, tx): (usize, usize),
        mtu: usize,
        seed: u64,
        now: Timestamp,
    ) -> Self {
        let mut dev = Queues {
            rx: VecDeque::new(),
            tx: VecDeque::new(),
            mtu,
        };
        let mut cfg = Config::new(HardwareAddress::Ip);
        cfg.random_seed = seed;
        let mut iface = Interface::new(cfg, &mut dev, micros(now));
        iface.update_ip_addrs(|a| {
            // One /24 for both ends: the peer is on-link, no route needed.
            let _ = a.push(IpCidr::new(IpAddress::Ipv4(addr), 24));
        });
        let socket = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0u8; rx]),
            tcp::SocketBuffer::new(vec![0u8; tx]),
        );
        let mut sockets = SocketSet::new(Vec::new());
        let socket = sockets.add(socket);
        End {
            iface,
            dev,
            sockets,
            socket,
        }
    }

    fn tcp(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(self.socket)
    }

    fn poll(&mut self, now: Timestamp) {
        self.iface
            .poll(micros(now), &mut self.dev, &mut self.sockets);
    }

    /// When smoltcp wants to be polled again, never at or before `now` (a timer due now was
    /// just served; asking again at once would spin in virtual time).
    fn next_poll(&mut self, now: Timestamp) -> Option<Timestamp> {
        let at = self.iface.poll_at(micros(now), &self.sockets)?;
        let ns = Timestamp::from_nanos(at.total_micros().max(0) as u64 * 1000);
        Some(ns.max(now + Duration::from_micros(1)))
    }
}

/// A TCP bulk transfer between two smoltcp stacks (see the module docs): a writing
/// application at the source, a reading one at the destination, measured at the receiver.
pub struct TcpFlow {
    cfg: TcpFlowConfig,
    id: FlowId,
    sender: Option<End>,
    sink: Option<End>,
    /// Bytes the application has written, and the receiver has read.
    written: u64,
    read: u64,
    segments_sent: u64,
    bytes_on_wire: u64,
    /// Packets that reached the sink (data segments and the handshake's).
    sink_packets: u64,
    meter: Meter,
    closed: bool,
    first_read: Option<Timestamp>,
    last_read: Timestamp,
    /// Each end's pending wake-up (`MAX`: none), so that a wake-up is asked for once.
    wakes: [Timestamp; 2],
}

const SENDER_ADDR: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
const SINK_ADDR: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);

impl TcpFlow {
    /// The transfer of `cfg`, not yet bound to a network; the stacks are made when their
    /// endpoints are first woken.
    pub fn new(cfg: TcpFlowConfig) -> Self {
        TcpFlow {
            meter: Meter::new(cfg.interval, false),
            cfg,
            id: FlowId(u32::MAX),
            sender: None,
            sink: None,
            written: 0,
            read: 0,
            segments_sent: 0,
            bytes_on_wire: 0,
            sink_packets: 0,
            closed: false,
            first_read: None,
            last_read: Timestamp::ZERO,
            wakes: [Timestamp::MAX; 2],
        }
    }

    /// The sender's buffer, bytes: `buffer_bytes`, or `max_window` whole segments. smoltcp
    /// keeps what it sent there until it is acknowledged, so this caps what is in flight
    /// at the sender, as ns-2's `window_` does.
    fn sender_buffer(&self) -> usize {
        self.cfg
            .max_window
            .map_or(self.cfg.buffer_bytes, |w| w as usize * self.mss())
    }

    /// The receiver's buffer, bytes: `buffer_bytes`, or with `max_window` one segment more
    /// (smoltcp ACKs a segment before the application reads it). Its advertised window
    /// bounds the sender's congestion window, which would otherwise grow far past the cap
    /// while the send buffer holds the sender back, and CUBIC would then take its `W_max`
    /// from that inflated window at a loss.
    fn sink_buffer(&self) -> usize {
        self.cfg
            .max_window
            .map_or(self.cfg.buffer_bytes, |w| (w as usize + 1) * self.mss())
    }

    /// The segment size, bytes: the IP packet less 40 bytes of IPv4 and TCP headers.
    fn mss(&self) -> usize {
        self.cfg.mtu.saturating_sub(40).max(1)
    }

    fn start_time(&self) -> Timestamp {
        Timestamp::ZERO + self.cfg.start
    }

    fn end_time(&self) -> Timestamp {
        self.start_time() + self.cfg.duration
    }

    /// What the application may have written by `now`.
    fn allowed(&self, now: Timestamp) -> u64 {
        let by_rate = self.cfg.app_rate_bps.map_or(u64::MAX, |r| {
            let ns = now.saturating_since(self.start_time()).as_nanos();
            (ns * r as u128 / 8_000_000_000).min(u64::MAX as u128) as u64
        });
        by_rate.min(self.cfg.bytes.unwrap_or(u64::MAX))
    }

    /// The sending application: writes what it may, closes at the end.
    fn write(&mut self, now: Timestamp) {
        let allowed = self.allowed(now);
        let ending = now >= self.end_time() || self.cfg.bytes.is_some_and(|b| self.written >= b);
        let Some(end) = self.sender.as_mut() else {
            return;
        };
        let sock = end.tcp();
        if ending {
            if !self.closed {
                sock.close();
                self.closed = true;
            }
            return;
        }
        static ZEROS: [u8; 65536] = [0; 65536];
        while sock.can_send() && self.written < allowed {
            let n = (allowed - self.written).min(ZEROS.len() as u64) as usize;
            match sock.send_slice(&ZEROS[..n]) {
                Ok(0) | Err(_) => break,
                Ok(k) => self.written += k as u64,
            }
        }
    }

    /// The receiving application: reads everything there is.
    fn read(&mut self, now: Timestamp) {
        let Some(end) = self.sink.as_mut() else {
            return;
        };
        let sock = end.tcp();
        let mut got = 0u64;
        while sock.can_recv() {
            match sock.recv(|b| (b.len(), b.len())) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n as u64,
            }
        }
        if got > 0 {
            self.read += got;
            self.first_read.get_or_insert(now);
            self.last_read = now;
            self.meter.account_bytes(now, got);
        }
    }

    /// Polls end `ep` (0 sender, 1 sink), lets its application act, sends what it wrote, and
    /// asks to be woken when its timers are due.
    fn step(&mut self, now: Timestamp, ep: u32, net: &mut Net) {
        for _ in 0..2 {
            if ep == 0 {
                self.write(now);
            }
            let end = if ep == 0 {
                &mut self.sender
            } else {
                &mut self.sink
            };
            let Some(end) = end.as_mut() else { return };
            end.poll(now);
            if ep == 1 {
                self.read(now);
            }
        }
        let (from, to) = if ep == 0 {
            (self.cfg.src, self.cfg.dst)
        } else {
            (self.cfg.dst, self.cfg.src)
        };
        let end = if ep == 0 {
            &mut self.sender
        } else {
            &mut self.sink
        };
        let Some(end) = end.as_mut() else { return };
        while let Some(p) = end.dev.tx.pop_front() {
            if ep == 0 {
                self.segments_sent += 1;
                self.bytes_on_wire += p.len() as u64;
            }
            let pkt = Packet {
                id: net.packet_id(),
                flow: self.id,
                src: from,
                dst: Dst::Node(to),
                size: p.len() as u32,
                sent_at: now,
                body: Body::Ip(Rc::from(p)),
            };
            net.send(now, from, pkt);
        }
        let mut next = end.next_poll(now);
        if ep == 0 && !self.closed {
            // The application's next write: when the rate allows more, or at the end.
            let more = self.cfg.app_rate_bps.map(|r| {
                let step = Duration::from_nanos(self.cfg.mtu as u64 * 8 * 1_000_000_000 / r.max(1));
                now + step
            });
            for t in [more, Some(self.end_time())].into_iter().flatten() {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        if let Some(t) = next {
            let w = &mut self.wakes[ep as usize];
            if *w <= now || t < *w {
                *w = t;
                net.wake(t, self.id, ep);
            }
        }
    }
}

impl Flow for TcpFlow {
    fn bind(&mut self, id: FlowId, net: &mut Net) {
        self.id = id;
        net.listen(id, self.cfg.src, 0);
        net.listen(id, self.cfg.dst, 1);
    }

    fn start(&mut self, _now: Timestamp, net: &mut Net) {
        net.wake(self.start_time(), self.id, 1);
        net.wake(self.start_time(), self.id, 0);
    }

    fn on_wake(&mut self, now: Timestamp, ep: u32, net: &mut Net) {
        let Some(w) = self.wakes.get_mut(ep as usize) else {
            return;
        };
        let started = if ep == 0 {
            self.sender.is_some()
        } else {
            self.sink.is_some()
        };
        if started && *w > now {
            return; // superseded by an earlier wake-up, which already ran
        }
        *w = Timestamp::MAX;
        if ep == 1 && self.sink.is_none() {
            let mut sink = End::new(
                SINK_ADDR,
                (self.sink_buffer(), self.cfg.buffer_bytes),
                self.cfg.mtu,
                self.cfg.seed ^ 1,
                now,
            );
            // A fresh socket always listens.
            let _ = sink.tcp().listen(PORT);
            if !self.cfg.delayed_ack {
                sink.tcp().set_ack_delay(None);
            }
            self.sink = Some(sink);
        }
        if ep == 0 && self.sender.is_none() {
            let mut s = End::new(
                SENDER_ADDR,
                (self.cfg.buffer_bytes, self.sender_buffer()),
                self.cfg.mtu,
                self.cfg.seed,
                now,
            );
            let sock = s.sockets.get_mut::<tcp::Socket>(s.socket);
            sock.set_congestion_control(match self.cfg.congestion {
                TcpCongestion::Reno => tcp::CongestionControl::Reno,
                TcpCongestion::Cubic => tcp::CongestionControl::Cubic,
            });
            let remote = (IpAddress::Ipv4(SINK_ADDR), PORT);
            let local = 49152 + (self.cfg.seed % 16384) as u16;
            // Connecting an unused socket to an on-link address cannot fail.
            let _ = sock.connect(s.iface.context(), remote, local);
            self.sender = Some(s);
        }
        self.step(now, ep, net);
    }

    fn on_packet(&mut self, now: Timestamp, ep: u32, pkt: Packet, net: &mut Net) {
        let Body::Ip(data) = pkt.body else { return };
        if ep == 1 {
            self.sink_packets += 1;
        }
        let end = if ep == 0 {
            &mut self.sender
        } else {
            &mut self.sink
        };
        let Some(end) = end.as_mut() else { return };
        // Bounded: at most what the network delivers between two polls, which is now.
        end.dev.rx.push_back(data);
        self.step(now, ep, net);
    }

    fn done(&self) -> bool {
        self.closed
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }

    fn report(&mut self, _end: Timestamp, net: &Net) -> FlowReport {
        let active = self
            .last_read
            .saturating_since(self.first_read.unwrap_or(self.last_read));
        let mut rx = ReceiverReport::from_meter(
            net.topology().node_name(self.cfg.dst).to_string(),
            &mut self.meter,
            0,
            active,
        );
        // Bytes the application read (goodput), packets that reached its stack.
        rx.bytes = self.read;
        rx.packets = self.sink_packets;
        rx.throughput_bps = if active.is_zero() {
            0.0
        } else {
            self.read as f64 * 8.0 / active.as_secs_f64()
        };
        FlowReport {
            repair: None,
            name: self.cfg.name.clone(),
            kind: "tcp".into(),
            src: net.topology().node_name(self.cfg.src).to_string(),
            target_bps: self.cfg.app_rate_bps.unwrap_or(0),
            start_us: Micros::from(self.cfg.start),
            duration_us: Micros::from(self.cfg.duration),
            sent_packets: self.segments_sent,
            sent_bytes: self.bytes_on_wire,
            receivers: vec![rx],
            rate_control: None,
        }
    }
}
