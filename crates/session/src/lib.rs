//! Sans-IO RTP sessions: the protocol logic of sending and receiving, with no clock, socket or
//! thread. Time comes in as `now: Timestamp` (and wall-clock `NtpTime` where RTCP needs it);
//! packets come in as byte slices and go out into caller-owned buffers.
//!
//! - [`receiver::ReceiverSession`]: per-source statistics (RFC 3550 A.1 sequence validation,
//!   A.3 loss, A.8 jitter), inter-arrival and one-way-delay distributions, receiver reports.
//! - [`sender::Mp2tPacketizer`]: MPEG-TS → RTP/MP2T (RFC 2250) with release times.
//! - [`sender::SenderReports`]: sender reports, and what the receivers' reports say
//!   (loss, jitter, round-trip time).
//! - [`interval`]: the RTCP transmission interval (RFC 3550 §6.3, A.7).
//! - [`rfc4175`]: uncompressed video (RFC 4175): payloader, depayloader, SDP fmtp.

pub mod cc_app;
pub mod interval;
pub mod receiver;
pub mod repair;
pub mod repair_figures;
pub mod rfc4175;
pub mod rtsp;
pub mod sender;
pub mod srtp;
