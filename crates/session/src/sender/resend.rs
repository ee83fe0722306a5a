//! A [`super::SenderSession`]'s answers to NACKs: the [`Repairer`] with the stream's history, and
//! the retransmissions waiting for the driver ([`super::SenderSession::poll_repair`]).
//!
//! The driver gives the session each packet as it left ([`super::SenderSession::keep_sent`]:
//! after renumbering and the send-time stamp, before SRTP); a NACK in a receiver's RTCP makes
//! retransmissions of those that can still make their play-out deadline, within the repair
//! budget (a share of the stream's rate: repairs count against the rate it was admitted with
//! and its controller's target).
//!
//! To a group, the session also tells the group which losses a repair is on its way for
//! ([`SenderRepair::tell_group`]): a TLLEI (RFC 6642 §4.1) in its next RTCP compound, which goes
//! where its sender reports go. The sender is the group's feedback target (receivers report to
//! it by unicast, RFC 5760), so no receiver hears another's NACK; the TLLEI is what keeps the
//! others from asking for the same packet during their dither (RFC 4585 §3.5.2).

use crate::repair::{Outlet, Path, RepairConfig, RepairCounters, Repairer, SendHistory};
use metronome_time::{MediaClock, RtpTime, Timestamp};
use metronome_wire::{SeqNo, Ssrc};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// How a sender answers NACKs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SenderRepair {
    /// The retransmission stream, its budget and its bounds.
    pub repairer: RepairConfig,
    /// Packets kept for retransmission (rounded up to a power of two, at most 65 536).
    pub history_packets: usize,
    /// The largest packet kept, bytes (larger ones are never retransmitted).
    pub max_packet: usize,
    /// How long after its due time a packet is still of use at the receivers, beyond the
    /// way there: their play-out delay. A repair is sent only if it reaches the receiver by
    /// then, counting the receiver's round trip beyond the least seen (its queues) as delay.
    pub playout_delay: Duration,
    /// The round trip assumed until a receiver report measures one.
    pub initial_rtt: Duration,
    /// The stream goes to a group: losses a repair is on its way for are told to the group
    /// (RFC 6642 TLLEI), at most [`MAX_NOTICED`] numbers per RTCP compound, one compound per
    /// [`NOTICE_GAP`] at most.
    pub tell_group: bool,
    /// Every retransmission goes to every destination of the stream, not to the asker's alone
    /// ([`super::Repair::outlet`] `None`): for a stream that tells a group (what a TLLEI says
    /// must hold wherever it is heard, and its RTCP goes to every destination), and for SRTP
    /// (a destination that saw only some of the retransmission stream's packets could lose
    /// track of its rollover count, RFC 3711 §3.3.1). `tell_group` implies it.
    pub everywhere: bool,
}

impl SenderRepair {
    /// Retransmissions as `rtx` (their SSRC and payload type) numbered from
    /// `initial_sequence`, within [`crate::repair::RTX_BUDGET_SHARE`] of the rate, for
    /// receivers that play out `playout_delay` after the fastest packet; a history of
    /// `history_packets` packets of at most `max_packet` bytes; a 100 ms round trip assumed
    /// until a receiver report measures one.
    pub fn rtx(
        rtx: metronome_wire::rtx::StreamIds,
        initial_sequence: SeqNo,
        playout_delay: Duration,
        history_packets: usize,
        max_packet: usize,
    ) -> SenderRepair {
        SenderRepair {
            repairer: RepairConfig::new(rtx, initial_sequence, crate::repair::RTX_BUDGET_SHARE),
            history_packets,
            max_packet,
            playout_delay,
            initial_rtt: Duration::from_millis(100),
            tell_group: false,
            everywhere: false,
        }
    }

    /// These repairs, to a group: losses being repaired are told to it, and every
    /// retransmission goes to every destination.
    pub fn to_group(self) -> SenderRepair {
        SenderRepair {
            tell_group: true,
            everywhere: true,
            ..self
        }
    }

    /// These repairs, every one to every destination ([`SenderRepair::everywhere`]).
    pub fn to_every_destination(self) -> SenderRepair {
        SenderRepair {
            everywhere: true,
            ..self
        }
    }

    /// The memory its history holds, bytes (what admission counts against the stream).
    pub fn history_bytes(&self) -> u64 {
        let packets = self.history_packets.clamp(1, 1 << 16).next_power_of_two() as u64;
        packets * (self.max_packet.clamp(1, usize::from(u16::MAX)) as u64 + 64)
    }
}

/// Retransmissions waiting for the driver at most; more are counted and not made.
pub const MAX_WAITING: usize = 64;
/// Of those, at most this many asked for by strangers: receivers the sender has no round
/// trip for (none of their receiver reports echoed a sender report). A storm of NACKs from
/// forged SSRCs fills these places, not those of the receivers that reported: their NACKs
/// are still answered, and their repairs leave first. A receiver's first NACKs, before its
/// first echo, count as a stranger's.
pub const MAX_WAITING_FOR_STRANGERS: usize = MAX_WAITING / 2;
/// Retransmissions that may leave one after another, at most: each packet of the stream that
/// leaves pays the repair budget's share of one ([`RepairConfig::budget_share`], a quarter by
/// default), and at most this many are paid for ahead (a burst of losses is answered at once
/// up to this many).
pub const REPAIR_BURST: u64 = 8;
/// One retransmission in the credit's units.
const ONE_REPAIR: u64 = 1_000_000;
/// Lost packets waiting to be told to the group at most; more are counted and not told.
pub const MAX_NOTICED: usize = 64;
/// The least time between two TLLEIs: a storm of NACKs (forged ones too) makes at most one
/// compound to the group per gap, each of at most [`MAX_NOTICED`] numbers.
pub const NOTICE_GAP: Duration = Duration::from_millis(10);
/// Receivers whose least round trip is kept; beyond, a receiver's own is its last.
const MAX_RECEIVERS: usize = 4096;

/// A NACK a receiver sent: who, about which stream, which numbers (at most
/// [`MAX_NACK_NUMBERS`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NackRequest {
    pub(crate) reporter: Ssrc,
    pub(crate) media_ssrc: Ssrc,
    pub(crate) sequences: Vec<SeqNo>,
}

/// Numbers taken from one NACK: one more than a repairer answers, so that it counts the NACK
/// as truncated; the rest is not read.
pub(crate) const MAX_NACK_NUMBERS: usize = 257;
/// NACKs taken from one RTCP compound; the rest are counted and not read.
pub(crate) const MAX_NACKS_PER_COMPOUND: usize = 16;

/// The stream's RTP clock: when a timestamp was sampled.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MediaTime {
    pub(crate) clock: MediaClock,
    /// The RTP timestamp at `epoch`.
    pub(crate) base: RtpTime,
    pub(crate) epoch: Timestamp,
}

impl MediaTime {
    /// When timestamp `ts` was sampled, taking the instance of it nearest `near` (timestamps
    /// wrap every 2^32 ticks).
    fn at(&self, ts: RtpTime, near: Timestamp) -> Timestamp {
        let near_ts = self.clock.rtp_timestamp(self.base, self.epoch, near);
        let ticks = ts.delta(near_ts);
        let d = self.clock.duration(u64::from(ticks.unsigned_abs()));
        if ticks < 0 {
            near.checked_sub(d).unwrap_or(Timestamp::ZERO)
        } else {
            near + d
        }
    }
}

/// The session's repair state; see the module docs.
#[derive(Debug)]
pub(crate) struct Resend {
    repairer: Repairer,
    media_time: MediaTime,
    playout_delay: Duration,
    initial_rtt: Duration,
    /// Retransmissions go to every destination ([`SenderRepair::everywhere`]).
    everywhere: bool,
    /// The least round trip each receiver reported (by SSRC, at most [`MAX_RECEIVERS`]): the
    /// way there without queues.
    min_rtt: BTreeMap<Ssrc, Duration>,
    /// Retransmissions made, each where it goes, the latest time it may leave and whether a
    /// stranger asked for it ([`MAX_WAITING_FOR_STRANGERS`]).
    waiting: VecDeque<Waiting>,
    /// Buffers of sent retransmissions, reused.
    spare: Vec<Vec<u8>>,
    /// Retransmissions not made because [`MAX_WAITING`] were waiting (or
    /// [`MAX_WAITING_FOR_STRANGERS`] for a stranger).
    overflow: u64,
    /// Retransmissions handed to the driver, and their bytes (RTP header and payload).
    packets: u64,
    bytes: u64,
    /// Retransmissions dropped while they waited: their latest departure passed.
    expired: u64,
    /// Retransmissions larger than the driver's buffer, dropped.
    too_large: u64,
    /// What the group is to be told, with [`SenderRepair::tell_group`].
    notices: Option<Notices>,
    /// Retransmissions the stream's packets have paid for, in millionths of one (at most
    /// [`REPAIR_BURST`]), and what each packet pays: whole numbers, so that ten packets at a
    /// 10 % share pay for one exactly.
    credit: u64,
    share: u64,
    /// The last play-out time of a packet kept: until then a NACK may still be answered.
    last_deadline: Option<Timestamp>,
}

/// A retransmission made, waiting for the driver.
#[derive(Debug)]
struct Waiting {
    packet: Vec<u8>,
    /// Where it goes: back where its NACK came from, or everywhere (`None`).
    outlet: Option<Outlet>,
    /// The latest time it may leave and still make its deadline.
    latest: Timestamp,
    /// Whether a receiver with no round trip known asked for it.
    stranger: bool,
}

/// Losses told to the group (RFC 6642 TLLEI).
#[derive(Debug, Default)]
struct Notices {
    /// Numbers a repair is on its way for, not told yet (at most [`MAX_NOTICED`]).
    pending: Vec<SeqNo>,
    last: Option<Timestamp>,
    packets: u64,
    told: u64,
    dropped: u64,
}

/// What the session's repairs did: the repairer's counts, and the session's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct ResendStats {
    /// Asked, sent, too late, unknown, over budget, duplicate, truncated and foreign NACKs.
    #[serde(flatten)]
    pub repairer: RepairCounters,
    /// Retransmissions not made because [`MAX_WAITING`] were waiting for the driver, or
    /// [`MAX_WAITING_FOR_STRANGERS`] asked by receivers with no round trip known.
    pub overflow: u64,
    /// Retransmissions made but dropped while they waited for the driver (it sends them
    /// with the stream's packets): by then they could no longer make their deadline.
    pub expired: u64,
    /// Retransmissions larger than the driver's buffer, dropped (none where the driver
    /// sizes its buffer from the largest packet kept).
    pub too_large: u64,
    /// Retransmissions handed to the driver.
    pub packets: u64,
    /// Retransmissions made and still waiting for the driver when these counts were taken
    /// (at a run's end, ones the stream's packets had not paid for yet). Made (`sent`) is
    /// `packets + expired + too_large + waiting`.
    pub waiting: u64,
    /// Their bytes (RTP header and payload).
    pub bytes: u64,
    /// NACKs in one compound beyond the 16 read.
    pub nacks_unread: u64,
    /// TLLEIs sent to the group (RFC 6642): losses a repair was on its way for.
    pub loss_notices: u64,
    /// Sequence numbers they told.
    pub noticed: u64,
    /// Numbers not told: 64 were waiting already ([`MAX_NOTICED`]), or the RTCP buffer had no
    /// room.
    pub notices_dropped: u64,
}

impl Resend {
    /// The repairs of stream `media_ssrc` (whose timestamps follow `media_time`), now
    /// sending at `rate_bps`.
    pub(crate) fn new(
        cfg: SenderRepair,
        media_ssrc: Ssrc,
        media_time: MediaTime,
        rate_bps: u64,
    ) -> Resend {
        let history = SendHistory::new(cfg.history_packets, cfg.max_packet);
        Resend {
            media_time,
            repairer: Repairer::new(cfg.repairer, media_ssrc, history, rate_bps),
            playout_delay: cfg.playout_delay,
            initial_rtt: cfg.initial_rtt,
            // What a TLLEI tells must hold wherever the stream's RTCP is heard.
            everywhere: cfg.everywhere || cfg.tell_group,
            min_rtt: BTreeMap::new(),
            waiting: VecDeque::with_capacity(MAX_WAITING),
            // Buffers for every retransmission that may wait, made now: neither the thread
            // that reads NACKs nor the one that polls (a pacing thread) allocates.
            spare: (0..MAX_WAITING)
                .map(|_| Vec::with_capacity(cfg.max_packet + metronome_wire::rtx::OSN_LEN))
                .collect(),
            overflow: 0,
            expired: 0,
            too_large: 0,
            packets: 0,
            bytes: 0,
            // Its list made now too, for the same reason.
            notices: cfg.tell_group.then(|| Notices {
                pending: Vec::with_capacity(MAX_NOTICED),
                ..Notices::default()
            }),
            credit: REPAIR_BURST * ONE_REPAIR,
            // A NaN share pays nothing (`as` saturates it to 0).
            share: (cfg.repairer.budget_share.clamp(0.0, 1.0) * ONE_REPAIR as f64).round() as u64,
            last_deadline: None,
        }
    }

    pub(crate) fn stats(&self, nacks_unread: u64) -> ResendStats {
        ResendStats {
            repairer: self.repairer.counters(),
            overflow: self.overflow,
            expired: self.expired,
            too_large: self.too_large,
            packets: self.packets,
            waiting: self.waiting.len() as u64,
            bytes: self.bytes,
            nacks_unread,
            loss_notices: self.notices.as_ref().map_or(0, |n| n.packets),
            noticed: self.notices.as_ref().map_or(0, |n| n.told),
            notices_dropped: self.notices.as_ref().map_or(0, |n| n.dropped),
        }
    }

    /// The stream's rate changed: the budget follows.
    pub(crate) fn set_rate(&mut self, rate_bps: u64) {
        self.repairer.set_rate(rate_bps);
    }

    /// Receiver `ssrc` reported a round trip.
    pub(crate) fn rtt_sample(&mut self, ssrc: Ssrc, rtt: Duration) {
        if let Some(m) = self.min_rtt.get_mut(&ssrc) {
            *m = (*m).min(rtt);
        } else if self.min_rtt.len() < MAX_RECEIVERS {
            self.min_rtt.insert(ssrc, rtt);
        }
    }

    /// Packet `packet` (due at `due`) left. It is of use until its timestamp's play-out
    /// time: a receiver's clock is set by the fastest packet, the first of a frame to leave on
    /// time, so a later packet of the frame (paced out over its period) has less time.
    pub(crate) fn sent(&mut self, packet: &[u8], due: Timestamp) {
        let Ok(view) = metronome_wire::rtp::RtpView::parse(packet) else {
            return;
        };
        self.credit = (self.credit + self.share).min(REPAIR_BURST * ONE_REPAIR);
        let sampled = self.media_time.at(view.timestamp(), due).min(due);
        let deadline = sampled + self.playout_delay;
        self.repairer.sent(view.sequence(), packet, deadline);
        self.last_deadline = self.last_deadline.max(Some(deadline));
    }

    /// Until when a repair may still be of use: the latest play-out time of a packet kept
    /// (none kept yet: `None`).
    pub(crate) fn useful_until(&self) -> Option<Timestamp> {
        self.last_deadline
    }

    /// Answers `nack`, from a receiver behind `outlet` whose last round trip was `rtt` (if
    /// known), at `now`; its repairs go to `outlet` (or everywhere, [`SenderRepair::everywhere`]).
    /// A receiver with no round trip known is a stranger ([`MAX_WAITING_FOR_STRANGERS`]).
    pub(crate) fn on_nack(
        &mut self,
        nack: &NackRequest,
        outlet: Outlet,
        rtt: Option<Duration>,
        now: Timestamp,
    ) {
        let stranger = rtt.is_none();
        let rtt = rtt.unwrap_or(self.initial_rtt);
        // The receiver's clock is set by its fastest packet: a repair is late by the delay
        // beyond the fastest way there (half the round trip beyond its least).
        let base = self
            .min_rtt
            .get(&nack.reporter)
            .map_or(rtt, |m| rtt.min(*m));
        let path = Path {
            to_receiver: (rtt - base) / 2,
            rtt,
            outlet,
            everywhere: self.everywhere,
        };
        let to = (!self.everywhere).then_some(outlet);
        let (waiting, spare, overflow) = (&mut self.waiting, &mut self.spare, &mut self.overflow);
        let mut strangers = waiting.iter().filter(|w| w.stranger).count();
        let mut emit = |p: &[u8], latest: Timestamp| {
            if waiting.len() == MAX_WAITING || (stranger && strangers == MAX_WAITING_FOR_STRANGERS)
            {
                *overflow += 1;
                return false;
            }
            let mut packet = spare.pop().unwrap_or_default();
            packet.clear();
            packet.extend_from_slice(p);
            waiting.push_back(Waiting {
                packet,
                outlet: to,
                latest,
                stranger,
            });
            strangers += usize::from(stranger);
            true
        };
        let seqs = nack.sequences.iter().copied();
        self.repairer
            .on_nack(nack.media_ssrc, seqs, now, path, &mut emit);
        if let Some(n) = self.notices.as_mut() {
            let max = self.repairer.max_per_nack();
            for &seq in nack.sequences.iter().take(max) {
                if self.repairer.on_its_way(seq, now, rtt) && !n.pending.contains(&seq) {
                    if n.pending.len() < MAX_NOTICED {
                        n.pending.push(seq);
                    } else {
                        n.dropped += 1;
                    }
                }
            }
        }
    }

    /// When the group is next to be told of losses, if any wait.
    pub(crate) fn notice_due(&self) -> Option<Timestamp> {
        let n = self.notices.as_ref().filter(|n| !n.pending.is_empty())?;
        Some(n.last.map_or(Timestamp::ZERO, |t| t + NOTICE_GAP))
    }

    /// Writes the TLLEI due at `now` from the stream `ssrc` into `buf` (after a compound's
    /// sender report); its length, 0 if none is due. Numbers that do not fit are dropped.
    pub(crate) fn write_notice(&mut self, now: Timestamp, ssrc: Ssrc, buf: &mut [u8]) -> usize {
        if self.notice_due().is_none_or(|t| t > now) {
            return 0;
        }
        let Some(n) = self.notices.as_mut() else {
            return 0;
        };
        // One 4-byte entry per number at worst, after 12 bytes of header.
        let room = buf.len().saturating_sub(12) / 4;
        let fit = n.pending.len().min(room);
        let first = n.pending[0];
        n.pending.sort_unstable_by_key(|s| s.since(first));
        let len = metronome_wire::rtcp::write_tllei(buf, ssrc, ssrc, &n.pending[..fit]);
        n.dropped += (n.pending.len() - fit) as u64;
        if len > 0 {
            n.packets += 1;
            n.told += fit as u64;
        }
        n.pending.clear();
        n.last = Some(now);
        len
    }

    /// The next retransmission that can still make its deadline if it leaves at `leaves`,
    /// written into `buf`; its length and where it goes (`None`: everywhere). One whose time
    /// has passed while it waited is dropped (counted as expired), one that does not fit too
    /// (counted as too large).
    pub(crate) fn poll(
        &mut self,
        leaves: Timestamp,
        buf: &mut [u8],
    ) -> Option<(usize, Option<Outlet>)> {
        loop {
            if self.credit < ONE_REPAIR {
                // Unpaid: it waits for the stream's next packets, or expires meanwhile.
                self.drop_expired(leaves);
                return None;
            }
            // A reporting receiver's repair goes before the strangers' that waited longer.
            let next = self.waiting.iter().position(|w| !w.stranger);
            let w = self.waiting.remove(next.unwrap_or(0))?;
            let b = w.packet;
            let n = b.len();
            let send = if leaves > w.latest {
                self.expired += 1;
                false
            } else if n > buf.len() {
                self.too_large += 1;
                false
            } else {
                buf[..n].copy_from_slice(&b);
                self.packets += 1;
                self.bytes += n as u64;
                true
            };
            if self.spare.len() < MAX_WAITING {
                self.spare.push(b);
            }
            if send {
                self.credit -= ONE_REPAIR;
                return Some((n, w.outlet));
            }
        }
    }

    /// Drops the waiting retransmissions that can no longer leave in time at `now`.
    fn drop_expired(&mut self, now: Timestamp) {
        while self.waiting.front().is_some_and(|w| now > w.latest) {
            if let Some(w) = self.waiting.pop_front() {
                self.expired += 1;
                if self.spare.len() < MAX_WAITING {
                    self.spare.push(w.packet);
                }
            }
        }
    }
}
