//! H.264 decoding through openh264: what a viewer's player makes of the access units that
//! reached it.
//!
//! A player decodes the frames it has, in order, and a frame whose reference was lost is still
//! decoded against the picture the decoder has instead, with the errors that brings (drift
//! until the next IDR), as FFmpeg does with Evalvid's reconstructed files. That is
//! [`Concealment::Decode`] (openh264's slice and motion-vector copy across IDRs). With
//! [`Concealment::Freeze`] the decoder gives no picture for a damaged frame, and the player
//! keeps showing its last good one.

use crate::MediaError;
use metronome_quality::viewer::Decode;
use metronome_quality::{Chroma, Picture};
use openh264::decoder::{Decoder, DecoderConfig};
use openh264::OpenH264API;
use openh264_sys2::{
    SBufferInfo, DECODER_OPTION_ERROR_CON_IDC, ERROR_CON_DISABLE, ERROR_CON_SLICE_MV_COPY_CROSS_IDR,
};

/// What the decoder does with a frame whose references or slices are missing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Concealment {
    /// Decode it anyway against what it has (errors propagate to the next IDR).
    #[default]
    Decode,
    /// No picture for it: the previous one stays on screen.
    Freeze,
}

/// Counters of what the decoder met.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeStats {
    pub access_units: u64,
    pub pictures: u64,
    /// Access units the decoder reported errors for (a concealed picture may still come).
    pub errors: u64,
}

/// One H.264 stream's decoder.
pub struct H264Decoder {
    decoder: Decoder,
    concealment: Concealment,
    stats: DecodeStats,
}

impl std::fmt::Debug for H264Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H264Decoder")
            .field("concealment", &self.concealment)
            .field("stats", &self.stats)
            .finish()
    }
}

/// The largest picture taken from the decoder (8192×4320).
const MAX_SAMPLES: usize = 8192 * 4320;

impl H264Decoder {
    pub fn new(concealment: Concealment) -> Result<H264Decoder, MediaError> {
        let mut decoder =
            Decoder::with_api_config(OpenH264API::from_source(), DecoderConfig::new()).map_err(
                |e| MediaError::Encoder(format!("cannot create the H.264 decoder: {e}")),
            )?;
        let mut idc: i32 = match concealment {
            Concealment::Decode => ERROR_CON_SLICE_MV_COPY_CROSS_IDR,
            Concealment::Freeze => ERROR_CON_DISABLE,
        };
        // SAFETY: the decoder exists; SetOption(DECODER_OPTION_ERROR_CON_IDC) reads one int
        // through the pointer, which outlives the call.
        let rc = unsafe {
            decoder
                .raw_api()
                .set_option(DECODER_OPTION_ERROR_CON_IDC, (&raw mut idc).cast())
        };
        if rc != 0 {
            return Err(MediaError::Encoder(format!(
                "the H.264 decoder refused its error concealment setting (code {rc})"
            )));
        }
        Ok(H264Decoder {
            decoder,
            concealment,
            stats: DecodeStats::default(),
        })
    }

    pub fn stats(&self) -> DecodeStats {
        self.stats
    }

    /// Decodes one access unit (Annex B). Returns whether a picture came out, in `out`
    /// (4:2:0, planes packed).
    pub fn decode(&mut self, access_unit: &[u8], out: &mut Picture) -> bool {
        self.stats.access_units += 1;
        let Ok(len) = i32::try_from(access_unit.len()) else {
            self.stats.errors += 1;
            return false;
        };
        let mut dst = [std::ptr::null_mut::<u8>(); 3];
        let mut info = SBufferInfo::default();
        // SAFETY: the source pointer and length describe `access_unit`; `dst` and `info` are
        // ours and outlive the call; the decoder exists.
        let state = unsafe {
            self.decoder.raw_api().decode_frame_no_delay(
                access_unit.as_ptr(),
                len,
                dst.as_mut_ptr(),
                &raw mut info,
            )
        };
        if state != 0 {
            self.stats.errors += 1;
            if self.concealment == Concealment::Freeze {
                return false;
            }
        }
        if info.iBufferStatus != 1 || dst.iter().any(|p| p.is_null()) {
            return false;
        }
        // SAFETY: with iBufferStatus 1 the decoder filled sSystemBuffer for the picture in dst.
        let sys = unsafe { info.UsrData.sSystemBuffer };
        let (w, h) = (sys.iWidth, sys.iHeight);
        let (sy, sc) = (sys.iStride[0], sys.iStride[1]);
        if w <= 0 || h <= 0 || sy < w || sc < (w + 1) / 2 {
            self.stats.errors += 1;
            return false;
        }
        let (w, h, sy, sc) = (w as usize, h as usize, sy as usize, sc as usize);
        if w * h > MAX_SAMPLES {
            self.stats.errors += 1;
            return false;
        }
        let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
        out.width = w;
        out.height = h;
        out.chroma = Chroma::C420;
        out.data.clear();
        out.data.reserve(w * h + 2 * cw * ch);
        for (p, (pw, ph, stride)) in [(w, h, sy), (cw, ch, sc), (cw, ch, sc)]
            .into_iter()
            .enumerate()
        {
            for row in 0..ph {
                // SAFETY: openh264's plane p has `ph` rows of `stride` bytes (iStride[0] for
                // luma, iStride[1] for both chroma planes), each at least `pw` wide (checked).
                let line = unsafe { std::slice::from_raw_parts(dst[p].add(row * stride), pw) };
                out.data.extend_from_slice(line);
            }
        }
        self.stats.pictures += 1;
        true
    }
}

impl Decode for H264Decoder {
    fn decode(&mut self, coded: &[u8], out: &mut Picture) -> bool {
        H264Decoder::decode(self, coded, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h264::{H264Config, H264Encoder};
    use crate::pattern::{Frame, TestPattern};

    fn psnr_y(a: &[u8], b: &[u8]) -> f64 {
        let sse: u64 = a
            .iter()
            .zip(b)
            .map(|(x, y)| (*x as i64 - *y as i64).pow(2) as u64)
            .sum();
        let mse = sse as f64 / a.len() as f64;
        10.0 * (255.0 * 255.0 / mse.max(1e-9)).log10()
    }

    /// Encodes `n` frames of the pattern at 160x90; returns the access units and the pictures.
    fn encoded(n: u64) -> (Vec<Vec<u8>>, Vec<Frame>) {
        let mut enc = H264Encoder::new(H264Config::new(160, 96, 30, 400_000)).unwrap();
        let pattern = TestPattern::new(30, 1).unwrap();
        let (mut aus, mut pics) = (Vec::new(), Vec::new());
        for i in 0..n {
            let mut f = Frame::new(160, 96).unwrap();
            pattern.render(i, &mut f);
            aus.push(enc.encode(&f).unwrap().data.to_vec());
            pics.push(f);
        }
        (aus, pics)
    }

    #[test]
    fn decodes_what_the_encoder_made() {
        let (aus, pics) = encoded(10);
        let mut d = H264Decoder::new(Concealment::Decode).unwrap();
        let mut out = Picture::black(2, 2, Chroma::C420);
        for (au, pic) in aus.iter().zip(&pics) {
            assert!(d.decode(au, &mut out));
            assert_eq!((out.width, out.height), (160, 96));
            assert_eq!(out.data.len(), 160 * 96 * 3 / 2);
            let p = psnr_y(&out.data[..160 * 96], pic.y());
            assert!(p > 30.0, "PSNR {p}");
        }
        assert_eq!(d.stats().errors, 0);
        assert_eq!(d.stats().pictures, 10);
    }

    #[test]
    fn a_lost_reference_is_concealed_or_frozen() {
        // Frame 3 (a P-frame) never reaches the decoder.
        let (aus, _) = encoded(8);
        let mut conceal = H264Decoder::new(Concealment::Decode).unwrap();
        let mut freeze = H264Decoder::new(Concealment::Freeze).unwrap();
        let mut out = Picture::black(2, 2, Chroma::C420);
        let (mut a, mut b) = (0, 0);
        for (i, au) in aus.iter().enumerate() {
            if i == 3 {
                continue;
            }
            a += u32::from(conceal.decode(au, &mut out));
            b += u32::from(freeze.decode(au, &mut out));
        }
        assert_eq!(a, 7, "concealment gives a picture for every frame it gets");
        assert!(
            b < 7 && freeze.stats().errors > 0,
            "{b} {:?}",
            freeze.stats()
        );
        // Garbage is an error, not a crash.
        assert!(!freeze.decode(&[0, 0, 0, 1, 0x65, 0xff, 0xff], &mut out));
        assert!(!freeze.decode(&[], &mut out));
    }
}
