//! Uncompressed video over RTP (RFC 4175), sans-IO.
//!
//! - [`RawPayloader`]: `media::uncompressed::RawFrame` → RTP packets into caller buffers (several
//!   segments per packet, lines split across packets, 32-bit extended sequence numbers, the
//!   marker on the last packet, optional send-time and capture-time header extensions), and
//!   [`packets_for`], the packet count of a frame in advance.
//! - [`RawDepayloader`]: RTP packets → frames in a pre-allocated buffer, every segment checked,
//!   every drop counted ([`RawCounters`]), frames reported complete, partial or lost
//!   ([`RawEvent`]).
//! - [`sdp`]: the fmtp parameters (RFC 4175 §6.1, ST 2110-20 `exactframerate`) both ways.

pub mod coverage;
pub mod depayloader;
pub mod events;
pub mod payloader;
pub mod sdp;

pub use depayloader::{RawCounters, RawDepayloader, RawDrops};
pub use events::{FrameComplete, FrameLost, FramePartial, RawEvent, RawEvents};
pub use payloader::{
    packets_for, FramePackets, PacketInfo, RawPayError, RawPayloader, RawPayloaderConfig,
    DEFAULT_PAYLOAD_TYPE, MAX_PAYLOAD_LIMIT, MTU_1500_MAX_PAYLOAD,
};
pub use sdp::{fmtp, parse_fmtp, RawFmtp};

#[cfg(test)]
mod tests;
