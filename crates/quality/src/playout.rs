//! What the viewer's screen showed, from what was sent and what arrived: Evalvid's rules for
//! reconstructing a received video, and seed 002's play-out deadline.
//!
//! - A frame **arrived** when all its packets did ([`LossRule::AnyPacket`], Evalvid's
//!   default) or when its first one did ([`LossRule::FirstPacket`]); it was complete when its
//!   last needed packet arrived. A packet that arrives twice counts once, at its first arrival.
//! - Without a deadline, display slot `j` shows frame `j` if it arrived, else the frame shown
//!   before (a decoder shows the last picture it has).
//! - With a play-out deadline `d`, slot `j` is on screen at `send(j) + d`. Seed 002's rule
//!   ([`LateRule::NewestArrived`], its Fig. 13): the slot shows the newest frame `k ≤ j` that
//!   has arrived by then; a late frame is still shown at a later slot if it is the newest
//!   arrived then, and never if a newer one has arrived too. Evalvid's stricter rule
//!   ([`LateRule::Drop`]): a frame not there by its own slot is lost.
//! - Per frame: the end-to-end delay (complete − sent) and the cumulative jitter (Evalvid's,
//!   after Kouvelas et al.): `J_i = (A_i − A_{i−1}) − (G_i − G_{i−1})` over consecutive
//!   arrived frames, `CJ_k = Σ J_i`, the play-out delay that would have kept every frame so
//!   far.

/// An H.264/MPEG frame's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum FrameType {
    /// Intra-coded: decodes on its own (an IDR or other I picture).
    I,
    /// Predicted from earlier frames.
    P,
    /// Bi-predicted, from frames before and after it.
    B,
    /// Anything else (headers, audio, a frame of unknown type).
    Other,
}

impl FrameType {
    /// Evalvid's letter (`H` for headers is `Other`).
    pub fn from_letter(c: char) -> FrameType {
        match c.to_ascii_uppercase() {
            'I' => FrameType::I,
            'P' => FrameType::P,
            'B' => FrameType::B,
            _ => FrameType::Other,
        }
    }

    /// The letter Evalvid's traces use: `I`, `P`, `B`, or `H` for [`FrameType::Other`].
    pub fn letter(self) -> char {
        match self {
            FrameType::I => 'I',
            FrameType::P => 'P',
            FrameType::B => 'B',
            FrameType::Other => 'H',
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A frame as the sender sent it: its packets (their ids in the packet trace), in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentFrame {
    /// The frame's coding type.
    pub kind: FrameType,
    /// The frame's coded size, bytes (its access unit).
    pub size_bytes: u32,
    /// The ids of the packets carrying any part of it, in sending order; empty when none did.
    pub packets: Vec<u64>,
    /// When its first packet left, ns on the run's clock.
    pub send_ns: u64,
}

/// When a frame counts as arrived.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LossRule {
    /// All its packets arrived (Evalvid's default).
    #[default]
    AnyPacket,
    /// Its first packet arrived.
    FirstPacket,
}

/// What a frame that misses its play-out deadline becomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LateRule {
    /// Shown at a later slot if it is then the newest frame that has arrived (seed 002).
    #[default]
    NewestArrived,
    /// Lost (Evalvid's stricter rule).
    Drop,
}

/// How the receiver plays frames out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Playout {
    /// When a frame counts as arrived.
    pub loss: LossRule,
    /// `None`: every arrived frame is shown in its own slot, however late.
    pub deadline_ns: Option<u64>,
    /// What becomes of a frame that misses the deadline (unused without one).
    pub late: LateRule,
}

/// One frame's fate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FrameFate {
    /// The frame's coding type, from its [`SentFrame`].
    pub kind: FrameType,
    /// Complete (by the loss rule), whenever.
    pub arrived: bool,
    /// When it was complete, ns.
    pub complete_ns: Option<u64>,
    /// Complete − sent, ns.
    pub delay_ns: Option<u64>,
    /// Arrived, but after its slot's play-out time.
    pub missed_deadline: bool,
    /// Shown in at least one slot.
    pub shown: bool,
    /// Cumulative jitter at this frame (arrived frames only), ns, signed.
    pub cumulative_jitter_ns: Option<i64>,
}

/// Frames sent and lost (not shown, by the rules) of one type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TypeLoss {
    /// Frames of the type that were sent.
    pub sent: u64,
    /// Of those, frames never shown in any slot.
    pub lost: u64,
}

/// The whole reconstruction.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Reconstruction {
    /// Each sent frame's fate, in sending order (one per [`SentFrame`]).
    pub frames: Vec<FrameFate>,
    /// Which frame each display slot showed (`None` before any had arrived).
    pub slots: Vec<Option<u32>>,
    /// By type: I, P, B, other. A frame is lost when it is never shown.
    pub loss_by_type: [TypeLoss; 4],
    /// Frames never shown in any slot, all types.
    pub frames_lost: u64,
    /// Frames that arrived, but after their own slot's play-out time (0 without a deadline).
    pub missed_deadline: u64,
    /// Packets that arrived more than once (each extra arrival once).
    pub duplicate_packets: u64,
}

/// The delay of the frames shown, ns (0 when none was).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShownDelay {
    /// The mean, ns (rounded down).
    pub mean_ns: u64,
    /// The nearest-rank 99th percentile.
    pub p99_ns: u64,
    /// The largest, ns.
    pub max_ns: u64,
}

impl Reconstruction {
    /// The delay (complete − sent) of the frames that were shown.
    pub fn shown_delay(&self) -> ShownDelay {
        let mut d: Vec<u64> = self
            .frames
            .iter()
            .filter(|f| f.shown)
            .filter_map(|f| f.delay_ns)
            .collect();
        if d.is_empty() {
            return ShownDelay::default();
        }
        d.sort_unstable();
        let rank = (d.len() * 99).div_ceil(100).max(1) - 1;
        ShownDelay {
            mean_ns: (d.iter().map(|&v| v as u128).sum::<u128>() / d.len() as u128) as u64,
            p99_ns: d[rank],
            max_ns: d[d.len() - 1],
        }
    }

    /// The delay of the first frame that arrived (cumulative jitter's base), ns (0 if none
    /// did).
    pub fn first_delay_ns(&self) -> u64 {
        self.frames.iter().find_map(|f| f.delay_ns).unwrap_or(0)
    }

    /// The largest cumulative jitter over the frames that arrived, ns (0 if none did).
    pub fn max_cumulative_jitter_ns(&self) -> i64 {
        self.frames
            .iter()
            .filter_map(|f| f.cumulative_jitter_ns)
            .max()
            .unwrap_or(0)
    }
}

/// Reconstructs what was shown. `arrivals` are `(packet id, arrival ns)` in any order, with
/// duplicates; packets of no frame are ignored.
pub fn reconstruct(sent: &[SentFrame], arrivals: &[(u64, u64)], p: Playout) -> Reconstruction {
    // First arrival of each packet.
    let mut first: std::collections::HashMap<u64, u64> =
        std::collections::HashMap::with_capacity(arrivals.len());
    let mut duplicate_packets = 0;
    for &(id, at) in arrivals {
        match first.entry(id) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                duplicate_packets += 1;
                if at < *e.get() {
                    e.insert(at);
                }
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(at);
            }
        }
    }
    let complete: Vec<Option<u64>> = sent
        .iter()
        .map(|f| match p.loss {
            LossRule::AnyPacket => f
                .packets
                .iter()
                .map(|id| first.get(id).copied())
                .collect::<Option<Vec<u64>>>()
                .and_then(|v| v.into_iter().max())
                .filter(|_| !f.packets.is_empty()),
            LossRule::FirstPacket => f.packets.first().and_then(|id| first.get(id).copied()),
        })
        .collect();
    let due = |j: usize| p.deadline_ns.map(|d| sent[j].send_ns + d);
    let on_time = |k: usize, by: Option<u64>| match (complete[k], by) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(c), Some(t)) => c <= t,
    };
    let mut slots = Vec::with_capacity(sent.len());
    let mut shown = vec![false; sent.len()];
    let mut current: Option<u32> = None;
    for (j, done) in complete.iter().enumerate() {
        let t = due(j);
        let pick = match (p.deadline_ns, p.late) {
            (None, _) => done.map(|_| j),
            (Some(_), LateRule::Drop) => on_time(j, t).then_some(j),
            (Some(_), LateRule::NewestArrived) => {
                // The newest k ≤ j (newer than what is on screen) complete by this slot.
                let from = current.map_or(0, |c| c as usize + 1);
                (from..=j).rev().find(|&k| on_time(k, t))
            }
        };
        if let Some(k) = pick {
            current = Some(k as u32);
            shown[k] = true;
        }
        slots.push(current);
    }
    let mut frames = Vec::with_capacity(sent.len());
    let mut loss_by_type = [TypeLoss::default(); 4];
    let (mut frames_lost, mut missed_deadline) = (0, 0);
    let mut base: Option<(u64, u64)> = None; // the first arrived frame's (A, G)
    for (j, f) in sent.iter().enumerate() {
        let c = complete[j];
        let missed = matches!((c, due(j)), (Some(c), Some(t)) if c > t);
        let cj = c.map(|a| {
            let (a0, g0) = *base.get_or_insert((a, f.send_ns));
            (a as i64 - a0 as i64) - (f.send_ns as i64 - g0 as i64)
        });
        let t = &mut loss_by_type[f.kind.index()];
        t.sent += 1;
        if !shown[j] {
            t.lost += 1;
            frames_lost += 1;
        }
        missed_deadline += u64::from(missed);
        frames.push(FrameFate {
            kind: f.kind,
            arrived: c.is_some(),
            complete_ns: c,
            delay_ns: c.map(|a| a.saturating_sub(f.send_ns)),
            missed_deadline: missed,
            shown: shown[j],
            cumulative_jitter_ns: cj,
        });
    }
    Reconstruction {
        frames,
        slots,
        loss_by_type,
        frames_lost,
        missed_deadline,
        duplicate_packets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Frames of `packets` packets each, one every 40 ms, packets numbered from 0 in order.
    fn gop(types: &str, packets: usize) -> Vec<SentFrame> {
        let mut id = 0;
        types
            .chars()
            .enumerate()
            .map(|(i, c)| {
                let ids = (id..id + packets as u64).collect();
                id += packets as u64;
                SentFrame {
                    kind: FrameType::from_letter(c),
                    size_bytes: 1000,
                    packets: ids,
                    send_ns: i as u64 * 40 * MS,
                }
            })
            .collect()
    }

    /// Every packet of `frames` arrives `delay` after its frame was sent, but those in `lose`.
    fn arrivals(
        frames: &[SentFrame],
        delay: impl Fn(usize) -> u64,
        lose: &[u64],
    ) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            for &p in &f.packets {
                if !lose.contains(&p) {
                    out.push((p, f.send_ns + delay(i)));
                }
            }
        }
        out
    }

    #[test]
    fn a_lost_p_frame_leaves_the_previous_one_on_screen() {
        let f = gop("IPPP", 2);
        // Packet 5 is frame 2's second: frame 2 is lost by Evalvid's rule, not by "first".
        let a = arrivals(&f, |_| 10 * MS, &[5]);
        let r = reconstruct(&f, &a, Playout::default());
        assert_eq!(r.slots, vec![Some(0), Some(1), Some(1), Some(3)]);
        assert_eq!(r.frames_lost, 1);
        assert_eq!(r.loss_by_type[1], TypeLoss { sent: 3, lost: 1 });
        assert_eq!(r.loss_by_type[0], TypeLoss { sent: 1, lost: 0 });
        let first_only = Playout {
            loss: LossRule::FirstPacket,
            ..Playout::default()
        };
        assert_eq!(reconstruct(&f, &a, first_only).frames_lost, 0);
    }

    #[test]
    fn a_lost_i_frame_shows_nothing_until_the_next_frame() {
        let f = gop("IPP", 1);
        let r = reconstruct(&f, &arrivals(&f, |_| 5 * MS, &[0]), Playout::default());
        assert_eq!(r.slots, vec![None, Some(1), Some(2)]);
        assert_eq!(r.loss_by_type[0], TypeLoss { sent: 1, lost: 1 });
        // Delays and jitter start at the first frame that arrived.
        assert_eq!(r.frames[1].delay_ns, Some(5 * MS));
        assert_eq!(r.frames[1].cumulative_jitter_ns, Some(0));
        assert_eq!(r.frames[0].cumulative_jitter_ns, None);
        assert_eq!(r.first_delay_ns(), 5 * MS);
    }

    #[test]
    fn seed_002_fig_13_late_frames_under_a_deadline() {
        // Deadline 100 ms. Frame 2 on time; frame 3 late (arrives after its slot and after
        // frame 4 has arrived): never shown, frame 2 stays up at slot 3. Frame 5 late, but
        // the newest arrived at slot 6 (frame 6 later still): shown at slot 6.
        let f = gop("IPPPPPPP", 1);
        let delay = |i: usize| match i {
            3 => 150 * MS,
            5 => 120 * MS,
            6 => 200 * MS,
            _ => 30 * MS,
        };
        let a = arrivals(&f, delay, &[]);
        let p = Playout {
            deadline_ns: Some(100 * MS),
            ..Playout::default()
        };
        let r = reconstruct(&f, &a, p);
        assert_eq!(
            r.slots,
            vec![
                Some(0),
                Some(1),
                Some(2),
                Some(2),
                Some(4),
                Some(4),
                Some(5),
                Some(7)
            ]
        );
        assert!(!r.frames[3].shown && r.frames[5].shown && !r.frames[6].shown);
        assert_eq!(r.missed_deadline, 3);
        assert_eq!(r.frames_lost, 2);
        // Evalvid's stricter rule: every late frame is lost.
        let strict = Playout {
            late: LateRule::Drop,
            ..p
        };
        let s = reconstruct(&f, &a, strict);
        assert_eq!(
            s.slots,
            vec![
                Some(0),
                Some(1),
                Some(2),
                Some(2),
                Some(4),
                Some(4),
                Some(4),
                Some(7)
            ]
        );
        assert_eq!(s.frames_lost, 3);
        // Cumulative jitter: the delay's growth since the first frame.
        assert_eq!(r.frames[3].cumulative_jitter_ns, Some(120 * MS as i64));
        assert_eq!(r.frames[4].cumulative_jitter_ns, Some(0));
    }

    #[test]
    fn duplicates_count_once_at_their_first_arrival() {
        let f = gop("IP", 2);
        let mut a = arrivals(&f, |_| 10 * MS, &[]);
        a.push((1, 500 * MS)); // a late copy of frame 0's second packet
        a.push((2, 45 * MS)); // an early copy: frame 1 completes at the later of its packets
        let r = reconstruct(&f, &a, Playout::default());
        assert_eq!(r.duplicate_packets, 2);
        assert_eq!(r.frames[0].complete_ns, Some(10 * MS));
        assert_eq!(r.frames[1].complete_ns, Some(50 * MS));
        assert_eq!(r.frames_lost, 0);
    }

    #[test]
    fn shown_frames_delay_and_the_largest_cumulative_jitter() {
        // Delays 5, 25, (lost), 15 ms: mean 15, p99 and max 25; CJ grows to 20 ms.
        let sent = gop("IPPP", 1);
        let got = vec![(0, 5 * MS), (1, 65 * MS), (3, 135 * MS)];
        let r = reconstruct(&sent, &got, Playout::default());
        let d = r.shown_delay();
        assert_eq!((d.mean_ns, d.p99_ns, d.max_ns), (15 * MS, 25 * MS, 25 * MS));
        assert_eq!(r.max_cumulative_jitter_ns(), 20 * MS as i64);
        let none = reconstruct(&sent, &[], Playout::default());
        assert_eq!(none.shown_delay(), ShownDelay::default());
    }
}
