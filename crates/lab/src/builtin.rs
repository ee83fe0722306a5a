//! The scenarios that ship with Metronome, by name (`metronome lab list`).

/// A built-in scenario.
pub struct Builtin {
    pub name: &'static str,
    pub summary: &'static str,
    pub text: &'static str,
}

pub const BUILTINS: &[Builtin] = &[Builtin {
    name: "seed001-udp",
    summary: "UDP loss and jitter per client over netem-limited links, at the ladder bitrates; beside seed 001's table and the closed form",
    text: include_str!("../scenarios/seed001-udp.toml"),
},
Builtin {
    name: "seed001-tcp",
    summary: "TCP (smoltcp, CUBIC) transfer rate against the tc-tbf limit rate, for the ladder bitrates",
    text: include_str!("../scenarios/seed001-tcp.toml"),
},
Builtin {
    name: "seed001-video",
    summary: "The test pattern encoded at each ladder bitrate, streamed over the poor, moderate and good links: frames lost and frame delay per client",
    text: include_str!("../scenarios/seed001-video.toml"),
}];

/// The built-in scenario called `name`.
pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}
