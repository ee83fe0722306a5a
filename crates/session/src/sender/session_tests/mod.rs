//! The sender session on its own, driven by hand in virtual time: `pacing.rs` when packets
//! and frames leave (due times, stalls, late policies, the controller's rate),
//! `feedback.rs` what receivers' RTCP does to it (the rate controller, RFC 3611 DLRR),
//! `repair.rs` its answers to NACKs and the TLLEIs it tells a group.

use super::*;
use crate::repair::Outlet;
use crate::sender::SenderRepair;
use metronome_cc::{ControllerTimer, Feedback, FixedRate, RateController};
use metronome_sched::{LatePolicy, PacingConfig};
use metronome_time::{Bitrate, MediaClock, NtpTime, RtpTime, Timestamp};
use metronome_wire::rtcp::{self, Block, ReportHead};
use metronome_wire::PayloadType;
use metronome_wire::{SeqNo, Ssrc};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod feedback;
mod pacing;
mod repair;

fn ms(v: u64) -> Timestamp {
    Timestamp::from_millis(v)
}

fn wall(t: Timestamp) -> NtpTime {
    NtpTime::from_unix_nanos(1_767_225_600_000_000_000 + t.as_nanos())
}

fn config(late: LatePolicy) -> SenderSessionConfig {
    SenderSessionConfig {
        reports: SenderReportsConfig {
            ssrc: Ssrc(0xabc),
            cname: "sender@test".into(),
            clock: MediaClock::VIDEO_90K,
            rtp_ts_base: RtpTime(0),
            session_bw_bps: 5_000_000,
            rtcp_min_interval: Duration::from_secs(1),
            max_receivers: 4,
            seed: 1,
        },
        pacing: PacingConfig {
            late,
            ..PacingConfig::default()
        },
        jobs: JobConfig {
            period: None,
            deadline: Duration::from_millis(2),
        },
        queue_capacity: 2048,
    }
}

/// 1250-byte packets every 2 ms: 5 Mbit/s.
fn packet(k: u32) -> Queued {
    Queued {
        id: k,
        packets: 1,
        due: ms(2 * k as u64),
        wire_len: 1250,
        payload_len: 1238,
        seq: SeqNo(k as u16),
    }
}

fn session(late: LatePolicy) -> SenderSession {
    let cc = Box::new(FixedRate::new(Bitrate::mbps(5)));
    SenderSession::new(config(late), Timestamp::ZERO, cc)
}

/// Feeds `n` packets and runs the session as an exact driver would, except that it cannot
/// run during `stall`. Returns every transmit with the time it happened, and every event.
fn run(
    s: &mut SenderSession,
    n: u32,
    stall: (Timestamp, Timestamp),
) -> (Vec<(Timestamp, Transmit)>, Vec<SessionEvent>) {
    for k in 0..n {
        s.handle_input(Timestamp::ZERO, Input::Packet(packet(k)))
            .unwrap();
    }
    s.handle_input(Timestamp::ZERO, Input::SourceEnded).unwrap();
    let (mut out, mut events) = (Vec::new(), Vec::new());
    let mut now = Timestamp::ZERO;
    while !s.is_finished() {
        while let Some(e) = s.poll_event() {
            events.push(e);
        }
        if now >= stall.0 && now < stall.1 {
            now = stall.1;
        }
        match s.poll_transmit(now) {
            Some(t) => out.push((now, t)),
            None => {
                if s.poll_rtcp(now, wall(now), &mut [0u8; 1500]).is_some() {
                    continue;
                }
                let (t, _) = s.poll_timeout().expect("a queued packet has a time");
                assert!(t > now);
                now = t;
            }
        }
    }
    events.extend(std::iter::from_fn(|| s.poll_event()));
    (out, events)
}

fn rtcp_in(s: &mut SenderSession, now: Timestamp, data: &[u8]) {
    rtcp_in_at(s, now, Outlet(0), data);
}

/// An RTCP compound that came in at the driver's destination `outlet`.
fn rtcp_in_at(s: &mut SenderSession, now: Timestamp, outlet: Outlet, data: &[u8]) {
    let from = "127.0.0.1:5005".parse().unwrap();
    let input = Input::Rtcp {
        wall: wall(now),
        from,
        outlet,
        data,
    };
    s.handle_input(now, input).unwrap();
}
