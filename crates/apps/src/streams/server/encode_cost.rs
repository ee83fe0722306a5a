//! What a live encoder costs, measured on this machine: admission reserves it against the
//! encoders' CPU budget (`metronome_sched::cpu`) before the encoder starts.
//!
//! A test source of a given picture size, frame rate and rate is run once, as fast as it goes,
//! for a second of its stream (a GOP at the default IDR interval, so one IDR picture among
//! the others), or until it has taken `CPU_CAP`; its thread's CPU time over the stream time
//! it made is the share of a CPU it takes in real time. The thread's CPU time, not the wall
//! clock, so that a busy host does not inflate it. The figure is kept per configuration for
//! the server's life: a mount's second encoder costs no second measurement.

use super::open::open_source;
use crate::streams::control::ControlError;
use metronome_config::stream::{SourceSpec, StreamSpec};
use metronome_media::TsSource;
use metronome_rt::clock::thread_cpu_ns;
use std::collections::HashMap;
use std::time::Duration;

/// The stream time one measurement covers.
const SPAN: Duration = Duration::from_secs(1);
/// The most CPU one measurement takes (a large picture is measured over less stream time).
const CPU_CAP: Duration = Duration::from_millis(300);

/// The encode costs measured so far, by configuration.
#[derive(Debug, Default)]
pub struct EncodeCosts {
    /// A cost given by the user for every encoder, instead of measuring.
    fixed: Option<f64>,
    measured: HashMap<String, f64>,
}

impl EncodeCosts {
    pub fn new(fixed: Option<f64>) -> Self {
        EncodeCosts {
            fixed,
            measured: HashMap::new(),
        }
    }

    /// The share of a CPU the source `spec` declares takes when the server opens it itself:
    /// an encoder's (measured), nothing for a file.
    pub fn of(&mut self, spec: &StreamSpec) -> Result<f64, ControlError> {
        if !matches!(spec.source, SourceSpec::Test) {
            return Ok(0.0);
        }
        if let Some(c) = self.fixed {
            return Ok(c);
        }
        let key = format!("{:?}/{:?}/{:?}", spec.size, spec.fps, spec.bitrate);
        if let Some(c) = self.measured.get(&key) {
            return Ok(*c);
        }
        let mut source = open_source(spec)?;
        let cost = measure(&mut *source).map_err(|e| {
            ControlError::Internal(format!(
                "stream '{}': measuring its encoder failed: {e}",
                spec.name
            ))
        })?;
        tracing::info!(
            "an encoder of {} takes {:.1} % of a CPU (measured)",
            source.describe(),
            cost * 100.0
        );
        self.measured.insert(key, cost);
        Ok(cost)
    }
}

/// Runs `source` for `SPAN` of its stream or `CPU_CAP` of CPU, whichever comes first;
/// the CPU it took per second of stream.
pub fn measure(source: &mut dyn TsSource) -> Result<f64, metronome_media::MediaError> {
    let mut packet = [0u8; 188];
    let start = thread_cpu_ns();
    let mut made = Duration::ZERO;
    let mut first = None;
    while let Some(t) = source.next_packet(&mut packet)? {
        let zero = *first.get_or_insert(t);
        made = t.saturating_sub(zero);
        let cpu = thread_cpu_ns().saturating_sub(start);
        if made >= SPAN || cpu >= CPU_CAP.as_nanos() as u64 {
            break;
        }
    }
    let cpu = thread_cpu_ns().saturating_sub(start) as f64 / 1e9;
    // A source that made less than a packet's worth of time: count it as a second.
    Ok(cpu / made.as_secs_f64().max(1e-3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_spec(size: &str) -> StreamSpec {
        let mut s = StreamSpec::new("enc", vec!["rtp://127.0.0.1:5004".into()]);
        s.source = SourceSpec::Test;
        s.size = Some(size.into());
        s
    }

    #[test]
    fn a_larger_picture_costs_more_and_a_measurement_is_kept() {
        let mut costs = EncodeCosts::new(None);
        let small = costs.of(&test_spec("320x180")).unwrap();
        let large = costs.of(&test_spec("1280x720")).unwrap();
        eprintln!("320x180: {small:.4} CPUs, 1280x720: {large:.4} CPUs");
        assert!(small > 0.0 && small < 4.0, "{small}");
        // Sixteen times the pixels: well over twice the work, whatever else the host runs.
        assert!(large > 2.0 * small, "320x180 {small}, 1280x720 {large}");
        assert_eq!(costs.measured.len(), 2);
        assert_eq!(costs.of(&test_spec("320x180")).unwrap(), small);
        assert_eq!(costs.measured.len(), 2);
    }

    #[test]
    fn a_file_costs_no_encoder_and_a_given_cost_is_used_as_given() {
        let mut s = test_spec("640x360");
        s.source = SourceSpec::File("x.ts".into());
        assert_eq!(EncodeCosts::new(None).of(&s).unwrap(), 0.0);
        assert_eq!(
            EncodeCosts::new(Some(0.25))
                .of(&test_spec("640x360"))
                .unwrap(),
            0.25
        );
    }
}
