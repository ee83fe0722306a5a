//! Whether the admitted set still fits the machine as it is now, not as it was at start-up.
//!
//! Admission control budgets each packet's send cost as measured at start-up. On a shared host
//! that cost changes by the hour, so the server watches, window by window, the send cost it
//! actually measures and the deadlines its streams actually miss. When the set no longer fits
//! it says so, and, as the user chose, also refuses new streams or sheds the newest running one
//! until it fits again.

use serde::Serialize;
use std::time::Duration;

/// What to do when the admitted set no longer fits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum OverloadPolicy {
    /// Say so (the default).
    #[default]
    Warn,
    /// Say so, and refuse new streams until it fits again.
    Refuse,
    /// Say so, and stop the newest stream once deadlines are missed in two windows in a row
    /// (a one-off stall of the host is not a set that does not fit), and again while they
    /// still are. The window right after a stop does not count: the stopped stream's last jobs
    /// may still have delayed the others in it.
    Shed,
    /// Say so only when deadlines are missed: for a lone stream the user did not ask to admit
    /// (`serve` without `--streams`), the budgets admission keeps (send cost, encoders' CPU)
    /// are not theirs to judge; a late stream is.
    Deadlines,
}

impl OverloadPolicy {
    /// The policies a user chooses from, as written on the command line and in the config file
    /// ([`Deadlines`](Self::Deadlines) is the server's own for a lone stream).
    pub const CHOICES: [&'static str; 3] = ["warn", "refuse", "shed"];
}

impl std::str::FromStr for OverloadPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "warn" => Ok(OverloadPolicy::Warn),
            "refuse" => Ok(OverloadPolicy::Refuse),
            "shed" => Ok(OverloadPolicy::Shed),
            _ => Err(format!(
                "unknown overload policy '{}': use warn, refuse or shed",
                s.escape_debug()
            )),
        }
    }
}

/// What the server measured over one window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Send calls measured in the window. Below 200 the p99 is not trusted and
    /// `send_cost_p99` is ignored.
    pub sends: u64,
    /// The 99th percentile of the measured send cost per packet per destination.
    pub send_cost_p99: Duration,
    /// What admission control budgets per packet per destination.
    pub budget: Duration,
    /// Deadlines missed in the window, over all streams.
    pub deadline_misses: u64,
    /// The CPU the producers (the live encoders among them) used in the window, in CPUs
    /// (0.5 = half of one CPU).
    pub producer_cpu: f64,
    /// What admission budgets for the encoders, in CPUs; `producer_cpu` above it is overload.
    pub encode_budget: f64,
}

/// What the server should do after a window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// It stopped fitting: tell the user why.
    Overloaded(String),
    /// Stop the newest stream (policy `Shed`), for this reason.
    Shed(String),
    /// It fits again.
    Recovered(String),
}

/// Sends measured before the p99 of a window is trusted.
const MIN_SENDS: u64 = 200;
/// Quiet windows in a row before the set counts as fitting again.
const QUIET_WINDOWS: u32 = 3;
/// Windows in a row with missed deadlines before a stream is shed.
const SHED_AFTER: u32 = 2;

/// Judges the admitted set window by window (see the module docs) and decides, under its
/// [`OverloadPolicy`], when to report overload, shed a stream, or report recovery (after three
/// quiet windows in a row).
#[derive(Clone, Debug)]
pub struct OverloadWatch {
    policy: OverloadPolicy,
    reason: Option<String>,
    quiet: u32,
    /// Windows in a row with missed deadlines (policy `Shed`).
    missing: u32,
    /// A stream was shed at the end of the last window.
    just_shed: bool,
}

impl OverloadWatch {
    /// A watch that starts out fitting (no reason, nothing missed) and acts by `policy`.
    pub fn new(policy: OverloadPolicy) -> Self {
        OverloadWatch {
            policy,
            reason: None,
            quiet: 0,
            missing: 0,
            just_shed: false,
        }
    }

    /// Why the set does not fit now, if it does not.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// New streams are refused now (policy `Refuse`, while overloaded).
    pub fn refusing(&self) -> bool {
        self.refusing_reason().is_some()
    }

    /// Why new streams are refused now, if they are.
    pub fn refusing_reason(&self) -> Option<&str> {
        match self.policy {
            OverloadPolicy::Refuse => self.reason(),
            _ => None,
        }
    }

    /// Judges one window; returns what to do, if anything.
    pub fn observe(&mut self, w: Window) -> Option<Action> {
        let settling = std::mem::take(&mut self.just_shed);
        self.missing = match w.deadline_misses {
            0 => 0,
            _ if settling => 0,
            _ => self.missing + 1,
        };
        let mut why = Vec::new();
        if w.deadline_misses > 0 {
            let who = if self.policy == OverloadPolicy::Deadlines {
                "the stream"
            } else {
                "admitted streams"
            };
            why.push(format!(
                "{who} missed {} deadlines in the last window",
                w.deadline_misses
            ));
        }
        let budgets = self.policy != OverloadPolicy::Deadlines;
        if budgets && w.sends >= MIN_SENDS && w.send_cost_p99 > w.budget {
            why.push(format!(
                "sending a packet now costs {:.1} µs at p99, over the {:.1} µs admission \
                 budgeted",
                w.send_cost_p99.as_secs_f64() * 1e6,
                w.budget.as_secs_f64() * 1e6
            ));
        }
        if budgets && w.producer_cpu > w.encode_budget {
            why.push(format!(
                "the producers (the live encoders) used {:.1} % of a CPU, over the {:.1} % \
                 admission budgeted for the encoders",
                w.producer_cpu * 100.0,
                w.encode_budget * 100.0
            ));
        }
        if why.is_empty() {
            self.quiet += 1;
            if self.reason.is_some() && self.quiet >= QUIET_WINDOWS {
                self.reason = None;
                return Some(Action::Recovered(format!(
                    "the admitted streams fit again ({QUIET_WINDOWS} windows without a miss, \
                     send cost and encoders within budget)"
                )));
            }
            return None;
        }
        self.quiet = 0;
        let reason = format!("{}: the host is busier than at start-up", why.join("; "));
        let first = self.reason.is_none();
        self.reason = Some(reason.clone());
        if self.policy == OverloadPolicy::Shed && self.missing >= SHED_AFTER {
            self.missing = 0;
            self.just_shed = true;
            return Some(Action::Shed(reason));
        }
        first.then_some(Action::Overloaded(reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(misses: u64, p99_us: u64) -> Window {
        Window {
            sends: 1000,
            send_cost_p99: Duration::from_micros(p99_us),
            budget: Duration::from_micros(10),
            deadline_misses: misses,
            producer_cpu: 0.1,
            encode_budget: 0.8,
        }
    }

    #[test]
    fn a_lone_stream_is_judged_by_its_deadlines_alone() {
        let mut w = OverloadWatch::new(OverloadPolicy::Deadlines);
        let dear = Window {
            producer_cpu: 0.93,
            ..window(0, 25)
        };
        assert_eq!(w.observe(dear), None, "no admission was asked for");
        let Some(Action::Overloaded(why)) = w.observe(window(3, 25)) else {
            panic!("missed deadlines are overload")
        };
        assert!(
            why.contains("missed 3 deadlines") && !why.contains("budget"),
            "{why}"
        );
        assert!(!w.refusing());
    }

    #[test]
    fn encoders_over_their_budget_make_it_overloaded() {
        let mut w = OverloadWatch::new(OverloadPolicy::Refuse);
        let busy = Window {
            producer_cpu: 0.93,
            ..window(0, 5)
        };
        let Some(Action::Overloaded(why)) = w.observe(busy) else {
            panic!("encoders over their budget are overload")
        };
        assert!(why.contains("93.0 %") && why.contains("80.0 %"), "{why}");
        assert!(w.refusing());
    }

    #[test]
    fn misses_or_a_dearer_send_make_it_overloaded_once_and_quiet_windows_recover_it() {
        let mut w = OverloadWatch::new(OverloadPolicy::Warn);
        assert_eq!(w.observe(window(0, 8)), None);
        let Some(Action::Overloaded(why)) = w.observe(window(0, 25)) else {
            panic!("a send cost over budget is overload")
        };
        assert!(why.contains("25.0 µs") && why.contains("10.0 µs"), "{why}");
        // Said once, not every window.
        assert_eq!(w.observe(window(4, 25)), None);
        assert!(w.reason().unwrap().contains("missed 4 deadlines"));
        assert!(!w.refusing(), "warn only");
        assert_eq!(w.observe(window(0, 5)), None);
        assert_eq!(w.observe(window(0, 5)), None);
        assert!(matches!(
            w.observe(window(0, 5)),
            Some(Action::Recovered(_))
        ));
        assert_eq!(w.reason(), None);
    }

    #[test]
    fn refuse_refuses_while_overloaded_and_shed_sheds_while_deadlines_are_missed() {
        let mut r = OverloadWatch::new(OverloadPolicy::Refuse);
        r.observe(window(1, 5));
        assert!(r.refusing());
        let mut s = OverloadWatch::new(OverloadPolicy::Shed);
        // One window of misses (a stall of the host) says so and sheds nothing.
        assert!(matches!(
            s.observe(window(2, 5)),
            Some(Action::Overloaded(_))
        ));
        assert_eq!(s.observe(window(0, 5)), None);
        assert_eq!(s.observe(window(3, 5)), None);
        assert!(matches!(s.observe(window(2, 5)), Some(Action::Shed(_))));
        // The window after a shed held the shed stream's last jobs: it does not count.
        assert_eq!(s.observe(window(1, 5)), None);
        assert_eq!(s.observe(window(1, 5)), None);
        assert!(matches!(s.observe(window(1, 5)), Some(Action::Shed(_))));
        // A dear send alone sheds nothing: nobody missed a deadline yet.
        assert_eq!(s.observe(window(0, 50)), None);
    }

    #[test]
    fn too_few_sends_say_nothing_about_cost() {
        let mut w = OverloadWatch::new(OverloadPolicy::Warn);
        let few = Window {
            sends: 10,
            ..window(0, 500)
        };
        assert_eq!(w.observe(few), None);
    }
}
