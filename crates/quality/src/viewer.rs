//! The video as the viewer saw it: the frames that reached the player, decoded by a real
//! decoder in order, and put on screen slot by slot as [`crate::playout`] decided.
//!
//! - The decoder gets every frame that was there in time to be decoded, in decode order:
//!   without a play-out deadline, every frame that arrived (by the loss rule); with one, a
//!   frame that was complete by the time a later slot needed the decoder to have it, or, under
//!   Evalvid's stricter rule ([`LateRule::Drop`]), only a frame that made its own deadline.
//!   A frame that never reached it is simply missing: the decoder decodes what follows against
//!   what it has (concealment and drift are the decoder's, as with Evalvid's files decoded by
//!   FFmpeg).
//! - Slot `j` shows the picture the decoder made for the frame the reconstruction put there,
//!   or, if the decoder made none for it, the last picture it made; before any, a black
//!   picture.
//!
//! The decoder is a trait, so that this crate stays free of codecs; `metronome-media` gives
//! openh264's.

use crate::picture::Picture;
use crate::playout::{LateRule, Playout, Reconstruction, SentFrame};

/// A real decoder, as the viewer's player has it.
pub trait Decode {
    /// Decodes the next frame in decode order (its coded bytes as sent) into `out`. `false`:
    /// no picture came out for it.
    fn decode(&mut self, coded: &[u8], out: &mut Picture) -> bool;
}

/// What one play-out did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PlayStats {
    /// Frames given to the decoder.
    pub decoded: u64,
    /// Of those, frames it made no picture for.
    pub undecodable: u64,
    /// Slots shown before the first picture (black).
    pub blank_slots: u64,
}

/// Which frames the player's decoder gets (see the module's rules), and, for each, the slot
/// at which it is decoded: `Some(j)` for a frame fed while slot `j` is made ready.
pub fn decoder_input(
    sent: &[SentFrame],
    rec: &Reconstruction,
    playout: Playout,
) -> Vec<Option<usize>> {
    let mut fed = vec![None; rec.frames.len()];
    let mut next = 0usize;
    for (j, slot) in rec.slots.iter().enumerate() {
        let Some(k) = slot.map(|k| k as usize).filter(|&k| k >= next) else {
            continue;
        };
        let by = playout
            .deadline_ns
            .and_then(|d| sent.get(j).map(|f| f.send_ns.saturating_add(d)));
        let upto = (k + 1).min(rec.frames.len());
        for (f, fed) in rec.frames[next.min(upto)..upto]
            .iter()
            .zip(&mut fed[next.min(upto)..upto])
        {
            let there = f.arrived
                && match (playout.deadline_ns, playout.late) {
                    (None, _) => true,
                    (Some(_), LateRule::Drop) => !f.missed_deadline,
                    (Some(_), LateRule::NewestArrived) => {
                        matches!((f.complete_ns, by), (Some(c), Some(t)) if c <= t)
                    }
                };
            if there {
                *fed = Some(j);
            }
        }
        next = k + 1;
    }
    fed
}

/// Plays `rec` out: calls `show(slot, picture)` for every display slot, in order. `coded[k]`
/// is frame `k`'s coded bytes as sent; `blank` is what the screen shows before any picture.
pub fn play<D: Decode + ?Sized, C: AsRef<[u8]>>(
    sent: &[SentFrame],
    rec: &Reconstruction,
    playout: Playout,
    coded: &[C],
    decoder: &mut D,
    blank: &Picture,
    mut show: impl FnMut(usize, &Picture),
) -> PlayStats {
    let fed = decoder_input(sent, rec, playout);
    let mut stats = PlayStats::default();
    let mut screen = blank.clone();
    let mut scratch = blank.clone();
    let mut pictures = 0u64;
    let mut k = 0usize;
    for j in 0..rec.slots.len() {
        // The frames fed for this slot, in decode order.
        while k < fed.len() && fed[k].is_none_or(|at| at <= j) {
            if fed[k].is_some() {
                stats.decoded += 1;
                match coded.get(k) {
                    Some(bytes) if decoder.decode(bytes.as_ref(), &mut scratch) => {
                        std::mem::swap(&mut screen, &mut scratch);
                        pictures += 1;
                    }
                    _ => stats.undecodable += 1,
                }
            }
            k += 1;
        }
        if pictures == 0 {
            stats.blank_slots += 1;
        }
        show(j, &screen);
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::Chroma;
    use crate::playout::{reconstruct, FrameType};

    const MS: u64 = 1_000_000;

    /// A "decoder" of a toy codec: a frame's bytes are `[own value]` for an intra frame or
    /// `[delta]` added to the previous picture for an inter frame, so what a missing
    /// reference does is visible, as with a real decoder's drift.
    struct Toy {
        last: Option<u8>,
    }
    impl Decode for Toy {
        fn decode(&mut self, coded: &[u8], out: &mut Picture) -> bool {
            let v = match (coded, self.last) {
                ([b'I', v], _) => *v,
                ([b'P', d], Some(last)) => last.wrapping_add(*d),
                _ => return false,
            };
            self.last = Some(v);
            *out = Picture::black(2, 2, Chroma::Mono);
            out.data.fill(v);
            true
        }
    }

    fn frames(n: usize) -> (Vec<SentFrame>, Vec<Vec<u8>>) {
        let sent = (0..n)
            .map(|i| SentFrame {
                kind: if i % 4 == 0 {
                    FrameType::I
                } else {
                    FrameType::P
                },
                size_bytes: 2,
                packets: vec![i as u64],
                send_ns: i as u64 * 40 * MS,
            })
            .collect();
        let coded = (0..n)
            .map(|i| {
                if i % 4 == 0 {
                    vec![b'I', 100]
                } else {
                    vec![b'P', 1]
                }
            })
            .collect();
        (sent, coded)
    }

    fn shown(
        sent: &[SentFrame],
        coded: &[Vec<u8>],
        arrivals: &[(u64, u64)],
        p: Playout,
    ) -> (Vec<u8>, PlayStats) {
        let rec = reconstruct(sent, arrivals, p);
        let mut out = Vec::new();
        let stats = play(
            sent,
            &rec,
            p,
            coded,
            &mut Toy { last: None },
            &Picture::black(2, 2, Chroma::Mono),
            |_, pic| out.push(pic.data[0]),
        );
        (out, stats)
    }

    #[test]
    fn a_lost_p_frame_freezes_its_slot_and_drifts_to_the_next_i_frame() {
        let (sent, coded) = frames(8);
        let got: Vec<(u64, u64)> = (0..8u64)
            .filter(|&k| k != 2)
            .map(|k| (k, k * 40 * MS + 5 * MS))
            .collect();
        let (out, stats) = shown(&sent, &coded, &got, Playout::default());
        // Slot 2 repeats frame 1; frames 3 decodes against 1's picture (one step behind) until
        // the I-frame at 4 resets it.
        assert_eq!(out, vec![100, 101, 101, 102, 100, 101, 102, 103]);
        assert_eq!(
            (stats.decoded, stats.undecodable, stats.blank_slots),
            (7, 0, 0)
        );
    }

    #[test]
    fn a_lost_i_frame_leaves_the_screen_black_until_a_picture_can_be_made() {
        let (sent, coded) = frames(6);
        let got: Vec<(u64, u64)> = (1..6u64).map(|k| (k, k * 40 * MS + 5 * MS)).collect();
        let (out, stats) = shown(&sent, &coded, &got, Playout::default());
        // Black is 16; P-frames without any reference make no picture; the I-frame at 4 does.
        assert_eq!(out, vec![16, 16, 16, 16, 100, 101]);
        assert_eq!((stats.undecodable, stats.blank_slots), (3, 4));
    }

    #[test]
    fn a_late_frame_under_a_deadline_is_decoded_if_it_came_in_time_for_a_later_slot() {
        let (sent, coded) = frames(4);
        // Frame 1 completes 90 ms after it was sent: it misses its own slot (deadline 60 ms,
        // at 100 ms) and makes slot 2's (at 140 ms) — but frame 2 is there too and newer.
        let got = vec![(0, 5 * MS), (1, 130 * MS), (2, 85 * MS), (3, 125 * MS)];
        let p = Playout {
            deadline_ns: Some(60 * MS),
            ..Playout::default()
        };
        let (out, _) = shown(&sent, &coded, &got, p);
        // Seed 002's rule: frame 1 is never shown, but the decoder had it by slot 2: 2 decodes
        // right.
        assert_eq!(out, vec![100, 100, 102, 103]);
        // Evalvid's rule: frame 1 is lost; 2 decodes against frame 0.
        let strict = Playout {
            late: LateRule::Drop,
            ..p
        };
        let (out, stats) = shown(&sent, &coded, &got, strict);
        assert_eq!(out, vec![100, 100, 101, 102]);
        assert_eq!(stats.decoded, 3);
    }
}
