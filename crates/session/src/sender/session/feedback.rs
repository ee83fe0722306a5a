//! What receivers send back to a [`SenderSession`]: their RTCP, the rate controller it
//! drives (the session follows its target and says which reports it computed it from), and
//! the NACKs it answers.

use super::super::report::SenderEvent;
use super::{SenderSession, SessionEvent};
use crate::repair::Outlet;
use metronome_cc::Feedback;
use metronome_time::{Bitrate, Micros, NtpTime, Timestamp};
use metronome_wire::{SeqNo, Ssrc};
use std::net::SocketAddr;
use std::time::Duration;

/// The shortest time over which the rate of repairs is measured for the media's share of the
/// target ([`SenderSession::media_share`]): RTCP's reports come at intervals of a second or
/// so, but in bursts too (a group's, NACKs after a loss).
const REPAIR_RATE_SPAN: Duration = Duration::from_millis(500);

impl SenderSession {
    pub(super) fn handle_rtcp(
        &mut self,
        now: Timestamp,
        wall: NtpTime,
        from: SocketAddr,
        outlet: Outlet,
        data: &[u8],
    ) {
        let log = self.send_log.as_deref();
        let sent_at = |seq: SeqNo| log.and_then(|l| l.sent_at(seq));
        self.reports.handle_rtcp(now, wall, from, data, &sent_at);
        self.answer_nacks(now, outlet);
        let mut heard = false;
        while let Some(e) = self.reports.poll_event() {
            match &e {
                SenderEvent::ReceiverReport { ssrc, rtt, .. } => {
                    if let (Some(r), Some(rtt)) = (self.repair.as_mut(), *rtt) {
                        r.rtt_sample(*ssrc, rtt);
                    }
                    if let Some(fb) = self.feedback(*ssrc) {
                        heard |= self.controller.reads(&fb);
                        self.controller.on_feedback(now, &fb);
                    }
                }
                SenderEvent::Tfrc { ssrc, report } => {
                    let fb = self.feedback(*ssrc).map_or_else(
                        || Feedback {
                            tfrc: Some(*report),
                            ..Feedback::bare(ssrc.get(), from)
                        },
                        |fb| Feedback {
                            tfrc: Some(*report),
                            ..fb
                        },
                    );
                    heard |= self.controller.reads(&fb);
                    self.controller.on_feedback(now, &fb);
                }
                SenderEvent::Tfmcc { ssrc, report } => {
                    let fb = Feedback {
                        tfmcc: Some(*report),
                        ..Feedback::bare(ssrc.get(), from)
                    };
                    heard |= self.controller.reads(&fb);
                    self.controller.on_feedback(now, &fb);
                }
                SenderEvent::ReceiverBye { ssrc } => {
                    self.controller.on_receiver_left(now, ssrc.get());
                }
                SenderEvent::PacketFeedback {
                    report_timestamp,
                    reports,
                    ..
                } => {
                    if let Some(log) = self.send_log.as_mut() {
                        let mut results = Vec::with_capacity(reports.len());
                        let unmatched = log.results(*report_timestamp, reports, &mut results);
                        self.feedback_unmatched += unmatched as u64;
                        self.controller.on_packet_results(now, &results);
                        heard |= self.controller.wants_packet_feedback();
                    }
                }
                _ => {}
            }
            self.push_event(SessionEvent::Receiver(e));
        }
        self.follow_controller(now);
        if heard {
            let media = self.media_share(now);
            self.s.rate_reports += 1;
            self.s.reported_rate = Some(media);
            self.push_event(SessionEvent::RateReported {
                at: now,
                rate: self.rate,
                media,
            });
        }
    }

    /// What the media may take of the controller's target as a report hands it to the
    /// source. Where packets leave at the controller's rate, all of it: a repair takes a
    /// packet's time at the rate there (`at_rate.rs`). Elsewhere (GCC, constant-rate TS), the
    /// target less the rate that retransmissions and FEC took (with their IPv4 and UDP
    /// headers): RFC 4588 §7 has retransmissions obey the stream's congestion control, so the
    /// media gives them room instead of adding them on top. That rate is measured over at
    /// least [`REPAIR_RATE_SPAN`] (reports closer together reuse the last measure), so a burst
    /// of compounds with a repair between them does not read as a rate of megabits.
    fn media_share(&mut self, now: Timestamp) -> Bitrate {
        let resend = self.repair_stats().map_or((0, 0), |r| (r.packets, r.bytes));
        let fec = self
            .fec_stats()
            .map_or((0, 0), |f| (f.rows + f.columns, f.bytes));
        let header = metronome_time::IPV4_UDP_OVERHEAD as u64;
        let wire = (resend.0 + fec.0) * header + resend.1 + fec.1;
        let (since, before) = self.overhead_since;
        let span = now.saturating_since(since);
        if span >= REPAIR_RATE_SPAN {
            let took = (wire.saturating_sub(before) * 8) as f64 / span.as_secs_f64();
            self.overhead_bps = took.round() as u64;
            self.overhead_since = (now, wire);
        }
        if self.at_rate.is_some() {
            return self.rate;
        }
        Bitrate::bps(self.rate.as_bps().saturating_sub(self.overhead_bps))
    }

    fn feedback(&self, ssrc: Ssrc) -> Option<Feedback> {
        let r = self.reports.receivers().iter().find(|r| r.ssrc == ssrc)?;
        Some(Feedback {
            receiver: r.ssrc.get(),
            from: r.addr,
            fraction_lost: r.fraction_lost,
            cumulative_lost: r.cumulative_lost as i64,
            extended_highest_seq: r.extended_highest_seq,
            jitter: r.jitter_us.to_duration(),
            rtt: r.rtt_us.map(Micros::to_duration),
            // Receiver reports carry no loss event rate: TFRC's reports come their own way.
            tfrc: None,
            tfmcc: None,
        })
    }

    /// Packets a receiver's RFC 8888 feedback named that were not in the send log (sent too
    /// long ago, or never).
    pub fn feedback_unmatched(&self) -> u64 {
        self.feedback_unmatched
    }

    /// Wakes the rate controller if its timer is due.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        if self
            .controller
            .poll_timeout()
            .is_some_and(|(t, _)| t <= now)
        {
            self.controller.handle_timeout(now);
            self.follow_controller(now);
        }
    }

    /// Answers the NACKs of the RTCP compound just handled, which came in at `outlet`.
    fn answer_nacks(&mut self, now: Timestamp, outlet: Outlet) {
        let nacks = self.reports.take_nacks();
        let Some(r) = self.repair.as_mut() else {
            return;
        };
        for n in &nacks {
            let rtt = self.reports.receiver_rtt(n.reporter);
            if let Some(rtt) = rtt {
                r.rtt_sample(n.reporter, rtt);
            }
            r.on_nack(n, outlet, rtt, now);
        }
    }

    /// The session takes the controller's target rate.
    pub(super) fn follow_controller(&mut self, now: Timestamp) {
        let rate = self.controller.target_rate();
        if rate != self.rate {
            if let Some(r) = self.repair.as_mut() {
                r.set_rate(rate.as_bps());
            }
            self.rate = rate;
            self.pacing.set_rate(rate);
            if let Some(a) = self.at_rate.as_mut() {
                a.on_rate(rate, now);
                // The head's wait was its time at the old rate: `next_send` says the new one
                // (a driver that waits for it wakes sooner; the next poll decides again).
                self.head_wait = None;
            }
            self.s.rate_changes += 1;
            self.push_event(SessionEvent::RateChanged { at: now, rate });
        }
    }

    /// The rate controller's name (`metronome_cc::ControllerKind::name`).
    pub fn controller_name(&self) -> &'static str {
        self.controller.name()
    }

    /// The rate controller's current target rate, on the wire.
    pub fn target_rate(&self) -> Bitrate {
        self.rate
    }

    /// RTCP compounds with a report the rate controller computes its rate from
    /// ([`RateController::reads`](metronome_cc::RateController::reads), or per-packet feedback; each is a
    /// [`SessionEvent::RateReported`]), for a driver that does not poll events.
    pub fn rate_reports(&self) -> u64 {
        self.s.rate_reports
    }

    /// The rate the media may take right after the last of [`SenderSession::rate_reports`]
    /// (the target then, not moved by the controller's timer since, less the rate repairs
    /// took where packets do not leave at the rate: [`SessionEvent::RateReported`]'s
    /// `media`), on the wire.
    pub fn reported_rate(&self) -> Option<Bitrate> {
        self.s.reported_rate
    }
}
