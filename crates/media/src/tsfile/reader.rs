//! Reads 188-byte TS packets from a byte source through a fixed 64 KiB buffer, keeping sync
//! (ISO/IEC 13818-1 §2.4.3.2: every packet starts with the 0x47 sync byte).

use metronome_wire::ts::{TS_PACKET_LEN, TS_SYNC_BYTE};
use std::io::{self, Read, Seek, SeekFrom};

/// A readable, seekable byte source (a file, or a `Cursor` in tests).
pub trait ReadSeek: Read + Seek + Send {}
impl<T: Read + Seek + Send> ReadSeek for T {}

const BUF_LEN: usize = 64 * 1024;
/// Packets checked for sync when a source is opened.
const SYNC_CHECK_PACKETS: usize = 5;

pub(crate) struct PacketReader {
    src: Box<dyn ReadSeek>,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    eof: bool,
    /// Times sync was lost and found again.
    pub resyncs: u64,
    /// Bytes skipped while looking for sync, or left over at the end (a truncated last packet).
    pub skipped_bytes: u64,
    /// The bytes left over at the end of the last pass (a truncated last packet), if any.
    pub truncated_tail: u64,
}

impl PacketReader {
    pub(crate) fn new(src: Box<dyn ReadSeek>) -> Self {
        PacketReader {
            src,
            buf: vec![0u8; BUF_LEN].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            resyncs: 0,
            skipped_bytes: 0,
            truncated_tail: 0,
        }
    }

    /// Reads until at least `n` bytes are buffered or the source ends; returns what is buffered.
    fn fill(&mut self, n: usize) -> io::Result<usize> {
        while self.end - self.start < n && !self.eof {
            if self.end == self.buf.len() {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end - self.start)
    }

    /// Checks the start of the source: the 0x47 sync byte at 188-byte spacing over the first
    /// packets (up to five). `Err` holds the reason, in words.
    pub(crate) fn check_sync(&mut self) -> io::Result<Result<(), String>> {
        let have = self.fill(TS_PACKET_LEN * SYNC_CHECK_PACKETS)?;
        let b = &self.buf[self.start..self.end];
        if have == 0 {
            return Ok(Err("the file is empty".into()));
        }
        if have < TS_PACKET_LEN {
            return Ok(Err(format!(
                "it has only {have} bytes, less than one 188-byte packet"
            )));
        }
        let spaced = |step: usize| (0..have / step).all(|k| b[k * step] == TS_SYNC_BYTE);
        if spaced(TS_PACKET_LEN) {
            return Ok(Ok(()));
        }
        if have >= 2 * 192
            && b[4] == TS_SYNC_BYTE
            && (0..have.saturating_sub(4) / 192).all(|k| b[4 + k * 192] == TS_SYNC_BYTE)
        {
            return Ok(Err("it has 192-byte packets (M2TS/Blu-ray, with a 4-byte timecode); remux it to plain TS with `ffmpeg -i in.m2ts -c copy -f mpegts out.ts`".into()));
        }
        let bad = (0..have / TS_PACKET_LEN)
            .find(|k| b[k * TS_PACKET_LEN] != TS_SYNC_BYTE)
            .unwrap_or(0);
        Ok(Err(format!(
            "byte {} is {:#04x} where the 0x47 sync byte of packet {} should be",
            bad * TS_PACKET_LEN,
            b[bad * TS_PACKET_LEN],
            bad
        )))
    }

    /// Reads the next packet. `Ok(false)` at the end of the source; a partial last packet is
    /// skipped. After lost sync, the next 0x47 followed by another 188 bytes later (or by the
    /// end) is taken as the next packet.
    pub(crate) fn next(&mut self, out: &mut [u8; TS_PACKET_LEN]) -> io::Result<bool> {
        let mut lost = false;
        loop {
            let have = self.fill(TS_PACKET_LEN + 1)?;
            if have < TS_PACKET_LEN {
                self.skipped_bytes += have as u64;
                self.truncated_tail = have as u64;
                self.start = self.end;
                return Ok(false);
            }
            let b = &self.buf[self.start..self.end];
            // In sync, a packet needs only its own sync byte; while searching, the next one too.
            let next_ok = have == TS_PACKET_LEN || b[TS_PACKET_LEN] == TS_SYNC_BYTE;
            if b[0] == TS_SYNC_BYTE && (!lost || next_ok) {
                out.copy_from_slice(&b[..TS_PACKET_LEN]);
                self.start += TS_PACKET_LEN;
                return Ok(true);
            }
            if !lost {
                lost = true;
                self.resyncs += 1;
            }
            self.start += 1;
            self.skipped_bytes += 1;
        }
    }

    /// Back to the start of the source (for looping).
    pub(crate) fn rewind(&mut self) -> io::Result<()> {
        self.src.seek(SeekFrom::Start(0))?;
        self.start = 0;
        self.end = 0;
        self.eof = false;
        Ok(())
    }
}
