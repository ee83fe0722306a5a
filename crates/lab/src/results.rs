//! A results directory: what a run wrote, in files a person and a program can both read.
//!
//! ```text
//! DIR/summary.json           the run: schema, scenario, host, commit, every point's figures
//! DIR/report.html            the report (plots inline as SVG; opens without a network)
//! DIR/run.json               the run's settings, written before any point runs
//! DIR/points/pNNN/point.json     the point's figures, written last, when it finished
//! DIR/points/pNNN/flows.csv      one row per flow and receiver
//! DIR/points/pNNN/intervals.csv  one row per flow, receiver and interval
//! DIR/points/pNNN/packets.csv    one row per packet event (only with `trace = true`)
//! DIR/points/pNNN/FLOW.stdout    a command flow's output (emu mode), and FLOW.stderr
//! ```
//!
//! Units in `summary.json`: durations in µs (`*_us`, kept in ns inside: exact in virtual
//! time), points in time in ns since the Unix epoch (`*_unix_ns`), rates in bit/s, sizes in
//! bytes on the wire (IP header included), loss in percent. Every field and column is
//! documented in `docs/lab.md`.
//!
//! A run that was stopped, or killed, keeps the points it finished: `summary.json` is written
//! from them when a run ends for any reason, and [`Summary::read`] rebuilds it from `run.json`
//! and the points' `point.json` when the run ended before it could write it
//! (`crate::run::out_dir` writes them; `lab run --resume DIR` runs the rest).

use crate::closed_form::{ClosedForm, TcpExpected};
use metronome_config::scenario::Scenario;
use metronome_link::report::FlowReport;
use metronome_link::topology::{LinkId, Topology};
use metronome_link::LinkStats;
use metronome_time::Micros;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The summary's schema; bumped when a field changes meaning or goes away.
pub const SCHEMA: &str = "metronome.lab.summary/3";
/// The schema before durations became one type (integers where whole µs; read the same).
const SCHEMA_2: &str = "metronome.lab.summary/2";

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// [`SCHEMA`].
    pub schema: String,
    pub scenario: ScenarioInfo,
    /// `sim` (virtual time) or `emu` (real sockets).
    pub mode: String,
    pub host: Host,
    /// The git commit the binary was built from (`+dirty` if the tree had changes).
    pub commit: String,
    /// Metronome's version, and the command line of the run.
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// When the run started, ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// Which share of the sweep this directory holds: `index` of `count` (0 of 1: all).
    pub shard: Shard,
    /// Points of the whole sweep (this directory may hold fewer).
    pub total_points: usize,
    /// The seed given with `--seed`, which replaced the scenario's (and its sweep's) seeds;
    /// absent when they ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_override: Option<u64>,
    pub points: Vec<PointResult>,
    /// Points that ran and failed, with why; `lab run --resume DIR` runs them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<FailedPoint>,
}

/// A point that ran and did not finish.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FailedPoint {
    pub index: usize,
    /// `pNNN`.
    pub id: String,
    /// Sweep parameter → value, as written in the scenario.
    pub params: BTreeMap<String, String>,
    /// What went wrong, one line.
    pub error: String,
}

/// The run's settings, written before its first point: with the points' `point.json` files it
/// is the summary of a run that ended before writing `summary.json`.
pub const RUN_FILE: &str = "run.json";
/// The run's summary, written when it ends (also when stopped).
pub const SUMMARY_FILE: &str = "summary.json";
/// A finished point's figures, in its directory under `points/`, written last.
pub const POINT_FILE: &str = "point.json";

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScenarioInfo {
    pub name: String,
    pub description: String,
    /// Where it came from: a path, or `builtin:NAME`.
    pub origin: String,
    /// The file's text, as run.
    pub text: String,
    pub seed: u64,
    /// The sweep parameters and their values, in file order.
    pub sweep: Vec<(String, Vec<String>)>,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Host {
    pub hostname: String,
    pub kernel: String,
    pub cpus: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// One sweep point's run.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PointResult {
    pub index: usize,
    /// `pNNN`: its directory under `points/`.
    pub id: String,
    /// Sweep parameter → value, as written in the scenario.
    pub params: BTreeMap<String, String>,
    pub seed: u64,
    /// Virtual time the run covered.
    pub sim_us: Micros,
    /// Wall-clock time it took (how fast the simulator was, not a result).
    pub wall_us: Micros,
    /// Events the simulator handled.
    pub events: u64,
    pub flows: Vec<FlowReport>,
    pub links: Vec<LinkResult>,
    /// Closed forms of the UDP flows that cross a netem limit (see [`crate::closed_form`]).
    #[serde(default)]
    pub closed_form: Vec<ClosedForm>,
    /// What each TCP flow should carry (see [`crate::closed_form::TcpExpected`]).
    #[serde(default)]
    pub tcp_expected: Vec<TcpExpected>,
    /// Emu mode only: the emulator's own error and how busy the host was.
    #[serde(default)]
    pub emu: Option<EmuFacts>,
    /// Emu mode only: the programs the command flows ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandRun>,
    /// Each video receiver's frames over time, thinned for plots (PSNR, delay, cumulative
    /// jitter); every frame is in `points/pNNN/FLOW.frames.csv`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frame_series: Vec<crate::video::FrameSeries>,
    /// Each video flow as sent, thinned for plots: coded frame sizes over time and, for a
    /// ladder's video, the rung of each GOP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent_series: Vec<crate::video::SentSeries>,
    /// Files for the point's directory, `(name, contents)` (video flows' frames and traces);
    /// written with it, not kept in the summary.
    #[serde(skip)]
    pub files: Vec<(String, Vec<u8>)>,
    /// What went wrong in the point that did not stop it (a video source that ended early).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Of `wall_us`, the time spent on the video: making it (rendering, encoding) and
    /// judging it (decoding, comparing pictures); the rest is the network and the sessions.
    #[serde(default)]
    pub video_us: Micros,
    /// `video_us` in its parts (sim mode, video flows only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_work: Option<VideoWork>,
    /// How the flows shared the network, when all of them (two or more) shared a
    /// bottleneck: Jain's index, the largest ratio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<crate::fairness::Fairness>,
    /// The flows that shared each bottleneck, group by group (a link crossed by two flows or
    /// more that dropped from its queue or was busy), each with its own index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bottlenecks: Vec<crate::fairness::SharedBottleneck>,
}

impl LinkResult {
    /// Link `i` of the scenario's topology, with counters `st` (the simulator's, or the
    /// emulator's).
    pub fn of(s: &Scenario, net: &Topology, i: usize, st: &LinkStats) -> LinkResult {
        let l = LinkId(i as u32);
        let (a, b) = net.link_ends(l);
        // Links are added two by two, in declaration order: even ids go a → b.
        let decl = &s.links[l.0 as usize / 2];
        let profile = if l.0 % 2 == 0 { &decl.ab.0 } else { &decl.ba.0 };
        LinkResult {
            from: net.node_name(a).to_string(),
            to: net.node_name(b).to_string(),
            profile: profile.clone(),
            sent: st.sent,
            delivered: st.delivered,
            lost: st.lost,
            dropped_queue: st.dropped_queue,
            bytes_delivered: st.bytes_delivered,
            max_queue_delay_us: Micros::from(st.max_queue_delay),
        }
    }
}

/// A point's directory under `points/`: `pNNN`.
pub fn point_id(index: usize) -> String {
    format!("p{index:03}")
}

/// Where a point's video time went, wall-clock seconds (µs in JSON): how fast the run was,
/// not a result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VideoWork {
    /// Encoding a ladder's renditions, or reading them from the cache.
    pub ladder_us: Micros,
    /// Making the packets as the run went (rendering and encoding a live source, the
    /// ladder's payloading).
    pub sending_us: Micros,
    /// Decoding what each viewer got and comparing its pictures with the source's.
    pub judging_us: Micros,
}

impl PointResult {
    /// The figures of point `point` run with `seed`: its flows and links over `sim_ns` of
    /// (virtual or real) time and `events` handled, how the flows shared the network; what
    /// only one mode has (closed forms, timing, the emulator's facts, videos) is added by it.
    pub fn new(
        point: &metronome_config::scenario::Point,
        seed: u64,
        (sim_ns, events): (u64, u64),
        (flows, links): (Vec<FlowReport>, Vec<LinkResult>),
        topology: &metronome_link::topology::Topology,
    ) -> PointResult {
        let loads: Vec<_> = links.iter().map(LinkResult::load).collect();
        let bottlenecks =
            crate::fairness::Fairness::per_bottleneck(&flows, topology, &loads, sim_ns);
        let competing = flows.iter().filter(|f| !f.receivers.is_empty()).count();
        PointResult {
            index: point.index,
            id: point_id(point.index),
            params: point.params.iter().cloned().collect(),
            seed,
            sim_us: Micros::from_nanos_u64(sim_ns),
            wall_us: Micros::ZERO,
            events,
            fairness: bottlenecks
                .iter()
                .find(|g| g.fairness.flows.len() == competing)
                .map(|g| g.fairness.clone()),
            bottlenecks,
            flows,
            links,
            closed_form: Vec::new(),
            tcp_expected: Vec::new(),
            emu: None,
            commands: Vec::new(),
            frame_series: Vec::new(),
            sent_series: Vec::new(),
            files: Vec::new(),
            warnings: Vec::new(),
            video_us: Micros::ZERO,
            video_work: None,
        }
    }

    /// Takes the video flows' series, warnings and files.
    pub fn add_videos(&mut self, videos: Vec<crate::video::FlowVideo>) {
        for v in videos {
            self.frame_series.extend(v.series);
            self.sent_series.extend(v.sent);
            self.warnings.extend(v.warnings);
            self.files.extend(v.files);
        }
    }
}

/// A program a command flow ran (emu mode), and how it ended.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommandRun {
    pub flow: String,
    /// The host (scenario node) it ran in.
    pub host: String,
    /// The program and its arguments, with `@{…}` replaced.
    pub argv: Vec<String>,
    /// Its exit code (`None`: ended by a signal).
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Whether the lab stopped it (SIGINT, then SIGKILL 2 s later) at the end of its duration.
    pub stopped: bool,
    /// From its start to its end.
    pub ran_us: Micros,
    /// Its standard output and error, relative to the results directory.
    pub stdout: String,
    pub stderr: String,
}

/// How well the emulator kept time in an emu-mode point.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EmuFacts {
    /// How late datagrams were handed out of the last link against its model.
    pub lateness_p50_us: Micros,
    pub lateness_p99_us: Micros,
    pub lateness_max_us: Micros,
    /// Datagrams the emulator's sockets dropped for lack of buffer.
    pub socket_drops: u64,
    /// How busy the host was (steal, other processes): figures from another hour do not
    /// compare.
    pub host: String,
    /// How the emulator's thread was scheduled (real-time, or why not).
    #[serde(default)]
    pub thread: String,
}

/// What one direction of a link did.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkResult {
    pub from: String,
    pub to: String,
    /// The link profile's name.
    pub profile: String,
    pub sent: u64,
    pub delivered: u64,
    /// Lost to the loss model.
    pub lost: u64,
    /// Dropped because the queue (or netem's limit) was full.
    pub dropped_queue: u64,
    pub bytes_delivered: u64,
    /// Longest wait before serialization.
    pub max_queue_delay_us: Micros,
}

impl LinkResult {
    /// What the link carried and dropped, for [`crate::fairness`].
    pub fn load(&self) -> crate::fairness::LinkLoad {
        crate::fairness::LinkLoad {
            name: format!("{}→{}", self.from, self.to),
            dropped_queue: self.dropped_queue,
            bytes_delivered: self.bytes_delivered,
        }
    }
}

impl Summary {
    /// `DIR/summary.json`, atomically.
    pub fn write(&self, dir: &Path) -> Result<(), String> {
        let path = dir.join(SUMMARY_FILE);
        let json = serde_json::to_vec_pretty(self)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        write_atomically(&path, &json)
    }

    /// A results directory's summary: `summary.json`, or, when the run ended before it
    /// could write one (killed), `run.json` with the points that finished.
    pub fn read(dir: &Path) -> Result<Summary, String> {
        let path = dir.join(SUMMARY_FILE);
        if !path.exists() && dir.join(RUN_FILE).exists() {
            let mut s = Summary::read_header(dir)?;
            s.points = Summary::read_points(dir)?;
            return Ok(s);
        }
        read_summary(&path)
    }

    /// `run.json`: the run's settings, no points.
    pub fn read_header(dir: &Path) -> Result<Summary, String> {
        read_summary(&dir.join(RUN_FILE))
    }

    /// Every finished point's `point.json` under `DIR/points/`, in index order; a point's
    /// directory without one (the point was running when the run ended) is left out.
    pub fn read_points(dir: &Path) -> Result<Vec<PointResult>, String> {
        let points = dir.join("points");
        let entries = std::fs::read_dir(&points)
            .map_err(|e| format!("cannot read {}: {e}", points.display()))?;
        let mut out = Vec::new();
        for e in entries {
            let e = e.map_err(|e| format!("cannot read {}: {e}", points.display()))?;
            let path = e.path().join(POINT_FILE);
            if path.exists() {
                out.push(read_json::<PointResult>(
                    &path,
                    "remove its directory to run it again",
                )?);
            }
        }
        out.sort_by_key(|p| p.index);
        Ok(out)
    }

    /// One summary from the shards of one sweep (same scenario text), points in order.
    pub fn merge(parts: Vec<Summary>) -> Result<Summary, String> {
        let mut iter = parts.into_iter();
        let mut all = iter.next().ok_or("no results directory given")?;
        for s in iter {
            if s.scenario.text != all.scenario.text {
                return Err(format!(
                    "cannot merge runs of different scenarios ('{}' and '{}', or the same name with other settings)",
                    all.scenario.name, s.scenario.name
                ));
            }
            for p in s.points {
                if !all.points.iter().any(|q| q.index == p.index) {
                    all.points.push(p);
                }
            }
            all.failed.extend(s.failed);
        }
        all.points.sort_by_key(|p| p.index);
        let points = &all.points;
        all.failed
            .retain(|f| !points.iter().any(|p| p.index == f.index));
        all.failed.sort_by_key(|f| f.index);
        all.failed.dedup_by_key(|f| f.index);
        all.shard = Shard { index: 0, count: 1 };
        // What is written now is this build's schema, whichever the parts were.
        all.schema = SCHEMA.into();
        Ok(all)
    }
}

/// Makes `dir` a new results directory: created if absent, refused if it holds anything
/// (`what_else`: the rest of the refusal, after "choose a new directory with --out").
pub fn empty_dir(dir: &Path, what_else: &str) -> Result<(), String> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .next()
            .is_none();
        if !empty {
            return Err(format!(
                "{} is not empty; choose a new directory with --out{what_else}",
                dir.display()
            ));
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// Writes `bytes` to `path` so that a reader (or a run killed while writing) sees the old
/// file or the whole new one, never a part: a temporary file beside it, renamed over it.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    write_atomically_mode(path, bytes, 0o666)
}

/// [`write_atomically`], the file readable and writable by its owner alone (mode 0600): for
/// what carries a secret, such as an SDP with an SRTP key.
pub fn write_atomically_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    write_atomically_mode(path, bytes, 0o600)
}

fn write_atomically_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy());
    let tmp = path.with_file_name(format!(".{name}.partial"));
    // A partial file left by a killed run may have another mode: start afresh.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!(
                "cannot write {}: the leftover {} cannot be removed ({e}): remove it",
                path.display(),
                tmp.display()
            ))
        }
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A JSON file of the results directory.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path, hint: &str) -> Result<T, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}; {hint}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "{} is not what a lab run writes: {e}; {hint}",
            path.display()
        )
    })
}

/// `summary.json` or `run.json`, its schema checked (a point's file carries none of its own).
fn read_summary(path: &Path) -> Result<Summary, String> {
    let s: Summary = read_json(path, "is it a results directory?")?;
    if s.schema != SCHEMA && s.schema != SCHEMA_2 {
        return Err(format!(
            "{} has schema '{}'; this build reads '{SCHEMA}' and '{SCHEMA_2}'",
            path.display(),
            s.schema
        ));
    }
    Ok(s)
}

/// `flows.csv`: one row per flow and receiver.
pub const FLOWS_HEADER: &str = "flow,kind,src,receiver,sent_packets,packets,bytes,lost,loss_percent,duplicates,reordered,throughput_bps,jitter_ns,mean_delay_ns,min_delay_ns,max_delay_ns,p50_delay_ns,p99_delay_ns,frames,frames_lost,frames_lost_percent,frame_mean_delay_ns,frame_p99_delay_ns,frame_max_cumulative_jitter_ns,frames_lost_i,frames_lost_p,frames_missed_deadline,psnr_y_db,psnr_yuv_db,ssim,mos,miv_max_percent";

/// `intervals.csv`: one row per flow, receiver and interval.
pub const INTERVALS_HEADER: &str =
    "flow,receiver,start_ns,packets,bytes,throughput_bps,mean_delay_ns,jitter_ns";

pub fn flows_csv(p: &PointResult) -> String {
    let mut s = String::from(FLOWS_HEADER);
    s.push('\n');
    for f in &p.flows {
        for r in &f.receivers {
            let frames = r.frames.map_or_else(
                || ",,,,,,,,,,,,,".to_string(),
                |f| {
                    let pictures = f.pictures.map_or_else(
                        || ",,,,".to_string(),
                        |q| {
                            format!(
                                "{:.3},{:.3},{:.6},{:.3},{:.1}",
                                q.psnr_y_db, q.psnr_yuv_db, q.ssim, q.mos, q.miv_max_percent
                            )
                        },
                    );
                    format!(
                        "{},{},{:.3},{},{},{},{},{},{},{pictures}",
                        f.frames,
                        f.lost,
                        f.lost_percent,
                        f.mean_delay_us.as_nanos(),
                        f.p99_delay_us.as_nanos(),
                        f.max_cumulative_jitter_us.as_nanos(),
                        f.lost_i,
                        f.lost_p,
                        f.missed_deadline
                    )
                },
            );
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{:.3},{},{},{:.0},{},{},{},{},{},{},{frames}",
                f.name,
                f.kind,
                f.src,
                r.node,
                f.sent_packets,
                r.packets,
                r.bytes,
                r.lost,
                r.loss_percent,
                r.duplicates,
                r.reordered,
                r.throughput_bps,
                r.jitter_us.as_nanos(),
                r.mean_delay_us.as_nanos(),
                r.min_delay_us.as_nanos(),
                r.max_delay_us.as_nanos(),
                r.p50_delay_us.as_nanos(),
                r.p99_delay_us.as_nanos()
            );
        }
    }
    s
}

/// `intervals.csv`; `interval_ns` is the bin width (for the rate column).
pub fn intervals_csv(p: &PointResult, interval_ns: u64) -> String {
    let mut s = String::from(INTERVALS_HEADER);
    s.push('\n');
    for f in &p.flows {
        for r in &f.receivers {
            for i in &r.intervals {
                let bps = if interval_ns == 0 {
                    0.0
                } else {
                    i.bytes as f64 * 8e9 / interval_ns as f64
                };
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{bps:.0},{},{}",
                    f.name,
                    r.node,
                    i.start_us.as_nanos(),
                    i.packets,
                    i.bytes,
                    i.mean_delay_us.as_nanos(),
                    i.jitter_us.as_nanos()
                );
            }
        }
    }
    s
}

/// This machine, for the summary.
pub fn host() -> Host {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    };
    Host {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// The commit this binary was built from (see `build.rs`).
pub fn commit() -> String {
    env!("METRONOME_GIT_COMMIT").to_string()
}

/// A file name from a flow's or node's name (anything but letters, digits, `.`, `-`, `_`
/// becomes `_`).
pub fn file_stem(flow: &str) -> String {
    flow.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}
