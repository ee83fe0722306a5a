//! What a [`ReceiverSession`] takes from RTCP: the sender's reports and BYE, the rate
//! controller's announcements, who else is in the session, and other receivers' NACKs.

use super::{ReceiverEvent, ReceiverSession, MAX_PEER_ASKS};
use crate::interval::update_avg_rtcp_size;
use metronome_time::{NtpTime, RtpTime, Timestamp};
use metronome_wire::rtcp::{self, CcApp, RtcpItem, XrItem};
use metronome_wire::{SeqNo, Ssrc};

/// A sender report or BYE, about a source or another member.
enum Seen {
    SenderReport { ssrc: Ssrc, lsr: u32 },
    Bye { ssrc: Ssrc },
}

/// What one compound says; every list is bounded by what one datagram can hold.
#[derive(Default)]
struct Heard {
    seen: Vec<Seen>,
    cnames: Vec<(Ssrc, Vec<u8>)>,
    reporters: Vec<Ssrc>,
    /// The last sender report's SSRC, NTP time and RTP timestamp.
    sr_ts: Option<(Ssrc, (NtpTime, RtpTime))>,
    apps: Vec<(Ssrc, CcApp)>,
    /// Other receivers' NACKs and the sender's TLLEIs: the stream, the numbers (at most
    /// [`MAX_PEER_ASKS`]).
    nacks: Vec<(Ssrc, Vec<SeqNo>)>,
    /// The sender's RFC 3611 DLRR sub-block about this receiver: (sender, LRR, DLRR).
    dlrr: Option<(Ssrc, u32, u32)>,
    /// Items that are not for a receiver.
    ignored: u64,
}

impl ReceiverSession {
    /// One RTCP datagram (a compound packet from a sender or another receiver). Returns whether
    /// it carried a sender report from a source being received: the place to send reports to.
    pub fn handle_rtcp(&mut self, now: Timestamp, data: &[u8]) -> bool {
        self.counters.rtcp_packets += 1;
        let Some(mut h) = self.hear(data) else {
            self.counters.rtcp_malformed += 1;
            return false;
        };
        for (media_ssrc, sequences) in std::mem::take(&mut h.nacks) {
            match self.repair.as_mut() {
                Some(r) => h.ignored += u64::from(!r.on_peer_nack(media_ssrc, sequences, now)),
                None => h.ignored += 1,
            }
        }
        if let (Some((sender, lrr, dlrr)), Some(r)) = (h.dlrr, self.repair.as_mut()) {
            let arrival = NtpTime::from_unix_nanos(now.as_nanos());
            if let Some(rtt) = NtpTime::round_trip(arrival, lrr, dlrr) {
                r.on_sender_rtt(sender, lrr, rtt);
            }
        }
        self.take_announces(now, &mut h);
        self.note_members(now, &mut h);
        self.counters.rtcp_ignored_items += h.ignored;
        self.avg_rtcp_size = update_avg_rtcp_size(self.avg_rtcp_size, data.len());
        self.take_seen(now, h.seen)
    }

    /// What compound `data` says, or `None` if it is malformed.
    fn hear(&self, data: &[u8]) -> Option<Heard> {
        let mut h = Heard::default();
        let repairs = self.cfg.repair.is_some();
        let r = rtcp::parse_compound(data, |item| match item {
            RtcpItem::SenderReport(info) => {
                h.sr_ts = Some((info.ssrc, (NtpTime(info.ntp), info.rtp_timestamp)));
                h.seen.push(Seen::SenderReport {
                    ssrc: info.ssrc,
                    lsr: NtpTime(info.ntp).compact(),
                })
            }
            RtcpItem::Cc { ssrc, app } => h.apps.push((ssrc, app)),
            RtcpItem::Bye { ssrc } => h.seen.push(Seen::Bye { ssrc }),
            RtcpItem::Cname { ssrc, cname } => h.cnames.push((ssrc, cname.to_vec())),
            RtcpItem::ReportBlock { reporter, .. } => h.reporters.push(reporter),
            // Another receiver's NACK, seen on a group: not to be asked again (RFC 4585 §3.4).
            RtcpItem::Nack(n) if repairs && n.sender_ssrc != self.cfg.ssrc => {
                let sequences = n.sequences().take(MAX_PEER_ASKS).collect();
                h.nacks.push((n.media_ssrc, sequences))
            }
            // The sender, the group's feedback target, knows of these losses (RFC 6642 §3):
            // a repair is on its way, so they are not to be asked for either.
            RtcpItem::Tllei(t) if repairs => {
                let sequences = t.sequences().take(MAX_PEER_ASKS).collect();
                h.nacks.push((t.media_ssrc, sequences))
            }
            // The sender's answer to this receiver's RRTR (RFC 3611 §4.5): its round trip.
            RtcpItem::Xr(XrItem::Dlrr {
                sender,
                ssrc,
                lrr,
                dlrr,
            }) if ssrc == self.cfg.ssrc => h.dlrr = Some((sender, lrr, dlrr)),
            // About the group's other receivers.
            RtcpItem::Xr(XrItem::Dlrr { .. }) => {}
            // Another receiver's feedback to the sender (on a group): not for us.
            RtcpItem::Other { .. }
            | RtcpItem::Ccfb(_)
            | RtcpItem::Nack(_)
            | RtcpItem::Tllei(_)
            | RtcpItem::Xr(XrItem::Rrtr { .. }) => h.ignored += 1,
        });
        r.is_ok().then_some(h)
    }

    /// The rate controller's announcements from the stream's sender (another receiver's
    /// report, on a multicast group, is for the sender: ignored). They follow a sender report
    /// whose NTP time (or RTP timestamp) says when they were sent.
    fn take_announces(&mut self, now: Timestamp, h: &mut Heard) {
        for (ssrc, app) in std::mem::take(&mut h.apps) {
            let announce = crate::cc_app::app_announce(&app);
            let sr = h.sr_ts.filter(|(s, _)| *s == ssrc).map(|(_, t)| t);
            match (self.cc.as_mut(), announce) {
                (Some(cc), Some(a)) if cc.ssrc == ssrc => {
                    let sent = cc.clock.report(sr);
                    cc.agent.on_announce(now, &a, sent);
                }
                // Before the stream's first packet (which says whose it is and starts the
                // controller's end): the latest is kept, and given it then.
                (None, Some(announce)) if self.cfg.cc != super::AgentKind::None => {
                    self.early_announce = Some(super::EarlyAnnounce {
                        at: now,
                        ssrc,
                        announce,
                        sr,
                    })
                }
                _ => h.ignored += 1,
            }
        }
    }

    /// Who is in the session, before a BYE in the same compound takes its sender out.
    fn note_members(&mut self, now: Timestamp, h: &mut Heard) {
        for (ssrc, cname) in std::mem::take(&mut h.cnames) {
            if let Some(src) = self.sources.iter_mut().find(|s| s.ssrc == ssrc) {
                src.set_cname(&cname);
            } else if ssrc != self.cfg.ssrc {
                self.members.heard(ssrc, now);
            }
        }
        for ssrc in std::mem::take(&mut h.reporters) {
            if ssrc != self.cfg.ssrc && !self.sources.iter().any(|s| s.ssrc == ssrc) {
                self.members.heard(ssrc, now);
            }
        }
    }

    /// Sender reports and BYEs; whether one was a source's sender report.
    fn take_seen(&mut self, now: Timestamp, seen: Vec<Seen>) -> bool {
        let mut from_sender = false;
        for item in seen {
            let ssrc = match item {
                Seen::SenderReport { ssrc, .. } | Seen::Bye { ssrc } => ssrc,
            };
            let Some(src) = self.sources.iter_mut().find(|s| s.ssrc == ssrc) else {
                if let Seen::Bye { .. } = item {
                    self.members.left(ssrc);
                }
                continue;
            };
            match item {
                Seen::SenderReport { lsr, .. } => {
                    from_sender = true;
                    src.last_sr = Some((lsr, now));
                    src.sender_reports += 1;
                    self.push_event(ReceiverEvent::SenderReport { ssrc, at: now });
                }
                Seen::Bye { .. } => {
                    src.said_bye = true;
                    self.push_event(ReceiverEvent::Bye { ssrc, at: now });
                }
            }
        }
        from_sender
    }
}
