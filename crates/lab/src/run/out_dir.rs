//! The results directory as a run writes it: the run's settings first (`run.json`), each
//! point as soon as it finishes (`points/pNNN/`, its `point.json` last and atomically, so a
//! point with one is whole), and at the end, also when points failed or the run was
//! stopped, the summary, estimates and report of what finished. `lab run --resume DIR`
//! reopens it and runs only what is missing.

use crate::results::{
    self, write_atomically, PointResult, Summary, POINT_FILE, RUN_FILE, SUMMARY_FILE,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A results directory being written.
pub(super) struct OutDir {
    path: PathBuf,
}

impl OutDir {
    /// A new run into `path` (absent or empty): `points/` and `run.json` from `header` (the
    /// summary without points).
    pub(super) fn create(path: &Path, header: &Summary) -> Result<OutDir, String> {
        results::empty_dir(
            path,
            &format!(
                ", remove it, or finish the run in it with `metronome lab run --resume {}`",
                path.display()
            ),
        )?;
        std::fs::create_dir_all(path.join("points"))
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let dir = OutDir { path: path.into() };
        dir.write_json(&path.join(RUN_FILE), header)?;
        Ok(dir)
    }

    /// The run in `path`, to finish: its settings (`run.json`) and the points it finished,
    /// by index. A point's directory without its `point.json` (it was running when the run
    /// ended) is removed: the point runs again. So is the summary of the last stop.
    pub(super) fn reopen(
        path: &Path,
    ) -> Result<(OutDir, Summary, BTreeMap<usize, PointResult>), String> {
        if !path.join(RUN_FILE).exists() {
            return Err(format!(
                "{} has no {RUN_FILE}: it is not a lab run's results directory, or it was \
                 written by a Metronome older than --resume",
                path.display()
            ));
        }
        let header = Summary::read_header(path)?;
        // The last stop's summary speaks for fewer points than the run will have: were this
        // run killed too, `lab report` would draw it rather than the newer points. Without
        // it, the report is drawn from the points until this run writes its own.
        let stale = path.join(SUMMARY_FILE);
        if stale.exists() {
            std::fs::remove_file(&stale)
                .map_err(|e| format!("cannot remove {}: {e}", stale.display()))?;
        }
        let points = path.join("points");
        let entries = std::fs::read_dir(&points)
            .map_err(|e| format!("cannot read {}: {e}", points.display()))?;
        for e in entries.flatten() {
            if e.path().is_dir() && !e.path().join(POINT_FILE).exists() {
                std::fs::remove_dir_all(e.path())
                    .map_err(|err| format!("cannot remove {}: {err}", e.path().display()))?;
            }
        }
        let done = Summary::read_points(path)?
            .into_iter()
            .map(|p| (p.index, p))
            .collect();
        Ok((OutDir { path: path.into() }, header, done))
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// A finished point: its CSVs and files, then its `point.json`.
    /// `interval_ns`: the scenario's reporting interval, for `intervals.csv`.
    pub(super) fn write_point(&self, interval_ns: u64, p: &PointResult) -> Result<(), String> {
        let dir = self.path.join("points").join(&p.id);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let csvs = [
            ("flows.csv", results::flows_csv(p).into_bytes()),
            (
                "intervals.csv",
                results::intervals_csv(p, interval_ns).into_bytes(),
            ),
        ];
        for (name, bytes) in csvs
            .iter()
            .map(|(n, b)| (*n, b))
            .chain(p.files.iter().map(|(n, b)| (n.as_str(), b)))
        {
            write_atomically(&dir.join(name), bytes)?;
        }
        self.write_json(&dir.join(POINT_FILE), p)
    }

    /// The run's end, however it ended: `summary.json`, the estimates and the report from
    /// the points that finished.
    pub(super) fn finish(&self, summary: &Summary) -> Result<(), String> {
        summary.write(&self.path)?;
        crate::estimates::write(&self.path, summary)?;
        crate::report::write(&self.path, summary)
    }

    fn write_json<T: serde::Serialize>(&self, path: &Path, v: &T) -> Result<(), String> {
        let json = serde_json::to_vec_pretty(v)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        write_atomically(path, &json)
    }
}
