//! What a flow did, as the lab's summary and report read it: the sender's figures and each
//! receiver's ([`ReceiverReport`], from a [`Meter`]), with a video's frames and pictures and a
//! rate controller's course. Plain data: the simulator's flows and the emulator's receivers
//! (the lab's emu mode) both write it.

use crate::meter::{IntervalFigures, Meter};
use metronome_time::Micros;
use metronome_time::Timestamp;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What one flow did, for the summary and the report. Times kept in ns (exact in virtual
/// time) and written as µs (`*_us` in JSON), rates in bit/s, sizes in bytes on the wire (IP
/// header included).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowReport {
    /// The flow's name in the scenario.
    pub name: String,
    /// `udp`, `rtp` or `tcp`.
    pub kind: String,
    /// The sending node.
    pub src: String,
    /// The rate the sender was asked for (UDP: payload bit/s, as iperf's `-b`; 0 for TCP).
    pub target_bps: u64,
    /// When the sender started, from the start of the run.
    pub start_us: Micros,
    /// How long the sender was active.
    pub duration_us: Micros,
    /// Packets the sender sent.
    pub sent_packets: u64,
    /// Bytes the sender sent, on the wire.
    pub sent_bytes: u64,
    /// One report per receiving node, in the scenario's order.
    pub receivers: Vec<ReceiverReport>,
    /// What the flow's rate controller did (RTP flows).
    #[serde(default)]
    pub rate_control: Option<RateControl>,
    /// What the sender's loss repair did (RTP flows with `repair`; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<SenderRepairFigures>,
}

/// What a sender's loss repair (NACK and retransmission, FEC) did over the run, packets unless
/// named otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SenderRepairFigures {
    /// Sequence numbers receivers asked for (within the first 64 of each NACK).
    pub asked: u64,
    /// Retransmissions sent.
    pub sent_packets: u64,
    /// Their bytes on the wire (IP header included).
    pub sent_bytes: u64,
    /// `sent_bytes` over the stream's own `sent_bytes`, percent.
    pub overhead_percent: f64,
    /// Asked for, not sent: the repair could not reach the viewer before the play-out time.
    pub too_late: u64,
    /// Asked for, not sent: beyond the repair budget (a share of the stream's rate).
    pub over_budget: u64,
    /// Asked for again within a round trip of the last repair (one repair answers all).
    pub duplicate: u64,
    /// Asked for, no longer in the history (or never sent).
    pub unknown: u64,
    /// Made, then dropped while waiting to leave with the stream's packets: by then they
    /// could no longer reach the viewer in time.
    #[serde(default)]
    pub expired: u64,
    /// Made, and still waiting to leave when the run ended (the stream's packets had not
    /// paid for them yet).
    #[serde(default)]
    pub left_at_end: u64,
    /// To a group: TLLEIs sent (RFC 6642), each telling the group which losses a repair is
    /// on its way for.
    #[serde(default)]
    pub loss_notices: u64,
    /// The sequence numbers they told.
    #[serde(default)]
    pub noticed: u64,
    /// SMPTE 2022-1 FEC packets sent (rows and columns), with `repair = "fec"`.
    #[serde(default)]
    pub fec_packets: u64,
    /// Their bytes on the wire (IP header included).
    #[serde(default)]
    pub fec_bytes: u64,
    /// `fec_bytes` over the stream's own `sent_bytes`, percent.
    #[serde(default)]
    pub fec_overhead_percent: f64,
}

/// `part` of `whole`, percent; 0 of nothing.
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// What loss repair did for one viewer, packets unless named otherwise. `lost` (the
/// receiver's) is what the network lost; this says what came back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RepairFigures {
    /// Packets the viewer never had, after repair (network losses not repaired).
    pub lost_after: u64,
    /// `lost_after` of the packets sent, percent.
    pub lost_after_percent: f64,
    /// Losses repaired in time: retransmissions of packets the viewer did not have, before
    /// their play-out time (FEC's are `fec_repaired`).
    pub repaired: u64,
    /// Retransmissions of packets the viewer did not have that came after their play-out
    /// time (still lost, for the viewer).
    pub too_late: u64,
    /// Losses rebuilt from FEC before their play-out time.
    #[serde(default)]
    pub fec_repaired: u64,
    /// Losses rebuilt from FEC after their play-out time.
    #[serde(default)]
    pub fec_too_late: u64,
    /// FEC packets received.
    #[serde(default)]
    pub fec_received: u64,
    /// FEC packets that could not be used: two or more of their packets stayed missing.
    #[serde(default)]
    pub fec_unrecoverable: u64,
    /// Missing packets no longer asked for: another ask's repair could not arrive in time any
    /// more, or every ask went unanswered. A repair already on its way may still come in time
    /// (counted in `repaired` then).
    pub given_up: u64,
    /// Feedback packets with a NACK sent.
    pub nack_packets: u64,
    /// Sequence numbers asked for (a number asked twice counts twice).
    pub asked: u64,
    /// Retransmissions received, useful or not.
    pub retransmissions: u64,
    /// Retransmissions of packets the viewer had already.
    pub redundant: u64,
    /// The round trip the viewer measured (ask to repair) at the end.
    pub rtt_us: Micros,
}

/// An RTP flow's rate controller over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RateControl {
    /// `fixed`, `tfrc`, `tfmcc`, `asmp`.
    pub controller: String,
    /// How many times the target changed.
    pub changes: u64,
    /// The target rate over time: (time from the run's start, bit/s on the wire), at most
    /// [`RATE_POINTS`] points (the last change of each span kept); in JSON `[µs, bit/s]`.
    pub points: Vec<(Micros, u64)>,
}

/// Points kept of a rate controller's target over time.
pub const RATE_POINTS: usize = 1000;

impl RateControl {
    /// From every change `(when, bit/s)`, thinned to [`RATE_POINTS`] by keeping the last
    /// change of each of that many equal spans of `[0, end]`.
    pub fn new(controller: &str, changes: &[(Timestamp, u64)], end: Timestamp) -> RateControl {
        let span = (end.as_nanos() / RATE_POINTS as u64).max(1);
        let mut points: Vec<(Micros, u64)> = Vec::new();
        for &(t, bps) in changes {
            let at = Micros::from_nanos_u64(t.as_nanos());
            match points.last_mut() {
                Some(last) if last.0.as_nanos_u64() / span == t.as_nanos() / span => {
                    *last = (at, bps)
                }
                _ => points.push((at, bps)),
            }
        }
        RateControl {
            controller: controller.to_string(),
            changes: changes.len() as u64,
            points,
        }
    }
}

/// What one receiving endpoint measured.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReceiverReport {
    /// The receiving node's name.
    pub node: String,
    /// Unique packets received.
    pub packets: u64,
    /// Bytes received (unique packets, on the wire; for TCP the bytes the application read).
    pub bytes: u64,
    /// Packets sent and not received (unique), at the end of the run.
    pub lost: u64,
    /// `lost / sent`, in percent.
    pub loss_percent: f64,
    /// Extra copies of packets already received, not counted in `packets`.
    pub duplicates: u64,
    /// Packets that arrived after one with a higher number.
    pub reordered: u64,
    /// Bits received per second of the sender's active time.
    pub throughput_bps: f64,
    /// RFC 3550 jitter of the transit time at the end.
    pub jitter_us: Micros,
    /// Mean one-way delay (arrival − send time); 0 without packets.
    pub mean_delay_us: Micros,
    /// Smallest one-way delay; 0 without packets.
    pub min_delay_us: Micros,
    /// Largest one-way delay; 0 without packets.
    pub max_delay_us: Micros,
    /// One-way delay quantiles (only with histograms: 0 otherwise).
    pub p50_delay_us: Micros,
    /// 99th percentile of the one-way delay (0 without histograms).
    pub p99_delay_us: Micros,
    /// Inter-arrival quantiles (only with histograms: 0 otherwise).
    pub p50_interarrival_us: Micros,
    /// 99th percentile of the time between arrivals (0 without histograms).
    pub p99_interarrival_us: Micros,
    /// The delay distribution as 101 quantiles (0 %, 1 %, …, 100 %); empty without
    /// histograms. What a CDF plot draws.
    #[serde(default)]
    pub delay_quantiles_us: Vec<Micros>,
    /// The inter-arrival distribution, likewise.
    #[serde(default)]
    pub interarrival_quantiles_us: Vec<Micros>,
    /// Packets, bytes, delay and jitter per interval of the run (empty if not binned).
    pub intervals: Vec<IntervalFigures>,
    /// What a viewer saw, frame by frame, where the flow carries video whose frames are known.
    #[serde(default)]
    pub frames: Option<FrameFigures>,
    /// What loss repair did for this viewer (RTP flows with `repair`; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<RepairFigures>,
}

/// Frames of a video flow at one receiver. A frame is lost if any packet that carries part
/// of it is lost; its delay runs from its first packet's due time to its last packet's
/// arrival (the network's delay plus the frame's spread on the wire).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FrameFigures {
    /// Frames the sender sent.
    pub frames: u64,
    /// Frames with at least one packet lost.
    pub lost: u64,
    /// `lost / frames`, in percent.
    pub lost_percent: f64,
    /// Mean frame delay (first packet due to last packet arrived) of the frames shown;
    /// 0 if none was.
    pub mean_delay_us: Micros,
    /// 99th percentile of the delay of the frames shown.
    pub p99_delay_us: Micros,
    /// Largest delay of a frame shown.
    pub max_delay_us: Micros,
    /// The largest cumulative jitter over the frames that arrived (seed 002's Eq. 4: the
    /// play-out delay that would have kept every frame); negative when delays only fell.
    #[serde(default)]
    pub max_cumulative_jitter_us: Micros,
    /// The delay of the first frame (in display order) that arrived (0 if none did): the
    /// base the cumulative jitter is measured from, so a long first wait (a controller
    /// starting low) makes it small.
    #[serde(default)]
    pub first_delay_us: Micros,
    /// Frames lost by type: I-frames and P-frames (the encoder makes no B-frames).
    #[serde(default)]
    pub lost_i: u64,
    /// P-frames lost (see `lost_i`).
    #[serde(default)]
    pub lost_p: u64,
    /// Frames that arrived after their play-out deadline (0 without one).
    #[serde(default)]
    pub missed_deadline: u64,
    /// The pictures the viewer saw against the source's, where they are known.
    #[serde(default)]
    pub pictures: Option<PictureFigures>,
}

/// What the viewer's screen showed, against the source's pictures, over every display slot:
/// the frames that arrived, decoded (a lost reference concealed as a player does), a lost
/// frame's slot showing the picture before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PictureFigures {
    /// The mean of the slots' PSNR of Y, each capped at 100 dB (Evalvid's figure), dB.
    pub psnr_y_db: f64,
    /// The same of all planes (their MSEs weighted by their samples), dB.
    pub psnr_yuv_db: f64,
    /// The mean SSIM of all planes (FFmpeg's `All`), 0 to 1.
    pub ssim: f64,
    /// The mean MOS (Evalvid's table of the slot's PSNR of Y), 1 to 5.
    pub mos: f64,
    /// Slots with MOS 1, 2, 3, 4, 5.
    pub mos_frames: [u64; 5],
    /// MIV (Evalvid's): in windows of 25 slots sliding by one, the share of slots whose MOS
    /// is below that of the video as sent (every frame shown); the mean and the largest over
    /// the windows, percent.
    #[serde(default)]
    pub miv_mean_percent: f64,
    /// The largest window's MIV share, percent (see `miv_mean_percent`).
    #[serde(default)]
    pub miv_max_percent: f64,
    /// Frames that reached the decoder and gave no picture.
    pub undecodable: u64,
    /// Slots shown black, before the first picture.
    pub blank_frames: u64,
}

impl ReceiverReport {
    /// The figures of `meter` at `node`, for a sender that sent `sent` packets over `active`.
    pub fn from_meter(node: String, meter: &mut Meter, sent: u64, active: Duration) -> Self {
        meter.finish();
        let lost = sent.saturating_sub(meter.packets);
        let q = |d: &Option<metronome_time::Distribution>, p: f64| {
            d.as_ref().map_or(0, |h| h.quantile_ns(p))
        };
        let secs = active.as_secs_f64();
        ReceiverReport {
            node,
            packets: meter.packets,
            bytes: meter.bytes,
            lost,
            loss_percent: percent(lost, sent),
            duplicates: meter.duplicates,
            reordered: meter.reordered,
            throughput_bps: if secs > 0.0 {
                meter.bytes as f64 * 8.0 / secs
            } else {
                0.0
            },
            jitter_us: meter.jitter(),
            mean_delay_us: meter.mean_delay(),
            min_delay_us: Micros::from_nanos_u64(if meter.packets == 0 {
                0
            } else {
                meter.min_delay_ns
            }),
            max_delay_us: Micros::from_nanos_u64(meter.max_delay_ns),
            p50_delay_us: Micros::from_nanos_u64(q(&meter.delay, 0.5)),
            p99_delay_us: Micros::from_nanos_u64(q(&meter.delay, 0.99)),
            p50_interarrival_us: Micros::from_nanos_u64(q(&meter.interarrival, 0.5)),
            p99_interarrival_us: Micros::from_nanos_u64(q(&meter.interarrival, 0.99)),
            delay_quantiles_us: percentiles(&meter.delay),
            interarrival_quantiles_us: percentiles(&meter.interarrival),
            intervals: meter.intervals.clone(),
            frames: None,
            repair: None,
        }
    }
}

/// 101 quantiles of a distribution (none if it is absent or empty).
fn percentiles(d: &Option<metronome_time::Distribution>) -> Vec<Micros> {
    match d {
        Some(h) if !h.is_empty() => (0..=100)
            .map(|p| Micros::from_nanos_u64(h.quantile_ns(p as f64 / 100.0)))
            .collect(),
        _ => Vec::new(),
    }
}
