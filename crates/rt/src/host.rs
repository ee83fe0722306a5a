//! How busy the host was while a run measured: every summary says so, because on these shared
//! 2-CPU VMs the same code measures microseconds in a quiet minute and milliseconds in a busy
//! one, and a figure means little without it.
//!
//! [`HostWatch::start`] reads the kernel's CPU accounting (`/proc/stat`: all CPUs' busy, idle and
//! steal time) and this process's CPU time (`/proc/self/stat`); [`HostWatch::finish`] reads them
//! again and says, over the run:
//! - **steal**: the share of time the hypervisor gave the VM's CPUs to someone else;
//! - **others**: the share of the VM's CPU time used by other processes than this one and the
//!   programs it ran (a benchmark's baseline, ns-3, GStreamer: counted as its own once they
//!   have ended and been waited for, as the kernel accounts them);
//! - **stalls**: how often the run's own senders fell behind by more than the stall threshold;
//!
//! and a verdict: `quiet`, or `busy` with the reason, when the figures reflect the host more
//! than the code.

use serde::Serialize;

/// The kernel's account of all CPUs and of this process, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Ticks {
    total: u64,
    idle: u64,
    steal: u64,
    own: u64,
}

/// What the host did during a run.
#[derive(Clone, Debug, Serialize, PartialEq, schemars::JsonSchema)]
pub struct HostLoad {
    /// CPUs this process may run on, as `std::thread::available_parallelism` reports them (1
    /// if unknown); the percentages below are of all CPUs' time together.
    pub cpus: usize,
    /// Time the hypervisor ran something else on our CPUs, % of all CPU time.
    pub steal_percent: f64,
    /// CPU time other processes used, % of all CPU time (of all CPUs together).
    pub others_percent: f64,
    /// This process's CPU time and that of the programs it ran and waited for, % of all CPU
    /// time.
    pub own_percent: f64,
    /// Senders' stalls (lateness beyond the stall threshold) during the run.
    pub stalls: u64,
    /// `quiet`, or `busy`.
    #[schemars(extend("enum" = ["quiet", "busy"]))]
    pub verdict: &'static str,
    /// Why it is busy, in words (empty when quiet).
    pub reason: String,
}

/// Steal above this share of CPU time makes the host busy.
const STEAL_BUSY_PERCENT: f64 = 2.0;
/// Other processes using more than this share of all CPUs make the host busy.
const OTHERS_BUSY_PERCENT: f64 = 25.0;

impl HostLoad {
    /// The verdict on the figures of a run, from what the host did during it.
    fn judge(cpus: usize, before: Ticks, after: Ticks, stalls: u64) -> HostLoad {
        let total = after.total.saturating_sub(before.total).max(1) as f64;
        let idle = after.idle.saturating_sub(before.idle) as f64;
        let steal = after.steal.saturating_sub(before.steal) as f64;
        // The process's ticks and the machine's are sampled apart: over a short run with every
        // CPU busy in this process, its own can come out above the machine's busy time.
        let own =
            (after.own.saturating_sub(before.own) as f64).min((total - idle - steal).max(0.0));
        // Busy time of every CPU, less ours, less steal (which /proc/stat counts apart).
        let others = (total - idle - steal - own).max(0.0);
        let pct = |v: f64| (v * 100.0 / total * 10.0).round() / 10.0;
        let mut reasons = Vec::new();
        if pct(steal) > STEAL_BUSY_PERCENT {
            reasons.push(format!(
                "the hypervisor stole {:.1}% of the CPU time",
                pct(steal)
            ));
        }
        if pct(others) > OTHERS_BUSY_PERCENT {
            reasons.push(format!(
                "other processes used {:.1}% of the CPUs",
                pct(others)
            ));
        }
        if stalls > 0 {
            reasons.push(format!("senders stalled {stalls} times"));
        }
        HostLoad {
            cpus,
            steal_percent: pct(steal),
            others_percent: pct(others),
            own_percent: pct(own),
            stalls,
            verdict: if reasons.is_empty() { "quiet" } else { "busy" },
            reason: reasons.join(", "),
        }
    }

    /// One line for a summary.
    pub fn line(&self) -> String {
        let figures = format!(
            "steal {:.1}%, other processes {:.1}%, this one {:.1}% of {} CPUs",
            self.steal_percent, self.others_percent, self.own_percent, self.cpus
        );
        if self.verdict == "quiet" {
            format!("host: quiet ({figures})")
        } else {
            format!(
                "host: BUSY: {} ({figures}); timing figures of this run reflect the host: \
                 compare only with a baseline measured in the same run",
                self.reason
            )
        }
    }
}

/// Watches the host over a run.
pub struct HostWatch {
    before: Option<Ticks>,
    cpus: usize,
}

impl HostWatch {
    /// Takes the first reading of `/proc/stat` and `/proc/self/stat`, at the start of a run.
    /// Never fails: if /proc cannot be read, [`finish`](Self::finish) returns `None`.
    pub fn start() -> HostWatch {
        HostWatch {
            before: read_ticks(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// What the host did since `start`; `None` where /proc cannot be read.
    pub fn finish(&self, stalls: u64) -> Option<HostLoad> {
        let before = self.before?;
        let after = read_ticks()?;
        Some(HostLoad::judge(self.cpus, before, after, stalls))
    }
}

fn read_ticks() -> Option<Ticks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let own = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse(&stat, &own)
}

/// `/proc/stat`'s first line: `cpu user nice system idle iowait irq softirq steal guest
/// guest_nice` (guest time is already inside user and nice); `/proc/self/stat`: utime, stime,
/// cutime and cstime are the 14th to 17th fields, counted past the parenthesised command name.
fn parse(stat: &str, own: &str) -> Option<Ticks> {
    let cpu: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let field = |i: usize| cpu.get(i).copied().unwrap_or(0);
    let total = (0..8).map(field).sum();
    let rest = own.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime, stime, and cutime, cstime: its children's, once waited for.
    let own = (11..=14)
        .map(|i| f.get(i)?.parse::<u64>().ok())
        .sum::<Option<u64>>()?;
    Some(Ticks {
        total,
        idle: field(3) + field(4),
        steal: field(7),
        own,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: &str =
        "4242 (metronome (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 30 10 5 7 20 0 9 0";

    #[test]
    fn parses_the_kernels_accounting() {
        let stat = "cpu  100 5 50 800 10 1 2 30 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        let t = parse(stat, OWN).unwrap();
        assert_eq!(
            t,
            Ticks {
                total: 998,
                idle: 810,
                steal: 30,
                own: 52
            }
        );
        assert_eq!(parse("intr 5", OWN), None);
    }

    #[test]
    fn steal_others_and_stalls_make_a_host_busy_and_say_why() {
        let before = Ticks {
            total: 0,
            idle: 0,
            steal: 0,
            own: 0,
        };
        // 1000 ticks: 900 idle, 80 ours, 20 others, no steal, no stalls: quiet.
        let quiet = HostLoad::judge(
            2,
            before,
            Ticks {
                total: 1000,
                idle: 900,
                steal: 0,
                own: 80,
            },
            0,
        );
        assert_eq!(
            (quiet.verdict, quiet.others_percent, quiet.own_percent),
            ("quiet", 2.0, 8.0)
        );
        assert!(quiet.line().starts_with("host: quiet"));
        // 50 of 1000 stolen, 400 used by others, 3 stalls.
        let busy = HostLoad::judge(
            2,
            before,
            Ticks {
                total: 1000,
                idle: 450,
                steal: 50,
                own: 100,
            },
            3,
        );
        assert_eq!(busy.verdict, "busy");
        assert_eq!((busy.steal_percent, busy.others_percent), (5.0, 40.0));
        assert!(busy.reason.contains("stole 5.0%"), "{}", busy.reason);
        assert!(busy.reason.contains("other processes used 40.0%"));
        assert!(busy.reason.contains("stalled 3 times"));
        assert!(busy.line().contains("compare only with a baseline"));
    }

    #[test]
    fn a_real_watch_reads_this_machine() {
        let w = HostWatch::start();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let h = w.finish(0).expect("/proc is readable here");
        assert!(h.cpus >= 1);
        assert!((0.0..=100.0).contains(&h.steal_percent));
        assert!((0.0..=100.0).contains(&h.own_percent));
    }
}
