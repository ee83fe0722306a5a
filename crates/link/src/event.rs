//! A deterministic discrete-event queue.
//!
//! A min-heap on `(time, insertion sequence)`: the earliest event pops first, and events at the
//! same instant pop in the order they were pushed. `BinaryHeap` alone breaks ties arbitrarily
//! (it depends on the heap's history), which would make a simulation's outcome depend on
//! incidental push patterns; the sequence number makes it a pure function of the pushes.

use metronome_time::Timestamp;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Events of type `E` ordered by time, ties in insertion order.
#[derive(Clone, Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue; its heap grows as events are pushed.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }

    /// An empty queue with room for `capacity` events before it reallocates.
    pub fn with_capacity(capacity: usize) -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(capacity),
            next_seq: 0,
        }
    }

    /// Schedules `event` at `at`. Times in the past are allowed; they pop first.
    pub fn push(&mut self, at: Timestamp, event: E) {
        let seq = self.next_seq;
        // 2^64 pushes would take centuries at a billion a second; wrapping would only reorder ties.
        self.next_seq = self.next_seq.wrapping_add(1);
        self.heap.push(Entry { at, seq, event });
    }

    /// The time of the earliest event: when the driver should call back.
    pub fn peek_time(&self) -> Option<Timestamp> {
        self.heap.peek().map(|e| e.at)
    }

    /// The earliest event, without removing it.
    pub fn peek(&self) -> Option<(Timestamp, &E)> {
        self.heap.peek().map(|e| (e.at, &e.event))
    }

    /// Removes and returns the earliest event, however far in the future.
    pub fn pop(&mut self) -> Option<(Timestamp, E)> {
        self.heap.pop().map(|e| (e.at, e.event))
    }

    /// Removes and returns the earliest event if it is due (`at <= now`).
    pub fn pop_due(&mut self, now: Timestamp) -> Option<(Timestamp, E)> {
        if self.peek_time()? <= now {
            self.pop()
        } else {
            None
        }
    }

    /// Number of events pending, due or not.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Drops every event. The sequence counter keeps counting, so order stays by insertion.
    pub fn clear(&mut self) {
        self.heap.clear();
    }
}

#[derive(Clone, Debug)]
struct Entry<E> {
    at: Timestamp,
    seq: u64,
    event: E,
}

// Ordered on (at, seq) only, reversed so that `BinaryHeap` (a max-heap) pops the minimum.
impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.cmp(&self.at).then(other.seq.cmp(&self.seq))
    }
}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at && self.seq == other.seq
    }
}

impl<E> Eq for Entry<E> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(v: u64) -> Timestamp {
        Timestamp::from_millis(v)
    }

    #[test]
    fn pops_by_time_then_insertion_order() {
        let mut q = EventQueue::new();
        q.push(ms(5), "c");
        q.push(ms(1), "a");
        q.push(ms(5), "d");
        q.push(ms(1), "b");
        q.push(ms(3), "x");
        assert_eq!(q.len(), 5);
        assert_eq!(q.peek(), Some((ms(1), &"a")));
        assert_eq!(q.pop_due(ms(0)), None);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, ["a", "b", "x", "c", "d"]);
        assert!(q.is_empty());
        assert_eq!(q.peek_time(), None);
    }

    #[test]
    fn pop_due_stops_at_now() {
        let mut q = EventQueue::with_capacity(4);
        q.push(ms(2), 2);
        q.push(ms(1), 1);
        q.push(ms(3), 3);
        assert_eq!(q.pop_due(ms(2)), Some((ms(1), 1)));
        assert_eq!(q.pop_due(ms(2)), Some((ms(2), 2)));
        assert_eq!(q.pop_due(ms(2)), None);
        assert_eq!(q.peek_time(), Some(ms(3)));
    }

    proptest! {
        /// Popping everything equals a stable sort of the pushes by time.
        #[test]
        fn pops_equal_a_stable_sort(times in prop::collection::vec(0u64..20, 0..200)) {
            let mut q = EventQueue::new();
            for (i, &t) in times.iter().enumerate() {
                q.push(Timestamp::from_nanos(t), i);
            }
            let mut expected: Vec<_> = times.iter().copied().enumerate().collect();
            expected.sort_by_key(|&(_, t)| t); // stable: ties stay in insertion order
            let popped: Vec<_> = std::iter::from_fn(|| q.pop())
                .map(|(t, i)| (i, t.as_nanos()))
                .collect();
            prop_assert_eq!(popped, expected);
        }
    }
}
