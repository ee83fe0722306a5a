//! The sender's SMPTE 2022-1 FEC: each media packet, as it leaves, is XORed into its row and
//! its column of an L × D matrix; a row's FEC packet goes out after the row's last packet, a
//! column's during the next matrix, one every D media packets (spread, so that a loss burst
//! that takes media does not also take the FEC that repairs it: SMPTE 2022-1 §7 delays them
//! by at least L packets, as GStreamer's `rtpst2022-1-fecenc` does).
//!
//! Memory is made up front: 2 L + 3 buffers of the largest packet protected (a driver that
//! does not take what is made after each packet makes it grow, to 3 L + 3 at most).

use metronome_config::repair::FecShape;
use metronome_time::RtpTime;
use metronome_wire::fec2022::{self, Direction, FecHeader, FecStream};
use metronome_wire::rtp::RTP_HEADER_LEN;
use metronome_wire::{PayloadType, SeqNo};
use std::collections::VecDeque;

/// How a sender makes FEC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FecConfig {
    /// The matrix.
    pub shape: FecShape,
    /// The FEC packets' payload type.
    pub payload_type: PayloadType,
    /// The largest media packet protected, bytes after its 12-byte fixed header; a longer one
    /// restarts the matrix (counted).
    pub max_packet: usize,
}

impl FecConfig {
    /// FEC over `shape` with payload type 96, for packets of at most 1500 bytes.
    pub fn new(shape: FecShape) -> FecConfig {
        FecConfig {
            shape,
            payload_type: fec2022::FEC_PAYLOAD_TYPE,
            max_packet: 1500,
        }
    }

    /// The largest FEC packet it makes, bytes.
    pub fn max_fec_packet(&self) -> usize {
        self.max_packet + fec2022::FEC_HEADER_LEN
    }
}

/// What the encoder made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct FecSendCounters {
    /// Row FEC packets sent.
    pub rows: u64,
    /// Column FEC packets sent.
    pub columns: u64,
    /// Bytes of FEC packets (RTP header included).
    pub bytes: u64,
    /// Times the matrix started again, its packets unprotected: a gap in the media's
    /// sequence numbers, or a packet too large to protect.
    pub restarts: u64,
}

/// One row or column being XORed.
#[derive(Debug)]
struct Parity {
    header: FecHeader,
    /// Packets in it so far.
    n: u8,
    /// The XOR of their bytes after the fixed header, zero-padded to `len`.
    bytes: Vec<u8>,
    len: usize,
}

impl Parity {
    fn new(max: usize, direction: Direction) -> Parity {
        Parity {
            header: FecHeader {
                sn_base: SeqNo(0),
                length_recovery: 0,
                pt_recovery: 0,
                ts_recovery: 0,
                marker_recovery: false,
                direction,
                offset: 1,
                na: 0,
            },
            n: 0,
            bytes: vec![0; max],
            len: 0,
        }
    }

    fn add(&mut self, pkt: &[u8]) {
        let (seq, ts) = (
            SeqNo::from_be_bytes([pkt[2], pkt[3]]),
            u32::from_be_bytes([pkt[4], pkt[5], pkt[6], pkt[7]]),
        );
        let body = &pkt[RTP_HEADER_LEN..];
        let h = &mut self.header;
        if self.n == 0 {
            h.sn_base = seq;
            (h.length_recovery, h.pt_recovery, h.ts_recovery) = (0, 0, 0);
            h.marker_recovery = false;
            self.bytes[..self.len].fill(0);
            self.len = 0;
        }
        h.length_recovery ^= body.len() as u16;
        h.pt_recovery ^= pkt[1] & 0x7f;
        h.ts_recovery ^= ts;
        h.marker_recovery ^= pkt[1] & 0x80 != 0;
        self.len = self.len.max(body.len());
        fec2022::xor_into(&mut self.bytes[..body.len()], body);
        self.n += 1;
    }
}

/// A column's FEC packet, done and waiting for its turn.
#[derive(Debug)]
struct Held {
    parity: Parity,
    /// Media packets still to go before it does.
    after: u32,
}

/// Makes SMPTE 2022-1 FEC for one media stream (sans-IO: it is given each packet as it left,
/// and asked for what to send).
#[derive(Debug)]
pub struct FecEncoder {
    cfg: FecConfig,
    row: Parity,
    columns: Vec<Parity>,
    /// The next packet's place in the matrix, `0..L·D`.
    place: usize,
    /// The sequence number the next packet must have (the matrix restarts if not).
    next_seq: Option<SeqNo>,
    last_ts: RtpTime,
    /// A row done, to go now.
    row_ready: Option<Parity>,
    held: VecDeque<Held>,
    /// Parities whose buffers are free.
    spare: Vec<Parity>,
    sequences: [SeqNo; 2],
    counters: FecSendCounters,
}

impl FecEncoder {
    /// An encoder for `cfg`; its FEC streams number from `initial_sequence` (columns) and
    /// `initial_sequence + 32768` (rows). A matrix side of 0 is taken as 1.
    pub fn new(mut cfg: FecConfig, initial_sequence: SeqNo) -> FecEncoder {
        cfg.shape.columns = cfg.shape.columns.max(1);
        cfg.shape.rows = cfg.shape.rows.max(1);
        let l = usize::from(cfg.shape.columns);
        let max = cfg.max_packet;
        FecEncoder {
            row: Parity::new(max, Direction::Row),
            columns: (0..l)
                .map(|_| Parity::new(max, Direction::Column))
                .collect(),
            spare: (0..l + 2)
                .map(|_| Parity::new(max, Direction::Row))
                .collect(),
            place: 0,
            next_seq: None,
            last_ts: RtpTime(0),
            row_ready: None,
            held: VecDeque::with_capacity(l),
            sequences: [initial_sequence, initial_sequence.add(0x8000)],
            counters: FecSendCounters::default(),
            cfg,
        }
    }

    /// What it made so far.
    pub fn counters(&self) -> FecSendCounters {
        self.counters
    }

    /// The configuration.
    pub fn config(&self) -> &FecConfig {
        &self.cfg
    }

    /// Media packet `pkt` left (as sent: numbered, stamped, before SRTP).
    pub fn push(&mut self, pkt: &[u8]) {
        if pkt.len() < RTP_HEADER_LEN || pkt.len() - RTP_HEADER_LEN > self.cfg.max_packet {
            self.restart();
            return;
        }
        let seq = SeqNo::from_be_bytes([pkt[2], pkt[3]]);
        if self.next_seq.is_some_and(|s| s != seq) {
            self.restart();
        }
        self.next_seq = Some(seq.next());
        self.last_ts = RtpTime::from_be_bytes([pkt[4], pkt[5], pkt[6], pkt[7]]);
        for h in &mut self.held {
            h.after = h.after.saturating_sub(1);
        }
        let (l, d) = (
            usize::from(self.cfg.shape.columns),
            usize::from(self.cfg.shape.rows),
        );
        self.row.add(pkt);
        if usize::from(self.row.n) == l {
            self.finish_row(l);
        }
        let c = self.place % l;
        self.columns[c].add(pkt);
        self.place += 1;
        if self.place == l * d {
            self.finish_matrix(l, d);
        }
    }

    fn finish_row(&mut self, l: usize) {
        let mut done = self.take_spare(Direction::Row);
        std::mem::swap(&mut done, &mut self.row);
        done.header.offset = 1;
        done.header.na = l as u8;
        done.n = 0;
        // A row not yet sent (nobody polled) is replaced: the newer one protects what comes.
        if let Some(old) = self.row_ready.replace(done) {
            self.spare.push(old);
        }
    }

    fn finish_matrix(&mut self, l: usize, d: usize) {
        self.place = 0;
        for c in 0..l {
            let mut done = self.take_spare(Direction::Column);
            std::mem::swap(&mut done, &mut self.columns[c]);
            done.header.offset = l as u8;
            done.header.na = d as u8;
            done.n = 0;
            // Column c goes after c·D + 1 more media packets: across the next matrix. A
            // column of a matrix before the last, never polled, makes room.
            if self.held.len() > 2 * l {
                if let Some(old) = self.held.pop_front() {
                    self.spare.push(old.parity);
                }
            }
            self.held.push_back(Held {
                parity: done,
                after: (c * d + 1) as u32,
            });
        }
    }

    fn take_spare(&mut self, direction: Direction) -> Parity {
        let mut p = self
            .spare
            .pop()
            .unwrap_or_else(|| Parity::new(self.cfg.max_packet, direction));
        p.header.direction = direction;
        p.n = 0;
        p
    }

    /// The matrix starts again at the next packet; what was XORed so far is dropped.
    fn restart(&mut self) {
        self.counters.restarts += 1;
        self.next_seq = None;
        self.place = 0;
        self.row.n = 0;
        for c in &mut self.columns {
            c.n = 0;
        }
    }

    /// The next FEC packet to send now, written into `buf` (at least
    /// [`FecConfig::max_fec_packet`] + 12 bytes): its direction (columns go to the media's
    /// port + 2, rows to + 4) and length.
    pub fn poll(&mut self, buf: &mut [u8]) -> Option<(Direction, usize)> {
        let parity = if let Some(r) = self.row_ready.take() {
            r
        } else if self.held.front().is_some_and(|h| h.after == 0) {
            self.held.pop_front()?.parity
        } else {
            return None;
        };
        let lane = usize::from(parity.header.direction == Direction::Row);
        let stream = FecStream {
            payload_type: self.cfg.payload_type,
            sequence: self.sequences[lane],
            timestamp: self.last_ts,
        };
        let out = fec2022::write(buf, &stream, &parity.header, &parity.bytes[..parity.len]);
        let direction = parity.header.direction;
        self.spare.push(parity);
        let n = out.ok()?;
        self.sequences[lane] = self.sequences[lane].next();
        self.counters.bytes += n as u64;
        match direction {
            Direction::Row => self.counters.rows += 1,
            Direction::Column => self.counters.columns += 1,
        }
        Some((direction, n))
    }
}

/// How far apart a sender spaces the FEC packets a media packet completed: half the time a
/// packet of `wire_len` bytes takes at `rate_bps` (at least 1 bit/s), so that they leave
/// between the stream's packets (the simulator and the stream server both); at most
/// [`MAX_SPACING`].
pub fn fec_spacing(wire_len: usize, rate_bps: u64) -> std::time::Duration {
    let ns = wire_len as u128 * 8 * 1_000_000_000 / u128::from(rate_bps.max(1)) / 2;
    std::time::Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)).min(MAX_SPACING)
}

/// The most time between a media packet and the FEC packet after it, and between those (a
/// stream whose rate is unknown or tiny would otherwise hold them past their use).
pub const MAX_SPACING: std::time::Duration = std::time::Duration::from_millis(5);
