//! The receiver's SMPTE 2022-1 FEC: keeps the last [`MEDIA_WINDOW`] media packets and the FEC
//! packets that could not be used yet; a row or column missing exactly one packet gives it
//! back (the XOR of the FEC packet and the others), and a packet rebuilt may complete another
//! row or column, in either direction, in turn (as GStreamer's `rtpst2022-1-fecdec`).
//!
//! The matrix (L, D) is read from each FEC packet (its offset and NA), within SMPTE 2022-1's
//! limits ([`MAX_SIDE`] packets a row or column, [`MAX_MATRIX`] in all), which also bound what
//! one FEC packet costs to use. Memory is bounded:
//! [`MEDIA_WINDOW`] packets and [`PENDING`] FEC packets of at most `max_packet` bytes each,
//! grown as packets come; [`RECOVERED`] rebuilt packets wait for the caller.

use metronome_wire::fec2022::{self, FecHeader};
use metronome_wire::rtp::RTP_HEADER_LEN;
use metronome_wire::SeqNo;
use std::collections::VecDeque;

/// Media packets kept, by sequence number (a power of two that divides 65 536).
pub const MEDIA_WINDOW: usize = 1024;
/// FEC packets kept while more than one of their packets is missing.
pub const PENDING: usize = 64;
/// Rebuilt packets waiting to be taken.
pub const RECOVERED: usize = 64;
/// Packets in a row (L) or a column (D) at most (SMPTE 2022-1).
pub const MAX_SIDE: u8 = 20;
/// Packets in a matrix (L × D) at most (SMPTE 2022-1).
pub const MAX_MATRIX: u16 = 100;

/// What the decoder did with the FEC packets it was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct FecReceiveCounters {
    /// FEC packets received.
    pub packets: u64,
    /// Of them: not SMPTE 2022-1 XOR FEC (see `metronome_wire::fec2022::FecError`), a
    /// matrix beyond SMPTE 2022-1's limits, or lengths that disagree with the packets'.
    pub malformed: u64,
    /// Of them: every packet they protect was there (nothing to do).
    pub unneeded: u64,
    /// Packets rebuilt.
    pub recovered: u64,
    /// FEC packets dropped with two or more of their packets still missing.
    pub unrecoverable: u64,
    /// FEC packets too far from the media received to be placed, or of packets larger than
    /// what is kept.
    pub out_of_window: u64,
    /// Rebuilt packets the caller did not take in time (the queue was full).
    pub overflow: u64,
}

#[derive(Debug, Default)]
struct Slot {
    seq: SeqNo,
    full: bool,
    bytes: Vec<u8>,
}

#[derive(Debug)]
struct Pending {
    header: FecHeader,
    payload: Vec<u8>,
}

/// Rebuilds lost media packets from SMPTE 2022-1 FEC (sans-IO).
#[derive(Debug)]
pub struct FecDecoder {
    max_packet: usize,
    media: Vec<Slot>,
    highest: Option<SeqNo>,
    pending: Vec<Pending>,
    recovered: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    counters: FecReceiveCounters,
    /// L of the last row FEC packet taken: how many packets a row protects.
    row_length: Option<u8>,
}

impl FecDecoder {
    /// A decoder for media packets of at most `max_packet` bytes.
    pub fn new(max_packet: usize) -> FecDecoder {
        FecDecoder {
            max_packet,
            media: (0..MEDIA_WINDOW).map(|_| Slot::default()).collect(),
            highest: None,
            pending: Vec::with_capacity(PENDING),
            recovered: VecDeque::with_capacity(RECOVERED),
            spare: Vec::new(),
            counters: FecReceiveCounters::default(),
            row_length: None,
        }
    }

    /// How many packets a row protects (L), as the last row FEC packet said; `None` before
    /// one came (or with column FEC alone).
    pub fn row_length(&self) -> Option<u8> {
        self.row_length
    }

    /// What it did so far.
    pub fn counters(&self) -> FecReceiveCounters {
        self.counters
    }

    /// A media packet arrived (or was repaired another way): kept, and any FEC packet waiting
    /// for it tried again.
    pub fn on_media(&mut self, pkt: &[u8]) {
        if pkt.len() < RTP_HEADER_LEN || pkt.len() > self.max_packet {
            return;
        }
        let seq = SeqNo::from_be_bytes([pkt[2], pkt[3]]);
        if self.has(seq) {
            return;
        }
        self.store(seq, pkt);
        self.retry_pending(seq);
    }

    /// A FEC packet arrived: used at once if it can rebuild a packet, kept if it may later.
    pub fn on_fec(&mut self, data: &[u8]) {
        self.counters.packets += 1;
        let Ok(view) = fec2022::parse(data) else {
            self.counters.malformed += 1;
            return;
        };
        let h = view.header;
        let matrix = u16::from(h.na) * u16::from(h.offset);
        if h.na > MAX_SIDE || h.offset > MAX_SIDE || matrix > MAX_MATRIX {
            self.counters.malformed += 1;
            return;
        }
        if !self.placeable(&h) || view.payload.len() > self.max_packet {
            self.counters.out_of_window += 1;
            return;
        }
        if h.direction == fec2022::Direction::Row {
            self.row_length = Some(h.na);
        }
        match self.missing(&h) {
            Missing::None => self.counters.unneeded += 1,
            Missing::One(seq) => {
                if self.rebuild(&h, view.payload, seq) {
                    self.retry_pending(seq);
                }
            }
            Missing::Many => self.keep_pending(h, view.payload),
        }
    }

    /// The next rebuilt packet, into `out` (cleared first); false if none waits.
    pub fn poll_recovered(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(p) = self.recovered.pop_front() else {
            return false;
        };
        out.clear();
        out.extend_from_slice(&p);
        self.spare.push(p);
        true
    }

    fn slot(&self, seq: SeqNo) -> &Slot {
        &self.media[usize::from(seq.get()) % MEDIA_WINDOW]
    }

    fn has(&self, seq: SeqNo) -> bool {
        let s = self.slot(seq);
        s.full && s.seq == seq
    }

    fn store(&mut self, seq: SeqNo, pkt: &[u8]) {
        let newer = self.highest.is_none_or(|h| seq.is_after(h));
        if newer {
            self.highest = Some(seq);
            self.age_pending(seq);
        }
        let s = &mut self.media[usize::from(seq.get()) % MEDIA_WINDOW];
        s.seq = seq;
        s.full = true;
        s.bytes.clear();
        s.bytes.extend_from_slice(pkt);
    }

    /// Whether every packet `h` protects is within the window around the highest packet.
    fn placeable(&self, h: &FecHeader) -> bool {
        let Some(top) = self.highest else {
            return true;
        };
        let first = i32::from(h.sn_base.delta(top));
        let last = i32::from(h.protected(h.na - 1).delta(top));
        let half = (MEDIA_WINDOW / 2) as i32;
        first > -half && last < half
    }

    fn missing(&self, h: &FecHeader) -> Missing {
        let mut missing = Missing::None;
        for i in 0..h.na {
            let seq = h.protected(i);
            if !self.has(seq) {
                missing = match missing {
                    Missing::None => Missing::One(seq),
                    _ => return Missing::Many,
                };
            }
        }
        missing
    }

    /// Rebuilds `seq` from FEC `h` with `payload` and the others it protects; whether it could
    /// (the FEC's lengths agree with the packets').
    fn rebuild(&mut self, h: &FecHeader, payload: &[u8], seq: SeqNo) -> bool {
        let mut len = h.length_recovery;
        let (mut pt, mut ts, mut marker) = (h.pt_recovery, h.ts_recovery, h.marker_recovery);
        let mut first: Option<[u8; 12]> = None;
        for i in 0..h.na {
            let s = h.protected(i);
            if s == seq {
                continue;
            }
            let p = &self.slot(s).bytes;
            len ^= (p.len() - RTP_HEADER_LEN) as u16;
            pt ^= p[1] & 0x7f;
            ts ^= u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
            marker ^= p[1] & 0x80 != 0;
            first.get_or_insert_with(|| p[..12].try_into().unwrap_or([0; 12]));
        }
        let len = usize::from(len);
        if len > payload.len() || RTP_HEADER_LEN + len > self.max_packet {
            self.counters.malformed += 1;
            return false;
        }
        let mut out = self.spare.pop().unwrap_or_default();
        out.clear();
        // P, X and CC as the others' (the FEC packet carries none); SSRC theirs too.
        let like = first.unwrap_or([0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.push(like[0]);
        out.push((u8::from(marker) << 7) | pt);
        out.extend_from_slice(&seq.to_be_bytes());
        out.extend_from_slice(&ts.to_be_bytes());
        out.extend_from_slice(&like[8..12]);
        out.extend_from_slice(&payload[..len]);
        for i in 0..h.na {
            let s = h.protected(i);
            if s != seq {
                let body = &self.slot(s).bytes[RTP_HEADER_LEN..];
                let n = body.len().min(len);
                fec2022::xor_into(&mut out[RTP_HEADER_LEN..RTP_HEADER_LEN + n], &body[..n]);
            }
        }
        self.store(seq, &out);
        self.counters.recovered += 1;
        if self.recovered.len() == RECOVERED {
            self.counters.overflow += 1;
            if let Some(old) = self.recovered.pop_front() {
                self.spare.push(old);
            }
        }
        self.recovered.push_back(out);
        true
    }

    fn keep_pending(&mut self, header: FecHeader, payload: &[u8]) {
        if self.pending.len() == PENDING {
            // The oldest goes: the one whose first packet is furthest behind (one ahead of
            // the highest is the newest).
            let top = self.highest.unwrap_or_default();
            let oldest = (0..self.pending.len())
                .max_by_key(|&i| top.delta(self.pending[i].header.sn_base))
                .unwrap_or(0);
            self.drop_pending(oldest);
        }
        self.pending.push(Pending {
            header,
            payload: payload.to_vec(),
        });
    }

    fn drop_pending(&mut self, i: usize) {
        let p = self.pending.swap_remove(i);
        if !matches!(self.missing(&p.header), Missing::None) {
            self.counters.unrecoverable += 1;
        }
    }

    /// Packet `seq` is now had: FEC packets that protect it are tried again, and so on for
    /// what they rebuild (each rebuild may age others out: the scan starts again).
    fn retry_pending(&mut self, seq: SeqNo) {
        let mut work = vec![seq];
        while let Some(seq) = work.pop() {
            let mut i = 0;
            while i < self.pending.len() {
                if !self.pending[i].header.covers(seq) {
                    i += 1;
                    continue;
                }
                match self.missing(&self.pending[i].header) {
                    Missing::Many => i += 1,
                    Missing::None => {
                        self.pending.swap_remove(i);
                    }
                    Missing::One(s) => {
                        let p = self.pending.swap_remove(i);
                        if self.rebuild(&p.header, &p.payload, s) {
                            work.push(s);
                        }
                        i = 0;
                    }
                }
            }
        }
    }

    /// Drops FEC packets whose packets have left the window behind `top`.
    fn age_pending(&mut self, top: SeqNo) {
        let mut i = 0;
        while i < self.pending.len() {
            let h = &self.pending[i].header;
            let behind = usize::from(top.since(h.sn_base));
            if (MEDIA_WINDOW / 2..0x8000).contains(&behind) {
                self.drop_pending(i);
            } else {
                i += 1;
            }
        }
    }
}

enum Missing {
    None,
    One(SeqNo),
    Many,
}

#[cfg(test)]
mod tests;
