//! The sender's queue of receivers' timestamps waiting to be echoed (RFC 4654 §3.5), so that
//! each receiver can measure its RTT.
//!
//! One announcement carries one echo. §3.5's order: a new CLR or a CLR without an RTT first,
//! then receivers without an RTT, then the other receivers, then the CLR; within a class the
//! report answering the older round first, ties to the lower rate. The CLR is echoed at least
//! once per round. The queue holds one entry per receiver, at most [`MAX_ECHOES`]; when full,
//! the least urgent goes.

use super::{Echo, ReceiverFeedback};
use metronome_time::Timestamp;
use std::cmp::{Ordering, Reverse};

/// Echoes waiting to go out (bounded: one per receiver that answered since).
pub(super) const MAX_ECHOES: usize = 64;

/// §3.5's classes, most urgent first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum EchoClass {
    /// A new CLR, or the CLR without an RTT.
    NewClr = 0,
    /// A receiver without an RTT.
    NoRtt = 1,
    /// Another receiver, with an RTT.
    Other = 2,
    /// The CLR, with an RTT.
    Clr = 3,
}

impl EchoClass {
    /// The class of a report from the CLR or another receiver, with or without an RTT.
    pub(super) fn of(is_clr: bool, has_rtt: bool) -> EchoClass {
        match (is_clr, has_rtt) {
            (true, false) => EchoClass::NewClr,
            (false, false) => EchoClass::NoRtt,
            (false, true) => EchoClass::Other,
            (true, true) => EchoClass::Clr,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct PendingEcho {
    receiver: u32,
    ts_us: u32,
    at: Timestamp,
    class: EchoClass,
    /// The round the report answered: older goes first within a class.
    round: u16,
    x_r: f64,
}

impl PendingEcho {
    /// §3.5's order, most urgent least: the class, then the older round, then the lower
    /// rate; `current` is the sender's round.
    fn urgency(&self, current: u16) -> (EchoClass, Reverse<u16>, f64) {
        let age = current.wrapping_sub(self.round);
        (self.class, Reverse(age), self.x_r)
    }
}

/// The echoes waiting, and the round the CLR was last echoed in.
#[derive(Clone, Debug, Default)]
pub(super) struct EchoQueue {
    pending: Vec<PendingEcho>,
    clr_echoed_round: Option<u16>,
}

impl EchoQueue {
    /// Whether nothing waits.
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// How many wait.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.pending.len()
    }

    /// Queues `id`'s timestamp from its report `fb`, received at `now`, replacing an older
    /// one of it; when full, the least urgent of the others goes.
    pub(super) fn push(
        &mut self,
        now: Timestamp,
        id: u32,
        fb: &ReceiverFeedback,
        class: EchoClass,
        round: u16,
    ) {
        self.pending.retain(|e| e.receiver != id);
        if self.pending.len() >= MAX_ECHOES {
            if let Some(i) = self.by_urgency(round, Ordering::Greater) {
                self.pending.swap_remove(i);
            }
        }
        self.pending.push(PendingEcho {
            receiver: id,
            ts_us: fb.ts_us,
            at: now,
            class,
            round: fb.round,
            x_r: fb.x_r,
        });
    }

    /// `id` became the CLR: its echo, if waiting, goes first.
    pub(super) fn promote(&mut self, id: u32) {
        if let Some(e) = self.pending.iter_mut().find(|e| e.receiver == id) {
            e.class = EchoClass::NewClr;
        }
    }

    /// The echo for an announcement at `now` in round `round`: the CLR's if it was not echoed
    /// this round yet, else the most urgent.
    pub(super) fn pop(&mut self, now: Timestamp, round: u16, clr: Option<u32>) -> Option<Echo> {
        let clr_first = clr.is_some() && self.clr_echoed_round != Some(round);
        let i = clr_first
            .then(|| self.pending.iter().position(|e| Some(e.receiver) == clr))
            .flatten()
            .or_else(|| self.by_urgency(round, Ordering::Less))?;
        let e = self.pending.swap_remove(i);
        if clr == Some(e.receiver) {
            self.clr_echoed_round = Some(round);
        }
        Some(Echo {
            receiver: e.receiver,
            ts_us: e.ts_us,
            delay: now.saturating_since(e.at),
        })
    }

    /// The pending echo most urgent (`Less`) or least (`Greater`) by §3.5's order.
    fn by_urgency(&self, round: u16, want: Ordering) -> Option<usize> {
        (0..self.pending.len()).reduce(|best, i| {
            let (a, b) = (
                self.pending[i].urgency(round),
                self.pending[best].urgency(round),
            );
            if a.partial_cmp(&b) == Some(want) {
                i
            } else {
                best
            }
        })
    }
}
