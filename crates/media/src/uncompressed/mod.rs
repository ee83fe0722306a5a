//! Uncompressed video for RTP (RFC 4175): formats, frames, sources and a Y4M writer.
//!
//! Frames are held in RFC 4175 payload order (§4.3): pixel groups in wire order, row by row
//! (for 4:2:0 a row is a pair of lines, as RFC 4175 and GStreamer's rtpvrawpay lay them out), so
//! the payloader copies contiguous byte ranges straight from [`RawFrame::data`].
//!
//! - [`format`](mod@format) (from `metronome-video`): [`Sampling`], [`Depth`], [`Colorimetry`],
//!   [`VideoFormat`] and its pgroup geometry, and [`RawFrame`].
//! - [`convert`]: I420, UYVY, v210, packed RGB and Y4M planar layouts to and from payload order.
//! - [`pattern`]: [`RawTestPattern`], a moving test pattern of any size, rate and sampling.
//! - [`file`](mod@file): [`RawFileSource`], raw I420/UYVY/v210 files and Y4M files.
//! - [`y4m`]: the Y4M header parser and [`Y4mWriter`].
//!
//! Sources never read a clock: the driver stamps [`RawFrame::capture_ns`]. The exception is a
//! [self-timed](RawSource::self_timed) source (a camera, in `metronome-rt`), which stamps each
//! frame with its capture time.

pub mod convert;
pub mod file;
pub mod pattern;
pub mod y4m;

pub use convert::Layout;
pub use file::{RawFileKind, RawFileSource};
// Formats and frames live in `metronome-video` (no encoder behind them); re-exported here.
pub use metronome_video::{
    format, Colorimetry, Depth, FormatError, Pgroup, RawFrame, Sampling, VideoFormat,
};
pub use pattern::RawTestPattern;
pub use y4m::{Y4mHeader, Y4mWriter};

use crate::MediaError;

/// A source of uncompressed frames.
pub trait RawSource: Send {
    /// The format of every frame this source produces.
    fn format(&self) -> VideoFormat;

    /// Writes the next frame into `into` (reshaped to [`format`](Self::format) if needed, so a
    /// reused buffer allocates only the first time) and sets its `index`; `capture_ns` is left
    /// for the driver unless the source is [self-timed](Self::self_timed). `Ok(false)` is the
    /// end of the source.
    fn next_frame(&mut self, into: &mut RawFrame) -> Result<bool, MediaError>;

    /// A camera: `next_frame` blocks until a frame is captured and sets `capture_ns`
    /// (CLOCK_REALTIME ns) itself; the driver sends it as soon as it is ready instead of at a
    /// frame-grid epoch.
    fn self_timed(&self) -> bool {
        false
    }

    /// A one-line description for status output.
    fn describe(&self) -> String;
}
