//! The dispatcher allocates nothing after construction (DESIGN.md: the hot path allocates
//! nothing). A counting global allocator counts this thread's allocations while a pacer-like
//! loop submits, pops, replaces and cancels jobs.

use metronome_sched::{Dispatcher, Job, Policy};
use metronome_time::Timestamp;
use std::time::Duration;

#[global_allocator]
static GLOBAL: metronome_testkit::CountingAlloc = metronome_testkit::CountingAlloc;

fn allocs() -> u64 {
    metronome_testkit::allocations()
}

fn churn(d: &mut Dispatcher, streams: usize, rounds: u64) -> u64 {
    let mut popped = 0;
    for round in 0..rounds {
        let now = Timestamp::from_micros(round * 10);
        for s in 0..streams {
            let release = now + Duration::from_micros((s as u64 * 7 + round) % 25);
            let deadline = release + Duration::from_micros(100 + s as u64);
            d.submit(Job {
                stream: s,
                release,
                deadline,
            });
        }
        while let Some(job) = d.pop(now) {
            popped += 1;
            if job.stream % 3 == 0 {
                d.submit(job); // the rest of the job, as the pacer does
                d.pop(now);
            }
        }
        d.cancel((round as usize) % streams);
        d.submit(Job {
            stream: streams + 5, // out of range: counted, not stored
            release: now,
            deadline: now,
        });
        std::hint::black_box(d.next_release());
    }
    popped
}

#[test]
fn dispatcher_allocates_nothing_after_new() {
    for policy in [Policy::Edf, Policy::Dm] {
        let streams = 64;
        let mut d = Dispatcher::new(policy, streams);
        for s in 0..streams {
            d.set_priority(s, Duration::from_micros(100 + (s as u64 % 5)));
        }
        let before = allocs();
        let popped = churn(&mut d, streams, 200);
        assert_eq!(allocs(), before, "{policy:?} allocated");
        assert!(popped > 0);
        assert_eq!(d.rejected(), 200);
    }
}
