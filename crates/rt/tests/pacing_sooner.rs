//! A pacing core waiting for a packet's release is told the release moved up (the stream's
//! rate rose: `CoreShared::note_sooner`) and sends at the new time, not the old one.

use metronome_rt::clock::Clock;
use metronome_rt::pacing::{
    Command, Core, CoreConfig, CoreShared, Lane, Load, PacingThreadConfig, Sent, WaitPolicy,
};
use metronome_rt::thread::RtPolicy;
use metronome_rt::wait::WaiterConfig;
use metronome_sched::{Policy, WaitSelectorConfig};
use metronome_session::sender::JobTimes;
use metronome_time::Timestamp;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One packet, whose release another thread may move: what the lane's stream shares.
#[derive(Default)]
struct Shared {
    release: Mutex<Option<Timestamp>>,
    moved: AtomicBool,
    sent_at: Mutex<Option<Timestamp>>,
}

struct OnePacket(Arc<Shared>);

impl OnePacket {
    fn times(&self) -> Option<JobTimes> {
        let release = (*self.0.release.lock().unwrap())?;
        Some(JobTimes {
            release,
            deadline: release + Duration::from_secs(10),
        })
    }
}

impl Lane for OnePacket {
    fn id(&self) -> u64 {
        1
    }
    fn deadline(&self) -> Duration {
        Duration::from_secs(10)
    }
    fn load(&mut self, _now: Timestamp) -> Load {
        match self.times() {
            Some(j) if self.0.sent_at.lock().unwrap().is_none() => Load::Ready(j),
            _ => Load::Empty,
        }
    }
    fn send(&mut self, clock: &Clock) -> Option<Sent> {
        let j = self.times()?;
        let now = clock.now();
        if now < j.release {
            return Some(Sent::NotYet(j));
        }
        *self.0.sent_at.lock().unwrap() = Some(now);
        Some(Sent::Sent(now.saturating_since(j.release)))
    }
    fn sooner(&mut self, _now: Timestamp) -> Option<JobTimes> {
        if self.0.moved.swap(false, Ordering::AcqRel) {
            self.times()
        } else {
            None
        }
    }
    fn finish(&mut self) {}
}

#[test]
fn a_release_moved_up_is_kept_not_the_old_one() {
    let clock = Clock::new();
    let cfg = CoreConfig {
        policy: Policy::Edf,
        thread: PacingThreadConfig {
            rt_policy: RtPolicy::Other,
            wait: WaitPolicy::SleepSpin,
            waiter: WaiterConfig::default(),
            wait_selector: WaitSelectorConfig::default(),
            cpu: None,
            lock_memory: false,
        },
        capacity: 4,
    };
    let core_shared = CoreShared::new(cfg.capacity);
    let mut core = Core::new(&cfg, &core_shared, &clock);
    let start = clock.now();
    // Its time at the old rate: 2 s away (TFMCC's start waits 500 ms a packet).
    let lane = Arc::new(Shared::default());
    *lane.release.lock().unwrap() = Some(start + Duration::from_secs(2));
    assert!(core_shared
        .commands
        .push(Command::Add(Box::new(OnePacket(lane.clone()))))
        .is_ok());
    for _ in 0..3 {
        core.step();
    }
    assert!(lane.sent_at.lock().unwrap().is_none());
    // The rate rose: it may leave 50 ms from the start.
    let moved_to = start + Duration::from_millis(50);
    *lane.release.lock().unwrap() = Some(moved_to);
    lane.moved.store(true, Ordering::Release);
    core_shared.note_sooner();
    let give_up = start + Duration::from_secs(3);
    while lane.sent_at.lock().unwrap().is_none() && clock.now() < give_up {
        core.step();
    }
    let sent = lane.sent_at.lock().unwrap().expect("the packet left");
    let after = sent.saturating_since(moved_to);
    // The core looks at least every 5 ms; a busy host may add some. The old release was
    // 1.95 s later.
    assert!(
        sent >= moved_to && after < Duration::from_millis(500),
        "sent {after:?} after its new release"
    );
}
