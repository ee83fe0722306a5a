//! Admission's CPU budget for the work beside the pacing cores: the live encoders. The
//! schedulability tests budget each packet's send on a real-time core; a test source's
//! encoder runs on the producers' CPUs, and one encoder can cost more than a hundred sends.
//! What each encoder costs (a measured share of a CPU) is reserved before it starts, and one
//! that would take the encoders past the budget is refused with what it needs and what is
//! left. Shares are kept in millionths of a CPU, so that reservations given back leave the
//! ledger exactly where it was.

use crate::ledger::Ledger;
use std::fmt;

/// Millionths of a CPU in one CPU.
const PPM: f64 = 1e6;

/// The reservations against the budget, by holder id, in millionths of a CPU.
#[derive(Debug)]
pub struct CpuBudget(Ledger);

/// Why an encoder does not fit the CPU budget.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuRefusal {
    /// The name of the stream whose encoder was refused, as given to [`CpuBudget::reserve`].
    pub name: String,
    /// The share of a CPU it asked for.
    pub asked: f64,
    /// What is left of the budget, CPUs.
    pub left: f64,
    /// The budget, CPUs.
    pub budget: f64,
}

impl fmt::Display for CpuRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "'{}' needs an encoder that takes {:.1} % of a CPU and the encoders' budget has \
             {:.1} % left of {:.1} %; stop a stream, share the encoder, make the picture \
             smaller, or raise --encode-budget",
            self.name,
            self.asked * 100.0,
            self.left * 100.0,
            self.budget * 100.0
        )
    }
}

fn ppm(cpus: f64) -> u64 {
    (cpus.max(0.0) * PPM).round() as u64
}

impl CpuBudget {
    /// A budget of `cpus` CPUs (1.5: one and a half).
    pub fn new(cpus: f64) -> CpuBudget {
        CpuBudget(Ledger::new(ppm(cpus)))
    }

    /// Reserves `cpus` for holder `id` (`name` in the refusal), or says why not.
    pub fn reserve(&mut self, id: u64, name: &str, cpus: f64) -> Result<(), CpuRefusal> {
        self.0.reserve(id, ppm(cpus)).map_err(|left| CpuRefusal {
            name: name.to_string(),
            asked: cpus,
            left: left as f64 / PPM,
            budget: self.budget(),
        })
    }

    /// Gives back what holder `id` reserved (nothing if it had nothing).
    pub fn release(&mut self, id: u64) {
        self.0.release(id);
    }

    /// CPUs reserved now.
    pub fn used(&self) -> f64 {
        self.0.used() as f64 / PPM
    }

    /// The budget, CPUs.
    pub fn budget(&self) -> f64 {
        self.0.budget() as f64 / PPM
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_stop_at_the_budget_and_come_back_exactly() {
        let mut c = CpuBudget::new(0.8);
        c.reserve(1, "a", 0.3).unwrap();
        c.reserve(2, "b", 0.3).unwrap();
        let e = c.reserve(3, "c", 0.3).unwrap_err();
        assert!((e.left - 0.2).abs() < 1e-9, "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("'c' needs an encoder that takes 30.0 % of a CPU")
                && text.contains("budget has 20.0 % left of 80.0 %")
                && text.contains("--encode-budget"),
            "{text}"
        );
        c.reserve(3, "c", 0.2).unwrap();
        assert!((c.used() - 0.8).abs() < 1e-9);
        c.release(1);
        c.release(1);
        c.release(9);
        assert!((c.used() - 0.5).abs() < 1e-9);
        // Many small shares given back leave the ledger where it started.
        for i in 10..1010 {
            c.reserve(i, "x", 0.000_123).unwrap();
        }
        for i in 10..1010 {
            c.release(i);
        }
        assert!((c.used() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_free_holder_always_fits() {
        let mut c = CpuBudget::new(0.0);
        c.reserve(1, "tap", 0.0).unwrap();
        assert!(c.reserve(2, "enc", 0.01).is_err());
    }
}
