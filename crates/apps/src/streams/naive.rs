//! The baseline an unmodified server is: one ordinary thread per stream that sleeps for the time
//! left before each packet (`std::thread::sleep`, SCHED_OTHER, the default timer slack) and
//! sends it. The same [`Cursor`] does the sending and the accounting, so only the scheduling
//! differs from the real-time cores.

use super::stream::{Cursor, StreamRt};
use metronome_rt::clock::{thread_cpu_s, Clock};
use metronome_rt::pacing::{Load, Sent};
use metronome_time::Distribution;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Runs one stream until it ends or is stopped; every packet's lateness also goes into `total`.
/// Returns the CPU time the thread used, s.
pub fn run_naive(rt: &StreamRt, clock: &Clock, total: &Mutex<Distribution>) -> f64 {
    let cpu_start = thread_cpu_s();
    let mut cursor = Cursor::new(rt);
    while !rt.stop.load(Ordering::Relaxed) {
        match cursor.load(rt, clock.now()) {
            Load::Ready(job) => {
                let mut release = job.release;
                loop {
                    std::thread::sleep(release.saturating_since(clock.now()));
                    match cursor.send(rt, clock) {
                        Some(Sent::NotYet(j)) => release = j.release,
                        Some(Sent::Sent(late)) => {
                            let ns = u64::try_from(late.as_nanos()).unwrap_or(u64::MAX);
                            if let Ok(mut d) = total.lock() {
                                d.record(ns);
                            }
                            break;
                        }
                        Some(Sent::Dropped) | None => break,
                    }
                }
            }
            Load::Empty => std::thread::sleep(Duration::from_millis(1)),
            Load::Done => break,
        }
    }
    cursor.release(rt);
    rt.finished.store(true, Ordering::Release);
    thread_cpu_s() - cpu_start
}

/// Starts [`run_naive`] on a thread of its own.
pub fn spawn_naive(
    rt: Arc<StreamRt>,
    clock: Arc<Clock>,
    total: Arc<Mutex<Distribution>>,
) -> std::io::Result<std::thread::JoinHandle<f64>> {
    std::thread::Builder::new()
        .name(format!("naive-{}", rt.id))
        .stack_size(256 << 10)
        .spawn(move || run_naive(&rt, &clock, &total))
}
