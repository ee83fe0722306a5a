//! Starting a source part-way in: RTSP PLAY with `Range: npt=FROM-` on a file.

use crate::{MediaError, TsSource};
use std::time::Duration;

/// A source that skips everything due before `from` and shifts the rest so that the stream
/// starts at time zero. Decoders pick up at the next PAT/PMT and key frame, as they do when
/// they join a broadcast.
pub struct Seeked {
    inner: Box<dyn TsSource>,
    from: Duration,
}

impl Seeked {
    /// `inner` from `from` on its timeline: packets due earlier are read and dropped.
    pub fn new(inner: Box<dyn TsSource>, from: Duration) -> Seeked {
        Seeked { inner, from }
    }
}

impl TsSource for Seeked {
    fn next_packet(&mut self, out: &mut [u8; 188]) -> Result<Option<Duration>, MediaError> {
        loop {
            let Some(t) = self.inner.next_packet(out)? else {
                return Ok(None);
            };
            if t >= self.from {
                return Ok(Some(t - self.from));
            }
        }
    }

    fn describe(&self) -> String {
        format!(
            "{}, from {:.3} s",
            self.inner.describe(),
            self.from.as_secs_f64()
        )
    }

    fn nominal_bitrate(&self) -> Option<u64> {
        self.inner.nominal_bitrate()
    }

    fn catch_up_to(&mut self, now: Duration) -> u64 {
        self.inner.catch_up_to(now + self.from)
    }

    fn take_warning(&mut self) -> Option<String> {
        self.inner.take_warning()
    }
    fn is_live(&self) -> bool {
        self.inner.is_live()
    }

    fn rate_range(&self) -> Option<std::ops::RangeInclusive<u64>> {
        self.inner.rate_range()
    }

    fn set_rate(&mut self, rate: u64) -> Result<(), MediaError> {
        self.inner.set_rate(rate)
    }
}

/// The length of a source: the time of its last packet. Reads it to the end, so use it once,
/// on a source that is not looping.
pub fn duration_of(source: &mut dyn TsSource) -> Result<Duration, MediaError> {
    let mut pkt = [0u8; 188];
    let mut last = Duration::ZERO;
    while let Some(t) = source.next_packet(&mut pkt)? {
        last = t;
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets every 10 ms, each carrying its index.
    struct Ticks(u8);
    impl TsSource for Ticks {
        fn next_packet(&mut self, out: &mut [u8; 188]) -> Result<Option<Duration>, MediaError> {
            if self.0 == 100 {
                return Ok(None);
            }
            out[0] = self.0;
            self.0 += 1;
            Ok(Some(Duration::from_millis(10 * u64::from(out[0]))))
        }
        fn describe(&self) -> String {
            "ticks".into()
        }
        fn nominal_bitrate(&self) -> Option<u64> {
            None
        }
    }

    #[test]
    fn skips_to_the_start_and_rebases_time() {
        let mut s = Seeked::new(Box::new(Ticks(0)), Duration::from_millis(255));
        let mut p = [0u8; 188];
        assert_eq!(
            s.next_packet(&mut p).unwrap(),
            Some(Duration::from_millis(5))
        );
        assert_eq!(p[0], 26);
        assert_eq!(
            duration_of(&mut Ticks(0)).unwrap(),
            Duration::from_millis(990)
        );
        let mut past = Seeked::new(Box::new(Ticks(0)), Duration::from_secs(5));
        assert_eq!(past.next_packet(&mut p).unwrap(), None);
    }
}
