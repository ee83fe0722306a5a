//! How a sender cuts a frame into send calls, and what a frame costs a pacing core: the
//! sans-IO part of pacing raw video, which the raw lane on the real-time driver (`apps::uncompressed::stream`) and any
//! simulation share.

use super::{FrameSchedule, SenderType};
use crate::TaskParams;
use metronome_time::Timestamp;
use std::time::Duration;

/// Most packets in one send call under `schedule`'s model: CMAX − 1 of its class (ST 2110-21:
/// n packets at one instant raise Cinst to n − 1, and one more may still be in the bucket);
/// unbounded for a burst.
pub fn max_batch(schedule: &FrameSchedule) -> usize {
    let limits = schedule.limits();
    match schedule.sender_type() {
        SenderType::Burst => usize::MAX,
        SenderType::Wide => (limits.cmax_wide as usize)
            .saturating_sub(1)
            .max(schedule.group() as usize),
        SenderType::NarrowGapped | SenderType::NarrowLinear => {
            (limits.cmax_narrow as usize).saturating_sub(1).max(1)
        }
    }
}

/// Where the batch that starts with packet `k` of a frame of `n` ends (exclusive): the packets
/// due within `window` after it, at most [`max_batch`] and `max_call` (what one send call
/// carries). A burst's frame is all due at once and goes in calls of `max_call`, each a job of
/// its own, so that a pacing core shared with other streams can send theirs between them.
pub fn batch_end(
    schedule: &FrameSchedule,
    window: Duration,
    max_call: usize,
    epoch: Timestamp,
    k: usize,
    n: usize,
) -> usize {
    let max = k.saturating_add(max_batch(schedule).min(max_call)).min(n);
    if schedule.sender_type() == SenderType::Burst {
        return max;
    }
    let limit = schedule.send_time(epoch, k as u32) + window;
    let mut j = k + 1;
    while j < max && schedule.send_time(epoch, j as u32) <= limit {
        j += 1;
    }
    j
}

/// What sending costs a pacing core: a send call (its first datagram), a job's bookkeeping,
/// and each further datagram of a segmented (GSO) call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendCosts {
    /// CPU time of one send call including its first datagram.
    pub per_call: Duration,
    /// CPU time of the pacer's bookkeeping for one job (one batch).
    pub per_job: Duration,
    /// CPU time of each further datagram in a segmented (GSO) call.
    pub per_segment: Duration,
}

/// IPv4 and UDP headers, counted in the link rate.
const IP_UDP: usize = metronome_time::IPV4_UDP_OVERHEAD;

/// A raw stream as a real-time task, for admission: a job per frame period (its deadline the
/// next frame), costing a call and a job's bookkeeping per batch plus a segment per further
/// packet; its link rate counts IP/UDP headers.
///
/// The test counts the CPU each frame takes within its period; that a paced model's batches
/// leave at their own times within it is the pacer's work, not proven by the test (a job of a
/// shared core is one batch, so other streams wait at most one call: the blocking term).
pub fn frame_task(
    schedule: &FrameSchedule,
    window: Duration,
    max_call: usize,
    packets: usize,
    datagram_bytes: usize,
    costs: SendCosts,
) -> TaskParams {
    let tframe = schedule.format().tframe();
    let mut batches = 0u32;
    let mut k = 0;
    while k < packets {
        batches += 1;
        k = batch_end(schedule, window, max_call, Timestamp::ZERO, k, packets);
    }
    let further = (packets as u32).saturating_sub(batches);
    let cost = (costs.per_call + costs.per_job) * batches + costs.per_segment * further;
    let wire_bits = (packets as u64) * ((datagram_bytes + IP_UDP) as u64) * 8;
    TaskParams {
        period: tframe,
        deadline: tframe,
        cost,
        bitrate_bps: (wire_bits as f64 / tframe.as_secs_f64()).ceil() as u64,
    }
}
