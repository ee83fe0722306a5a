//! Media sources for Metronome. Everything here is deterministic and clock-free: a source
//! produces TS packets stamped with their time on the stream's own timeline, and the driver
//! decides when that timeline runs (real time in `metronome-rt`, virtual time in tests).
//!
//! - [`TsSource`]: the trait every MPEG-TS source implements.
//! - `pattern`: a synthetic moving test pattern with scenes of different complexity.
//! - `h264`: the openh264 encoder wrapper.
//! - `tsmux`: an MPEG-TS muxer (PAT, PMT, PES, PCR, constant rate with null stuffing).
//! - `testsrc`: the built-in live test source: pattern → H.264 → TS at a constant mux rate.
//! - `tsfile`: an MPEG-TS file source timed by its PCRs.
//! - `demux`: TS back to access units (the video PES packets), as a receiver gets them;
//!   `decode`: FFmpeg's decoders (MPEG-4 Part 2, H.264 of any profile), with a player's error
//!   concealment; `frames`:
//!   what a stream sent, frame by frame, noted as its source hands out TS packets.
//! - `psi`: PAT/PMT sections and their CRC32; `analyze`: a stream checker (CC, PSI, PCR, PTS).

pub mod analyze;
pub mod clip;
pub mod decode;
pub mod demux;
pub mod encode;
pub mod frames;
pub mod h264;
pub mod ladder;
pub mod motion;
pub mod pattern;
pub mod payload;
pub mod psi;
pub mod seek;
pub mod shared;
pub mod testsrc;
pub mod ts_rtp;
pub mod tsfile;
pub mod tsmux;
pub mod uncompressed;

pub use analyze::{TsAnalyzer, TsReport};
pub use pattern::{Frame, Pictures, Scene, TestPattern};
pub use seek::{duration_of, Seeked};
pub use testsrc::{TestSource, TestSourceConfig};
pub use tsfile::{FileStats, TsFileSource};
pub use tsmux::{MuxStats, TsMuxConfig, TsMuxer};
pub use uncompressed::{
    RawFileSource, RawFrame, RawSource, RawTestPattern, VideoFormat, Y4mWriter,
};

use std::time::Duration;

/// Errors a person sees when a source cannot be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// A media file could not be opened (missing, unreadable, or its size unknown).
    #[error("cannot open '{path}': {source}. Check the path and that the file is readable")]
    Open {
        /// The file as the user named it.
        path: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A file given as MPEG-TS cannot be used as one: it is empty, has no 0x47 sync byte
    /// every 188 bytes (M2TS's 192-byte packets included), or has no PCR to time it by.
    #[error("'{path}' is not an MPEG-TS file: {why}. Give a .ts file (for example one written by `ffmpeg -f mpegts`)")]
    NotTransportStream {
        /// The file as the user named it.
        path: String,
        /// What was found instead.
        why: String,
    },
    /// Reading (or rewinding) an open media file failed; the Y4M writer reports its write
    /// errors here too, with the path `Y4M output`.
    #[error("reading '{path}': {source}")]
    Read {
        /// The file as the user named it.
        path: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// openh264, the live test source's H.264 encoder, failed or could not be created; the
    /// text says which frame.
    #[error("H.264 encoder: {0}")]
    Encoder(String),
    /// FFmpeg's libraries (decoding, the ladder's encoders).
    #[error("{0}")]
    Codec(String),
    /// The source's settings are unusable (a size, rate or format out of range), or it was
    /// asked for something it cannot do (a rate change on a file).
    #[error("invalid source settings: {0}")]
    Config(String),
}

impl From<metronome_video::FormatError> for MediaError {
    fn from(e: metronome_video::FormatError) -> Self {
        MediaError::Config(e.0)
    }
}

/// A source of MPEG-TS packets on a timeline.
pub trait TsSource: Send {
    /// Writes the next 188-byte TS packet into `out` and returns its time on the stream's
    /// timeline: the instant it is due to leave the sender, measured from the start of the stream.
    /// Times never go backwards. `Ok(None)` is the end of the stream.
    fn next_packet(&mut self, out: &mut [u8; 188]) -> Result<Option<Duration>, MediaError>;

    /// A one-line description for status output ("test pattern 640x360@30 H.264 2 Mbit/s, mux 2.5 Mbit/s").
    fn describe(&self) -> String;

    /// The nominal rate in bits per second, where one is known (used to derive pacing defaults).
    fn nominal_bitrate(&self) -> Option<u64>;

    /// The sender is at `now` on the stream's timeline and this source is behind it. A live
    /// source skips what it could no longer deliver in time (frames captured before `now` and
    /// not made yet), so that it keeps up with real time instead of becoming slow motion; a
    /// constant-rate mux fills their share of the rate with null packets, as broadcast muxers
    /// do. A file has nothing to skip. Returns the frames skipped.
    fn catch_up_to(&mut self, _now: Duration) -> u64 {
        0
    }

    /// Something the user should know that did not stop the source (a file that ends in the
    /// middle of a packet), once; the sender polls it and says it.
    fn take_warning(&mut self) -> Option<String> {
        None
    }

    /// Whether the source is live (made as time passes, like a camera and its encoder), so
    /// that the sender produces it only a little ahead of real time; a file is not.
    fn is_live(&self) -> bool {
        false
    }

    /// The rates, in bit/s of the whole transport stream (null packets included), that
    /// [`TsSource::set_rate`] may switch this source to while it runs; `None` when its rate
    /// is its own (a file).
    fn rate_range(&self) -> Option<std::ops::RangeInclusive<u64>> {
        None
    }

    /// Sends at `rate` bit/s from the source's next switching point on. The live test source
    /// switches at its next GOP: the encoder's bitrate and the mux rate change together, from
    /// the IDR picture that starts it (a receiver joining there decodes at once). A rate
    /// controller (the sender session's rate knob) calls it; a source with no
    /// [`TsSource::rate_range`] refuses.
    fn set_rate(&mut self, rate: u64) -> Result<(), MediaError> {
        Err(MediaError::Config(format!(
            "this source cannot change its rate (asked for {rate} bit/s): {}",
            self.describe()
        )))
    }
}
