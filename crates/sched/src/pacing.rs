//! The pacing model of one stream, sans-IO: for each packet, given its due time and the time
//! now, whether it leaves now, waits, or is dropped; and the account of how late packets left.
//!
//! The schedule never moves. A packet's due time is the time its RTP timestamp names (RFC 2250
//! §2: the timestamp is the target transmission time), so a packet that leaves late is late,
//! and is measured as such. After a stall (a preempted thread, a host that took the CPU away,
//! a producer that fell behind) the stream does one of two things, as [`LatePolicy`] says:
//!
//! - **catch up**: packets more than the stall threshold late leave at a bounded rate, a
//!   multiple of the stream's rate (capped by the link, if known), until the schedule is met
//!   again: a token bucket as deep as one packet, or one job of a stream that sends its jobs
//!   as bursts. The backlog of a stall `S` at rate `R` drains in about `S / (factor − 1)`.
//! - **drop late**: packets more than `after` past their due time are dropped and counted.
//!   A frame's later packets share its first packet's fate ([`PacingModel::decide_in_frame`],
//!   [`PacingModel::drop_with_frame`]): a frame leaves whole or not at all.
//!
//! Either way, every stall, every caught-up and every dropped packet is counted.

use metronome_time::{Bitrate, Distribution, Summary, Timestamp};
use serde::Serialize;
use std::time::Duration;

/// What a stream does with packets that are late by more than the stall threshold.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum LatePolicy {
    /// Send them at up to `factor` × the stream's rate (and never above the link's capacity)
    /// until the schedule is met again. `factor` must exceed 1 for the backlog to drain.
    CatchUp {
        /// Multiple of the stream's rate that late packets may leave at (2.0 = twice the rate).
        factor: f64,
    },
    /// Drop every packet that is more than `after` past its due time.
    DropLate {
        /// Lateness beyond which a packet is dropped instead of sent (a frame already begun
        /// still leaves whole).
        after: Duration,
    },
}

impl LatePolicy {
    /// The default catch-up: twice the stream's rate, so a stall of `S` is made good in `S`.
    pub const CATCH_UP: LatePolicy = LatePolicy::CatchUp { factor: 2.0 };
}

/// How one stream is paced: when it counts as stalled, what it does with late packets, and the
/// limits on catching up. The default is a 2 ms stall threshold and [`LatePolicy::CATCH_UP`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PacingConfig {
    /// Lateness beyond which a packet counts as caught in a stall.
    pub stall_threshold: Duration,
    /// What happens to packets later than `stall_threshold`: catch up or drop.
    pub late: LatePolicy,
    /// The link's capacity: catching up never exceeds it.
    pub link_capacity: Option<Bitrate>,
    /// Bytes catching up may send at once (the depth of its token bucket), beyond which it
    /// keeps to its rate. 0: one packet. A stream whose jobs send several packets together (a
    /// period grid) sets one job's worth, so that a late job still leaves as the burst it is.
    pub catch_up_burst_bytes: u64,
}

impl Default for PacingConfig {
    fn default() -> Self {
        PacingConfig {
            stall_threshold: Duration::from_millis(2),
            late: LatePolicy::CATCH_UP,
            link_capacity: None,
            catch_up_burst_bytes: 0,
        }
    }
}

/// What to do with the packet at the head of a stream's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Not yet: ask again at this time.
    Wait(Timestamp),
    /// Send it now; it is this late.
    Send {
        /// Send time minus due time (zero when on time).
        late: Duration,
    },
    /// Drop it; it is this late.
    Drop {
        /// Drop time minus due time (zero for a frame-mate dropped before its due time).
        late: Duration,
    },
}

/// Lateness statistics of a paced stream.
#[derive(Clone, Copy, Debug, Serialize, schemars::JsonSchema)]
pub struct PacingStats {
    /// Packets sent.
    pub packets: u64,
    /// Episodes in which packets were later than the stall threshold.
    pub stalls: u64,
    /// Packets sent later than the stall threshold (under catch-up, at the bounded rate).
    pub late_packets: u64,
    /// Packets dropped for being late (drop-late policy).
    pub dropped: u64,
    /// Actual send time minus due time, of every packet sent.
    pub lateness: Summary,
}

/// The pacing state of one stream (see the module docs): decides per packet whether it leaves,
/// waits or is dropped, keeps the catch-up token bucket, and counts stalls, late and dropped
/// packets and the lateness of every packet sent.
pub struct PacingModel {
    cfg: PacingConfig,
    /// The stream's rate, which bounds catching up.
    rate: Bitrate,
    /// Under catch-up: the token bucket, in bytes, as of `tokens_at`.
    tokens: f64,
    tokens_at: Timestamp,
    in_stall: bool,
    stalls: u64,
    late_packets: u64,
    dropped: u64,
    lateness: Distribution,
}

impl PacingModel {
    /// A stream sending at about `rate` (the rate that bounds catching up).
    pub fn new(cfg: PacingConfig, rate: Bitrate) -> Self {
        PacingModel {
            cfg,
            rate,
            tokens: 0.0,
            tokens_at: Timestamp::ZERO,
            in_stall: false,
            stalls: 0,
            late_packets: 0,
            dropped: 0,
            lateness: Distribution::new(),
        }
    }

    /// The configuration the model was built with.
    pub fn config(&self) -> &PacingConfig {
        &self.cfg
    }

    /// The stream's rate changed (a rate controller, a new rendition).
    pub fn set_rate(&mut self, rate: Bitrate) {
        self.rate = rate;
    }

    /// The rate late packets leave at while catching up.
    pub fn catch_up_rate(&self) -> Option<Bitrate> {
        let LatePolicy::CatchUp { factor } = self.cfg.late else {
            return None;
        };
        let r = self.rate.scaled(factor);
        Some(self.cfg.link_capacity.map_or(r, |cap| r.min(cap)))
    }

    /// Is the stream behind its schedule by more than the stall threshold?
    pub fn in_stall(&self) -> bool {
        self.in_stall
    }

    /// Decides what becomes of a packet of `wire_bytes` due at `due`, at `now`, and accounts
    /// for it when it leaves or is dropped.
    pub fn decide(&mut self, now: Timestamp, due: Timestamp, wire_bytes: u64) -> Decision {
        self.decide_as(now, due, wire_bytes, true)
    }

    /// [`PacingModel::decide`] for a packet of a frame that has begun to leave: a frame
    /// leaves whole or not at all, so it is never dropped. Late beyond the drop-late bound, it
    /// leaves at once (and counts as a late packet); under catch-up it keeps to the rate bound.
    pub fn decide_in_frame(&mut self, now: Timestamp, due: Timestamp, wire_bytes: u64) -> Decision {
        self.decide_as(now, due, wire_bytes, false)
    }

    /// A packet of a frame whose first packet was dropped is dropped with it, at once (even
    /// before its own due time), and counted.
    pub fn drop_with_frame(&mut self, now: Timestamp, due: Timestamp) -> Decision {
        self.dropped += 1;
        Decision::Drop {
            late: now.saturating_since(due),
        }
    }

    fn decide_as(
        &mut self,
        now: Timestamp,
        due: Timestamp,
        wire_bytes: u64,
        may_drop: bool,
    ) -> Decision {
        if now < due {
            return Decision::Wait(due);
        }
        let late = now.saturating_since(due);
        if late <= self.cfg.stall_threshold {
            self.in_stall = false;
            self.record_sent(late);
            return Decision::Send { late };
        }
        if !self.in_stall {
            self.in_stall = true;
            self.stalls += 1;
            // The bucket starts full: the first late packets go at once, the rest at the rate.
            self.tokens = f64::MAX;
            self.tokens_at = now;
        }
        match self.cfg.late {
            LatePolicy::DropLate { after } if may_drop && late > after => {
                self.dropped += 1;
                Decision::Drop { late }
            }
            LatePolicy::DropLate { .. } => {
                self.late_packets += 1;
                self.record_sent(late);
                Decision::Send { late }
            }
            LatePolicy::CatchUp { .. } => {
                if let Some(wait) = self.catch_up_wait(now, wire_bytes) {
                    return Decision::Wait(now + wait);
                }
                self.late_packets += 1;
                self.record_sent(late);
                Decision::Send { late }
            }
        }
    }

    /// The token bucket of catching up: refills at the catch-up rate up to the burst; a packet
    /// takes its bytes. `None`: it may leave now (and has taken them); `Some(d)`: wait `d`.
    fn catch_up_wait(&mut self, now: Timestamp, wire_bytes: u64) -> Option<Duration> {
        let rate = self.catch_up_rate()?;
        if rate == Bitrate::ZERO {
            return None;
        }
        let depth = self.cfg.catch_up_burst_bytes.max(wire_bytes) as f64;
        let elapsed = now.saturating_since(self.tokens_at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate.as_bps() as f64 / 8.0).min(depth);
        self.tokens_at = now;
        let need = wire_bytes as f64;
        if self.tokens >= need {
            self.tokens -= need;
            return None;
        }
        let short = (need - self.tokens).ceil() as u64;
        // At least a nanosecond, so that the driver's clock moves on.
        Some(rate.transmit_time(short)?.max(Duration::from_nanos(1)))
    }

    fn record_sent(&mut self, late: Duration) {
        self.lateness
            .record(u64::try_from(late.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Lateness (send time minus due time) of every packet sent so far, in nanoseconds.
    pub fn lateness(&self) -> &Distribution {
        &self.lateness
    }

    /// (stalls, late packets, dropped packets): the counts, without the lateness summary.
    pub fn counts(&self) -> (u64, u64, u64) {
        (self.stalls, self.late_packets, self.dropped)
    }

    /// The counts and a summary of the lateness distribution, for reports.
    pub fn stats(&self) -> PacingStats {
        PacingStats {
            packets: self.lateness.len(),
            stalls: self.stalls,
            late_packets: self.late_packets,
            dropped: self.dropped,
            lateness: self.lateness.summary(),
        }
    }
}

#[cfg(test)]
mod tests;
