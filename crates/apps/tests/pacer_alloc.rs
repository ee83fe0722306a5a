//! The pacing thread allocates nothing per packet (DESIGN.md: the hot path allocates nothing).
//! A counting global allocator counts this thread's allocations across many turns of a core's
//! pacing loop (`metronome_rt::pacing::Core::step`), the loop every MPEG-TS stream is sent by.
//! And every packet that loop sends, FEC among them, notes what its send cost.

use metronome_apps::streams::stream::{StreamRt, TsLane};
use metronome_apps::streams::MediaOut;
use metronome_cc::FixedRate;
use metronome_rt::clock::Clock;
use metronome_rt::pacing::PacingThreadConfig;
use metronome_rt::pacing::{Command, Core, CoreConfig, CoreShared, WaitPolicy};
use metronome_rt::ring::PacketRing;
use metronome_rt::sync::lock;
use metronome_rt::thread::RtPolicy;
use metronome_rt::udp::{SocketOptions, UdpReceiver, UdpSender};
use metronome_rt::url::RtpUrl;
use metronome_rt::wait::WaiterConfig;
use metronome_sched::{PacingConfig, Policy, TaskParams, WaitSelectorConfig};
use metronome_session::sender::{
    JobConfig, SenderReportsConfig, SenderSession, SenderSessionConfig,
};
use metronome_time::{Bitrate, MediaClock};
use metronome_wire::Ssrc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: metronome_testkit::CountingAlloc = metronome_testkit::CountingAlloc;

fn allocs() -> u64 {
    metronome_testkit::allocations()
}

/// A 5 Mbit/s stream of `n` packets to `dest`, one packet per job.
fn stream(dest: &RtpUrl, n: usize, clock: &Clock) -> StreamRt {
    stream_of(dest, session(n, clock), n, clock)
}

/// One packet's job: its period and relative deadline.
const INTERVAL: Duration = Duration::from_micros(2_100);

/// The stream's session: room for `n` packets, one a job.
fn session(n: usize, clock: &Clock) -> SenderSession {
    SenderSession::new(
        SenderSessionConfig {
            reports: SenderReportsConfig {
                ssrc: Ssrc(1),
                cname: "alloc-test".into(),
                clock: MediaClock::VIDEO_90K,
                rtp_ts_base: metronome_time::RtpTime(0),
                session_bw_bps: 5_000_000,
                rtcp_min_interval: Duration::from_secs(1),
                max_receivers: 4,
                seed: 1,
            },
            pacing: PacingConfig::default(),
            jobs: JobConfig {
                period: None,
                deadline: INTERVAL,
            },
            queue_capacity: n,
        },
        clock.now(),
        Box::new(FixedRate::new(Bitrate::bps(5_000_000))),
    )
}

/// A stream of `session`'s to `dest`, room for `n` packets.
fn stream_of(dest: &RtpUrl, session: SenderSession, n: usize, clock: &Clock) -> StreamRt {
    let sender = UdpSender::open(dest, &SocketOptions::default()).unwrap();
    let task = TaskParams {
        period: INTERVAL,
        deadline: INTERVAL,
        cost: Duration::from_micros(10),
        bitrate_bps: 5_000_000,
    };
    StreamRt::new(
        1,
        "alloc".into(),
        task,
        clock.now(),
        PacketRing::new(n, 1400),
        vec![MediaOut::Udp(Arc::new(sender))],
        true,
        session,
    )
}

/// A receiver on a free loopback port, and where to send to it.
fn receiver() -> (UdpReceiver, RtpUrl) {
    let rx = UdpReceiver::open(
        &RtpUrl::unicast("127.0.0.1:0".parse().unwrap()),
        &SocketOptions::default(),
    )
    .unwrap();
    let dest = RtpUrl::unicast(rx.local_addr().unwrap());
    (rx, dest)
}

/// An EDF core whose auto wait switches modes every few packets (so that the switch is
/// measured too).
fn core_config() -> CoreConfig {
    CoreConfig {
        policy: Policy::Edf,
        thread: PacingThreadConfig {
            rt_policy: RtPolicy::Other,
            wait: WaitPolicy::Auto,
            waiter: WaiterConfig::default(),
            // Make the auto wait switch modes every few packets, so that the switch is
            // measured too.
            wait_selector: WaitSelectorConfig {
                late_threshold: Duration::ZERO,
                max_late_share: 0.0,
                window: Duration::from_micros(500),
                trial: Duration::from_micros(500),
                retry_after: Duration::from_millis(1),
            },
            cpu: None,
            lock_memory: false,
        },
        capacity: 16,
    }
}

/// Puts `n` RTP packets of 1 344 bytes (sequence numbers from 0) in the stream's ring, due
/// 20 µs apart from now on: the pacer waits (sleep and spin) for real.
fn publish(rt: &StreamRt, n: usize, clock: &Clock) {
    for i in 0..n {
        let mut slot = rt.ring.take_free().unwrap();
        slot.len = 1344;
        slot.payload_len = 1316;
        let header = slot.bytes_mut();
        header[..12].fill(0);
        header[0] = 0x80;
        header[1] = 33;
        header[2..4].copy_from_slice(&(i as u16).to_be_bytes());
        header[8..12].copy_from_slice(&1u32.to_be_bytes());
        slot.release = clock.now() + Duration::from_micros(20 * i as u64);
        rt.ring.publish(slot);
    }
}

/// Publishes `n` packets of the stream's (see [`publish`]) and hands the stream to the core.
fn start(rt: &Arc<StreamRt>, shared: &CoreShared, n: usize, clock: &Clock) {
    publish(rt, n, clock);
    assert!(shared
        .commands
        .push(Command::Add(TsLane::boxed(rt.clone())))
        .is_ok());
}

#[test]
fn pacing_loop_allocates_nothing_per_packet() {
    let (_rx, dest) = receiver();
    let clock = Clock::new();
    let n = 600;
    let rt = Arc::new(stream(&dest, n, &clock));
    let cfg = core_config();
    let shared = CoreShared::new(cfg.capacity);
    let mut core = Core::new(&cfg, &shared, &clock);
    start(&rt, &shared, n, &clock);
    let sent = || rt.counters.packets.load(Ordering::Relaxed) as usize;
    let deadline = clock.now() + Duration::from_secs(30);
    // A few packets to settle anything lazily initialised by the first system calls.
    while sent() < 10 && clock.now() < deadline {
        core.step();
    }
    let before = allocs();
    while sent() < n && clock.now() < deadline {
        if sent() % 50 == 25 {
            // As the RTCP thread does when the stream's rate rose: the core asks the lane
            // again (`Lane::sooner`), without allocating either.
            rt.sooner.store(true, Ordering::Release);
            shared.note_sooner();
        }
        core.step();
    }
    let during = allocs() - before;
    assert_eq!(sent(), n, "every packet left within the time allowed");
    assert_eq!(during, 0, "{during} allocations in {} packets", n - 10);
    rt.producer_done.store(true, Ordering::Release);
    for _ in 0..10 {
        core.step();
    }
    assert!(
        rt.finished.load(Ordering::Acquire),
        "the core let the ended stream go"
    );
    assert_eq!(rt.counters.send_errors.load(Ordering::Relaxed), 0);
    let report = core.finish();
    assert_eq!(lock(&rt.session).stats().pacing.packets, n as u64);
    assert!(
        report.wait_modes.switches_to_busy_poll >= 2,
        "{:?}",
        report.wait_modes
    );
    assert!(
        report.wait_modes.switches_to_sleep >= 2,
        "{:?}",
        report.wait_modes
    );
}

/// The FEC packets a stream makes leave from its pacing loop beside its media, and each send
/// notes its cost per destination as a media packet's does: admission budgets every packet a
/// stream sends, and the overload watch compares what they cost.
#[test]
fn fec_packets_note_their_send_cost_beside_the_media() {
    use metronome_session::repair::FecConfig;
    let (_rx, dest) = receiver();
    let ((_column_rx, columns), (_row_rx, rows)) = (receiver(), receiver());
    let clock = Clock::new();
    let n = 64;
    let shape = metronome_config::repair::FecShape {
        columns: 4,
        rows: 4,
    };
    let session = session(n, &clock).with_fec(FecConfig::new(shape));
    let out = |to: &RtpUrl| {
        MediaOut::Udp(Arc::new(
            UdpSender::open(to, &SocketOptions::default()).unwrap(),
        ))
    };
    let rt = Arc::new(
        stream_of(&dest, session, n, &clock).with_fec_outputs(vec![[out(&columns), out(&rows)]]),
    );
    let cfg = core_config();
    let shared = CoreShared::new(cfg.capacity);
    let mut core = Core::new(&cfg, &shared, &clock);
    start(&rt, &shared, n, &clock);
    rt.producer_done.store(true, Ordering::Release);
    let deadline = clock.now() + Duration::from_secs(30);
    while !rt.finished.load(Ordering::Acquire) && clock.now() < deadline {
        core.step();
    }
    assert!(
        rt.finished.load(Ordering::Acquire),
        "the stream ended in time"
    );
    assert_eq!(rt.counters.send_errors.load(Ordering::Relaxed), 0);
    let fec = lock(&rt.session).fec_stats().unwrap();
    // 4 × 4 matrices over 64 packets: a row FEC packet per 4 packets, and a column one per
    // column of the first three matrices (a matrix's columns leave spread over the next one's
    // packets, and there is none after the fourth).
    assert_eq!((fec.rows, fec.columns), (16, 12), "{fec:?}");
    let noted = lock(&rt.send_cost).len();
    assert_eq!(noted, n as u64 + fec.rows + fec.columns);
    core.finish();
}
