//! How the server's pacing threads run, as its user declares it (`--rt`, `--wait`, `--late` and
//! the config file's `rt`, `wait`, `late`).

use crate::stream::parse_duration;
use metronome_sched::LatePolicy;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How the pacing threads run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CoreRt {
    /// SCHED_FIFO where permitted, else an ordinary thread (said in the grant).
    #[default]
    Auto,
    /// SCHED_FIFO, asked for explicitly (the grant says if the system refused it).
    Fifo,
    /// SCHED_DEADLINE with a budget that grows with the admitted streams; the kernel's own
    /// admission control then applies to every stream start.
    Deadline,
    /// Ordinary threads.
    Off,
}

impl CoreRt {
    /// The policies as they are written, for `--help` and errors.
    pub const CHOICES: [&'static str; 4] = ["auto", "fifo", "deadline", "off"];
}

impl FromStr for CoreRt {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(CoreRt::Auto),
            "fifo" => Ok(CoreRt::Fifo),
            "deadline" => Ok(CoreRt::Deadline),
            "off" => Ok(CoreRt::Off),
            _ => Err(format!(
                "unknown real-time policy '{}': use auto, fifo, deadline or off",
                s.escape_debug()
            )),
        }
    }
}

impl fmt::Display for CoreRt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CoreRt::Auto => "auto",
            CoreRt::Fifo => "fifo",
            CoreRt::Deadline => "deadline",
            CoreRt::Off => "off",
        })
    }
}

/// What a stream does with packets later than the stall threshold: `catch-up` (at twice its
/// rate), `catch-up=F` (at F times its rate, F > 1), `drop-late` (drop what is more than
/// 10 ms late) or `drop-late=DURATION` (with its unit, or a plain number of seconds).
pub fn parse_late(s: &str) -> Result<LatePolicy, String> {
    let (name, value) = match s.split_once('=') {
        Some((n, v)) => (n.trim(), Some(v.trim())),
        None => (s.trim(), None),
    };
    match (name, value) {
        ("catch-up", None) => Ok(LatePolicy::CATCH_UP),
        ("catch-up", Some(f)) => match f.parse::<f64>() {
            Ok(f) if f > 1.0 && f <= 100.0 => Ok(LatePolicy::CatchUp { factor: f }),
            _ => Err(format!(
                "'{f}' is not a catch-up factor: give a multiple of the stream's rate above 1 \
                 (for example catch-up=2), so that a backlog can drain"
            )),
        },
        ("drop-late", None) => Ok(LatePolicy::DropLate {
            after: Duration::from_millis(10),
        }),
        ("drop-late", Some(d)) => {
            let after = match d.parse::<f64>() {
                Ok(v) if (0.0..=1e4).contains(&v) => Duration::from_secs_f64(v),
                Ok(_) => return Err(format!("'{d}' is out of range (0 to 10000 s)")),
                Err(_) => parse_duration(d)?,
            };
            Ok(LatePolicy::DropLate { after })
        }
        _ => Err(format!(
            "'{s}' is not a late policy: use catch-up, catch-up=FACTOR, drop-late or \
             drop-late=DURATION (for example drop-late=20ms)"
        )),
    }
}
