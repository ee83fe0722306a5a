//! Video as the wire sees it: formats (RFC 4175 sampling, depth, colorimetry, pgroup geometry)
//! and frames in RFC 4175 payload order. Payloaders, depayloaders and sources share these;
//! this crate has no sources and no encoder, so the sans-IO sessions link only what they use.

pub mod format;

pub use format::{Colorimetry, Depth, Pgroup, Sampling, VideoFormat};

/// A video format that cannot be used, and why (what to change).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FormatError(pub String);

/// One uncompressed frame in RFC 4175 payload order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawFrame {
    /// Size, sampling, depth and frame rate of the picture; `data` holds exactly
    /// [`VideoFormat::frame_bytes`] octets of it.
    pub format: VideoFormat,
    /// Capture time in CLOCK_REALTIME nanoseconds. The driver sets it from the frame's epoch,
    /// except for a self-timed source (a camera), which sets it itself
    /// to the instant the frame was captured.
    pub capture_ns: u64,
    /// Frame number from the start of the source (0, 1, 2, ...); the RTP timestamp derives
    /// from it.
    pub index: u64,
    /// `format.frame_bytes()` octets: pgroups row by row (RFC 4175 §4.3).
    pub data: Vec<u8>,
}

impl RawFrame {
    /// A zeroed frame of `format` (the one allocation a frame buffer needs).
    pub fn new(format: VideoFormat) -> RawFrame {
        RawFrame {
            format,
            capture_ns: 0,
            index: 0,
            data: vec![0; format.frame_bytes()],
        }
    }

    /// Makes the buffer fit `format`, allocating only when it grows.
    pub fn reshape(&mut self, format: VideoFormat) {
        self.format = format;
        self.data.resize(format.frame_bytes(), 0);
    }

    /// The octets of row `r` (a line, or a line pair for 4:2:0).
    pub fn row(&self, r: usize) -> &[u8] {
        let n = self.format.row_bytes();
        &self.data[r * n..(r + 1) * n]
    }
}
