//! What the driver adds to admission's memory budget (`metronome_sched::memory`): the
//! measured cost of each kind of source, and the default budget, from the machine's memory.

/// What a live test source holds besides its ring: the encoder's pictures and state, the mux.
/// Measured: RSS of `serve` with 1 and 5 test streams (rings of 64 slots) differed by 3.4 MiB
/// per stream.
pub(crate) const TEST_SOURCE_BYTES: u64 = 4 << 20;
/// What a TS file source holds besides its ring: its read buffer and demux state. Measured as
/// above: 0.7 MiB per stream.
pub(crate) const FILE_SOURCE_BYTES: u64 = 1 << 20;

/// The default budget: a quarter of the machine's memory (`MemTotal`), so that streams cannot
/// take the host; 1 GiB where that cannot be read.
pub(crate) fn default_budget_bytes() -> u64 {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    total_kib.map_or(1 << 30, |k| k.saturating_mul(1024) / 4)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_is_a_quarter_of_the_machine() {
        let d = super::default_budget_bytes();
        assert!(d >= 64 << 20, "{d}");
    }
}
