//! Every seed of the corpus and every past finding (`regressions/`) through its target: what
//! the fuzzer starts from must pass, and what once failed must pass now.

use std::path::Path;

fn replay_dir(dir: &Path) -> usize {
    let mut n = 0;
    let Ok(targets) = std::fs::read_dir(dir) else {
        return 0;
    };
    for t in targets.flatten().filter(|e| e.path().is_dir()) {
        let name = t.file_name().to_string_lossy().to_string();
        let target = metronome_fuzz::target(&name)
            .unwrap_or_else(|| panic!("{}: no fuzz target {name:?}", dir.display()));
        for f in std::fs::read_dir(t.path()).unwrap().flatten() {
            let data = std::fs::read(f.path()).unwrap();
            let run = std::panic::catch_unwind(|| target(&data));
            assert!(
                run.is_ok(),
                "{} fails its target; replay: cargo run -p metronome-fuzz --bin fuzz -- --replay {name} {}",
                f.path().display(),
                f.path().display()
            );
            n += 1;
        }
    }
    n
}

#[test]
fn every_seed_and_every_past_finding_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let seeds = replay_dir(&root.join("corpus"));
    let findings = replay_dir(&root.join("regressions"));
    println!("{seeds} seeds, {findings} past findings");
    // Every target has seeds.
    for (name, _) in metronome_fuzz::TARGETS {
        let dir = root.join("corpus").join(name);
        let count = std::fs::read_dir(&dir).map_or(0, |d| d.count());
        assert!(count > 0, "no seeds for {name} in {}", dir.display());
    }
    assert!(seeds >= 60, "{seeds} seeds");
}
