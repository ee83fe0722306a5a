//! Raw-video streams on the server's cores: admitted like every stream, run as a lane of the core
//! they were placed on (see `uncompressed::RawSender::run_on`), or, under `naive`, on a pacing
//! thread of their own.

use super::{CoreRt, StreamServer};
use crate::streams::control::ControlError;
use metronome_rt::pacing::{Command, Lane};
use metronome_rt::sync::lock;
use metronome_sched::TaskParams;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A raw-video stream admitted by [`StreamServer::admit_raw`].
#[derive(Clone, Debug)]
pub struct RawAdmission {
    /// Its id on the core (and in admission).
    pub id: u64,
    /// The core it runs on; `None` under `naive`, where it paces itself.
    pub core: Option<usize>,
}

impl StreamServer {
    /// Admits a raw-video stream (`sched::st2110::frame_task`) on a pacing core, as every
    /// stream is admitted: the schedulability test of the core, the link and the memory budget
    /// (`bytes`, its frames: `RawSender::memory_bytes`) and the most one stream may send. Under
    /// `naive` (no cores) it is admitted as a naive MPEG-TS stream is, and paces itself.
    pub fn admit_raw(
        &self,
        name: &str,
        task: TaskParams,
        bytes: u64,
    ) -> Result<RawAdmission, ControlError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let core = self.inner.admit(id, name, task, (bytes, 0.0))?;
        // Under `naive` there are no cores: admitted as a naive MPEG-TS stream is, the stream
        // paces itself on a thread of its own.
        let core = (!self.inner.cores.is_empty()).then_some(core);
        Ok(RawAdmission { id, core })
    }

    /// Starts an admitted raw stream on its core as `lane` (`uncompressed::stream::RawLane`); false
    /// if it has no core (it paces itself).
    pub fn start_raw(&self, a: &RawAdmission, lane: Box<dyn Lane>) -> bool {
        let Some(core) = a.core.and_then(|c| self.inner.cores.get(c)) else {
            return false;
        };
        let started = core.commands.push(Command::Add(lane)).is_ok();
        core.wake();
        started
    }

    /// Takes a raw stream off its core (the lane sets `finished` once the core has let it go)
    /// and gives its admission back.
    pub fn end_raw(&self, a: RawAdmission, finished: &AtomicBool) {
        if self.remove_raw(&a) {
            for _ in 0..200 {
                if finished.load(Ordering::Acquire) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.release_raw(a);
    }

    /// Asks the core an admitted raw stream runs on to let it go at its next look (within
    /// milliseconds, even in the middle of a frame); false if it has no core.
    pub fn remove_raw(&self, a: &RawAdmission) -> bool {
        let Some(core) = a.core.and_then(|c| self.inner.cores.get(c)) else {
            return false;
        };
        let _ = core.commands.push(Command::Remove(a.id));
        core.wake();
        true
    }

    /// Gives back a raw stream's admission (one that never started, or has ended).
    pub fn release_raw(&self, a: RawAdmission) {
        self.inner.release(a.id);
        if let (Some(c), CoreRt::Deadline) = (a.core, self.inner.cfg.rt) {
            let _ = self.inner.grow_deadline_budget(c);
        }
    }

    /// Wakes the core an admitted raw stream runs on (its producer published a frame that is
    /// nearly due).
    pub fn wake_raw(&self, a: &RawAdmission) {
        if let Some(core) = a.core.and_then(|c| self.inner.cores.get(c)) {
            core.wake();
        }
    }

    /// What the pacing thread of `core` was granted.
    pub fn core_grant(&self, core: usize) -> metronome_rt::thread::GrantView {
        self.inner
            .cores
            .get(core)
            .map(|c| lock(&c.grant).clone())
            .unwrap_or_default()
    }
}
