//! The HTTP control API's view of the server.

use super::{Given, Inner};
use crate::streams::control::{ControlError, StreamControl};
use metronome_config::stream::StreamSpec;
use metronome_rt::sync::lock;
use std::sync::Arc;

/// The HTTP control API's view of the server.
pub(super) struct Control(pub(super) Arc<Inner>);

impl StreamControl for Control {
    fn list(&self) -> serde_json::Value {
        serde_json::to_value(super::status::StreamList {
            server: self.0.server_status(),
            streams: self.0.statuses(false),
        })
        .unwrap_or_default()
    }
    fn get(&self, name: &str) -> Option<serde_json::Value> {
        let streams = lock(&self.0.streams);
        streams.get(name).map(|r| {
            serde_json::to_value(super::status::stream_status(r, "running", &self.0.clock))
                .unwrap_or_default()
        })
    }
    fn add(&self, spec: StreamSpec) -> Result<serde_json::Value, ControlError> {
        let (s, _) = self.0.add(spec, Given::default())?;
        Ok(serde_json::to_value(s).unwrap_or_default())
    }
    fn remove(&self, name: &str) -> Result<serde_json::Value, ControlError> {
        let s = self.0.remove(name, super::Bye::Now)?.status;
        Ok(serde_json::to_value(s).unwrap_or_default())
    }
    fn set_rate(&self, name: &str, bitrate_bps: u64) -> Result<serde_json::Value, ControlError> {
        let s = self.0.set_rate(name, bitrate_bps)?;
        Ok(serde_json::to_value(s).unwrap_or_default())
    }
    fn metrics(&self) -> String {
        let mut text = super::metrics::exposition(&self.0.server_status(), &self.0.statuses(false));
        // What else serves through this server (the RTSP service: its connections, sessions).
        for extra in lock(&self.0.extra_metrics).iter() {
            text.push_str(&extra());
        }
        text
    }
}
