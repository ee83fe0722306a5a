//! Live sources a mount's sessions share (`metronome_media::shared`): the first unicast PLAY of
//! a live test-source mount starts one encoder, each later PLAY taps it, and the encoder goes
//! with the last session. N viewers cost one encode and N sends. The hub's memory (the encoder
//! and its window of packets) and its encoder's CPU are held against the server's budgets while
//! it lives, once.
//!
//! A mount whose sessions may each have their own rate (a rate controller, a `max_bitrate` to
//! turn up to) keeps an encoder per session, as does a server run with sharing off.

use crate::streams::server::memory::TEST_SOURCE_BYTES;
use crate::streams::{GivenSource, StreamServer};
use metronome_config::stream::{SourceSpec, StreamSpec};
use metronome_media::shared::{HubTap, LiveHub};
use metronome_session::rtsp::Refusal;
use std::collections::HashMap;
use std::sync::{Mutex, Weak};
use std::time::Duration;

/// How much of the stream a hub keeps: what a session that joins (at the newest GOP start) or
/// lags (its producer up to 200 ms ahead of its packets) may still need.
const WINDOW: Duration = Duration::from_secs(3);
/// The rate a window is sized for when the source names none.
const DEFAULT_RATE: u64 = 5_000_000;

pub(super) struct SharedSources {
    enabled: bool,
    hubs: HashMap<String, Weak<Mutex<LiveHub>>>,
}

impl SharedSources {
    pub(super) fn new(enabled: bool) -> Self {
        SharedSources {
            enabled,
            hubs: HashMap::new(),
        }
    }

    /// Whether sessions of a mount declared so share one source.
    pub(super) fn shares(&self, spec: &StreamSpec) -> bool {
        self.enabled
            && matches!(spec.source, SourceSpec::Test)
            && spec.cc.is_none()
            && spec.max_bitrate.is_none()
    }

    /// The next session of `mount` starts a source of its own (its settings changed); the
    /// sessions reading the old one keep it.
    pub(super) fn forget(&mut self, mount: &str) {
        self.hubs.remove(mount);
    }

    /// A new session's view of `mount`'s shared source, starting it if no session has it.
    pub(super) fn tap(
        &mut self,
        server: &StreamServer,
        mount: &str,
        spec: &StreamSpec,
    ) -> Result<GivenSource, Refusal> {
        self.hubs.retain(|_, h| h.strong_count() > 0);
        let hub = match self.hubs.get(mount).and_then(Weak::upgrade) {
            Some(hub) => hub,
            None => {
                let hub = start(server, mount, spec)?;
                self.hubs
                    .insert(mount.to_string(), std::sync::Arc::downgrade(&hub));
                hub
            }
        };
        let tap = HubTap::join(&hub)
            .map_err(|e| Refusal::Internal(format!("the shared source of '{mount}': {e}")))?;
        Ok(GivenSource::Ts(Box::new(tap)))
    }
}

/// Opens the mount's source as a hub, its memory held against the budget until it goes.
fn start(
    server: &StreamServer,
    mount: &str,
    spec: &StreamSpec,
) -> Result<std::sync::Arc<Mutex<LiveHub>>, Refusal> {
    let encode = server.encode_cost(spec).map_err(super::refusal)?;
    let source = crate::streams::open_source(spec).map_err(super::refusal)?;
    let rate = source.nominal_bitrate().unwrap_or(DEFAULT_RATE);
    let window = LiveHub::window_for(rate, WINDOW);
    // Each packet kept: its 188 bytes and its time.
    let bytes = TEST_SOURCE_BYTES + (window as u64) * 204;
    let hold = server
        .hold(&format!("{mount} (shared source)"), bytes, encode)
        .map_err(super::refusal)?;
    let hub = LiveHub::new(source, window);
    hub.lock()
        .unwrap_or_else(|e| e.into_inner())
        .on_drop(Box::new(move || drop(hold)));
    Ok(hub)
}
