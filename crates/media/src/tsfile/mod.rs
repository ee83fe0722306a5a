//! An MPEG-TS file as a [`TsSource`], timed by its own PCRs.
//!
//! The file is read incrementally through a fixed buffer. Packets wait in a bounded look-ahead
//! queue until the next PCR on the PCR PID arrives; then every packet up to it is timed by
//! interpolation (see `timing`). The PCR PID comes from PAT → PMT (§2.4.4.3, §2.4.4.8), or is
//! the first PID seen carrying a PCR. With `looping`, the file restarts at its end and the
//! timeline continues: continuity counters are renumbered to run on (§2.4.3.3), and the first
//! PCR after the restart gets the discontinuity_indicator (§2.4.3.5) and a new time base.

mod reader;
mod timing;

pub use reader::ReadSeek;

use crate::psi::{parse_section, pat_programs, pmt_pcr_pid};
use crate::testsrc::rate;
use crate::{MediaError, TsSource};
use metronome_wire::ts::{TsPacket, PCR_HZ, PID_NULL, PID_PAT, TS_PACKET_LEN};
use reader::PacketReader;
use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;
use timing::{PcrTimeline, Segment};

/// Packets that may wait for the next PCR (3.8 MB; 0.6 s at 50 Mbit/s, where the standard
/// asks for a PCR every 0.1 s). Past this the packets are timed at the last measured rate.
pub const MAX_LOOKAHEAD_PACKETS: usize = 20_000;
/// The largest believable step between consecutive PCRs; a longer one is a time-base jump.
pub const MAX_PCR_GAP: Duration = Duration::from_secs(1);
/// The rate assumed for extrapolation before two PCRs have been seen.
const FALLBACK_RATE: u64 = 1_000_000;

/// What the reader met on the way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileStats {
    /// TS packets read from the file, over every loop.
    pub packets: u64,
    /// PCRs met on the PCR PID (the PMT's, or the first PID seen carrying one), over every
    /// loop.
    pub pcrs: u64,
    /// New time bases: discontinuity indicators, PCR jumps, and restarts after a loop.
    pub rebases: u64,
    /// Times more than [`MAX_LOOKAHEAD_PACKETS`] packets passed without a PCR.
    pub pcr_gaps: u64,
    /// Times the file was rewound to play again (looping sources only).
    pub loops: u64,
    /// Times sync was lost and found again (ISO/IEC 13818-1 §2.4.3.2: a 0x47 every 188
    /// bytes).
    pub resyncs: u64,
    /// Bytes skipped to regain sync, or left over as a truncated last packet.
    pub skipped_bytes: u64,
}

/// A TS file (or any seekable byte source) as a [`TsSource`].
pub struct TsFileSource {
    name: String,
    looping: bool,
    reader: PacketReader,
    timeline: PcrTimeline,
    /// Packets read but not yet handed out; the front one has index `queue_index`.
    queue: VecDeque<[u8; TS_PACKET_LEN]>,
    queue_index: u64,
    /// Packets up to `seg.b_index` have known times.
    seg: Option<Segment>,
    eof: bool,
    pmt_pid: Option<u16>,
    pcr_pid: Option<u16>,
    pcr_pid_from_pmt: bool,
    /// After a loop, the next PCR starts a new time base.
    restart_pending: bool,
    /// Per PID: the last continuity counter written out (0xff: none yet).
    last_cc: Box<[u8; 8192]>,
    /// Per PID: what to add to the file's counters in this pass (0xff: decide at the next packet).
    cc_shift: Box<[u8; 8192]>,
    stats: FileStats,
    /// A warning to hand out (`TsSource::take_warning`), and whether the truncation was said.
    warning: Option<String>,
    truncation_said: bool,
}

impl std::fmt::Debug for TsFileSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TsFileSource")
            .field("name", &self.name)
            .field("stats", &self.stats)
            .finish()
    }
}

impl TsFileSource {
    /// Opens `path`, checks that it is MPEG-TS and reads up to its first PCRs.
    pub fn open(path: impl AsRef<Path>, looping: bool) -> Result<TsFileSource, MediaError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|source| MediaError::Open {
            path: name.clone(),
            source,
        })?;
        Self::from_reader(name, Box::new(file), looping)
    }

    /// The same over any byte source; `name` is used in messages.
    pub fn from_reader(
        name: String,
        src: Box<dyn ReadSeek>,
        looping: bool,
    ) -> Result<TsFileSource, MediaError> {
        let mut reader = PacketReader::new(src);
        let read_err = |source| MediaError::Read {
            path: name.clone(),
            source,
        };
        if let Err(why) = reader.check_sync().map_err(read_err)? {
            return Err(MediaError::NotTransportStream { path: name, why });
        }
        let mut s = TsFileSource {
            looping,
            reader,
            timeline: PcrTimeline::new(
                MAX_PCR_GAP.as_nanos() as u64 * PCR_HZ / 1_000_000_000,
                FALLBACK_RATE,
            ),
            queue: VecDeque::new(),
            queue_index: 0,
            seg: None,
            eof: false,
            pmt_pid: None,
            pcr_pid: None,
            pcr_pid_from_pmt: false,
            restart_pending: false,
            last_cc: Box::new([0xff; 8192]),
            cc_shift: Box::new([0; 8192]),
            stats: FileStats::default(),
            name,
            warning: None,
            truncation_said: false,
        };
        // Read to the second PCR (or the end): finds the PCR PID and the rate, or fails early.
        while !s.timeline.has_rate() && !s.eof && s.queue.len() < MAX_LOOKAHEAD_PACKETS {
            s.fill()?;
        }
        Ok(s)
    }

    /// What the reader has met so far.
    pub fn stats(&self) -> FileStats {
        FileStats {
            resyncs: self.reader.resyncs,
            skipped_bytes: self.reader.skipped_bytes,
            rebases: self.timeline.rebases,
            ..self.stats
        }
    }

    /// The PID whose PCRs time the stream.
    pub fn pcr_pid(&self) -> Option<u16> {
        self.pcr_pid
    }

    /// Reads packets until the timed segment grows (a PCR, the end, or a full look-ahead).
    fn fill(&mut self) -> Result<(), MediaError> {
        let mut pkt = [0u8; TS_PACKET_LEN];
        loop {
            let got = self
                .reader
                .next(&mut pkt)
                .map_err(|source| MediaError::Read {
                    path: self.name.clone(),
                    source,
                })?;
            if !got {
                let tail = self.reader.truncated_tail;
                if tail > 0 && !self.truncation_said {
                    self.truncation_said = true;
                    self.warning = Some(format!(
                        "'{}' ends mid-packet: its last {tail} bytes (less than a 188-byte TS packet) were dropped",
                        self.name
                    ));
                }
                let index = self.queue_index + self.queue.len() as u64;
                if self.looping && self.seg.is_some() && index > 0 {
                    self.reader.rewind().map_err(|source| MediaError::Read {
                        path: self.name.clone(),
                        source,
                    })?;
                    self.stats.loops += 1;
                    self.restart_pending = true;
                    self.cc_shift.fill(0xff);
                    continue;
                }
                self.eof = true;
                return self.extend_without_pcr();
            }
            let index = self.queue_index + self.queue.len() as u64;
            self.stats.packets += 1;
            let pcr = self.inspect(&mut pkt);
            self.queue.push_back(pkt);
            if let Some((pcr, discontinuity)) = pcr {
                self.stats.pcrs += 1;
                let ticks = self.timeline.on_pcr(index, pcr, discontinuity);
                let seg = match self.seg {
                    None => Segment {
                        a_index: index,
                        a_ticks: ticks,
                        b_index: index,
                        b_ticks: ticks,
                    },
                    // Never earlier than an extrapolated end (keeps time monotone).
                    Some(s) => Segment {
                        a_index: s.b_index,
                        a_ticks: s.b_ticks,
                        b_index: index,
                        b_ticks: ticks.max(s.b_ticks),
                    },
                };
                self.seg = Some(seg);
                return Ok(());
            }
            if self.queue.len() >= MAX_LOOKAHEAD_PACKETS {
                self.stats.pcr_gaps += 1;
                return self.extend_without_pcr();
            }
        }
    }

    /// Times the queued packets after the last PCR at the last known rate (end of file, or too
    /// long without a PCR). Without any PCR yet, the stream cannot be timed at all.
    fn extend_without_pcr(&mut self) -> Result<(), MediaError> {
        let last = (self.queue_index + self.queue.len() as u64).checked_sub(1);
        match (self.seg, last) {
            (_, None) => Ok(()),
            (None, Some(_)) if self.queue.is_empty() => Ok(()),
            (None, Some(n)) => Err(MediaError::NotTransportStream {
                path: self.name.clone(),
                why: format!(
                    "no PCR in its first {} packets{}, so it cannot be timed",
                    n + 1,
                    if self.eof { " (the whole file)" } else { "" }
                ),
            }),
            (Some(s), Some(n)) if n > s.b_index => {
                let ticks = s.b_ticks + self.timeline.extrapolate(n - s.b_index);
                self.seg = Some(Segment {
                    a_index: s.b_index,
                    a_ticks: s.b_ticks,
                    b_index: n,
                    b_ticks: ticks,
                });
                Ok(())
            }
            (Some(_), Some(_)) => Ok(()),
        }
    }

    /// Looks at one packet on its way in: PSI for the PCR PID, continuity counters after a
    /// loop, and the PCR. Returns (PCR, new time base?) when it carries the stream's PCR.
    fn inspect(&mut self, pkt: &mut [u8; TS_PACKET_LEN]) -> Option<(u64, bool)> {
        let p = TsPacket::parse(pkt).ok()?;
        let pid = p.pid();
        if pid == PID_NULL {
            return None;
        }
        if p.payload_unit_start() {
            self.read_psi(&p);
        }
        self.renumber_cc(pkt);
        let p = TsPacket::parse(pkt).ok()?;
        let (pcr, discontinuity) = (p.pcr()?, p.discontinuity());
        if self.pcr_pid.is_none() {
            self.pcr_pid = Some(pid);
        }
        if self.pcr_pid != Some(pid) {
            return None;
        }
        let restart = std::mem::take(&mut self.restart_pending);
        if restart {
            // §2.4.3.5: a new PCR time base starts at this packet (it has an adaptation field,
            // since it carries a PCR).
            pkt[5] |= 0x80;
        }
        Some((pcr, restart || discontinuity))
    }

    fn read_psi(&mut self, p: &TsPacket) {
        if p.pid() == PID_PAT {
            if let Some(s) = parse_section(p.payload()).filter(|s| s.table_id == 0x00) {
                self.pmt_pid = pat_programs(s.body).next().map(|(_, pid)| pid);
            }
        } else if Some(p.pid()) == self.pmt_pid
            && !self.pcr_pid_from_pmt
            && !self.timeline.has_anchor()
        {
            let pcr_pid = parse_section(p.payload())
                .filter(|s| s.table_id == 0x02)
                .and_then(|s| pmt_pcr_pid(s.body));
            if let Some(pid) = pcr_pid.filter(|&pid| pid != PID_NULL) {
                self.pcr_pid = Some(pid);
                self.pcr_pid_from_pmt = true;
            }
        }
    }

    /// Keeps each PID's continuity counter running on across a loop (§2.4.3.3: +1 per packet
    /// with payload, unchanged without): the first packet of a PID in a new pass fixes the shift.
    fn renumber_cc(&mut self, pkt: &mut [u8; TS_PACKET_LEN]) {
        let pid = (u16::from_be_bytes([pkt[1], pkt[2]]) & 0x1fff) as usize;
        let cc = pkt[3] & 0x0f;
        let has_payload = pkt[3] & 0x10 != 0;
        if self.cc_shift[pid] == 0xff {
            let last = self.last_cc[pid];
            self.cc_shift[pid] = if last == 0xff {
                0
            } else {
                let expected = if has_payload { (last + 1) & 0x0f } else { last };
                expected.wrapping_sub(cc) & 0x0f
            };
        }
        let out = (cc + self.cc_shift[pid]) & 0x0f;
        pkt[3] = (pkt[3] & 0xf0) | out;
        self.last_cc[pid] = out;
    }
}

impl TsSource for TsFileSource {
    fn next_packet(&mut self, out: &mut [u8; 188]) -> Result<Option<Duration>, MediaError> {
        loop {
            if let Some(seg) = self.seg.filter(|s| self.queue_index <= s.b_index) {
                if let Some(pkt) = self.queue.pop_front() {
                    *out = pkt;
                    let ticks = seg.ticks_at(self.queue_index);
                    self.queue_index += 1;
                    return Ok(Some(Duration::from_nanos(
                        (ticks as u128 * 1000 / 27) as u64,
                    )));
                }
            }
            if self.eof {
                return Ok(None);
            }
            self.fill()?;
        }
    }

    fn describe(&self) -> String {
        format!(
            "MPEG-TS file '{}' (PCR PID {}, {}{})",
            self.name,
            self.pcr_pid.map_or("none".into(), |p| format!("{p:#x}")),
            self.nominal_bitrate().map_or("rate unknown".into(), rate),
            if self.looping { ", looping" } else { "" }
        )
    }

    fn nominal_bitrate(&self) -> Option<u64> {
        self.timeline.average_rate()
    }

    fn take_warning(&mut self) -> Option<String> {
        self.warning.take()
    }
}

#[cfg(test)]
mod tests;
