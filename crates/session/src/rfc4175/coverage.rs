//! Which pixel groups of a frame have arrived: one bit per pgroup, allocated once.
//!
//! Counting bytes would count a duplicated or overlapping segment twice; the bitmap counts each
//! pgroup once, so "complete" means every pgroup of the frame arrived (RFC 4175 §4.3 units).

/// A bitmap of a fixed number of pgroups, with a running count of the bits set.
#[derive(Clone, Debug)]
pub struct Coverage {
    words: Vec<u64>,
    bits: usize,
    set: usize,
}

impl Coverage {
    /// An empty bitmap of `bits` bits (one per pgroup of the frame); the only allocation.
    pub fn new(bits: usize) -> Coverage {
        Coverage {
            words: vec![0; bits.div_ceil(64)],
            bits,
            set: 0,
        }
    }

    /// Clears every bit, for the next frame; keeps the allocation.
    pub fn clear(&mut self) {
        self.words.fill(0);
        self.set = 0;
    }

    /// Bits set.
    pub fn count(&self) -> usize {
        self.set
    }

    /// Whether every bit is set: every pgroup of the frame arrived.
    pub fn is_full(&self) -> bool {
        self.set == self.bits
    }

    /// Sets bits `start..start + n` (clipped to the bitmap) and returns how many were new.
    pub fn set_range(&mut self, start: usize, n: usize) -> usize {
        let end = start.saturating_add(n).min(self.bits);
        let mut i = start;
        let mut new = 0;
        while i < end {
            let w = i / 64;
            let lo = i % 64;
            let hi = (end - w * 64).min(64);
            let mask = if hi - lo == 64 {
                u64::MAX
            } else {
                ((1u64 << (hi - lo)) - 1) << lo
            };
            new += (mask & !self.words[w]).count_ones() as usize;
            self.words[w] |= mask;
            i = w * 64 + hi;
        }
        self.set += new;
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_bit_once() {
        let mut c = Coverage::new(200);
        assert_eq!(c.set_range(0, 10), 10);
        assert_eq!(c.set_range(5, 10), 5);
        assert_eq!(c.set_range(60, 70), 70);
        assert_eq!(c.set_range(0, 130), 130 - 15 - 70);
        assert_eq!(c.count(), 130);
        assert_eq!(c.set_range(190, 50), 10); // clipped
        assert_eq!(c.set_range(500, 5), 0);
        assert_eq!(c.set_range(130, 60), 60);
        assert!(c.is_full());
        c.clear();
        assert_eq!(c.count(), 0);
        assert_eq!(c.set_range(64, 64), 64);
    }
}
