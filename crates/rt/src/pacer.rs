//! The pacing thread of one stream: the stream's [`Cursor`] loads the next packet into its
//! sender session, the thread waits for the time the session names, and the cursor sends it.
//! The EDF/DM cores run the same cursor over many streams; this is the one-stream case, with no
//! dispatcher.
//!
//! [`Pacer::start`] sets the thread up once ([`PacingThread`]); [`Pacer::step`] is the
//! per-packet path and allocates nothing (`crates/rt/tests/pacer_alloc.rs` checks it).

use crate::clock::Clock;
use crate::pacing_thread::{PacingThread, PacingThreadConfig, PacingThreadReport};
use crate::streams::stream::{Cursor, Load, Sent, StreamRt};

/// What one [`Pacer::step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A packet left (or was dropped as too late).
    Sent,
    /// Nothing to send yet: the caller waits a little and tries again.
    Empty,
    /// The ring is empty and the producer has finished.
    Done,
}

pub struct Pacer<'a> {
    rt: &'a StreamRt,
    clock: &'a Clock,
    thread: PacingThread,
    cursor: Cursor,
}

impl<'a> Pacer<'a> {
    /// Sets up the calling thread as the pacing thread of `rt`.
    pub fn start(cfg: &PacingThreadConfig, rt: &'a StreamRt, clock: &'a Clock) -> Self {
        Pacer {
            rt,
            clock,
            thread: PacingThread::start(cfg, clock),
            cursor: Cursor::default(),
        }
    }

    /// Sends the next packet at its time, if there is one. Allocates nothing.
    pub fn step(&mut self) -> Step {
        let (rt, clock) = (self.rt, self.clock);
        let mut job = match self.cursor.load(rt, clock.now()) {
            Load::Ready(job) => job,
            Load::Empty => {
                self.thread.note_starved(clock.now());
                return Step::Empty;
            }
            Load::Done => return Step::Done,
        };
        loop {
            self.thread.wait_until(clock, job.release);
            match self.cursor.send(rt, clock) {
                Some(Sent::Sent(_)) => {
                    self.thread.follow_load(clock.now());
                    return Step::Sent;
                }
                Some(Sent::NotYet(next)) => job = next,
                Some(Sent::Dropped) | None => return Step::Sent,
            }
        }
    }

    /// Gives back the packet in hand and reports how the thread ran.
    pub fn finish(mut self) -> PacingThreadReport {
        self.cursor.release(self.rt);
        self.thread.report(self.clock)
    }
}
