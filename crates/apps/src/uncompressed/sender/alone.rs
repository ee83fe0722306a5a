//! A lone raw stream as a stream server with one lane (`serve --raw rtp://…`), as a lone MPEG-TS
//! stream is one with one stream (`crate::sender`): admitted as every stream is (the declared
//! link, the memory budget, the most one stream may send, its core's schedulability test), on a
//! server whose one pacing core is tuned to the stream's model.

use super::{own_core, RawPlace, RawSendError, RawSender};
use crate::streams::{CoreRt, ServerConfig, ServerOutcome, StreamServer};
use crate::uncompressed::report::{RawSenderOutcome, RawSenderStatus};
use crate::uncompressed::RawControl;
use metronome_rt::pacing::PacingThreadConfig;
use metronome_time::Micros;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The stream's name in the server's admission and warnings.
const NAME: &str = "raw";

impl RawSender {
    /// The pacing thread of a core tuned to this stream (its model's spin margins and late
    /// threshold), as [`RawPlace::Own`] runs it.
    pub fn pacing_thread(&self) -> PacingThreadConfig {
        own_core(&self.cfg, &self.schedule).thread
    }

    /// Runs the stream as the one lane of a stream server of its own, set up as `server` says
    /// (its limits, scheduler, real-time policy, overload policy). The server has one core,
    /// whose pacing thread is [`RawSender::pacing_thread`] and is pinned only where the
    /// stream's `pacer_cpu` asks. The stream is admitted first, and refused with the reason
    /// ([`RawSendError::Refused`]) as the server refuses any stream. Under `naive` it is
    /// admitted as a naive MPEG-TS stream is, and paces itself on a core of its own.
    pub fn run_alone(
        self,
        server: ServerConfig,
        ctl: Arc<RawControl>,
        stop: &AtomicBool,
        on_status: impl FnMut(&RawSenderStatus),
    ) -> Result<RawSenderOutcome, RawSendError> {
        let thread = self.pacing_thread();
        let budget = server.core_budget;
        let server = Arc::new(StreamServer::start(one_lane(server, thread))?);
        let task = self.task(&server.calibration());
        let admitted = match server.admit_raw(NAME, task, self.memory_bytes()) {
            Ok(a) => a,
            Err(e) => {
                shut_down(server);
                let mut why = e.message().to_string();
                if task.cost.as_secs_f64() > budget * task.period.as_secs_f64() {
                    why.push_str(ALONE_ON_ITS_CORE);
                }
                return Err(RawSendError::Refused(why));
            }
        };
        let share = admitted
            .core
            .and_then(|c| server.status().cores.get(c).map(|v| v.utilisation_percent));
        let place = RawPlace::Server(server.clone(), admitted);
        let outcome = self.run_on(place, ctl, stop, on_status);
        let warnings = server.take_warnings();
        let done = shut_down(server);
        let mut outcome = outcome?;
        outcome.warnings = warnings;
        outcome.core_share_percent = share;
        if let Some(done) = done {
            take_core_figures(&mut outcome, &done);
        }
        Ok(outcome)
    }
}

/// What a lone stream that does not fit its core alone can do (there is no other stream to stop
/// and no core to add).
const ALONE_ON_ITS_CORE: &str = ". It has its pacing core to itself: send fewer calls a frame \
     (a wider --batch-window, or --pacing burst), let it use more of the core (--core-budget, up \
     to 100%), or give the send cost with --send-cost if the one measured at the start was a busy \
     moment's";

/// `server` with one core for one lane, its pacing thread `thread`. The thread brings its own
/// real-time policy (a SCHED_DEADLINE reservation sized to the stream where one is asked for),
/// so the server keeps none of its own for the core.
fn one_lane(server: ServerConfig, thread: PacingThreadConfig) -> ServerConfig {
    let rt = match server.rt {
        CoreRt::Deadline => CoreRt::Auto,
        rt => rt,
    };
    ServerConfig {
        rt,
        rt_cores: 1,
        streams_per_core: 1,
        cpus: thread.cpu.map(|c| vec![c]),
        isolate: false,
        lock_memory: thread.lock_memory,
        producers: 1,
        pacer_thread: Some(thread),
        ..server
    }
}

/// Stops the server and its threads and says what it reports. Nothing else holds it once the
/// stream has ended; if something did, the server's `Drop` would stop its threads when let go.
fn shut_down(server: Arc<StreamServer>) -> Option<ServerOutcome> {
    let done = Arc::try_unwrap(server).ok().map(StreamServer::shutdown);
    debug_assert!(done.is_some(), "the lone stream's server is held elsewhere");
    done
}

/// What the stream's pacing thread did: its core's, as the server reports it (the stream was
/// its one lane).
fn take_core_figures(outcome: &mut RawSenderOutcome, done: &ServerOutcome) {
    let Some(core) = done.pacers.first() else {
        return;
    };
    let cpu_s = core.cpu_percent / 100.0 * done.duration_us.as_secs_f64();
    outcome.realtime = core.grant.clone();
    outcome.memory_locked = core.memory.clone();
    outcome.pacer_cpu_us = Micros::from_secs_f64(cpu_s);
    outcome.wait_modes = core.wait_modes;
    outcome.throttle_guard_trips = core.throttle_guard_trips;
}
