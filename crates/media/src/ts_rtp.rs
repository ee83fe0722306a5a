//! MPEG-TS as an [`RtpSource`]: any [`TsSource`] (the live test source, a TS file, a noted or
//! seeked one) through the RFC 2250 packetizer, its packets due when their last TS packet is.
//! The one place TS becomes RTP for every driver: `metronome serve`'s producers, the
//! simulator's flows and the lab in both modes.

use crate::TsSource;
use metronome_session::sender::{
    Mp2tPacketizer, PacketizerConfig, RtpSource, SourceError, SourcePacket,
};
use metronome_time::Timestamp;
use std::ops::RangeInclusive;
use std::time::Duration;

/// A TS source, packetized (see the module).
pub struct TsRtp {
    source: Box<dyn TsSource>,
    packetizer: Mp2tPacketizer,
    /// TS bits per bit on the wire (RTP header and extension, UDP, IPv4), of a full packet.
    ts_per_wire: f64,
    ended: bool,
}

impl TsRtp {
    /// `source` packetized as `cfg` says, its time zero at `epoch` on the driver's clock.
    pub fn new(source: Box<dyn TsSource>, cfg: PacketizerConfig, epoch: Timestamp) -> Self {
        let ts = (cfg.ts_per_packet.clamp(1, 7) * 188) as f64;
        let ext = if cfg.send_time_ext {
            metronome_wire::rtp::SEND_TIME_EXT_LEN
        } else {
            0
        } as f64;
        TsRtp {
            source,
            packetizer: Mp2tPacketizer::new(cfg, epoch),
            ts_per_wire: ts / (ts + 12.0 + ext + metronome_time::IPV4_UDP_OVERHEAD as f64),
            ended: false,
        }
    }

    /// The RFC 2250 packetizer the TS packets go through: its configuration, epoch and the
    /// TS packets it holds.
    pub fn packetizer(&self) -> &Mp2tPacketizer {
        &self.packetizer
    }
}

impl RtpSource for TsRtp {
    fn next_packet(&mut self, buf: &mut [u8]) -> Result<Option<SourcePacket>, SourceError> {
        let mut ts = [0u8; 188];
        let packet = |o: metronome_session::sender::RtpOut| SourcePacket {
            len: o.len,
            wire_len: o.len,
            due: o.release,
            payload_len: o.payload_len,
        };
        let rtp = |e: metronome_wire::rtp::RtpError| SourceError(e.to_string());
        while !self.ended {
            match self.source.next_packet(&mut ts) {
                Ok(Some(due)) => {
                    if let Some(o) = self.packetizer.push(&ts, due, buf).map_err(rtp)? {
                        return Ok(Some(packet(o)));
                    }
                }
                Ok(None) => self.ended = true,
                Err(e) => {
                    self.ended = true;
                    return Err(SourceError(e.to_string()));
                }
            }
        }
        // The last, shorter packet; then the end.
        Ok(self.packetizer.flush(buf).map_err(rtp)?.map(packet))
    }

    fn describe(&self) -> String {
        self.source.describe()
    }

    fn nominal_bitrate(&self) -> Option<u64> {
        self.source.nominal_bitrate()
    }

    fn source_per_wire(&self) -> f64 {
        self.ts_per_wire
    }

    fn rate_range(&self) -> Option<RangeInclusive<u64>> {
        self.source.rate_range()
    }

    fn set_rate(&mut self, rate: u64) -> Result<(), SourceError> {
        self.source
            .set_rate(rate)
            .map_err(|e| SourceError(e.to_string()))
    }

    fn is_live(&self) -> bool {
        self.source.is_live()
    }

    fn catch_up_to(&mut self, now: Duration) -> u64 {
        self.source.catch_up_to(now)
    }

    fn take_warning(&mut self) -> Option<String> {
        self.source.take_warning()
    }
}
