//! The lab run as a background job would run it (`nohup … &`: the shell ignores SIGINT, and
//! a batch system may block signals): the programs it starts still get default signal
//! dispositions and an empty mask, so the SIGINT that ends a command flow ends it. Its own
//! test binary, because the disposition is the whole process's. Needs root (namespaces).

use metronome_config::scenario::ScenarioFile;
use metronome_lab::run::{run, Mode, RunOptions};
use metronome_testkit::TempDir;

#[test]
fn a_lab_started_as_a_background_job_still_stops_its_programs_with_sigint() {
    // SAFETY: a disposition and this thread's mask, set with valid arguments.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let tmp = TempDir::new("bg");
    let text = r#"
name = "background"
duration = "2s"
drain = "100ms"

[links.plain]
delay = "5ms"

[topology]
shape = "chain"
nodes = ["a", "b"]
link = "plain"

[[flow]]
name = "sleeper"
kind = "command"
from = "a"
to = "b"
duration = "1s"
program = "sleep"
args = ["30"]
"#;
    let file = ScenarioFile::parse(text, "the test's scenario").unwrap();
    let opts = RunOptions {
        mode: Mode::Emu,
        jobs: 1,
        ..RunOptions::new(tmp.0.clone())
    };
    let emu = run(&file, &opts).unwrap();
    let sleeper = &emu.points[0].commands[0];
    assert!(sleeper.stopped, "{sleeper:?}");
    assert_eq!(
        sleeper.signal,
        Some(libc::SIGINT),
        "ended by the lab's SIGINT, not by SIGKILL after the grace time: {sleeper:?}"
    );
    assert!(sleeper.ran_us.as_nanos_u64() < 2_000_000_000, "{sleeper:?}");
    let list = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap()
        .stdout;
    let mine = format!("mt{}-", std::process::id());
    assert!(!String::from_utf8_lossy(&list).contains(&mine));
}
