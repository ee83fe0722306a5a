//! Flows that are real programs, run in the scenario's hosts (network namespaces): TCP flows
//! by iperf3, and command flows (`kind = "command"`: iperf3, ffmpeg, gst-launch-1.0, cvlc,
//! `metronome` itself, or anything else). Each runs from its flow's start until it exits or
//! its duration has passed; then it is interrupted (SIGINT, which lets ffmpeg and iperf3 end
//! their output properly) and killed 2 s later if it has not ended. Its standard output and
//! error are kept in the point's directory, `FLOW.stdout` and `FLOW.stderr`.

use super::{flow_group, flow_port, host_index};
use crate::results::CommandRun;
use metronome_config::scenario::{FlowDecl, FlowKind, Scenario, TcpCc};
use metronome_emu::netns::{Hosts, TcpWindow};
use metronome_link::meter::{IntervalFigures, Meter};
use metronome_link::report::{FlowReport, ReceiverReport};
use metronome_rt::clock::Clock;
use metronome_time::Micros;
use metronome_time::Timestamp;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long an interrupted program has to end before it is killed.
const GRACE: Duration = Duration::from_secs(2);

/// Where a point's programs run and write.
#[derive(Clone, Copy)]
pub(super) struct Stage<'a> {
    pub hosts: &'a Hosts,
    /// The hosts' scenario names, in the hosts' order.
    pub names: &'a [String],
    pub s: &'a Scenario,
    /// The point's directory (absolute or relative to the working directory), and the same
    /// relative to the results directory.
    pub dir: &'a Path,
    pub rel_dir: &'a Path,
    pub clock: Clock,
    /// The run's time zero.
    pub origin: Timestamp,
    /// The run's stop flag (Ctrl-C, SIGTERM).
    pub stop: &'a Arc<AtomicBool>,
}

/// A child process killed when dropped (an error or a panic leaves none behind).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How a supervised program ended.
struct Ended {
    status: Option<ExitStatus>,
    stopped: bool,
    ran: Duration,
}

/// Waits for `child` until it exits, `deadline` passes or `stop` is set; then interrupts it,
/// and kills it after [`GRACE`].
fn supervise(child: &mut Running, st: &Stage, deadline: Timestamp) -> Ended {
    let started = st.clock.now();
    let ended = |status, stopped| Ended {
        status,
        stopped,
        ran: st.clock.now().saturating_since(started),
    };
    loop {
        if let Ok(Some(status)) = child.0.try_wait() {
            return ended(Some(status), false);
        }
        if st.stop.load(Ordering::Relaxed) || st.clock.now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) with the id of a child not yet waited for (so not reused).
    unsafe { libc::kill(child.0.id() as libc::pid_t, libc::SIGINT) };
    let give_up = st.clock.now() + GRACE;
    while st.clock.now() < give_up {
        if let Ok(Some(status)) = child.0.try_wait() {
            return ended(Some(status), true);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.0.kill();
    ended(child.0.wait().ok(), true)
}

/// Opens `FLOW.EXT` in the point's directory: the file, and its path relative to the results.
fn output(st: &Stage, flow: &str, ext: &str) -> Result<(std::fs::File, PathBuf), String> {
    std::fs::create_dir_all(st.dir)
        .map_err(|e| format!("cannot create {}: {e}", st.dir.display()))?;
    let name = format!("{}.{ext}", crate::results::file_stem(flow));
    let path = st.dir.join(&name);
    let f = std::fs::File::create(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    Ok((f, st.rel_dir.join(name)))
}

/// Sleeps until `t` or until `stop` is set; whether `t` was reached.
pub(super) fn sleep_until(st: &Stage, t: Timestamp) -> bool {
    loop {
        if st.stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = t.saturating_since(st.clock.now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// `@{…}` in a command's argument: `@{NODE}` a host's address, `@{group:FLOW}` the group of
/// a flow with several receivers, `@{out}` the point's directory.
pub(super) fn expand(arg: &str, st: &Stage) -> Result<String, String> {
    substitute(arg, |key| {
        if key == "out" {
            let dir = std::path::absolute(st.dir).unwrap_or_else(|_| st.dir.to_path_buf());
            Ok(dir.to_string_lossy().into_owned())
        } else if let Some(flow) = key.strip_prefix("group:") {
            let k =
                st.s.flows
                    .iter()
                    .position(|f| f.name == flow && f.to.len() > 1)
                    .ok_or_else(|| {
                        format!("'{arg}': @{{group:{flow}}} names no flow with several receivers")
                    })?;
            Ok(flow_group(k).to_string())
        } else {
            let h = st.names.iter().position(|n| n == key).ok_or_else(|| {
                format!(
                    "'{arg}': @{{{key}}} is not a host; hosts are the nodes flows start or end at: {}",
                    st.names.join(", ")
                )
            })?;
            Ok(st.hosts.hosts()[h].addr.to_string())
        }
    })
}

/// `arg` with each `@{KEY}` replaced by `value(KEY)`.
fn substitute(
    arg: &str,
    mut value: impl FnMut(&str) -> Result<String, String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    while let Some(i) = rest.find("@{") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(j) = after.find('}') else {
            return Err(format!("'{arg}': '@{{' without a closing '}}'"));
        };
        out.push_str(&value(&after[..j])?);
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The nodes a command's arguments name with `@{NODE}` (they are made hosts).
pub(super) fn referenced_nodes(f: &FlowDecl) -> Vec<String> {
    let FlowKind::Command { args, .. } = &f.kind else {
        return Vec::new();
    };
    let mut nodes = Vec::new();
    for a in args {
        // An unclosed `@{` is the error `expand` reports when the command runs.
        let _ = substitute(a, |key| {
            if key != "out" && !key.starts_with("group:") {
                nodes.push(key.to_string());
            }
            Ok(String::new())
        });
    }
    nodes
}

/// The program to start: `metronome` is this very binary when the lab runs inside it.
fn program_path(program: &str) -> PathBuf {
    if program == "metronome" {
        if let Ok(me) = std::env::current_exe() {
            let ours = me
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("metronome"));
            if ours {
                return me;
            }
        }
    }
    PathBuf::from(program)
}

/// Command flow `f`: its program in its host, from its start, as [`CommandRun`] says.
pub(super) fn command_flow(f: &FlowDecl, st: &Stage) -> Result<CommandRun, String> {
    let FlowKind::Command { program, args } = &f.kind else {
        return Err(format!("flow '{}' is not a command", f.name));
    };
    let argv: Vec<String> = args
        .iter()
        .map(|a| expand(a, st))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("flow '{}': {e}", f.name))?;
    let host = host_index(st.names, &f.from);
    let (stdout, stdout_rel) = output(st, &f.name, "stdout")?;
    let (stderr, stderr_rel) = output(st, &f.name, "stderr")?;
    let mut run = CommandRun {
        flow: f.name.clone(),
        host: f.from.clone(),
        argv: std::iter::once(program.clone())
            .chain(argv.iter().cloned())
            .collect(),
        exit_code: None,
        signal: None,
        stopped: false,
        ran_us: Micros::ZERO,
        stdout: stdout_rel.to_string_lossy().into_owned(),
        stderr: stderr_rel.to_string_lossy().into_owned(),
    };
    if !sleep_until(st, st.origin + f.start) {
        run.stopped = true;
        return Ok(run);
    }
    let path = program_path(program);
    let mut child = Running(
        st.hosts
            .command(host, &path.to_string_lossy())
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| {
                format!(
                    "flow '{}': cannot run {program} in {}: {e} (is it installed?)",
                    f.name, f.from
                )
            })?,
    );
    let ended = supervise(&mut child, st, st.origin + f.start + f.duration);
    use std::os::unix::process::ExitStatusExt as _;
    run.exit_code = ended.status.and_then(|s| s.code());
    run.signal = ended.status.and_then(|s| s.signal());
    run.stopped = ended.stopped;
    run.ran_us = Micros::from(ended.ran);
    Ok(run)
}

/// TCP flow `k` by iperf3 between its hosts, from the flow's start: what its receiver got,
/// per interval and in all (iperf3's `-b` is the flow's rate, its `-C` the congestion
/// control), and a warning if its output was not one JSON document alone. Its JSON is kept
/// as `FLOW.iperf3.json`.
pub(super) fn iperf3_flow(
    k: usize,
    f: &FlowDecl,
    st: &Stage,
) -> Result<(FlowReport, Option<String>), String> {
    let FlowKind::Tcp {
        cc,
        bytes,
        rate_bps,
        mtu,
        initial_window,
        max_window,
        delayed_ack,
    } = f.kind
    else {
        return Err(format!("flow '{}' is not TCP", f.name));
    };
    let (from, to) = (
        host_index(st.names, &f.from),
        host_index(st.names, &f.to[0]),
    );
    let addr = st.hosts.hosts()[to].addr.to_string();
    let port = flow_port(k).to_string();
    let missing =
        |e: std::io::Error| format!("cannot run iperf3 ({e}): install it (apt-get install iperf3)");
    // The server is up before the flow starts (it takes a few hundred ms to listen).
    let listening = st.clock.now();
    let _server = Running(
        st.hosts
            .command(to, "iperf3")
            .args(["-s", "-1", "-B", &addr, "-p", &port])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(missing)?,
    );
    // Meanwhile, before the flow's start: `ip` and the priming connection take time.
    let window = TcpWindow {
        initial: initial_window,
        max: max_window,
    };
    set_tcp_routes(st, f, (from, to), window, delayed_ack)?;
    let waited = st.clock.now().saturating_since(listening);
    std::thread::sleep(Duration::from_millis(250).saturating_sub(waited));
    if !sleep_until(st, st.origin + f.start) {
        return Err("interrupted".into());
    }
    let late = st.clock.now().saturating_since(st.origin + f.start);
    let (json, _) = output(st, &f.name, "iperf3.json")?;
    let mut c: Command = st.hosts.command(from, "iperf3");
    c.args(["-c", &addr, "-p", &port, "-J", "-C"]);
    c.arg(match cc {
        TcpCc::Reno => "reno",
        TcpCc::Cubic => "cubic",
    });
    c.args([
        "-i",
        &format!("{:.3}", st.s.interval.as_secs_f64().max(0.1)),
    ]);
    match bytes {
        Some(n) => c.args(["-n", &n.to_string()]),
        None => c.args(["-t", &format!("{:.3}", f.duration.as_secs_f64())]),
    };
    if let Some(r) = rate_bps {
        c.args(["-b", &r.to_string()]);
    }
    if let Some(m) = mtu {
        // iperf3's -M is the MSS: the IP packet less IPv4 and TCP headers.
        c.args(["-M", &m.saturating_sub(40).to_string()]);
    }
    let mut client = Running(
        c.stdin(Stdio::null())
            .stdout(json)
            .stderr(Stdio::null())
            .spawn()
            .map_err(missing)?,
    );
    // iperf3 ends by itself after -t; a byte count is given the scenario's drain to finish.
    let deadline = st.origin + f.start + f.duration + st.s.drain + Duration::from_secs(2);
    supervise(&mut client, st, deadline);
    let text = std::fs::read(st.dir.join(format!(
        "{}.iperf3.json",
        crate::results::file_stem(&f.name)
    )))
    .map_err(|e| format!("flow '{}': iperf3's output: {e}", f.name))?;
    let (report, warning) = parse_iperf3(f, rate_bps, &text)?;
    let late = (late > LATE_START).then(|| {
        format!(
            "flow '{}': iperf3 started {:.0} ms after the flow's start (its server's start and its routes' set-up took that long)",
            f.name,
            late.as_secs_f64() * 1e3
        )
    });
    let warning = match (warning, late) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    };
    Ok((report, warning))
}

/// The routes TCP flow `f` from host `from` to host `to` asks: its window at the sender's,
/// and with `delayed_ack = false` ACKs at once at the receiver's.
fn set_tcp_routes(
    st: &Stage,
    f: &FlowDecl,
    (from, to): (usize, usize),
    window: TcpWindow,
    delayed_ack: bool,
) -> Result<(), String> {
    st.hosts
        .set_tcp_window(from, to, window)
        .map_err(|e| format!("flow '{}': initial_window or max_window: {e}", f.name))?;
    if !delayed_ack {
        st.hosts
            .set_quick_ack(to, from)
            .map_err(|e| format!("flow '{}': delayed_ack = false: {e}", f.name))?;
    }
    Ok(())
}

/// How late a TCP flow's client may start before the run says so.
const LATE_START: Duration = Duration::from_millis(20);

/// iperf3's `-J` output as the flow's figures, from its first JSON document. iperf3 3.12 has
/// been seen to write the last bytes of its document a second time after it (`ion":
/// "reno"\n\t}\n}`: one point of a 4-point seed002-tcp emu run, which then lost all four);
/// what follows the document is left out, and said in the warning.
fn parse_iperf3(
    f: &FlowDecl,
    rate_bps: Option<u64>,
    json: &[u8],
) -> Result<(FlowReport, Option<String>), String> {
    let no_json = |e: serde_json::Error| format!("flow '{}': iperf3 printed no JSON ({e})", f.name);
    let mut docs = serde_json::Deserializer::from_slice(json).into_iter::<serde_json::Value>();
    let v = docs
        .next()
        .ok_or_else(|| format!("flow '{}': iperf3 printed nothing", f.name))?
        .map_err(no_json)?;
    let after = json[docs.byte_offset()..].trim_ascii();
    let warning = (!after.is_empty()).then(|| {
        format!(
            "flow '{}': iperf3 wrote {} bytes after its JSON document; they are left out",
            f.name,
            after.len()
        )
    });
    if let Some(e) = v.get("error") {
        return Err(format!("flow '{}': iperf3: {e}", f.name));
    }
    let received = &v["end"]["sum_received"];
    let intervals = v["intervals"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| IntervalFigures {
                    start_us: Micros::from_nanos_u64(
                        (i["sum"]["start"].as_f64().unwrap_or(0.0) * 1e9) as u64
                            + f.start.as_nanos() as u64,
                    ),
                    bytes: i["sum"]["bytes"].as_u64().unwrap_or(0),
                    ..IntervalFigures::default()
                })
                .collect()
        })
        .unwrap_or_default();
    let mut rx = ReceiverReport::from_meter(
        f.to[0].clone(),
        &mut Meter::new(Duration::ZERO, false),
        0,
        f.duration,
    );
    rx.bytes = received["bytes"].as_u64().unwrap_or(0);
    rx.throughput_bps = received["bits_per_second"].as_f64().unwrap_or(0.0);
    rx.intervals = intervals;
    let sent = &v["end"]["sum_sent"];
    let report = FlowReport {
        repair: None,
        name: f.name.clone(),
        kind: "tcp".into(),
        src: f.from.clone(),
        target_bps: rate_bps.unwrap_or(0),
        start_us: Micros::from(f.start),
        duration_us: Micros::from(f.duration),
        sent_packets: 0,
        sent_bytes: sent["bytes"].as_u64().unwrap_or(0),
        receivers: vec![rx],
        rate_control: None,
    };
    Ok((report, warning))
}

/// What a `metronome recv … --json` command measured, as a receiver's figures at its host
/// (the source it received most packets from); `None` for any other program, or when its
/// output is not that JSON.
pub(super) fn measured_by(run: &CommandRun, f: &FlowDecl, st: &Stage) -> Option<ReceiverReport> {
    let is_recv = run.argv.first().is_some_and(|p| p == "metronome")
        && run.argv.get(1).is_some_and(|a| a == "recv")
        && run.argv.iter().any(|a| a == "--json");
    if !is_recv {
        return None;
    }
    let text = std::fs::read(
        st.dir
            .join(format!("{}.stdout", crate::results::file_stem(&run.flow))),
    )
    .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
    let src = v["sources"]
        .as_array()?
        .iter()
        .max_by_key(|s| s["packets"].as_u64().unwrap_or(0))?;
    let num = |k: &str| src[k].as_f64().unwrap_or(0.0);
    let mut r = ReceiverReport::from_meter(
        run.host.clone(),
        &mut Meter::new(Duration::ZERO, false),
        0,
        f.duration,
    );
    r.packets = src["received"].as_u64().unwrap_or(0);
    // On the wire: the payload, and RTP (12) and IPv4/UDP (28) headers per packet.
    r.bytes = src["payload_bytes"].as_u64().unwrap_or(0) + 40 * r.packets;
    r.lost = src["lost"].as_u64().unwrap_or(0);
    r.loss_percent = num("loss_percent");
    r.duplicates = src["duplicates"].as_u64().unwrap_or(0);
    r.reordered = src["reordered"].as_u64().unwrap_or(0);
    r.throughput_bps = num("bitrate_bps");
    r.jitter_us = Micros::from_micros_f64(num("jitter_us"));
    if let Some(d) = src.get("one_way_delay").filter(|d| !d.is_null()) {
        let us = |k: &str| Micros::from_micros_f64(d[k].as_f64().unwrap_or(0.0));
        r.mean_delay_us = us("mean_us");
        r.min_delay_us = us("min_us");
        r.max_delay_us = us("max_us");
        r.p50_delay_us = us("p50_us");
        r.p99_delay_us = us("p99_us");
    }
    Some(r)
}

/// A command flow's line in the flows table: no packets of its own; a `metronome recv`
/// command's figures as its receiver (see [`measured_by`]).
pub(super) fn command_report(f: &FlowDecl) -> FlowReport {
    FlowReport {
        repair: None,
        name: f.name.clone(),
        kind: "command".into(),
        src: f.from.clone(),
        target_bps: 0,
        start_us: Micros::from(f.start),
        duration_us: Micros::from(f.duration),
        sent_packets: 0,
        sent_bytes: 0,
        receivers: Vec::new(),
        rate_control: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_config::scenario::TcpCc;

    fn tcp_flow() -> FlowDecl {
        FlowDecl {
            name: "tcp".into(),
            from: "a".into(),
            to: vec!["b".into()],
            start: Duration::ZERO,
            duration: Duration::from_secs(10),
            kind: FlowKind::Tcp {
                cc: TcpCc::Reno,
                bytes: None,
                rate_bps: None,
                mtu: None,
                initial_window: None,
                max_window: None,
                delayed_ack: true,
            },
            membership: Vec::new(),
        }
    }

    const DOC: &str = "{\n\t\"intervals\":\t[],\n\t\"end\":\t{\n\t\t\"sum_sent\":\t{\"bytes\":\t1250},\n\t\t\"sum_received\":\t{\"bytes\":\t1000, \"bits_per_second\":\t800.5},\n\t\t\"receiver_tcp_congestion\":\t\"reno\"\n\t}\n}\n";

    #[test]
    fn iperf3s_document_is_read_and_what_follows_it_is_left_out_with_a_warning() {
        let (r, warning) = parse_iperf3(&tcp_flow(), None, DOC.as_bytes()).unwrap();
        assert_eq!(warning, None);
        assert_eq!((r.sent_bytes, r.receivers[0].bytes), (1250, 1000));
        assert_eq!(r.receivers[0].throughput_bps, 800.5);
        // As iperf3 3.12 wrote it once: the document's last bytes again after it.
        let twice = format!("{DOC}ion\":\t\"reno\"\n\t}}\n}}\n");
        let (again, warning) = parse_iperf3(&tcp_flow(), None, twice.as_bytes()).unwrap();
        assert_eq!(again.receivers[0].bytes, 1000);
        let warning = warning.expect("a warning");
        assert!(
            warning.contains("17 bytes after its JSON document"),
            "{warning}"
        );
        // No document at all is an error that says so.
        let e = parse_iperf3(&tcp_flow(), None, b"iperf3: error").unwrap_err();
        assert!(e.contains("iperf3 printed no JSON"), "{e}");
    }
}
