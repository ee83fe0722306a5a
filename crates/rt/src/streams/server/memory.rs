//! The server's memory budget: what each admitted stream holds (its packet ring, exactly, and
//! its source) is reserved before anything is allocated, and a stream that would take the
//! server past its budget is refused with how much it asked and how much is left. A request
//! for a ring of a million slots (1.4 GB) is then a refusal, not an allocation.

use crate::control::ControlError;
use std::collections::HashMap;

/// What a live test source holds besides its ring: the encoder's pictures and state, the mux.
/// Measured: RSS of `serve` with 1 and 5 test streams (rings of 64 slots) differed by 3.4 MiB
/// per stream.
pub const TEST_SOURCE_BYTES: u64 = 4 << 20;
/// What a TS file source holds besides its ring: its read buffer and demux state. Measured as
/// above: 0.7 MiB per stream.
pub const FILE_SOURCE_BYTES: u64 = 1 << 20;

/// The reservations against the budget, by stream id.
#[derive(Debug)]
pub struct MemoryBudget {
    budget: u64,
    used: u64,
    by_stream: HashMap<u64, u64>,
}

impl MemoryBudget {
    pub fn new(budget: u64) -> MemoryBudget {
        MemoryBudget {
            budget,
            used: 0,
            by_stream: HashMap::new(),
        }
    }

    /// The default budget: a quarter of the machine's memory (`MemTotal`), so that streams
    /// cannot take the host; 1 GiB where that cannot be read.
    pub fn default_bytes() -> u64 {
        let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        });
        total_kib.map_or(1 << 30, |k| k.saturating_mul(1024) / 4)
    }

    /// Reserves `bytes` for stream `id` (`name` in the message), or says why not.
    pub fn reserve(&mut self, id: u64, name: &str, bytes: u64) -> Result<(), ControlError> {
        let left = self.budget.saturating_sub(self.used);
        if bytes > left {
            return Err(ControlError::Refused(format!(
                "'{name}' needs {} of memory (its ring and its source) and the server's memory \
                 budget has {} left of {}; give it a smaller ring, stop a stream, or raise \
                 --memory-budget",
                mib(bytes),
                mib(left),
                mib(self.budget)
            )));
        }
        self.used += bytes;
        *self.by_stream.entry(id).or_default() += bytes;
        Ok(())
    }

    /// Gives back what stream `id` reserved (nothing if it had nothing).
    pub fn release(&mut self, id: u64) {
        if let Some(bytes) = self.by_stream.remove(&id) {
            self.used = self.used.saturating_sub(bytes);
        }
    }

    /// Bytes reserved now.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// The budget, bytes.
    pub fn budget(&self) -> u64 {
        self.budget
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_stop_at_the_budget_and_come_back() {
        let mut m = MemoryBudget::new(10 << 20);
        m.reserve(1, "a", 6 << 20).unwrap();
        let e = m.reserve(2, "b", 6 << 20).unwrap_err().to_string();
        assert!(
            e.contains("'b' needs 6.0 MiB") && e.contains("4.0 MiB left of 10.0 MiB"),
            "{e}"
        );
        assert!(e.contains("--memory-budget"), "{e}");
        m.reserve(2, "b", 4 << 20).unwrap();
        assert_eq!(m.used(), 10 << 20);
        m.release(1);
        m.release(1);
        m.release(7);
        assert_eq!(m.used(), 4 << 20);
        m.reserve(3, "c", 6 << 20).unwrap();
    }

    #[test]
    fn the_default_is_a_quarter_of_the_machine() {
        let d = MemoryBudget::default_bytes();
        assert!(d >= 64 << 20, "{d}");
    }
}
