//! Where a stream's packets come from: [`RtpSource`], the one trait every driver's producer
//! takes — the real-time driver's producer pool (`metronome serve`), the simulator's flows, and
//! the lab in both modes. A source writes each RTP packet whole (header and payload) into the
//! driver's slot and says when it is due; the sender session alone decides when it leaves, and
//! tells the driver what to edit in it (sequence numbers moved back after drops, the send-time
//! stamp), which the driver only applies.
//!
//! Sources: MPEG-TS of any [`TsSource`](../../../metronome_media/trait.TsSource.html) through
//! the RFC 2250 packetizer (`metronome_media::ts_rtp::TsRtp`), a ladder of coded frames as
//! Evalvid-RA sends it (`metronome_media::ladder::source`), and [`CbrTs`], constant-rate
//! placeholder TS for tests and the lab's plain flows.

use metronome_time::{Bitrate, Timestamp};
use std::ops::RangeInclusive;
use std::time::Duration;

/// A packet a source wrote into the driver's slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourcePacket {
    /// Bytes of the RTP packet written.
    pub len: usize,
    /// Its size on the link (usually `len`; a test may make it larger or smaller).
    pub wire_len: usize,
    /// When it is due to leave, on the driver's clock (the source was given its epoch).
    pub due: Timestamp,
    /// RTP payload bytes (RFC 3550 §6.4.1's octet count).
    pub payload_len: usize,
}

/// Why a source stopped or refused something, in words for a person.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

/// A stream's source of RTP packets (see the module).
pub trait RtpSource: Send {
    /// Writes the next packet into `buf` (sized for the largest packet the source makes);
    /// `Ok(None)` once the stream has ended.
    fn next_packet(&mut self, buf: &mut [u8]) -> Result<Option<SourcePacket>, SourceError>;

    /// A one-line description for status output.
    fn describe(&self) -> String;

    /// The source's nominal rate in its own units (MPEG-TS bit/s for TS, bits on the wire for
    /// a source counted there), where one is known.
    fn nominal_bitrate(&self) -> Option<u64> {
        None
    }

    /// The source's rate units per bit on the wire (TS bits per wire bit for MPEG-TS; 1 for a
    /// source whose rate is counted on the wire).
    fn source_per_wire(&self) -> f64 {
        1.0
    }

    /// The rates (its own units) [`RtpSource::set_rate`] may ask for; `None` when its rate is
    /// its own (a file).
    fn rate_range(&self) -> Option<RangeInclusive<u64>> {
        None
    }

    /// Sends at `rate` (its own units) from its next switching point on (its next packet, or
    /// its next GOP).
    fn set_rate(&mut self, rate: u64) -> Result<(), SourceError> {
        Err(SourceError(format!(
            "this source cannot change its rate (asked for {rate} bit/s): {}",
            self.describe()
        )))
    }

    /// The source rate (its own units, within [`RtpSource::rate_range`]) that follows `wire`
    /// bit/s of the session's rate; `None` for a source whose rate is its own. A driver with
    /// limits of its own (admission's ceiling) converts with those.
    fn rate_for_wire(&self, wire: Bitrate) -> Option<u64> {
        let range = self.rate_range()?;
        let rate = (wire.as_bps() as f64 * self.source_per_wire()).round() as u64;
        Some(rate.clamp(*range.start(), *range.end()))
    }

    /// The rate controller moved its target to `rate` (its own units, within its range: see
    /// [`RtpSource::rate_for_wire`]), on a report or on its own clock: the source follows from
    /// its next switching point, as [`RtpSource::set_rate`] (the default). A source that
    /// follows the controller's reports instead ([`RtpSource::rate_reported`]) keeps its rate.
    fn follow_rate(&mut self, rate: u64) -> Result<(), SourceError> {
        self.set_rate(rate)
    }

    /// The rate controller computed its rate from a receiver's report, whether it changed it
    /// or not: `rate`, the target after the report, in the source's own units as
    /// [`RtpSource::set_rate`] takes them (the driver converts as for a change; a change comes
    /// first, through [`RtpSource::follow_rate`]). A source that averages the rate of every
    /// report (Evalvid-RA's VBR controller, which its TFRC agent tells at every feedback,
    /// changed or not, and at no other time) counts it; the driver tells
    /// [`RtpSource::note_queue`] first. Others ignore it.
    fn rate_reported(&mut self, _rate: u64) {}

    /// Whether it is made as time passes (a camera and its encoder), so that the driver makes
    /// it only a little ahead of its due times.
    fn is_live(&self) -> bool {
        false
    }

    /// When its next packet will be due, where the source knows before making it (a constant
    /// rate does). A live source's driver makes a packet only once this is within its
    /// lookahead, so that a live source is made at its time (a ladder sent at its
    /// controller's rate: each frame at the frame's time, its GOP's rung from the rate of
    /// then). `None`: the driver goes by the last packet's due time.
    fn next_due(&self) -> Option<Timestamp> {
        None
    }

    /// Whether its packets are due when they are made and leave at the rate controller's
    /// rate, queued behind it, as a rate-based transport sends what its application hands it
    /// (Evalvid-RA's agents): the driver builds its session
    /// [`sending_at_rate`](super::SenderSession::sending_at_rate).
    fn leaves_at_rate(&self) -> bool {
        false
    }

    /// The sender's queue now: packets made and due that have not left
    /// ([`SenderSession::queued_due`](super::SenderSession::queued_due)). A driver tells it
    /// just before each [`RtpSource::follow_rate`], [`RtpSource::set_rate`] or
    /// [`RtpSource::rate_reported`], for a source that scales its rate by its queue
    /// (Evalvid-RA's VBR controller).
    fn note_queue(&mut self, _packets: usize) {}

    /// The driver is at `now` on the stream's timeline and the source is behind it: a live
    /// source skips what it could no longer deliver in time. Returns the frames skipped.
    fn catch_up_to(&mut self, _now: Duration) -> u64 {
        0
    }

    /// Something the user should know that did not stop the source, once.
    fn take_warning(&mut self) -> Option<String> {
        None
    }
}
