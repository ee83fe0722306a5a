//! The sans-IO sending side: packetization with release times, and sender reports.
//!
//! The packetizer runs in the producer (ahead of time); the pacer (in the driver) sends each
//! packet at its release time and tells [`SenderReports`] what actually left, so that sender
//! reports count real transmissions.

mod packetizer;
mod report;
#[cfg(test)]
mod tests;

pub use packetizer::{Mp2tPacketizer, PacketizerConfig, RtpOut};
pub use report::{ReceiverView, SenderCounters, SenderEvent, SenderReports, SenderReportsConfig};
