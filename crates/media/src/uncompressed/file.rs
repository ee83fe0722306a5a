//! Uncompressed video files: raw I420, UYVY or v210 frames back to back (size and rate given by
//! the user), or Y4M (size, rate and colourspace from its header). Optionally looped.

use super::convert::{to_rfc4175, Layout};
use super::format::{Depth, Sampling, VideoFormat};
use super::y4m::{read_header_line, read_line_into, Y4mHeader, MAX_HEADER_LINE};
use super::{RawFrame, RawSource};
use crate::MediaError;
use std::fs::File;
use std::io::{BufReader, ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;

/// What a raw video file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawFileKind {
    /// Planar 4:2:0 8-bit (Y, then Cb, then Cr), as `ffmpeg -pix_fmt yuv420p -f rawvideo`.
    I420,
    /// Packed 4:2:2 8-bit C'b Y'0 C'r Y'1 (`-pix_fmt uyvy422`).
    Uyvy,
    /// Packed 4:2:2 10-bit v210 (`-c:v v210`), lines padded to 128 bytes.
    V210,
    /// YUV4MPEG2 with a header (`-f yuv4mpegpipe`).
    Y4m,
}

impl RawFileKind {
    /// As `--raw-format` and file names spell it: `i420`, `uyvy`, `v210`, `y4m`.
    pub fn name(self) -> &'static str {
        match self {
            RawFileKind::I420 => "i420",
            RawFileKind::Uyvy => "uyvy",
            RawFileKind::V210 => "v210",
            RawFileKind::Y4m => "y4m",
        }
    }

    /// Guesses from the file name's extension (`.yuv`/`.i420`, `.uyvy`, `.v210`, `.y4m`).
    pub fn from_path(path: &Path) -> Option<RawFileKind> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "yuv" | "i420" => Some(RawFileKind::I420),
            "uyvy" => Some(RawFileKind::Uyvy),
            "v210" => Some(RawFileKind::V210),
            "y4m" => Some(RawFileKind::Y4m),
            _ => None,
        }
    }
}

/// Frames from a file, converted to RFC 4175 payload order.
pub struct RawFileSource {
    path: String,
    kind: RawFileKind,
    reader: BufReader<File>,
    format: VideoFormat,
    layout: Layout,
    /// Where the first frame starts (after the Y4M stream header).
    data_start: u64,
    looping: bool,
    next_index: u64,
    /// Frames read since the last rewind (a loop over an empty file must not spin).
    since_rewind: u64,
    scratch: Vec<u8>,
    /// The last Y4M frame header line (reused).
    line: Vec<u8>,
}

impl RawFileSource {
    /// Opens a headerless raw file of `kind` (not [`RawFileKind::Y4m`]) whose frames have the
    /// given size and rate.
    pub fn open_raw(
        path: impl AsRef<Path>,
        kind: RawFileKind,
        width: u32,
        height: u32,
        fps_num: u32,
        fps_den: u32,
    ) -> Result<RawFileSource, MediaError> {
        let (sampling, depth, layout) = match kind {
            RawFileKind::I420 => (Sampling::Ycbcr420, Depth::Eight, Layout::I420),
            RawFileKind::Uyvy => (Sampling::Ycbcr422, Depth::Eight, Layout::Uyvy),
            RawFileKind::V210 => (Sampling::Ycbcr422, Depth::Ten, Layout::V210),
            RawFileKind::Y4m => return Self::open_y4m(path),
        };
        let format = VideoFormat::new(width, height, sampling, depth, fps_num, fps_den)?;
        let (path, file) = open(path.as_ref())?;
        let len = file.metadata().map_err(|e| read_err(&path, e))?.len();
        let frame = layout.frame_len(&format) as u64;
        if len == 0 || len % frame != 0 {
            return Err(MediaError::Config(format!(
                "'{path}' has {len} bytes, not a whole number of {} frames of {frame} bytes \
                 ({}x{}): check the size and the pixel format",
                kind.name(),
                width,
                height
            )));
        }
        Ok(Self::with(path, kind, file, format, layout, 0))
    }

    /// Opens a Y4M file; its header gives the size, rate and colourspace.
    pub fn open_y4m(path: impl AsRef<Path>) -> Result<RawFileSource, MediaError> {
        let (path, file) = open(path.as_ref())?;
        let mut reader = BufReader::new(file);
        let bad =
            |why: String| MediaError::Config(format!("'{path}' is not a usable Y4M file: {why}"));
        let line = read_header_line(&mut reader)
            .map_err(&bad)?
            .ok_or_else(|| bad("it is empty".into()))?;
        let header = Y4mHeader::parse(&line).map_err(&bad)?;
        let (format, layout) = header.format().map_err(&bad)?;
        let data_start = line.len() as u64 + 1;
        let mut src = Self::with(
            path,
            RawFileKind::Y4m,
            reader.into_inner(),
            format,
            layout,
            0,
        );
        src.data_start = data_start;
        src.rewind()?;
        Ok(src)
    }

    /// Opens `path` by its extension: `.y4m` by its header, raw kinds with the size and rate given.
    pub fn open(
        path: impl AsRef<Path>,
        size_rate: Option<(u32, u32, u32, u32)>,
    ) -> Result<RawFileSource, MediaError> {
        let p = path.as_ref();
        let kind = RawFileKind::from_path(p).ok_or_else(|| {
            MediaError::Config(format!(
                "'{}': unknown raw video file type; name it .y4m, .yuv (I420), .uyvy or .v210",
                p.display()
            ))
        })?;
        match (kind, size_rate) {
            (RawFileKind::Y4m, _) => Self::open_y4m(p),
            (k, Some((w, h, n, d))) => Self::open_raw(p, k, w, h, n, d),
            (k, None) => Err(MediaError::Config(format!(
                "'{}' is a headerless {} file: give its size and frame rate",
                p.display(),
                k.name()
            ))),
        }
    }

    fn with(
        path: String,
        kind: RawFileKind,
        file: File,
        format: VideoFormat,
        layout: Layout,
        data_start: u64,
    ) -> RawFileSource {
        RawFileSource {
            path,
            kind,
            reader: BufReader::with_capacity(1 << 20, file),
            format,
            layout,
            data_start,
            looping: false,
            next_index: 0,
            since_rewind: 0,
            scratch: Vec::new(),
            line: Vec::with_capacity(MAX_HEADER_LINE + 1),
        }
    }

    /// Starts again at the first frame at the end of the file.
    pub fn looping(mut self, on: bool) -> RawFileSource {
        self.looping = on;
        self
    }

    fn rewind(&mut self) -> Result<(), MediaError> {
        self.since_rewind = 0;
        self.reader
            .seek(SeekFrom::Start(self.data_start))
            .map(|_| ())
            .map_err(|e| read_err(&self.path, e))
    }

    /// Reads one frame's bytes into the scratch buffer; `Ok(false)` at a clean end of file.
    fn read_one(&mut self) -> Result<bool, MediaError> {
        if self.kind == RawFileKind::Y4m {
            match read_line_into(&mut self.reader, &mut self.line) {
                Ok(false) => return Ok(false),
                Ok(true) if self.line == b"FRAME" || self.line.starts_with(b"FRAME ") => {}
                Ok(true) => {
                    return Err(MediaError::Config(format!(
                        "'{}': frame {} does not start with FRAME (found '{}')",
                        self.path,
                        self.next_index,
                        String::from_utf8_lossy(&self.line[..self.line.len().min(16)])
                    )))
                }
                Err(why) => return Err(MediaError::Config(format!("'{}': {why}", self.path))),
            }
        }
        let n = self.layout.frame_len(&self.format);
        self.scratch.resize(n, 0);
        match self.reader.read_exact(&mut self.scratch) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::UnexpectedEof && self.kind != RawFileKind::Y4m => {
                Ok(false)
            }
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => Err(MediaError::Config(format!(
                "'{}': the file ends inside frame {}",
                self.path, self.next_index
            ))),
            Err(e) => Err(read_err(&self.path, e)),
        }
    }
}

impl RawSource for RawFileSource {
    fn format(&self) -> VideoFormat {
        self.format
    }

    fn next_frame(&mut self, into: &mut RawFrame) -> Result<bool, MediaError> {
        let mut got = self.read_one()?;
        if !got && self.looping && self.since_rewind > 0 {
            self.rewind()?;
            got = self.read_one()?;
        }
        if !got {
            return Ok(false);
        }
        into.reshape(self.format);
        to_rfc4175(&self.format, self.layout, &self.scratch, &mut into.data)?;
        into.index = self.next_index;
        self.next_index += 1;
        self.since_rewind += 1;
        Ok(true)
    }

    fn describe(&self) -> String {
        format!(
            "{} file '{}' {}{}",
            self.kind.name(),
            self.path,
            self.format,
            if self.looping { ", looping" } else { "" }
        )
    }
}

fn open(path: &Path) -> Result<(String, File), MediaError> {
    let name = path.display().to_string();
    File::open(path)
        .map(|f| (name.clone(), f))
        .map_err(|source| MediaError::Open { path: name, source })
}

fn read_err(path: &str, source: std::io::Error) -> MediaError {
    MediaError::Read {
        path: path.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uncompressed::convert::from_rfc4175;
    use crate::uncompressed::{RawTestPattern, Y4mWriter};
    use metronome_testkit::TempDir;

    fn frames(fmt: VideoFormat, n: u64) -> Vec<RawFrame> {
        let p = RawTestPattern::new(fmt).unwrap();
        (0..n)
            .map(|i| {
                let mut f = RawFrame::new(fmt);
                p.render(i, &mut f);
                f
            })
            .collect()
    }

    #[test]
    fn raw_files_of_each_kind_read_back_and_loop() {
        let dir = TempDir::new("raw-file");
        for (kind, s, d, layout) in [
            (
                RawFileKind::I420,
                Sampling::Ycbcr420,
                Depth::Eight,
                Layout::I420,
            ),
            (
                RawFileKind::Uyvy,
                Sampling::Ycbcr422,
                Depth::Eight,
                Layout::Uyvy,
            ),
            (
                RawFileKind::V210,
                Sampling::Ycbcr422,
                Depth::Ten,
                Layout::V210,
            ),
        ] {
            let fmt = VideoFormat::new(52, 6, s, d, 25, 1).unwrap();
            let want = frames(fmt, 2);
            let mut bytes = Vec::new();
            for f in &want {
                let mut out = vec![0u8; layout.frame_len(&fmt)];
                from_rfc4175(&fmt, layout, &f.data, &mut out).unwrap();
                bytes.extend_from_slice(&out);
            }
            let path = dir.join(format!("a.{kind:?}"));
            std::fs::write(&path, &bytes).unwrap();
            let mut src = RawFileSource::open_raw(&path, kind, 52, 6, 25, 1)
                .unwrap()
                .looping(true);
            let mut f = RawFrame::new(fmt);
            for i in 0..5 {
                assert!(src.next_frame(&mut f).unwrap());
                assert_eq!(f.data, want[i % 2].data, "{kind:?} frame {i}");
                assert_eq!(f.index, i as u64);
            }
            let mut once = RawFileSource::open_raw(&path, kind, 52, 6, 25, 1).unwrap();
            assert!(once.next_frame(&mut f).unwrap() && once.next_frame(&mut f).unwrap());
            assert!(!once.next_frame(&mut f).unwrap());
            // A wrong size is caught at open with the reason.
            let h = if kind == RawFileKind::I420 { 8 } else { 9 };
            let e = RawFileSource::open_raw(&path, kind, 52, h, 25, 1)
                .err()
                .unwrap();
            assert!(e.to_string().contains("whole number"), "{e}");
        }
    }

    #[test]
    fn y4m_written_then_read_is_the_same() {
        let dir = TempDir::new("raw-file");
        for (s, d) in [
            (Sampling::Ycbcr420, Depth::Eight),
            (Sampling::Ycbcr422, Depth::Eight),
            (Sampling::Ycbcr422, Depth::Ten),
        ] {
            let fmt = VideoFormat::new(64, 48, s, d, 30000, 1001).unwrap();
            let want = frames(fmt, 3);
            let path = dir.join(format!("b-{}.y4m", fmt.frame_bytes()));
            let mut w = Y4mWriter::new(File::create(&path).unwrap(), fmt).unwrap();
            for f in &want {
                w.write_frame(f).unwrap();
            }
            w.flush().unwrap();
            drop(w);
            let mut src = RawFileSource::open(&path, None).unwrap();
            assert_eq!(src.format(), fmt);
            let mut f = RawFrame::new(fmt);
            for (i, wf) in want.iter().enumerate() {
                assert!(src.next_frame(&mut f).unwrap());
                assert_eq!(f.data, wf.data, "{fmt} frame {i}");
            }
            assert!(!src.next_frame(&mut f).unwrap());
        }
    }

    #[test]
    fn broken_y4m_files_are_clear_errors() {
        let dir = TempDir::new("raw-file");
        let path = dir.join("bad.y4m");
        std::fs::write(&path, b"YUV4MPEG2 W4 H2 F25:1 C420jpeg\nFRAME\n123").unwrap();
        let mut src = RawFileSource::open_y4m(&path).unwrap();
        let mut f = RawFrame::new(src.format());
        let e = src.next_frame(&mut f).unwrap_err().to_string();
        assert!(e.contains("ends inside frame 0"), "{e}");
        std::fs::write(
            &path,
            b"YUV4MPEG2 W4 H2 F25:1 C420jpeg\nFRAMX\n123456789012",
        )
        .unwrap();
        let mut src = RawFileSource::open_y4m(&path).unwrap();
        assert!(src.next_frame(&mut f).is_err());
        std::fs::write(&path, b"RIFF").unwrap();
        let e = RawFileSource::open_y4m(&path).err().unwrap().to_string();
        assert!(e.contains("not a usable Y4M"), "{e}");
        // A looping empty Y4M file ends instead of spinning.
        std::fs::write(&path, b"YUV4MPEG2 W4 H2 F25:1\n").unwrap();
        let mut src = RawFileSource::open_y4m(&path).unwrap().looping(true);
        assert!(!src.next_frame(&mut f).unwrap());
        assert!(RawFileSource::open(dir.join("x.mkv"), None).is_err());
        assert!(RawFileSource::open(dir.join("x.uyvy"), None).is_err());
    }
}
