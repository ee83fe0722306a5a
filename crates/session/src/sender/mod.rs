//! The sans-IO sending side: packetization with release times, and the [`SenderSession`] that
//! owns the rest of a stream's send side (queue, pacing, jobs and deadlines, RTCP, rate knob).
//!
//! The producer runs the stream's [`RtpSource`] ahead of time (the packetizer is part of it);
//! the session decides when each packet leaves and counts what actually left, so that sender
//! reports count real transmissions.

mod at_rate;
mod cbr;
mod jobs;
mod packetizer;
mod rate_limits;
mod report;
mod resend;
mod send_log;
mod session;
mod source;
#[cfg(test)]
mod tests;

pub use cbr::CbrTs;
pub use jobs::{JobClock, JobConfig, JobTimes};
pub use packetizer::{Mp2tPacketizer, PacketizerConfig, RtpOut};
pub use rate_limits::{RateLimits, RateRefusal};
pub use report::{ReceiverView, SenderCounters, SenderEvent, SenderReports, SenderReportsConfig};
pub use resend::{
    ResendStats, SenderRepair, MAX_NOTICED, MAX_WAITING, MAX_WAITING_FOR_STRANGERS, NOTICE_GAP,
    REPAIR_BURST,
};
pub use session::{
    Input, InputError, Queued, Repair, SenderCounts, SenderSession, SenderSessionConfig,
    SenderStats, SessionEvent, Transmit, Wake,
};
pub use source::{RtpSource, SourceError, SourcePacket};
#[cfg(test)]
mod session_tests;
