//! The lab: scenario files (`metronome_config::scenario`) run in the simulator
//! (`metronome_sim`), written as a results directory, and drawn as a report.
//!
//! - [`builtin`]: the scenarios that ship with Metronome (seed 001's experiments);
//! - [`model`]: a scenario point built as a simulation (link profiles → link model, flows →
//!   the simulator's applications);
//! - [`run`]: every point (or a shard's share), `--jobs` at a time, into a directory;
//! - [`cluster`]: a sweep on many machines: the shard from a scheduler's environment, the
//!   Slurm job array of `lab slurm`;
//! - [`emu_mode`]: a point on real sockets through the emulator (`--mode emu`);
//! - [`results`]: the directory's files: `summary.json` (schema [`results::SCHEMA`]) and CSVs;
//! - [`closed_form`]: what the link model must give, by hand, and the fit of a testbed's
//!   extra holding time;
//! - [`estimates`]: every metric over the replicates, mean and 95 % interval; [`claims`]:
//!   a scenario's claims judged from them;
//! - [`report`]: `report.html`, self-contained;
//! - [`video`]: video flows, what each viewer saw (frames, pictures); [`lavfi`]: their
//!   content from FFmpeg's lavfi sources.

pub mod builtin;
pub mod claims;
pub mod closed_form;
pub mod cluster;
pub mod compare;
pub mod emu_mode;
pub mod estimates;
pub mod fairness;
pub mod ladder;
pub mod lavfi;
pub mod model;
pub mod report;
pub mod results;
pub mod run;
pub mod served;
pub mod video;
pub mod wall;
