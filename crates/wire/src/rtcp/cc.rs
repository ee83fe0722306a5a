//! What congestion control adds to RTCP: APP packets (RFC 3550 §6.7) between a sender's rate
//! controller and its receivers. RFC 5348 and RFC 4654 put these fields in their own packet
//! headers; over RTP they travel in RTCP, each as an APP packet after the report and the
//! CNAME of a compound. Every field is a 32-bit word in network order (or two 16-bit halves);
//! rates are bytes per second, times microseconds, loss event rates fractions of 2^32 − 1.
//!
//! | name, subtype | from → to | what | data bytes |
//! |---|---|---|---|
//! | `TFRC` 0 | receiver → sender | [`TfrcFeedback`]: RFC 5348 §3.2.2's feedback | 20 |
//! | `TFRC` 1 | sender → receivers | [`TfrcRtt`]: the sender's RTT (RFC 5348 §3.2.1's RTT field) | 4 |
//! | `TFMC` 0 | sender → group | [`TfmccSender`]: RFC 4654 §2.2.1's data-packet fields | 36 |
//! | `TFMC` 1 | receiver → sender | [`TfmccFeedback`]: RFC 4654 §2.2.2's feedback fields | 36 |
//!
//! The APP packet's SSRC is its sender's: the receiver that reports, or the media sender.
//! An APP packet of these names with another subtype or length is not misread: it is
//! [`crate::rtcp::RtcpItem::Other`].

use crate::Ssrc;

/// One congestion-control APP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcApp {
    /// `TFRC` subtype 0: a TFRC receiver's feedback to the sender.
    TfrcFeedback(TfrcFeedback),
    /// `TFRC` subtype 1: the sender's RTT estimate, for its receivers.
    TfrcRtt(TfrcRtt),
    /// `TFMC` subtype 0: a TFMCC sender's per-round fields, for its group.
    TfmccSender(TfmccSender),
    /// `TFMC` subtype 1: a TFMCC receiver's feedback to the sender.
    TfmccFeedback(TfmccFeedback),
}

/// `p` in 0..=1 as a fraction of 2^32 − 1.
pub fn fraction_of(p: f64) -> u32 {
    (p.clamp(0.0, 1.0) * u32::MAX as f64).round() as u32
}

/// A fraction of 2^32 − 1 as a number in 0..=1.
pub fn fraction_value(f: u32) -> f64 {
    f as f64 / u32::MAX as f64
}

/// A rate in bytes per second as a word: saturating, and `u32::MAX` for "none yet" or
/// infinite.
pub fn rate_word(bytes_per_s: f64) -> u32 {
    if bytes_per_s.is_finite() {
        bytes_per_s.clamp(0.0, (u32::MAX - 1) as f64).round() as u32
    } else {
        u32::MAX
    }
}

/// A TFRC receiver's report (RFC 5348 §3.2.2), `TFRC` subtype 0:
///
/// ```text
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |V=2|P|    0    |   PT=APP=204  |          length = 7           |
/// |                   SSRC of the receiver                        |
/// |                      name = "TFRC"                            |
/// |             SSRC of the media source reported on              |
/// |   echo: extended sequence number of the last packet received  |
/// |   t_delay: µs from that packet's arrival to this report       |
/// |   X_recv: bytes per second received over the last RTT         |
/// |   p: the loss event rate, a fraction of 2^32 (0: none yet)    |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// ```
///
/// RFC 5348 §3.2.2's timestamp echo names the packet by its sequence number (the low 32 bits
/// of the receiver's extended one) rather than by its RTP timestamp: a video packet's RTP
/// timestamp is its frame's presentation time, shared by every packet of the frame however
/// they are paced, while the sender keeps when each sequence number left. So `now − sent −
/// t_delay` is a round-trip sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TfrcFeedback {
    /// SSRC of the media source this feedback is about.
    pub media_ssrc: Ssrc,
    /// Low 32 bits of the extended RTP sequence number of the last packet received; the
    /// sender looks up when it sent it.
    pub echo_seq: u32,
    /// Microseconds from that packet's arrival to this report being sent (RFC 5348's
    /// `t_delay`), which the sender subtracts from the round trip.
    pub t_delay_us: u32,
    /// Rate received over the last RTT (RFC 5348's `X_recv`), bytes per second; `u32::MAX`
    /// for none yet (see [`rate_word`]).
    pub x_recv_bytes_per_s: u32,
    /// The loss event rate as on the wire: `p × (2^32 − 1)`; see [`TfrcFeedback::p`].
    pub p_fraction: u32,
}

impl TfrcFeedback {
    /// The loss event rate, 0..=1.
    pub fn p(&self) -> f64 {
        fraction_value(self.p_fraction)
    }

    /// `p` (0..=1) as on the wire.
    pub fn fraction_of(p: f64) -> u32 {
        fraction_of(p)
    }
}

/// The sender's round-trip time estimate, for its receivers (RFC 5348 §3.2.1: the receiver
/// groups losses into loss events and paces its reports by it), `TFRC` subtype 1: one word,
/// the RTT in µs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TfrcRtt {
    /// The sender's current round-trip time estimate, µs.
    pub rtt_us: u32,
}

/// What a TFMCC sender tells its group (RFC 4654 §2.2.1: the fields of its data packets),
/// `TFMC` subtype 0, sent after a sender report (whose RTP timestamp is the sender's clock when
/// it sent them, RFC 4654's `ts_i`):
///
/// ```text
/// |     feedback round number     |             flags             |
/// |   X_supp: the lowest rate reported this round (MAX: none)     |
/// |   R_max: the largest RTT of the group, µs                     |
/// |   T: the feedback delay of this round, µs                     |
/// |   SSRC of the current limiting receiver (0: none)             |
/// |   SSRC of the receiver whose timestamp is echoed (0: none)    |
/// |   timestamp echo: that receiver's timestamp, µs of its clock  |
/// |   t_delay: µs from that report's arrival to this packet       |
/// |   X: the sending rate, bytes per second                       |
/// ```
///
/// flags: bit 0 slow start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TfmccSender {
    /// The current feedback round number (RFC 4654 §3.4), wrapping at 2^16.
    pub round: u16,
    /// Flag bits; only [`TfmccSender::SLOW_START`] is defined.
    pub flags: u16,
    /// Feedback suppression rate `X_supp`, bytes per second: receivers whose rate is not
    /// below it stay quiet this round. `u32::MAX` for none (no suppression yet).
    pub x_supp: u32,
    /// `R_max`: the largest round-trip time known in the group, µs.
    pub r_max_us: u32,
    /// `T`: the length of this feedback round's delay window, µs (RFC 4654 §3.4).
    pub feedback_delay_us: u32,
    /// SSRC of the current limiting receiver (CLR), or 0 for none.
    pub clr: Ssrc,
    /// SSRC of the receiver whose timestamp `echo_ts_us` echoes, or 0 for no echo.
    pub echo_ssrc: Ssrc,
    /// That receiver's own timestamp from its feedback (µs on its clock), returned so it
    /// can measure its RTT (RFC 4654 §3.5).
    pub echo_ts_us: u32,
    /// µs the sender held that feedback before sending this packet, subtracted from the RTT.
    pub echo_delay_us: u32,
    /// The sender's current sending rate `X`, bytes per second; `u32::MAX` for unbounded.
    pub x_send: u32,
}

impl TfmccSender {
    /// Flag bit 0: the sender is in slow start (RFC 4654 §3.6).
    pub const SLOW_START: u16 = 1;
}

/// A TFMCC receiver's feedback (RFC 4654 §2.2.2), `TFMC` subtype 1:
///
/// ```text
/// |             SSRC of the media source reported on              |
/// |   timestamp: the receiver's clock when it sent this, µs       |
/// |   RTT: its round-trip time, µs (0: none measured yet)         |
/// |   X_r: the rate it allows, bytes/s                            |
/// |   X_recv: the rate it receives, bytes/s                       |
/// |   p: its loss event rate, a fraction of 2^32                  |
/// |     feedback round number     |             flags             |
/// |   echo: extended sequence number of the last packet received  |
/// |   t_delay: µs from that packet's arrival to this report       |
/// ```
///
/// flags: bit 0 has an RTT measurement, bit 1 has seen loss, bit 2 leaving the group. The
/// echo stands for RFC 4654's `ts_i'` (the echoed data packet's send time): the sender looks
/// the sequence number up among the packets it sent lately (see [`TfrcFeedback`] for why not
/// the RTP timestamp).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TfmccFeedback {
    /// SSRC of the media source this feedback is about.
    pub media_ssrc: Ssrc,
    /// The receiver's clock when it sent this, µs (wrapping at 2^32); the sender echoes it
    /// back in [`TfmccSender::echo_ts_us`].
    pub ts_us: u32,
    /// The receiver's round-trip time, µs; meaningful only with [`TfmccFeedback::HAVE_RTT`].
    pub rtt_us: u32,
    /// `X_r`: the rate this receiver calculates it can take, bytes per second; `u32::MAX`
    /// for unbounded (no loss yet).
    pub x_calc: u32,
    /// `X_recv`: the rate it is receiving, bytes per second; `u32::MAX` for none yet.
    pub x_recv: u32,
    /// The loss event rate as on the wire: `p × (2^32 − 1)`; see [`TfmccFeedback::p`].
    pub p_fraction: u32,
    /// The sender's feedback round this answers.
    pub round: u16,
    /// Flag bits: [`TfmccFeedback::HAVE_RTT`], [`TfmccFeedback::HAVE_LOSS`],
    /// [`TfmccFeedback::LEAVING`].
    pub flags: u16,
    /// Low 32 bits of the extended sequence number of the last packet received (stands for
    /// RFC 4654's `ts_i'`).
    pub echo_seq: u32,
    /// µs from that packet's arrival to this report.
    pub echo_delay_us: u32,
}

impl TfmccFeedback {
    /// Flag bit 0: `rtt_us` holds a measured RTT (else the receiver has none yet).
    pub const HAVE_RTT: u16 = 1;
    /// Flag bit 1: the receiver has seen a loss event, so `p` and `x_calc` are measured.
    pub const HAVE_LOSS: u16 = 2;
    /// Flag bit 2: the receiver is leaving the group (RFC 4654 §4.4).
    pub const LEAVING: u16 = 4;

    /// The loss event rate, 0..=1.
    pub fn p(&self) -> f64 {
        fraction_value(self.p_fraction)
    }
}

fn halves(hi: u16, lo: u16) -> u32 {
    (u32::from(hi) << 16) | u32::from(lo)
}

fn split(w: u32) -> (u16, u16) {
    ((w >> 16) as u16, w as u16)
}

impl CcApp {
    /// The APP packet's name and subtype.
    pub fn name_and_subtype(&self) -> (&'static str, u8) {
        match self {
            CcApp::TfrcFeedback(_) => ("TFRC", 0),
            CcApp::TfrcRtt(_) => ("TFRC", 1),
            CcApp::TfmccSender(_) => ("TFMC", 0),
            CcApp::TfmccFeedback(_) => ("TFMC", 1),
        }
    }

    /// The data words, in order.
    pub(crate) fn words(&self) -> Vec<u32> {
        match *self {
            CcApp::TfrcFeedback(f) => vec![
                f.media_ssrc.get(),
                f.echo_seq,
                f.t_delay_us,
                f.x_recv_bytes_per_s,
                f.p_fraction,
            ],
            CcApp::TfrcRtt(r) => vec![r.rtt_us],
            CcApp::TfmccSender(s) => vec![
                halves(s.round, s.flags),
                s.x_supp,
                s.r_max_us,
                s.feedback_delay_us,
                s.clr.get(),
                s.echo_ssrc.get(),
                s.echo_ts_us,
                s.echo_delay_us,
                s.x_send,
            ],
            CcApp::TfmccFeedback(f) => vec![
                f.media_ssrc.get(),
                f.ts_us,
                f.rtt_us,
                f.x_calc,
                f.x_recv,
                f.p_fraction,
                halves(f.round, f.flags),
                f.echo_seq,
                f.echo_delay_us,
            ],
        }
    }

    /// Reads the APP packet of `name`, `subtype` and `data`, if it is one of these (of its
    /// exact length).
    pub(crate) fn decode(name: [u8; 4], subtype: u8, data: &[u8]) -> Option<CcApp> {
        if data.len() % 4 != 0 || data.len() > 64 {
            return None;
        }
        let mut w = [0u32; 16];
        for (i, c) in data.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        }
        let n = data.len() / 4;
        Some(match (&name, subtype, n) {
            (b"TFRC", 0, 5) => CcApp::TfrcFeedback(TfrcFeedback {
                media_ssrc: Ssrc(w[0]),
                echo_seq: w[1],
                t_delay_us: w[2],
                x_recv_bytes_per_s: w[3],
                p_fraction: w[4],
            }),
            (b"TFRC", 1, 1) => CcApp::TfrcRtt(TfrcRtt { rtt_us: w[0] }),
            (b"TFMC", 0, 9) => {
                let (round, flags) = split(w[0]);
                CcApp::TfmccSender(TfmccSender {
                    round,
                    flags,
                    x_supp: w[1],
                    r_max_us: w[2],
                    feedback_delay_us: w[3],
                    clr: Ssrc(w[4]),
                    echo_ssrc: Ssrc(w[5]),
                    echo_ts_us: w[6],
                    echo_delay_us: w[7],
                    x_send: w[8],
                })
            }
            (b"TFMC", 1, 9) => {
                let (round, flags) = split(w[6]);
                CcApp::TfmccFeedback(TfmccFeedback {
                    media_ssrc: Ssrc(w[0]),
                    ts_us: w[1],
                    rtt_us: w[2],
                    x_calc: w[3],
                    x_recv: w[4],
                    p_fraction: w[5],
                    round,
                    flags,
                    echo_seq: w[7],
                    echo_delay_us: w[8],
                })
            }
            _ => return None,
        })
    }
}
