//! Rate control's messages between their `metronome_cc` form and the RTCP packets that carry
//! them (APP packets, `metronome_wire::rtcp::cc`; RFC 8888 feedback,
//! `metronome_wire::rtcp::ccfb`): the one place that knows both.

use metronome_cc::gcc::feedback::ArrivalReport;
use metronome_cc::receiver::AgentReport;
use metronome_cc::tfmcc::{Echo, ReceiverFeedback, SenderInfo};
use metronome_cc::Announce;
use metronome_time::Timestamp;
use metronome_wire::rtcp::cc::{fraction_of, rate_word};
use metronome_wire::rtcp::ccfb::{ATO_MAX, MAX_REPORTS};
use metronome_wire::rtcp::{
    CcApp, CcfbReport, CcfbWriter, TfmccFeedback, TfmccSender, TfrcFeedback, TfrcRtt,
};
use metronome_wire::{SeqNo, Ssrc};
use std::time::Duration;

fn us(d: Duration) -> u32 {
    d.as_micros().min(u32::MAX as u128) as u32
}

fn rate(word: u32) -> f64 {
    if word == u32::MAX {
        f64::INFINITY
    } else {
        word as f64
    }
}

/// A sender's announcement as an APP packet.
pub fn announce_app(a: &Announce) -> CcApp {
    match a {
        Announce::TfrcRtt(rtt) => CcApp::TfrcRtt(TfrcRtt { rtt_us: us(*rtt) }),
        Announce::Tfmcc(i) => {
            let echo = i.echo;
            CcApp::TfmccSender(TfmccSender {
                round: i.round,
                flags: if i.slow_start {
                    TfmccSender::SLOW_START
                } else {
                    0
                },
                x_supp: rate_word(i.x_supp),
                r_max_us: us(i.r_max),
                feedback_delay_us: us(i.feedback_delay),
                clr: Ssrc(i.clr.unwrap_or(0)),
                echo_ssrc: echo.map_or(Ssrc(0), |e| Ssrc(e.receiver)),
                echo_ts_us: echo.map_or(0, |e| e.ts_us),
                echo_delay_us: echo.map_or(0, |e| us(e.delay)),
                x_send: rate_word(i.x_send),
            })
        }
    }
}

/// An APP packet from a sender, as its announcement (`None`: not one).
pub fn app_announce(app: &CcApp) -> Option<Announce> {
    match *app {
        CcApp::TfrcRtt(r) => Some(Announce::TfrcRtt(Duration::from_micros(r.rtt_us as u64))),
        CcApp::TfmccSender(s) => Some(Announce::Tfmcc(SenderInfo {
            round: s.round,
            slow_start: s.flags & TfmccSender::SLOW_START != 0,
            x_supp: rate(s.x_supp),
            r_max: Duration::from_micros(s.r_max_us as u64),
            feedback_delay: Duration::from_micros(s.feedback_delay_us as u64),
            clr: (s.clr != Ssrc(0)).then_some(s.clr.get()),
            echo: (s.echo_ssrc != Ssrc(0)).then_some(Echo {
                receiver: s.echo_ssrc.get(),
                ts_us: s.echo_ts_us,
                delay: Duration::from_micros(s.echo_delay_us as u64),
            }),
            x_send: rate(s.x_send),
        })),
        _ => None,
    }
}

/// What a receiver's agent sends: an APP packet, or RFC 8888 feedback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReportOut {
    /// A TFRC or TFMCC receiver report as a `metronome_wire` APP packet.
    App(CcApp),
    /// GCC's per-packet arrivals as RFC 8888 congestion control feedback.
    Ccfb(CcfbWriter),
}

/// A receiver's report about source `media_ssrc` as RTCP; `last_seq` is the extended
/// sequence number of the last packet the receiver's agent was given (TFMCC's echo).
pub fn report_out(r: &AgentReport, media_ssrc: Ssrc, last_seq: u64) -> ReportOut {
    match r {
        AgentReport::Arrivals(a) => ReportOut::Ccfb(ccfb_of(a, media_ssrc)),
        AgentReport::Tfrc(t) => ReportOut::App(tfrc_app(t, media_ssrc)),
        AgentReport::Tfmcc(f) => ReportOut::App(tfmcc_app(f, media_ssrc, last_seq)),
    }
}

/// The receiver's clock as RFC 8888's report timestamp: NTP's middle 32 bits (16.16 s), of
/// the session's time (only differences matter to the sender).
pub fn ccfb_timestamp(t: Timestamp) -> u32 {
    ((u128::from(t.as_nanos()) << 16) / 1_000_000_000) as u32
}

/// An arrivals report as RFC 8888 feedback: each arrival as its offset before the report's
/// time in 1/1024 s (clamped to the largest the field holds).
pub fn ccfb_of(a: &ArrivalReport, media_ssrc: Ssrc) -> CcfbWriter {
    let reports: Vec<CcfbReport> = a
        .arrivals
        .iter()
        .take(MAX_REPORTS)
        .map(|arr| match arr {
            Some(t) => {
                let before = a.at.saturating_since(*t).as_nanos() * 1024 / 1_000_000_000;
                CcfbReport {
                    received: true,
                    ecn: 0,
                    ato: before.min(u128::from(ATO_MAX)) as u16,
                }
            }
            None => CcfbReport {
                received: false,
                ecn: 0,
                ato: 0,
            },
        })
        .collect();
    CcfbWriter::new(
        media_ssrc,
        SeqNo::of_extended(a.begin_seq),
        reports,
        ccfb_timestamp(a.at),
    )
}

fn tfrc_app(t: &metronome_cc::tfrc::receiver::ReceiverReport, media_ssrc: Ssrc) -> CcApp {
    CcApp::TfrcFeedback(TfrcFeedback {
        media_ssrc,
        echo_seq: t.echo_seq,
        t_delay_us: us(t.t_delay),
        x_recv_bytes_per_s: rate_word(t.x_recv_bytes_per_s),
        p_fraction: fraction_of(t.p),
    })
}

fn tfmcc_app(f: &ReceiverFeedback, media_ssrc: Ssrc, last_seq: u64) -> CcApp {
    let mut flags = 0;
    if f.rtt.is_some() {
        flags |= TfmccFeedback::HAVE_RTT;
    }
    if f.have_loss {
        flags |= TfmccFeedback::HAVE_LOSS;
    }
    if f.leaving {
        flags |= TfmccFeedback::LEAVING;
    }
    CcApp::TfmccFeedback(TfmccFeedback {
        media_ssrc,
        ts_us: f.ts_us,
        rtt_us: f.rtt.map_or(0, |r| us(r).max(1)),
        x_calc: rate_word(f.x_r),
        x_recv: rate_word(f.x_recv),
        p_fraction: fraction_of(f.p),
        round: f.round,
        flags,
        echo_seq: last_seq as u32,
        echo_delay_us: f.echo.map_or(0, |(_, d)| us(d)),
    })
}

/// A TFMCC receiver's APP packet as its report; `echo_sent` turns its echo (a sequence
/// number) into when that packet left, on the sender's clock (`None`: not a recent packet).
pub fn tfmcc_report(
    f: &TfmccFeedback,
    echo_sent: impl FnOnce(u32) -> Option<metronome_time::Timestamp>,
) -> ReceiverFeedback {
    let has = |flag| f.flags & flag != 0;
    ReceiverFeedback {
        ts_us: f.ts_us,
        rtt: has(TfmccFeedback::HAVE_RTT).then(|| Duration::from_micros(f.rtt_us as u64)),
        x_r: rate(f.x_calc),
        x_recv: rate(f.x_recv),
        p: f.p(),
        echo: echo_sent(f.echo_seq).map(|t| (t, Duration::from_micros(f.echo_delay_us as u64))),
        round: f.round,
        have_loss: has(TfmccFeedback::HAVE_LOSS),
        leaving: has(TfmccFeedback::LEAVING),
    }
}
