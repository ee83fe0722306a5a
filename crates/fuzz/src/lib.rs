//! Fuzz targets: every parser that takes network or file input, each behind one function of
//! bytes that must never panic (and, for the stateful ones, must keep its invariants).
//!
//! - [`TARGETS`]: the table the AFL++ harness (`src/bin/fuzz-target.rs`, built by `cargo afl`)
//!   and the regression tests (`tests/replay.rs`) share;
//! - `corpus/TARGET/`: the seeds, checked in: valid inputs of each format, and inputs in the
//!   shape of known bugs in other servers (live555 and GStreamer's RTSP, listed in
//!   `corpus/README.md`);
//! - `regressions/TARGET/`: inputs that once made a target fail, each replayed by the tests;
//! - `src/bin/fuzz.rs`: the runner, `cargo run -p metronome-fuzz --bin fuzz -- --seconds 60`.
//!
//! Inputs that hold several datagrams or chunks are split by [`chunks`]: a 16-bit big-endian
//! length, then that many bytes, repeatedly (the rest, if shorter, is the last chunk).

pub mod rtsp_world;
mod targets;

pub use targets::*;

/// A fuzz target: takes any bytes and must not panic.
pub type Target = fn(&[u8]);

/// Every target by name.
pub const TARGETS: &[(&str, Target)] = &[
    ("rtp", targets::rtp),
    ("rtcp", targets::rtcp),
    ("rtsp", targets::rtsp),
    ("rtsp-transport", targets::rtsp_transport),
    ("rtsp-response", targets::rtsp_response),
    ("sdp", targets::sdp),
    ("mpegts", targets::mpegts),
    ("rfc4175", targets::rfc4175),
    ("coded-depay", targets::coded_depay),
    ("http", targets::http),
    ("scenario", targets::scenario),
    ("config", targets::config),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Splits `data` into length-prefixed chunks (see the crate's documentation).
pub fn chunks(mut data: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        if data.is_empty() {
            return None;
        }
        if data.len() < 2 {
            let c = data;
            data = &[];
            return Some(c);
        }
        let n = usize::from(u16::from_be_bytes([data[0], data[1]])).min(data.len() - 2);
        let c = &data[2..2 + n];
        data = &data[2 + n..];
        Some(c)
    })
}

/// Joins chunks the way [`chunks`] splits them (for writing seeds).
pub fn join(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        let n = u16::try_from(p.len()).expect("a chunk of at most 65535 bytes");
        out.extend_from_slice(&n.to_be_bytes());
        out.extend_from_slice(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_split_what_join_joins() {
        let parts: [&[u8]; 3] = [b"abc", b"", b"de"];
        let joined = join(&parts);
        let back: Vec<&[u8]> = chunks(&joined).collect();
        assert_eq!(back, parts);
        // A length beyond the data takes what is there.
        let short: Vec<&[u8]> = chunks(&[0, 9, 1, 2]).collect();
        assert_eq!(short, [&[1u8, 2][..]]);
        assert_eq!(chunks(&[7]).collect::<Vec<_>>(), [&[7u8][..]]);
    }
}
