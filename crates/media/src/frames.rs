//! What a stream sent, frame by frame: which frames each RTP packet carried, and each frame's
//! due time, type and coded bytes, noted as the source hands out its TS packets. The lab's
//! simulator and emulator and `metronome serve --frame-trace` note their streams this way,
//! and a frame trace (Evalvid's `st`, Metronome's CSV) is made from it.
//!
//! A frame starts at a TS packet of the video PID (found through the PAT and PMT) with
//! `payload_unit_start_indicator` set (ISO/IEC 13818-1 §2.4.3.3: a PES packet, one access unit,
//! begins in it) and runs to the next such packet.

use crate::demux::VideoDemux;
use crate::h264::{nal_type, nal_units};
use crate::psi::STREAM_TYPE_H264;
use crate::{MediaError, TsSource};
use metronome_quality::playout::{FrameType, SentFrame};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// TS packets per RTP packet (RFC 2250: seven fit an Ethernet MTU), as the packetizer makes
/// them.
pub const TS_PER_RTP: usize = 7;

/// What a stream sent, by RTP packet number (from 0) and by frame number (from 0).
#[derive(Clone, Debug, Default)]
pub struct SentFrames {
    /// The frames each packet carries, `(first, last)`; `None`: no video (PSI, nulls).
    pub packets: Vec<Option<(u32, u32)>>,
    /// Each packet's payload (the TS packets it carries), bytes.
    pub payload_bytes: Vec<u32>,
    /// Each packet's due time (its last TS packet's), on the stream's timeline.
    pub packet_due: Vec<Duration>,
    /// Each frame's first TS packet's due time, on the stream's timeline.
    pub frame_due: Vec<Duration>,
    /// Each frame's access unit (Annex B for H.264).
    pub coded: Vec<Vec<u8>>,
    /// Each frame's type: for H.264, I when it has an IDR slice, else P; other codecs'
    /// frames are [`FrameType::Other`].
    pub kinds: Vec<FrameType>,
}

impl SentFrames {
    /// The frame trace: each frame's type, size, packets (numbered from `first_packet`) and
    /// send time, its first packet's due time after `epoch_ns`.
    pub fn trace(&self, epoch_ns: u64, first_packet: u64) -> Vec<SentFrame> {
        let n = self.frame_due.len();
        let mut packets: Vec<Vec<u64>> = vec![Vec::new(); n];
        for (k, frames) in self.packets.iter().enumerate() {
            let Some((a, b)) = *frames else { continue };
            for p in packets
                .iter_mut()
                .take((b as usize + 1).min(n))
                .skip(a as usize)
            {
                p.push(first_packet + k as u64);
            }
        }
        packets
            .into_iter()
            .enumerate()
            .map(|(k, packets)| SentFrame {
                kind: self.kinds.get(k).copied().unwrap_or(FrameType::Other),
                size_bytes: self.coded.get(k).map_or(0, |c| c.len() as u32),
                packets,
                send_ns: epoch_ns + self.frame_due[k].as_nanos() as u64,
            })
            .collect()
    }
}

/// Notes TS packets into [`SentFrames`]: frame starts, the frames of each RTP packet
/// (`end_packet` closes one), the access units.
#[derive(Debug, Default)]
pub struct FrameNoter {
    demux: VideoDemux,
    frames_seen: u32,
    /// Frames touched by the TS packets since the last `end_packet`, how many TS packets
    /// there were, and the last one's due time.
    pending: Option<(u32, u32)>,
    pending_ts: u32,
    last_due: Duration,
}

impl FrameNoter {
    /// Notes one TS packet, due at `due` on the stream's timeline.
    pub fn ts(&mut self, s: &mut SentFrames, ts: &[u8; 188], due: Duration) {
        self.pending_ts += 1;
        self.last_due = due;
        let video = self
            .demux
            .pid()
            .is_some_and(|pid| u16::from_be_bytes([ts[1] & 0x1f, ts[2]]) == pid);
        if video && ts[1] & 0x40 != 0 {
            self.frames_seen += 1;
            s.frame_due.push(due);
        }
        if video {
            if let Some(f) = self.frames_seen.checked_sub(1) {
                self.pending = Some(self.pending.map_or((f, f), |(a, _)| (a, f)));
            }
        }
        if let Some(au) = self.demux.push(ts) {
            self.keep(s, au.data);
        }
    }

    /// The TS packets noted since the last call left in one RTP packet.
    pub fn end_packet(&mut self, s: &mut SentFrames) {
        s.packets.push(self.pending.take());
        s.payload_bytes
            .push(std::mem::take(&mut self.pending_ts) * 188);
        s.packet_due.push(self.last_due);
    }

    /// Whether TS packets were noted since the last `end_packet`.
    pub fn has_pending(&self) -> bool {
        self.pending_ts > 0
    }

    /// The stream ended: its last access unit.
    pub fn finish(&mut self, s: &mut SentFrames) {
        if let Some(au) = self.demux.finish() {
            self.keep(s, au.data);
        }
    }

    fn keep(&self, s: &mut SentFrames, au: Vec<u8>) {
        // H.264 as openh264 and x264's baseline make it: an IDR slice (NAL type 5) makes an
        // I-frame, anything else a P (no B-frames). Other codecs' types are not read.
        let kind = if self.demux.stream_type() == Some(STREAM_TYPE_H264) {
            if nal_units(&au).any(|n| nal_type(n) == Some(5)) {
                FrameType::I
            } else {
                FrameType::P
            }
        } else {
            FrameType::Other
        };
        s.kinds.push(kind);
        s.coded.push(au);
    }
}

/// What a [`NotingSource`] noted, shared with whoever reads it after the run.
#[derive(Debug, Default)]
pub struct Noted {
    /// The frames and packets noted so far (complete once [`Noted::finish`] has run).
    pub frames: SentFrames,
    noter: FrameNoter,
    ts_packets: u64,
    ended: bool,
}

impl Noted {
    /// Closes what is still open (a partial last packet, the last access unit): at the
    /// source's end, or when the sender stopped before it.
    pub fn finish(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        if self.noter.has_pending() {
            self.noter.end_packet(&mut self.frames);
        }
        self.noter.finish(&mut self.frames);
    }
}

/// A source that notes every TS packet it hands out, [`TS_PER_RTP`] to an RTP packet (or as
/// many as [`NotingSource::with_ts_per_packet`] says: as the sender's packetizer fills them).
pub struct NotingSource {
    inner: Box<dyn TsSource>,
    noted: Arc<Mutex<Noted>>,
    ts_per_packet: u64,
}

impl NotingSource {
    /// `inner`, noted; read the notes through the handle after the run.
    pub fn new(inner: Box<dyn TsSource>) -> (NotingSource, Arc<Mutex<Noted>>) {
        let noted = Arc::new(Mutex::new(Noted::default()));
        (
            NotingSource {
                inner,
                noted: noted.clone(),
                ts_per_packet: TS_PER_RTP as u64,
            },
            noted,
        )
    }

    /// `k` TS packets to an RTP packet (1 to 7), as the packetizer is set.
    pub fn with_ts_per_packet(mut self, k: usize) -> Self {
        self.ts_per_packet = k.clamp(1, TS_PER_RTP) as u64;
        self
    }
}

impl TsSource for NotingSource {
    fn next_packet(&mut self, out: &mut [u8; 188]) -> Result<Option<Duration>, MediaError> {
        let r = self.inner.next_packet(out)?;
        let mut guard = self.noted.lock().unwrap_or_else(|e| e.into_inner());
        let n = &mut *guard;
        match r {
            Some(due) => {
                n.noter.ts(&mut n.frames, out, due);
                n.ts_packets += 1;
                if n.ts_packets % self.ts_per_packet == 0 {
                    n.noter.end_packet(&mut n.frames);
                }
            }
            None => n.finish(),
        }
        Ok(r)
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn nominal_bitrate(&self) -> Option<u64> {
        self.inner.nominal_bitrate()
    }
    fn catch_up_to(&mut self, now: Duration) -> u64 {
        self.inner.catch_up_to(now)
    }
    fn take_warning(&mut self) -> Option<String> {
        self.inner.take_warning()
    }
    fn is_live(&self) -> bool {
        self.inner.is_live()
    }
    fn rate_range(&self) -> Option<std::ops::RangeInclusive<u64>> {
        self.inner.rate_range()
    }
    fn set_rate(&mut self, rate: u64) -> Result<(), MediaError> {
        self.inner.set_rate(rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testsrc::{TestSource, TestSourceConfig};

    #[test]
    fn a_noted_source_knows_each_packets_frames_and_each_frames_bytes() {
        let src = TestSource::new(TestSourceConfig {
            width: 160,
            height: 96,
            video_bitrate: 300_000,
            mux_rate: 1_000_000,
            duration: Some(Duration::from_millis(300)),
            ..Default::default()
        })
        .unwrap();
        let (mut noting, noted) = NotingSource::new(Box::new(src));
        let mut ts = [0u8; 188];
        let mut n = 0u64;
        while noting.next_packet(&mut ts).unwrap().is_some() {
            n += 1;
        }
        let noted = noted.lock().unwrap();
        let s = &noted.frames;
        assert_eq!(s.packets.len() as u64, n.div_ceil(TS_PER_RTP as u64));
        assert_eq!((s.frame_due.len(), s.coded.len()), (9, 9));
        assert_eq!(s.kinds[0], FrameType::I);
        assert!(s.kinds[1..].iter().all(|k| *k == FrameType::P));
        let trace = s.trace(1_000, 500);
        // Every frame is in packets, in order (a packet of only PSI or null packets in between
        // carries none of it); its first packet is due no earlier than it starts.
        for (k, f) in trace.iter().enumerate() {
            assert!(!f.packets.is_empty(), "frame {k}");
            assert!(f.packets.windows(2).all(|w| w[1] > w[0]));
            let first = (f.packets[0] - 500) as usize;
            assert!(s.packet_due[first] >= s.frame_due[k]);
            assert_eq!(f.send_ns, 1_000 + s.frame_due[k].as_nanos() as u64);
            assert_eq!(f.size_bytes as usize, s.coded[k].len());
        }
        assert!(s.payload_bytes.iter().all(|b| *b > 0 && *b <= 7 * 188));
    }
}
