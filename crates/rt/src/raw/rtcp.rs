//! RTCP for a raw sender (RFC 3550 §6): sender reports out at the RFC 3550 interval, receiver
//! reports in, per-receiver loss, jitter and round-trip time. It runs on the raw sender's
//! calling thread, never on the pacer.

use super::stream::PacerCounters;
use crate::clock::Clock;
use crate::streams::rtcp::{exchange, say_bye};
use crate::streams::RtcpOut;
use metronome_session::sender::{ReceiverView, SenderReports, SenderReportsConfig};
use metronome_time::{MediaClock, Timestamp};
use std::sync::atomic::Ordering;
use std::time::Duration;

pub(super) struct RawRtcp {
    reports: SenderReports,
    outs: Vec<RtcpOut>,
    buf: Box<[u8; 1500]>,
}

/// What the sender's RTCP needs to know about the stream.
pub(super) struct RtcpSetup {
    pub ssrc: u32,
    pub cname: String,
    pub rtp_ts_base: u32,
    /// The first frame's epoch: RTP time `rtp_ts_base`.
    pub epoch: Timestamp,
    pub session_bw_bps: u64,
    pub seed: u64,
}

impl RawRtcp {
    pub fn new(setup: RtcpSetup, outs: Vec<RtcpOut>) -> RawRtcp {
        let cfg = SenderReportsConfig {
            ssrc: setup.ssrc,
            cname: setup.cname,
            clock: MediaClock::VIDEO_90K,
            rtp_ts_base: setup.rtp_ts_base,
            session_bw_bps: setup.session_bw_bps,
            // 1 s, as the MPEG-TS streams: RFC 3550 §6.2 allows a reduced minimum, and at raw
            // rates RTCP's 5% share is never the limit.
            rtcp_min_interval: Duration::from_secs(1),
            max_receivers: 64,
            seed: setup.seed,
        };
        RawRtcp {
            reports: SenderReports::new(cfg, setup.epoch),
            outs,
            buf: Box::new([0; 1500]),
        }
    }

    /// Sends a sender report when one is due and reads what receivers sent.
    pub fn turn(&mut self, clock: &Clock, c: &PacerCounters) {
        if self.outs.is_empty() {
            return;
        }
        self.record(c);
        exchange(&mut self.reports, &self.outs, clock, &mut self.buf[..]);
    }

    /// The last sender report, with a BYE (RFC 3550 §6.6): the source is leaving.
    pub fn bye(&mut self, clock: &Clock, c: &PacerCounters) {
        self.record(c);
        say_bye(&mut self.reports, &self.outs, clock, &mut self.buf[..]);
    }

    fn record(&mut self, c: &PacerCounters) {
        self.reports.record_sent(
            c.packets.load(Ordering::Relaxed),
            c.payload_octets.load(Ordering::Relaxed),
        );
    }

    pub fn receivers(&self) -> &[ReceiverView] {
        self.reports.receivers()
    }

    pub fn sender_reports(&self) -> u64 {
        self.reports.counters().sender_reports
    }

    /// Receiver reports heard so far, from every receiver.
    pub fn receiver_reports(&self) -> u64 {
        self.reports.receivers().iter().map(|r| r.reports).sum()
    }
}
