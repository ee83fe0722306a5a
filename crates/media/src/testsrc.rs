//! The built-in live test source: moving test pattern → H.264 → constant-rate MPEG-TS.
//!
//! Frame `n` is captured at `n / fps` on the stream timeline and encoded just before the first
//! packet slot at or after that time, so its packets never leave before the frame exists.
//!
//! Its rate can change while it runs ([`TsSource::set_rate`]): at the next GOP the encoder is
//! started again at the new bitrate (its first picture is the GOP's IDR) and the mux rate
//! changes from that picture's first packet on, keeping the video's share of the mux.

use crate::h264::{H264Config, H264Encoder};
use crate::pattern::{Frame, Pictures, TestPattern};
use crate::tsmux::{MuxStats, TsMuxConfig, TsMuxer};
use crate::{MediaError, TsSource};
use std::time::Duration;

/// Settings of the test source.
#[derive(Clone, Debug, PartialEq)]
pub struct TestSourceConfig {
    /// Even width in pixels (default 640).
    pub width: u32,
    /// Even height in pixels (default 360).
    pub height: u32,
    /// Frames per second (default 30).
    pub fps: u32,
    /// H.264 target bitrate in bit/s (default 3.5 Mbit/s: 70 % of the mux rate, leaving room for
    /// TS/PES/PSI overhead of ~3 % and for I-frame bursts, which the mux delay absorbs).
    pub video_bitrate: u32,
    /// Constant TS rate in bit/s, null packets included (default 5 Mbit/s).
    pub mux_rate: u64,
    /// PTS − capture time (default 450 ms; see [`TsMuxConfig::mux_delay`]).
    pub mux_delay: Duration,
    /// Frames between IDR pictures; 0 means one second (the default).
    pub idr_interval: u32,
    /// Length of each test-pattern scene in seconds (default 4: static, moderate, high motion).
    pub scene_secs: u32,
    /// Stop after this much video (frames captured before it); `None` runs forever (default).
    pub duration: Option<Duration>,
}

impl Default for TestSourceConfig {
    fn default() -> Self {
        TestSourceConfig {
            width: 640,
            height: 360,
            fps: 30,
            video_bitrate: 3_500_000,
            mux_rate: 5_000_000,
            mux_delay: Duration::from_millis(450),
            idr_interval: 0,
            scene_secs: 4,
            duration: None,
        }
    }
}

/// Pattern → H.264 → TS, as a [`TsSource`].
#[derive(Debug)]
pub struct TestSource {
    cfg: TestSourceConfig,
    pictures: Box<dyn Pictures>,
    frame: Frame,
    encoder: H264Encoder,
    mux: TsMuxer,
    next_frame: u64,
    total_frames: Option<u64>,
    encoded_bytes: u64,
    /// Frames skipped because the sender was past them (see `TsSource::catch_up_to`).
    skipped_frames: u64,
    /// A mux rate asked for by `set_rate`, taken at the next GOP.
    pending_rate: Option<u64>,
    /// The video's share of the mux rate, kept across rate changes.
    video_share: f64,
    /// Rate changes made so far.
    rate_changes: u64,
}

/// The lowest mux rate the test source switches to: the PSI, the PCR packets and a video of
/// about 50 kbit/s. The mux needs three packets within its PCR interval (30 ms): at least
/// 150.4 kbit/s (150 kbit/s was refused at the switch, ending the stream).
pub const MIN_RATE: u64 = 160_000;
/// The highest: what one encoder of the test pattern can usefully spend.
const MAX_RATE: u64 = 1_000_000_000;

impl TestSource {
    /// The built-in pattern (scenes of `cfg.scene_secs`), encoded and muxed.
    pub fn new(cfg: TestSourceConfig) -> Result<TestSource, MediaError> {
        let pattern = TestPattern::new(cfg.fps, cfg.scene_secs)?;
        TestSource::with_pictures(cfg, Box::new(pattern))
    }

    /// Pictures from `pictures` (at `cfg`'s size and rate), encoded and muxed.
    pub fn with_pictures(
        cfg: TestSourceConfig,
        pictures: Box<dyn Pictures>,
    ) -> Result<TestSource, MediaError> {
        // The video plus ~4 % of TS/PES overhead and 60 kbit/s of PSI/PCR must fit the mux.
        let needed = cfg.video_bitrate as u64 * 104 / 100 + 60_000;
        if needed > cfg.mux_rate {
            return Err(MediaError::Config(format!(
                "video at {} does not fit a mux rate of {} (needs about {} with TS overhead)",
                rate(cfg.video_bitrate as u64),
                rate(cfg.mux_rate),
                rate(needed)
            )));
        }
        let h264 = H264Config {
            idr_interval: cfg.idr_interval,
            ..H264Config::new(cfg.width, cfg.height, cfg.fps, cfg.video_bitrate)
        };
        let mux = TsMuxer::new(TsMuxConfig {
            mux_rate: cfg.mux_rate,
            mux_delay: cfg.mux_delay,
            ..TsMuxConfig::default()
        })?;
        let total_frames = cfg
            .duration
            .map(|d| (d.as_nanos() * cfg.fps as u128).div_ceil(1_000_000_000) as u64);
        Ok(TestSource {
            pictures,
            frame: Frame::new(cfg.width, cfg.height)?,
            encoder: H264Encoder::new(h264)?,
            mux,
            next_frame: 0,
            total_frames,
            encoded_bytes: 0,
            skipped_frames: 0,
            pending_rate: None,
            video_share: cfg.video_bitrate as f64 / cfg.mux_rate as f64,
            rate_changes: 0,
            cfg,
        })
    }

    /// Its settings now: as made, with `mux_rate` and `video_bitrate` as the last rate switch
    /// set them.
    pub fn config(&self) -> &TestSourceConfig {
        &self.cfg
    }
    /// The muxer's counters, including late frames (decoder underflow) and the PTS slack.
    pub fn mux_stats(&self) -> &MuxStats {
        self.mux.stats()
    }
    /// Frames encoded so far (frames skipped to keep up not counted).
    pub fn frames_encoded(&self) -> u64 {
        self.next_frame - self.skipped_frames
    }
    /// H.264 bytes produced so far.
    pub fn encoded_bytes(&self) -> u64 {
        self.encoded_bytes
    }
    /// Frames skipped to keep up with real time.
    pub fn skipped_frames(&self) -> u64 {
        self.skipped_frames
    }

    /// Rate changes made so far (each at a GOP).
    pub fn rate_changes(&self) -> u64 {
        self.rate_changes
    }

    fn gop(&self) -> u64 {
        let g = if self.cfg.idr_interval == 0 {
            self.cfg.fps
        } else {
            self.cfg.idr_interval
        };
        u64::from(g.max(1))
    }

    /// At the start of a GOP, takes a pending rate: a new encoder at the new video bitrate.
    /// Returns the new mux rate, to be switched at the frame encoded next.
    fn take_rate_at(&mut self, n: u64) -> Result<Option<u64>, MediaError> {
        let Some(rate) = self.pending_rate.filter(|_| n % self.gop() == 0) else {
            return Ok(None);
        };
        self.pending_rate = None;
        let video = (rate as f64 * self.video_share) as u32;
        let h264 = H264Config {
            idr_interval: self.cfg.idr_interval,
            ..H264Config::new(self.cfg.width, self.cfg.height, self.cfg.fps, video)
        };
        self.encoder = H264Encoder::new(h264)?;
        self.cfg.video_bitrate = video;
        self.cfg.mux_rate = rate;
        self.rate_changes += 1;
        Ok(Some(rate))
    }

    fn capture_time(&self, n: u64) -> Duration {
        Duration::from_nanos((n as u128 * 1_000_000_000 / self.cfg.fps as u128) as u64)
    }

    /// Encodes and queues every frame captured by `t`.
    fn produce_until(&mut self, t: Duration) -> Result<(), MediaError> {
        while self.total_frames.is_none_or(|n| self.next_frame < n)
            && self.capture_time(self.next_frame) <= t
        {
            let n = self.next_frame;
            let capture = self.capture_time(n);
            let switch = self.take_rate_at(n)?;
            self.pictures.picture(n, &mut self.frame)?;
            let au = self.encoder.encode(&self.frame)?;
            self.encoded_bytes += au.data.len() as u64;
            self.mux.push_access_unit(capture, au.data, au.idr)?;
            if let Some(rate) = switch {
                self.mux.switch_rate_at_last_frame(rate)?;
            }
            self.next_frame += 1;
        }
        Ok(())
    }
}

impl TsSource for TestSource {
    fn next_packet(&mut self, out: &mut [u8; 188]) -> Result<Option<Duration>, MediaError> {
        self.produce_until(self.mux.next_packet_time())?;
        if self.total_frames == Some(self.next_frame) && self.mux.is_drained() {
            return Ok(None);
        }
        Ok(Some(self.mux.write_packet(out)))
    }

    fn describe(&self) -> String {
        let c = &self.cfg;
        format!(
            "test pattern {}x{}@{} H.264 {}, mux {}",
            c.width,
            c.height,
            c.fps,
            rate(c.video_bitrate as u64),
            rate(c.mux_rate)
        )
    }

    fn nominal_bitrate(&self) -> Option<u64> {
        Some(self.cfg.mux_rate)
    }

    fn catch_up_to(&mut self, now: Duration) -> u64 {
        let mut skipped = 0;
        while self.total_frames.is_none_or(|n| self.next_frame < n)
            && self.capture_time(self.next_frame) < now
        {
            self.next_frame += 1;
            skipped += 1;
        }
        self.skipped_frames += skipped;
        skipped
    }

    fn is_live(&self) -> bool {
        true
    }

    fn rate_range(&self) -> Option<std::ops::RangeInclusive<u64>> {
        Some(MIN_RATE..=MAX_RATE)
    }

    fn set_rate(&mut self, rate: u64) -> Result<(), MediaError> {
        if !(MIN_RATE..=MAX_RATE).contains(&rate) {
            return Err(MediaError::Config(format!(
                "the test source runs at {} to {}; {} is outside",
                self::rate(MIN_RATE),
                self::rate(MAX_RATE),
                self::rate(rate)
            )));
        }
        self.pending_rate = (rate != self.cfg.mux_rate).then_some(rate);
        Ok(())
    }
}

/// "3.5 Mbit/s", "2.002 Mbit/s", "168 kbit/s".
pub(crate) fn rate(bps: u64) -> String {
    if bps >= 1_000_000 {
        let m = format!("{:.3}", bps as f64 / 1e6);
        format!("{} Mbit/s", m.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{} kbit/s", (bps + 500) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_rate_it_offers_is_one_its_mux_takes() {
        let mut src = TestSource::new(TestSourceConfig {
            width: 160,
            height: 96,
            duration: Some(Duration::from_secs(2)),
            ..TestSourceConfig::default()
        })
        .unwrap();
        let low = *src.rate_range().unwrap().start();
        src.set_rate(low).unwrap();
        let mut ts = [0u8; 188];
        let mut n = 0;
        while let Some(_due) = src.next_packet(&mut ts).unwrap() {
            n += 1;
        }
        assert_eq!(src.rate_changes(), 1);
        assert!(n > 100, "{n} packets");
    }

    #[test]
    fn describe_and_refusals() {
        let src = TestSource::new(TestSourceConfig::default()).unwrap();
        assert_eq!(
            src.describe(),
            "test pattern 640x360@30 H.264 3.5 Mbit/s, mux 5 Mbit/s"
        );
        assert_eq!(src.nominal_bitrate(), Some(5_000_000));
        assert_eq!(
            (rate(2_002_030), rate(168_432)),
            ("2.002 Mbit/s".into(), "168 kbit/s".into())
        );
        let too_fast = TestSourceConfig {
            video_bitrate: 4_900_000,
            ..Default::default()
        };
        assert!(matches!(
            TestSource::new(too_fast),
            Err(MediaError::Config(_))
        ));
        let odd = TestSourceConfig {
            width: 639,
            ..Default::default()
        };
        assert!(matches!(TestSource::new(odd), Err(MediaError::Config(_))));
    }

    #[test]
    fn short_run_ends_and_frames_wait_for_capture() {
        let cfg = TestSourceConfig {
            width: 160,
            height: 90,
            video_bitrate: 300_000,
            mux_rate: 1_000_000,
            duration: Some(Duration::from_millis(500)),
            ..Default::default()
        };
        let mut src = TestSource::new(cfg).unwrap();
        let mut pkt = [0u8; 188];
        let mut last = Duration::ZERO;
        while let Some(t) = src.next_packet(&mut pkt).unwrap() {
            assert!(t >= last);
            last = t;
            // Frames are only encoded once the timeline has reached their capture time.
            assert!(src.capture_time(src.frames_encoded() - 1) <= t);
        }
        assert_eq!(src.frames_encoded(), 15);
        assert_eq!(src.mux_stats().frames_out, 15);
        assert_eq!(
            src.next_packet(&mut pkt).unwrap(),
            None,
            "the end stays the end"
        );
    }

    #[test]
    fn a_source_behind_the_sender_skips_frames_and_keeps_its_rate_with_null_packets() {
        let cfg = TestSourceConfig {
            width: 160,
            height: 90,
            fps: 30,
            video_bitrate: 300_000,
            mux_rate: 1_000_000,
            duration: Some(Duration::from_secs(2)),
            ..Default::default()
        };
        let mut src = TestSource::new(cfg).unwrap();
        // The sender is already one second in: the frames captured before then are skipped.
        assert_eq!(src.catch_up_to(Duration::from_secs(1)), 30);
        assert_eq!(src.catch_up_to(Duration::from_secs(1)), 0, "once");
        let mut pkt = [0u8; 188];
        let (mut slots, mut last) = (0u64, Duration::ZERO);
        while let Some(t) = src.next_packet(&mut pkt).unwrap() {
            assert!(t >= last, "the mux keeps its clock");
            last = t;
            slots += 1;
        }
        // 2 s at 1 Mbit/s is 1330 slots of 188 bytes, whatever was skipped; a second of them
        // carries nulls instead of the skipped frames.
        assert!((1300..=1400).contains(&slots), "{slots}");
        assert!(src.mux_stats().null_packets > 500, "{:?}", src.mux_stats());
        assert_eq!((src.skipped_frames(), src.frames_encoded()), (30, 30));
    }

    /// Runs 4 s of a 320x180 test source at 2 Mbit/s, asking for `new_rate` at 1.2 s (if any).
    /// Returns the packet times, the analyzer's report, the video bits sent after 2.5 s, and
    /// the source.
    fn run_with_rate_change(
        new_rate: Option<u64>,
    ) -> (Vec<Duration>, crate::TsReport, u64, TestSource) {
        let cfg = TestSourceConfig {
            width: 320,
            height: 180,
            fps: 30,
            video_bitrate: 1_400_000,
            mux_rate: 2_000_000,
            scene_secs: 1,
            duration: Some(Duration::from_secs(4)),
            ..Default::default()
        };
        let mut src = TestSource::new(cfg).unwrap();
        let mut an = crate::TsAnalyzer::new();
        let mut pkt = [0u8; 188];
        let (mut times, mut asked, mut bytes_then) = (Vec::new(), false, None);
        while let Some(t) = src.next_packet(&mut pkt).unwrap() {
            if !asked && t >= Duration::from_millis(1200) {
                if let Some(r) = new_rate {
                    src.set_rate(r).unwrap();
                }
                asked = true;
            }
            if bytes_then.is_none() && t >= Duration::from_millis(2500) {
                bytes_then = Some(src.encoded_bytes());
            }
            an.push(&pkt, t);
            times.push(t);
        }
        let late_bits = (src.encoded_bytes() - bytes_then.unwrap()) * 8;
        (times, an.finish(), late_bits, src)
    }

    #[test]
    fn a_rate_change_takes_effect_at_the_next_gop_for_encoder_and_mux_together() {
        let (times, r, late_bits, src) = run_with_rate_change(Some(1_000_000));
        assert_eq!(r.first_error, None);
        assert_eq!((r.cc_errors, r.late_pes), (0, 0), "{r:?}");
        assert_eq!(src.rate_changes(), 1);
        assert_eq!(
            src.describe(),
            "test pattern 320x180@30 H.264 700 kbit/s, mux 1 Mbit/s"
        );
        // Before the GOP at 2 s the packets leave at 2 Mbit/s; after it (once the frames made
        // for the old rate have left) at 1 Mbit/s.
        let gap = |a: Duration| {
            let i = times.iter().position(|&t| t >= a).unwrap();
            (times[i + 1] - times[i]).as_nanos() as u64
        };
        assert_eq!(
            gap(Duration::from_millis(1900)),
            1504 * 1_000_000_000 / 2_000_000
        );
        assert_eq!(
            gap(Duration::from_millis(3500)),
            1504 * 1_000_000_000 / 1_000_000
        );
        // The encoder follows too: the same pictures cost about half the bits at half the
        // rate (the same source without the change is the reference).
        let (_, _, reference_bits, unchanged) = run_with_rate_change(None);
        assert_eq!(unchanged.rate_changes(), 0);
        let ratio = late_bits as f64 / reference_bits as f64;
        assert!(
            (0.3..0.75).contains(&ratio),
            "{late_bits} / {reference_bits} bits"
        );
        let mut src = src;
        assert!(src.set_rate(10).is_err(), "below the range");
        assert_eq!(src.rate_range(), Some(MIN_RATE..=MAX_RATE));
    }
}
