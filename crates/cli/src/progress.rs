//! A long command's progress on stderr, as `lab run` shows its points: which step ended, how
//! long the run has taken, and about how long is left (the steps still to run taken to last as
//! long as those done, or as given). Nothing goes to stdout, so `--json` output stays JSON alone.

use metronome_lab::run::clock;
use metronome_rt::clock::mono_ns;

/// Steps of a run, counted as they end.
pub(crate) struct Progress {
    what: &'static str,
    total: usize,
    done: usize,
    start_ns: u64,
}

impl Progress {
    /// A run of `total` steps called `what` (`bench sim`), starting now; says so, with how long
    /// it should take if that is known.
    pub(crate) fn start(what: &'static str, total: usize, expected_s: Option<f64>) -> Progress {
        let about = expected_s.map_or(String::new(), |s| format!(", about {}", clock(s)));
        eprintln!("{what}: {total} steps{about}");
        Progress {
            what,
            total,
            done: 0,
            start_ns: mono_ns(),
        }
    }

    /// Step `label` ended.
    pub(crate) fn step(&mut self, label: &str) {
        self.done += 1;
        let elapsed = mono_ns().saturating_sub(self.start_ns) as f64 / 1e9;
        eprintln!("{}", self.line(label, elapsed));
    }

    fn line(&self, label: &str, elapsed_s: f64) -> String {
        let (n, total) = (self.done, self.total);
        let left = elapsed_s / n.max(1) as f64 * total.saturating_sub(n) as f64;
        let eta = if n < total {
            format!(", about {} left", clock(left))
        } else {
            String::new()
        };
        format!(
            "{}: {n}/{total} done in {}{eta} (last: {label})",
            self.what,
            clock(elapsed_s)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_left_assumes_the_rest_take_as_long_as_those_done() {
        let mut p = Progress {
            what: "bench x",
            total: 4,
            done: 1,
            start_ns: 0,
        };
        assert_eq!(
            p.line("first", 10.0),
            "bench x: 1/4 done in 10s, about 30s left (last: first)"
        );
        p.done = 4;
        assert_eq!(
            p.line("last", 3725.0),
            "bench x: 4/4 done in 1h02m (last: last)"
        );
        assert_eq!(clock(245.0), "4m05s");
    }
}
