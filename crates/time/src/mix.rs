//! SplitMix64 (Steele, Lea and Flood, 2014), the one seed mixer every crate uses: nearby
//! inputs give unrelated outputs, so a run's seed spreads into independent streams, links,
//! SSRCs and pixels without correlated draws.

/// SplitMix64's increment, the golden ratio in 64 bits.
pub const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's finaliser: `x` mixed, no increment added.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One SplitMix64 step from state `x`: its output.
pub fn splitmix64(x: u64) -> u64 {
    mix64(x.wrapping_add(GOLDEN_GAMMA))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference generator's first outputs from state 0 (Vigna's `splitmix64.c`).
    #[test]
    fn the_reference_sequence() {
        let mut state = 0u64;
        let mut next = || {
            let out = splitmix64(state);
            state = state.wrapping_add(GOLDEN_GAMMA);
            out
        };
        assert_eq!(next(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(next(), 0x6e78_9e6a_a1b9_65f4);
    }
}
