//! RTCP for every running stream, on one ordinary thread: sender reports out, receiver reports
//! in, and the reaping of streams whose source ended.

use super::outlet::RtcpOut;
use super::server::{Inner, Running};
use super::stream::{lock, StreamRt};
use crate::clock::Clock;
use metronome_session::sender::SenderReports;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How often the thread looks at every stream. RTT measurement does not suffer from it: receiver
/// reports carry the kernel's arrival time.
const TURN: Duration = Duration::from_millis(20);

pub(super) fn run(inner: &Inner) {
    let mut buf = [0u8; 1500];
    while !inner.stop.load(Ordering::Acquire) {
        let mut ended = Vec::new();
        {
            let mut streams = lock(&inner.streams);
            for (name, r) in streams.iter_mut() {
                turn(r, &inner.clock, &mut buf);
                if r.rt.finished.load(Ordering::Acquire) && !r.rt.stop.load(Ordering::Acquire) {
                    ended.push(name.clone());
                }
            }
        }
        for name in ended {
            let running = lock(&inner.streams).remove(&name);
            if let Some(mut r) = running {
                inner.stop_stream(&mut r, true);
                let status = super::status::stream_status(&r, "ended", &inner.clock);
                inner.remember(status);
            }
        }
        std::thread::sleep(TURN);
    }
}

/// One stream's RTCP: report what was sent, send a due SR, read what receivers said.
fn turn(r: &mut Running, clock: &Clock, buf: &mut [u8]) {
    record_sent(&mut r.reports, &r.rt);
    exchange(&mut r.reports, &r.rtcp, clock, buf);
}

/// A sender's RTCP turn once its counts are recorded: a due sender report out to every
/// outlet, and what receivers sent in (any stream that paces itself uses it too).
pub(crate) fn exchange(
    reports: &mut SenderReports,
    outs: &[RtcpOut],
    clock: &Clock,
    buf: &mut [u8],
) {
    let now = clock.now();
    if let Some(n) = reports.poll_transmit(now, clock.wall(), buf) {
        for s in outs {
            s.send(&buf[..n]);
        }
    }
    for s in outs {
        // A bounded drain: a flood on one stream's RTCP port cannot hold up the others.
        for _ in 0..64 {
            let Some(meta) = s.recv(buf) else { break };
            let (now, wall) = clock.arrival(meta.kernel_rx_realtime_ns);
            reports.handle_rtcp(now, wall, meta.src, &buf[..meta.len]);
        }
    }
    while reports.poll_event().is_some() {}
}

/// The last sender report with a BYE (RFC 3550 §6.6), to every outlet.
pub(crate) fn say_bye(
    reports: &mut SenderReports,
    outs: &[RtcpOut],
    clock: &Clock,
    buf: &mut [u8],
) {
    if let Some(n) = reports.bye(clock.now(), clock.wall(), buf) {
        for s in outs {
            s.send(&buf[..n]);
        }
    }
}

fn record_sent(reports: &mut SenderReports, rt: &StreamRt) {
    let c = &rt.counters;
    reports.record_sent(
        c.packets.load(Ordering::Relaxed),
        c.payload_octets.load(Ordering::Relaxed),
    );
    reports.set_schedule_offset(Duration::from_nanos(
        c.schedule_offset_ns.load(Ordering::Relaxed),
    ));
}

/// Sends the stream's RTCP BYE (RFC 3550 §6.6), after a last count of what was sent.
pub(super) fn bye(r: &mut Running, clock: &Clock) {
    let mut buf = [0u8; 1500];
    record_sent(&mut r.reports, &r.rt);
    say_bye(&mut r.reports, &r.rtcp, clock, &mut buf);
}
