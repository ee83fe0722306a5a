//! The scenario a `lab` command names (a file, or a built-in by name), how its sweep runs,
//! and where its results go by default.

use clap::Args;
use metronome_config::scenario::ScenarioFile;
use metronome_lab::builtin;
use metronome_lab::run::Mode;
use std::path::{Path, PathBuf};

/// A scenario by file path or built-in name (a directory of the same name as a built-in,
/// say a results directory `--out seed002-tcp` made, does not hide it).
pub(crate) fn load(what: &str) -> Result<ScenarioFile, String> {
    load_at(what, Path::new(what))
}

/// [`load`], `what` found at `path` if it is a file there.
fn load_at(what: &str, path: &Path) -> Result<ScenarioFile, String> {
    if path.is_dir() && builtin::find(what).is_none() {
        return Err(format!(
            "{what} is a directory, not a scenario: give a scenario file (.toml) or a built-in name (metronome lab list)"
        ));
    }
    if path.exists() && !path.is_dir() {
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

pub(crate) fn default_out(name: &str) -> PathBuf {
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
pub(crate) struct SweepArgs {
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

/// A lab command's `--json`: its one document on stdout.
pub(crate) fn print_json<T: serde::Serialize>(v: &T) -> Result<(), String> {
    println!("{}", crate::report::to_json(v).map_err(|e| e.to_string())?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_named_as_a_built_in_does_not_hide_it() {
        let dir =
            std::env::temp_dir().join(format!("metronome-lab-scenario-{}", std::process::id()));
        let shadow = dir.join("seed001-udp");
        std::fs::create_dir_all(&shadow).unwrap();
        // A results directory of a built-in's name where the name is looked up: the built-in.
        let found = load_at("seed001-udp", &shadow);
        // A directory of no built-in's name: said plainly.
        let e = load_at("results", &dir).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(found.is_ok(), "{:?}", found.err());
        assert!(e.contains("is a directory"), "{e}");
    }
}
