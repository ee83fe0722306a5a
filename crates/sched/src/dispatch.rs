//! The run-time job dispatcher of a limited-preemptive pacing thread (and of [`crate::sim`]).
//!
//! Each stream has at most one outstanding job: the part of its current frame still to send.
//! The pacer asks [`Dispatcher::pop`] for the highest-priority released job, sends one packet of
//! it, and [`Dispatcher::submit`]s the rest, so after every packet it re-picks — a newly released
//! urgent job waits for at most one packet (the blocking `B` of [`crate::analysis`]).
//!
//! **No allocation after construction.** Both heaps and the per-stream tables are allocated with
//! room for `capacity` jobs in [`Dispatcher::new`]. Since a stream holds at most one job (a second
//! submit replaces the first) and stream indices are below `capacity`, the heaps never hold more
//! than `capacity` entries and never grow. Replacing or cancelling a job removes it eagerly with
//! `BinaryHeap::retain`, which works in place. `tests/dispatch_alloc.rs` counts allocations.
//!
//! Out-of-range stream indices are a programming error, but a pacer must not crash on one:
//! they are ignored and counted ([`Dispatcher::rejected`]).

use crate::task::Policy;
use metronome_time::Timestamp;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Duration;

/// One job of a stream: released at `release`, due by `deadline`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    /// The stream's slot index, below the dispatcher's capacity.
    pub stream: usize,
    /// When the job may start.
    pub release: Timestamp,
    /// When it must be complete (absolute).
    pub deadline: Timestamp,
}

/// A heap entry: the job and the key it is ordered by (smaller first).
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: (u64, u64, usize),
    job: Job,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key)
    }
}

/// Picks the next job to send a packet of, by EDF or deadline-monotonic priority.
#[derive(Debug)]
pub struct Dispatcher {
    policy: Policy,
    /// DM key per stream: its relative deadline in ns (`u64::MAX`, the lowest, until set).
    dm_key: Vec<u64>,
    /// Whether the stream has a job in one of the heaps.
    queued: Vec<bool>,
    /// Jobs not yet moved to `ready`, by release time (then stream).
    waiting: BinaryHeap<Reverse<Entry>>,
    /// Released jobs, by priority.
    ready: BinaryHeap<Reverse<Entry>>,
    rejected: u64,
}

impl Dispatcher {
    /// A dispatcher for streams `0..capacity`; allocates everything it will ever use.
    pub fn new(policy: Policy, capacity: usize) -> Self {
        Dispatcher {
            policy,
            dm_key: vec![u64::MAX; capacity],
            queued: vec![false; capacity],
            waiting: BinaryHeap::with_capacity(capacity),
            ready: BinaryHeap::with_capacity(capacity),
            rejected: 0,
        }
    }

    /// The deadline-monotonic priority of `stream`: its relative deadline (shorter is higher;
    /// ties go to the lower stream index). Call it when a stream is added; a queued job of the
    /// stream is re-ordered. EDF ignores it.
    pub fn set_priority(&mut self, stream: usize, rel_deadline: Duration) {
        let Some(key) = self.dm_key.get_mut(stream) else {
            self.rejected += 1;
            return;
        };
        *key = u64::try_from(rel_deadline.as_nanos()).unwrap_or(u64::MAX);
        if let Some(job) = self.remove(stream) {
            self.push_waiting(job);
        }
    }

    /// Queues the next job of `job.stream`, replacing the stream's outstanding job if any.
    pub fn submit(&mut self, job: Job) {
        if job.stream >= self.queued.len() {
            self.rejected += 1;
            return;
        }
        self.remove(job.stream);
        self.push_waiting(job);
    }

    /// Forgets the outstanding job of `stream` (the stream was removed).
    pub fn cancel(&mut self, stream: usize) {
        if stream >= self.queued.len() {
            self.rejected += 1;
            return;
        }
        self.remove(stream);
    }

    /// The earliest release among the outstanding jobs: when the pacer must be awake next.
    /// A result at or before `now` means there is work now.
    pub fn next_release(&self) -> Option<Timestamp> {
        let waiting = self.waiting.peek().map(|Reverse(e)| e.job.release);
        let ready = self.ready.iter().map(|Reverse(e)| e.job.release).min();
        match (waiting, ready) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Removes and returns the highest-priority job released by `now`: EDF takes the earliest
    /// absolute deadline (ties: earlier release, then lower stream index); DM the smallest
    /// relative deadline given to [`Dispatcher::set_priority`] (ties: lower stream index).
    pub fn pop(&mut self, now: Timestamp) -> Option<Job> {
        while let Some(Reverse(e)) = self.waiting.peek() {
            if e.job.release > now {
                break;
            }
            let job = e.job;
            self.waiting.pop();
            let entry = self.ready_entry(job);
            self.ready.push(Reverse(entry));
        }
        let Reverse(e) = self.ready.pop()?;
        self.queued[e.job.stream] = false;
        Some(e.job)
    }

    /// Number of outstanding jobs.
    pub fn len(&self) -> usize {
        self.waiting.len() + self.ready.len()
    }

    /// Whether no job is outstanding.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many calls named a stream index outside `0..capacity` (and were ignored).
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// The number of stream slots.
    pub fn capacity(&self) -> usize {
        self.queued.len()
    }

    /// The policy jobs are ordered by.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    fn push_waiting(&mut self, job: Job) {
        let key = (job.release.as_nanos(), 0, job.stream);
        self.waiting.push(Reverse(Entry { key, job }));
        self.queued[job.stream] = true;
    }

    fn ready_entry(&self, job: Job) -> Entry {
        let key = match self.policy {
            Policy::Edf => (job.deadline.as_nanos(), job.release.as_nanos(), job.stream),
            Policy::Dm => (self.dm_key[job.stream], 0, job.stream),
        };
        Entry { key, job }
    }

    /// Takes `stream`'s queued job out of whichever heap holds it (in place, no allocation).
    fn remove(&mut self, stream: usize) -> Option<Job> {
        if !self.queued.get(stream).copied().unwrap_or(false) {
            return None;
        }
        let found = (self.waiting.iter().chain(self.ready.iter()))
            .find(|Reverse(e)| e.job.stream == stream)
            .map(|Reverse(e)| e.job);
        self.waiting.retain(|Reverse(e)| e.job.stream != stream);
        self.ready.retain(|Reverse(e)| e.job.stream != stream);
        self.queued[stream] = false;
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> Timestamp {
        Timestamp::from_micros(us)
    }

    fn job(stream: usize, release: u64, deadline: u64) -> Job {
        Job {
            stream,
            release: t(release),
            deadline: t(deadline),
        }
    }

    fn drain(d: &mut Dispatcher, now: Timestamp) -> Vec<usize> {
        std::iter::from_fn(|| d.pop(now))
            .map(|j| j.stream)
            .collect()
    }

    #[test]
    fn edf_orders_by_deadline_then_release_then_stream() {
        let mut d = Dispatcher::new(Policy::Edf, 8);
        d.submit(job(3, 0, 50));
        d.submit(job(1, 5, 40));
        d.submit(job(2, 2, 40));
        d.submit(job(0, 2, 40));
        d.submit(job(4, 100, 110)); // not released yet
        assert_eq!(d.next_release(), Some(t(0)));
        assert_eq!(drain(&mut d, t(10)), vec![0, 2, 1, 3]);
        assert_eq!((d.len(), d.next_release()), (1, Some(t(100))));
        assert_eq!(d.pop(t(99)), None);
        assert_eq!(d.pop(t(100)), Some(job(4, 100, 110)));
        assert!(d.is_empty() && d.next_release().is_none());
    }

    #[test]
    fn dm_orders_by_relative_deadline_then_stream() {
        let mut d = Dispatcher::new(Policy::Dm, 4);
        d.set_priority(0, Duration::from_millis(40));
        d.set_priority(1, Duration::from_millis(10));
        d.set_priority(2, Duration::from_millis(10));
        // Absolute deadlines disagree with the fixed priorities on purpose.
        d.submit(job(0, 0, 1));
        d.submit(job(2, 0, 900));
        d.submit(job(1, 0, 800));
        d.submit(job(3, 0, 0)); // no priority set: lowest
        assert_eq!(drain(&mut d, t(0)), vec![1, 2, 0, 3]);
    }

    #[test]
    fn a_second_submit_replaces_and_cancel_forgets() {
        let mut d = Dispatcher::new(Policy::Edf, 2);
        d.submit(job(0, 0, 10));
        assert_eq!(d.pop(t(0)).map(|j| j.stream), Some(0));
        d.submit(job(0, 0, 10));
        d.submit(job(1, 0, 20));
        assert_eq!(d.pop(t(0)), Some(job(0, 0, 10))); // moves 1 to ready as well
        d.submit(job(1, 5, 8)); // replaces the ready job of stream 1
        assert_eq!(d.len(), 1);
        assert_eq!(d.pop(t(4)), None);
        assert_eq!(d.pop(t(5)), Some(job(1, 5, 8)));
        d.submit(job(1, 7, 9));
        d.cancel(1);
        d.cancel(0); // nothing queued: a no-op
        assert!(d.is_empty() && d.pop(t(1_000)).is_none());
    }

    #[test]
    fn released_jobs_keep_their_release_in_next_release() {
        let mut d = Dispatcher::new(Policy::Edf, 3);
        d.submit(job(0, 3, 100));
        d.submit(job(1, 1, 50));
        d.submit(job(2, 9, 10));
        assert_eq!(d.pop(t(5)), Some(job(1, 1, 50))); // 0 moved to ready, 2 still waiting
        assert_eq!(d.next_release(), Some(t(3)));
        d.pop(t(5));
        assert_eq!(d.next_release(), Some(t(9)));
    }

    #[test]
    fn set_priority_reorders_a_queued_job() {
        let mut d = Dispatcher::new(Policy::Dm, 2);
        d.set_priority(0, Duration::from_millis(1));
        d.set_priority(1, Duration::from_millis(2));
        d.submit(job(0, 0, 0));
        d.submit(job(1, 0, 0));
        assert_eq!(d.pop(t(0)).map(|j| j.stream), Some(0));
        d.submit(job(0, 0, 0));
        d.set_priority(0, Duration::from_millis(3));
        assert_eq!(drain(&mut d, t(0)), vec![1, 0]);
    }

    #[test]
    fn out_of_range_streams_are_counted_not_fatal() {
        let mut d = Dispatcher::new(Policy::Edf, 2);
        d.submit(job(2, 0, 1));
        d.cancel(7);
        d.set_priority(usize::MAX, Duration::ZERO);
        assert_eq!((d.rejected(), d.len()), (3, 0));
        let mut empty = Dispatcher::new(Policy::Dm, 0);
        empty.submit(job(0, 0, 1));
        assert_eq!((empty.rejected(), empty.pop(Timestamp::MAX)), (1, None));
    }

    #[test]
    fn heaps_never_grow_past_capacity() {
        let cap = 16;
        let mut d = Dispatcher::new(Policy::Edf, cap);
        let (w, r) = (d.waiting.capacity(), d.ready.capacity());
        for round in 0..100u64 {
            for s in 0..cap {
                d.submit(job(s, round, round + s as u64));
            }
            d.pop(t(round));
            d.cancel((round % cap as u64) as usize);
            assert!(d.len() <= cap);
        }
        assert_eq!((d.waiting.capacity(), d.ready.capacity()), (w, r));
    }
}
