//! Constant-rate placeholder MPEG-TS as an [`RtpSource`]: the simulator's and the lab's plain
//! RTP flows, and tests of the drivers.

use crate::sender::{Mp2tPacketizer, PacketizerConfig, RtpSource, SourceError, SourcePacket};
use metronome_time::Timestamp;
use std::time::Duration;

use metronome_time::IPV4_UDP_OVERHEAD as IP_UDP;

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
    wire_size: Option<Box<dyn Fn(usize) -> usize + Send>>,
    made: usize,
    /// No packet due at or after this.
    end: Option<Timestamp>,
}

impl CbrTs {
    /// `count` RTP packets made by a packetizer of `cfg` whose stream time zero is `epoch`, one
    /// TS packet (188 bytes, all but the sync byte zero) every `ts_interval`.
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
    pub fn with_wire_size(mut self, f: impl Fn(usize) -> usize + Send + 'static) -> Self {
        self.wire_size = Some(Box::new(f));
        self
    }
}

impl RtpSource for CbrTs {
    fn next_packet(&mut self, buf: &mut [u8]) -> Result<Option<SourcePacket>, SourceError> {
        if self.left == 0 {
            return Ok(None);
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
                    return Ok(None);
                }
                self.left -= 1;
                let k = self.made;
                self.made += 1;
                self.ts_share = out.payload_len as f64 / (out.len + IP_UDP) as f64;
                return Ok(Some(SourcePacket {
                    len: out.len,
                    wire_len: self.wire_size.as_ref().map_or(out.len, |f| f(k)),
                    due: out.release,
                    payload_len: out.payload_len,
                }));
            }
        }
    }

    fn describe(&self) -> String {
        format!(
            "constant-rate MPEG-TS, a packet every {:?}",
            self.ts_interval
        )
    }

    fn nominal_bitrate(&self) -> Option<u64> {
        Some((188.0 * 8.0 / self.ts_interval.as_secs_f64().max(1e-12)) as u64)
    }

    fn source_per_wire(&self) -> f64 {
        self.ts_share
    }

    fn rate_range(&self) -> Option<std::ops::RangeInclusive<u64>> {
        Some(1000..=100_000_000_000)
    }

    fn set_rate(&mut self, ts_bps: u64) -> Result<(), SourceError> {
        self.ts_interval = Duration::from_secs_f64(188.0 * 8.0 / ts_bps.max(1000) as f64);
        Ok(())
    }

    /// Made as it is sent (a little ahead): a new rate takes effect at its next packet.
    fn is_live(&self) -> bool {
        true
    }

    /// Its last TS packet's due time, at the rate it has now.
    fn next_due(&self) -> Option<Timestamp> {
        let k = self.packetizer.config().ts_per_packet;
        let rest = k.saturating_sub(self.packetizer.pending() + 1) as u32;
        Some(self.packetizer.epoch() + self.next_due + self.ts_interval * rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metronome_wire::Ssrc;

    /// The next packet's due time is known before it is made, at the rate the source has
    /// then: a driver that makes packets only within its lookahead makes the next one at the
    /// new rate.
    #[test]
    fn the_next_due_time_is_known_before_the_packet_is_made() {
        let epoch = Timestamp::from_millis(10);
        let cfg = PacketizerConfig {
            ts_per_packet: 5,
            ..PacketizerConfig::mp2t(
                Ssrc(1),
                metronome_wire::SeqNo(0),
                metronome_time::RtpTime(0),
            )
        };
        let ms = Duration::from_millis;
        let mut src = CbrTs::new(cfg, epoch, ms(200), usize::MAX);
        // Five TS packets at 0, 200, …, 800 ms.
        assert_eq!(src.next_due(), Some(epoch + ms(800)));
        let mut buf = [0u8; 1500];
        let p = src.next_packet(&mut buf).unwrap().unwrap();
        assert_eq!(p.due, epoch + ms(800));
        assert_eq!(src.next_due(), Some(epoch + ms(1800)));
        // A hundred times the rate: the next TS packet is one old interval on (1 s), the
        // packet four new intervals after it.
        src.set_rate(188 * 8 * 500).unwrap();
        assert_eq!(src.next_due(), Some(epoch + ms(1008)));
        let p = src.next_packet(&mut buf).unwrap().unwrap();
        assert_eq!(p.due, epoch + ms(1008));
    }
}
