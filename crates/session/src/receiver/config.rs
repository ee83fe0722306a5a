//! What a receiver is told: the payload it expects and its settings.

use super::repair::ReceiverRepair;
use metronome_cc::receiver::AgentKind;
use metronome_time::MediaClock;
use metronome_wire::Ssrc;
use std::time::Duration;

/// What the receiver expects of the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadKind {
    /// Any payload type and content.
    Any,
    /// RTP/MP2T (RFC 2250): payload type 33, whole 188-byte TS packets.
    Mp2t,
}

/// How a [`ReceiverSession`](super::ReceiverSession) identifies itself, what it accepts, and how often it reports.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// Our SSRC in receiver reports.
    pub ssrc: Ssrc,
    /// Our CNAME in the SDES of every report (RFC 3550 §6.5.1).
    pub cname: String,
    /// The RTP clock of the stream's timestamps: the unit of jitter and transit times.
    pub clock: MediaClock,
    /// What payload is accepted: anything, or RTP/MP2T only.
    pub payload: PayloadKind,
    /// The id of the send-time header extension (RFC 8285), if the sender uses one.
    pub send_time_ext_id: Option<u8>,
    /// The session bandwidth (bit/s) for the RTCP interval; RTCP gets 5% of it (RFC 3550 §6.2).
    pub session_bw_bps: u64,
    /// The minimum RTCP interval (5 s in RFC 3550; lower is allowed, §6.2 "reduced minimum").
    pub rtcp_min_interval: Duration,
    /// At most this many sources are tracked; packets of further SSRCs are counted and dropped.
    pub max_sources: usize,
    /// A change of RTP transit time larger than this is a timestamp jump, not jitter.
    pub ts_jump_threshold: Duration,
    /// A source silent this long (or one that said BYE) may give its place to a new one when
    /// `max_sources` are tracked (RFC 3550 §6.3.5).
    pub source_timeout: Duration,
    /// Seed of the random numbers (the RTCP interval's randomization, the rate controller's
    /// receiving end): the same seed gives the same run.
    pub seed: u64,
    /// Significant digits of each source's inter-arrival and one-way-delay histograms (1 to
    /// 3, or 0 for none). 3 (the default) takes ~400 KB per source; a simulation of thousands
    /// of receivers keeps none (their counters, loss and jitter are kept as always).
    pub histogram_digits: u8,
    /// The rate controller's receiving end to run for the stream (the first source heard),
    /// when the sender's controller needs more than receiver reports (TFRC, TFMCC).
    pub cc: AgentKind,
    /// Ask for lost packets of the stream (the first source heard) and take their
    /// retransmissions; `None`: neither.
    pub repair: Option<ReceiverRepair>,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            ssrc: Ssrc(0x5245_4356),
            cname: "metronome-recv".into(),
            clock: MediaClock::VIDEO_90K,
            payload: PayloadKind::Mp2t,
            send_time_ext_id: Some(metronome_wire::rtp::SEND_TIME_EXT_ID),
            session_bw_bps: 5_000_000,
            rtcp_min_interval: Duration::from_secs(1),
            max_sources: 8,
            ts_jump_threshold: Duration::from_secs(1),
            source_timeout: Duration::from_secs(10),
            seed: 1,
            histogram_digits: 3,
            cc: AgentKind::None,
            repair: None,
        }
    }
}
