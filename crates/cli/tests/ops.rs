//! What operators use beside the server: shell completions and man pages generated from the
//! CLI definition, and the packaged config the systemd unit and the container serve.

mod common;

use common::bin;

#[test]
fn completions_for_each_shell_know_the_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = bin().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        for word in ["metronome", "serve", "recv", "rtsp-max-per-address"] {
            assert!(text.contains(word), "{shell}: no {word}");
        }
    }
    let bad = bin().args(["completions", "tcsh"]).output().unwrap();
    assert!(!bad.status.success());
}

#[test]
fn man_pages_for_every_subcommand() {
    let dir = common::tmp_dir("man");
    let out = bin().arg("man").arg(&dir).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    for page in [
        "metronome.1",
        "metronome-serve.1",
        "metronome-recv.1",
        "metronome-lab-run.1",
    ] {
        let text =
            std::fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.starts_with(".ie") || text.contains(".TH"), "{page}");
    }
    let serve = std::fs::read_to_string(dir.join("metronome-serve.1")).unwrap();
    assert!(
        serve.contains("rtsp\\-request\\-timeout"),
        "the options are documented"
    );
}

#[test]
fn the_packaged_config_is_one_the_server_takes() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/metronome.toml");
    let cfg = metronome_spec::config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.streams.len(), 1);
    assert!(cfg.rtsp.is_some() && cfg.control.is_some());
}
