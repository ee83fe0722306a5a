//! RTCP for every running stream, on one ordinary thread: sender reports out, receiver reports
//! in, and the reaping of streams whose source ended.

use super::{Inner, Running};
use crate::streams::outlet::RtcpOut;
use crate::streams::srtp::StreamSrtp;
use metronome_rt::clock::Clock;
use metronome_rt::sync::lock;
use metronome_rt::udp::RtcpSocket;
use metronome_sched::{OverloadAction, OverloadWindow};
use metronome_session::repair::Outlet;
use metronome_session::sender::{Input, SenderSession};
use metronome_time::Timestamp;
use metronome_time::{Bitrate, Distribution};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

/// The longest the thread waits before it looks at every stream again: what an RTSP
/// session's interleaved reports (which come without a socket to wait on) may wait. Reports on
/// UDP are handled as they arrive, and timers (a sender report due, a rate controller's) when
/// they fall due: a rate controller's reaction to feedback is part of its control loop (TFRC
/// with 20 ms more of it overshot into a second loss event now and then).
const TURN: Duration = Duration::from_millis(20);

pub(super) fn run(inner: &Inner) {
    let mut buf = [0u8; 1500];
    let mut next_window = inner.clock.now() + OVERLOAD_WINDOW;
    let mut wait = Wait::default();
    while !inner.stop.load(Ordering::Acquire) {
        if wait.full_turn_due(inner.clock.now()) {
            let ended = full_turn(inner, &mut wait, &mut buf);
            reap(inner, ended);
        } else {
            wait.ready_turn(inner, &mut buf);
        }
        if inner.clock.now() >= next_window {
            next_window = inner.clock.now() + OVERLOAD_WINDOW;
            watch_overload(inner);
        }
        inner.farewells.say_due(&inner.clock);
        let bye_due = inner.farewells.next_due().unwrap_or(next_window);
        wait.until(&inner.clock, next_window.min(bye_due));
    }
}

/// Every stream's turn; what the thread waits for next; the streams whose source ended.
fn full_turn(inner: &Inner, wait: &mut Wait, buf: &mut [u8]) -> Vec<String> {
    wait.clear(inner.clock.now() + TURN);
    let mut ended = Vec::new();
    for (name, r) in lock(&inner.streams).iter_mut() {
        turn(inner, r, buf);
        wait.add(name, r);
        if r.rt.finished.load(Ordering::Acquire) && !r.rt.stop.load(Ordering::Acquire) {
            ended.push(name.clone());
        }
    }
    ended
}

/// Stops the streams whose source ended, keeping what they said and their last status.
fn reap(inner: &Inner, ended: Vec<String>) {
    for name in ended {
        let running = lock(&inner.streams).remove(&name);
        if let Some(mut r) = running {
            inner.stop_stream(&mut r, false);
            // What its source said, kept for the server's next take.
            let said: Vec<String> = lock(&r.rt.warnings).drain(..).collect();
            lock(&inner.warnings).extend(said.into_iter().map(|w| format!("stream '{name}': {w}")));
            // Stopped with the server (its media stopped, its last repairs answered): removed,
            // as a stream the server stops is; otherwise its source ended.
            let how = match r.rt.media_stop.load(Ordering::Acquire) {
                true => "removed",
                false => "ended",
            };
            let status = super::status::stream_status(&r, how, &inner.clock);
            inner.remember(status);
            inner.farewells.add(inner.clock.now(), r);
        }
    }
}

/// What the thread waits for between turns: a report on a stream's RTCP socket (then that
/// stream alone has its turn, so that a thousand streams' reports do not each cost a look at
/// all of them), the first timer due, or at most [`TURN`] (then every stream has its turn).
#[derive(Default)]
struct Wait {
    /// The sockets, held so that none closes while it is waited on, and each one's stream.
    sockets: Vec<Arc<RtcpSocket>>,
    owners: Vec<String>,
    set: Vec<libc::pollfd>,
    /// When every stream next has its turn: the first timer due, or a turn after the last.
    full_at: Timestamp,
}

impl Wait {
    fn full_turn_due(&self, now: Timestamp) -> bool {
        now >= self.full_at
    }

    fn clear(&mut self, latest: Timestamp) {
        self.sockets.clear();
        self.owners.clear();
        self.full_at = latest;
    }

    fn add(&mut self, name: &str, r: &Running) {
        for o in &r.rtcp {
            if let RtcpOut::Udp(s) = o {
                self.sockets.push(s.clone());
                self.owners.push(name.to_string());
            }
        }
        sooner(&mut self.full_at, r);
    }

    /// The turns of the streams whose sockets the last wait found readable.
    fn ready_turn(&mut self, inner: &Inner, buf: &mut [u8]) {
        let mut streams = lock(&inner.streams);
        for (p, name) in self.set.iter_mut().zip(&self.owners) {
            if std::mem::take(&mut p.revents) == 0 {
                continue;
            }
            if let Some(r) = streams.get_mut(name) {
                turn(inner, r, buf);
                sooner(&mut self.full_at, r);
            }
        }
    }

    /// Waits until a socket is readable, the next full turn, or `also`; at least a
    /// millisecond, so that a timer the session leaves in the past cannot make the thread spin.
    fn until(&mut self, clock: &Clock, also: Timestamp) {
        let now = clock.now();
        let timeout = self
            .full_at
            .min(also)
            .saturating_since(now)
            .max(Duration::from_millis(1));
        let fds = self.sockets.iter().map(|s| s.socket().as_raw_fd());
        if metronome_rt::poll::wait_readable_in(fds, &mut self.set, timeout).is_err() {
            self.set.clear();
            std::thread::sleep(timeout);
        }
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
        budget: inner.calibration.per_packet_us.to_duration(),
        deadline_misses: misses,
        producer_cpu: producer_cpu(inner),
        encode_budget: lock(&inner.encoders).budget(),
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
                if inner.remove(&name, super::Bye::Now).is_ok() {
                    say(format!(
                        "shed the newest stream '{name}' (--overload shed): {why}"
                    ));
                }
            }
        }
    }
}

/// The CPU the producer threads used since the last window, CPUs.
fn producer_cpu(inner: &Inner) -> f64 {
    let Some(total) = lock(&inner.producers).as_ref().map(|p| p.cpu_ns()) else {
        return 0.0;
    };
    let now = inner.clock.now();
    let mut p = lock(&inner.producer_cpu);
    let span = now.saturating_since(p.at).as_secs_f64();
    if span > 0.0 {
        p.last = total.saturating_sub(p.seen_ns) as f64 / 1e9 / span;
    }
    p.seen_ns = total;
    p.at = now;
    p.last
}

/// Brings `at` forward to when the stream's RTCP side next needs the thread, if sooner.
fn sooner(at: &mut Timestamp, r: &Running) {
    if let Some(t) = lock(&r.rt.session).rtcp_timeout() {
        *at = (*at).min(t);
    }
}

/// One stream's RTCP: what receivers sent in, a due sender report out.
fn turn(inner: &Inner, r: &mut Running, buf: &mut [u8]) {
    let before = Glance::of(&lock(&r.rt.session));
    exchange(
        &r.rt.session,
        &r.rtcp,
        r.rt.srtp.as_ref(),
        &inner.clock,
        buf,
    );
    // The receivers' reports may have moved the rate controller: the source follows, and
    // hears the rate after the reports (not after a timer of the same turn).
    let (wire, reports, reported) = {
        let s = lock(&r.rt.session);
        before.tell_if_sooner(inner, r, &s);
        (s.target_rate(), s.rate_reports(), s.reported_rate())
    };
    r.rt.rate.follow_reports(wire, reports, reported);
}

/// A stream's head packet and rate before a change made beside its pacing thread (reports, a
/// person's rate): if the packet in hand may leave sooner after it, its core is told.
#[derive(Clone, Copy)]
pub(super) struct Glance {
    send: Option<Timestamp>,
    rate: Bitrate,
}

impl Glance {
    pub(super) fn of(s: &SenderSession) -> Self {
        Glance {
            send: s.next_send(),
            rate: s.target_rate(),
        }
    }

    /// Marks the stream and tells its core when, in `s`, its rate rose, its head's time moved
    /// up, or a packet came into hand meanwhile (loaded at the rate before): the pacing
    /// thread holds its job at the time it was told (up to 500 ms at TFMCC's start). Telling
    /// it when nothing moved costs one look at the lane.
    pub(super) fn tell_if_sooner(self, inner: &Inner, r: &Running, s: &SenderSession) {
        let after = Glance::of(s);
        let sooner = after.rate > self.rate
            || match (self.send, after.send) {
                (Some(b), Some(a)) => a < b,
                (None, Some(_)) => true,
                _ => false,
            };
        if sooner {
            r.rt.sooner.store(true, Ordering::Release);
            if let Some(core) = inner.cores.get(r.core) {
                core.note_sooner();
            }
        }
    }
}

/// A sender's RTCP turn: what receivers sent in, then a due sender report out to every outlet.
/// Sockets are read and written outside the session's lock: the pacing thread locks the same
/// session for every packet, so the lock is held only for the protocol work.
pub(crate) fn exchange(
    session: &Mutex<SenderSession>,
    outs: &[RtcpOut],
    srtp: Option<&StreamSrtp>,
    clock: &Clock,
    buf: &mut [u8],
) {
    // What came in first, so that what the controller answers (an APP packet) goes at once.
    for (i, s) in outs.iter().enumerate() {
        // A bounded drain: a flood on one stream's RTCP port cannot hold up the others.
        for _ in 0..64 {
            let Some(meta) = s.recv(buf) else { break };
            let (now, wall) = clock.arrival(meta.kernel_rx_realtime_ns);
            let plain;
            let data = match srtp {
                None => &buf[..meta.len],
                Some(k) => match k.unprotect_rtcp(&buf[..meta.len]) {
                    Some(p) => {
                        plain = p;
                        &plain[..]
                    }
                    None => continue,
                },
            };
            // Each destination has its RTCP socket (or connection): what asks for repairs
            // there is answered there.
            let rtcp = Input::Rtcp {
                wall,
                from: meta.src,
                outlet: Outlet(i),
                data,
            };
            let _ = lock(session).handle_input(now, rtcp);
        }
    }
    let now = clock.now();
    let wall = clock.wall();
    let report = {
        let mut s = lock(session);
        s.handle_timeout(now);
        s.poll_rtcp(now, wall, buf)
    };
    if let Some(n) = report {
        send_rtcp(outs, srtp, &buf[..n]);
    }
}

/// A compound RTCP packet to every outlet, as SRTCP for a stream with SRTP.
fn send_rtcp(outs: &[RtcpOut], srtp: Option<&StreamSrtp>, packet: &[u8]) {
    let protected;
    let packet = match srtp {
        None => packet,
        Some(k) => match k.protect_rtcp(packet) {
            Some(p) => {
                protected = p;
                &protected[..]
            }
            None => return,
        },
    };
    for s in outs {
        s.send(packet);
    }
}

/// The last sender report with a BYE (RFC 3550 §6.6), to every outlet.
pub(crate) fn say_bye(
    session: &Mutex<SenderSession>,
    outs: &[RtcpOut],
    srtp: Option<&StreamSrtp>,
    clock: &Clock,
    buf: &mut [u8],
) {
    let (now, wall) = (clock.now(), clock.wall());
    let bye = lock(session).bye(now, wall, buf);
    if let Some(n) = bye {
        send_rtcp(outs, srtp, &buf[..n]);
    }
}

/// Sends the stream's RTCP BYE (RFC 3550 §6.6).
pub(super) fn bye(r: &mut Running, clock: &Clock) {
    let mut buf = [0u8; 1500];
    say_bye(&r.rt.session, &r.rtcp, r.rt.srtp.as_ref(), clock, &mut buf);
}
