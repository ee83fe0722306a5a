//! One live source for many viewers: a [`LiveHub`] runs the source (the test pattern's
//! encoder and mux) once, and each viewer's stream reads it through a [`HubTap`], a
//! [`TsSource`] of its own. N viewers cost one encode.
//!
//! - **Pulled, not pushed.** The hub makes packets only when the tap furthest ahead asks for one
//!   it does not have, so it runs at the pace of its viewers (each produced a little ahead of
//!   its due times) and not at all once they have gone.
//! - **A bounded window.** The hub keeps the last `LiveHub::window` packets. A tap joins at
//!   the newest *join point* in it: the last PAT at or before the newest packet that starts an
//!   IDR picture (the mux's random_access_indicator), so that its viewer can demultiplex and
//!   decode from its first packets. A tap that falls out of the window jumps to the newest
//!   join point (its viewer loses what it skipped, as a player that fell behind a live stream).
//! - **Each tap its own timeline.** A tap's packets are due at the hub's times less the hub time
//!   of its first packet: every viewer's stream starts at zero, paced by its own sender.
//!
//! The hub's rate is fixed: one viewer's rate controller cannot change what the others see.

use crate::{MediaError, TsSource};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

const TS: usize = 188;
const PID_PAT: u16 = 0;

/// The source and what it made that viewers may still need.
pub struct LiveHub {
    source: Box<dyn TsSource>,
    /// Packets `first..first + len`, with their times on the hub's timeline.
    packets: VecDeque<(Duration, [u8; TS])>,
    first: u64,
    window: usize,
    /// Index of the last PAT, and of the newest join point.
    last_pat: Option<u64>,
    join: Option<u64>,
    ended: bool,
    made: u64,
    describe: String,
    nominal: Option<u64>,
    /// Runs when the hub goes (its last tap dropped): gives back what was reserved for it.
    on_drop: Option<Box<dyn FnOnce() + Send>>,
}

impl Drop for LiveHub {
    fn drop(&mut self) {
        if let Some(f) = self.on_drop.take() {
            f();
        }
    }
}

impl LiveHub {
    /// A hub over a live `source` that keeps up to `window` packets (at least 1).
    pub fn new(source: Box<dyn TsSource>, window: usize) -> Arc<Mutex<LiveHub>> {
        let describe = format!("shared {}", source.describe());
        let nominal = source.nominal_bitrate();
        Arc::new(Mutex::new(LiveHub {
            source,
            packets: VecDeque::with_capacity(window.clamp(1, 4096)),
            first: 0,
            window: window.max(1),
            last_pat: None,
            join: None,
            ended: false,
            made: 0,
            describe,
            nominal,
            on_drop: None,
        }))
    }

    /// Something to run when the hub goes (it goes with its last tap).
    pub fn on_drop(&mut self, f: Box<dyn FnOnce() + Send>) {
        self.on_drop = Some(f);
    }

    /// The packets a hub of this source keeps for `span` at `bitrate` bit/s.
    pub fn window_for(bitrate: u64, span: Duration) -> usize {
        ((bitrate as f64 * span.as_secs_f64()) / (TS * 8) as f64).ceil() as usize
    }

    /// Packets the source has made so far (one encode, however many taps).
    pub fn made(&self) -> u64 {
        self.made
    }

    fn end(&self) -> u64 {
        self.first + self.packets.len() as u64
    }

    /// Makes packets until packet `index` exists; `false` if the source ended first.
    fn fill_to(&mut self, index: u64) -> Result<bool, MediaError> {
        while self.end() <= index {
            if self.ended {
                return Ok(false);
            }
            let mut p = [0u8; TS];
            let Some(t) = self.source.next_packet(&mut p)? else {
                self.ended = true;
                return Ok(false);
            };
            self.push(t, p);
        }
        Ok(true)
    }

    fn push(&mut self, t: Duration, p: [u8; TS]) {
        let index = self.end();
        let pid = u16::from_be_bytes([p[1] & 0x1f, p[2]]);
        if pid == PID_PAT {
            self.last_pat = Some(index);
        }
        let adaptation = p[3] & 0x20 != 0 && p[4] > 0;
        let random_access = adaptation && p[5] & 0x40 != 0;
        if random_access {
            self.join = self.last_pat.or(Some(index));
        }
        self.packets.push_back((t, p));
        self.made += 1;
        while self.packets.len() > self.window {
            self.packets.pop_front();
            self.first += 1;
        }
        if self.join.is_some_and(|j| j < self.first) {
            self.join = None;
        }
    }

    /// Where a new tap starts: the newest join point, else (none yet) the next packet made.
    fn join_point(&mut self) -> Result<u64, MediaError> {
        if let Some(j) = self.join {
            return Ok(j);
        }
        // No IDR yet in the window: make packets until one comes (a GOP at most).
        let mut at = self.end();
        while self.join.is_none() && self.fill_to(at)? {
            at += 1;
        }
        Ok(self.join.unwrap_or(self.first))
    }
}

/// One viewer's view of a [`LiveHub`].
pub struct HubTap {
    hub: Arc<Mutex<LiveHub>>,
    next: u64,
    /// The hub time of this tap's first packet: its timeline's zero.
    zero: Option<Duration>,
    last: Duration,
    skipped: u64,
    describe: String,
    nominal: Option<u64>,
}

fn lock(hub: &Mutex<LiveHub>) -> MutexGuard<'_, LiveHub> {
    hub.lock().unwrap_or_else(|e| e.into_inner())
}

impl HubTap {
    /// A tap that starts at the hub's newest join point.
    pub fn join(hub: &Arc<Mutex<LiveHub>>) -> Result<HubTap, MediaError> {
        let mut h = lock(hub);
        let next = h.join_point()?;
        Ok(HubTap {
            next,
            zero: None,
            last: Duration::ZERO,
            skipped: 0,
            describe: h.describe.clone(),
            nominal: h.nominal,
            hub: hub.clone(),
        })
    }

    /// Packets this tap jumped over after falling out of the hub's window.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }
}

impl TsSource for HubTap {
    fn next_packet(&mut self, out: &mut [u8; TS]) -> Result<Option<Duration>, MediaError> {
        let mut h = lock(&self.hub);
        if self.next < h.first {
            // Fell out of the window: on at the newest join point.
            let to = h.join_point()?.max(h.first);
            self.skipped += to - self.next;
            self.next = to;
        }
        if !h.fill_to(self.next)? {
            return Ok(None);
        }
        let (t, p) = h.packets[(self.next - h.first) as usize];
        drop(h);
        self.next += 1;
        out.copy_from_slice(&p);
        let zero = *self.zero.get_or_insert(t);
        // Times never go backwards, also across a jump.
        let t = t.saturating_sub(zero).max(self.last);
        self.last = t;
        Ok(Some(t))
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn nominal_bitrate(&self) -> Option<u64> {
        self.nominal
    }

    fn is_live(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A live-like source: packet `i` due at `i` ms; a PAT every 10 packets, an IDR start every
    /// 40 (packet 3 of each 40), the packet's index in bytes 8..16.
    struct Counting {
        i: u64,
        made: Arc<Mutex<u64>>,
    }

    impl TsSource for Counting {
        fn next_packet(&mut self, out: &mut [u8; TS]) -> Result<Option<Duration>, MediaError> {
            *self.made.lock().unwrap() += 1;
            out.fill(0xff);
            out[0] = 0x47;
            let pid: u16 = if self.i % 10 == 0 { 0 } else { 0x100 };
            out[1] = (pid >> 8) as u8;
            out[2] = pid as u8;
            out[3] = if self.i % 40 == 3 { 0x30 } else { 0x10 };
            out[4] = 7;
            out[5] = if self.i % 40 == 3 { 0x40 } else { 0 };
            out[8..16].copy_from_slice(&self.i.to_be_bytes());
            let t = Duration::from_millis(self.i);
            self.i += 1;
            Ok(Some(t))
        }
        fn describe(&self) -> String {
            "counting".into()
        }
        fn nominal_bitrate(&self) -> Option<u64> {
            Some(1_504_000)
        }
        fn is_live(&self) -> bool {
            true
        }
    }

    fn hub(window: usize) -> (Arc<Mutex<LiveHub>>, Arc<Mutex<u64>>) {
        let made = Arc::new(Mutex::new(0));
        let src = Counting {
            i: 0,
            made: made.clone(),
        };
        (LiveHub::new(Box::new(src), window), made)
    }

    fn read(tap: &mut HubTap) -> (u64, Duration) {
        let mut p = [0u8; TS];
        let t = tap.next_packet(&mut p).unwrap().unwrap();
        (u64::from_be_bytes(p[8..16].try_into().unwrap()), t)
    }

    #[test]
    fn many_taps_cost_one_encode_and_start_at_a_pat_before_an_idr() {
        let (hub, made) = hub(400);
        let mut a = HubTap::join(&hub).unwrap();
        // The first join point: the PAT (0) before the IDR start (3).
        assert_eq!(read(&mut a), (0, Duration::ZERO));
        for _ in 0..100 {
            read(&mut a);
        }
        let mut b = HubTap::join(&hub).unwrap();
        // The newest IDR start is 83, after the PAT at 80: b starts there, at its own zero.
        assert_eq!(read(&mut b), (80, Duration::ZERO));
        assert_eq!(read(&mut b), (81, Duration::from_millis(1)));
        for _ in 82..=100 {
            read(&mut b);
        }
        // b is behind a: it read what a made, nothing new was encoded for it.
        assert_eq!(*made.lock().unwrap(), 101);
        assert_eq!(lock(&hub).made(), 101);
        // One past what a read: made once, for whichever asks first.
        assert_eq!(read(&mut b).0, 101);
        assert_eq!(read(&mut a).0, 101);
        assert_eq!(*made.lock().unwrap(), 102);
    }

    #[test]
    fn a_tap_out_of_the_window_jumps_to_a_join_point_and_time_goes_on() {
        let (hub, _) = hub(50);
        let mut slow = HubTap::join(&hub).unwrap();
        let mut fast = HubTap::join(&hub).unwrap();
        let (_, before) = read(&mut slow);
        for _ in 0..200 {
            read(&mut fast);
        }
        // The window holds 150..199; the newest IDR start in it is 163, after the PAT at 160.
        let (i, t) = read(&mut slow);
        assert_eq!(i, 160, "jumped to the PAT before the newest IDR");
        assert!(t >= before);
        assert_eq!(slow.skipped(), 159);
    }

    #[test]
    fn the_hub_goes_with_its_last_tap() {
        let (hub, _) = hub(50);
        let gone = Arc::new(Mutex::new(false));
        let g = gone.clone();
        lock(&hub).on_drop(Box::new(move || *g.lock().unwrap() = true));
        let tap = HubTap::join(&hub).unwrap();
        drop(hub);
        assert!(!*gone.lock().unwrap());
        drop(tap);
        assert!(*gone.lock().unwrap());
    }
}
