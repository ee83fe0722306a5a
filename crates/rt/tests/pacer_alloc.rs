//! The pacing thread allocates nothing per packet (DESIGN.md: the hot path allocates nothing).
//! A counting global allocator counts this thread's allocations across many `Pacer::step` calls.

use metronome_rt::clock::Clock;
use metronome_rt::pacer::{Pacer, Step};
use metronome_rt::sender::{single_stream, SenderConfig, WaitPolicy};
use metronome_rt::streams::stream::lock;
use metronome_rt::streams::MediaOut;
use metronome_rt::thread::RtPolicy;
use metronome_rt::udp::{SocketOptions, UdpReceiver, UdpSender};
use metronome_rt::url::RtpUrl;
use metronome_sched::WaitSelectorConfig;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[global_allocator]
static GLOBAL: metronome_testkit::CountingAlloc = metronome_testkit::CountingAlloc;

fn allocs() -> u64 {
    metronome_testkit::allocations()
}

#[test]
fn pacer_step_allocates_nothing() {
    let rx = UdpReceiver::open(
        &RtpUrl::unicast("127.0.0.1:0".parse().unwrap()),
        &SocketOptions::default(),
    )
    .unwrap();
    let dest = RtpUrl::unicast(rx.local_addr().unwrap());
    let sender = UdpSender::open(&dest, &SocketOptions::default()).unwrap();
    let mut cfg = SenderConfig::new(vec![dest], 1, 1);
    cfg.rt_policy = RtPolicy::Other;
    cfg.lock_memory = false;
    cfg.wait = WaitPolicy::Auto;
    // Make the auto wait switch modes every few packets, so that the switch is measured too.
    cfg.wait_selector = WaitSelectorConfig {
        late_threshold: Duration::ZERO,
        max_late_share: 0.0,
        window: Duration::from_micros(500),
        trial: Duration::from_micros(500),
        retry_after: Duration::from_millis(1),
    };
    cfg.send_time_ext = true;
    let clock = Clock::new();
    let n = 600;
    cfg.ring_slots = n;
    let outputs = vec![MediaOut::Udp(std::sync::Arc::new(sender))];
    let rt = single_stream(&cfg, 5_000_000, clock.now(), 0, outputs);
    let ring = &rt.ring;
    for i in 0..n {
        let mut slot = ring.take_free().unwrap();
        slot.len = 1344;
        slot.payload_len = 1316;
        // Due 20 µs apart from now on: the pacer waits (sleep and spin) for real.
        slot.release = clock.now() + Duration::from_micros(20 * i as u64);
        ring.publish(slot);
    }
    let mut pacer = Pacer::start(&cfg.pacing_thread(), &rt, &clock);
    // A few packets to settle anything lazily initialised by the first system calls.
    for _ in 0..10 {
        assert_eq!(pacer.step(), Step::Sent);
    }
    let before = allocs();
    for _ in 10..n {
        assert_eq!(pacer.step(), Step::Sent);
    }
    let during = allocs() - before;
    assert_eq!(during, 0, "{during} allocations in {} packets", n - 10);
    rt.producer_done.store(true, Ordering::Release);
    assert_eq!(pacer.step(), Step::Done);
    let counters = &rt.counters;
    assert_eq!(counters.packets.load(Ordering::Relaxed), n as u64);
    assert_eq!(counters.send_errors.load(Ordering::Relaxed), 0);
    let result = pacer.finish();
    assert_eq!(lock(&rt.session).stats().pacing.packets, n as u64);
    assert!(
        result.wait_modes.switches_to_busy_poll >= 2,
        "{:?}",
        result.wait_modes
    );
    assert!(
        result.wait_modes.switches_to_sleep >= 2,
        "{:?}",
        result.wait_modes
    );
}
