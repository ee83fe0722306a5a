//! Wire formats: views over bytes and builders into caller-owned buffers, and the identifiers
//! they carry.
//!
//! - [`rtp`]: RTP packets (RFC 3550 §5) through `rtp-types`, plus the RFC 8285 one-byte header
//!   extension that carries Metronome's send time.
//! - [`rtcp`]: RTCP compound packets (RFC 3550 §6) through `rtcp-types`: SR, RR, SDES CNAME, BYE, and the APP packets of congestion control
//!   (`rtcp::cc`: TFRC's and TFMCC's fields).
//! - [`ts`]: MPEG-TS packet views (ISO/IEC 13818-1 §2.4.3): PID, continuity counter, PCR.
//! - [`mp2t`]: the RTP payload format for MPEG-TS (RFC 2250 §2).
//! - [`rfc4175`]: the RTP payload format for uncompressed video (RFC 4175 §4).
//! - [`sdp`]: SDP session descriptions (RFC 8866) of RTP sessions, for RTSP and `.sdp` files.
//! - [`rtx`]: RTP retransmission packets (RFC 4588).
//! - [`fec2022`]: SMPTE 2022-1 row and column XOR FEC packets (RFC 2733 with its extension).
//! - [`Ssrc`], [`PayloadType`], [`SeqNo`]: the identifiers RTP passes around, as types; a
//!   [`SeqUnwrapper`] extends a stream's sequence numbers to 64 bits (its one piece of state).

pub mod fec2022;
mod ids;
pub mod mp2t;
pub mod rfc4175;
pub mod rtcp;
pub mod rtp;
pub mod rtx;
pub mod sdp;
pub mod ts;

pub use ids::{PayloadType, SeqNo, SeqUnwrapper, Ssrc};
pub use rfc4175::{Rfc4175Error, Rfc4175View, SegmentHeader};
pub use rtcp::{CcApp, RtcpError, RtcpItem, TfmccFeedback, TfmccSender, TfrcFeedback, TfrcRtt};
pub use rtp::{RtpError, RtpHeader, RtpView};
