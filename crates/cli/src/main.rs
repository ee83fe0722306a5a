//! `metronome`: the command-line front end. Thin: it parses arguments, builds sources and
//! configurations, and hands them to the applications (`metronome-apps`) and the lab.

mod args;
mod bench;
mod bench_emu;
mod bench_ladder;
mod bench_ns3;
mod bench_quality;
mod bench_raw;
mod bench_sim;
mod bench_srt;
mod bench_streams;
mod bench_viewers;
mod coded;
mod demo;
mod emu;
mod examples;
mod fifo;
mod frames;
mod lab;
mod lab_scenario;
mod lab_slurm;
mod passwd;
mod progress;
mod quality;
mod raw_args;
mod recv;
mod recv_quality;
mod report;
mod schema;
mod sdp;
mod serve;

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "metronome",
    version,
    about = "Real-time media streaming: a deadline-paced RTP sender and a measuring receiver"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// More log lines: -v debug, -vv trace (RUST_LOG, if set, decides instead)
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Fewer lines: log lines only for warnings and errors (RUST_LOG, if set, decides instead),
    /// and no progress bar or table where a command has one (lab run)
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Stream MPEG-TS over RTP: one source to one or more destinations, or many streams under
    /// EDF/DM scheduling with admission control (--config, --stream, --sched, --control), and
    /// over RTSP (--rtsp)
    #[command(after_help = examples::SERVE)]
    Serve(Box<serve::ServeArgs>),
    /// Receive an RTP stream, measure it, and answer with receiver reports
    #[command(after_help = examples::RECV)]
    Recv(recv::RecvArgs),
    /// The main job on its built-in default: a paced sender and two receivers on loopback
    #[command(after_help = examples::DEMO)]
    Demo(demo::DemoArgs),
    /// Print the SDP of a declared stream's RTP session (for ffplay, VLC, GStreamer, recv)
    #[command(after_help = examples::SDP)]
    Sdp(sdp::SdpArgs),
    /// The lab: scenario files run in the simulator, results directories, reports with plots
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// The emulator: the lab's link model between real sockets, in real time
    #[command(subcommand)]
    Emu(emu::EmuCommand),
    /// What viewers saw: PSNR, SSIM and MOS of a received video against its reference, frame
    /// by frame (as FFmpeg's psnr and ssim filters and Evalvid compute them)
    #[command(after_help = examples::QUALITY)]
    Quality(quality::QualityArgs),
    /// What viewers saw from traces, after the fact (Evalvid's reconstruction): frames lost by
    /// type, frame delay, cumulative jitter, play-out deadline; exports to Evalvid's st/sd/rd
    #[command(after_help = examples::FRAMES)]
    Frames(frames::FramesArgs),
    /// Print a user's [[rtsp_auth.user]] table for the serve config: the password (read without
    /// echo, or one line from stdin) hashed for RTSP Digest, never stored
    #[command(after_help = examples::PASSWD)]
    Passwd(passwd::PasswdArgs),
    /// Benchmarks that print JSON and a human summary
    #[command(subcommand, after_help = examples::BENCH)]
    Bench(bench::BenchCommand),
    /// Print the JSON Schema (draft 2020-12) of a document `--json` prints, e.g.
    /// `metronome schema recv`; without a name, the documents that have one
    #[command(after_help = examples::SCHEMA)]
    Schema {
        /// The document (`recv`)
        name: Option<String>,
    },
    /// Print a shell's completion script (bash, zsh, fish, elvish, powershell), e.g.
    /// `metronome completions bash > /etc/bash_completion.d/metronome`
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write man pages for metronome and every subcommand into a directory (metronome.1,
    /// metronome-serve.1, ...), e.g. `metronome man /usr/local/share/man/man1`
    Man {
        #[arg(default_value = ".")]
        dir: std::path::PathBuf,
    },
}

/// Writes `bytes` to stdout. A reader that has gone (`| head`) is no error: what it wanted it
/// has, as for any Unix filter.
fn write_stdout(bytes: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("cannot write to stdout: {e}").into())
        }
        _ => Ok(()),
    }
}

fn main() -> ExitCode {
    report::mark_start();
    let cli = Cli::parse();
    init_logging(cli.verbose, cli.quiet);
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        // Ctrl-C (SIGINT), SIGTERM (`timeout`, systemd, `docker stop`) and SIGHUP (ctrlc's
        // `termination` feature) all end the run the same way: the summary is still printed.
        // A repeated signal only sets the flag again. If a handler cannot be installed, the
        // signals end the process the default way.
        let nohup = sighup_ignored();
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst));
        if nohup {
            // Started under `nohup`: a hangup keeps being ignored, not turned into a stop.
            // SAFETY: setting a signal's disposition to SIG_IGN has no memory-safety
            // preconditions.
            unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
        }
    }
    let result = match cli.command {
        Command::Serve(a) => serve::run(*a, stop),
        Command::Recv(a) => recv::run(a, stop),
        Command::Demo(a) => demo::run(a, stop),
        Command::Sdp(a) => sdp::run(a),
        Command::Lab(l) => lab::run(l, stop, cli.quiet).map_err(Into::into),
        Command::Emu(e) => emu::run(e, stop),
        Command::Quality(q) => quality::run(q).map_err(Into::into),
        Command::Frames(f) => frames::run(f).map_err(Into::into),
        Command::Passwd(p) => passwd::run(p),
        Command::Bench(b) => bench::run(b, stop),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            // Made whole first: clap_complete panics when its writer fails, as stdout does
            // when the reader has gone (`| head`).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, "metronome", &mut script);
            write_stdout(&script)
        }
        Command::Man { dir } => write_man_pages(&dir),
        Command::Schema { name } => schema::run(name.as_deref()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("metronome: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Log lines (what clients did, what changed) go to stderr, as `LEVEL target: message`, from
/// `info` by default, `warn` with -q, `debug`/`trace` with -v/-vv; `RUST_LOG` (e.g.
/// `metronome::rtsp=debug`) overrides. The summaries and live lines are not log lines.
fn init_logging(verbose: u8, quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let level = match (quiet, verbose) {
        (true, _) => "warn",
        (false, 0) => "info",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .without_time()
        .try_init();
}

/// Man pages of the whole command tree, from the same definition the parser uses.
fn write_man_pages(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "cannot create {}: {e}; name a writable directory",
            dir.display()
        )
    })?;
    let cmd = <Cli as clap::CommandFactory>::command();
    clap_mangen::generate_to(cmd, dir)
        .map_err(|e| format!("cannot write man pages into {}: {e}", dir.display()))?;
    eprintln!("metronome: man pages written to {}", dir.display());
    Ok(())
}

/// Whether SIGHUP is ignored, as `nohup` leaves it for the program it starts.
fn sighup_ignored() -> bool {
    // SAFETY: a zeroed `sigaction` is a valid value to be overwritten, and with a null new
    // action sigaction(2) only reads the current one into it.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGHUP, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_definition_is_consistent() {
        <super::Cli as clap::CommandFactory>::command().debug_assert();
    }
}
