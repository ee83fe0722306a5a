//! The pacing thread of one real-time core: every stream placed on the core, scheduled job by
//! job under EDF or deadline-monotonic priorities by a [`Dispatcher`].
//!
//! The thread is limited-preemptive: it sends one packet, then picks the highest-priority released
//! job again, so a job waits behind at most one packet of a lower-priority stream (the blocking
//! term of the admission test). Streams arrive and leave through a bounded command queue; the
//! stream table, the dispatcher and the lists are sized when the core starts, so the loop
//! allocates nothing.

use super::lane::{Lane, Load, Sent};
use crate::clock::Clock;
use crate::pacing::thread::{PacingThread, PacingThreadConfig, PacingThreadReport};
use crossbeam_queue::ArrayQueue;
use metronome_sched::{Dispatcher, Job, Policy};
use metronome_time::{Distribution, Timestamp};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How a core's pacing thread is set up.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// How the core orders released jobs: earliest deadline first, or deadline-monotonic
    /// (each stream's fixed priority is its relative deadline, [`Lane::deadline`]).
    pub policy: Policy,
    /// The pacing thread's set-up: real-time policy, memory locking, pinning, how it waits.
    pub thread: PacingThreadConfig,
    /// Most streams this core can carry.
    pub capacity: usize,
}

/// A change to the core's set of streams.
pub enum Command {
    /// A stream's lane (made on the control side: the core allocates nothing).
    Add(Box<dyn Lane>),
    /// Let go of the stream with this id ([`Lane::id`]): the core calls its
    /// [`Lane::finish`] and frees its place. An id not on the core is ignored.
    Remove(u64),
}

/// What the control side shares with a core's thread.
pub struct CoreShared {
    /// Streams to add and remove, applied by the thread at the start of each turn; holds
    /// `capacity` commands (at least 16). A push fails when it is full.
    pub commands: ArrayQueue<Command>,
    /// Set by the control side to end [`run_core`]'s loop after its current turn.
    pub stop: AtomicBool,
    /// The thread's kernel id, for changing its SCHED_DEADLINE budget from outside.
    pub tid: AtomicI32,
    /// Lateness of every packet this core sent, in ns past its release time (dropped packets
    /// excluded; a sample is skipped when the control side holds the lock).
    pub lateness: Mutex<Distribution>,
    /// What the thread was granted, once it started.
    pub grant: Mutex<crate::thread::GrantView>,
    /// Set once the thread is set up (policy, locked memory) and about to run its loop.
    pub ready: AtomicBool,
    /// The pacing thread, for [`CoreShared::wake`].
    thread: std::sync::OnceLock<std::thread::Thread>,
    /// Set by [`CoreShared::note_sooner`]: some lane's packet may leave sooner than its job.
    sooner: AtomicBool,
}

impl CoreShared {
    /// The shared state of a core that will carry up to `capacity` streams: an empty command
    /// queue of `capacity` places (at least 16), not stopped, not ready, no thread yet.
    pub fn new(capacity: usize) -> Self {
        CoreShared {
            commands: ArrayQueue::new(capacity.max(16)),
            stop: AtomicBool::new(false),
            tid: AtomicI32::new(0),
            lateness: Mutex::new(Distribution::new()),
            grant: Mutex::new(crate::thread::GrantView::default()),
            ready: AtomicBool::new(false),
            thread: std::sync::OnceLock::new(),
            sooner: AtomicBool::new(false),
        }
    }

    /// A stream's packet in hand may leave sooner than its job says (its rate rose): the
    /// thread asks its lanes ([`Lane::sooner`]) at its next look (at most 5 ms away).
    pub fn note_sooner(&self) {
        self.sooner.store(true, Ordering::Release);
        self.wake();
    }

    /// Wakes the pacing thread from waiting between looks (a producer that published
    /// something nearly due). A precise wait for a release is not cut short.
    pub fn wake(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

struct Entry {
    lane: Box<dyn Lane>,
    /// The stream has no job submitted (its ring was empty).
    idle: bool,
}

/// A core's pacing loop, on the thread that runs it: [`Core::new`] sets the thread up (policy,
/// locked memory, pinning: see [`PacingThread`]), [`Core::step`] is one turn and allocates
/// nothing (`crates/apps/tests/pacer_alloc.rs` checks it), [`Core::finish`] reports.
pub struct Core<'a> {
    shared: &'a CoreShared,
    clock: &'a Clock,
    table: Vec<Option<Entry>>,
    dispatcher: Dispatcher,
    idle: Vec<usize>,
    thread: PacingThread,
    /// Streams in the table.
    streams: usize,
}

/// With a stream waiting for its producer (its ring was empty), the thread looks at it at least
/// this often.
const STARVED_LOOK: Duration = Duration::from_millis(1);
/// With streams, all fed, the thread looks at its commands at least this often. A new stream
/// starts a preroll (hundreds of ms) after it is added, and a removal waits for the thread, so
/// a few ms cost nothing; a shorter look would wake the thread twice per packet of a stream
/// with a 2 ms packet interval (5 Mbit/s of MPEG-TS).
const FED_LOOK: Duration = Duration::from_millis(5);
/// With no stream at all, it sleeps this long between looks: an idle server idles.
const IDLE_LOOK: Duration = Duration::from_millis(20);

/// Runs a core's pacing thread until `shared.stop` is set. Call on the thread itself.
pub fn run_core(cfg: CoreConfig, shared: &CoreShared, clock: &Clock) -> PacingThreadReport {
    let mut core = Core::new(&cfg, shared, clock);
    while !shared.stop.load(Ordering::Relaxed) {
        core.step();
    }
    core.finish()
}

impl<'a> Core<'a> {
    /// Sets up the calling thread as the pacing thread of a core and sizes its tables.
    pub fn new(cfg: &CoreConfig, shared: &'a CoreShared, clock: &'a Clock) -> Self {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        shared.tid.store(tid, Ordering::Release);
        let _ = shared.thread.set(std::thread::current());
        let thread = PacingThread::start(&cfg.thread, clock);
        *crate::sync::lock(&shared.grant) = thread.grant().clone();
        let core = Core {
            shared,
            clock,
            table: (0..cfg.capacity).map(|_| None).collect(),
            dispatcher: Dispatcher::new(cfg.policy, cfg.capacity),
            idle: Vec::with_capacity(cfg.capacity),
            thread,
            streams: 0,
        };
        shared.ready.store(true, Ordering::Release);
        core
    }

    /// Gives back every stream's packet in hand and reports how the thread ran.
    pub fn finish(mut self) -> PacingThreadReport {
        self.release_all();
        self.thread.report(self.clock)
    }

    /// One turn: apply commands, feed idle streams, then send the most urgent released packet or
    /// wait for the next release.
    pub fn step(&mut self) {
        self.apply_commands();
        if self.shared.sooner.swap(false, Ordering::AcqRel) {
            self.resubmit_sooner();
        }
        self.feed_idle();
        let now = self.clock.now();
        self.thread.check_throttling(now);
        if let Some(job) = self.dispatcher.pop(now) {
            self.send(job.stream);
            return;
        }
        // Nothing released: wait for the next release, but look at the command queue and the
        // idle streams now and then.
        let look = if self.streams == 0 {
            IDLE_LOOK
        } else if self.idle.is_empty() {
            FED_LOOK
        } else {
            STARVED_LOOK
        };
        let next = self.dispatcher.next_release().unwrap_or(Timestamp::MAX);
        self.thread.idle_until(self.clock, next, look);
        // Woken for a release: send it now, before the bookkeeping of the next turn.
        if let Some(job) = self.dispatcher.pop(self.clock.now()) {
            self.send(job.stream);
        }
    }

    /// The jobs of the lanes whose packet may now leave sooner, submitted again (each
    /// replaces the lane's job in the dispatcher).
    fn resubmit_sooner(&mut self) {
        let now = self.clock.now();
        for (slot, e) in self.table.iter_mut().enumerate() {
            let Some(e) = e.as_mut().filter(|e| !e.idle) else {
                continue;
            };
            if let Some(j) = e.lane.sooner(now) {
                self.dispatcher.submit(Job {
                    stream: slot,
                    release: j.release,
                    deadline: j.deadline,
                });
            }
        }
    }

    fn send(&mut self, slot: usize) {
        let Some(Some(e)) = self.table.get_mut(slot) else {
            return;
        };
        let Some(sent) = e.lane.send(self.clock) else {
            return;
        };
        let late = match sent {
            Sent::Sent(late) => late,
            // Catching up is rate-bounded: the job comes back when its packet may leave.
            Sent::NotYet(job) => {
                self.dispatcher.submit(Job {
                    stream: slot,
                    release: job.release,
                    deadline: job.deadline,
                });
                return;
            }
            Sent::Dropped => Duration::ZERO,
        };
        if sent != Sent::Dropped {
            if let Ok(mut d) = self.shared.lateness.try_lock() {
                d.record(u64::try_from(late.as_nanos()).unwrap_or(u64::MAX));
            }
        }
        let now = self.clock.now();
        let next = e.lane.load(now);
        self.after_load(slot, next);
        if sent != Sent::Dropped {
            self.thread.follow_load(now);
        }
    }

    fn after_load(&mut self, slot: usize, load: Load) {
        let Some(Some(e)) = self.table.get_mut(slot) else {
            return;
        };
        match load {
            Load::Ready(j) => {
                e.idle = false;
                self.dispatcher.submit(Job {
                    stream: slot,
                    release: j.release,
                    deadline: j.deadline,
                });
            }
            Load::Empty => {
                self.thread.note_starved(self.clock.now());
                if !e.idle {
                    e.idle = true;
                    self.idle.push(slot);
                }
            }
            Load::Done => self.drop_stream(slot),
        }
    }

    fn feed_idle(&mut self) {
        let mut i = 0;
        while i < self.idle.len() {
            let slot = self.idle[i];
            let now = self.clock.now();
            let load = match self.table.get_mut(slot) {
                Some(Some(e)) => e.lane.load(now),
                _ => Load::Done,
            };
            match load {
                Load::Empty => i += 1,
                other => {
                    self.idle.swap_remove(i);
                    if let Some(Some(e)) = self.table.get_mut(slot) {
                        e.idle = false;
                    }
                    if other == Load::Done {
                        self.drop_stream(slot);
                    } else {
                        self.after_load(slot, other);
                    }
                }
            }
        }
    }

    fn apply_commands(&mut self) {
        while let Some(cmd) = self.shared.commands.pop() {
            match cmd {
                Command::Add(lane) => self.add(lane),
                Command::Remove(id) => {
                    let slot = self
                        .table
                        .iter()
                        .position(|e| e.as_ref().is_some_and(|e| e.lane.id() == id));
                    if let Some(slot) = slot {
                        self.drop_stream(slot);
                    }
                }
            }
        }
    }

    fn add(&mut self, mut lane: Box<dyn Lane>) {
        let Some(slot) = self.table.iter().position(Option::is_none) else {
            // Admission control never places more streams on a core than its capacity; if it
            // did, the stream is handed back as finished rather than crashing the core.
            lane.finish();
            return;
        };
        self.dispatcher.set_priority(slot, lane.deadline());
        self.streams += 1;
        self.table[slot] = Some(Entry { lane, idle: true });
        self.idle.push(slot);
    }

    fn drop_stream(&mut self, slot: usize) {
        self.dispatcher.cancel(slot);
        if let Some(pos) = self.idle.iter().position(|&s| s == slot) {
            self.idle.swap_remove(pos);
        }
        if let Some(mut e) = self.table.get_mut(slot).and_then(Option::take) {
            self.streams -= 1;
            e.lane.finish();
        }
    }

    fn release_all(&mut self) {
        for slot in 0..self.table.len() {
            if self.table[slot].is_some() {
                self.drop_stream(slot);
            }
        }
    }
}
