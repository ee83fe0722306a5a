//! Real video in the simulator: the test pattern, encoded with H.264 and muxed into
//! constant-rate MPEG-TS by `metronome-media`, packetized by the engine's packetizer, and the
//! frame each packet carries remembered, so that what each viewer saw can be told frame by
//! frame.
//!
//! A frame starts at a TS packet of the video PID with `payload_unit_start_indicator` set
//! (ISO/IEC 13818-1 §2.4.3.3: a PES packet, here one access unit, begins in it) and runs to
//! the next such packet. A frame is lost when any RTP packet carrying one of its TS packets
//! is lost (a decoder would show it damaged or not at all).

use metronome_media::testsrc::{TestSource, TestSourceConfig};
use metronome_media::TsSource;
use metronome_netsim::sim::flows::rtp::source::{PacketSource, SourcePacket};
use metronome_netsim::sim::flows::FrameFigures;
use metronome_quality::playout::{reconstruct, FrameType, Playout, SentFrame};
use metronome_session::sender::{Mp2tPacketizer, PacketizerConfig};
use metronome_spec::scenario::VideoDecl;
use metronome_time::{Distribution, Timestamp};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// The video PID of the test source's mux (`TsMuxConfig` default).
const VIDEO_PID: u16 = 0x100;

/// Which frames each RTP packet carries: `(first, last)` frame number, by packet number;
/// `None` for a packet with no video (PSI, null packets only).
#[derive(Clone, Debug, Default)]
pub struct FrameMap {
    pub packets: Vec<Option<(u32, u32)>>,
    /// The due time of each frame's first packet.
    pub frame_due: Vec<Timestamp>,
}

/// A [`PacketSource`] of the encoded test pattern.
pub struct TestVideo {
    source: TestSource,
    packetizer: Mp2tPacketizer,
    epoch: Timestamp,
    frames: Rc<RefCell<FrameMap>>,
    /// Frames seen so far (the current one is `frames_seen - 1`).
    frames_seen: u32,
    /// Frames touched by the TS packets pending in the packetizer.
    pending: Option<(u32, u32)>,
    ended: bool,
}

impl TestVideo {
    /// `duration` of the pattern at `v`, H.264 at 70 % of `rate_bps`, muxed at `rate_bps`.
    pub fn new(
        v: VideoDecl,
        rate_bps: u64,
        duration: Duration,
        pcfg: PacketizerConfig,
        epoch: Timestamp,
    ) -> Result<(Self, Rc<RefCell<FrameMap>>), String> {
        let cfg = TestSourceConfig {
            width: v.width,
            height: v.height,
            fps: v.fps,
            video_bitrate: u32::try_from(rate_bps * 7 / 10).unwrap_or(u32::MAX),
            mux_rate: rate_bps,
            duration: Some(duration),
            ..TestSourceConfig::default()
        };
        let source = TestSource::new(cfg).map_err(|e| format!("the test video: {e}"))?;
        let frames = Rc::new(RefCell::new(FrameMap::default()));
        let me = TestVideo {
            source,
            packetizer: Mp2tPacketizer::new(pcfg, epoch),
            epoch,
            frames: frames.clone(),
            frames_seen: 0,
            pending: None,
            ended: false,
        };
        Ok((me, frames))
    }

    /// Notes the frame a TS packet belongs to.
    fn note_ts(&mut self, ts: &[u8; 188], due: Duration) {
        let pid = u16::from_be_bytes([ts[1] & 0x1f, ts[2]]);
        if pid != VIDEO_PID {
            return;
        }
        if ts[1] & 0x40 != 0 {
            self.frames_seen += 1;
            self.frames.borrow_mut().frame_due.push(self.epoch + due);
        }
        if let Some(f) = self.frames_seen.checked_sub(1) {
            self.pending = Some(self.pending.map_or((f, f), |(a, _)| (a, f)));
        }
    }

    fn emitted(&mut self, out: metronome_session::sender::RtpOut) -> SourcePacket {
        self.frames.borrow_mut().packets.push(self.pending.take());
        SourcePacket {
            len: out.len,
            wire_len: out.len,
            due: out.release,
            payload_len: out.payload_len,
        }
    }
}

impl PacketSource for TestVideo {
    fn next_packet(&mut self, buf: &mut [u8]) -> Option<SourcePacket> {
        let mut ts = [0u8; 188];
        while !self.ended {
            match self.source.next_packet(&mut ts) {
                Ok(Some(due)) => {
                    self.note_ts(&ts, due);
                    if let Ok(Some(out)) = self.packetizer.push(&ts, due, buf) {
                        return Some(self.emitted(out));
                    }
                }
                // An encoder error ends the stream as its end would: the run reports fewer
                // frames, never a panic.
                Ok(None) | Err(_) => self.ended = true,
            }
        }
        match self.packetizer.flush(buf) {
            Ok(Some(out)) => Some(self.emitted(out)),
            _ => None,
        }
    }
}

/// The frame figures of one receiver, from its packets' arrival times (by packet number,
/// `Timestamp::MAX` or missing: lost): what `metronome_quality::playout` reconstructs with
/// Evalvid's rule (a frame is lost with any of its packets), no play-out deadline.
pub fn frame_figures(map: &FrameMap, arrivals: &[Timestamp]) -> FrameFigures {
    let n = map.frame_due.len();
    let mut packets: Vec<Vec<u64>> = vec![Vec::new(); n];
    for (k, frames) in map.packets.iter().enumerate() {
        let Some((a, b)) = *frames else { continue };
        for p in packets
            .iter_mut()
            .take((b as usize + 1).min(n))
            .skip(a as usize)
        {
            p.push(k as u64);
        }
    }
    let sent: Vec<SentFrame> = packets
        .into_iter()
        .zip(&map.frame_due)
        .map(|(packets, due)| SentFrame {
            kind: FrameType::Other,
            size_bytes: 0,
            packets,
            send_ns: due.as_nanos(),
        })
        .collect();
    let got: Vec<(u64, u64)> = arrivals
        .iter()
        .enumerate()
        .filter(|(_, t)| **t != Timestamp::MAX)
        .map(|(k, t)| (k as u64, t.as_nanos()))
        .collect();
    let r = reconstruct(&sent, &got, Playout::default());
    let mut delays = Distribution::new();
    let (mut sum, mut kept) = (0u128, 0u64);
    for d in r
        .frames
        .iter()
        .filter(|f| f.shown)
        .filter_map(|f| f.delay_ns)
    {
        delays.record(d);
        sum += d as u128;
        kept += 1;
    }
    FrameFigures {
        frames: n as u64,
        lost: r.frames_lost,
        lost_percent: if n == 0 {
            0.0
        } else {
            100.0 * r.frames_lost as f64 / n as f64
        },
        mean_delay_ns: if kept == 0 {
            0
        } else {
            (sum / kept as u128) as u64
        },
        p99_delay_ns: delays.quantile_ns(0.99),
        max_delay_ns: delays.quantile_ns(1.0),
        max_cumulative_jitter_ns: r
            .frames
            .iter()
            .filter_map(|f| f.cumulative_jitter_ns)
            .max()
            .unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_lost_with_any_of_its_packets() {
        let ms = Timestamp::from_millis;
        // Frames 0..3; packets: [0], [0,1], [1], none, [2].
        let map = FrameMap {
            packets: vec![Some((0, 0)), Some((0, 1)), Some((1, 1)), None, Some((2, 2))],
            frame_due: vec![ms(0), ms(10), ms(20)],
        };
        let all = [ms(5), ms(12), ms(18), ms(19), ms(30)];
        let f = frame_figures(&map, &all);
        assert_eq!((f.frames, f.lost), (3, 0));
        // Frame 0 complete at 12 ms (due 0), frame 1 at 18 (due 10), frame 2 at 30 (due 20).
        assert_eq!(f.mean_delay_ns, (12 + 8 + 10) * 1_000_000 / 3);
        // Cumulative jitter: delays 12, 8, 10 ms never grew past the first frame's.
        assert_eq!(f.max_cumulative_jitter_ns, 0);
        let later = [ms(5), ms(12), ms(18), ms(19), ms(40)];
        // Frame 2 now complete at 40 ms: 20 ms of delay, 8 ms more than frame 0's.
        assert_eq!(
            frame_figures(&map, &later).max_cumulative_jitter_ns,
            8_000_000
        );
        let mut some = all;
        some[1] = Timestamp::MAX; // carries frames 0 and 1
        let f = frame_figures(&map, &some);
        assert_eq!(f.lost, 2);
        // A packet with no video lost costs no frame; missing tail arrivals are losses.
        let f = frame_figures(&map, &all[..4]);
        assert_eq!(f.lost, 1);
    }
}
