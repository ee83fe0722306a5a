//! The scenario a `lab` command names (a file, or a built-in by name), how its sweep runs,
//! and where its results go by default.

use clap::Args;
use metronome_lab::builtin;
use metronome_lab::run::Mode;
use metronome_spec::scenario::ScenarioFile;
use std::path::{Path, PathBuf};

/// A scenario by file path or built-in name.
pub fn load(what: &str) -> Result<ScenarioFile, String> {
    let path = Path::new(what);
    if path.exists() {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {what}: {e}"))?;
        return ScenarioFile::parse(&text, what).map_err(|e| e.to_string());
    }
    match builtin::find(what) {
        Some(b) => {
            ScenarioFile::parse(b.text, &format!("builtin:{}", b.name)).map_err(|e| e.to_string())
        }
        None => {
            let names: Vec<&str> = builtin::BUILTINS.iter().map(|b| b.name).collect();
            Err(format!(
                "'{what}' is neither a file nor a built-in scenario (built in: {})",
                names.join(", ")
            ))
        }
    }
}

pub fn default_out(name: &str) -> PathBuf {
    let base = Path::new("lab-results").join(name);
    if !base.exists() {
        return base;
    }
    (2..)
        .map(|i| Path::new("lab-results").join(format!("{name}-{i}")))
        .find(|p| !p.exists())
        .expect("some numbered directory is free")
}

/// How a sweep runs, the same for `lab run` and for each task of `lab slurm`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Replace the scenario's seed
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run each point N times (replicate r with the seed plus r − 1), replacing the
    /// scenario's `replicates`; claims are then judged by the replicates' 95 % confidence
    /// intervals
    #[arg(long, value_name = "N")]
    pub replicates: Option<u32>,
    /// sim: virtual time (deterministic, fast); emu (root): the same links between real
    /// sockets in real time, each host a network namespace (every kind of flow, unicast and
    /// multicast, and programs; points run one at a time)
    #[arg(long, default_value = "sim", value_parser = Mode::parse)]
    pub mode: Mode,
}
