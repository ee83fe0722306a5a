//! Producers: ordinary threads that run each stream's [`RtpSource`] (its packetizer is part of
//! it) and fill the stream's ring ahead of its release times. A few threads serve all streams, round robin, so that a
//! thousand streams do not need a thousand threads (nor a thousand locked stacks).

use super::rate_knob::RateChange;
use super::stream::StreamRt;
use metronome_rt::clock::Clock;
use metronome_rt::ring::Slot;
use metronome_rt::sync::lock;
use metronome_session::sender::{RtpSource, SourceError};
use metronome_time::Timestamp;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Packets one stream may add per turn before the next stream gets its turn.
const PACKETS_PER_TURN: usize = 64;
/// How far ahead of the sender's clock a live source is produced. A camera and its encoder
/// cannot run seconds ahead of real time, and a rate change (the rate knob) takes effect no
/// later than this plus a GOP; a file is read ahead by up to its ring.
const LIVE_AHEAD: Duration = Duration::from_millis(200);

/// A stream handed to a producer thread.
pub struct Production {
    pub rt: Arc<StreamRt>,
    pub source: Box<dyn RtpSource>,
    /// The ring was full at the end of the last turn (an overrun is counted once per episode:
    /// the producer was ahead and had to wait for the pacer).
    full: bool,
    /// The source is live: produced at most [`LIVE_AHEAD`] before its packets are due.
    live: bool,
    /// When the last packet made is due.
    last_due: Timestamp,
    /// For a source whose packets leave at the controller's rate (`leaves_at_rate`): the
    /// packets made ahead of their due time, (due, count), oldest first.
    ahead: Option<VecDeque<(Timestamp, usize)>>,
}

impl Production {
    pub fn new(rt: Arc<StreamRt>, source: Box<dyn RtpSource>) -> Self {
        Production {
            live: source.is_live(),
            ahead: source.leaves_at_rate().then(VecDeque::new),
            rt,
            source,
            full: false,
            last_due: Timestamp::ZERO,
        }
    }
}

/// A fixed set of producer threads.
pub struct ProducerPool {
    senders: Vec<Sender<Production>>,
    threads: Vec<JoinHandle<()>>,
    next: std::sync::atomic::AtomicUsize,
    /// The CPU time the threads have used, ns, all together (what the encoders cost, measured).
    cpu_ns: Arc<AtomicU64>,
}

impl ProducerPool {
    /// Starts `threads` producers, restricted to `cpus` when given.
    pub fn start(
        threads: usize,
        cpus: Option<Vec<usize>>,
        clock: Arc<Clock>,
    ) -> std::io::Result<ProducerPool> {
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        let cpu_ns = Arc::new(AtomicU64::new(0));
        for i in 0..threads.max(1) {
            let (tx, rx) = channel();
            let cpus = cpus.clone();
            let clock = clock.clone();
            let cpu = cpu_ns.clone();
            let h = std::thread::Builder::new()
                .name(format!("producer-{i}"))
                .spawn(move || {
                    if let Some(cpus) = cpus {
                        let _ = metronome_rt::thread::set_affinity(0, &cpus);
                    }
                    run(rx, &clock, &cpu)
                })?;
            senders.push(tx);
            handles.push(h);
        }
        Ok(ProducerPool {
            senders,
            threads: handles,
            next: Default::default(),
            cpu_ns,
        })
    }

    /// The CPU time the producer threads have used so far, ns, all together.
    pub fn cpu_ns(&self) -> u64 {
        self.cpu_ns.load(Ordering::Relaxed)
    }

    /// Hands a stream to the next producer thread.
    pub fn add(&self, p: Production) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.senders.len();
        if let Err(e) = self.senders[i].send(p) {
            // The thread is gone (it never exits before the pool is dropped): end the stream.
            e.0.rt.producer_done.store(true, Ordering::Release);
        }
    }

    /// Stops the threads once every stream they serve has stopped.
    pub fn shutdown(self) {
        drop(self.senders);
        for h in self.threads {
            let _ = h.join();
        }
    }
}

fn run(rx: Receiver<Production>, clock: &Clock, cpu_ns: &AtomicU64) {
    let mut work: Vec<Production> = Vec::new();
    let mut open = true;
    let mut cpu_seen = metronome_rt::clock::thread_cpu_ns();
    loop {
        let cpu = metronome_rt::clock::thread_cpu_ns();
        cpu_ns.fetch_add(cpu.saturating_sub(cpu_seen), Ordering::Relaxed);
        cpu_seen = cpu;
        // With nothing to produce, wait for a stream rather than look every few ms (an idle
        // server's producers would wake 500 times a second).
        if work.is_empty() && open {
            match rx.recv() {
                Ok(p) => work.push(p),
                Err(_) => open = false,
            }
        }
        loop {
            match rx.try_recv() {
                Ok(p) => work.push(p),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        let mut progress = false;
        work.retain_mut(|p| {
            if p.rt.stop.load(Ordering::Relaxed) || p.rt.media_stop.load(Ordering::Relaxed) {
                p.rt.producer_done.store(true, Ordering::Release);
                return false;
            }
            match fill(p, clock) {
                Ok(Fill::More) => {
                    progress = true;
                    true
                }
                Ok(Fill::Full | Fill::Ahead) => true,
                Ok(Fill::Ended) => {
                    p.rt.producer_done.store(true, Ordering::Release);
                    false
                }
                Err(e) => {
                    *lock(&p.rt.producer_error) = Some(e.to_string());
                    p.rt.producer_done.store(true, Ordering::Release);
                    false
                }
            }
        });
        if !open && work.is_empty() {
            return;
        }
        if !progress {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

enum Fill {
    /// The turn ended with room left in the ring.
    More,
    /// The ring is full: the producer is far enough ahead.
    Full,
    /// A live source is as far ahead of the clock as a live source can be.
    Ahead,
    Ended,
}

/// One turn of one stream: source → ring, at most [`PACKETS_PER_TURN`] packets.
fn fill(p: &mut Production, clock: &Clock) -> Result<Fill, SourceError> {
    // The rate knob: the source switches at its next switching point (a GOP).
    if let Some(change) = p.rt.rate.take_change() {
        let queued = p.queued_due(clock.now());
        p.source.note_queue(queued);
        let taken = match change {
            RateChange::Asked(rate) => p.source.set_rate(rate),
            RateChange::Followed(rate) => p.source.follow_rate(rate),
        };
        if taken.is_err() {
            p.rt.counters.rate_refusals.fetch_add(1, Ordering::Relaxed);
        }
    }
    // The controller's reports: a source that averages every report's rate hears them.
    if let Some(rate) = p.rt.rate.take_report() {
        let queued = p.queued_due(clock.now());
        p.source.note_queue(queued);
        p.source.rate_reported(rate);
    }
    // Hysteresis: after finding the ring full, wait until a quarter of it is free, so that the
    // producer works in batches instead of waking for every slot the pacer frees.
    if p.full && p.rt.ring.free_slots() < p.rt.ring.capacity().div_ceil(4) {
        return Ok(Fill::Full);
    }
    for _ in 0..PACKETS_PER_TURN {
        // How far ahead it is: its next packet's due time where the source knows it.
        if p.live && p.source.next_due().unwrap_or(p.last_due) > clock.now() + LIVE_AHEAD {
            return Ok(Fill::Ahead);
        }
        let Some(slot) = p.rt.ring.take_free() else {
            if !p.full {
                p.full = true;
                p.rt.counters.overruns.fetch_add(1, Ordering::Relaxed);
            }
            return Ok(Fill::Full);
        };
        p.full = false;
        let made = make_packet(&mut *p.source, &p.rt, clock, slot)?;
        match made {
            Made::Published(due) => {
                p.last_due = due;
                p.note_made(due);
            }
            Made::Ended => return Ok(Fill::Ended),
        }
    }
    Ok(Fill::More)
}

impl Production {
    /// A packet due at `due` was made (tracked only for a source that leaves at the rate).
    fn note_made(&mut self, due: Timestamp) {
        let Some(ahead) = self.ahead.as_mut() else {
            return;
        };
        match ahead.back_mut() {
            Some((d, n)) if *d == due => *n += 1,
            _ => ahead.push_back((due, 1)),
        }
        // A packet is made at most LIVE_AHEAD before it is due: those due a second before
        // this one are due by now (a bound, whatever the rate changes).
        while ahead
            .front()
            .is_some_and(|&(d, _)| d + Duration::from_secs(1) < due)
        {
            ahead.pop_front();
        }
    }

    /// The sender's queue at `now` for a source that leaves at the controller's rate:
    /// packets made and due that have not left. The ring holds them (the session only the
    /// one it sends next), less those made ahead of their due time.
    fn queued_due(&mut self, now: Timestamp) -> usize {
        let Some(ahead) = self.ahead.as_mut() else {
            return 0;
        };
        while ahead.front().is_some_and(|&(due, _)| due <= now) {
            ahead.pop_front();
        }
        let made_ahead: usize = ahead.iter().map(|&(_, n)| n).sum();
        let held = self.rt.ring.capacity() - self.rt.ring.free_slots();
        held.saturating_sub(made_ahead)
    }
}

/// What [`make_packet`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Made {
    /// A packet due at this time is in the ring.
    Published(Timestamp),
    /// The source has ended (its last partial packet, if any, is in the ring).
    Ended,
}

/// A live source this far behind the sender's clock is asked to skip ahead.
const LIVE_BEHIND: Duration = Duration::from_millis(20);
/// ...to this far ahead of it, so that it can make up its lead.
const LIVE_LEAD: Duration = Duration::from_millis(50);

/// Source → `slot` → the stream's ring: one RTP packet. A source whose packets are already
/// overdue when made is told where the sender is ([`RtpSource::catch_up_to`]): a live source
/// skips the frames it can no longer deliver, instead of becoming slow motion; the skipped
/// frames are counted.
pub(crate) fn make_packet(
    source: &mut dyn RtpSource,
    rt: &StreamRt,
    clock: &Clock,
    mut slot: Slot,
) -> Result<Made, SourceError> {
    let next = source.next_packet(&mut slot.buf)?;
    if let Some(w) = source.take_warning() {
        rt.warn(w);
    }
    let Some(p) = next else {
        rt.ring.recycle(slot);
        return Ok(Made::Ended);
    };
    let now = clock.now();
    if now > p.due + LIVE_BEHIND {
        let at = now.saturating_since(rt.epoch) + LIVE_LEAD;
        let skipped = source.catch_up_to(at);
        rt.counters
            .frames_skipped
            .fetch_add(skipped, Ordering::Relaxed);
    }
    slot.len = p.len;
    slot.release = p.due;
    slot.payload_len = p.payload_len;
    rt.ring.publish(slot);
    Ok(Made::Published(p.due))
}
