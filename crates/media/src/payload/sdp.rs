//! What an SDP says of a coded video stream so that a player can depacketize and decode it
//! before its first key frame arrives: `a=rtpmap`'s encoding (90 kHz clock) and `a=fmtp`'s
//! parameters, taken from the headers at the start of the stream's first frame.
//!
//! - MPEG-4 Visual (RFC 6416 §7.1): `MP4V-ES`, `profile-level-id` (the visual object
//!   sequence's, 1 if the stream has none) and `config`, the configuration headers (visual
//!   object sequence, visual object, video object layer) in hexadecimal.
//! - H.264 (RFC 6184 §8.1): `H264`, `packetization-mode=1`, `profile-level-id` (the sequence
//!   parameter set's profile, constraints and level, in hexadecimal) and
//!   `sprop-parameter-sets` (the SPS and PPS, base64).
//!
//! The headers also come in band before every key frame, so a player that joins late (or
//! ignores `a=fmtp`) still decodes from the next one.

use crate::decode::VideoCodec;
use crate::h264::{nal_type, nal_units};
use base64::Engine as _;

/// `a=rtpmap`'s encoding name and `a=fmtp`'s parameters of a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtpFormat {
    /// `a=rtpmap`'s encoding name: `MP4V-ES` or `H264`.
    pub encoding: &'static str,
    /// `a=rtpmap`'s clock rate, Hz: 90 000 for both.
    pub clock_rate: u32,
    /// `a=fmtp`'s parameters, `;`-separated, without the payload type.
    pub fmtp: String,
}

/// The format of a `codec` stream whose first frame is `first` (an I-frame with its headers).
pub fn rtp_format(codec: VideoCodec, first: &[u8]) -> Result<RtpFormat, String> {
    match codec {
        VideoCodec::Mpeg4Part2 => mpeg4(first),
        VideoCodec::H264 => h264(first),
    }
}

/// MPEG-4 start codes: visual object sequence, group of VOPs, VOP.
const VOS: u8 = 0xB0;
const GOV: u8 = 0xB3;
const VOP: u8 = 0xB6;

fn mpeg4(first: &[u8]) -> Result<RtpFormat, String> {
    // The configuration ends where the first picture's own headers start (its GOV or VOP).
    let vop = start_codes(first)
        .find(|&(_, code)| code == VOP)
        .map(|(at, _)| at)
        .ok_or("the first MPEG-4 frame has no VOP start code: not an MPEG-4 Visual frame")?;
    let end = start_codes(&first[..vop])
        .find(|&(_, code)| code == GOV)
        .map_or(vop, |(at, _)| at);
    let config = &first[..end];
    if config.is_empty() {
        return Err(
            "the first MPEG-4 frame has no configuration headers (VOL) before its VOP".into(),
        );
    }
    // RFC 6416 §7.1: the profile_and_level_indication of the VOS header; 1 (Simple Profile,
    // level 1) where the stream has none.
    let level = start_codes(config)
        .find(|&(_, code)| code == VOS)
        .and_then(|(at, _)| config.get(at + 4).copied())
        .unwrap_or(1);
    let hex: String = config.iter().map(|b| format!("{b:02X}")).collect();
    Ok(RtpFormat {
        encoding: "MP4V-ES",
        clock_rate: 90_000,
        fmtp: format!("profile-level-id={level};config={hex}"),
    })
}

/// `(offset, code)` of each `00 00 01 code` in `data`.
fn start_codes(data: &[u8]) -> impl Iterator<Item = (usize, u8)> + '_ {
    data.windows(4)
        .enumerate()
        .filter(|(_, w)| w[0] == 0 && w[1] == 0 && w[2] == 1)
        .map(|(at, w)| (at, w[3]))
}

fn h264(first: &[u8]) -> Result<RtpFormat, String> {
    let of_type = |t: u8| nal_units(first).find(|n| nal_type(n) == Some(t));
    let sps = of_type(7).ok_or("the first H.264 access unit has no SPS: start from an IDR")?;
    let pps = of_type(8).ok_or("the first H.264 access unit has no PPS: start from an IDR")?;
    let profile = sps
        .get(1..4)
        .ok_or("the first H.264 access unit's SPS is too short")?;
    let b64 = base64::engine::general_purpose::STANDARD;
    Ok(RtpFormat {
        encoding: "H264",
        clock_rate: 90_000,
        fmtp: format!(
            "packetization-mode=1;profile-level-id={:02x}{:02x}{:02x};sprop-parameter-sets={},{}",
            profile[0],
            profile[1],
            profile[2],
            b64.encode(sps),
            b64.encode(pps)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpeg4_config_is_what_comes_before_the_first_vop() {
        // VOS (level 0xF5), VO, VOL, then a VOP.
        let frame = [
            0, 0, 1, 0xB0, 0xF5, 0, 0, 1, 0xB5, 0x09, 0, 0, 1, 0x20, 0x08, 0xC4, 0, 0, 1, 0xB6,
            0x10, 0x60,
        ];
        // A GOV header before the VOP is the picture's, not the configuration's.
        let mut with_gov = frame[..16].to_vec();
        with_gov.extend([0, 0, 1, 0xB3, 0x00, 0x10, 0x07]);
        with_gov.extend(&frame[16..]);
        assert_eq!(
            rtp_format(VideoCodec::Mpeg4Part2, &with_gov).unwrap(),
            rtp_format(VideoCodec::Mpeg4Part2, &frame).unwrap()
        );
        let f = rtp_format(VideoCodec::Mpeg4Part2, &frame).unwrap();
        assert_eq!(f.encoding, "MP4V-ES");
        assert_eq!(
            f.fmtp,
            "profile-level-id=245;config=000001B0F5000001B5090000012008C4"
        );
        // No VOS: the default profile; no headers at all, or no VOP: refused.
        let f = rtp_format(VideoCodec::Mpeg4Part2, &frame[5..]).unwrap();
        assert!(f.fmtp.starts_with("profile-level-id=1;config=000001B5"));
        assert!(rtp_format(VideoCodec::Mpeg4Part2, &frame[16..]).is_err());
        assert!(rtp_format(VideoCodec::Mpeg4Part2, &frame[..10]).is_err());
    }

    #[test]
    fn h264_parameter_sets_come_from_the_first_access_unit() {
        let au = [
            0, 0, 0, 1, 0x67, 0x64, 0x00, 0x1F, 0xAC, // SPS: High, level 3.1
            0, 0, 0, 1, 0x68, 0xEE, 0x3C, 0x80, // PPS
            0, 0, 1, 0x65, 0x88, 0x84, // IDR slice
        ];
        let f = rtp_format(VideoCodec::H264, &au).unwrap();
        assert_eq!(f.encoding, "H264");
        assert_eq!(
            f.fmtp,
            "packetization-mode=1;profile-level-id=64001f;sprop-parameter-sets=Z2QAH6w=,aO48gA=="
        );
        assert!(rtp_format(VideoCodec::H264, &au[17..]).is_err(), "no SPS");
    }
}
