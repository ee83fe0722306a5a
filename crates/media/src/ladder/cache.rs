//! Where ladders are kept between runs: one file per ladder, named by a 64-bit FNV-1a hash of
//! its key ([`LadderSpec::key`]), which the file repeats (a hash collision is a miss, not a
//! wrong ladder). Written to a temporary name and renamed, so a reader never sees half a
//! file; a file that does not read back whole is a miss, and is encoded again.
//!
//! Format, little-endian: `MTLADDR1`, the key's length (u32) and bytes, the rung count (u32);
//! per rung its quantizer and frame count (u32 each); per frame its display number (u32), type
//! (Evalvid's letter, one byte) and length (u32), then its bytes.

use super::{Ladder, LadderSpec, Rung};
use crate::encode::CodedFrame;
use metronome_quality::playout::FrameType;
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"MTLADDR1";

/// The cache directory a user has: `$METRONOME_CACHE`, else `$XDG_CACHE_HOME/metronome`, else
/// `~/.cache/metronome`.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("METRONOME_CACHE").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("metronome"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("metronome"))
}

/// 64-bit FNV-1a (also what other caches name their files by).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The file of the ladder with `key` in `dir`.
pub fn path(dir: &Path, key: &str) -> PathBuf {
    dir.join("ladders")
        .join(format!("{:016x}.ladder", fnv1a(key.as_bytes())))
}

/// The rungs of `spec` if `dir` holds them whole.
pub fn load(dir: &Path, spec: &LadderSpec) -> Option<Vec<Rung>> {
    let key = spec.key();
    let bytes = std::fs::read(path(dir, &key)).ok()?;
    let mut r = Reader(&bytes);
    if r.take(8)? != MAGIC {
        return None;
    }
    let klen = r.u32()? as usize;
    if r.take(klen)? != key.as_bytes() {
        return None;
    }
    let n = r.u32()? as usize;
    if n != spec.quantizers.len() {
        return None;
    }
    let mut rungs = Vec::with_capacity(n);
    for _ in 0..n {
        let quantizer = r.u32()?;
        let frames = r.u32()? as usize;
        // Every frame takes at least 9 bytes: a count beyond what is left is a broken file.
        if frames > r.0.len() / 9 {
            return None;
        }
        let mut rung = Rung {
            quantizer,
            frames: Vec::with_capacity(frames),
        };
        for _ in 0..frames {
            let frame = r.u32()?;
            let kind = FrameType::from_letter(char::from(*r.take(1)?.first()?));
            let len = r.u32()? as usize;
            let data = r.take(len)?.to_vec();
            rung.frames.push(CodedFrame { frame, kind, data });
        }
        rungs.push(rung);
    }
    r.0.is_empty().then_some(rungs)
}

/// Writes `ladder` into `dir`.
pub fn store(dir: &Path, ladder: &Ladder) -> std::io::Result<PathBuf> {
    let key = ladder.spec.key();
    let to = path(dir, &key);
    let parent = to.parent().unwrap_or(dir);
    std::fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(
        ".{}.{}.tmp",
        to.file_name().and_then(|n| n.to_str()).unwrap_or("ladder"),
        std::process::id()
    ));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    let u32le = |v: usize| u32::try_from(v).unwrap_or(u32::MAX).to_le_bytes();
    out.write_all(MAGIC)?;
    out.write_all(&u32le(key.len()))?;
    out.write_all(key.as_bytes())?;
    out.write_all(&u32le(ladder.rungs.len()))?;
    for rung in &ladder.rungs {
        out.write_all(&rung.quantizer.to_le_bytes())?;
        out.write_all(&u32le(rung.frames.len()))?;
        for f in &rung.frames {
            out.write_all(&f.frame.to_le_bytes())?;
            out.write_all(&[f.kind.letter() as u8])?;
            out.write_all(&u32le(f.data.len()))?;
            out.write_all(&f.data)?;
        }
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&tmp, &to)?;
    Ok(to)
}

/// Reads a byte slice front to back.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
}
