//! Admission's memory budget: what each admitted stream will hold (its packet ring and its
//! source) is reserved before anything is allocated, and a stream that would take the server
//! past its budget is refused with how much it asked and how much is left. A request for a
//! ring of a million slots (1.4 GB) is then a refusal, not an allocation.

use crate::ledger::Ledger;
use std::fmt;

/// The reservations against the budget, by stream id.
#[derive(Debug)]
pub struct MemoryBudget(Ledger);

/// Why a stream does not fit the memory budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRefusal {
    /// The name of the refused stream, as given to [`MemoryBudget::reserve`].
    pub name: String,
    /// Bytes the stream asked for.
    pub asked: u64,
    /// Bytes left in the budget.
    pub left: u64,
    /// The budget, bytes.
    pub budget: u64,
}

impl fmt::Display for MemoryRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "'{}' needs {} of memory (its ring and its source) and the server's memory budget \
             has {} left of {}; give it a smaller ring, stop a stream, or raise --memory-budget",
            self.name,
            mib(self.asked),
            mib(self.left),
            mib(self.budget)
        )
    }
}

impl MemoryBudget {
    /// A budget of `budget` bytes with nothing reserved yet.
    pub fn new(budget: u64) -> MemoryBudget {
        MemoryBudget(Ledger::new(budget))
    }

    /// Reserves `bytes` for stream `id` (`name` in the refusal), or says why not.
    pub fn reserve(&mut self, id: u64, name: &str, bytes: u64) -> Result<(), MemoryRefusal> {
        self.0.reserve(id, bytes).map_err(|left| MemoryRefusal {
            name: name.to_string(),
            asked: bytes,
            left,
            budget: self.0.budget(),
        })
    }

    /// Gives back what stream `id` reserved (nothing if it had nothing).
    pub fn release(&mut self, id: u64) {
        self.0.release(id);
    }

    /// Bytes reserved now.
    pub fn used(&self) -> u64 {
        self.0.used()
    }

    /// The budget, bytes.
    pub fn budget(&self) -> u64 {
        self.0.budget()
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
}
