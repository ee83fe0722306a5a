//! YUV4MPEG2 (Y4M): the stream header and frame headers, read with hard limits, and a writer
//! whose files ffmpeg reads.
//!
//! Each format is written with the chroma it really has: 4:2:0 as `C420jpeg` (I420 planes),
//! 4:2:2 8-bit as `C422`, 4:2:2 10-bit as `C422p10` (16-bit little-endian samples), and RGB as
//! `C444` (converted to BT.601 limited-range Y'CbCr: Y4M has no RGB, so this one is lossy).

use super::convert::{from_rfc4175, Layout};
use super::format::{Depth, Sampling, VideoFormat};
use super::RawFrame;
use crate::MediaError;
use std::io::{BufRead, Write};

/// The longest stream or frame header line accepted.
pub const MAX_HEADER_LINE: usize = 1024;
const MAGIC: &str = "YUV4MPEG2";

/// The fields of a Y4M stream header that matter here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Y4mHeader {
    /// `W`: picture width, pixels.
    pub width: u32,
    /// `H`: picture height, pixels.
    pub height: u32,
    /// `F`'s numerator: frames per second are `fps_num / fps_den`.
    pub fps_num: u32,
    /// `F`'s denominator.
    pub fps_den: u32,
    /// The `C` tag without the `C` (`420jpeg` when absent, as the format defines).
    pub colorspace: String,
}

impl Y4mHeader {
    /// Parses a header line (without its newline).
    pub fn parse(line: &str) -> Result<Y4mHeader, String> {
        let mut it = line.split(' ').filter(|t| !t.is_empty());
        if it.next() != Some(MAGIC) {
            return Err(format!("it does not start with '{MAGIC}'"));
        }
        let (mut w, mut h, mut f) = (None, None, None);
        let mut colorspace = "420jpeg".to_string();
        for tok in it {
            let (tag, val) = tok.split_at(1);
            match tag {
                "W" => w = Some(num(val, "width W")?),
                "H" => h = Some(num(val, "height H")?),
                "F" => {
                    let (n, d) = val
                        .split_once(':')
                        .ok_or_else(|| format!("frame rate 'F{val}' is not N:D"))?;
                    f = Some((num(n, "frame rate F")?, num(d, "frame rate F")?));
                }
                "C" => colorspace = val.to_string(),
                _ => {} // I (interlacing), A (aspect), X (extensions): not needed
            }
        }
        let width = w.ok_or("no width (W)")?;
        let height = h.ok_or("no height (H)")?;
        let (fps_num, fps_den) = f.ok_or("no frame rate (F)")?;
        Ok(Y4mHeader {
            width,
            height,
            fps_num,
            fps_den,
            colorspace,
        })
    }

    /// The video format and the file layout of this colourspace.
    pub fn format(&self) -> Result<(VideoFormat, Layout), String> {
        let (sampling, depth, layout) = match self.colorspace.as_str() {
            "420" | "420jpeg" | "420paldv" | "420mpeg2" => {
                (Sampling::Ycbcr420, Depth::Eight, Layout::I420)
            }
            "422" => (Sampling::Ycbcr422, Depth::Eight, Layout::Yuv422p),
            "422p10" => (Sampling::Ycbcr422, Depth::Ten, Layout::Yuv422p10le),
            other => {
                return Err(format!(
                    "colourspace C{other} is not supported (use C420jpeg, C422 or C422p10, e.g. \
                     ffmpeg -pix_fmt yuv420p, yuv422p or yuv422p10le)"
                ))
            }
        };
        let f = VideoFormat::new(
            self.width,
            self.height,
            sampling,
            depth,
            self.fps_num,
            self.fps_den,
        )
        .map_err(|e| e.to_string())?;
        Ok((f, layout))
    }
}

fn num(s: &str, what: &str) -> Result<u32, String> {
    s.parse()
        .map_err(|_| format!("{what} '{s}' is not a number"))
}

/// Reads one line of at most [`MAX_HEADER_LINE`] bytes, without its newline. `Ok(None)` at a
/// clean end of input (no byte read).
pub fn read_header_line(r: &mut impl BufRead) -> Result<Option<String>, String> {
    let mut line = Vec::new();
    if !read_line_into(r, &mut line)? {
        return Ok(None);
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| "a header line is not text".into())
}

/// Reads one line of at most [`MAX_HEADER_LINE`] bytes into `line` (cleared first, newline
/// dropped), never holding more than that. `Ok(false)` at a clean end of input. Reusing `line`
/// makes per-frame header reads allocation-free.
pub fn read_line_into(r: &mut impl BufRead, line: &mut Vec<u8>) -> Result<bool, String> {
    line.clear();
    loop {
        let buf = r.fill_buf().map_err(|e| e.to_string())?;
        if buf.is_empty() {
            return if line.is_empty() {
                Ok(false)
            } else {
                Err("the file ends inside a header line".into())
            };
        }
        let room = MAX_HEADER_LINE + 1 - line.len();
        let (n, done) = match buf.iter().take(room).position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len().min(room), false),
        };
        line.extend_from_slice(&buf[..n]);
        r.consume(n);
        if done {
            line.pop();
            return Ok(true);
        }
        if line.len() > MAX_HEADER_LINE {
            return Err(format!(
                "a header line is longer than {MAX_HEADER_LINE} bytes"
            ));
        }
    }
}

/// Writes frames as a Y4M stream. Allocates its conversion buffer once.
pub struct Y4mWriter<W: Write> {
    out: W,
    format: VideoFormat,
    layout: Layout,
    scratch: Vec<u8>,
}

impl<W: Write> Y4mWriter<W> {
    /// Writes the stream header for `format`.
    pub fn new(mut out: W, format: VideoFormat) -> Result<Y4mWriter<W>, MediaError> {
        format.validate()?;
        let (layout, c) = match (format.sampling, format.depth) {
            (Sampling::Ycbcr420, _) => (Layout::I420, "C420jpeg XYSCSS=420JPEG"),
            (Sampling::Ycbcr422, Depth::Eight) => (Layout::Yuv422p, "C422 XYSCSS=422"),
            (Sampling::Ycbcr422, Depth::Ten) => (Layout::Yuv422p10le, "C422p10 XYSCSS=422P10"),
            (Sampling::Rgb, _) => (Layout::Yuv444p, "C444 XYSCSS=444"),
        };
        writeln!(
            out,
            "{MAGIC} W{} H{} F{}:{} Ip A1:1 {c} XCOLORRANGE=LIMITED",
            format.width, format.height, format.fps_num, format.fps_den
        )
        .map_err(write_err)?;
        Ok(Y4mWriter {
            out,
            format,
            layout,
            scratch: vec![0; layout.frame_len(&format)],
        })
    }

    /// Appends one frame (which must have the writer's format).
    pub fn write_frame(&mut self, frame: &RawFrame) -> Result<(), MediaError> {
        if frame.format != self.format {
            return Err(MediaError::Config(format!(
                "Y4M writer of {} given a frame of {}",
                self.format, frame.format
            )));
        }
        from_rfc4175(&self.format, self.layout, &frame.data, &mut self.scratch)?;
        self.out.write_all(b"FRAME\n").map_err(write_err)?;
        self.out.write_all(&self.scratch).map_err(write_err)
    }

    /// Flushes the underlying writer; a failure is reported as [`MediaError::Read`] of
    /// `Y4M output`.
    pub fn flush(&mut self) -> Result<(), MediaError> {
        self.out.flush().map_err(write_err)
    }

    /// The underlying writer back (not flushed here).
    pub fn into_inner(self) -> W {
        self.out
    }
}

fn write_err(e: std::io::Error) -> MediaError {
    MediaError::Read {
        path: "Y4M output".into(),
        source: e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ffmpeg_headers() {
        let h =
            Y4mHeader::parse("YUV4MPEG2 W720 H576 F25:1 Ip A1:1 C420jpeg XYSCSS=420JPEG").unwrap();
        assert_eq!((h.width, h.height, h.fps_num, h.fps_den), (720, 576, 25, 1));
        let (f, l) = h.format().unwrap();
        assert_eq!((f.sampling, l), (Sampling::Ycbcr420, Layout::I420));
        let h = Y4mHeader::parse("YUV4MPEG2 W64 H48 F30000:1001 C422p10").unwrap();
        assert_eq!(h.format().unwrap().0.depth, Depth::Ten);
        let h = Y4mHeader::parse("YUV4MPEG2 W64 H48 F25:1").unwrap();
        assert_eq!(h.colorspace, "420jpeg");
    }

    #[test]
    fn bad_headers_say_why() {
        for (line, why) in [
            ("YUV4MPEG W1 H1 F1:1", "does not start"),
            ("YUV4MPEG2 H1 F1:1", "no width"),
            ("YUV4MPEG2 W1 H1", "no frame rate"),
            ("YUV4MPEG2 Wx H1 F1:1", "not a number"),
            ("YUV4MPEG2 W2 H2 F25", "N:D"),
        ] {
            let e = Y4mHeader::parse(line).unwrap_err();
            assert!(e.contains(why), "{line}: {e}");
        }
        let h = Y4mHeader::parse("YUV4MPEG2 W2 H2 F25:1 Cmono").unwrap();
        assert!(h.format().unwrap_err().contains("Cmono"));
        let h = Y4mHeader::parse("YUV4MPEG2 W3 H2 F25:1 C420").unwrap();
        assert!(h.format().is_err());
    }

    #[test]
    fn header_lines_are_bounded() {
        let long = vec![b'a'; 5000];
        assert!(read_header_line(&mut &long[..]).is_err());
        let mut two: &[u8] = b"FRAME\nFRAME Ixyz\n";
        assert_eq!(
            read_header_line(&mut two).unwrap().as_deref(),
            Some("FRAME")
        );
        assert_eq!(
            read_header_line(&mut two).unwrap().as_deref(),
            Some("FRAME Ixyz")
        );
        assert_eq!(read_header_line(&mut two).unwrap(), None);
        assert!(read_header_line(&mut &b"FRA"[..]).is_err());
    }

    #[test]
    fn writes_real_chroma() {
        let fmt = VideoFormat::new(4, 2, Sampling::Ycbcr422, Depth::Eight, 25, 1).unwrap();
        let mut frame = RawFrame::new(fmt);
        frame.data.copy_from_slice(b"uAvBxCyDUEVFXGYH");
        let mut w = Y4mWriter::new(Vec::new(), fmt).unwrap();
        w.write_frame(&frame).unwrap();
        let out = w.into_inner();
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.starts_with("YUV4MPEG2 W4 H2 F25:1 Ip A1:1 C422 "),
            "{text}"
        );
        assert!(out.ends_with(b"FRAME\nABCDEFGHuxUXvyVY"), "{text}");
    }
}
