//! `metronome serve` with many streams: streams from `--config` and `--stream`, admission
//! control, EDF/DM/naive scheduling, and the HTTP control API.

use super::ServeArgs;
use crate::args::parse_stream_arg;
use crate::report::LiveLine;
use metronome_apps::control::{load_or_create_token, ControlAccess, ControlServer};
use metronome_apps::rtsp::{Mounts, RtspService};
use metronome_apps::streams::{
    format_bitrate, CoreRt, ServeConfig, ServerConfig, ServerOutcome, SourceSpec, StreamServer,
    StreamSpec,
};
use metronome_rt::clock::mono_ns;
use metronome_time::Micros;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Whether the arguments ask for the multi-stream server rather than one paced stream.
pub(super) fn wanted(a: &ServeArgs) -> bool {
    a.config.is_some()
        || !a.stream.is_empty()
        || a.sched.is_some()
        || a.rt_cores.is_some()
        || a.control.is_some()
        || a.link_capacity.is_some()
        || a.rtsp.is_some()
        || a.sdp_dir.is_some()
}

/// The RTSP server on `addr` for `mounts`, with the config's users; each mount's URL printed.
fn start_rtsp(
    a: &ServeArgs,
    file: &ServeConfig,
    addr: SocketAddr,
    mounts: Mounts,
    server: &Arc<StreamServer>,
) -> std::io::Result<RtspService> {
    let names: Vec<String> = mounts.names().map(String::from).collect();
    let rc = a.rtsp_config(addr, file);
    let service = RtspService::start(rc, server.clone(), mounts)?;
    for n in names {
        eprintln!(
            "metronome: serving {}://{}/{n}",
            service.scheme(),
            shown_addr(service.local_addr())
        );
    }
    Ok(service)
}

/// The config file (none without `--config`); from then on SIGHUP asks for a reload
/// (serve/reload.rs), also one that comes while the server starts: it is applied once it runs.
fn load_config(a: &ServeArgs) -> Result<ServeConfig, Box<dyn std::error::Error>> {
    let Some(path) = &a.config else {
        return Ok(ServeConfig::default());
    };
    let file = metronome_config::serve::load(path)?;
    super::reload::catch_sighup()?;
    Ok(file)
}

pub(super) fn run(a: ServeArgs, stop: Arc<AtomicBool>) -> Result<(), Box<dyn std::error::Error>> {
    let file = load_config(&a)?;
    let a = a.with_file(&file);
    let mut specs = file.streams.clone();
    for s in &a.stream {
        specs.push(parse_stream_arg(s)?);
    }
    let (control_addr, rtsp_addr) = (a.control, a.rtsp);
    if specs.is_empty() && control_addr.is_none() {
        specs.push(match rtsp_addr {
            // Nothing declared: the built-in test source at rtsp://HOST:PORT/test.
            Some(_) => test_mount(&a),
            None => spec_from_args(&a),
        });
    }
    let from_args = specs[file.streams.len()..].to_vec();
    let cfg = server_config(&a);
    let live = LiveLine::new(!a.json);
    // Mounts are checked (and files measured) before anything starts.
    let rtsp_plan = rtsp_addr
        .map(|addr| Mounts::from_specs(&specs).map(|m| (addr, m)))
        .transpose()?;
    let server = Arc::new(StreamServer::start(cfg)?);
    let cal = server.calibration();
    eprintln!(
        "metronome: send cost {:.1} µs per packet budgeted ({}; measured p50 {:.1} µs, p99 {:.1} µs)",
        cal.per_packet_us.as_micros_f64(),
        cal.method,
        cal.measured_p50_us.as_micros_f64(),
        cal.measured_p99_us.as_micros_f64(),
    );
    let pushed = super::declared::push_streams(&server, specs, &a, rtsp_addr.is_some())?;
    let rtsp = rtsp_plan
        .map(|(addr, mounts)| start_rtsp(&a, &file, addr, mounts, &server))
        .transpose()?;
    let control = match control_addr {
        Some(addr) => Some(start_control(&a, &file, addr, &server)?),
        None => None,
    };
    let serving_on_request = control.is_some() || rtsp.is_some();
    let mut reloader =
        super::reload::Reloader::for_config(&a, file, from_args, rtsp.is_some(), &pushed.running);
    let start = mono_ns();
    let elapsed = || Duration::from_nanos(mono_ns().saturating_sub(start));
    let mut next_status = Duration::ZERO;
    loop {
        if stop.load(Ordering::Relaxed) || a.duration.is_some_and(|d| elapsed() >= d) {
            break;
        }
        if control.is_none() && rtsp.is_none() && server.running() == 0 {
            break;
        }
        if let Some(r) = reloader.as_mut().filter(|_| super::reload::requested()) {
            live.finish_line();
            r.reload(&server, rtsp.as_ref(), &a);
        }
        if elapsed() >= next_status {
            next_status += Duration::from_secs(1);
            for w in server.take_warnings() {
                live.finish_line();
                eprintln!("metronome: {w}");
            }
            live.show(&status_line(&server));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    live.finish();
    if let Some(c) = control {
        c.shutdown();
    }
    if let Some(r) = rtsp {
        r.shutdown_with_server();
    }
    let server = Arc::try_unwrap(server)
        .map_err(|_| "internal error: the stream server is still in use at shutdown")?;
    let outcome = server.shutdown();
    if a.json {
        println!("{}", crate::report::to_json(&outcome)?);
    } else {
        print!("{}", summary(&outcome));
    }
    if pushed.started == 0 && pushed.failed > 0 && !serving_on_request {
        // Nothing ran: a service manager should see a failure and restart, not a success.
        return Err(format!(
            "none of the {} declared streams started (each said why above); fix them and \
             start again",
            pushed.failed
        )
        .into());
    }
    Ok(())
}

/// The control API on `addr`, with its token (read, or made and said), the host names it
/// answers to and the destinations its streams may have.
fn start_control(
    a: &ServeArgs,
    file: &ServeConfig,
    addr: std::net::SocketAddr,
    server: &Arc<StreamServer>,
) -> Result<ControlServer, Box<dyn std::error::Error>> {
    let path = a
        .control_token_file
        .clone()
        .or_else(|| file.control_token_file.clone())
        .or_else(default_token_file)
        .ok_or(
            "the control API needs a token file and there is no home directory to put one in: \
             give --control-token-file FILE",
        )?;
    let (token, made) = load_or_create_token(&path)?;
    if made {
        eprintln!(
            "metronome: made the control API's token in {} (mode 0600); send it as \
             'Authorization: Bearer TOKEN'",
            path.display()
        );
    }
    let destinations = match (&a.allow_destination[..], &file.allow_destinations) {
        ([], Some(listed)) => listed.clone(),
        ([], None) => metronome_config::prefix::IpPrefix::default_destinations(),
        (given, _) => given.to_vec(),
    };
    let hosts = a.control_host.iter().chain(&file.control_hosts).cloned();
    let access = ControlAccess::new(token)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .with_hosts(hosts)
        .with_destinations(destinations);
    let c = ControlServer::start(addr, server.control(), access).map_err(|e| {
        format!("cannot serve the control API on {addr}: {e}; pick another --control address")
    })?;
    eprintln!(
        "metronome: control API on http://{}/streams (token in {})",
        c.local_addr(),
        path.display()
    );
    if !addr.ip().is_loopback() {
        eprintln!(
            "metronome: warning: the control API listens beyond this machine on plain HTTP: \
             its token crosses the network unencrypted; keep it on a trusted network or \
             behind a TLS proxy"
        );
    }
    Ok(c)
}

/// `$XDG_CONFIG_HOME/metronome/control-token`, else `~/.config/metronome/control-token`.
fn default_token_file() -> Option<std::path::PathBuf> {
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let config = nonempty("XDG_CONFIG_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| nonempty("HOME").map(|h| std::path::PathBuf::from(h).join(".config")))?;
    Some(config.join("metronome").join("control-token"))
}

/// The stream server `serve`'s options and config file ask for.
pub(super) fn server_config(a: &ServeArgs) -> ServerConfig {
    let mut cfg = ServerConfig {
        sched: a.sched.unwrap_or_default(),
        rt_cores: a.rt_cores.unwrap_or(1).max(1),
        core_budget: a.core_budget.unwrap_or(0.95),
        link_capacity_bps: a.link_capacity,
        send_cost: a.send_cost,
        default_ring: a.ring.max(1),
        seed: a.seed.unwrap_or_else(super::fresh_seed),
        memory_budget_bytes: a.memory_budget,
        max_stream_bps: a
            .max_stream_rate
            .unwrap_or(metronome_apps::streams::server::DEFAULT_MAX_STREAM_BPS),
        encode_budget: a.encode_budget,
        encode_cost: a.encode_cost,
        ..ServerConfig::default()
    };
    cfg.rt = a.rt.unwrap_or_default();
    cfg.lock_memory = cfg.rt != CoreRt::Off;
    cfg.wait = a.wait.unwrap_or_default();
    cfg.cpus = a.cpu.map(|c| (0..cfg.rt_cores).map(|i| c + i).collect());
    cfg.pacing.late = a.late.unwrap_or(metronome_sched::LatePolicy::CATCH_UP);
    cfg.overload = a.overload.unwrap_or_default();
    cfg
}

/// The mount served when RTSP is on and nothing is declared: the test source.
fn test_mount(a: &ServeArgs) -> StreamSpec {
    let mut s = spec_from_args(a);
    s.name = mount_name(a.source.input.as_deref(), "test");
    s.destination.clear();
    s
}

/// A mount's name from its file's name (letters, digits, '-', '_' kept), or `default` (the test
/// source, or a name with nothing left).
pub(crate) fn mount_name(input: Option<&std::path::Path>, default: &str) -> String {
    input
        .and_then(|p| p.file_stem())
        .map(|n| {
            n.to_string_lossy()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || "-_".contains(*c))
                .take(metronome_apps::rtsp::MAX_MOUNT_NAME)
                .collect::<String>()
        })
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| default.into())
}

/// An address to show in a URL: the machine's loopback when bound to any address.
pub(crate) fn shown_addr(a: std::net::SocketAddr) -> std::net::SocketAddr {
    if a.ip().is_unspecified() {
        std::net::SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), a.port())
    } else {
        a
    }
}

/// One stream from the single-stream arguments (positional URLs and the source options).
fn spec_from_args(a: &ServeArgs) -> StreamSpec {
    let mut s = StreamSpec::new("stream1", a.destinations.clone());
    if let Some(p) = &a.source.input {
        s.source = SourceSpec::File(p.clone());
        s.looping = a.source.looping;
    } else {
        s.size = Some(format!("{}x{}", a.source.size.0, a.source.size.1));
        s.fps = Some(a.source.fps);
        s.bitrate = Some(a.source.mux_rate);
    }
    s.send_time = a.send_time;
    s
}

fn status_line(server: &StreamServer) -> String {
    let st = server.status();
    let streams = server.streams();
    let running: Vec<_> = streams.iter().filter(|s| s.state == "running").collect();
    let rate: f64 = running.iter().map(|s| s.bitrate_bps).sum();
    let misses: u64 = streams.iter().map(|s| s.deadline_misses).sum();
    let underruns: u64 = streams.iter().map(|s| s.underruns).sum();
    let mut line = format!(
        "{} streams {:.1} Mbit/s | late p99 {:.1} µs max {:.0} µs | misses {misses} | underruns {underruns}",
        running.len(),
        rate / 1e6,
        st.lateness.p99_us.as_micros_f64(),
        st.lateness.max_us.as_micros_f64(),
    );
    for c in &st.cores {
        let _ = write!(line, " | core{} {:.1}%", c.index, c.utilisation_percent);
    }
    line
}

fn summary(o: &ServerOutcome) -> String {
    let s = &o.server;
    let mut out = format!(
        "scheduler {}: {} streams admitted; {} requests refused admission (a stream, a \
         session or a rate raise); link capacity {}\n",
        s.sched,
        o.streams.len(),
        s.refused,
        s.link_capacity_bps
            .map(format_bitrate)
            .unwrap_or_else(|| "not declared (--link-capacity)".into()),
    );
    for c in &s.cores {
        let cpu = o.core_cpu_percent.get(c.index).copied().unwrap_or(f64::NAN);
        let _ = writeln!(out, "core {}: {} (pacer CPU {cpu:.0}%)", c.index, c.grant);
    }
    let _ = writeln!(
        out,
        "{:<16} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9} {:>7}",
        "stream", "state", "packets", "Mbit/s", "misses", "p50 µs", "p99 µs", "max µs", "underr"
    );
    for st in &o.streams {
        let _ = writeln!(
            out,
            "{:<16} {:>9} {:>9} {:>8.2} {:>8} {:>9.1} {:>9.1} {:>9.0} {:>7}",
            st.name,
            st.state,
            st.packets,
            st.bitrate_bps / 1e6,
            st.deadline_misses,
            st.lateness.p50_us.as_micros_f64(),
            st.lateness.p99_us.as_micros_f64(),
            st.lateness.max_us.as_micros_f64(),
            st.underruns,
        );
        if let Some(e) = &st.error {
            let _ = writeln!(out, "  error: {e}");
        }
        // What the receivers said in their reports (RTSP clients send them too).
        for r in &st.receivers {
            let _ = writeln!(
                out,
                "  receiver {} ({}): {} reports, lost {}, jitter {:.2} ms, rtt {}",
                r.addr,
                r.cname.as_deref().unwrap_or("no cname"),
                r.reports,
                r.cumulative_lost,
                r.jitter_us.as_millis_f64(),
                r.rtt_us
                    .map(Micros::as_millis_f64)
                    .map_or("unknown".into(), |v| format!("{v:.2} ms")),
            );
        }
    }
    let l = &s.lateness;
    let _ = writeln!(
        out,
        "all packets: lateness p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs, max {:.0} µs over {} packets",
        l.p50_us.as_micros_f64(), l.p99_us.as_micros_f64(), l.p999_us.as_micros_f64(), l.max_us.as_micros_f64(), l.count
    );
    if let Some(h) = &o.host {
        let _ = writeln!(out, "{}", h.line());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_arguments_become_specs() {
        let s = parse_stream_arg(
            "name=cam1,dest=rtp://127.0.0.1:5004,bitrate=4mbit,period=15ms,deadline=10ms,fps=25,loop=true",
        )
        .unwrap();
        assert_eq!(s.name, "cam1");
        assert_eq!(s.destination, vec!["rtp://127.0.0.1:5004".to_string()]);
        assert_eq!(s.bitrate, Some(4_000_000));
        assert_eq!(s.period, Some(Duration::from_millis(15)));
        assert_eq!(s.fps, Some(25));
        assert!(s.looping);
        assert!(parse_stream_arg("name=x").is_ok(), "RTSP only");
        assert!(parse_stream_arg("cam1").unwrap_err().contains("KEY=VALUE"));
        assert!(parse_stream_arg("name=x,dest=rtp://a:1,perod=1ms").is_err());
    }
}
