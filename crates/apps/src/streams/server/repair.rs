//! A stream's retransmissions (`repair = "rtx"`) and FEC (`repair = "fec"`): what admission
//! reserves for them, and the sender session's settings. The pacing thread sends both with the
//! stream (`streams::stream::Cursor`); the RTCP thread hands the session the NACKs that ask
//! for retransmissions.

use crate::streams::outlet::StartInfo;
use metronome_config::stream::StreamSpec;
use metronome_sched::TaskParams;
use metronome_session::repair::{rtx_ssrc, FecConfig, RTX_BUDGET_SHARE, RTX_PAYLOAD_TYPE};
use metronome_session::sender::SenderRepair;
use metronome_wire::rtx::StreamIds;
use metronome_wire::SeqNo;
use std::time::Duration;

/// How long past its play-out delay a packet stays in the history: the receivers' round trip
/// and the stream's lateness, at most.
const HISTORY_MARGIN: Duration = Duration::from_millis(500);
/// The history's bounds, packets.
const HISTORY_MIN: usize = 64;
const HISTORY_MAX: usize = 1 << 16;

/// A repairing stream's plan, made before admission.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RepairPlan {
    /// Retransmissions, if the stream makes them.
    rtx: bool,
    history_packets: usize,
    max_packet: usize,
    playout_delay: Duration,
    /// SMPTE 2022-1 FEC, if the stream sends it.
    fec: Option<FecConfig>,
    /// The stream goes to a group: losses being repaired are told to it (RFC 6642 TLLEI).
    group: bool,
    /// The stream sends SRTP: every retransmission goes to every destination
    /// (`SenderRepair::everywhere`).
    srtp: bool,
}

impl RepairPlan {
    /// The plan of a stream that repairs (`None` if it does not): a history of the packets of
    /// its play-out delay and a margin at its highest rate (`pps`, packets a second), each at
    /// most a ring slot (`max_packet` bytes).
    /// FEC, if asked for, protects packets of at most `max_packet` bytes.
    pub(crate) fn of(spec: &StreamSpec, pps: f64, max_packet: usize) -> Option<RepairPlan> {
        if spec.repair.is_none() {
            return None;
        }
        let playout_delay = spec.repair_playout_delay();
        let packets = (pps * (playout_delay + HISTORY_MARGIN).as_secs_f64()).ceil() as usize;
        let fec = spec.repair.fec().map(|shape| FecConfig {
            max_packet,
            ..FecConfig::new(shape)
        });
        Some(RepairPlan {
            rtx: spec.repair.rtx(),
            history_packets: packets.clamp(HISTORY_MIN, HISTORY_MAX),
            max_packet,
            playout_delay,
            fec,
            group: false,
            srtp: spec.srtp_key.is_some(),
        })
    }

    /// This plan, for a stream sent to `destinations`: to a group if any is multicast.
    pub(crate) fn sent_to(self, destinations: &[metronome_rt::url::RtpUrl]) -> RepairPlan {
        RepairPlan {
            group: destinations.iter().any(|d| d.is_multicast()),
            ..self
        }
    }

    /// The task admission reserves for the stream and its repairs: the media's cost and rate
    /// and, on top, the repair budget's share and FEC's packets (`1/L + 1/D` more: repairs
    /// leave with the stream's packets, on its core, from its own deadline-scheduled sends).
    pub(crate) fn admitted(plan: Option<&RepairPlan>, media: TaskParams) -> TaskParams {
        let Some(plan) = plan else {
            return media;
        };
        let rtx = if plan.rtx { RTX_BUDGET_SHARE } else { 0.0 };
        let fec = plan.fec.map_or(0.0, |f| f.shape.overhead());
        let grow = 1.0 + rtx + fec;
        TaskParams {
            cost: media.cost.mul_f64(grow),
            bitrate_bps: (media.bitrate_bps as f64 * grow).ceil() as u64,
            ..media
        }
    }

    /// The sender's repair settings for a stream that starts as `start`: retransmissions on
    /// payload type [`RTX_PAYLOAD_TYPE`] with an SSRC and first number of their own.
    pub(crate) fn sender(&self, start: &StartInfo, seed: u64) -> Option<SenderRepair> {
        self.rtx.then(|| self.rtx_sender(start, seed))
    }

    fn rtx_sender(&self, start: &StartInfo, seed: u64) -> SenderRepair {
        let rtx = StreamIds {
            ssrc: rtx_ssrc(start.ssrc),
            payload_type: RTX_PAYLOAD_TYPE,
        };
        // Its own draw from the stream's seed (the media's number and time base take others).
        let first = SeqNo(metronome_time::mix::splitmix64(seed ^ 0x5254_5853_4551) as u16);
        let r = SenderRepair::rtx(
            rtx,
            first,
            self.playout_delay,
            self.history_packets,
            self.max_packet,
        );
        match (self.group, self.srtp) {
            (true, _) => r.to_group(),
            (false, true) => r.to_every_destination(),
            (false, false) => r,
        }
    }

    /// The stream's FEC, if it sends any.
    pub(crate) fn fec(&self) -> Option<FecConfig> {
        self.fec
    }

    /// The memory its history and its FEC hold, bytes (counted in admission's memory
    /// budget): FEC's 2 L + 3 rows and columns of the largest packet.
    pub(crate) fn memory_bytes(&self) -> u64 {
        let history = self
            .sender(&StartInfo::default(), 0)
            .map_or(0, |s| s.history_bytes());
        let fec = self.fec.map_or(0, |f| {
            (2 * u64::from(f.shape.columns) + 3) * f.max_packet as u64
        });
        history + fec
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_config::repair::Repair;
    use metronome_wire::Ssrc;

    fn spec(repair: Repair) -> StreamSpec {
        let mut s = StreamSpec::new("s", vec!["rtp://127.0.0.1:5004".into()]);
        s.repair = repair;
        s
    }

    #[test]
    fn admission_reserves_the_repair_budget_on_top_of_the_media() {
        let media = TaskParams {
            period: Duration::from_millis(4),
            deadline: Duration::from_millis(4),
            cost: Duration::from_micros(40),
            bitrate_bps: 4_000_000,
        };
        assert!(RepairPlan::of(&spec(Repair::None), 380.0, 1400).is_none());
        let plan = RepairPlan::of(&spec(Repair::Rtx), 380.0, 1400).unwrap();
        let t = RepairPlan::admitted(Some(&plan), media);
        assert_eq!(t.bitrate_bps, 5_000_000);
        assert_eq!(t.cost, Duration::from_micros(50));
        assert_eq!((t.period, t.deadline), (media.period, media.deadline));
        assert_eq!(RepairPlan::admitted(None, media), media);
        // FEC over 5 x 5: two FEC packets for every five; both: the share on top of that.
        let fec = RepairPlan::of(&spec(Repair::parse("fec:5x5").unwrap()), 380.0, 1400).unwrap();
        assert!(fec.sender(&StartInfo::default(), 0).is_none());
        assert_eq!(fec.fec().unwrap().max_packet, 1400);
        assert_eq!(fec.memory_bytes(), 13 * 1400);
        let t = RepairPlan::admitted(Some(&fec), media);
        assert_eq!(
            (t.bitrate_bps, t.cost),
            (5_600_000, Duration::from_micros(56))
        );
        let both = RepairPlan::of(&spec(Repair::parse("rtx+fec:5x5").unwrap()), 380.0, 1400);
        let t = RepairPlan::admitted(both.as_ref(), media);
        assert_eq!(t.bitrate_bps, 6_600_000);
    }

    #[test]
    fn the_history_covers_the_playout_delay_at_the_highest_rate() {
        // 4 Mbit/s of 1 316-byte payloads: 380 packets a second; 200 ms + 500 ms of them.
        let plan = RepairPlan::of(&spec(Repair::Rtx), 380.0, 1400).unwrap();
        assert_eq!(plan.history_packets, 266);
        // Rounded up to 512 packets of 1 400 bytes and their bookkeeping.
        assert_eq!(plan.memory_bytes(), 512 * (1400 + 64));
        let r = plan
            .sender(
                &StartInfo {
                    ssrc: Ssrc(7),
                    ..StartInfo::default()
                },
                0,
            )
            .unwrap();
        assert_eq!(r.repairer.rtx.ssrc, rtx_ssrc(Ssrc(7)));
        assert_ne!(r.repairer.rtx.ssrc, Ssrc(7));
        assert_eq!(r.playout_delay, Duration::from_millis(200));
    }
}
