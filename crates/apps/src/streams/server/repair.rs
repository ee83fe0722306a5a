//! A stream's retransmissions (`repair = "rtx"`): what admission reserves for them, and the
//! sender session's repair settings. The pacing thread sends them with the stream
//! (`streams::stream::Cursor`); the RTCP thread hands the session the NACKs that ask for them.

use crate::streams::outlet::StartInfo;
use crate::streams::spec::StreamSpec;
use metronome_sched::TaskParams;
use metronome_session::repair::{rtx_ssrc, RTX_BUDGET_SHARE, RTX_PAYLOAD_TYPE};
use metronome_session::sender::SenderRepair;
use metronome_wire::rtx::StreamIds;
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
    history_packets: usize,
    max_packet: usize,
    playout_delay: Duration,
}

impl RepairPlan {
    /// The plan of a stream that repairs (`None` if it does not): a history of the packets of
    /// its play-out delay and a margin at its highest rate (`pps`, packets a second), each at
    /// most a ring slot (`max_packet` bytes).
    pub(crate) fn of(spec: &StreamSpec, pps: f64, max_packet: usize) -> Option<RepairPlan> {
        if !spec.repair.rtx() {
            return None;
        }
        let playout_delay = spec.repair_playout_delay();
        let packets = (pps * (playout_delay + HISTORY_MARGIN).as_secs_f64()).ceil() as usize;
        Some(RepairPlan {
            history_packets: packets.clamp(HISTORY_MIN, HISTORY_MAX),
            max_packet,
            playout_delay,
        })
    }

    /// The task admission reserves for the stream and its repairs: the media's cost and rate
    /// and the repair budget's share on top (repairs leave with the stream's packets, on its
    /// core, from its own deadline-scheduled sends).
    pub(crate) fn admitted(plan: Option<&RepairPlan>, media: TaskParams) -> TaskParams {
        if plan.is_none() {
            return media;
        }
        let grow = 1.0 + RTX_BUDGET_SHARE;
        TaskParams {
            cost: media.cost.mul_f64(grow),
            bitrate_bps: (media.bitrate_bps as f64 * grow).ceil() as u64,
            ..media
        }
    }

    /// The sender's repair settings for a stream that starts as `start`: retransmissions on
    /// payload type [`RTX_PAYLOAD_TYPE`] with an SSRC and first number of their own.
    pub(crate) fn sender(&self, start: &StartInfo, seed: u64) -> SenderRepair {
        let rtx = StreamIds {
            ssrc: rtx_ssrc(start.ssrc),
            payload_type: RTX_PAYLOAD_TYPE,
        };
        // Its own draw from the stream's seed (the media's number and time base take others).
        let first = metronome_time::mix::splitmix64(seed ^ 0x5254_5853_4551) as u16;
        SenderRepair::rtx(
            rtx,
            first,
            self.playout_delay,
            self.history_packets,
            self.max_packet,
        )
    }

    /// The memory its history holds, bytes (counted in admission's memory budget).
    pub(crate) fn memory_bytes(&self) -> u64 {
        self.sender(&StartInfo::default(), 0).history_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_spec::repair::Repair;

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
    }

    #[test]
    fn the_history_covers_the_playout_delay_at_the_highest_rate() {
        // 4 Mbit/s of 1 316-byte payloads: 380 packets a second; 200 ms + 500 ms of them.
        let plan = RepairPlan::of(&spec(Repair::Rtx), 380.0, 1400).unwrap();
        assert_eq!(plan.history_packets, 266);
        // Rounded up to 512 packets of 1 400 bytes and their bookkeeping.
        assert_eq!(plan.memory_bytes(), 512 * (1400 + 64));
        let r = plan.sender(
            &StartInfo {
                ssrc: 7,
                ..StartInfo::default()
            },
            0,
        );
        assert_eq!(r.repairer.rtx.ssrc, rtx_ssrc(7));
        assert_ne!(r.repairer.rtx.ssrc, 7);
        assert_eq!(r.playout_delay, Duration::from_millis(200));
    }
}
