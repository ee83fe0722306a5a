//! Sources that need the driver: a device to open, the clock to stamp frames with. The sources
//! that need neither (the test patterns, TS and raw files, the VBR ladder) are
//! `metronome-media`'s; every stream source, wherever it lives, is a `metronome_media` source
//! trait (`TsSource`, `RawSource`), so the stream server sends them all alike.
//!
//! - [`v4l2`]: [`V4l2Source`], a V4L2 camera as a self-timed raw source (each frame sent when
//!   captured, stamped with its capture time).

pub mod v4l2;

pub use v4l2::V4l2Source;
