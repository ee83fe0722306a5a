//! What admission's budgets have in common: amounts held against a budget, by holder, given
//! back exactly (integers, so that many reservations and releases leave no drift). The memory
//! budget counts bytes (`memory.rs`), the encoders' CPU budget millionths of a CPU (`cpu.rs`).

use std::collections::HashMap;

/// Amounts reserved against a budget, by holder id.
#[derive(Debug)]
pub(crate) struct Ledger {
    budget: u64,
    used: u64,
    by_holder: HashMap<u64, u64>,
}

impl Ledger {
    /// An empty ledger over `budget` (in the caller's unit: bytes for memory, millionths of a
    /// CPU for the encoders' CPU budget).
    pub(crate) fn new(budget: u64) -> Ledger {
        Ledger {
            budget,
            used: 0,
            by_holder: HashMap::new(),
        }
    }

    /// Reserves `amount` for holder `id`; when it does not fit, `Err` with what is left.
    pub(crate) fn reserve(&mut self, id: u64, amount: u64) -> Result<(), u64> {
        let left = self.budget.saturating_sub(self.used);
        if amount > left {
            return Err(left);
        }
        self.used += amount;
        *self.by_holder.entry(id).or_default() += amount;
        Ok(())
    }

    /// Gives back what holder `id` reserved (nothing if it had nothing).
    pub(crate) fn release(&mut self, id: u64) {
        if let Some(a) = self.by_holder.remove(&id) {
            self.used = self.used.saturating_sub(a);
        }
    }

    /// Reserved now.
    pub(crate) fn used(&self) -> u64 {
        self.used
    }

    /// The total the ledger was created with, in the same unit as the reservations.
    pub(crate) fn budget(&self) -> u64 {
        self.budget
    }
}
