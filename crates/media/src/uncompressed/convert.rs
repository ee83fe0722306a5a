//! Conversions between RFC 4175 payload order (pgroups, row by row, RFC 4175 §4.3) and the
//! layouts files and tools use.
//!
//! | layout          | sampling it carries       | bytes                                       |
//! |-----------------|---------------------------|---------------------------------------------|
//! | `I420`          | 4:2:0 8-bit               | Y plane, Cb plane, Cr plane (tight)         |
//! | `Uyvy`          | 4:2:2 8-bit               | identical to RFC 4175 4:2:2 8-bit           |
//! | `V210`          | 4:2:2 10-bit              | 3 samples per LE word, rows padded to 128 B |
//! | `Rgb24`         | RGB 8-bit                 | identical to RFC 4175 RGB 8-bit             |
//! | `Yuv422p`       | 4:2:2 8-bit               | planar (Y4M `C422`)                         |
//! | `Yuv422p10le`   | 4:2:2 10-bit              | planar, 16-bit little-endian (Y4M `C422p10`) |
//! | `Yuv444p`       | RGB 8-bit (out only)      | planar BT.601 limited range (Y4M `C444`), lossy |

use super::format::{Depth, Sampling, VideoFormat};
use crate::MediaError;

/// A frame layout other than RFC 4175 payload order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// 4:2:0 8-bit planar: the Y plane, then Cb, then Cr, no padding.
    I420,
    /// 4:2:2 8-bit packed `U Y V Y`: byte for byte RFC 4175's 4:2:2 8-bit payload.
    Uyvy,
    /// 4:2:2 10-bit packed, three samples per little-endian 32-bit word, rows padded to a
    /// multiple of 128 bytes.
    V210,
    /// Packed 8-bit `R G B`: byte for byte RFC 4175's RGB 8-bit payload.
    Rgb24,
    /// 4:2:2 8-bit planar (Y4M's `C422`).
    Yuv422p,
    /// 4:2:2 10-bit planar, each sample in a 16-bit little-endian word (Y4M's `C422p10`).
    Yuv422p10le,
    /// 4:4:4 8-bit planar BT.601 limited-range Y'CbCr (Y4M's `C444`), converted from RGB:
    /// written only, and lossy.
    Yuv444p,
}

impl Layout {
    /// Whether frames of `fmt` convert to (and, except `Yuv444p`, from) this layout.
    pub fn fits(self, fmt: &VideoFormat) -> bool {
        matches!(
            (self, fmt.sampling, fmt.depth),
            (Layout::I420, Sampling::Ycbcr420, Depth::Eight)
                | (
                    Layout::Uyvy | Layout::Yuv422p,
                    Sampling::Ycbcr422,
                    Depth::Eight
                )
                | (
                    Layout::V210 | Layout::Yuv422p10le,
                    Sampling::Ycbcr422,
                    Depth::Ten
                )
                | (Layout::Rgb24 | Layout::Yuv444p, Sampling::Rgb, Depth::Eight)
        )
    }

    /// Bytes of one frame of `fmt` in this layout.
    pub fn frame_len(self, fmt: &VideoFormat) -> usize {
        let (w, h) = (fmt.width as usize, fmt.height as usize);
        match self {
            Layout::I420 => w * h + 2 * (w / 2) * (h / 2),
            Layout::Uyvy | Layout::Yuv422p => w * h * 2,
            Layout::Yuv422p10le => w * h * 4,
            Layout::V210 => v210_stride(fmt.width) * h,
            Layout::Rgb24 | Layout::Yuv444p => w * h * 3,
        }
    }
}

/// Bytes per line of v210: groups of 6 pixels in 16 bytes, lines padded to 128 bytes.
pub fn v210_stride(width: u32) -> usize {
    (width as usize).div_ceil(48) * 128
}

/// Packs four 10-bit samples (C'b, Y'0, C'r, Y'1) into a 5-octet pgroup, most significant bit
/// first (RFC 4175 §4.3, 4:2:2 10-bit).
pub fn pack10(s: [u16; 4]) -> [u8; 5] {
    let v = s
        .iter()
        .fold(0u64, |acc, &x| (acc << 10) | u64::from(x & 0x3ff));
    let b = v.to_be_bytes();
    [b[3], b[4], b[5], b[6], b[7]]
}

/// The four 10-bit samples of a 5-octet pgroup (inverse of [`pack10`]).
pub fn unpack10(b: &[u8]) -> [u16; 4] {
    let v = b
        .iter()
        .take(5)
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
    [
        ((v >> 30) & 0x3ff) as u16,
        ((v >> 20) & 0x3ff) as u16,
        ((v >> 10) & 0x3ff) as u16,
        (v & 0x3ff) as u16,
    ]
}

fn check(
    fmt: &VideoFormat,
    layout: Layout,
    src: usize,
    dst: usize,
    to_wire: bool,
) -> Result<(), MediaError> {
    if !layout.fits(fmt) || (to_wire && layout == Layout::Yuv444p) {
        return Err(MediaError::Config(format!(
            "cannot convert {layout:?} {} {fmt}",
            if to_wire { "to" } else { "from" }
        )));
    }
    let (want_src, want_dst) = if to_wire {
        (layout.frame_len(fmt), fmt.frame_bytes())
    } else {
        (fmt.frame_bytes(), layout.frame_len(fmt))
    };
    if src != want_src || dst != want_dst {
        return Err(MediaError::Config(format!(
            "{layout:?} conversion of {fmt}: buffers of {src} and {dst} bytes, expected {want_src} and {want_dst}"
        )));
    }
    Ok(())
}

/// Converts one frame in `layout` to RFC 4175 payload order. Buffer lengths must be exact.
pub fn to_rfc4175(
    fmt: &VideoFormat,
    layout: Layout,
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), MediaError> {
    check(fmt, layout, src.len(), dst.len(), true)?;
    let (w, h) = (fmt.width as usize, fmt.height as usize);
    match layout {
        Layout::Uyvy | Layout::Rgb24 => dst.copy_from_slice(src),
        Layout::I420 => {
            let (y, uv) = src.split_at(w * h);
            let (u, v) = uv.split_at(uv.len() / 2);
            let cw = w / 2;
            for (r, row) in dst.chunks_exact_mut(fmt.row_bytes()).enumerate() {
                let (y0, y1) = (&y[2 * r * w..][..w], &y[(2 * r + 1) * w..][..w]);
                for (p, pg) in row.chunks_exact_mut(6).enumerate() {
                    pg.copy_from_slice(&[
                        y0[2 * p],
                        y0[2 * p + 1],
                        y1[2 * p],
                        y1[2 * p + 1],
                        u[r * cw + p],
                        v[r * cw + p],
                    ]);
                }
            }
        }
        Layout::Yuv422p => {
            let (y, uv) = src.split_at(w * h);
            let (u, v) = uv.split_at(uv.len() / 2);
            let cw = w / 2;
            for (l, row) in dst.chunks_exact_mut(fmt.row_bytes()).enumerate() {
                for (p, pg) in row.chunks_exact_mut(4).enumerate() {
                    let c = l * cw + p;
                    pg.copy_from_slice(&[u[c], y[l * w + 2 * p], v[c], y[l * w + 2 * p + 1]]);
                }
            }
        }
        Layout::Yuv422p10le => {
            let s = |plane: &[u8], i: usize| u16::from_le_bytes([plane[2 * i], plane[2 * i + 1]]);
            let (y, uv) = src.split_at(w * h * 2);
            let (u, v) = uv.split_at(uv.len() / 2);
            let cw = w / 2;
            for (l, row) in dst.chunks_exact_mut(fmt.row_bytes()).enumerate() {
                for (p, pg) in row.chunks_exact_mut(5).enumerate() {
                    let c = l * cw + p;
                    let yi = l * w + 2 * p;
                    pg.copy_from_slice(&pack10([s(u, c), s(y, yi), s(v, c), s(y, yi + 1)]));
                }
            }
        }
        Layout::V210 => {
            let stride = v210_stride(fmt.width);
            for (line, row) in src
                .chunks_exact(stride)
                .zip(dst.chunks_exact_mut(fmt.row_bytes()))
            {
                // v210 and RFC 4175 carry the same sample sequence C'b Y' C'r Y' ...; v210 puts
                // three in each little-endian 32-bit word, RFC 4175 four in five octets.
                for (p, pg) in row.chunks_exact_mut(5).enumerate() {
                    let mut s = [0u16; 4];
                    for (k, x) in s.iter_mut().enumerate() {
                        let i = 4 * p + k;
                        let word = &line[(i / 3) * 4..][..4];
                        let word = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                        *x = ((word >> (10 * (i % 3))) & 0x3ff) as u16;
                    }
                    pg.copy_from_slice(&pack10(s));
                }
            }
        }
        Layout::Yuv444p => unreachable!("refused by check"),
    }
    Ok(())
}

/// Converts one frame in RFC 4175 payload order to `layout`. Buffer lengths must be exact.
pub fn from_rfc4175(
    fmt: &VideoFormat,
    layout: Layout,
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), MediaError> {
    check(fmt, layout, src.len(), dst.len(), false)?;
    let (w, h) = (fmt.width as usize, fmt.height as usize);
    match layout {
        Layout::Uyvy | Layout::Rgb24 => dst.copy_from_slice(src),
        Layout::I420 => {
            let (y, uv) = dst.split_at_mut(w * h);
            let (u, v) = uv.split_at_mut(uv.len() / 2);
            let cw = w / 2;
            for (r, row) in src.chunks_exact(fmt.row_bytes()).enumerate() {
                for (p, pg) in row.chunks_exact(6).enumerate() {
                    y[2 * r * w + 2 * p] = pg[0];
                    y[2 * r * w + 2 * p + 1] = pg[1];
                    y[(2 * r + 1) * w + 2 * p] = pg[2];
                    y[(2 * r + 1) * w + 2 * p + 1] = pg[3];
                    u[r * cw + p] = pg[4];
                    v[r * cw + p] = pg[5];
                }
            }
        }
        Layout::Yuv422p => {
            let (y, uv) = dst.split_at_mut(w * h);
            let (u, v) = uv.split_at_mut(uv.len() / 2);
            let cw = w / 2;
            for (l, row) in src.chunks_exact(fmt.row_bytes()).enumerate() {
                for (p, pg) in row.chunks_exact(4).enumerate() {
                    u[l * cw + p] = pg[0];
                    y[l * w + 2 * p] = pg[1];
                    v[l * cw + p] = pg[2];
                    y[l * w + 2 * p + 1] = pg[3];
                }
            }
        }
        Layout::Yuv422p10le => {
            let (y, uv) = dst.split_at_mut(w * h * 2);
            let (u, v) = uv.split_at_mut(uv.len() / 2);
            let put = |plane: &mut [u8], i: usize, x: u16| {
                plane[2 * i..2 * i + 2].copy_from_slice(&x.to_le_bytes())
            };
            let cw = w / 2;
            for (l, row) in src.chunks_exact(fmt.row_bytes()).enumerate() {
                for (p, pg) in row.chunks_exact(5).enumerate() {
                    let [cb, y0, cr, y1] = unpack10(pg);
                    put(u, l * cw + p, cb);
                    put(y, l * w + 2 * p, y0);
                    put(v, l * cw + p, cr);
                    put(y, l * w + 2 * p + 1, y1);
                }
            }
        }
        Layout::V210 => {
            let stride = v210_stride(fmt.width);
            let n = 2 * w; // samples per line
            for (line, row) in dst
                .chunks_exact_mut(stride)
                .zip(src.chunks_exact(fmt.row_bytes()))
            {
                line.fill(0);
                for i in 0..n {
                    let x = unpack10(&row[(i / 4) * 5..][..5])[i % 4];
                    let at = (i / 3) * 4;
                    let mut word =
                        u32::from_le_bytes([line[at], line[at + 1], line[at + 2], line[at + 3]]);
                    word |= u32::from(x) << (10 * (i % 3));
                    line[at..at + 4].copy_from_slice(&word.to_le_bytes());
                }
            }
        }
        Layout::Yuv444p => {
            let (y, uv) = dst.split_at_mut(w * h);
            let (u, v) = uv.split_at_mut(w * h);
            for (i, px) in src.chunks_exact(3).enumerate() {
                [y[i], u[i], v[i]] = rgb_to_ycbcr601([px[0], px[1], px[2]]);
            }
        }
    }
    Ok(())
}

/// BT.601 limited-range Y'CbCr of an 8-bit R'G'B' triple (integer approximation).
pub fn rgb_to_ycbcr601([r, g, b]: [u8; 3]) -> [u8; 3] {
    let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
    let y = ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16;
    let cb = ((-38 * r - 74 * g + 112 * b + 128) >> 8) + 128;
    let cr = ((112 * r - 94 * g - 18 * b + 128) >> 8) + 128;
    [
        y.clamp(0, 255) as u8,
        cb.clamp(0, 255) as u8,
        cr.clamp(0, 255) as u8,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(w: u32, h: u32, s: Sampling, d: Depth) -> VideoFormat {
        VideoFormat::new(w, h, s, d, 25, 1).unwrap()
    }

    fn noise(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed.wrapping_mul(2_654_435_761).max(1);
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    fn round_trip(f: VideoFormat, layout: Layout, wire: &[u8]) -> Vec<u8> {
        let mut other = vec![0u8; layout.frame_len(&f)];
        from_rfc4175(&f, layout, wire, &mut other).unwrap();
        let mut back = vec![0u8; f.frame_bytes()];
        to_rfc4175(&f, layout, &other, &mut back).unwrap();
        back
    }

    #[test]
    fn i420_maps_line_pairs_to_pgroups() {
        let f = fmt(4, 2, Sampling::Ycbcr420, Depth::Eight);
        // Y rows "abcd" / "efgh", U "uv"... as I420: Y(8) U(2) V(2).
        let i420 = *b"abcdefghUVXY";
        let mut wire = vec![0u8; f.frame_bytes()];
        to_rfc4175(&f, Layout::I420, &i420, &mut wire).unwrap();
        assert_eq!(&wire, b"abefUXcdghVY");
        let mut back = [0u8; 12];
        from_rfc4175(&f, Layout::I420, &wire, &mut back).unwrap();
        assert_eq!(back, i420);
        let f = fmt(36, 10, Sampling::Ycbcr420, Depth::Eight);
        let w = noise(f.frame_bytes(), 1);
        assert_eq!(round_trip(f, Layout::I420, &w), w);
    }

    #[test]
    fn uyvy_rgb_are_identity_and_planar_422_round_trips() {
        let f = fmt(6, 3, Sampling::Ycbcr422, Depth::Eight);
        let w = noise(f.frame_bytes(), 2);
        assert_eq!(round_trip(f, Layout::Uyvy, &w), w);
        assert_eq!(round_trip(f, Layout::Yuv422p, &w), w);
        let mut planar = vec![0u8; Layout::Yuv422p.frame_len(&f)];
        from_rfc4175(&f, Layout::Yuv422p, &w, &mut planar).unwrap();
        assert_eq!(planar[0], w[1]); // Y'0 of line 0
        assert_eq!(planar[18], w[0]); // C'b of line 0 starts the Cb plane
        let f = fmt(5, 3, Sampling::Rgb, Depth::Eight);
        let w = noise(f.frame_bytes(), 3);
        assert_eq!(round_trip(f, Layout::Rgb24, &w), w);
    }

    #[test]
    fn ten_bit_packing_is_msb_first() {
        assert_eq!(pack10([0x3ff, 0, 0, 0]), [0xff, 0xc0, 0, 0, 0]);
        assert_eq!(pack10([0, 0, 0, 1]), [0, 0, 0, 0, 1]);
        assert_eq!(
            pack10([0x200, 0x040, 0x200, 0x3ac]),
            [0x80, 0x04, 0x08, 0x03, 0xac]
        );
        for s in [[1, 2, 3, 4], [0x3ff, 0x155, 0x2aa, 0]] {
            assert_eq!(unpack10(&pack10(s)), s);
        }
    }

    #[test]
    fn v210_and_planar_10_bit_round_trip() {
        for width in [2, 6, 48, 50, 720] {
            let f = fmt(width, 3, Sampling::Ycbcr422, Depth::Ten);
            let w = noise(f.frame_bytes(), width);
            assert_eq!(round_trip(f, Layout::V210, &w), w, "v210 width {width}");
            assert_eq!(round_trip(f, Layout::Yuv422p10le, &w), w);
        }
        // The first v210 word holds C'b0, Y'0, C'r0 in bits 0-9, 10-19, 20-29.
        let f = fmt(2, 1, Sampling::Ycbcr422, Depth::Ten);
        let wire = pack10([0x101, 0x202, 0x303, 0x0ff]);
        let mut v210 = vec![0u8; 128];
        from_rfc4175(&f, Layout::V210, &wire, &mut v210).unwrap();
        let w0 = u32::from_le_bytes([v210[0], v210[1], v210[2], v210[3]]);
        assert_eq!(w0, 0x101 | (0x202 << 10) | (0x303 << 20));
        let w1 = u32::from_le_bytes([v210[4], v210[5], v210[6], v210[7]]);
        assert_eq!(w1, 0x0ff);
    }

    #[test]
    fn wrong_layouts_and_lengths_are_errors() {
        let f = fmt(4, 2, Sampling::Ycbcr422, Depth::Eight);
        let mut out = [0u8; 100];
        assert!(from_rfc4175(&f, Layout::I420, &[0; 16], &mut out[..12]).is_err());
        assert!(from_rfc4175(&f, Layout::Uyvy, &[0; 15], &mut out[..16]).is_err());
        let rgb = fmt(2, 1, Sampling::Rgb, Depth::Eight);
        assert!(to_rfc4175(&rgb, Layout::Yuv444p, &[0; 6], &mut out[..6]).is_err());
        let mut yuv = [0u8; 6];
        from_rfc4175(&rgb, Layout::Yuv444p, &[255, 255, 255, 0, 0, 0], &mut yuv).unwrap();
        assert_eq!(yuv, [235, 16, 128, 128, 128, 128]);
    }
}
