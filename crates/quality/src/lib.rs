//! What viewers saw, frame by frame: the metrics Evalvid and FFmpeg compute, on pictures in
//! memory.
//!
//! - [`psnr`]: PSNR of Y and of all planes (YUV), per frame and over a run, as FFmpeg's `psnr`
//!   filter computes them; identical frames get [`psnr::CAP_DB`], not infinity (nor 0, which
//!   is what Evalvid's `psnr` tool prints for them).
//! - [`ssim`]: SSIM per plane and weighted over the planes, as FFmpeg's `ssim` filter (and
//!   x264) computes it: 8×8 windows stepped by 4 over 4×4 block sums.
//! - [`mos`]: MOS from PSNR (Evalvid's table), and MIV, the share of frames in a window whose
//!   MOS is below the reference's.
//! - [`y4m`]: YUV4MPEG2 streams (what FFmpeg writes with `-f yuv4mpegpipe`) and raw planar
//!   YUV, read and written with bounded memory.
//!
//! - [`viewer`]: the video as the viewer saw it: the frames that reached the player, through a
//!   real decoder (a trait; `metronome-media` has FFmpeg's), slot by slot.
//!
//! Nothing here reads a clock or touches a socket; [`compare`] runs two streams of pictures
//! through the metrics, on as many threads as asked.

pub mod compare;
pub mod mos;
pub mod picture;
pub mod playout;
pub mod psnr;
pub mod ssim;
pub mod trace;
pub mod viewer;
pub mod y4m;

pub use picture::{Chroma, Picture};
