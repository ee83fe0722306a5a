//! Where a simulated RTP sender's packets come from, and the wall clock of the simulated hosts.

use metronome_session::sender::{Mp2tPacketizer, PacketizerConfig};
use metronome_time::{Bitrate, NtpTime, Timestamp};
use std::time::Duration;

/// Where the simulated sender's packets come from.
pub trait PacketSource {
    /// Writes the next packet into `buf` and says what it is; `None` when the source has ended.
    fn next_packet(&mut self, buf: &mut [u8]) -> Option<SourcePacket>;
    /// The sender's rate controller asks for `wire` bit/s (IP packets): a source that can
    /// follows from its next packet, or its next GOP. By default a source keeps its rate.
    fn follow_rate(&mut self, _wire: Bitrate) {}
}

/// Bytes of IPv4 and UDP headers around each RTP packet.
pub const IP_UDP: usize = 28;

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
/// `ts_interval` (300.8 µs is 5 Mbit/s of TS), stamped with the send-time extension. It
/// follows a rate controller from its next packet (the TS rate that makes the wire rate asked
/// for, from the last packet's share of TS in its IP packet).
pub struct CbrTs {
    packetizer: Mp2tPacketizer,
    ts_interval: Duration,
    /// The next TS packet's due time, from the epoch.
    next_due: Duration,
    /// TS bytes per IP byte of the last packet made.
    ts_share: f64,
    left: usize,
    /// Each packet's size on the link, by index: real length if `None`.
    wire_size: Option<Box<dyn Fn(usize) -> usize>>,
    made: usize,
    /// No packet due at or after this.
    end: Option<Timestamp>,
}

impl CbrTs {
    pub fn new(
        cfg: PacketizerConfig,
        epoch: Timestamp,
        ts_interval: Duration,
        count: usize,
    ) -> Self {
        let ts = cfg.ts_per_packet * 188;
        let ext = if cfg.send_time_ext {
            metronome_wire::rtp::SEND_TIME_EXT_LEN
        } else {
            0
        };
        CbrTs {
            ts_share: ts as f64 / (ts + 12 + ext + IP_UDP) as f64,
            packetizer: Mp2tPacketizer::new(cfg, epoch),
            ts_interval,
            next_due: Duration::ZERO,
            left: count,
            wire_size: None,
            made: 0,
            end: None,
        }
    }

    /// Ends the stream before `end` (a source whose rate follows a controller has no fixed
    /// count of packets).
    pub fn until(mut self, end: Timestamp) -> Self {
        self.end = Some(end);
        self
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
            let due = self.next_due;
            self.next_due += self.ts_interval;
            // The slot is sized for the largest packet, so writing cannot fail.
            if let Ok(Some(out)) = self.packetizer.push(&ts, due, buf) {
                if self.end.is_some_and(|e| out.release >= e) {
                    self.left = 0;
                    return None;
                }
                self.left -= 1;
                let k = self.made;
                self.made += 1;
                self.ts_share = out.payload_len as f64 / (out.len + IP_UDP) as f64;
                return Some(SourcePacket {
                    len: out.len,
                    wire_len: self.wire_size.as_ref().map_or(out.len, |f| f(k)),
                    due: out.release,
                    payload_len: out.payload_len,
                });
            }
        }
    }

    fn follow_rate(&mut self, wire: Bitrate) {
        let ts_bps = (wire.as_bps() as f64 * self.ts_share).max(1000.0);
        self.ts_interval = Duration::from_secs_f64(188.0 * 8.0 / ts_bps);
    }
}

/// Both sides share the wall clock of one host: 2026-01-01 plus virtual time.
pub fn wall(t: Timestamp) -> NtpTime {
    NtpTime::from_unix_nanos(1_767_225_600_000_000_000 + t.as_nanos())
}
