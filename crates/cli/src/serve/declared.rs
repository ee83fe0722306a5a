//! The streams a config file or `--stream` declares: started at the start (those that push
//! to destinations) and again by a reload (`reload.rs`), each start or refusal said on stderr.

use super::ServeArgs;
use metronome_apps::streams::{StreamServer, StreamSpec, StreamStatus};
use std::collections::BTreeMap;

/// The declared streams that run: by name, the spec each was started with and its id in the
/// server (a stream of that name with another id was replaced through the control API).
pub(super) type Running = BTreeMap<String, (StreamSpec, u64)>;

/// How many declared streams started, and how many could not; those that run.
pub(super) struct Pushed {
    pub started: usize,
    pub failed: usize,
    pub running: Running,
}

/// Starts the declared streams that push to destinations (with RTSP, a stream without
/// destinations is only played on request), writing their SDP files first if asked.
pub(super) fn push_streams(
    server: &StreamServer,
    specs: Vec<StreamSpec>,
    a: &ServeArgs,
    rtsp: bool,
) -> Result<Pushed, Box<dyn std::error::Error>> {
    let mut pushed = Pushed {
        started: 0,
        failed: 0,
        running: Running::new(),
    };
    for spec in specs {
        if rtsp && spec.destination.is_empty() {
            continue;
        }
        if let Some(dir) = &a.sdp_dir {
            for path in crate::sdp::write_files(&spec, dir)? {
                eprintln!("metronome: wrote {}", path.display());
            }
        }
        match start(server, spec.clone()) {
            Some(id) => {
                pushed.started += 1;
                pushed.running.insert(spec.name.clone(), (spec, id));
            }
            None => pushed.failed += 1,
        }
    }
    Ok(pushed)
}

/// Admits and starts one stream; says which, or why not. Its id in the server, if it started.
pub(super) fn start(server: &StreamServer, spec: StreamSpec) -> Option<u64> {
    let name = spec.name.clone();
    match server.add(spec) {
        Ok(s) => {
            eprintln!("metronome: {}", admitted_line(&s));
            Some(s.id)
        }
        Err(e) => {
            eprintln!("metronome: '{name}' not started: {}", e.message());
            None
        }
    }
}

fn admitted_line(s: &StreamStatus) -> String {
    format!(
        "admitted '{}' on core {}: {} → {} (period {:.2} ms, deadline {:.2} ms, cost {:.1} µs, {:.2}% of the core)",
        s.name,
        s.core,
        s.source,
        s.destinations.join(", "),
        s.task.period_us.as_millis_f64(),
        s.task.deadline_us.as_millis_f64(),
        s.task.cost_us.as_micros_f64(),
        s.task.utilisation_percent,
    )
}
