//! The AFL++ harness: `fuzz-target TARGET`, built by `cargo afl build --features afl`, runs the
//! named target (see `metronome_fuzz::TARGETS`) in AFL's persistent mode.

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(target) = metronome_fuzz::target(&name) else {
        let names: Vec<&str> = metronome_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
        eprintln!(
            "fuzz-target: no target {name:?}; name one of {}",
            names.join(", ")
        );
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| target(data));
}
