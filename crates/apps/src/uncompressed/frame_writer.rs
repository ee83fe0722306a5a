//! Writing received frames to a Y4M file on a thread of its own, so that a slow disk never holds
//! up the receive loop: the receiver copies a complete frame into one of a few pre-allocated
//! buffers and hands it over; when none is free the frame is counted as not written.

use metronome_media::uncompressed::{RawFrame, VideoFormat, Y4mWriter};
use metronome_media::MediaError;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// Frames in flight between the receiver and the writer.
const BUFFERS: usize = 8;

pub struct FrameWriter {
    full: Option<SyncSender<RawFrame>>,
    free: Receiver<RawFrame>,
    thread: Option<JoinHandle<Result<u64, MediaError>>>,
    not_written: u64,
    path: PathBuf,
}

impl FrameWriter {
    /// Creates `path` (its Y4M header written) and starts the writer thread.
    pub fn create(path: &Path, format: VideoFormat) -> Result<FrameWriter, MediaError> {
        let file = File::create(path).map_err(|source| MediaError::Open {
            path: path.display().to_string(),
            source,
        })?;
        let mut y4m = Y4mWriter::new(BufWriter::with_capacity(4 << 20, file), format)?;
        let (full_tx, full_rx) = sync_channel::<RawFrame>(BUFFERS);
        let (free_tx, free_rx) = sync_channel::<RawFrame>(BUFFERS);
        for _ in 0..BUFFERS {
            // Cannot fail: the channel has room for every buffer.
            let _ = free_tx.try_send(RawFrame::new(format));
        }
        let thread = std::thread::Builder::new()
            .name("metronome-y4m".into())
            .spawn(move || {
                let mut written = 0u64;
                for frame in full_rx {
                    y4m.write_frame(&frame)?;
                    written += 1;
                    let _ = free_tx.try_send(frame);
                }
                y4m.flush()?;
                Ok(written)
            })
            .map_err(|e| MediaError::Config(format!("cannot start the Y4M writer thread: {e}")))?;
        Ok(FrameWriter {
            full: Some(full_tx),
            free: free_rx,
            thread: Some(thread),
            not_written: 0,
            path: path.to_path_buf(),
        })
    }

    /// Queues a copy of `frame`; counts it as not written when the writer is behind.
    pub fn offer(&mut self, frame: &RawFrame) {
        let (Some(full), Ok(mut buf)) = (&self.full, self.free.try_recv()) else {
            self.not_written += 1;
            return;
        };
        buf.data.copy_from_slice(&frame.data);
        buf.index = frame.index;
        buf.capture_ns = frame.capture_ns;
        match full.try_send(buf) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => self.not_written += 1,
        }
    }

    /// A frame that could not be offered (counted as not written).
    pub fn skip(&mut self) {
        self.not_written += 1;
    }

    /// Waits for the writer to finish; returns (written, not written).
    pub fn finish(mut self) -> Result<(u64, u64), MediaError> {
        self.full = None;
        let written = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r?,
            Some(Err(_)) => {
                return Err(MediaError::Config(format!(
                    "the Y4M writer of '{}' panicked",
                    self.path.display()
                )))
            }
            None => 0,
        };
        Ok((written, self.not_written))
    }
}
