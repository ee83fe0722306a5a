//! Video formats of RFC 4175 uncompressed video and their pixel-group ("pgroup") geometry.
//!
//! RFC 4175 §4.3 packs samples into pgroups: the smallest run of octets that holds a whole number
//! of samples of every component. A pgroup covers `xinc` pixels of `yinc` lines:
//!
//! | sampling, depth     | octets | pixels | lines | order (§4.3)                     |
//! |---------------------|--------|--------|-------|----------------------------------|
//! | YCbCr-4:2:2, 8 bit  | 4      | 2      | 1     | C'b Y'0 C'r Y'1                  |
//! | YCbCr-4:2:2, 10 bit | 5      | 2      | 1     | C'b Y'0 C'r Y'1, 10 bits each    |
//! | YCbCr-4:2:0, 8 bit  | 6      | 2      | 2     | Y'00 Y'01 Y'10 Y'11 C'b00 C'r00  |
//! | RGB, 8 bit          | 3      | 1      | 1     | R G B                            |
//!
//! A "row" here is one line of pgroups: one scan line, or for 4:2:0 a pair of scan lines.

use crate::FormatError;

/// The largest width and height accepted (RFC 4175 allows 32767; frames this big already
/// take 200 MB).
pub const MAX_DIMENSION: u32 = 8192;

/// Colour sub-sampling (RFC 4175 §6.1 `sampling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sampling {
    /// `YCbCr-4:2:2`: chroma at half the horizontal resolution, full vertical; a pgroup is
    /// 2 pixels of 1 line.
    Ycbcr422,
    /// `YCbCr-4:2:0`: chroma at half the resolution both ways; a pgroup is 2 pixels of 2
    /// lines, so the height must be even. 8 bits only.
    Ycbcr420,
    /// `RGB`: three full-resolution components, a pgroup per pixel. 8 bits only.
    Rgb,
}

impl Sampling {
    /// The RFC 4175 §6.1 name (`sampling=` in the SDP fmtp).
    pub fn as_str(self) -> &'static str {
        match self {
            Sampling::Ycbcr422 => "YCbCr-4:2:2",
            Sampling::Ycbcr420 => "YCbCr-4:2:0",
            Sampling::Rgb => "RGB",
        }
    }
    /// Parses an RFC 4175 §6.1 sampling name (case-insensitive).
    pub fn parse(s: &str) -> Option<Sampling> {
        [Sampling::Ycbcr422, Sampling::Ycbcr420, Sampling::Rgb]
            .into_iter()
            .find(|x| x.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

/// Bits per sample (RFC 4175 §6.1 `depth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Depth {
    /// 8 bits per sample (`depth=8`), every sampling.
    Eight,
    /// 10 bits per sample (`depth=10`), packed without padding; YCbCr-4:2:2 only.
    Ten,
}

impl Depth {
    /// Bits per sample: 8 or 10.
    pub fn bits(self) -> u32 {
        match self {
            Depth::Eight => 8,
            Depth::Ten => 10,
        }
    }
    /// The depth of `bits` bits per sample; `None` for anything but 8 and 10.
    pub fn from_bits(bits: u32) -> Option<Depth> {
        match bits {
            8 => Some(Depth::Eight),
            10 => Some(Depth::Ten),
            _ => None,
        }
    }
}

/// Colorimetry (RFC 4175 §6.1 `colorimetry`), with the names GStreamer's rtpvrawpay uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Colorimetry {
    /// ITU-R BT.601-5 (standard definition), written `BT601-5`; the default.
    #[default]
    Bt601,
    /// ITU-R BT.709-2 (high definition), written `BT709-2`.
    Bt709,
    /// SMPTE 240M (early 1035-line HDTV), written `SMPTE240M`.
    Smpte240m,
}

impl Colorimetry {
    /// The RFC 4175 §6.1 name (`colorimetry=` in the SDP fmtp): `BT601-5`, `BT709-2` or
    /// `SMPTE240M`.
    pub fn as_str(self) -> &'static str {
        match self {
            Colorimetry::Bt601 => "BT601-5",
            Colorimetry::Bt709 => "BT709-2",
            Colorimetry::Smpte240m => "SMPTE240M",
        }
    }
    /// Parses the RFC 4175 names, and the ST 2110-20 short forms `BT601` and `BT709`.
    pub fn parse(s: &str) -> Option<Colorimetry> {
        match s.trim().to_ascii_uppercase().as_str() {
            "BT601-5" | "BT601" => Some(Colorimetry::Bt601),
            "BT709-2" | "BT709" => Some(Colorimetry::Bt709),
            "SMPTE240M" => Some(Colorimetry::Smpte240m),
            _ => None,
        }
    }
}

/// The geometry of one pixel group (RFC 4175 §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pgroup {
    /// Octets in one pgroup.
    pub bytes: u32,
    /// Pixels it covers horizontally (the step of the Offset field, which counts pixels).
    pub xinc: u32,
    /// Lines it covers vertically (the step of Line No between rows).
    pub yinc: u32,
}

/// An uncompressed progressive video format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VideoFormat {
    /// Pixels per line: 1 to [`MAX_DIMENSION`], a multiple of the pgroup's `xinc`.
    pub width: u32,
    /// Lines per frame: 1 to [`MAX_DIMENSION`], a multiple of the pgroup's `yinc` (even
    /// for 4:2:0).
    pub height: u32,
    /// Colour sub-sampling, which with `depth` fixes the pgroup.
    pub sampling: Sampling,
    /// Bits per sample.
    pub depth: Depth,
    /// Frame rate as a fraction (25/1, 30000/1001): this is the numerator, frames per
    /// `fps_den` seconds. Non-zero, and at most 1000 frames per second overall.
    pub fps_num: u32,
    /// Denominator of the frame rate, in seconds; non-zero.
    pub fps_den: u32,
}

impl VideoFormat {
    /// A format, validated.
    pub fn new(
        width: u32,
        height: u32,
        sampling: Sampling,
        depth: Depth,
        fps_num: u32,
        fps_den: u32,
    ) -> Result<VideoFormat, FormatError> {
        let f = VideoFormat {
            width,
            height,
            sampling,
            depth,
            fps_num,
            fps_den,
        };
        f.validate()?;
        Ok(f)
    }

    /// The pgroup of this sampling and depth. Combinations [`validate`](Self::validate) refuses
    /// (RGB or 4:2:0 at 10 bits) get the geometry of their 8-bit form.
    pub fn pgroup(&self) -> Pgroup {
        match (self.sampling, self.depth) {
            (Sampling::Ycbcr422, Depth::Eight) => Pgroup {
                bytes: 4,
                xinc: 2,
                yinc: 1,
            },
            (Sampling::Ycbcr422, Depth::Ten) => Pgroup {
                bytes: 5,
                xinc: 2,
                yinc: 1,
            },
            (Sampling::Ycbcr420, _) => Pgroup {
                bytes: 6,
                xinc: 2,
                yinc: 2,
            },
            (Sampling::Rgb, _) => Pgroup {
                bytes: 3,
                xinc: 1,
                yinc: 1,
            },
        }
    }

    /// Checks sizes against the pgroup and the limits; the error says what to change.
    pub fn validate(&self) -> Result<(), FormatError> {
        let bad = |why: String| Err(FormatError(format!("video format {self}: {why}")));
        match (self.sampling, self.depth) {
            (Sampling::Ycbcr422, _) | (_, Depth::Eight) => {}
            (s, Depth::Ten) => {
                return bad(format!(
                    "{} is supported at 8 bits only (10 bits: use YCbCr-4:2:2)",
                    s.as_str()
                ))
            }
        }
        let pg = self.pgroup();
        if self.width == 0 || self.height == 0 {
            return bad("width and height must be non-zero".into());
        }
        if self.width > MAX_DIMENSION || self.height > MAX_DIMENSION {
            return bad(format!("width and height must be at most {MAX_DIMENSION}"));
        }
        if self.width % pg.xinc != 0 || self.height % pg.yinc != 0 {
            return bad(format!(
                "the width must be a multiple of {} and the height of {} (one pixel group, RFC 4175 §4.3)",
                pg.xinc, pg.yinc
            ));
        }
        if self.fps_num == 0 || self.fps_den == 0 {
            return bad("the frame rate must be a positive fraction such as 25/1".into());
        }
        if u64::from(self.fps_num) > 1000 * u64::from(self.fps_den) {
            return bad("the frame rate must be at most 1000 frames per second".into());
        }
        if usize::try_from(self.frame_bytes_u64()).is_err() {
            return bad("the frame does not fit in memory on this machine".into());
        }
        Ok(())
    }

    /// Pgroups in one row.
    pub fn pgroups_per_row(&self) -> usize {
        (self.width / self.pgroup().xinc) as usize
    }
    /// Octets in one row of pgroups (a line, or a line pair for 4:2:0).
    pub fn row_bytes(&self) -> usize {
        self.pgroups_per_row() * self.pgroup().bytes as usize
    }
    /// Rows in a frame (the height, or half of it for 4:2:0).
    pub fn rows(&self) -> usize {
        (self.height / self.pgroup().yinc) as usize
    }
    /// Pgroups in a frame.
    pub fn frame_pgroups(&self) -> usize {
        self.pgroups_per_row() * self.rows()
    }
    /// Octets of one frame in RFC 4175 payload order.
    pub fn frame_bytes(&self) -> usize {
        self.row_bytes() * self.rows()
    }
    fn frame_bytes_u64(&self) -> u64 {
        let pg = self.pgroup();
        u64::from(self.width / pg.xinc.max(1))
            * u64::from(pg.bytes)
            * u64::from(self.height / pg.yinc.max(1))
    }
    /// Frame duration in nanoseconds (rounded down).
    pub fn frame_duration_ns(&self) -> u64 {
        (1_000_000_000u128 * u128::from(self.fps_den) / u128::from(self.fps_num.max(1))) as u64
    }
    /// Bits per second of the video data alone (no headers).
    pub fn bitrate(&self) -> u64 {
        (self.frame_bytes() as u128 * 8 * u128::from(self.fps_num)
            / u128::from(self.fps_den.max(1))) as u64
    }
}

impl std::fmt::Display for VideoFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x{} {} {}-bit @ {}/{}",
            self.width,
            self.height,
            self.sampling.as_str(),
            self.depth.bits(),
            self.fps_num,
            self.fps_den
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(w: u32, h: u32, s: Sampling, d: Depth) -> VideoFormat {
        VideoFormat {
            width: w,
            height: h,
            sampling: s,
            depth: d,
            fps_num: 25,
            fps_den: 1,
        }
    }

    #[test]
    fn pgroup_geometry_and_frame_sizes() {
        let f = fmt(720, 576, Sampling::Ycbcr422, Depth::Eight);
        assert_eq!(
            f.pgroup(),
            Pgroup {
                bytes: 4,
                xinc: 2,
                yinc: 1
            }
        );
        assert_eq!(f.frame_bytes(), 720 * 576 * 2);
        let f = fmt(720, 576, Sampling::Ycbcr422, Depth::Ten);
        assert_eq!(f.row_bytes(), 360 * 5);
        assert_eq!(f.frame_bytes(), 720 * 576 * 5 / 2);
        let f = fmt(720, 576, Sampling::Ycbcr420, Depth::Eight);
        assert_eq!((f.rows(), f.row_bytes()), (288, 360 * 6));
        assert_eq!(f.frame_bytes(), 720 * 576 * 3 / 2);
        let f = fmt(7, 5, Sampling::Rgb, Depth::Eight);
        assert_eq!(f.frame_bytes(), 7 * 5 * 3);
        assert!(f.validate().is_ok());
        assert_eq!(f.frame_duration_ns(), 40_000_000);
    }

    #[test]
    fn validation_refuses_what_a_pgroup_cannot_hold() {
        assert!(fmt(721, 576, Sampling::Ycbcr422, Depth::Eight)
            .validate()
            .is_err());
        assert!(fmt(720, 575, Sampling::Ycbcr420, Depth::Eight)
            .validate()
            .is_err());
        assert!(fmt(720, 575, Sampling::Ycbcr422, Depth::Eight)
            .validate()
            .is_ok());
        assert!(fmt(0, 2, Sampling::Rgb, Depth::Eight).validate().is_err());
        assert!(fmt(8194, 2, Sampling::Rgb, Depth::Eight)
            .validate()
            .is_err());
        assert!(fmt(8, 8, Sampling::Rgb, Depth::Ten).validate().is_err());
        assert!(fmt(8, 8, Sampling::Ycbcr420, Depth::Ten)
            .validate()
            .is_err());
        let mut f = fmt(8, 8, Sampling::Rgb, Depth::Eight);
        f.fps_den = 0;
        assert!(f.validate().is_err());
        let e = fmt(721, 576, Sampling::Ycbcr422, Depth::Eight)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("multiple of 2"), "{e}");
    }

    #[test]
    fn names_round_trip() {
        for s in [Sampling::Ycbcr422, Sampling::Ycbcr420, Sampling::Rgb] {
            assert_eq!(Sampling::parse(s.as_str()), Some(s));
        }
        assert_eq!(Sampling::parse("ycbcr-4:2:2"), Some(Sampling::Ycbcr422));
        assert_eq!(Sampling::parse("YCbCr-4:4:4"), None);
        for c in [
            Colorimetry::Bt601,
            Colorimetry::Bt709,
            Colorimetry::Smpte240m,
        ] {
            assert_eq!(Colorimetry::parse(c.as_str()), Some(c));
        }
        assert_eq!(Colorimetry::parse("BT709"), Some(Colorimetry::Bt709));
        assert_eq!(Depth::from_bits(10), Some(Depth::Ten));
        assert_eq!(Depth::from_bits(12), None);
    }
}
