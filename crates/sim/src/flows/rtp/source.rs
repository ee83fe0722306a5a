//! The wall clock of the simulated hosts. (Sources are `metronome_session::sender::RtpSource`.)

use metronome_time::{NtpTime, Timestamp};

/// Both sides share the wall clock of one host: 2026-01-01 plus virtual time.
pub fn wall(t: Timestamp) -> NtpTime {
    NtpTime::from_unix_nanos(1_767_225_600_000_000_000 + t.as_nanos())
}
