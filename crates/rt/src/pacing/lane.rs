//! What a pacing core runs: lanes. A lane is one stream's send step, whatever it carries
//! (MPEG-TS packets through a sender session: `metronome_apps::streams::stream::TsLane`;
//! raw-video frames in batches: `metronome_apps::uncompressed::stream::RawLane`). The core (`core.rs`) schedules lanes by their jobs' deadlines and
//! knows nothing else of them: a new kind of stream is a new lane, not a change to the core.
//! Every call on the pacing thread allocates nothing.

use crate::clock::Clock;
use metronome_session::sender::JobTimes;
use metronome_time::Timestamp;
use std::time::Duration;

/// One stream's send step on a pacing core.
pub trait Lane: Send {
    /// The stream's id (the server's, unique while it runs).
    fn id(&self) -> u64;
    /// Its relative deadline: its priority under deadline-monotonic scheduling.
    fn deadline(&self) -> Duration;
    /// Takes the next packet (or batch) in hand if it has none: what the core may schedule.
    fn load(&mut self, now: Timestamp) -> Load;
    /// Sends what is in hand, if its time has come; `None` when nothing was in hand.
    fn send(&mut self, clock: &Clock) -> Option<Sent>;
    /// The packet in hand may leave sooner than its job says: its rate rose since the core
    /// was told (feedback taken on another thread, which then calls
    /// [`crate::pacing::core::CoreShared::note_sooner`]). Its times now, once per rise;
    /// `None` when nothing moved (the default: a lane whose times never move up).
    fn sooner(&mut self, _now: Timestamp) -> Option<JobTimes> {
        None
    }
    /// Gives back what it holds and says the stream is let go.
    fn finish(&mut self);
}

/// What a lane's [`Lane::load`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// A packet is ready: it may leave from `release` on (its due time, or later while the
    /// stream catches up after a stall) and belongs to a job with this deadline.
    Ready(JobTimes),
    /// Nothing to send yet.
    Empty,
    /// The ring is empty and the producer has finished: the stream is over.
    Done,
}

/// What a lane's [`Lane::send`] did with the packet in hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// It left this late.
    Sent(Duration),
    /// It was too late to be of use and was dropped.
    Dropped,
    /// Not yet (catching up is rate-bounded): the job again, released when it may leave.
    NotYet(JobTimes),
}
