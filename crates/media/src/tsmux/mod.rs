//! A constant-rate MPEG-TS muxer for one H.264 program (ISO/IEC 13818-1).
//!
//! Like a broadcast or IPTV muxer it fills every packet slot: TS packet `i` is due at
//! `i × 188 × 8 / mux_rate` seconds on the stream timeline, and a slot with nothing to carry
//! becomes a null packet (PID 0x1FFF, §2.4.3.3). Per slot, in priority order:
//!
//! 1. the PMT right after a PAT;
//! 2. a PAT when due (every `psi_interval`, and first of all);
//! 3. a video-PID packet carrying a PCR when one is due (every `pcr_interval`), with payload if
//!    a frame is ready and as an adaptation-field-only packet if not;
//! 4. the next piece of the oldest ready frame (a frame is ready at its capture time);
//! 5. a null packet.
//!
//! The rate may change while the stream runs ([`TsMuxer::switch_rate_at_last_frame`]): from the
//! first packet of the marked frame on, slots are spaced at the new rate, continuing from where
//! the old rate left the timeline, so the clock and the PCR stay continuous and only their
//! slope changes (as a statistical multiplexer re-allocating a program's share does). The frames
//! queued before it, made for the old rate, still leave at the old rate.
//!
//! The PCR of packet `i` is the start offset plus the packet's time, in 27 MHz ticks. A frame's
//! PTS is its capture time plus a fixed mux delay (plus the same offset); a frame whose last
//! packet has not fully left by its PTS would underflow the decoder and is counted as late.

mod packet;

pub use packet::{decode_timestamp, AUD, PES_HEADER_LEN, STREAM_ID_VIDEO};

use crate::h264::{nal_type, nal_units};
use crate::psi::{write_pat, write_pmt, STREAM_TYPE_H264};
use crate::MediaError;
use metronome_wire::ts::{PCR_HZ, PID_NULL, TS_PACKET_LEN};
use packet::{write_adaptation_field, write_header, AdaptationField, Afc, BODY_LEN};
use std::collections::VecDeque;
use std::time::Duration;

/// Muxer settings. The defaults give a 5 Mbit/s stream with program 1, PMT on PID 0x1000 and
/// H.264 video (which also carries the PCR) on PID 0x100.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TsMuxConfig {
    /// Total TS rate in bits per second, null packets included.
    pub mux_rate: u64,
    /// PTS − capture time: how long the receiver buffers before showing a frame.
    pub mux_delay: Duration,
    /// Target PCR spacing (ISO/IEC 13818-1 §2.7.2 requires ≤ 100 ms; DVB and this crate ≤ 40 ms).
    pub pcr_interval: Duration,
    /// Target PAT/PMT repetition period (≤ 100 ms).
    pub psi_interval: Duration,
    /// The PCR and PTS value of stream time zero.
    pub start_offset: Duration,
    /// The PAT's `transport_stream_id` (§2.4.4.5).
    pub transport_stream_id: u16,
    /// The one program's `program_number`, in the PAT and the PMT (§2.4.4.3, §2.4.4.8).
    pub program_number: u16,
    /// The PMT's PID: 0x10 to 0x1FFE, not `video_pid`.
    pub pmt_pid: u16,
    /// The H.264 stream's PID, which also carries the PCR: 0x10 to 0x1FFE.
    pub video_pid: u16,
}

impl Default for TsMuxConfig {
    fn default() -> Self {
        TsMuxConfig {
            mux_rate: 5_000_000,
            mux_delay: Duration::from_millis(450),
            pcr_interval: Duration::from_millis(30),
            psi_interval: Duration::from_millis(80),
            start_offset: Duration::from_secs(1),
            transport_stream_id: 1,
            program_number: 1,
            pmt_pid: 0x1000,
            video_pid: 0x100,
        }
    }
}

/// Counters of what the muxer wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MuxStats {
    /// TS packets written, of every kind (one per slot).
    pub packets: u64,
    /// Null packets (PID 0x1FFF) written to fill slots with nothing to send.
    pub null_packets: u64,
    /// PAT and PMT packets.
    pub psi_packets: u64,
    /// Packets on the video PID, PCR-only ones included.
    pub video_packets: u64,
    /// Video-PID packets that carried a PCR.
    pub pcr_packets: u64,
    /// Access units pushed in.
    pub frames_in: u64,
    /// Access units whose last packet has been written.
    pub frames_out: u64,
    /// Frames whose last packet left after their PTS (decoder underflow).
    pub late_frames: u64,
    /// The smallest PTS − (time of the frame's last packet) seen; negative when a frame was late.
    pub min_slack_ns: Option<i64>,
    /// The most video bytes waiting in the queue at once.
    pub max_queued_bytes: usize,
}

/// A frame in the queue: its PES bytes sit in `TsMuxer::pes` in queue order.
#[derive(Clone, Copy, Debug)]
struct QueuedFrame {
    ready_ns: u64,
    pts_ns: u64,
    pes_len: usize,
    idr: bool,
    /// The mux rate from this frame's first packet on, if it changes there.
    switch_to: Option<u64>,
}

/// Where the current rate took over: slot `index` at `ns` on the timeline, `pcr` in 27 MHz
/// ticks since the start offset.
#[derive(Clone, Copy, Debug, Default)]
struct RateBase {
    index: u64,
    ns: u64,
    pcr: u64,
}

/// The muxer. Feed frames with [`TsMuxer::push_access_unit`], take packets with
/// [`TsMuxer::write_packet`] (one per slot, always).
#[derive(Debug)]
pub struct TsMuxer {
    cfg: TsMuxConfig,
    index: u64,
    cc_pat: u8,
    cc_pmt: u8,
    cc_video: u8,
    next_pat_ns: u64,
    pmt_next: bool,
    last_pcr_ns: Option<u64>,
    /// PES bytes of all queued frames; the next byte to send is at `head`.
    pes: Vec<u8>,
    head: usize,
    /// Bytes of the front frame's PES packet already sent.
    front_sent: usize,
    frames: VecDeque<QueuedFrame>,
    stats: MuxStats,
    /// Where `cfg.mux_rate` took over (slot 0 until the rate first changes).
    base: RateBase,
}

impl TsMuxer {
    /// A muxer with nothing queued, at slot 0. [`MediaError::Config`] when the PIDs clash or
    /// lie outside 0x10..0x1FFE, or the rate is outside 10 kbit/s to 10 Gbit/s or too low for
    /// the PCR and PSI intervals to span 3 packets.
    pub fn new(cfg: TsMuxConfig) -> Result<TsMuxer, MediaError> {
        let pids = [cfg.pmt_pid, cfg.video_pid];
        if pids.iter().any(|&p| !(0x10..PID_NULL).contains(&p)) || cfg.pmt_pid == cfg.video_pid {
            return Err(MediaError::Config(format!(
                "PMT PID {:#x} and video PID {:#x} must differ and lie in 0x10..0x1FFE",
                cfg.pmt_pid, cfg.video_pid
            )));
        }
        Self::check_rate(&cfg, cfg.mux_rate)?;
        Ok(TsMuxer {
            cfg,
            index: 0,
            cc_pat: 0,
            cc_pmt: 0,
            cc_video: 0,
            next_pat_ns: 0,
            pmt_next: false,
            last_pcr_ns: None,
            pes: Vec::new(),
            head: 0,
            front_sent: 0,
            frames: VecDeque::new(),
            stats: MuxStats::default(),
            base: RateBase::default(),
        })
    }

    /// Whether `mux_rate` is one `cfg`'s muxer can run at.
    fn check_rate(cfg: &TsMuxConfig, mux_rate: u64) -> Result<(), MediaError> {
        if !(10_000..=10_000_000_000).contains(&mux_rate) {
            return Err(MediaError::Config(format!(
                "mux rate {mux_rate} bit/s is outside 10 kbit/s .. 10 Gbit/s"
            )));
        }
        let slot_ns = 1504 * 1_000_000_000 / mux_rate;
        if (cfg.pcr_interval.as_nanos() as u64) < 3 * slot_ns
            || (cfg.psi_interval.as_nanos() as u64) < 3 * slot_ns
        {
            return Err(MediaError::Config(format!(
                "PCR interval {:?} and PSI interval {:?} must span at least 3 packets ({} µs each at {mux_rate} bit/s)",
                cfg.pcr_interval,
                cfg.psi_interval,
                slot_ns / 1000
            )));
        }
        Ok(())
    }

    /// Its settings now: as made, `mux_rate` as the last rate switch set it.
    pub fn config(&self) -> &TsMuxConfig {
        &self.cfg
    }
    /// What the muxer has written so far.
    pub fn stats(&self) -> &MuxStats {
        &self.stats
    }

    /// Stream time of packet slot `i`: `i × 1504 / mux_rate` seconds, in whole nanoseconds (floored).
    pub fn slot_time(&self, i: u64) -> Duration {
        Duration::from_nanos(self.slot_ns(i))
    }
    fn slot_ns(&self, i: u64) -> u64 {
        let b = self.base;
        b.ns + ((i - b.index) as u128 * 1504 * 1_000_000_000 / self.cfg.mux_rate as u128) as u64
    }
    /// The PCR of packet slot `i` in 27 MHz ticks (before the 2^33×300 wrap): the start offset
    /// plus `i × 1504 × 27 000 000 / mux_rate`, floored (§2.4.2.2).
    pub fn slot_pcr(&self, i: u64) -> u64 {
        let offset = self.cfg.start_offset.as_nanos() * PCR_HZ as u128 / 1_000_000_000;
        let b = self.base;
        let since = (i - b.index) as u128 * 1504 * PCR_HZ as u128 / self.cfg.mux_rate as u128;
        (offset + b.pcr as u128 + since) as u64
    }

    /// The current mux rate, bit/s (it changes at the first packet of a frame marked with
    /// [`TsMuxer::switch_rate_at_last_frame`]).
    pub fn rate(&self) -> u64 {
        self.cfg.mux_rate
    }

    /// Changes the mux rate from the first packet of the frame pushed last: the frames before
    /// it were made for the old rate and leave at it. The rate must lie within what
    /// [`TsMuxer::new`] accepts and keep the PCR and PSI intervals at least 3 slots long.
    pub fn switch_rate_at_last_frame(&mut self, mux_rate: u64) -> Result<(), MediaError> {
        Self::check_rate(&self.cfg, mux_rate)?;
        let Some(last) = self.frames.back_mut() else {
            return Err(MediaError::Config(
                "a rate change needs a frame to start at: push one first".into(),
            ));
        };
        last.switch_to = Some(mux_rate);
        Ok(())
    }

    /// Slots from `self.index` on are spaced at `mux_rate`.
    fn rebase(&mut self, mux_rate: u64) {
        let offset = self.cfg.start_offset.as_nanos() * PCR_HZ as u128 / 1_000_000_000;
        self.base = RateBase {
            index: self.index,
            ns: self.slot_ns(self.index),
            pcr: (self.slot_pcr(self.index) as u128 - offset) as u64,
        };
        self.cfg.mux_rate = mux_rate;
    }
    /// The time of the next packet [`TsMuxer::write_packet`] will write.
    pub fn next_packet_time(&self) -> Duration {
        self.slot_time(self.index)
    }
    /// Whether every queued frame has been sent.
    pub fn is_drained(&self) -> bool {
        self.frames.is_empty()
    }
    /// The PTS (90 kHz, before the 33-bit wrap) of a frame captured at `capture`.
    pub fn pts_for(&self, capture: Duration) -> u64 {
        let ns = (self.cfg.start_offset + capture + self.cfg.mux_delay).as_nanos();
        ((ns * 9 + 50_000) / 100_000) as u64
    }

    /// Queues one H.264 access unit (Annex-B) captured at `capture` on the stream timeline; it is
    /// sent no earlier than that, with PTS = capture + mux delay. An access unit delimiter is
    /// put in front unless the access unit starts with one.
    pub fn push_access_unit(
        &mut self,
        capture: Duration,
        au: &[u8],
        idr: bool,
    ) -> Result<(), MediaError> {
        let backlog_limit = (self.cfg.mux_rate / 8 * 4) as usize;
        if self.pes.len() - self.head > backlog_limit {
            return Err(MediaError::Config(format!(
                "the video needs more than the mux rate of {} bit/s: over 4 s of data is waiting; raise the mux rate or lower the video bitrate",
                self.cfg.mux_rate
            )));
        }
        let has_aud = nal_units(au).next().and_then(nal_type) == Some(9);
        let es_len = au.len() + if has_aud { 0 } else { AUD.len() };
        // Drop the bytes already sent before appending (at most once per frame, no reallocation
        // once the buffer has reached its working size).
        self.pes.drain(..self.head);
        self.head = 0;
        self.pes
            .extend_from_slice(&packet::pes_header(self.pts_for(capture), es_len));
        if !has_aud {
            self.pes.extend_from_slice(&AUD);
        }
        self.pes.extend_from_slice(au);
        self.frames.push_back(QueuedFrame {
            ready_ns: capture.as_nanos() as u64,
            pts_ns: (capture + self.cfg.mux_delay).as_nanos() as u64,
            pes_len: PES_HEADER_LEN + es_len,
            idr,
            switch_to: None,
        });
        self.stats.frames_in += 1;
        self.stats.max_queued_bytes = self.stats.max_queued_bytes.max(self.pes.len());
        Ok(())
    }

    /// Writes the packet of the next slot into `out` and returns its time on the stream timeline.
    pub fn write_packet(&mut self, out: &mut [u8; TS_PACKET_LEN]) -> Duration {
        // A frame that changes the rate does so at its first packet, once it is ready.
        let switch = self.frames.front().and_then(|f| {
            let ready = f.ready_ns <= self.slot_ns(self.index);
            f.switch_to.filter(|_| ready && self.front_sent == 0)
        });
        if let Some(rate) = switch {
            self.rebase(rate);
            if let Some(f) = self.frames.front_mut() {
                f.switch_to = None;
            }
        }
        let now = self.slot_ns(self.index);
        let pcr_due = self
            .last_pcr_ns
            .is_none_or(|last| now - last >= self.cfg.pcr_interval.as_nanos() as u64);
        let frame_ready = self.frames.front().is_some_and(|f| f.ready_ns <= now);
        if self.pmt_next {
            self.write_pmt(out);
            self.pmt_next = false;
        } else if now >= self.next_pat_ns {
            self.write_pat(out);
            self.next_pat_ns = now + self.cfg.psi_interval.as_nanos() as u64;
            self.pmt_next = true;
        } else if pcr_due {
            self.write_video(out, now, Some(self.slot_pcr(self.index)), frame_ready);
            self.last_pcr_ns = Some(now);
            self.stats.pcr_packets += 1;
        } else if frame_ready {
            self.write_video(out, now, None, true);
        } else {
            write_null(out);
            self.stats.null_packets += 1;
        }
        self.index += 1;
        self.stats.packets += 1;
        Duration::from_nanos(now)
    }

    /// PAT: program `program_number` → PMT PID (§2.4.4.3), in one packet after a pointer_field.
    fn write_pat(&mut self, out: &mut [u8; TS_PACKET_LEN]) {
        write_header(out, 0, true, Afc::PayloadOnly, self.cc_pat);
        self.cc_pat = (self.cc_pat + 1) & 0x0f;
        out[4] = 0; // pointer_field (§2.4.4.2)
        let n = write_pat(
            &mut out[5..],
            self.cfg.transport_stream_id,
            self.cfg.program_number,
            self.cfg.pmt_pid,
            0,
        );
        out[5 + n..].fill(0xff);
        self.stats.psi_packets += 1;
    }

    /// PMT: PCR on the video PID, one H.264 stream (§2.4.4.8).
    fn write_pmt(&mut self, out: &mut [u8; TS_PACKET_LEN]) {
        write_header(out, self.cfg.pmt_pid, true, Afc::PayloadOnly, self.cc_pmt);
        self.cc_pmt = (self.cc_pmt + 1) & 0x0f;
        out[4] = 0;
        let (pid, prog) = (self.cfg.video_pid, self.cfg.program_number);
        let n = write_pmt(&mut out[5..], prog, pid, STREAM_TYPE_H264, pid, 0);
        out[5 + n..].fill(0xff);
        self.stats.psi_packets += 1;
    }

    /// A video-PID packet: the next piece of the front frame if `with_payload`, and/or a PCR.
    fn write_video(
        &mut self,
        out: &mut [u8; TS_PACKET_LEN],
        now: u64,
        pcr: Option<u64>,
        with_payload: bool,
    ) {
        let pid = self.cfg.video_pid;
        let Some(frame) = self.frames.front().copied().filter(|_| with_payload) else {
            // PCR only: adaptation_field_control '10', so the continuity_counter repeats the
            // previous packet's value (§2.4.3.3); `cc_video` holds the next one.
            write_header(
                out,
                pid,
                false,
                Afc::AdaptationOnly,
                (self.cc_video + 15) & 0x0f,
            );
            let af = AdaptationField {
                pcr,
                ..Default::default()
            };
            write_adaptation_field(out, &af, BODY_LEN);
            self.stats.video_packets += 1;
            return;
        };
        let pusi = self.front_sent == 0;
        let af = AdaptationField {
            pcr,
            // random_access_indicator on the packet that starts an IDR access unit (§2.4.3.5).
            random_access: pusi && frame.idr,
            discontinuity: false,
        };
        let remaining = frame.pes_len - self.front_sent;
        let payload = remaining.min(BODY_LEN - af.min_len());
        let af_total = BODY_LEN - payload;
        let afc = if af_total == 0 {
            Afc::PayloadOnly
        } else {
            Afc::Both
        };
        write_header(out, pid, pusi, afc, self.cc_video);
        self.cc_video = (self.cc_video + 1) & 0x0f;
        if af_total > 0 {
            write_adaptation_field(out, &af, af_total);
        }
        out[4 + af_total..].copy_from_slice(&self.pes[self.head..self.head + payload]);
        self.head += payload;
        self.front_sent += payload;
        self.stats.video_packets += 1;
        if self.front_sent == frame.pes_len {
            self.finish_frame(now, frame);
        }
    }

    /// Bookkeeping once a frame's last packet is written at `now` (its due time): the frame is
    /// late when that packet leaves after the frame's PTS.
    fn finish_frame(&mut self, now: u64, frame: QueuedFrame) {
        self.frames.pop_front();
        self.front_sent = 0;
        let slack = frame.pts_ns as i64 - now as i64;
        if slack < 0 {
            self.stats.late_frames += 1;
        }
        self.stats.min_slack_ns = Some(self.stats.min_slack_ns.map_or(slack, |s| s.min(slack)));
        self.stats.frames_out += 1;
    }
}

/// A null packet (PID 0x1FFF, §2.4.3.3): payload only, all 0xFF.
fn write_null(out: &mut [u8; TS_PACKET_LEN]) {
    write_header(out, PID_NULL, false, Afc::PayloadOnly, 0);
    out[4..].fill(0xff);
}

#[cfg(test)]
mod tests;
