//! RTP packets back into coded frames, as a player's depayloader does: MPEG-4 Visual (RFC
//! 6416: a frame's payloads in order) and H.264 (RFC 6184: single NAL unit packets, STAP-A
//! aggregates and FU-A fragments, back to an Annex B access unit). A frame is the packets of
//! one RTP timestamp; the marker bit ends it.
//!
//! Packets come in sequence order (the caller puts reordered ones back);
//! [`FrameDepayloader::lost`] says packets are missing there, and every frame they may have
//! belonged to is marked damaged: the one being assembled, and the next one unless its first
//! packet is known to be there (an MPEG-4 frame starts with a start code; an H.264 access unit
//! has no such mark, so the next one is damaged too). A frame whose marker never came is handed
//! out when the next timestamp starts. A frame is bounded: past [`MAX_FRAME_BYTES`] it is kept
//! damaged and no longer grows.

use crate::decode::VideoCodec;
use base64::Engine as _;
use metronome_time::RtpTime;

/// The most a frame may hold, bytes (a 4K intra frame at a very low quantizer is far below).
pub const MAX_FRAME_BYTES: usize = 32 << 20;

/// A frame as it came off the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DepayFrame {
    /// The RTP timestamp its packets shared (90 kHz: its presentation time).
    pub rtp_ts: RtpTime,
    /// MPEG-4: the frame's bytes; H.264: an Annex B access unit.
    pub data: Vec<u8>,
    /// A packet of it may be missing, or a payload of it was malformed.
    pub damaged: bool,
}

/// H.264 NAL unit types of RFC 6184's packets.
const STAP_A: u8 = 24;
const FU_A: u8 = 28;
const START: [u8; 4] = [0, 0, 0, 1];

/// One stream's depayloader (see the module).
#[derive(Debug)]
pub struct FrameDepayloader {
    codec: VideoCodec,
    frame: Option<DepayFrame>,
    /// Packets were lost that may be the next frame's first: it is damaged unless its first
    /// packet shows it is whole at the start.
    damage_next: bool,
    /// Packets were lost while the open frame was assembled (some may be the next frame's).
    lost_in_frame: bool,
    /// An H.264 FU-A is open (its start was seen, its end not yet).
    fu_open: bool,
    /// Payloads that were malformed.
    malformed: u64,
}

impl FrameDepayloader {
    /// A depayloader of `codec`'s RTP payload format, before any packet.
    pub fn new(codec: VideoCodec) -> Self {
        FrameDepayloader {
            codec,
            frame: None,
            damage_next: false,
            lost_in_frame: false,
            fu_open: false,
            malformed: 0,
        }
    }

    /// The codec whose payload format it reads.
    pub fn codec(&self) -> VideoCodec {
        self.codec
    }

    /// Payloads that were malformed (an H.264 NAL unit type RFC 6184's mode 1 does not
    /// send, a truncated aggregate or fragment).
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Packets are missing before the next one.
    pub fn lost(&mut self) {
        match &mut self.frame {
            Some(f) => {
                f.damaged = true;
                self.lost_in_frame = true;
            }
            None => self.damage_next = true,
        }
        self.fu_open = false;
    }

    /// The next packet in sequence: its RTP timestamp, marker bit and payload. Returns the
    /// frames it completed (the one a new timestamp closed without its marker, and the one
    /// its marker ends).
    pub fn push(&mut self, rtp_ts: RtpTime, marker: bool, payload: &[u8]) -> Vec<DepayFrame> {
        let mut done = Vec::new();
        if self.frame.as_ref().is_some_and(|f| f.rtp_ts != rtp_ts) {
            // The previous frame's marker never came: lost with its end (it is damaged
            // already), or never set.
            done.extend(self.frame.take());
            self.damage_next |= std::mem::take(&mut self.lost_in_frame);
            self.fu_open = false;
        }
        let starts_whole = self.codec == VideoCodec::Mpeg4Part2 && payload.starts_with(&[0, 0, 1]);
        let damaged = std::mem::take(&mut self.damage_next) && !starts_whole;
        let f = self.frame.get_or_insert_with(|| DepayFrame {
            rtp_ts,
            data: Vec::new(),
            damaged,
        });
        let taken = match self.codec {
            VideoCodec::Mpeg4Part2 => {
                if append(&mut f.data, &[payload]) {
                    Taken::Whole
                } else {
                    Taken::Malformed
                }
            }
            VideoCodec::H264 => h264(f, payload, &mut self.fu_open),
        };
        match taken {
            Taken::Whole => {}
            // The fragment's start was lost, and the loss counted.
            Taken::Orphan => f.damaged = true,
            Taken::Malformed => {
                f.damaged = true;
                self.malformed += 1;
            }
        }
        if marker {
            self.fu_open = false;
            self.lost_in_frame = false;
            done.extend(self.frame.take());
        }
        done
    }

    /// The stream ended: the frame being assembled, if any (damaged: its marker never came).
    pub fn finish(&mut self) -> Option<DepayFrame> {
        self.fu_open = false;
        self.lost_in_frame = false;
        self.frame.take().map(|mut f| {
            f.damaged = true;
            f
        })
    }
}

/// Appends `parts` to `data` unless that would pass [`MAX_FRAME_BYTES`].
fn append(data: &mut Vec<u8>, parts: &[&[u8]]) -> bool {
    let n: usize = parts.iter().map(|p| p.len()).sum();
    if data.len() + n > MAX_FRAME_BYTES {
        return false;
    }
    for p in parts {
        data.extend_from_slice(p);
    }
    true
}

/// What became of a payload.
enum Taken {
    Whole,
    /// A fragment whose start never came (lost).
    Orphan,
    Malformed,
}

/// One H.264 payload into the frame's access unit.
fn h264(f: &mut DepayFrame, payload: &[u8], fu_open: &mut bool) -> Taken {
    let whole = |ok: bool| if ok { Taken::Whole } else { Taken::Malformed };
    let Some(&header) = payload.first() else {
        return Taken::Malformed;
    };
    match header & 0x1f {
        1..=23 => whole(append(&mut f.data, &[&START[..], payload])),
        STAP_A => whole(stap_a(&mut f.data, &payload[1..])),
        FU_A => {
            let Some(&fu) = payload.get(1) else {
                return Taken::Malformed;
            };
            let (start, end) = (fu & 0x80 != 0, fu & 0x40 != 0);
            let body = &payload[2..];
            let taken = if start {
                let nal_header = (header & 0xe0) | (fu & 0x1f);
                whole(append(&mut f.data, &[&START[..], &[nal_header], body]))
            } else if *fu_open {
                whole(append(&mut f.data, &[body]))
            } else {
                Taken::Orphan
            };
            *fu_open = matches!(taken, Taken::Whole) && !end;
            taken
        }
        _ => Taken::Malformed,
    }
}

/// A STAP-A's NAL units (each after its 16-bit size) into `data`; false if it is truncated.
fn stap_a(data: &mut Vec<u8>, mut rest: &[u8]) -> bool {
    while !rest.is_empty() {
        let Some(size) = rest
            .get(..2)
            .map(|s| usize::from(u16::from_be_bytes([s[0], s[1]])))
        else {
            return false;
        };
        let Some(nal) = rest.get(2..2 + size) else {
            return false;
        };
        if !append(data, &[&START[..], nal]) {
            return false;
        }
        rest = &rest[2 + size..];
    }
    true
}

/// The decoder's out-of-band configuration from an SDP's `a=fmtp` parameters: MPEG-4's
/// `config=` (hexadecimal), H.264's `sprop-parameter-sets=` (base64, as Annex B). `None` if
/// the parameters have none, or it does not parse.
pub fn config_of_fmtp(codec: VideoCodec, fmtp: &str) -> Option<Vec<u8>> {
    let param = |name: &str| {
        fmtp.split(';').find_map(|p| {
            let (k, v) = p.trim().split_once('=')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    };
    match codec {
        VideoCodec::Mpeg4Part2 => {
            let hex = param("config")?;
            if hex.len() % 2 != 0 {
                return None;
            }
            (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
                .collect()
        }
        VideoCodec::H264 => {
            let b64 = base64::engine::general_purpose::STANDARD;
            let mut out = Vec::new();
            for set in param("sprop-parameter-sets")?.split(',') {
                out.extend_from_slice(&START);
                out.extend(b64.decode(set.trim()).ok()?);
            }
            Some(out)
        }
    }
}

#[cfg(test)]
mod tests;
