//! The real-time task model of a stream, as in the source paper: every stream is a periodic task
//! with a period, a relative deadline and a worst-case cost per job, plus the link rate it uses.

use std::fmt;
use std::time::Duration;

/// The longest period (and so deadline and cost) the analysis accepts: one hour. Bounding every
/// task time keeps the integer arithmetic of [`crate::analysis`] far from overflow (3.6·10¹² ns
/// < 2⁴², so a product with the 2⁶⁰ fixed-point scale still fits in a `u128`).
pub const MAX_PERIOD: Duration = Duration::from_secs(3600);

/// One stream as a periodic (or sporadic: releases at least `period` apart) task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TaskParams {
    /// Time between job releases (the minimum, for a sporadic stream).
    pub period: Duration,
    /// Relative deadline: a job released at `r` must be complete by `r + deadline`.
    pub deadline: Duration,
    /// Worst-case CPU time of one job (all packets it sends).
    pub cost: Duration,
    /// Rate on the wire, headers included, in bit/s.
    pub bitrate_bps: u64,
}

impl TaskParams {
    /// CPU utilisation `cost / period`, for display (decisions use exact integers).
    pub fn utilisation(&self) -> f64 {
        if self.period.is_zero() {
            return f64::INFINITY;
        }
        self.cost.as_secs_f64() / self.period.as_secs_f64()
    }

    /// Checks the constrained-deadline model the analysis assumes:
    /// `0 ≤ cost < deadline ≤ period ≤ MAX_PERIOD`.
    pub fn validate(&self) -> Result<(), TaskProblem> {
        let (t, d, c) = (self.period, self.deadline, self.cost);
        if t.is_zero() {
            Err(TaskProblem::ZeroPeriod)
        } else if t > MAX_PERIOD {
            Err(TaskProblem::PeriodTooLong { period: t })
        } else if d.is_zero() {
            Err(TaskProblem::ZeroDeadline)
        } else if d > t {
            Err(TaskProblem::DeadlineAfterPeriod {
                deadline: d,
                period: t,
            })
        } else if c >= d {
            Err(TaskProblem::CostNotBelowDeadline {
                cost: c,
                deadline: d,
            })
        } else {
            Ok(())
        }
    }

    /// Period in nanoseconds (exact for valid tasks, which are at most [`MAX_PERIOD`]).
    pub(crate) fn t_ns(&self) -> u128 {
        self.period.as_nanos()
    }
    /// Relative deadline in nanoseconds.
    pub(crate) fn d_ns(&self) -> u128 {
        self.deadline.as_nanos()
    }
    /// Cost in nanoseconds.
    pub(crate) fn c_ns(&self) -> u128 {
        self.cost.as_nanos()
    }
}

/// Why a [`TaskParams`] is outside the model (see [`TaskParams::validate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum TaskProblem {
    /// A period of zero: the stream would release jobs without end.
    ZeroPeriod,
    /// A period longer than [`MAX_PERIOD`].
    PeriodTooLong {
        /// The period given, longer than [`MAX_PERIOD`].
        period: Duration,
    },
    /// A relative deadline of zero: no job could ever be on time.
    ZeroDeadline,
    /// Deadline longer than the period (the analysis covers constrained deadlines only).
    DeadlineAfterPeriod {
        /// The relative deadline given, longer than `period`.
        deadline: Duration,
        /// The period given, shorter than `deadline`.
        period: Duration,
    },
    /// A job that needs its whole deadline (or more) of CPU.
    CostNotBelowDeadline {
        /// The worst-case CPU time per job given.
        cost: Duration,
        /// The relative deadline given, not longer than `cost`.
        deadline: Duration,
    },
}

impl fmt::Display for TaskProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::fmt_util::Ns;
        match *self {
            TaskProblem::ZeroPeriod => write!(f, "its period is zero; give the time between jobs"),
            TaskProblem::PeriodTooLong { period } => write!(
                f,
                "its period {} is longer than the {} the analysis accepts",
                Ns(period),
                Ns(MAX_PERIOD)
            ),
            TaskProblem::ZeroDeadline => write!(f, "its deadline is zero; give a positive deadline"),
            TaskProblem::DeadlineAfterPeriod { deadline, period } => write!(
                f,
                "its deadline {} is longer than its period {}; use a deadline no longer than the period",
                Ns(deadline),
                Ns(period)
            ),
            TaskProblem::CostNotBelowDeadline { cost, deadline } => write!(
                f,
                "its cost per job {} is not below its deadline {}; no core could meet it",
                Ns(cost),
                Ns(deadline)
            ),
        }
    }
}

/// Which scheduling discipline a core runs, and so which admission test applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Earliest deadline first (dynamic priorities).
    Edf,
    /// Deadline-monotonic (fixed priorities: shorter relative deadline first).
    Dm,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(t: u64, d: u64, c: u64) -> TaskParams {
        TaskParams {
            period: Duration::from_micros(t),
            deadline: Duration::from_micros(d),
            cost: Duration::from_micros(c),
            bitrate_bps: 0,
        }
    }

    #[test]
    fn validate_names_each_problem() {
        assert_eq!(task(10, 10, 9).validate(), Ok(()));
        assert_eq!(task(10, 5, 0).validate(), Ok(()));
        assert_eq!(task(0, 0, 0).validate(), Err(TaskProblem::ZeroPeriod));
        assert_eq!(task(10, 0, 0).validate(), Err(TaskProblem::ZeroDeadline));
        assert!(matches!(
            task(10, 11, 1).validate(),
            Err(TaskProblem::DeadlineAfterPeriod { .. })
        ));
        assert!(matches!(
            task(10, 5, 5).validate(),
            Err(TaskProblem::CostNotBelowDeadline { .. })
        ));
        let long = TaskParams {
            period: MAX_PERIOD + Duration::from_nanos(1),
            ..task(10, 5, 1)
        };
        assert!(matches!(
            long.validate(),
            Err(TaskProblem::PeriodTooLong { .. })
        ));
        let msg = task(10, 11, 1).validate().unwrap_err().to_string();
        assert!(msg.contains("11 µs") && msg.contains("10 µs"), "{msg}");
    }
}
