//! The fuzz runner: builds the AFL++ harness with `cargo afl`, runs each target for a given
//! time from its checked-in corpus, and reports what AFL++ found, as JSON and a table.
//!
//! ```text
//! cargo run -p metronome-fuzz --bin fuzz -- --seconds 60            # every target, a minute each
//! cargo run -p metronome-fuzz --bin fuzz -- --seconds 600 rtsp sdp  # two targets, longer
//! cargo run -p metronome-fuzz --bin fuzz -- --replay rtsp FILE      # one input, without AFL
//! ```
//!
//! It needs `cargo-afl` (`cargo install cargo-afl`; `scripts/test.sh` installs it). Crashes are
//! copied to `target/afl/findings/TARGET/`; the run fails if there are any. A finding, once
//! fixed, goes to `crates/fuzz/regressions/TARGET/`, which the tests replay.

use clap::Parser;
use metronome_time::Micros;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

/// JSON schema of the runner's report. 3: every duration one type, CPU time in µs
/// (`cpu_us`, was `cpu_hours`).
const SCHEMA: u32 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "fuzz",
    about = "Run Metronome's fuzz targets under AFL++ and report"
)]
struct Args {
    /// How long to fuzz each target, in seconds
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Targets fuzzed at once (each takes a CPU)
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Print the report as JSON (fields on `Report` and `TargetReport` in src/bin/fuzz.rs)
    /// instead of a table
    #[arg(long)]
    json: bool,
    /// Build the AFL++ harness and stop, fuzzing nothing (the test suite builds it beside the
    /// tests, at low priority, and fuzzes after them)
    #[arg(long)]
    build_only: bool,
    /// Run one input through TARGET without AFL (to see a finding's panic): TARGET FILE
    #[arg(long, num_args = 2, value_names = ["TARGET", "FILE"])]
    replay: Option<Vec<String>>,
    /// Targets to run (all if none): rtp, rtcp, rtsp, rtsp-transport, rtsp-response, sdp,
    /// mpegts, rfc4175, coded-depay, http, scenario, config
    targets: Vec<String>,
}

/// What AFL++ says about one target's run.
#[derive(Serialize, Debug, Default)]
struct TargetReport {
    target: String,
    /// Fuzzing time (AFL++'s `run_time`), as Metronome's other documents give durations.
    run_time_us: Micros,
    /// CPU time spent: user and system time of AFL++ and of every process under it (the fork
    /// server, the targets), as /proc showed them every 200 ms; not the wall-clock time.
    cpu_us: Micros,
    execs: u64,
    execs_per_s: f64,
    /// Inputs in the queue at the end (seeds plus what AFL++ kept for new coverage).
    corpus: u64,
    /// Share of the coverage map's edges hit, % (AFL++'s `bitmap_cvg`).
    coverage_percent: f64,
    /// Edges found (AFL++'s `edges_found`).
    edges: u64,
    /// Unique crashes and hangs AFL++ saved.
    crashes: u64,
    hangs: u64,
    /// Where the crashing inputs were copied, if any.
    findings: Option<String>,
}

/// The runner's JSON document (`--json`). Durations in µs, CPU time too (the summary on a
/// terminal gives CPU-hours, as fuzzing is reckoned).
#[derive(Serialize)]
struct Report {
    /// [`SCHEMA`].
    schema: u32,
    /// The time asked for each target.
    time_per_target_us: Micros,
    targets: Vec<TargetReport>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(r) = &args.replay {
        return replay(&r[0], Path::new(&r[1]));
    }
    let known: Vec<&str> = metronome_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
    let targets: Vec<String> = if args.targets.is_empty() {
        known.iter().map(|s| s.to_string()).collect()
    } else {
        args.targets.clone()
    };
    if let Some(t) = targets.iter().find(|t| !known.contains(&t.as_str())) {
        eprintln!("fuzz: no target {t:?}; name one of {}", known.join(", "));
        return ExitCode::from(2);
    }
    let root = workspace_root();
    let afl_dir = root.join("target/afl");
    if let Err(e) = build(&root, &afl_dir) {
        eprintln!("fuzz: {e}");
        return ExitCode::from(2);
    }
    if args.build_only {
        return ExitCode::SUCCESS;
    }
    let mut reports = Vec::new();
    for batch in targets.chunks(args.jobs.max(1)) {
        let running: Vec<_> = batch
            .iter()
            .map(|t| (t.clone(), start(&root, &afl_dir, t, args.seconds)))
            .collect();
        for (t, child) in running {
            let report = match child.and_then(|c| finish(c, &afl_dir, &t, args.seconds)) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("fuzz: {t}: {e}");
                    return ExitCode::from(2);
                }
            };
            reports.push(report);
        }
    }
    let found = reports.iter().any(|r| r.crashes > 0);
    let report = Report {
        schema: SCHEMA,
        time_per_target_us: Micros::from(Duration::from_secs(args.seconds)),
        targets: reports,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print_table(&report);
    }
    if found {
        eprintln!(
            "fuzz: crashes found; see target/afl/findings/, and replay one with \
             `cargo run -p metronome-fuzz --bin fuzz -- --replay TARGET FILE`"
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `cargo afl build` of the harness, into its own target directory, in the workspace's `fuzz`
/// profile (Cargo.toml says why).
fn build(root: &Path, afl_dir: &Path) -> Result<(), String> {
    let status = Command::new("cargo")
        .current_dir(root)
        .env("CARGO_TARGET_DIR", afl_dir)
        .args(["afl", "build", "--profile", "fuzz", "-p", "metronome-fuzz"])
        .args(["--features", "afl", "--bin", "fuzz-target"])
        .status()
        .map_err(|e| {
            format!("cannot run cargo afl: {e}; install it with `cargo install cargo-afl`")
        })?;
    if !status.success() {
        return Err(format!(
            "cargo afl build failed ({status}); is cargo-afl installed (`cargo install cargo-afl`)?"
        ));
    }
    Ok(())
}

/// Starts AFL++ on `target` for `seconds`, from a fresh output directory.
fn start(
    root: &Path,
    afl_dir: &Path,
    target: &str,
    seconds: u64,
) -> Result<std::process::Child, String> {
    let out = afl_dir.join("out").join(target);
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let corpus = root.join("crates/fuzz/corpus").join(target);
    let log = std::fs::File::create(out.with_extension("log"))
        .map_err(|e| format!("cannot create the log: {e}"))?;
    Command::new("cargo")
        .current_dir(root)
        .env("AFL_NO_UI", "1")
        .env("AFL_SKIP_CPUFREQ", "1")
        .env("AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES", "1")
        .env("AFL_NO_AFFINITY", "1")
        .env("AFL_SKIP_CRASHES", "1")
        .args(["afl", "fuzz", "-V", &seconds.to_string(), "-i"])
        .arg(&corpus)
        .arg("-o")
        .arg(&out)
        .arg("--")
        .arg(afl_dir.join("fuzz/fuzz-target"))
        .arg(target)
        .stdout(Stdio::from(log.try_clone().map_err(|e| e.to_string())?))
        .stderr(Stdio::from(log))
        .spawn()
        .map_err(|e| format!("cannot start cargo afl fuzz: {e}"))
}

/// The CPU time of a process tree, from /proc: each process's user and system time as last
/// seen (a process that ends between two samples loses what it used since the last).
#[derive(Default)]
struct TreeCpu {
    ticks: std::collections::HashMap<u32, u64>,
}

impl TreeCpu {
    /// Notes the CPU time of `root` and every process under it now.
    fn sample(&mut self, root: u32) {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        // (pid, parent, user + system ticks) of every process.
        let procs: Vec<(u32, u32, u64)> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                // After the command's closing parenthesis: state, ppid, … utime (14th field
                // of the line), stime (15th).
                let rest = &stat[stat.rfind(')')? + 2..];
                let f: Vec<&str> = rest.split(' ').collect();
                let ppid = f.get(1)?.parse().ok()?;
                let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
                Some((pid, ppid, ticks))
            })
            .collect();
        let mut tree = vec![root];
        let mut k = 0;
        while k < tree.len() {
            let parent = tree[k];
            tree.extend(procs.iter().filter(|p| p.1 == parent).map(|p| p.0));
            k += 1;
        }
        for &(pid, _, ticks) in procs.iter().filter(|p| tree.contains(&p.0)) {
            let seen = self.ticks.entry(pid).or_default();
            *seen = (*seen).max(ticks);
        }
    }

    fn seconds(&self) -> f64 {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        self.ticks.values().sum::<u64>() as f64 / hz
    }
}

/// Waits for AFL++ (at most a minute past its time), then reads its statistics and copies
/// its crashes.
fn finish(
    mut child: std::process::Child,
    afl_dir: &Path,
    target: &str,
    seconds: u64,
) -> Result<TargetReport, String> {
    let limit = Duration::from_secs(seconds + 60);
    let mut waited = Duration::ZERO;
    let mut cpu = TreeCpu::default();
    let status = loop {
        cpu.sample(child.id());
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if waited >= limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("AFL++ did not stop within {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(200));
        waited += Duration::from_millis(200);
    };
    let out = afl_dir.join("out").join(target);
    let stats_path = out.join("default/fuzzer_stats");
    let stats = std::fs::read_to_string(&stats_path).map_err(|e| {
        let log = std::fs::read_to_string(out.with_extension("log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        format!(
            "AFL++ ended ({status}) without statistics ({e}):\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    })?;
    let field = |name: &str| -> f64 {
        stats
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().trim_end_matches('%').parse().ok())?
            })
            .unwrap_or(0.0)
    };
    let run_time_s = field("run_time");
    let mut report = TargetReport {
        target: target.to_string(),
        run_time_us: Micros::from_secs_f64(run_time_s),
        cpu_us: Micros::from_secs_f64(cpu.seconds()),
        execs: field("execs_done") as u64,
        execs_per_s: field("execs_done") / run_time_s.max(1.0),
        corpus: field("corpus_count") as u64,
        coverage_percent: field("bitmap_cvg"),
        edges: field("edges_found") as u64,
        crashes: field("saved_crashes") as u64,
        hangs: field("saved_hangs") as u64,
        findings: None,
    };
    if report.crashes > 0 {
        let dest = afl_dir.join("findings").join(target);
        let _ = std::fs::create_dir_all(&dest);
        if let Ok(entries) = std::fs::read_dir(out.join("default/crashes")) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with("id:") {
                    let _ = std::fs::copy(e.path(), dest.join(e.file_name()));
                }
            }
        }
        report.findings = Some(dest.display().to_string());
    }
    Ok(report)
}

fn print_table(r: &Report) {
    println!(
        "{:<15} {:>8} {:>10} {:>9} {:>7} {:>7} {:>8} {:>6}",
        "target", "time s", "execs", "execs/s", "corpus", "edges", "crashes", "hangs"
    );
    for t in &r.targets {
        println!(
            "{:<15} {:>8.0} {:>10} {:>9.0} {:>7} {:>7} {:>8} {:>6}",
            t.target,
            t.run_time_us.as_secs_f64(),
            t.execs,
            t.execs_per_s,
            t.corpus,
            t.edges,
            t.crashes,
            t.hangs
        );
    }
    let hours = r
        .targets
        .iter()
        .map(|t| t.cpu_us)
        .sum::<Micros>()
        .as_secs_f64()
        / 3600.0;
    println!("{:.3} CPU-hours in all", hours);
}

/// Runs `file` through `target` in this process, so that a finding's panic shows.
fn replay(target: &str, file: &Path) -> ExitCode {
    let Some(t) = metronome_fuzz::target(target) else {
        eprintln!("fuzz: no target {target:?}");
        return ExitCode::from(2);
    };
    let data = match std::fs::read(file) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("fuzz: cannot read {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    t(&data);
    println!("{target}: {} ({} bytes) passes", file.display(), data.len());
    ExitCode::SUCCESS
}
