//! The user's own video as content: a Y4M file, or raw planar 4:2:0 (`.yuv`) of a given size.
//! Frames are read in order; a clip shorter than the stream plays again from its start (as a
//! looped source does), and asking for an earlier frame reads the file again from the start.

use crate::pattern::{Frame, Pictures};
use crate::MediaError;
use metronome_quality::y4m::{Format, Reader};
use metronome_quality::{Chroma, Picture};
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// A clip's pictures (see the module).
pub struct Clip {
    path: PathBuf,
    format: Format,
    y4m: bool,
    reader: Reader<BufReader<std::fs::File>>,
    /// The next frame the reader gives, and the clip's length once its end has been met.
    next: u64,
    length: Option<u64>,
    picture: Picture,
}

impl std::fmt::Debug for Clip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clip").field("path", &self.path).finish()
    }
}

impl Clip {
    /// Opens `path` for pictures of `width`×`height` at `fps`: a `.y4m` must be of that size
    /// and 4:2:0; a `.yuv` is read as raw 4:2:0 of that size.
    pub fn open(path: &Path, width: u32, height: u32, fps: u32) -> Result<Clip, MediaError> {
        let y4m = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("y4m"));
        let reader = open_reader(path, y4m, width, height, fps)?;
        let format = reader.format();
        let (w, h) = (width as usize, height as usize);
        if (format.width, format.height) != (w, h) || format.chroma != Chroma::C420 {
            return Err(MediaError::Config(format!(
                "{}: the clip is {}x{} {}, the flow's video {w}x{h} 4:2:0: convert it (ffmpeg -i {} -vf scale={w}:{h} -pix_fmt yuv420p clip.y4m) or change video =",
                path.display(),
                format.width,
                format.height,
                format.chroma.y4m_name(),
                path.display()
            )));
        }
        Ok(Clip {
            path: path.to_path_buf(),
            format,
            y4m,
            reader,
            next: 0,
            length: None,
            picture: Picture::black(w, h, Chroma::C420),
        })
    }

    /// What the clip is, for a cache key: its path, size and modification time.
    pub fn identity(path: &Path) -> Result<String, MediaError> {
        let meta = std::fs::metadata(path).map_err(|source| MediaError::Open {
            path: path.display().to_string(),
            source,
        })?;
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(format!(
            "clip {} {} bytes {modified}",
            abs.display(),
            meta.len()
        ))
    }

    fn rewind(&mut self) -> Result<(), MediaError> {
        let f = self.format;
        self.reader = open_reader(
            &self.path,
            self.y4m,
            f.width as u32,
            f.height as u32,
            f.fps.0,
        )?;
        self.next = 0;
        Ok(())
    }
}

fn open_reader(
    path: &Path,
    y4m: bool,
    width: u32,
    height: u32,
    fps: u32,
) -> Result<Reader<BufReader<std::fs::File>>, MediaError> {
    let file = std::fs::File::open(path).map_err(|source| MediaError::Open {
        path: path.display().to_string(),
        source,
    })?;
    let input = BufReader::new(file);
    let bad = |e: metronome_quality::y4m::Y4mError| {
        MediaError::Config(format!("{}: {e}", path.display()))
    };
    if y4m {
        Reader::y4m(input).map_err(bad)
    } else {
        let format = Format {
            width: width as usize,
            height: height as usize,
            chroma: Chroma::C420,
            fps: (fps, 1),
        };
        Reader::raw(input, format).map_err(bad)
    }
}

impl Pictures for Clip {
    fn picture(&mut self, index: u64, frame: &mut Frame) -> Result<(), MediaError> {
        let index = self.length.map_or(index, |n| index % n);
        if index < self.next {
            self.rewind()?;
        }
        while self.next <= index {
            let read = self
                .reader
                .next_into(&mut self.picture)
                .map_err(|e| MediaError::Config(format!("{}: {e}", self.path.display())))?;
            if !read {
                if self.next == 0 {
                    return Err(MediaError::Config(format!(
                        "{}: the clip has no frames",
                        self.path.display()
                    )));
                }
                // Its end: it plays again from the start.
                self.length = Some(self.next);
                let again = index % self.next;
                self.rewind()?;
                return self.picture(again, frame);
            }
            self.next += 1;
        }
        frame.as_bytes_mut().copy_from_slice(&self.picture.data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_testkit::TempDir;

    #[test]
    fn a_raw_clip_plays_in_order_again_from_its_start_and_back() {
        let dir = TempDir::new("clip");
        let path = dir.join("c.yuv");
        // Three 4x2 frames whose luma is their number.
        let mut bytes = Vec::new();
        for k in 0..3u8 {
            bytes.extend(std::iter::repeat_n(k, 8));
            bytes.extend(std::iter::repeat_n(128, 4));
        }
        std::fs::write(&path, bytes).unwrap();
        let mut c = Clip::open(&path, 4, 2, 25).unwrap();
        let mut f = Frame::new(4, 2).unwrap();
        for (i, want) in [(0, 0), (1, 1), (2, 2), (3, 0), (7, 1), (1, 1)] {
            c.picture(i, &mut f).unwrap();
            assert_eq!(f.y()[0], want, "frame {i}");
        }
        let wrong = Clip::open(&dir.join("nope.y4m"), 4, 2, 25).unwrap_err();
        assert!(wrong.to_string().contains("nope.y4m"), "{wrong}");
    }
}
