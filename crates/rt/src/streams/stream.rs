//! One admitted stream at run time: what its producer, its pacing thread and the control side
//! share, and the per-stream send logic ([`Cursor`]) that every scheduling policy runs.
//!
//! A stream is a real-time task. Its jobs are the packets due within one period: with the default
//! period (one packet interval) each packet is its own job, released at its own time; with an
//! explicit period `T` (the paper's 15 ms) the packets due in `(q − T, q]` form the job released
//! at `q`, a point of the stream's grid `epoch + k·T`, and must all be sent by `q + deadline`.

use super::outlet::MediaOut;
use crate::clock::Clock;
use crate::ring::{PacketRing, Slot};
use metronome_sched::{PacingModel, TaskParams};
use metronome_time::Timestamp;
use metronome_wire::rtp::patch_send_time;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Counters a stream's threads publish; read at any time by the control side.
#[derive(Default)]
pub struct StreamCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    pub payload_octets: AtomicU64,
    pub send_errors: AtomicU64,
    /// Times the pacer found the ring empty while the stream was running (the producer fell
    /// behind: packets go late).
    pub underruns: AtomicU64,
    /// Times the producer found the ring full. File and test sources are read on demand, so the
    /// producer just waits; a live capture source would have to drop here.
    pub overruns: AtomicU64,
    pub jobs: AtomicU64,
    /// Jobs whose last packet left after the job's absolute deadline.
    pub deadline_misses: AtomicU64,
    /// Worst lateness since the status line last took it, ns.
    pub max_late_ns: AtomicU64,
    /// How far stalls have shifted the schedule, ns (see `PacingModel::offset`).
    pub schedule_offset_ns: AtomicU64,
}

/// The shared state of one running stream.
pub struct StreamRt {
    pub id: u64,
    pub name: String,
    pub task: TaskParams,
    /// `Some(T)` when the user set a period: jobs are quantised to the grid `epoch + k·T`.
    pub grid: Option<Duration>,
    /// The first release time.
    pub epoch: Timestamp,
    pub ring: PacketRing,
    /// Where every packet goes: one UDP socket per `rtp://` destination, or an RTSP session's
    /// transport.
    pub outputs: Vec<MediaOut>,
    pub send_time_ext: bool,
    pub counters: StreamCounters,
    /// Lateness statistics and stall rebasing; locked per packet by the one thread that sends the
    /// stream, and now and then by the control side to read it.
    pub pace: Mutex<PacingModel>,
    /// Set by the control side: the stream is being removed.
    pub stop: AtomicBool,
    /// Set by the producer when the source ended or failed.
    pub producer_done: AtomicBool,
    /// Set by the sending thread when it has let go of the stream.
    pub finished: AtomicBool,
    /// Why the producer stopped early, if it failed.
    pub producer_error: Mutex<Option<String>>,
}

impl StreamRt {
    /// Relative deadline.
    pub fn deadline(&self) -> Duration {
        self.task.deadline
    }

    /// The job release for a packet whose (rebased) target time is `t`.
    fn job_release(&self, t: Timestamp) -> Timestamp {
        let Some(period) = self.grid else { return t };
        let period_ns = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX).max(1);
        let since = t.saturating_since(self.epoch).as_nanos();
        let since = u64::try_from(since).unwrap_or(u64::MAX);
        let k = since.div_ceil(period_ns);
        self.epoch + Duration::from_nanos(k.saturating_mul(period_ns))
    }
}

/// The job a [`Cursor`] is working through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobTimes {
    pub release: Timestamp,
    pub deadline: Timestamp,
}

/// What [`Cursor::load`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// A packet is ready, belonging to this job.
    Ready(JobTimes),
    /// Nothing to send yet.
    Empty,
    /// The ring is empty and the producer has finished: the stream is over.
    Done,
}

/// The sending side of one stream, owned by the thread that sends it. Allocates nothing.
#[derive(Default)]
pub struct Cursor {
    head: Option<Slot>,
    job: Option<JobTimes>,
    job_missed: bool,
    started: bool,
    empty: bool,
}

impl Cursor {
    /// Takes the next packet from the ring, if there is none in hand, and says which job it
    /// belongs to.
    pub fn load(&mut self, rt: &StreamRt) -> Load {
        if self.head.is_none() {
            match rt.ring.next_ready() {
                Some(slot) => self.head = Some(slot),
                None => {
                    if rt.producer_done.load(Ordering::Acquire) && rt.ring.occupancy() == 0 {
                        return Load::Done;
                    }
                    if self.started && !self.empty {
                        rt.counters.underruns.fetch_add(1, Ordering::Relaxed);
                    }
                    self.empty = true;
                    return Load::Empty;
                }
            }
        }
        self.empty = false;
        let release = self.head.as_ref().map_or(Timestamp::ZERO, |s| s.release);
        let target = lock(&rt.pace).target(release);
        let release = rt.job_release(target);
        let job = match self.job {
            Some(j) if j.release == release => j,
            _ => {
                self.job_missed = false;
                rt.counters.jobs.fetch_add(1, Ordering::Relaxed);
                JobTimes {
                    release,
                    deadline: release + rt.deadline(),
                }
            }
        };
        self.job = Some(job);
        Load::Ready(job)
    }

    /// Sends the packet in hand now, to every destination, and accounts for it. Returns its
    /// lateness behind the job's release, or `None` if there was no packet in hand.
    pub fn send(&mut self, rt: &StreamRt, clock: &Clock) -> Option<Duration> {
        let mut slot = self.head.take()?;
        let job = self.job?;
        if rt.send_time_ext {
            patch_send_time(slot.bytes_mut(), clock.wall());
        }
        let sent_at = clock.now();
        for out in &rt.outputs {
            if !out.send(slot.bytes()) {
                rt.counters.send_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        let (late, offset) = {
            let mut pace = lock(&rt.pace);
            let late = pace.on_sent(job.release, sent_at);
            (late, pace.offset())
        };
        if sent_at > job.deadline && !self.job_missed {
            self.job_missed = true;
            rt.counters.deadline_misses.fetch_add(1, Ordering::Relaxed);
        }
        let c = &rt.counters;
        c.schedule_offset_ns.store(nanos(offset), Ordering::Relaxed);
        c.max_late_ns.fetch_max(nanos(late), Ordering::Relaxed);
        c.packets.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(slot.len as u64, Ordering::Relaxed);
        c.payload_octets
            .fetch_add(slot.payload_len as u64, Ordering::Relaxed);
        rt.ring.recycle(slot);
        self.started = true;
        Some(late)
    }

    /// Gives the packet in hand back to the ring (the stream is being removed).
    pub fn release(&mut self, rt: &StreamRt) {
        if let Some(slot) = self.head.take() {
            rt.ring.recycle(slot);
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Locks a mutex that a panicking thread may have poisoned: the data (statistics) stay usable.
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
