//! UDP relay mode: one direction of one emulated link between two real sockets.
//!
//! ```text
//! sender ──UDP──► relay (listen) ──[Link model: rate, queue, delay, jitter, loss]──► destination
//! ```
//!
//! Each datagram enters the model at its kernel receive time (SO_TIMESTAMPNS) with its size on
//! the wire (payload plus 28 bytes of IPv4 and UDP headers, as the simulator counts it); the
//! relay sends it on when the model delivers it, waking for that instant with a precise sleep
//! then a spin. Before it sends anything due at `t`, it reads every datagram already queued in
//! its socket, so that the model sees them in time order. How late each datagram left against
//! the model's time is measured: the emulator's own error.

use metronome_netsim::{Link, LinkConfig, SendOutcome};
use metronome_rt::clock::Clock;
use metronome_rt::udp::{is_timeout, SocketOptions, UdpError, UdpReceiver, UdpSender};
use metronome_rt::url::RtpUrl;
use metronome_rt::wait::{WaitMode, Waiter};
use metronome_time::{Distribution, Timestamp};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// IPv4 and UDP headers: what a datagram takes on the wire beyond its payload.
pub const UDP_IP_OVERHEAD: usize = 28;

/// Where the relay listens, where it sends, and the link between.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    pub listen: SocketAddr,
    pub forward: SocketAddr,
    pub link: LinkConfig,
    pub seed: u64,
    /// Datagrams held at most (the model's own limits come first; this bounds an
    /// unlimited model's memory). Beyond it, datagrams are dropped and counted.
    pub max_in_flight: usize,
    /// Keep every datagram's (receive time, size, first 16 bytes): the model's input, to
    /// replay it in virtual time.
    pub record_inputs: bool,
}

impl RelayConfig {
    pub fn new(listen: SocketAddr, forward: SocketAddr, link: LinkConfig) -> Self {
        RelayConfig {
            listen,
            forward,
            link,
            seed: 1,
            max_in_flight: 100_000,
            record_inputs: false,
        }
    }
}

/// One datagram as it entered the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Input {
    pub at: Timestamp,
    pub len: usize,
    pub head: [u8; 16],
}

/// What the relay did.
#[derive(Clone, Debug, Default)]
pub struct RelayStats {
    pub received: u64,
    pub forwarded: u64,
    /// Dropped by the model's loss.
    pub lost: u64,
    /// Dropped by the model's queue (or netem's limit).
    pub dropped_queue: u64,
    /// Dropped because `max_in_flight` datagrams were held.
    pub overflow: u64,
    /// Arrived longer than the relay's buffer (cut: not forwarded).
    pub truncated: u64,
    /// Datagrams the relay's socket dropped for lack of buffer (SO_RXQ_OVFL).
    pub socket_drops: u64,
    /// Sends that failed.
    pub send_errors: u64,
    /// How late each datagram left against the model's delivery time, ns.
    pub lateness: Distribution,
    pub inputs: Vec<Input>,
}

/// A relay, bound and ready to [`run`](Relay::run).
pub struct Relay {
    cfg: RelayConfig,
    rx: UdpReceiver,
    tx: UdpSender,
    link: Link<Vec<u8>>,
    clock: Clock,
    waiter: Waiter,
    buf: Vec<u8>,
    stats: RelayStats,
}

/// The largest datagram relayed (IPv4's maximum UDP payload).
const MAX_DATAGRAM: usize = 65_507;
/// Below this much time to the next delivery, the relay stops watching its socket and waits
/// precisely (sleep then spin): datagrams that come meanwhile keep their kernel timestamps.
const PRECISE_WINDOW: Duration = Duration::from_millis(2);

impl Relay {
    pub fn open(cfg: RelayConfig) -> Result<Relay, UdpError> {
        let o = SocketOptions {
            buffer_bytes: 8 << 20,
            read_timeout: None,
        };
        let rx = UdpReceiver::open(&RtpUrl::unicast(cfg.listen), &o)?;
        rx.socket()
            .set_nonblocking(true)
            .map_err(|source| UdpError::Bind {
                addr: cfg.listen,
                source,
            })?;
        let tx = UdpSender::open(&RtpUrl::unicast(cfg.forward), &o)?;
        Ok(Relay {
            link: Link::new(cfg.link.clone(), cfg.seed),
            cfg,
            rx,
            tx,
            clock: Clock::new(),
            waiter: Waiter::new(WaitMode::SleepSpin),
            buf: vec![0u8; MAX_DATAGRAM + 1],
            stats: RelayStats::default(),
        })
    }

    /// Where senders send to.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.rx.local_addr()
    }

    /// Relays until `stop` is set or `duration` has passed, then lets what is in flight
    /// arrive (for at most one more second), and says what it did.
    pub fn run(mut self, stop: &AtomicBool, duration: Option<Duration>) -> RelayStats {
        let mut end = duration.map(|d| self.clock.now() + d);
        loop {
            let now = self.clock.now();
            if stop.load(Ordering::Relaxed) && end.is_none_or(|e| e > now) {
                end = Some(now);
            }
            let over = end.is_some_and(|e| now >= e);
            // After the end, what is in flight still arrives, for at most a second.
            let drained = self.link.in_flight() == 0;
            if over && (drained || end.is_some_and(|e| now >= e + Duration::from_secs(1))) {
                break;
            }
            if !over {
                self.drain();
            }
            self.deliver();
            self.wait(end);
        }
        self.stats
    }

    /// Reads every datagram the socket holds into the model.
    fn drain(&mut self) {
        loop {
            let meta = match self.rx.recv(&mut self.buf) {
                Ok(m) => m,
                Err(e) if is_timeout(&e) => return,
                Err(_) => return, // an ICMP error from an earlier send; nothing to read
            };
            self.stats.received += 1;
            if let Some(d) = meta.dropped_total {
                self.stats.socket_drops = d as u64;
            }
            if meta.truncated || meta.len > MAX_DATAGRAM {
                self.stats.truncated += 1;
                continue;
            }
            if self.link.in_flight() >= self.cfg.max_in_flight {
                self.stats.overflow += 1;
                continue;
            }
            let (at, _) = self.clock.arrival(meta.kernel_rx_realtime_ns);
            let data = self.buf[..meta.len].to_vec();
            if self.cfg.record_inputs {
                let mut head = [0u8; 16];
                let n = meta.len.min(16);
                head[..n].copy_from_slice(&data[..n]);
                self.stats.inputs.push(Input {
                    at,
                    len: meta.len,
                    head,
                });
            }
            match self.link.send(at, meta.len + UDP_IP_OVERHEAD, data) {
                SendOutcome::Queued => {}
                SendOutcome::Lost => self.stats.lost += 1,
                SendOutcome::DroppedQueueFull => self.stats.dropped_queue += 1,
            }
        }
    }

    /// Sends every datagram the model has delivered by now.
    fn deliver(&mut self) {
        let now = self.clock.now();
        while let Some((at, pkt)) = self.link.poll_deliver(now) {
            match self.tx.send_to(&pkt, self.cfg.forward) {
                Ok(_) => self.stats.forwarded += 1,
                Err(_) => self.stats.send_errors += 1,
            }
            let sent = self.clock.now();
            self.stats
                .lateness
                .record(sent.saturating_since(at).as_nanos() as u64);
        }
    }

    /// Until the next delivery: watching the socket while it is far, precisely when near.
    fn wait(&mut self, end: Option<Timestamp>) {
        let now = self.clock.now();
        let next = self.link.poll_timeout();
        let limit = end
            .map_or(Duration::from_millis(100), |e| e.saturating_since(now))
            .clamp(Duration::from_micros(100), Duration::from_millis(100));
        match next {
            Some(t) if t.saturating_since(now) < PRECISE_WINDOW => {
                self.drain();
                self.waiter.wait_until(self.clock.mono_ns_from_timestamp(t));
            }
            Some(t) => {
                let far = t.saturating_since(now) - PRECISE_WINDOW / 2;
                wait_readable_ns(self.rx.socket().as_raw_fd(), far.min(limit));
            }
            None => wait_readable_ns(self.rx.socket().as_raw_fd(), limit),
        }
    }
}

/// `ppoll(2)` on one descriptor with a nanosecond timeout (poll's is in milliseconds,
/// rounded up, which would oversleep a delivery).
fn wait_readable_ns(fd: i32, timeout: Duration) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd and a valid timespec, both live for the call; no signal mask.
    unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
}
