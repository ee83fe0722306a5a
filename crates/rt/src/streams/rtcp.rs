//! RTCP for every running stream, on one ordinary thread: sender reports out, receiver reports
//! in, and the reaping of streams whose source ended.

use super::outlet::RtcpOut;
use super::server::{Inner, Running};
use super::stream::lock;
use crate::clock::Clock;
use metronome_sched::{OverloadAction, OverloadWindow};
use metronome_session::sender::{Input, SenderReports, SenderSession};
use metronome_time::{Distribution, NtpTime, Timestamp};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

/// How often the thread looks at every stream. RTT measurement does not suffer from it: receiver
/// reports carry the kernel's arrival time.
const TURN: Duration = Duration::from_millis(20);

pub(super) fn run(inner: &Inner) {
    let mut buf = [0u8; 1500];
    let mut next_window = inner.clock.now() + OVERLOAD_WINDOW;
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
        if inner.clock.now() >= next_window {
            next_window = inner.clock.now() + OVERLOAD_WINDOW;
            watch_overload(inner);
        }
        std::thread::sleep(TURN);
    }
}

/// How often the server judges whether its admitted streams still fit the host.
const OVERLOAD_WINDOW: Duration = Duration::from_secs(1);
/// Warnings kept for the user at most (the oldest go first).
const WARNINGS_KEPT: usize = 64;

/// One window of the overload watch: the send cost the pacing threads measured and the
/// deadlines the streams missed since the last window, judged by `sched::OverloadWatch`.
fn watch_overload(inner: &Inner) {
    let mut cost = Distribution::new();
    let mut misses = 0;
    let mut newest: Option<(u64, String)> = None;
    for (name, r) in lock(&inner.streams).iter_mut() {
        let mut d = lock(&r.rt.send_cost);
        cost.merge(&d);
        d.clear();
        let total = r.rt.counters.deadline_misses.load(Ordering::Relaxed);
        misses += total.saturating_sub(r.misses_seen);
        r.misses_seen = total;
        if newest.as_ref().is_none_or(|(id, _)| r.rt.id > *id) {
            newest = Some((r.rt.id, name.clone()));
        }
    }
    let window = OverloadWindow {
        sends: cost.len(),
        send_cost_p99: Duration::from_nanos(cost.quantile_ns(0.99)),
        budget: inner.calibration.per_packet,
        deadline_misses: misses,
    };
    let action = lock(&inner.overload).observe(window);
    let say = |what: String| {
        let mut w = lock(&inner.warnings);
        if w.len() == WARNINGS_KEPT {
            w.pop_front();
        }
        w.push_back(what);
    };
    match action {
        None => {}
        Some(OverloadAction::Overloaded(why)) => say(format!("overloaded: {why}")),
        Some(OverloadAction::Recovered(why)) => say(why),
        Some(OverloadAction::Shed(why)) => {
            if let Some((_, name)) = newest {
                if inner.remove(&name, true).is_ok() {
                    say(format!(
                        "shed the newest stream '{name}' (--overload shed): {why}"
                    ));
                }
            }
        }
    }
}

/// One stream's RTCP: a due sender report out, what receivers sent in.
fn turn(r: &mut Running, clock: &Clock, buf: &mut [u8]) {
    exchange(&r.rt.session, &r.rtcp, clock, buf);
    // The receivers' reports may have moved the rate controller: the source follows.
    let wire = lock(&r.rt.session).target_rate();
    r.rt.rate.follow(wire);
}

/// The RTCP side of a sender: a [`SenderSession`], or the bare [`SenderReports`] of a raw
/// stream (whose pacer is not on a session yet).
pub(crate) trait SenderRtcp {
    fn poll_rtcp(&mut self, now: Timestamp, wall: NtpTime, buf: &mut [u8]) -> Option<usize>;
    fn handle_rtcp(&mut self, now: Timestamp, wall: NtpTime, from: SocketAddr, data: &[u8]);
    fn bye(&mut self, now: Timestamp, wall: NtpTime, buf: &mut [u8]) -> Option<usize>;
}

impl SenderRtcp for SenderSession {
    fn poll_rtcp(&mut self, now: Timestamp, wall: NtpTime, buf: &mut [u8]) -> Option<usize> {
        self.handle_timeout(now);
        SenderSession::poll_rtcp(self, now, wall, buf)
    }
    fn handle_rtcp(&mut self, now: Timestamp, wall: NtpTime, from: SocketAddr, data: &[u8]) {
        let _ = self.handle_input(now, Input::Rtcp { wall, from, data });
    }
    fn bye(&mut self, now: Timestamp, wall: NtpTime, buf: &mut [u8]) -> Option<usize> {
        SenderSession::bye(self, now, wall, buf)
    }
}

impl SenderRtcp for SenderReports {
    fn poll_rtcp(&mut self, now: Timestamp, wall: NtpTime, buf: &mut [u8]) -> Option<usize> {
        self.poll_transmit(now, wall, buf)
    }
    fn handle_rtcp(&mut self, now: Timestamp, wall: NtpTime, from: SocketAddr, data: &[u8]) {
        SenderReports::handle_rtcp(self, now, wall, from, data);
        while self.poll_event().is_some() {}
    }
    fn bye(&mut self, now: Timestamp, wall: NtpTime, buf: &mut [u8]) -> Option<usize> {
        SenderReports::bye(self, now, wall, buf)
    }
}

/// Access to a sender's RTCP side for one call: through the stream's mutex (the pacing thread
/// locks the same session for every packet, so the lock is held only for the protocol work,
/// never across a system call), or directly where one thread owns it.
pub(crate) trait WithSender {
    fn with<R>(&mut self, f: impl FnOnce(&mut dyn SenderRtcp) -> R) -> R;
}

impl<S: SenderRtcp> WithSender for &Mutex<S> {
    fn with<R>(&mut self, f: impl FnOnce(&mut dyn SenderRtcp) -> R) -> R {
        f(&mut *lock(self))
    }
}

impl<S: SenderRtcp> WithSender for &mut S {
    fn with<R>(&mut self, f: impl FnOnce(&mut dyn SenderRtcp) -> R) -> R {
        f(&mut **self)
    }
}

/// A sender's RTCP turn: a due sender report out to every outlet, and what receivers sent in.
/// Sockets are read and written outside the sender's lock.
pub(crate) fn exchange(
    mut sender: impl WithSender,
    outs: &[RtcpOut],
    clock: &Clock,
    buf: &mut [u8],
) {
    let now = clock.now();
    let wall = clock.wall();
    if let Some(n) = sender.with(|s| s.poll_rtcp(now, wall, buf)) {
        for s in outs {
            s.send(&buf[..n]);
        }
    }
    for s in outs {
        // A bounded drain: a flood on one stream's RTCP port cannot hold up the others.
        for _ in 0..64 {
            let Some(meta) = s.recv(buf) else { break };
            let (now, wall) = clock.arrival(meta.kernel_rx_realtime_ns);
            let data = &buf[..meta.len];
            sender.with(|s| s.handle_rtcp(now, wall, meta.src, data));
        }
    }
}

/// The last sender report with a BYE (RFC 3550 §6.6), to every outlet.
pub(crate) fn say_bye(
    mut sender: impl WithSender,
    outs: &[RtcpOut],
    clock: &Clock,
    buf: &mut [u8],
) {
    let (now, wall) = (clock.now(), clock.wall());
    if let Some(n) = sender.with(|s| s.bye(now, wall, buf)) {
        for s in outs {
            s.send(&buf[..n]);
        }
    }
}

/// Sends the stream's RTCP BYE (RFC 3550 §6.6).
pub(super) fn bye(r: &mut Running, clock: &Clock) {
    let mut buf = [0u8; 1500];
    say_bye(&r.rt.session, &r.rtcp, clock, &mut buf);
}
