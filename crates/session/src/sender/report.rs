//! The sender's RTCP: sender reports out (RFC 3550 §6.4.1), receiver reports in, and per-receiver
//! loss, jitter and round-trip time (the feedback loop congestion control will close).

use crate::interval::{rtcp_bandwidth_octets, rtcp_interval, update_avg_rtcp_size, IntervalInputs};
use metronome_time::Micros;
use metronome_time::{MediaClock, NtpTime, RtpTime, Timestamp};
use metronome_wire::rtcp::{self, ReportHead, RtcpItem, SenderInfo};
use metronome_wire::{SeqNo, Ssrc};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// Who the sender is and how often it reports, for [`SenderReports`].
#[derive(Clone, Debug)]
pub struct SenderReportsConfig {
    /// Our SSRC: in every sender report, and the one receivers' blocks must be about.
    pub ssrc: Ssrc,
    /// Our CNAME in the SDES of every report (RFC 3550 §6.5.1).
    pub cname: String,
    /// The RTP clock of the stream: the sender report's RTP timestamp and the receivers' jitter
    /// are in its units.
    pub clock: MediaClock,
    /// RTP timestamp at the stream epoch (the packetizer's `rtp_ts_base`).
    pub rtp_ts_base: RtpTime,
    /// Session bandwidth in bit/s, for the RTCP interval (RFC 3550 §6.2).
    pub session_bw_bps: u64,
    /// The minimum RTCP interval (5 s in RFC 3550; lower is allowed, §6.2 "reduced minimum").
    pub rtcp_min_interval: Duration,
    /// Receivers tracked at most; reports from further ones are counted and ignored.
    pub max_receivers: usize,
    /// Seed of the RTCP interval's randomization: the same seed gives the same schedule.
    pub seed: u64,
}

/// What one receiver says about our stream.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ReceiverView {
    /// The receiver's SSRC (the reporter of its blocks), 8 lowercase hex digits in JSON.
    #[serde(serialize_with = "metronome_time::units::hex32")]
    #[schemars(with = "metronome_time::units::Hex32")]
    pub ssrc: Ssrc,
    /// Where its last report came from.
    pub addr: SocketAddr,
    /// Its CNAME from its SDES, at most 255 characters, if one arrived.
    pub cname: Option<String>,
    /// Fraction lost in the last report interval, 0..=1.
    pub fraction_lost: f64,
    /// Packets lost since the start as it counts them (RFC 3550 §6.4.1; negative when
    /// duplicates outnumber losses).
    pub cumulative_lost: i32,
    /// The extended highest sequence number it received (cycles in the high 16 bits).
    pub extended_highest_seq: u32,
    /// RFC 3550 interarrival jitter.
    pub jitter_us: Micros,
    /// Round-trip time from LSR/DLSR (RFC 3550 §6.4.1), once the receiver has seen an SR.
    pub rtt_us: Option<Micros>,
    /// Report blocks about our stream received from it.
    pub reports: u64,
    /// When its last report block about our stream arrived (not in JSON).
    #[serde(skip)]
    pub last_report: Timestamp,
    /// Whether it sent an RTCP BYE.
    pub said_bye: bool,
    /// Whether a report of its echoed one of our sender reports (its LSR): a receiver that
    /// never did (or a forged SSRC) gives way in a full table to one that did (not in JSON).
    #[serde(skip)]
    pub echoed: bool,
}

/// The sender's RTCP counters.
#[derive(Clone, Copy, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct SenderCounters {
    /// Compound packets written (sender reports, with or without the rate controller's packets,
    /// and the final BYE).
    pub sender_reports: u64,
    /// RTCP datagrams handed to [`SenderReports::handle_rtcp`].
    pub rtcp_received: u64,
    /// RTCP datagrams that did not parse as a compound packet (nothing of them applied).
    pub rtcp_malformed: u64,
    /// Report blocks, RFC 8888 blocks and TFRC/TFMCC reports about another SSRC than ours.
    pub blocks_about_others: u64,
    /// Report blocks from a new receiver ignored because `max_receivers` are tracked (and
    /// it echoed no sender report, or every one tracked had).
    pub too_many_receivers: u64,
    /// Report blocks whose LSR echoes none of the last 1024 sender reports (forged, or from
    /// a receiver that heard none of them), or that say LSR 0 for a receiver that echoed one
    /// before (forged): ignored.
    pub unknown_lsr: u64,
    /// Receivers that had never echoed a sender report, dropped from a full table to make
    /// room for one that had (the one heard from longest ago first).
    pub strangers_dropped: u64,
    /// Events dropped, oldest first, because 256 were waiting unpolled.
    pub events_dropped: u64,
    /// TFRC reports whose echo (a packet not sent lately) or delay made no round-trip sample.
    pub tfrc_unusable: u64,
    /// Compound packets sent out of turn to carry the rate controller's APP packets.
    pub cc_packets: u64,
}

/// What the sender heard, for logs, traces and the rate controller.
#[derive(Clone, Debug, PartialEq)]
pub enum SenderEvent {
    /// A receiver's first report block about our stream.
    NewReceiver {
        /// The receiver's SSRC.
        ssrc: Ssrc,
        /// Where its report came from.
        addr: SocketAddr,
    },
    /// A report block about our stream.
    ReceiverReport {
        /// The receiver's SSRC.
        ssrc: Ssrc,
        /// Fraction lost in its last interval, 0..=1.
        fraction_lost: f64,
        /// Its latest round-trip time, once it has seen a sender report.
        rtt: Option<Duration>,
    },
    /// A tracked receiver sent an RTCP BYE.
    ReceiverBye {
        /// The receiver's SSRC.
        ssrc: Ssrc,
    },
    /// A TFRC receiver's report about this stream (RFC 5348 §3.2.2; the RTCP APP packet of
    /// `metronome_wire::TfrcFeedback`), with the round-trip sample it gives: now, less when
    /// the echoed packet left, less the receiver's delay before answering.
    Tfrc {
        /// The receiver's SSRC.
        ssrc: Ssrc,
        /// Loss event rate, receive rate and the round-trip sample.
        report: metronome_cc::TfrcReport,
    },
    /// A TFMCC receiver's report (RFC 4654 §2.2.2; `metronome_wire::TfmccFeedback`), its echo
    /// (a sequence number) turned into when that packet left, on our clock.
    Tfmcc {
        /// The receiver's SSRC.
        ssrc: Ssrc,
        /// The report, its echo as a send time on our clock.
        report: metronome_cc::tfmcc::ReceiverFeedback,
    },
    /// RFC 8888 feedback about this stream: per sequence number, its report (received or
    /// not, and when: 1/1024 s before `report_timestamp`, the receiver's clock in NTP's 16.16
    /// form).
    PacketFeedback {
        /// The SSRC of the receiver that sent the feedback.
        ssrc: Ssrc,
        /// The report's time on the receiver's clock: NTP's middle 32 bits (16.16 seconds).
        report_timestamp: u32,
        /// Each reported packet's 16-bit sequence number and what the receiver says of it.
        reports: Vec<(SeqNo, rtcp::CcfbReport)>,
    },
}

const MAX_EVENTS: usize = 256;

/// Sender reports a receiver's LSR may echo: the last 1024 sent (RFC 3550 §6.4.1: a receiver
/// echoes the last it received). Compounds sent out of turn (a rate controller's, TLLEIs)
/// carry a sender report too, as often as every 10 ms: 10 s of them then, 17 minutes at one
/// a second. 4 KiB a stream.
pub(super) const SRS_ECHOED: usize = 1024;

/// Why the sender wants to be woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderTimer {
    /// The next regular sender report is due (RFC 3550 §6.3 interval).
    SenderReport,
}

/// What one compound RTCP packet said, gathered before any of it is applied: a malformed
/// compound changes nothing. Bounded by what one datagram holds.
#[derive(Default)]
struct Heard {
    blocks: Vec<(Ssrc, rtcp::Block)>,
    byes: Vec<Ssrc>,
    cnames: Vec<(Ssrc, String)>,
    cc: Vec<(Ssrc, rtcp::CcApp)>,
    feedback: Vec<SenderEvent>,
    nacks: Vec<super::resend::NackRequest>,
    /// RFC 3611 RRTRs: (receiver, its NTP time).
    rrtrs: Vec<(Ssrc, u64)>,
}

/// The sending side's RTCP for one stream: when to send sender reports and what they count,
/// and what receivers' reports and rate control feedback say.
pub struct SenderReports {
    cfg: SenderReportsConfig,
    epoch: Timestamp,
    packets_sent: u64,
    octets_sent: u64,
    next_sr: Option<Timestamp>,
    avg_rtcp_size: f64,
    receivers: Vec<ReceiverView>,
    /// Position of each receiver in `receivers`, by SSRC (a multicast sender may hear
    /// thousands: a linear search per report would cost more than the report).
    by_ssrc: BTreeMap<Ssrc, usize>,
    counters: SenderCounters,
    events: VecDeque<SenderEvent>,
    rng: ChaCha8Rng,
    /// The last compound's NACKs, for the session's repairs.
    nacks: Vec<super::resend::NackRequest>,
    nacks_unread: u64,
    /// RFC 3611 RRTRs not answered yet, of receivers heard from (so at most
    /// `max_receivers`): the middle 32 bits of each one's NTP time, and when it came. The next
    /// compound answers them in a DLRR block, and each receiver measures its round trip.
    rrtrs: BTreeMap<Ssrc, (u32, Timestamp)>,
    /// The middle 32 bits of the NTP time of each of the last [`SRS_ECHOED`] sender reports:
    /// what a receiver's LSR may echo.
    sent_srs: VecDeque<u32>,
}

impl SenderReports {
    /// Starts the RTCP side of a stream whose RTP timestamps count from `epoch`.
    pub fn new(cfg: SenderReportsConfig, epoch: Timestamp) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        SenderReports {
            receivers: Vec::with_capacity(cfg.max_receivers.min(64)),
            by_ssrc: BTreeMap::new(),
            cfg,
            epoch,
            packets_sent: 0,
            octets_sent: 0,
            next_sr: Some(epoch),
            avg_rtcp_size: 100.0,
            counters: SenderCounters::default(),
            events: VecDeque::with_capacity(MAX_EVENTS),
            rng,
            nacks: Vec::new(),
            nacks_unread: 0,
            rrtrs: BTreeMap::new(),
            sent_srs: VecDeque::with_capacity(SRS_ECHOED),
        }
    }

    /// What has actually left so far: totals of packets and payload octets (RFC 3550 §6.4.1).
    pub fn record_sent(&mut self, packets: u64, payload_octets: u64) {
        self.packets_sent = packets;
        self.octets_sent = payload_octets;
    }

    /// `packets` more RTP packets, carrying `payload_octets` of payload, have left.
    pub fn on_sent(&mut self, packets: u64, payload_octets: u64) {
        self.packets_sent += packets;
        self.octets_sent += payload_octets;
    }

    /// Every receiver heard from (at most `max_receivers`), in the order first heard.
    pub fn receivers(&self) -> &[ReceiverView] {
        &self.receivers
    }
    /// The RTCP counters so far.
    pub fn counters(&self) -> &SenderCounters {
        &self.counters
    }
    /// The oldest event not yet polled (at most 256 wait; older ones are dropped and counted).
    pub fn poll_event(&mut self) -> Option<SenderEvent> {
        self.events.pop_front()
    }
    fn push_event(&mut self, e: SenderEvent) {
        if self.events.len() == MAX_EVENTS {
            self.events.pop_front();
            self.counters.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    /// When the next sender report is due; `None` after [`SenderReports::bye`].
    pub fn poll_timeout(&self) -> Option<(Timestamp, SenderTimer)> {
        self.next_sr.map(|t| (t, SenderTimer::SenderReport))
    }

    /// Writes a sender report into `buf` when one is due at `now`. `wall` is the wall-clock time
    /// that goes into the report's NTP field.
    pub fn poll_transmit(
        &mut self,
        now: Timestamp,
        wall: NtpTime,
        buf: &mut [u8],
    ) -> Option<usize> {
        self.poll_transmit_with(now, wall, buf, &[], false)
    }

    /// [`SenderReports::poll_transmit`], with the rate controller's APP packets: they go at
    /// once, after a sender report (whose RTP timestamp tells receivers when they were sent),
    /// whether or not the regular one is due. With `early`, a compound is written whether or
    /// not anything else is due (for feedback the caller appends, RFC 4585 §3.5.2).
    pub fn poll_transmit_with(
        &mut self,
        now: Timestamp,
        wall: NtpTime,
        buf: &mut [u8],
        apps: &[rtcp::CcApp],
        early: bool,
    ) -> Option<usize> {
        let due = self.next_sr.is_some_and(|t| now >= t);
        if !due {
            if apps.is_empty() && !early {
                return None;
            }
            self.counters.cc_packets += u64::from(!apps.is_empty());
            return self.write(now, wall, buf, None, apps);
        }
        let n = self.write(now, wall, buf, None, apps)?;
        // RRTRs are answered in regular reports only: early compounds (the controller's,
        // TLLEIs) go out at the pace of what receivers send, and a DLRR of every receiver in
        // each would let them set its size and rate.
        let n = n + self.answer_rrtrs(now, &mut buf[n..]);
        let inputs = IntervalInputs {
            members: self.receivers.len() as u32 + 1,
            senders: 1,
            rtcp_bw_octets: rtcp_bandwidth_octets(self.cfg.session_bw_bps),
            we_sent: true,
            avg_rtcp_size: self.avg_rtcp_size,
            initial: self.counters.sender_reports == 1,
            min: self.cfg.rtcp_min_interval,
        };
        let u: f64 = self.rng.random();
        self.next_sr = Some(now + rtcp_interval(&inputs, u));
        Some(n)
    }

    /// A last sender report with a BYE (RFC 3550 §6.6).
    pub fn bye(&mut self, now: Timestamp, wall: NtpTime, buf: &mut [u8]) -> Option<usize> {
        self.next_sr = None;
        self.write(now, wall, buf, Some("stream ended"), &[])
    }

    fn write(
        &mut self,
        now: Timestamp,
        wall: NtpTime,
        buf: &mut [u8],
        bye: Option<&str>,
        apps: &[rtcp::CcApp],
    ) -> Option<usize> {
        let info = SenderInfo {
            ssrc: self.cfg.ssrc,
            ntp: wall.0,
            // The schedule never shifts (`metronome_sched::pacing`): a packet's RTP timestamp
            // is its due time, so `now` maps to the RTP time of a packet due now.
            rtp_timestamp: self
                .cfg
                .clock
                .rtp_timestamp(self.cfg.rtp_ts_base, self.epoch, now),
            // Both counters wrap modulo 2^32 (RFC 3550 §6.4.1).
            packet_count: self.packets_sent as u32,
            octet_count: self.octets_sent as u32,
        };
        let head = ReportHead::Sender(info, &[]);
        let n = rtcp::write_compound_with(buf, head, &self.cfg.cname, apps, None, bye).ok()?;
        self.counters.sender_reports += 1;
        self.note_sent(wall.compact());
        self.avg_rtcp_size = update_avg_rtcp_size(self.avg_rtcp_size, n);
        Some(n)
    }

    /// Keeps `lsr` among the reports a receiver may echo (the last [`SRS_ECHOED`]).
    fn note_sent(&mut self, lsr: u32) {
        if self.sent_srs.len() == SRS_ECHOED {
            self.sent_srs.pop_front();
        }
        self.sent_srs.push_back(lsr);
    }

    /// The sender reports a receiver may still echo, oldest first: the middle 32 bits of each
    /// one's NTP time (what a report block's LSR holds).
    pub fn sent_reports(&self) -> impl Iterator<Item = u32> + '_ {
        self.sent_srs.iter().copied()
    }

    /// Takes `earlier` (oldest first), the sender reports of an earlier stream with this SSRC
    /// that this one continues (an RTSP session's stream after PAUSE and PLAY), as its own: a
    /// receiver's first reports after the restart echo one of them, and are taken (with their
    /// round trip) rather than counted as an unknown LSR and dropped.
    pub fn continue_from(&mut self, earlier: impl IntoIterator<Item = u32>) {
        let mine = std::mem::take(&mut self.sent_srs);
        for lsr in earlier.into_iter().chain(mine) {
            self.note_sent(lsr);
        }
    }

    /// Writes a DLRR block (RFC 3611 §4.5) answering the RRTRs waiting, as many as fit in
    /// `buf`; its length.
    fn answer_rrtrs(&mut self, now: Timestamp, buf: &mut [u8]) -> usize {
        if self.rrtrs.is_empty() {
            return 0;
        }
        let entries: Vec<(Ssrc, u32, u32)> = self
            .rrtrs
            .iter()
            .map(|(&ssrc, &(lrr, at))| {
                let delay = NtpTime::compact_from_duration(now.saturating_since(at));
                (ssrc, lrr, delay)
            })
            .collect();
        let (n, fit) = rtcp::write_dlrr(buf, self.cfg.ssrc, &entries);
        for (ssrc, _, _) in &entries[..fit] {
            self.rrtrs.remove(ssrc);
        }
        n
    }

    /// A compound RTCP packet from `from`, received at `now` (wall-clock `wall`, for the RTT).
    /// `sent_at` tells when the packet of a sequence number left (`None`: not lately), for the
    /// echoes of TFRC's and TFMCC's reports.
    pub fn handle_rtcp(
        &mut self,
        now: Timestamp,
        wall: NtpTime,
        from: SocketAddr,
        data: &[u8],
        sent_at: &dyn Fn(SeqNo) -> Option<Timestamp>,
    ) {
        self.counters.rtcp_received += 1;
        let Some(heard) = self.hear(data) else {
            self.counters.rtcp_malformed += 1;
            return;
        };
        self.avg_rtcp_size = update_avg_rtcp_size(self.avg_rtcp_size, data.len());
        for e in heard.feedback {
            self.push_event(e);
        }
        for (reporter, block) in heard.blocks {
            self.on_block(now, wall, from, reporter, &block);
        }
        for (ssrc, cname) in heard.cnames {
            if let Some(&i) = self.by_ssrc.get(&ssrc) {
                self.receivers[i].cname = Some(cname.chars().take(255).collect());
            }
        }
        for ssrc in heard.byes {
            if let Some(&i) = self.by_ssrc.get(&ssrc) {
                self.receivers[i].said_bye = true;
                self.push_event(SenderEvent::ReceiverBye { ssrc });
            }
        }
        for (reporter, app) in heard.cc {
            self.on_cc_app(now, reporter, app, sent_at);
        }
        for (ssrc, ntp) in heard.rrtrs {
            // Only a receiver heard from, from its address: forged SSRCs cannot make the
            // sender's reports grow, nor another's answer come from a third party's RRTR.
            let known = self.by_ssrc.get(&ssrc).map(|&i| self.receivers[i].addr);
            if known == Some(from) {
                self.rrtrs.insert(ssrc, (NtpTime(ntp).compact(), now));
            }
        }
        self.nacks = heard.nacks;
    }

    /// The NACKs of the last compound handled (at most 16; the rest are counted in
    /// [`SenderReports::nacks_unread`]), taken.
    pub(crate) fn take_nacks(&mut self) -> Vec<super::resend::NackRequest> {
        std::mem::take(&mut self.nacks)
    }

    /// NACKs not read: beyond the 16 of one compound.
    pub fn nacks_unread(&self) -> u64 {
        self.nacks_unread
    }

    /// Receiver `ssrc`'s last round trip, if it reported one.
    pub fn receiver_rtt(&self, ssrc: Ssrc) -> Option<Duration> {
        let r = &self.receivers[*self.by_ssrc.get(&ssrc)?];
        r.rtt_us.map(Micros::to_duration)
    }

    /// Our SSRC: the stream's.
    pub(crate) fn config_ssrc(&self) -> Ssrc {
        self.cfg.ssrc
    }

    /// The stream's RTP clock, as the sender reports give it.
    pub(crate) fn media_time(&self) -> super::resend::MediaTime {
        super::resend::MediaTime {
            clock: self.cfg.clock,
            base: self.cfg.rtp_ts_base,
            epoch: self.epoch,
        }
    }

    /// What compound packet `data` says, or `None` if it is malformed (then nothing of it is
    /// applied). RFC 8888 blocks about another stream are counted here.
    fn hear(&mut self, data: &[u8]) -> Option<Heard> {
        let our = self.cfg.ssrc;
        let mut h = Heard::default();
        let r = rtcp::parse_compound(data, |item| match item {
            RtcpItem::ReportBlock { reporter, block } => h.blocks.push((reporter, block)),
            RtcpItem::Cc { ssrc, app } => h.cc.push((ssrc, app)),
            RtcpItem::Ccfb(fb) => {
                for b in fb.blocks() {
                    if b.media_ssrc != our {
                        self.counters.blocks_about_others += 1;
                        continue;
                    }
                    h.feedback.push(SenderEvent::PacketFeedback {
                        ssrc: fb.sender_ssrc,
                        report_timestamp: fb.report_timestamp,
                        reports: b.reports().collect(),
                    });
                }
            }
            RtcpItem::Nack(n) if h.nacks.len() < super::resend::MAX_NACKS_PER_COMPOUND => {
                h.nacks.push(super::resend::NackRequest {
                    reporter: n.sender_ssrc,
                    media_ssrc: n.media_ssrc,
                    sequences: n
                        .sequences()
                        .take(super::resend::MAX_NACK_NUMBERS)
                        .collect(),
                })
            }
            RtcpItem::Nack(_) => self.nacks_unread += 1,
            RtcpItem::Xr(rtcp::XrItem::Rrtr { ssrc, ntp }) => h.rrtrs.push((ssrc, ntp)),
            RtcpItem::Bye { ssrc } => h.byes.push(ssrc),
            RtcpItem::Cname { ssrc, cname } => h
                .cnames
                .push((ssrc, String::from_utf8_lossy(cname).into_owned())),
            _ => {}
        });
        r.is_ok().then_some(h)
    }

    /// Receiver `reporter`'s report block, from `from`: its loss, jitter and round trip.
    fn on_block(
        &mut self,
        now: Timestamp,
        wall: NtpTime,
        from: SocketAddr,
        reporter: Ssrc,
        block: &rtcp::Block,
    ) {
        if block.ssrc != self.cfg.ssrc {
            self.counters.blocks_about_others += 1;
            return;
        }
        // LSR 0: it has received no sender report yet (RFC 3550 §6.4.1), which a receiver
        // that echoed one before cannot say: forged under its SSRC.
        let echoed = block.lsr != 0;
        let known_echoer = || {
            self.by_ssrc
                .get(&reporter)
                .is_some_and(|&i| self.receivers[i].echoed)
        };
        if (echoed && !self.sent_srs.contains(&block.lsr)) || (!echoed && known_echoer()) {
            self.counters.unknown_lsr += 1;
            return;
        }
        let Some(i) = self.receiver_index(reporter, from, echoed) else {
            return;
        };
        let rtt = NtpTime::round_trip(wall, block.lsr, block.dlsr);
        let r = &mut self.receivers[i];
        r.echoed |= echoed;
        r.addr = from;
        r.fraction_lost = block.fraction_lost as f64 / 256.0;
        r.cumulative_lost = block.cumulative_lost;
        r.extended_highest_seq = block.extended_highest_seq;
        r.jitter_us = Micros::from_secs_f64(block.jitter as f64 / self.cfg.clock.rate() as f64);
        if let Some(rtt) = rtt {
            r.rtt_us = Some(Micros::from(rtt));
        }
        r.reports += 1;
        r.last_report = now;
        let e = SenderEvent::ReceiverReport {
            ssrc: reporter,
            fraction_lost: r.fraction_lost,
            rtt: r.rtt_us.map(Micros::to_duration),
        };
        self.push_event(e);
    }

    /// A rate controller's APP packet from `reporter`: a TFRC or TFMCC report about this
    /// stream becomes its event, its echo turned into a send time by `sent_at`.
    fn on_cc_app(
        &mut self,
        now: Timestamp,
        reporter: Ssrc,
        app: rtcp::CcApp,
        sent_at: &dyn Fn(SeqNo) -> Option<Timestamp>,
    ) {
        let our = self.cfg.ssrc;
        match app {
            rtcp::CcApp::TfrcFeedback(fb) if fb.media_ssrc == our => {
                match tfrc_report(now, &fb, sent_at) {
                    Some(report) => self.push_event(SenderEvent::Tfrc {
                        ssrc: reporter,
                        report,
                    }),
                    None => self.counters.tfrc_unusable += 1,
                }
            }
            rtcp::CcApp::TfmccFeedback(fb) if fb.media_ssrc == our => {
                let report = crate::cc_app::tfmcc_report(&fb, |seq| {
                    sent_at(SeqNo::of_extended(u64::from(seq))).filter(|t| *t <= now)
                });
                self.push_event(SenderEvent::Tfmcc {
                    ssrc: reporter,
                    report,
                });
            }
            rtcp::CcApp::TfrcFeedback(_) | rtcp::CcApp::TfmccFeedback(_) => {
                self.counters.blocks_about_others += 1
            }
            // A sender's announcement (another sender on the group): not for us.
            _ => {}
        }
    }

    /// Receiver `ssrc`'s place in the table, made if new (`echoed`: its report echoed one of
    /// our sender reports); `None` if the table is full.
    fn receiver_index(&mut self, ssrc: Ssrc, addr: SocketAddr, echoed: bool) -> Option<usize> {
        if let Some(&i) = self.by_ssrc.get(&ssrc) {
            return Some(i);
        }
        if self.receivers.len() >= self.cfg.max_receivers && !(echoed && self.drop_a_stranger()) {
            self.counters.too_many_receivers += 1;
            return None;
        }
        self.receivers.push(ReceiverView {
            ssrc,
            addr,
            cname: None,
            fraction_lost: 0.0,
            cumulative_lost: 0,
            extended_highest_seq: 0,
            jitter_us: Micros::ZERO,
            rtt_us: None,
            reports: 0,
            last_report: Timestamp::ZERO,
            said_bye: false,
            echoed,
        });
        self.by_ssrc.insert(ssrc, self.receivers.len() - 1);
        self.push_event(SenderEvent::NewReceiver { ssrc, addr });
        Some(self.receivers.len() - 1)
    }
}

impl SenderReports {
    /// Makes room for a receiver that echoed a sender report: drops the one that never did
    /// and was heard from longest ago. Whether there was one.
    fn drop_a_stranger(&mut self) -> bool {
        let Some((i, _)) = self
            .receivers
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.echoed)
            .min_by_key(|(_, r)| r.last_report)
        else {
            return false;
        };
        let gone = self.receivers.remove(i);
        self.by_ssrc.remove(&gone.ssrc);
        for v in self.by_ssrc.values_mut() {
            if *v > i {
                *v -= 1;
            }
        }
        self.rrtrs.remove(&gone.ssrc);
        self.counters.strangers_dropped += 1;
        true
    }
}

/// The TFRC report of `fb`, received at `now`: `None` if its echo is not of a packet sent
/// lately (`sent_at`), or its delay is longer than the time since.
fn tfrc_report(
    now: Timestamp,
    fb: &rtcp::TfrcFeedback,
    sent_at: &dyn Fn(SeqNo) -> Option<Timestamp>,
) -> Option<metronome_cc::TfrcReport> {
    let sent = sent_at(SeqNo::of_extended(u64::from(fb.echo_seq)))?;
    let since = (sent <= now).then(|| now.saturating_since(sent))?;
    let rtt = since.checked_sub(std::time::Duration::from_micros(u64::from(fb.t_delay_us)))?;
    Some(metronome_cc::TfrcReport {
        p: fb.p(),
        x_recv_bps: f64::from(fb.x_recv_bytes_per_s) * 8.0,
        rtt_sample: rtt,
    })
}
