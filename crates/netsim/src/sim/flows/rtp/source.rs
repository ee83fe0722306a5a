//! Where a simulated RTP sender's packets come from, and the wall clock of the simulated hosts.

use metronome_session::sender::{Mp2tPacketizer, PacketizerConfig};
use metronome_time::{NtpTime, Timestamp};
use std::time::Duration;

/// Where the simulated sender's packets come from.
pub trait PacketSource {
    /// Writes the next packet into `buf` and says what it is; `None` when the source has ended.
    fn next_packet(&mut self, buf: &mut [u8]) -> Option<SourcePacket>;
}

/// A packet a [`PacketSource`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourcePacket {
    pub len: usize,
    /// Its size on the link (usually `len`; a test may make it larger or smaller).
    pub wire_len: usize,
    pub due: Timestamp,
    pub payload_len: usize,
}

/// A constant-rate MPEG-TS stream: `count` RTP packets of seven TS packets, one TS packet every
/// `ts_interval` (300.8 µs is 5 Mbit/s of TS), stamped with the send-time extension.
pub struct CbrTs {
    packetizer: Mp2tPacketizer,
    ts_interval: Duration,
    i: u64,
    left: usize,
    /// Each packet's size on the link, by index: real length if `None`.
    wire_size: Option<Box<dyn Fn(usize) -> usize>>,
    made: usize,
}

impl CbrTs {
    pub fn new(
        cfg: PacketizerConfig,
        epoch: Timestamp,
        ts_interval: Duration,
        count: usize,
    ) -> Self {
        CbrTs {
            packetizer: Mp2tPacketizer::new(cfg, epoch),
            ts_interval,
            i: 0,
            left: count,
            wire_size: None,
            made: 0,
        }
    }

    /// Gives packet `k` the size `f(k)` on the link.
    pub fn with_wire_size(mut self, f: impl Fn(usize) -> usize + 'static) -> Self {
        self.wire_size = Some(Box::new(f));
        self
    }
}

impl PacketSource for CbrTs {
    fn next_packet(&mut self, buf: &mut [u8]) -> Option<SourcePacket> {
        if self.left == 0 {
            return None;
        }
        let mut ts = [0u8; 188];
        ts[0] = 0x47;
        loop {
            let due = self.ts_interval * u32::try_from(self.i).unwrap_or(u32::MAX);
            self.i += 1;
            // The slot is sized for the largest packet, so writing cannot fail.
            if let Ok(Some(out)) = self.packetizer.push(&ts, due, buf) {
                self.left -= 1;
                let k = self.made;
                self.made += 1;
                return Some(SourcePacket {
                    len: out.len,
                    wire_len: self.wire_size.as_ref().map_or(out.len, |f| f(k)),
                    due: out.release,
                    payload_len: out.payload_len,
                });
            }
        }
    }
}

/// Both sides share the wall clock of one host: 2026-01-01 plus virtual time.
pub fn wall(t: Timestamp) -> NtpTime {
    NtpTime::from_unix_nanos(1_767_225_600_000_000_000 + t.as_nanos())
}
