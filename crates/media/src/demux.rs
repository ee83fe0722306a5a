//! MPEG-TS back to access units: the video PES packets of a stream, reassembled from its TS
//! packets as a receiver gets them (ISO/IEC 13818-1 §2.4.3.6–2.4.3.7).
//!
//! [`VideoDemux`] finds the video elementary stream through the PAT and PMT (the first
//! H.264 stream, `stream_type` 0x1b, or another video type), or takes the PID it is given,
//! and hands out each PES packet's payload (for H.264 one access unit, Annex B) with its PTS.
//! A PES packet that lost a TS packet on the way (a continuity-counter jump) is marked
//! damaged; one that grows past a bound is cut short and marked too. Nothing here allocates
//! without a bound, and no input panics.

use crate::psi::{parse_section, pat_programs, pmt_info, STREAM_TYPE_H264};
use metronome_wire::ts::{TsPacket, PID_PAT};

/// The largest access unit kept (bytes); a 2160p intra picture at a high rate fits.
pub const MAX_ACCESS_UNIT: usize = 8 << 20;

/// Video stream types a decoder here may be handed (H.264; MPEG-2 and H.265 are found but
/// only H.264 is decoded).
const VIDEO_STREAM_TYPES: [u8; 3] = [STREAM_TYPE_H264, 0x02, 0x24];

/// One PES packet's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessUnit {
    /// The PES packet's PTS in 90 kHz ticks, if it had one.
    pub pts_90k: Option<u64>,
    /// The payload after the PES header (Annex B for H.264).
    pub data: Vec<u8>,
    /// A TS packet of it was lost (continuity counter), its header was unreadable, or it was
    /// longer than [`MAX_ACCESS_UNIT`].
    pub damaged: bool,
}

/// What the demuxer has counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DemuxStats {
    /// TS packets that parsed, on every PID.
    pub ts_packets: u64,
    /// Datagram bytes that were not whole TS packets, or packets without the sync byte.
    pub bad_packets: u64,
    /// Access units handed out, damaged ones included.
    pub access_units: u64,
    /// Of those, the ones marked [`AccessUnit::damaged`].
    pub damaged: u64,
    /// Video payload before the first PES start (joined mid-stream), dropped.
    pub orphan_packets: u64,
}

/// Reassembles the video PES packets of a transport stream.
#[derive(Debug)]
pub struct VideoDemux {
    pid: Option<u16>,
    stream_type: Option<u8>,
    pmt_pid: Option<u16>,
    cc: Option<u8>,
    open: Option<AccessUnit>,
    stats: DemuxStats,
}

impl VideoDemux {
    /// A demuxer that finds the video PID in the PMT.
    pub fn new() -> VideoDemux {
        VideoDemux {
            pid: None,
            stream_type: None,
            pmt_pid: None,
            cc: None,
            open: None,
            stats: DemuxStats::default(),
        }
    }

    /// A demuxer for the PES packets on `pid`.
    pub fn with_pid(pid: u16) -> VideoDemux {
        VideoDemux {
            pid: Some(pid),
            ..VideoDemux::new()
        }
    }

    /// The video PID, once known.
    pub fn pid(&self) -> Option<u16> {
        self.pid
    }

    /// The video's `stream_type` from the PMT (0x1b: H.264), once seen.
    pub fn stream_type(&self) -> Option<u8> {
        self.stream_type
    }

    /// What the demuxer has counted so far.
    pub fn stats(&self) -> DemuxStats {
        self.stats
    }

    /// Takes one TS packet; returns the access unit it completes (the one before a new PES
    /// start).
    pub fn push(&mut self, packet: &[u8]) -> Option<AccessUnit> {
        let Ok(ts) = TsPacket::parse(packet) else {
            self.stats.bad_packets += 1;
            return None;
        };
        self.stats.ts_packets += 1;
        let pid = ts.pid();
        if self.pid.is_none() {
            self.learn_psi(&ts);
            return None;
        }
        if Some(pid) != self.pid || !ts.has_payload() {
            return None;
        }
        let cc = ts.continuity_counter();
        let lost = self
            .cc
            .is_some_and(|last| cc != (last + 1) & 0x0f && cc != last && !ts.discontinuity());
        let repeated = self.cc == Some(cc) && !ts.discontinuity();
        self.cc = Some(cc);
        if repeated {
            // A duplicate packet (§2.4.3.3): its payload was already taken.
            return None;
        }
        if lost {
            if let Some(au) = self.open.as_mut() {
                au.damaged = true;
            }
        }
        let payload = ts.payload();
        if ts.payload_unit_start() {
            let done = self.open.take();
            self.open = Some(start_pes(payload));
            return done.map(|au| self.count(au));
        }
        match self.open.as_mut() {
            Some(au) => append(au, payload),
            None => self.stats.orphan_packets += 1,
        }
        None
    }

    /// Packets of the stream were lost here (a gap the transport saw, such as RTP sequence
    /// numbers, which a continuity counter of 16 values cannot always show): the access unit
    /// being assembled is damaged, and the continuity counter is followed afresh.
    pub fn lost(&mut self) {
        if let Some(au) = self.open.as_mut() {
            au.damaged = true;
        }
        self.cc = None;
    }

    /// Ends the stream: the access unit still open, if any.
    pub fn finish(&mut self) -> Option<AccessUnit> {
        let au = self.open.take()?;
        Some(self.count(au))
    }

    fn count(&mut self, au: AccessUnit) -> AccessUnit {
        self.stats.access_units += 1;
        self.stats.damaged += u64::from(au.damaged);
        au
    }

    fn learn_psi(&mut self, ts: &TsPacket<'_>) {
        if !ts.payload_unit_start() {
            return;
        }
        let pid = ts.pid();
        if pid == PID_PAT {
            if let Some(s) = parse_section(ts.payload()).filter(|s| s.table_id == 0) {
                self.pmt_pid = pat_programs(s.body).next().map(|(_, p)| p);
            }
        } else if Some(pid) == self.pmt_pid {
            let Some(s) = parse_section(ts.payload()).filter(|s| s.table_id == 2) else {
                return;
            };
            if let Some((_, streams)) = pmt_info(s.body) {
                if let Some(&(kind, pid)) = streams
                    .iter()
                    .find(|(kind, _)| VIDEO_STREAM_TYPES.contains(kind))
                {
                    self.pid = Some(pid);
                    self.stream_type = Some(kind);
                }
            }
        }
    }
}

impl Default for VideoDemux {
    fn default() -> Self {
        VideoDemux::new()
    }
}

/// A PES packet's start: header checked, PTS read, the rest of the payload kept.
fn start_pes(payload: &[u8]) -> AccessUnit {
    let mut au = AccessUnit {
        pts_90k: None,
        data: Vec::new(),
        damaged: false,
    };
    // packet_start_code_prefix, stream_id, PES_packet_length, then (for video and audio
    // stream ids) two flag bytes and PES_header_data_length (§2.4.3.7).
    if payload.len() < 9 || payload[..3] != [0, 0, 1] {
        au.damaged = true;
        return au;
    }
    let header_len = 9 + payload[8] as usize;
    if payload[7] & 0x80 != 0 {
        if let Some(b) = payload.get(9..14) {
            let b: &[u8; 5] = b.try_into().unwrap_or(&[0; 5]);
            au.pts_90k = Some(crate::tsmux::decode_timestamp(b));
        }
    }
    match payload.get(header_len..) {
        Some(rest) => append(&mut au, rest),
        None => au.damaged = true,
    }
    au
}

fn append(au: &mut AccessUnit, bytes: &[u8]) {
    let room = MAX_ACCESS_UNIT.saturating_sub(au.data.len());
    if bytes.len() > room {
        au.damaged = true;
    }
    au.data.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testsrc::{TestSource, TestSourceConfig};
    use crate::TsSource;
    use std::time::Duration;

    fn stream(ms: u64) -> Vec<[u8; 188]> {
        let mut src = TestSource::new(TestSourceConfig {
            width: 160,
            height: 90,
            video_bitrate: 300_000,
            mux_rate: 1_000_000,
            duration: Some(Duration::from_millis(ms)),
            ..Default::default()
        })
        .unwrap();
        let mut out = Vec::new();
        let mut p = [0u8; 188];
        while src.next_packet(&mut p).unwrap().is_some() {
            out.push(p);
        }
        out
    }

    #[test]
    fn finds_the_video_through_the_pmt_and_gives_every_access_unit() {
        let mut d = VideoDemux::new();
        let mut aus = Vec::new();
        for p in stream(500) {
            aus.extend(d.push(&p));
        }
        aus.extend(d.finish());
        assert_eq!((d.pid(), d.stream_type()), (Some(0x100), Some(0x1b)));
        assert_eq!(aus.len(), 15, "15 frames at 30 fps in 0.5 s");
        assert!(aus.iter().all(|a| !a.damaged && a.pts_90k.is_some()));
        // Each access unit is Annex B, starting with the access unit delimiter.
        assert!(aus.iter().all(|a| a.data.starts_with(&[0, 0, 0, 1, 9])));
        // PTS steps by one frame (3000 ticks at 90 kHz).
        let pts: Vec<u64> = aus.iter().map(|a| a.pts_90k.unwrap()).collect();
        assert!(pts.windows(2).all(|w| w[1] - w[0] == 3000), "{pts:?}");
    }

    #[test]
    fn a_lost_packet_damages_its_access_unit_only_and_garbage_is_counted() {
        let packets = stream(300);
        let mut clean = VideoDemux::with_pid(0x100);
        let reference: Vec<AccessUnit> = packets.iter().filter_map(|p| clean.push(p)).collect();
        // Drop a video packet in the middle of the first access unit (the IDR picture).
        let mut d = VideoDemux::with_pid(0x100);
        let (mut seen, mut dropped) = (0, false);
        let mut got = Vec::new();
        for p in &packets {
            let ts = TsPacket::parse(p).unwrap();
            if ts.pid() == 0x100 && ts.payload_unit_start() {
                seen += 1;
            }
            if seen == 1
                && !ts.payload_unit_start()
                && ts.pid() == 0x100
                && ts.has_payload()
                && !dropped
            {
                dropped = true;
                continue;
            }
            got.extend(d.push(p));
        }
        assert!(dropped);
        assert_eq!(got.len(), reference.len());
        let damaged: Vec<usize> = (0..got.len()).filter(|&i| got[i].damaged).collect();
        assert_eq!(damaged, vec![0]);
        assert_eq!(got[1..], reference[1..]);
        // Garbage and short datagrams never panic; they are counted.
        assert_eq!(d.push(&[0u8; 10]), None);
        let mut bad = [0xffu8; 188];
        assert_eq!(d.push(&bad), None);
        bad[0] = 0x47;
        bad[3] = 0x30; // adaptation field of 255 bytes: refused by the view
        assert_eq!(d.push(&bad), None);
        assert_eq!(d.stats().bad_packets, 3);
    }

    #[test]
    fn a_duplicate_packet_is_taken_once() {
        let packets = stream(200);
        let mut a = VideoDemux::with_pid(0x100);
        let mut b = VideoDemux::with_pid(0x100);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for p in &packets {
            x.extend(a.push(p));
            y.extend(b.push(p));
            y.extend(b.push(p));
        }
        assert_eq!(x, y);
    }
}
