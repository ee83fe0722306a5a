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
    summary: "The test pattern encoded at each ladder bitrate, streamed over the poor, moderate and good links without and with loss repair (rtx, fec, both): frames lost and frame delay per client",
    text: include_str!("../scenarios/seed001-video.toml"),
},
Builtin {
    name: "repair-rtx",
    summary: "Video over 1-5 % random loss and over seed 001's moderate link, with and without NACK and retransmission: frames shown in time, repairs, overhead",
    text: include_str!("../scenarios/repair-rtx.toml"),
},
Builtin {
    name: "repair-fec",
    summary: "Video over 1-5 % random loss and over seed 001's moderate link with no repair, retransmission, SMPTE 2022-1 FEC (10x10, 5x5) and both: frames shown in time, repairs, overhead",
    text: include_str!("../scenarios/repair-fec.toml"),
},
Builtin {
    name: "seed001-ffmpeg",
    summary: "FFmpeg (x264, RTP/MPEG-TS) at each ladder bitrate to the clients' group, measured by metronome recv per client (real programs: --mode emu, as root)",
    text: include_str!("../scenarios/seed001-ffmpeg.toml"),
},
Builtin {
    name: "seed002-tcp",
    summary: "TFMCC and ASMP multicast video to 45 receivers beside one TCP flow on a 4 Mbit/s dumbbell: rates, fairness, frames, PSNR",
    text: include_str!("../scenarios/seed002-tcp.toml"),
},
Builtin {
    name: "unicast-cc",
    summary: "TFRC and GCC to one viewer on a 4 Mbit/s bottleneck: how each finds the link, and the queue it keeps",
    text: include_str!("../scenarios/unicast-cc.toml"),
},
Builtin {
    name: "unicast-cc-tcp",
    summary: "TFRC and GCC to one viewer beside a TCP flow on a 4 Mbit/s bottleneck: the share each leaves TCP",
    text: include_str!("../scenarios/unicast-cc-tcp.toml"),
},
Builtin {
    name: "seed002-playout",
    summary: "TFMCC and ASMP multicast video on the dumbbell without TCP, with and without a 150 ms play-out deadline",
    text: include_str!("../scenarios/seed002-playout.toml"),
},
Builtin {
    name: "seed002-cbr",
    summary: "TFMCC and ASMP multicast video beside a 2 Mbit/s CBR UDP flow switching on and off",
    text: include_str!("../scenarios/seed002-cbr.toml"),
}];

/// The built-in scenario called `name`.
pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_config::scenario::ScenarioFile;

    #[test]
    fn every_builtin_parses_at_every_point() {
        for b in BUILTINS {
            let file = ScenarioFile::parse(b.text, b.name).unwrap_or_else(|e| panic!("{e}"));
            let points = file.resolve_all().unwrap_or_else(|e| panic!("{e}"));
            assert!(!points.is_empty(), "{}", b.name);
            assert!(points.iter().all(|(_, s)| s.name == b.name), "{}", b.name);
        }
    }
}
