//! Test video with content: FFmpeg's lavfi sources (`testsrc2`, `mandelbrot`, `life`, …), each
//! for a scene of [`crate::video::SCENE_SECS`], in a cycle, read as raw 4:2:0 frames from an
//! `ffmpeg` process. Nothing is downloaded; the sources are generated, and the same sources
//! give the same pictures again when the lab compares what viewers saw with them (a source
//! with randomness needs its seed: `life=seed=1`).

use metronome_media::{Frame, MediaError, Pictures};
use std::io::Read;
use std::process::{Child, ChildStdout, Command, Stdio};

/// Pictures from an `ffmpeg` process generating `sources`.
#[derive(Debug)]
pub struct Lavfi {
    child: Child,
    out: ChildStdout,
    next: u64,
    frames: u64,
    skip: Vec<u8>,
}

impl Lavfi {
    /// `frames` frames of `width`×`height` at `fps`: each source for `scene_secs`, in turn.
    pub fn spawn(
        sources: &[String],
        width: u32,
        height: u32,
        fps: u32,
        scene_secs: u32,
        frames: u64,
    ) -> Result<Lavfi, String> {
        let scene_frames = u64::from(fps.max(1)) * u64::from(scene_secs.max(1));
        let scenes = frames.div_ceil(scene_frames).max(1) as usize;
        let mut graph = String::new();
        for i in 0..scenes {
            let src = &sources[i % sources.len()];
            let sep = if src.contains('=') { ':' } else { '=' };
            graph.push_str(&format!(
                "{src}{sep}size={width}x{height}:rate={fps},trim=end_frame={scene_frames},setpts=PTS-STARTPTS,format=yuv420p[s{i}];"
            ));
        }
        for i in 0..scenes {
            graph.push_str(&format!("[s{i}]"));
        }
        graph.push_str(&format!("concat=n={scenes}:v=1:a=0[out]"));
        let mut child = metronome_rt::process::with_default_signals(&mut Command::new("ffmpeg"))
            .args(["-hide_banner", "-nostdin", "-loglevel", "error"])
            .args(["-filter_complex", &graph, "-map", "[out]"])
            .args(["-frames:v", &frames.to_string()])
            .args(["-f", "rawvideo", "-pix_fmt", "yuv420p", "-"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!("cannot run ffmpeg for the video's content ({e}): install it (apt-get install ffmpeg) or use content = \"pattern\"")
            })?;
        let out = child
            .stdout
            .take()
            .ok_or("ffmpeg's output could not be read")?;
        Ok(Lavfi {
            child,
            out,
            next: 0,
            frames,
            skip: Vec::new(),
        })
    }
}

impl Pictures for Lavfi {
    fn picture(&mut self, index: u64, frame: &mut Frame) -> Result<(), MediaError> {
        let short = |what: String| {
            MediaError::Config(format!(
                "the lavfi content ended early ({what}); check the sources with ffmpeg -f lavfi -i SOURCE"
            ))
        };
        if index < self.next || index >= self.frames {
            return Err(short(format!("frame {index} asked for, at {}", self.next)));
        }
        while self.next < index {
            self.skip.resize(frame.as_bytes().len(), 0);
            self.out
                .read_exact(&mut self.skip)
                .map_err(|e| short(e.to_string()))?;
            self.next += 1;
        }
        self.out
            .read_exact(frame.as_bytes_mut())
            .map_err(|e| short(e.to_string()))?;
        self.next += 1;
        Ok(())
    }
}

impl Drop for Lavfi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
