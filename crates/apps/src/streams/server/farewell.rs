//! The RTCP BYE of a stream that ended by itself (its source ran out) or with the server (its
//! `--duration`, a signal) leaves [`BYE_AFTER_LAST`] after the stream's last packet.
//!
//! RFC 3550 §6.3.7 lets a session of fewer than 50 members send BYE at once, and GStreamer
//! does. But FFmpeg's RTP input reads a waiting RTCP packet before waiting RTP packets, and
//! ends the stream at BYE: a receiver still reading the last frames when the BYE arrives
//! drops them. Seen in the test suite on a busy machine (FFmpeg showed 124 of a stream's 125
//! frames), and every time when FFmpeg is stopped for 0.2 s over the stream's end (120-123).
//! What a client or operator asks for (RTSP TEARDOWN, `DELETE /streams/NAME`) is said at once,
//! also for a stream that waits here. A stream of the same name that starts meanwhile (an RTSP
//! client that plays again) settles it: the same SSRC goes on and says no BYE, another says it
//! at once. A raw (RFC 4175) sender, on a thread of its own, waits the same before its BYE
//! (`uncompressed/sender`). Not yet here: the RTSP sessions a stopping server tears down say
//! BYE at once.

use super::Running;
use metronome_rt::clock::Clock;
use metronome_rt::sync::lock;
use metronome_time::Timestamp;
use std::sync::Mutex;
use std::time::Duration;

/// How long after its last packet an ended stream says BYE: a receiver that far behind reads
/// the last frames first. Short against the 2 s a command has to stop after SIGTERM.
pub(crate) const BYE_AFTER_LAST: Duration = Duration::from_millis(250);

/// When a stream ended by itself or with the server says RTCP BYE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::streams) enum Bye {
    /// Never: its source is not leaving (RTSP PAUSE; RFC 3550 §6.6).
    Never,
    /// At once: a client or operator asked.
    Now,
    /// [`BYE_AFTER_LAST`] from now: it ended by itself or with the server.
    AfterLast,
}

/// Stopped streams waiting to say BYE, each with when.
#[derive(Default)]
pub(in crate::streams) struct Farewells(Mutex<Vec<(Timestamp, Running)>>);

impl Farewells {
    /// `stream` (stopped) says BYE [`BYE_AFTER_LAST`] after `now`.
    pub(in crate::streams) fn add(&self, now: Timestamp, stream: Running) {
        lock(&self.0).push((now + BYE_AFTER_LAST, stream));
    }

    /// Takes the streams named `name` waiting to say BYE: a stream of that name is starting,
    /// or a client asks now.
    pub(in crate::streams) fn take(&self, name: &str) -> Vec<Running> {
        self.take_where(|_, r| r.spec.name == name)
    }

    /// Takes the streams waiting for which `pick` (their due time, the stream) holds.
    fn take_where(&self, pick: impl Fn(Timestamp, &Running) -> bool) -> Vec<Running> {
        let mut waiting = lock(&self.0);
        let (picked, rest) = std::mem::take(&mut *waiting)
            .into_iter()
            .partition(|(due, r)| pick(*due, r));
        *waiting = rest;
        picked.into_iter().map(|(_, r)| r).collect()
    }

    /// When the next BYE is due, if one waits.
    pub(in crate::streams) fn next_due(&self) -> Option<Timestamp> {
        lock(&self.0).iter().map(|(due, _)| *due).min()
    }

    /// Says BYE for every stream whose time came.
    pub(in crate::streams) fn say_due(&self, clock: &Clock) {
        let now = clock.now();
        for mut r in self.take_where(|due, _| due <= now) {
            super::rtcp::bye(&mut r, clock);
        }
    }

    /// Waits until the last BYE is due, and says them all: the server is stopping.
    pub(in crate::streams) fn say_all(&self, clock: &Clock) {
        let last = lock(&self.0).iter().map(|(due, _)| *due).max();
        if let Some(last) = last {
            let wait = last.saturating_since(clock.now());
            std::thread::sleep(wait);
        }
        for mut r in self.take_where(|_, _| true) {
            super::rtcp::bye(&mut r, clock);
        }
    }
}
