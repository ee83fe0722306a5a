//! Loss repair that respects deadlines: NACK and retransmission (RFC 4585 generic NACK, RFC 4588
//! retransmission packets) and forward error correction (SMPTE 2022-1), sans-IO.
//!
//! - [`nack::NackPlanner`] (receiver): which missing packets to ask for, and when; only those a
//!   repair can still bring before their play-out deadline; with RFC 4585's dither and
//!   suppression in a group.
//! - [`repairer::Repairer`] (sender): answers NACKs from its [`history::SendHistory`] with
//!   retransmission packets (`metronome_wire::rtx`), only those that can make their deadline,
//!   within the stream's repair budget, one repair per packet for a whole group.
//!
//! - [`fec_encoder::FecEncoder`] (sender) and [`fec_decoder::FecDecoder`] (receiver): SMPTE
//!   2022-1 row and column XOR FEC over an L × D matrix; nothing is asked back.
//!
//! All count what they did ([`nack::NackCounters`], [`repairer::RepairCounters`]): asked,
//! sent, useful, too late.

pub mod fec_decoder;
pub mod fec_encoder;
pub mod history;
pub mod nack;
pub mod repairer;

pub use fec_decoder::{FecDecoder, FecReceiveCounters};
pub use fec_encoder::{fec_spacing, FecConfig, FecEncoder, FecSendCounters};
pub use history::SendHistory;
use metronome_wire::{PayloadType, Ssrc};
pub use nack::{NackConfig, NackCounters, NackPlanner, GROUP_DITHER_SHARE};
pub use repairer::{Outlet, Path, RepairConfig, RepairCounters, Repairer};

/// The retransmission stream's payload type where Metronome chooses: the first dynamic one
/// after the 96 of a coded video (MPEG-TS is the static 33).
pub const RTX_PAYLOAD_TYPE: PayloadType = PayloadType(97);
/// The share of a stream's rate its retransmissions may take on average (admission reserves
/// it on top of the media's).
pub const RTX_BUDGET_SHARE: f64 = 0.25;

/// The retransmission stream's SSRC where Metronome chooses: the media's with "RTX" mixed in
/// (never the media's own).
pub fn rtx_ssrc(media: Ssrc) -> Ssrc {
    Ssrc(media.get() ^ 0x5254_5800)
}
