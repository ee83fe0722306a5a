//! YUV4MPEG2 (`.y4m`, what `ffmpeg -f yuv4mpegpipe` writes) and raw planar YUV, 8-bit.
//!
//! Reading is bounded: a header or frame line longer than [`MAX_LINE`] is an error, a picture
//! larger than [`MAX_SIDE`] on a side is refused, and one frame's buffer is all that is held.

use crate::picture::{Chroma, Picture};
use std::io::{BufRead, Read, Write};

/// The longest header or `FRAME` line accepted.
pub const MAX_LINE: usize = 4096;
/// The largest width or height accepted.
pub const MAX_SIDE: usize = 16_384;

/// Why a Y4M or raw YUV stream could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Y4mError {
    /// The input does not start with `YUV4MPEG2 `: it may be raw YUV, which needs its format
    /// given ([`Reader::raw`]).
    #[error("not a YUV4MPEG2 stream (it must start with 'YUV4MPEG2 '); for raw planar YUV give its size (quality --size WxH)")]
    NotY4m,
    /// The header (or a `FRAME` line) is unusable: an unparsable or unsupported parameter, a
    /// size outside 1 to [`MAX_SIDE`], a line longer than [`MAX_LINE`] or cut short.
    #[error("YUV4MPEG2 header: {0}")]
    Header(String),
    /// A frame is bad: no `FRAME` marker, or its samples cut short.
    #[error("frame {frame}: {what}")]
    Frame {
        /// The frame, numbered from 0.
        frame: u64,
        /// What is wrong with it.
        what: String,
    },
    /// Reading the input failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The stream's format: size, sampling, frame rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    /// Luma width, pixels (1 to [`MAX_SIDE`]).
    pub width: usize,
    /// Luma height, pixels (1 to [`MAX_SIDE`]).
    pub height: usize,
    /// Chroma subsampling (Y4M's `C` parameter; 4:2:0 when the header does not say).
    pub chroma: Chroma,
    /// Frames per second as a fraction (25:1 when the header does not say).
    pub fps: (u32, u32),
}

/// Reads pictures from a Y4M stream, or from raw YUV of a known format.
pub struct Reader<R> {
    input: R,
    format: Format,
    y4m: bool,
    frames: u64,
}

fn read_line(input: &mut impl BufRead, what: &str) -> Result<Option<Vec<u8>>, Y4mError> {
    let mut line = Vec::new();
    let n = input
        .by_ref()
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(Y4mError::Header(format!(
            "{what} line is longer than {MAX_LINE} bytes or cut short"
        )));
    }
    line.pop();
    Ok(Some(line))
}

impl<R: BufRead> Reader<R> {
    /// A Y4M stream: reads its header.
    pub fn y4m(mut input: R) -> Result<Self, Y4mError> {
        let head = input.fill_buf()?;
        if !b"YUV4MPEG2 ".starts_with(&head[..head.len().min(10)]) || head.is_empty() {
            return Err(Y4mError::NotY4m);
        }
        let line = read_line(&mut input, "the header")?.ok_or(Y4mError::NotY4m)?;
        let text = String::from_utf8_lossy(&line);
        let mut words = text.split(' ');
        if words.next() != Some("YUV4MPEG2") {
            return Err(Y4mError::NotY4m);
        }
        let (mut width, mut height, mut chroma, mut fps) = (0, 0, Chroma::C420, (25, 1));
        for w in words.filter(|w| !w.is_empty()) {
            let (tag, value) = w.split_at(1);
            let bad = || Y4mError::Header(format!("'{w}' is not a valid parameter"));
            match tag {
                "W" => width = value.parse().map_err(|_| bad())?,
                "H" => height = value.parse().map_err(|_| bad())?,
                "F" => {
                    let (n, d) = value.split_once(':').ok_or_else(bad)?;
                    fps = (n.parse().map_err(|_| bad())?, d.parse().map_err(|_| bad())?);
                }
                "C" => {
                    chroma = match value {
                        "420" | "420jpeg" | "420paldv" | "420mpeg2" => Chroma::C420,
                        "422" => Chroma::C422,
                        "444" => Chroma::C444,
                        "mono" => Chroma::Mono,
                        other => {
                            return Err(Y4mError::Header(format!(
                                "chroma '{other}' is not supported: 8-bit 420, 422, 444 or mono (convert with ffmpeg -pix_fmt yuv420p)"
                            )))
                        }
                    }
                }
                _ => {} // interlacing, aspect, comments: not needed to compare pictures
            }
        }
        if width == 0 || height == 0 || width > MAX_SIDE || height > MAX_SIDE {
            return Err(Y4mError::Header(format!(
                "picture {width}x{height}: each side must be 1 to {MAX_SIDE}"
            )));
        }
        Ok(Reader {
            input,
            format: Format {
                width,
                height,
                chroma,
                fps,
            },
            y4m: true,
            frames: 0,
        })
    }

    /// Raw planar YUV of `format`, frame after frame.
    pub fn raw(input: R, format: Format) -> Result<Self, Y4mError> {
        if format.width == 0
            || format.height == 0
            || format.width > MAX_SIDE
            || format.height > MAX_SIDE
        {
            return Err(Y4mError::Header(format!(
                "picture {}x{}: each side must be 1 to {MAX_SIDE}",
                format.width, format.height
            )));
        }
        Ok(Reader {
            input,
            format,
            y4m: false,
            frames: 0,
        })
    }

    /// The stream's format: from the Y4M header, or as given for raw YUV.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The next picture into `pic` (reusing its buffer); `false` at the end of the stream.
    pub fn next_into(&mut self, pic: &mut Picture) -> Result<bool, Y4mError> {
        let f = self.format;
        let frame = self.frames;
        if self.y4m {
            let Some(line) = read_line(&mut self.input, "a FRAME")? else {
                return Ok(false);
            };
            if !line.starts_with(b"FRAME") {
                return Err(Y4mError::Frame {
                    frame,
                    what: "does not start with FRAME".into(),
                });
            }
        }
        let n = f.chroma.frame_bytes(f.width, f.height);
        pic.width = f.width;
        pic.height = f.height;
        pic.chroma = f.chroma;
        pic.data.resize(n, 0);
        let mut got = 0;
        while got < n {
            match self.input.read(&mut pic.data[got..])? {
                0 => break,
                k => got += k,
            }
        }
        if got == 0 && !self.y4m {
            return Ok(false);
        }
        if got < n {
            return Err(Y4mError::Frame {
                frame,
                what: format!("cut short: {got} of {n} bytes"),
            });
        }
        self.frames += 1;
        Ok(true)
    }
}

/// Writes pictures as a Y4M stream.
pub struct Writer<W> {
    out: W,
}

impl<W: Write> Writer<W> {
    /// Writes the stream header for format `f` (progressive, square pixels) to `out`.
    pub fn new(mut out: W, f: Format) -> std::io::Result<Self> {
        writeln!(
            out,
            "YUV4MPEG2 W{} H{} F{}:{} Ip A1:1 C{}",
            f.width,
            f.height,
            f.fps.0,
            f.fps.1,
            f.chroma.y4m_name()
        )?;
        Ok(Writer { out })
    }

    /// Writes one picture as a `FRAME`; it must be of the header's format (not checked).
    pub fn write(&mut self, p: &Picture) -> std::io::Result<()> {
        self.out.write_all(b"FRAME\n")?;
        self.out.write_all(&p.data)
    }

    /// The underlying writer back (not flushed here).
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_pictures_read_back() {
        let f = Format {
            width: 6,
            height: 4,
            chroma: Chroma::C420,
            fps: (30, 1),
        };
        let mut a = Picture::black(6, 4, Chroma::C420);
        a.data[3] = 200;
        let mut w = Writer::new(Vec::new(), f).unwrap();
        w.write(&a).unwrap();
        w.write(&Picture::black(6, 4, Chroma::C420)).unwrap();
        let bytes = w.into_inner();
        let mut r = Reader::y4m(&bytes[..]).unwrap();
        assert_eq!(r.format(), f);
        let mut p = Picture::black(1, 1, Chroma::Mono);
        assert!(r.next_into(&mut p).unwrap());
        assert_eq!(p, a);
        assert!(r.next_into(&mut p).unwrap());
        assert!(!r.next_into(&mut p).unwrap());
    }

    #[test]
    fn bad_streams_get_clear_errors() {
        assert!(matches!(Reader::y4m(&b"RIFF"[..]), Err(Y4mError::NotY4m)));
        let e = Reader::y4m(&b"YUV4MPEG2 W0 H4\n"[..]).err().unwrap();
        assert!(e.to_string().contains("each side"), "{e}");
        let e = Reader::y4m(&b"YUV4MPEG2 W4 H4 C420p10\n"[..])
            .err()
            .unwrap();
        assert!(e.to_string().contains("8-bit"), "{e}");
        let mut r = Reader::y4m(&b"YUV4MPEG2 W4 H4\nFRAME\n\x10\x10"[..]).unwrap();
        let e = r
            .next_into(&mut Picture::black(4, 4, Chroma::C420))
            .unwrap_err();
        assert!(e.to_string().contains("cut short"), "{e}");
        let long = format!("YUV4MPEG2 {}\n", "X".repeat(5000));
        assert!(Reader::y4m(long.as_bytes()).is_err());
    }
}
