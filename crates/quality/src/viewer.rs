//! The video as the viewer saw it: the frames that reached the player, decoded by a real
//! decoder in decode order, and put on screen slot by slot as [`crate::playout`] decided.
//!
//! Frames are numbered in display order (frame `k` belongs in slot `k`); a stream with
//! B-frames sends them in another order, its decode order (`decode_order`: the frames'
//! numbers as they were sent), and the decoder gets them in that order.
//!
//! - The decoder gets every frame that was there in time to be decoded, in decode order:
//!   without a play-out deadline, every frame that arrived (by the loss rule); with one, a
//!   frame that was complete by the time a later slot needed the decoder to have it, or, under
//!   Evalvid's stricter rule ([`LateRule::Drop`]), only a frame that made its own deadline.
//!   A frame that never reached it is simply missing: the decoder decodes what follows against
//!   what it has (concealment and drift are the decoder's, as with Evalvid's files decoded by
//!   FFmpeg).
//! - Slot `j` shows the picture the decoder made for the frame the reconstruction put there,
//!   or, if the decoder made none for it, the picture shown before; before any, a black
//!   picture. A decoder that reorders (B-frames) holds a picture back until it has the frames
//!   that follow it in decode order: those frames are given to it early (the ones it would
//!   get anyway, by their own slots), as a player's reorder delay does.
//!
//! The decoder is a trait, so that this crate stays free of codecs; `metronome-media` gives
//! FFmpeg's.

use crate::picture::Picture;
use crate::playout::{LateRule, Playout, Reconstruction, SentFrame};

/// A real decoder, as the viewer's player has it: frames in, in decode order, each with the
/// number of the frame it is; pictures out, in display order, each with the number of its
/// frame.
pub trait Decode {
    /// Gives the decoder frame `frame`'s coded bytes as sent. `false`: refused outright (it
    /// makes no picture for it).
    fn send(&mut self, frame: u32, coded: &[u8]) -> bool;
    /// The next picture the decoder has ready, written into `out`, and its frame's number.
    fn receive(&mut self, out: &mut Picture) -> Option<u32>;
    /// No more frames: the pictures it still holds back become ready.
    fn drain(&mut self);
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

/// Which frames the player's decoder gets (see the module's rules), and, for each position of
/// `order` (the frames' numbers in decode order), the slot at which it is decoded: `Some(j)`
/// for a frame fed while slot `j` is made ready.
pub fn decoder_input(
    sent: &[SentFrame],
    rec: &Reconstruction,
    playout: Playout,
    order: &[u32],
) -> Vec<Option<usize>> {
    let n = order.len().min(rec.frames.len());
    let mut position = vec![usize::MAX; rec.frames.len()];
    for (p, &k) in order[..n].iter().enumerate() {
        if let Some(slot) = position.get_mut(k as usize) {
            *slot = p;
        }
    }
    let mut fed = vec![None; n];
    let mut next = 0usize;
    for (j, slot) in rec.slots.iter().enumerate() {
        let Some(upto) = slot
            .and_then(|k| position.get(k as usize))
            .map(|&p| p.saturating_add(1).min(n))
            .filter(|&upto| upto > next)
        else {
            continue;
        };
        let by = playout
            .deadline_ns
            .and_then(|d| sent.get(j).map(|f| f.send_ns.saturating_add(d)));
        for p in next..upto {
            let f = &rec.frames[order[p] as usize];
            let there = f.arrived
                && match (playout.deadline_ns, playout.late) {
                    (None, _) => true,
                    (Some(_), LateRule::Drop) => !f.missed_deadline,
                    (Some(_), LateRule::NewestArrived) => {
                        matches!((f.complete_ns, by), (Some(c), Some(t)) if c <= t)
                    }
                };
            if there {
                fed[p] = Some(j);
            }
        }
        next = upto;
    }
    fed
}

/// The frames in display order: what `order` is for a stream without B-frames.
pub fn display_order(frames: usize) -> Vec<u32> {
    (0..frames as u32).collect()
}

/// Plays `rec` out: calls `show(slot, picture)` for every display slot, in order. `coded[k]`
/// is frame `k`'s coded bytes as sent; `order` the frames' numbers in decode order
/// ([`display_order`] without B-frames); `blank` is what the screen shows before any picture.
#[allow(clippy::too_many_arguments)]
pub fn play<D: Decode + ?Sized, C: AsRef<[u8]>>(
    sent: &[SentFrame],
    rec: &Reconstruction,
    playout: Playout,
    coded: &[C],
    order: &[u32],
    decoder: &mut D,
    blank: &Picture,
    mut show: impl FnMut(usize, &Picture),
) -> PlayStats {
    let fed = decoder_input(sent, rec, playout, order);
    let mut player = Player::new(decoder, coded, order, &fed, blank);
    for j in 0..rec.slots.len() {
        player.feed_due(j);
        if let Some(k) = rec.slots[j] {
            player.show_frame(k);
        }
        if player.shown.is_none() {
            player.stats.blank_slots += 1;
        }
        show(j, &player.screen);
    }
    player.finish()
}

/// The player's side of [`play`]: what it has fed, the pictures the decoder has given and not
/// shown yet, the screen.
struct Player<'a, D: Decode + ?Sized, C> {
    decoder: &'a mut D,
    coded: &'a [C],
    order: &'a [u32],
    fed: &'a [Option<usize>],
    /// The next position of `order` to consider.
    next: usize,
    drained: bool,
    /// Pictures out of the decoder, not yet shown, by frame; and spare pictures to reuse.
    ready: Vec<(u32, Picture)>,
    spare: Vec<Picture>,
    /// Which frames the decoder was given, and which it made a picture for.
    given: Vec<bool>,
    made: Vec<bool>,
    /// The highest frame a picture came out for (a reordering decoder's pictures come in
    /// display order: a frame below it that has none will get none).
    highest_out: Option<u32>,
    screen: Picture,
    shown: Option<u32>,
    stats: PlayStats,
}

impl<'a, D: Decode + ?Sized, C: AsRef<[u8]>> Player<'a, D, C> {
    fn new(
        decoder: &'a mut D,
        coded: &'a [C],
        order: &'a [u32],
        fed: &'a [Option<usize>],
        blank: &Picture,
    ) -> Self {
        let frames = order.iter().map(|&k| k as usize + 1).max().unwrap_or(0);
        Player {
            decoder,
            coded,
            order,
            fed,
            next: 0,
            drained: false,
            ready: Vec::new(),
            spare: Vec::new(),
            given: vec![false; frames],
            made: vec![false; frames],
            highest_out: None,
            screen: blank.clone(),
            shown: None,
            stats: PlayStats::default(),
        }
    }

    /// Gives the decoder every frame due by slot `j`, in decode order.
    fn feed_due(&mut self, j: usize) {
        while self.next < self.fed.len() && self.fed[self.next].is_none_or(|at| at <= j) {
            self.feed_next();
        }
    }

    /// Considers the next position of the decode order: feeds it if the player gets it.
    fn feed_next(&mut self) {
        let p = self.next;
        self.next += 1;
        if self.fed[p].is_none() {
            return;
        }
        let k = self.order[p];
        self.stats.decoded += 1;
        self.given[k as usize] = true;
        let bytes = self.coded.get(k as usize).map(|c| c.as_ref());
        if bytes.is_some_and(|b| self.decoder.send(k, b)) {
            self.collect();
        }
    }

    /// Takes every picture the decoder has ready.
    fn collect(&mut self) {
        let mut pic = self.spare.pop().unwrap_or_else(|| self.screen.clone());
        while let Some(k) = self.decoder.receive(&mut pic) {
            if let Some(m) = self.made.get_mut(k as usize) {
                *m = true;
            }
            self.highest_out = self.highest_out.max(Some(k));
            // A picture for a frame already passed on screen is not shown.
            if self.shown.is_none_or(|s| k > s) {
                self.ready.push((k, pic));
                pic = self.spare.pop().unwrap_or_else(|| self.screen.clone());
            }
        }
        self.spare.push(pic);
    }

    /// Whether a picture for frame `k` may still come out of the decoder.
    fn may_come(&self, k: u32) -> bool {
        let i = k as usize;
        self.given.get(i).copied().unwrap_or(false)
            && !self.made.get(i).copied().unwrap_or(false)
            && self.highest_out.is_none_or(|h| h < k)
    }

    /// Puts frame `k`'s picture on screen, feeding ahead while the decoder holds it back; if
    /// it makes none, the screen keeps what it showed.
    fn show_frame(&mut self, k: u32) {
        while self.may_come(k) && !self.ready.iter().any(|(f, _)| *f == k) {
            if self.next < self.fed.len() {
                self.feed_next();
            } else if !self.drained {
                self.drained = true;
                self.decoder.drain();
                self.collect();
            } else {
                break;
            }
        }
        if let Some(i) = self.ready.iter().position(|(f, _)| *f == k) {
            let (_, pic) = self.ready.swap_remove(i);
            let old = std::mem::replace(&mut self.screen, pic);
            self.spare.push(old);
            self.shown = Some(k);
        }
        // Frames before it will not be shown any more.
        let mut i = 0;
        while i < self.ready.len() {
            if self.ready[i].0 < k {
                let (_, pic) = self.ready.swap_remove(i);
                self.spare.push(pic);
            } else {
                i += 1;
            }
        }
    }

    /// The counts, once every frame given has had its chance to make a picture.
    fn finish(mut self) -> PlayStats {
        while self.next < self.fed.len() {
            self.feed_next();
        }
        if !self.drained {
            self.decoder.drain();
            self.collect();
        }
        self.stats.undecodable = self
            .given
            .iter()
            .zip(&self.made)
            .filter(|(g, m)| **g && !**m)
            .count() as u64;
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::Chroma;
    use crate::playout::{reconstruct, FrameType};

    const MS: u64 = 1_000_000;

    /// A "decoder" of a toy codec: a frame's bytes are `[own value]` for an intra frame or
    /// `[delta]` added to the previous picture for an inter frame, so what a missing
    /// reference does is visible, as with a real decoder's drift. With `delay`, it holds
    /// pictures back as a decoder that reorders B-frames does, and gives them in frame order.
    #[derive(Default)]
    struct Toy {
        last: Option<u8>,
        delay: usize,
        held: Vec<(u32, u8)>,
        draining: bool,
    }
    impl Decode for Toy {
        fn send(&mut self, frame: u32, coded: &[u8]) -> bool {
            let v = match (coded, self.last) {
                ([b'I', v], _) => *v,
                ([b'P', d], Some(last)) => last.wrapping_add(*d),
                ([b'B', v], Some(_)) => *v,
                _ => return false,
            };
            if coded[0] != b'B' {
                self.last = Some(v);
            }
            self.held.push((frame, v));
            self.held.sort_by_key(|h| std::cmp::Reverse(h.0));
            true
        }
        fn receive(&mut self, out: &mut Picture) -> Option<u32> {
            if self.held.len() <= self.delay && !self.draining {
                return None;
            }
            let (k, v) = self.held.pop()?;
            *out = Picture::black(2, 2, Chroma::Mono);
            out.data.fill(v);
            Some(k)
        }
        fn drain(&mut self) {
            self.draining = true;
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
        shown_with(
            sent,
            coded,
            &display_order(sent.len()),
            arrivals,
            p,
            Toy::default(),
        )
    }

    fn shown_with(
        sent: &[SentFrame],
        coded: &[Vec<u8>],
        order: &[u32],
        arrivals: &[(u64, u64)],
        p: Playout,
        mut toy: Toy,
    ) -> (Vec<u8>, PlayStats) {
        let rec = reconstruct(sent, arrivals, p);
        let mut out = Vec::new();
        let stats = play(
            sent,
            &rec,
            p,
            coded,
            order,
            &mut toy,
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

    /// I0 P3 B1 B2 P6 B4 B5 in decode order, 7 slots: the decoder holds each picture back one
    /// frame (as FFmpeg's MPEG-4 decoder with B-frames does); every slot still shows its own
    /// frame, and a lost B-frame freezes only its slot.
    #[test]
    fn b_frames_are_decoded_in_decode_order_and_shown_in_display_order() {
        let kinds = ["I", "B", "B", "P", "B", "B", "P"];
        let sent: Vec<SentFrame> = kinds
            .iter()
            .enumerate()
            .map(|(i, k)| SentFrame {
                kind: FrameType::from_letter(k.chars().next().unwrap()),
                size_bytes: 2,
                packets: vec![i as u64],
                send_ns: i as u64 * 40 * MS,
            })
            .collect();
        // Values: I 10; P +3 each (13, 16); B-frames carry their own value (11, 12, 14, 15).
        let coded: Vec<Vec<u8>> = [
            (b'I', 10),
            (b'B', 11),
            (b'B', 12),
            (b'P', 3),
            (b'B', 14),
            (b'B', 15),
            (b'P', 3),
        ]
        .iter()
        .map(|(t, v)| vec![*t, *v])
        .collect();
        let order = [0, 3, 1, 2, 6, 4, 5];
        let all: Vec<(u64, u64)> = (0..7).map(|k| (k, k * 40 * MS + 5 * MS)).collect();
        let delayed = || Toy {
            delay: 1,
            ..Toy::default()
        };
        let p = Playout::default();
        let (out, stats) = shown_with(&sent, &coded, &order, &all, p, delayed());
        assert_eq!(out, vec![10, 11, 12, 13, 14, 15, 16]);
        assert_eq!(
            (stats.decoded, stats.undecodable, stats.blank_slots),
            (7, 0, 0)
        );
        let without_b2: Vec<(u64, u64)> = all.iter().copied().filter(|a| a.0 != 2).collect();
        let (out, _) = shown_with(&sent, &coded, &order, &without_b2, p, delayed());
        assert_eq!(out, vec![10, 11, 11, 13, 14, 15, 16]);
    }
}
