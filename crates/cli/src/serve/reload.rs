//! `serve --config FILE` reads FILE again on SIGHUP, as nginx, MediaMTX and sshd do, without
//! stopping what plays.
//!
//! - **Streams pushed to destinations** (`[[stream]]` with `destination`): one gone from the
//!   file stops (with RTCP BYE), a new one is admitted and starts, one whose settings changed
//!   stops and starts again with them; one refused is tried again at the next reload. Streams
//!   added through the control API are left alone, also one that took a declared stream's name
//!   (told apart by its id in the server).
//! - **RTSP** (`rtsp` on): the mounts and `[rtsp_auth]` are replaced at once; connections and
//!   sessions stay, a session playing goes on (also on a mount gone), new requests are checked
//!   against the new users (`RtspService::reload`).
//! - **The other settings** (addresses, scheduler, cores, budgets, TLS files, the control
//!   API's) are read at the start only: a change is said, and waits for a restart.
//!
//! A file that does not parse, or RTSP settings that would be refused at the start, change
//! nothing: the error is said and the last good config keeps serving.

use super::declared::Running;
use super::ServeArgs;
use metronome_apps::rtsp::{Mounts, RtspService};
use metronome_apps::streams::{ServeConfig, StreamServer, StreamSpec};
use metronome_config::serve;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sighup(_: libc::c_int) {
    RELOAD.store(true, Ordering::SeqCst);
}

/// From now on SIGHUP asks for a reload instead of stopping the server.
pub(super) fn catch_sighup() -> std::io::Result<()> {
    // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic, which is
    // async-signal-safe; SA_RESTART keeps interrupted system calls going.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sighup as *const () as libc::sighandler_t;
        act.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        if libc::sigaction(libc::SIGHUP, &act, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether a SIGHUP came since the last call.
pub(super) fn requested() -> bool {
    RELOAD.swap(false, Ordering::SeqCst)
}

/// The config as last applied, and what it takes to apply the next.
pub(super) struct Reloader {
    path: PathBuf,
    current: ServeConfig,
    /// The `--stream` arguments' streams: mounts too, never reloaded.
    from_args: Vec<StreamSpec>,
    /// Whether streams with destinations are also RTSP mounts (and only those are pushed).
    rtsp: bool,
    /// The file's pushed streams that run, as started.
    running: Running,
}

impl Reloader {
    /// The reloader of `a.config`, which `file` was read from (SIGHUP is caught already,
    /// [`catch_sighup`]). `None` without one.
    /// `running`: the declared streams started (those of the file are kept).
    pub(super) fn for_config(
        a: &ServeArgs,
        file: ServeConfig,
        from_args: Vec<StreamSpec>,
        rtsp: bool,
        running: &Running,
    ) -> Option<Reloader> {
        let path = a.config.clone()?;
        let running = running
            .iter()
            .filter(|(name, _)| file.streams.iter().any(|s| &s.name == *name))
            .map(|(n, r)| (n.clone(), r.clone()))
            .collect();
        Some(Reloader {
            path,
            current: file,
            from_args,
            rtsp,
            running,
        })
    }

    /// Reads the file again and applies what changed; every change and every refusal is said
    /// on stderr.
    pub(super) fn reload(
        &mut self,
        server: &StreamServer,
        rtsp: Option<&RtspService>,
        a: &ServeArgs,
    ) {
        let shown = self.path.display().to_string();
        let new = match serve::load(&self.path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("metronome: {shown} not reloaded: {e}; still serving the config before");
                return;
            }
        };
        eprintln!("metronome: reloading {shown} (SIGHUP)");
        if let Some(service) = rtsp {
            let mut specs = new.streams.clone();
            specs.extend(self.from_args.iter().cloned());
            let applied = Mounts::from_specs(&specs)
                .map_err(|e| e.to_string())
                .and_then(|m| {
                    service
                        .reload(m, new.rtsp_auth.clone())
                        .map_err(|e| e.to_string())
                });
            if let Err(e) = applied {
                eprintln!("metronome: {shown} not reloaded: {e}; still serving the config before");
                return;
            }
            eprintln!(
                "metronome: RTSP mounts now {}; [rtsp_auth] {}",
                service.mount_names().join(", "),
                if new.rtsp_auth.is_some() {
                    "applied"
                } else {
                    "none"
                }
            );
        }
        self.restart_streams(server, &new, a);
        for key in restart_only_changes(&self.current, &new) {
            eprintln!(
                "metronome: {key} changed in {shown}: read at the start only; restart to apply"
            );
        }
        self.current = new;
    }

    /// Stops the pushed streams gone or changed, starts the new, changed and refused ones.
    fn restart_streams(&mut self, server: &StreamServer, new: &ServeConfig, a: &ServeArgs) {
        let wanted: BTreeMap<String, StreamSpec> = new
            .streams
            .iter()
            .filter(|s| !(self.rtsp && s.destination.is_empty()))
            .map(|s| (s.name.clone(), s.clone()))
            .collect();
        let stale: Vec<(String, u64)> = self
            .running
            .iter()
            .filter(|(name, (spec, _))| wanted.get(*name) != Some(spec))
            .map(|(name, (_, id))| (name.clone(), *id))
            .collect();
        for (name, id) in stale {
            self.running.remove(&name);
            stop(server, &name, id, wanted.contains_key(&name));
        }
        for (name, spec) in wanted {
            if self.running.contains_key(&name) {
                continue;
            }
            if let Some(dir) = &a.sdp_dir {
                match crate::sdp::write_files(&spec, dir) {
                    Ok(paths) => paths
                        .iter()
                        .for_each(|p| eprintln!("metronome: wrote {}", p.display())),
                    Err(e) => eprintln!("metronome: '{name}': its SDP not written: {e}"),
                }
            }
            if let Some(id) = super::declared::start(server, spec.clone()) {
                self.running.insert(name, (spec, id));
            }
        }
    }
}

/// Stops the declared stream `name` the reloader started as `id` (`changed`: it comes back
/// with new settings), unless the control API replaced it meanwhile.
fn stop(server: &StreamServer, name: &str, id: u64, changed: bool) {
    let why = if changed {
        "changed"
    } else {
        "gone from the config"
    };
    match server.stream(name) {
        Some(s) if s.id != id => {
            eprintln!(
                "metronome: '{name}' ({why}) left alone: the stream of that name now was added \
                 through the control API"
            );
        }
        Some(_) => match server.remove(name) {
            Ok(_) => eprintln!("metronome: '{name}' stopped ({why})"),
            Err(e) => eprintln!("metronome: '{name}' ({why}) not stopped: {}", e.message()),
        },
        None => {}
    }
}

/// The settings read at the start only that differ between `old` and `new`, by key. Every
/// field is named here: a new setting must say whether a reload applies it.
fn restart_only_changes(old: &ServeConfig, new: &ServeConfig) -> Vec<&'static str> {
    let ServeConfig {
        sched,
        rt_cores,
        rt,
        wait,
        cpu,
        late,
        seed,
        link_capacity,
        control,
        control_token_file,
        control_hosts,
        allow_destinations,
        memory_budget,
        max_stream_rate,
        encode_budget,
        rtsp,
        core_budget,
        rtsp_tls_cert,
        rtsp_tls_key,
        encode_cost,
        send_cost,
        overload,
        sdp_dir,
        rtsp_limits,
        // Applied by a reload.
        rtsp_auth: _,
        streams: _,
    } = new;
    [
        ("sched", *sched != old.sched),
        ("rt_cores", *rt_cores != old.rt_cores),
        ("rt", *rt != old.rt),
        ("wait", *wait != old.wait),
        ("cpu", *cpu != old.cpu),
        ("late", *late != old.late),
        ("seed", *seed != old.seed),
        ("link_capacity", *link_capacity != old.link_capacity),
        ("control", *control != old.control),
        (
            "control_token_file",
            *control_token_file != old.control_token_file,
        ),
        ("control_hosts", *control_hosts != old.control_hosts),
        (
            "allow_destinations",
            *allow_destinations != old.allow_destinations,
        ),
        ("memory_budget", *memory_budget != old.memory_budget),
        ("max_stream_rate", *max_stream_rate != old.max_stream_rate),
        ("encode_budget", *encode_budget != old.encode_budget),
        ("rtsp", *rtsp != old.rtsp),
        ("core_budget", *core_budget != old.core_budget),
        ("rtsp_tls_cert", *rtsp_tls_cert != old.rtsp_tls_cert),
        ("rtsp_tls_key", *rtsp_tls_key != old.rtsp_tls_key),
        ("encode_cost", *encode_cost != old.encode_cost),
        ("send_cost", *send_cost != old.send_cost),
        ("overload", *overload != old.overload),
        ("sdp_dir", *sdp_dir != old.sdp_dir),
        (
            "rtsp_* limits and timeouts",
            *rtsp_limits != old.rtsp_limits,
        ),
    ]
    .into_iter()
    .filter_map(|(key, differs)| differs.then_some(key))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_at_the_start_only_are_named_when_they_change() {
        let old = serve::parse("sched = \"edf\"\nrt_cores = 1\n", "a").unwrap();
        let new = serve::parse(
            "sched = \"dm\"\nrt_cores = 1\nrtsp = \"127.0.0.1:1\"\n",
            "b",
        )
        .unwrap();
        assert_eq!(restart_only_changes(&old, &new), ["sched", "rtsp"]);
        assert!(restart_only_changes(&new, &new).is_empty());
    }
}
