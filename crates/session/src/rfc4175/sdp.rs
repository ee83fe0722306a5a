//! The SDP of RFC 4175 video: `a=rtpmap:96 raw/90000` and the format parameters of §6.1
//! (`sampling`, `width`, `height`, `depth`, `colorimetry`) plus SMPTE ST 2110-20's
//! `exactframerate`. GStreamer's rtpvrawdepay takes these as caps strings (it needs `sampling`,
//! `width`, `height` and `depth`, and knows the colorimetry names `BT601-5`, `BT709-2`,
//! `SMPTE240M`; it refuses `interlace`).

use metronome_video::{Colorimetry, Depth, Sampling, VideoFormat};

/// The encoding name of `a=rtpmap` (RFC 4175 §6.1: media subtype `raw`).
pub const ENCODING_NAME: &str = "raw";
/// The longest fmtp value parsed.
const MAX_FMTP_LEN: usize = 1024;

/// What an fmtp line describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawFmtp {
    /// With the frame rate from `exactframerate`, or 25/1 when it is absent.
    pub format: VideoFormat,
    /// From `colorimetry` (`BT601-5`, `BT709-2` or `SMPTE240M`), or BT.601 when it is absent.
    pub colorimetry: Colorimetry,
    /// Whether `exactframerate` was given.
    pub framerate_given: bool,
}

/// The fmtp value for `format`, e.g.
/// `sampling=YCbCr-4:2:2; width=720; height=576; depth=8; exactframerate=25; colorimetry=BT601-5`.
pub fn fmtp(format: &VideoFormat, colorimetry: Colorimetry) -> String {
    let rate = if format.fps_den == 1 {
        format.fps_num.to_string()
    } else {
        format!("{}/{}", format.fps_num, format.fps_den)
    };
    format!(
        "sampling={}; width={}; height={}; depth={}; exactframerate={rate}; colorimetry={}",
        format.sampling.as_str(),
        format.width,
        format.height,
        format.depth.bits(),
        colorimetry.as_str()
    )
}

/// Parses an fmtp value (what follows `a=fmtp:PT `). Unknown parameters are ignored.
pub fn parse_fmtp(value: &str) -> Result<RawFmtp, String> {
    if value.len() > MAX_FMTP_LEN {
        return Err(format!("fmtp is longer than {MAX_FMTP_LEN} bytes"));
    }
    let (mut sampling, mut width, mut height, mut depth) = (None, None, None, None);
    let (mut rate, mut colorimetry) = (None, Colorimetry::default());
    for item in value.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        let v = v.trim();
        let num = |what: &str| {
            v.parse::<u32>()
                .map_err(|_| format!("fmtp {what}='{v}' is not a number"))
        };
        match k.trim().to_ascii_lowercase().as_str() {
            "sampling" => {
                sampling = Some(Sampling::parse(v).ok_or_else(|| {
                    format!("fmtp sampling '{v}' is not supported (YCbCr-4:2:2, YCbCr-4:2:0, RGB)")
                })?)
            }
            "width" => width = Some(num("width")?),
            "height" => height = Some(num("height")?),
            "depth" => {
                depth = Some(
                    Depth::from_bits(num("depth")?)
                        .ok_or_else(|| format!("fmtp depth={v} is not supported (8 or 10)"))?,
                )
            }
            "exactframerate" => {
                let (n, d) = v.split_once('/').unwrap_or((v, "1"));
                match (n.trim().parse::<u32>(), d.trim().parse::<u32>()) {
                    (Ok(n), Ok(d)) if n > 0 && d > 0 => rate = Some((n, d)),
                    _ => return Err(format!("fmtp exactframerate='{v}' is not N or N/D")),
                }
            }
            "colorimetry" => {
                colorimetry = Colorimetry::parse(v).ok_or_else(|| {
                    format!("fmtp colorimetry '{v}' is not supported (BT601-5, BT709-2, SMPTE240M)")
                })?
            }
            "interlace" => return Err("interlaced video (fmtp interlace) is not supported".into()),
            _ => {}
        }
    }
    let missing = |what: &str| format!("fmtp has no {what} (RFC 4175 §6.1 requires it)");
    let (fps_num, fps_den) = rate.unwrap_or((25, 1));
    let format = VideoFormat::new(
        width.ok_or_else(|| missing("width"))?,
        height.ok_or_else(|| missing("height"))?,
        sampling.ok_or_else(|| missing("sampling"))?,
        depth.ok_or_else(|| missing("depth"))?,
        fps_num,
        fps_den,
    )
    .map_err(|e| e.to_string())?;
    Ok(RawFmtp {
        format,
        colorimetry,
        framerate_given: rate.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_standard_parameters_and_reads_them_back() {
        let f = VideoFormat::new(720, 576, Sampling::Ycbcr422, Depth::Eight, 25, 1).unwrap();
        let s = fmtp(&f, Colorimetry::Bt601);
        assert_eq!(
            s,
            "sampling=YCbCr-4:2:2; width=720; height=576; depth=8; exactframerate=25; colorimetry=BT601-5"
        );
        let p = parse_fmtp(&s).unwrap();
        assert_eq!(
            (p.format, p.colorimetry, p.framerate_given),
            (f, Colorimetry::Bt601, true)
        );
        let f = VideoFormat::new(1920, 1080, Sampling::Ycbcr422, Depth::Ten, 30000, 1001).unwrap();
        let s = fmtp(&f, Colorimetry::Bt709);
        assert!(s.contains("exactframerate=30000/1001") && s.contains("BT709-2"));
        assert_eq!(parse_fmtp(&s).unwrap().format, f);
    }

    #[test]
    fn reads_gstreamer_and_st2110_styles() {
        // What an SDP from GStreamer's caps looks like: no frame rate.
        let p = parse_fmtp(
            "sampling=YCbCr-4:2:0;width=64;height=48;depth=8;colorimetry=SMPTE240M;payload=96",
        )
        .unwrap();
        assert_eq!(p.format.sampling, Sampling::Ycbcr420);
        assert_eq!((p.format.fps_num, p.framerate_given), (25, false));
        assert_eq!(p.colorimetry, Colorimetry::Smpte240m);
        let p = parse_fmtp(
            "sampling=RGB; width=1280; height=720; exactframerate=60; depth=8; TCS=SDR; \
             colorimetry=BT709; PM=2110GPM; SSN=ST2110-20:2017",
        )
        .unwrap();
        assert_eq!((p.format.width, p.format.fps_num), (1280, 60));
    }

    #[test]
    fn errors_name_the_parameter() {
        for (s, why) in [
            ("width=720; height=576; depth=8", "no sampling"),
            (
                "sampling=YCbCr-4:4:4; width=2; height=2; depth=8",
                "not supported",
            ),
            ("sampling=RGB; width=x; height=2; depth=8", "width='x'"),
            ("sampling=RGB; width=2; height=2; depth=12", "depth=12"),
            ("sampling=RGB; width=2; height=2; depth=10", "8 bits only"),
            (
                "sampling=YCbCr-4:2:2; width=3; height=2; depth=8",
                "multiple of 2",
            ),
            (
                "sampling=RGB; width=2; height=2; depth=8; exactframerate=0",
                "exactframerate",
            ),
            (
                "sampling=RGB; width=2; height=2; depth=8; interlace",
                "interlaced",
            ),
        ] {
            let e = parse_fmtp(s).unwrap_err();
            assert!(e.contains(why), "{s}: {e}");
        }
        assert!(parse_fmtp(&"x".repeat(2000)).is_err());
    }
}
