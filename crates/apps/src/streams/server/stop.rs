//! How the stream server stops a stream and stops itself: a stream removed by a client or an
//! operator, paused, or ended by itself (its RTCP BYE now, never, or a quarter second after
//! its last packet: `farewell.rs`), and the whole server, whose streams answer their last
//! NACKs before they say BYE.

use super::farewell::Bye;
use super::*;

/// Finished streams whose final status is kept for the API and the summary: the most recent
/// ones. Every RTSP session plays a stream of its own; a server that has played thousands keeps
/// the last few dozen (each session's end is in the log), not a record of every one, whose
/// small allocations, scattered through the heap, kept megabytes from going back.
pub(super) const ENDED_KEPT: usize = 64;

/// The longest a stopping server waits for its streams' last repairs. A stream needs one
/// play-out delay (200 ms unless its spec says); this bound keeps a stop, with the BYEs'
/// quarter second after it, well inside the 2 s a SIGTERM allows.
const REPAIRS_AFTER_STOP: Duration = Duration::from_secs(1);

impl StreamServer {
    /// Stops every stream's media, waits while those that repair answer their last NACKs (at
    /// most [`REPAIRS_AFTER_STOP`]), removes them (each says RTCP BYE a quarter second after
    /// its last packet), then stops the pacing cores, the RTCP thread and the producers: what
    /// each core's pacing thread reports, and how long the server ran until its media
    /// stopped, s.
    /// Once stopped, there is nothing left to stop.
    pub(super) fn stop_everything(&mut self) -> (Vec<PacingThreadReport>, f64) {
        let inner = self.inner.clone();
        // The run ends here, with its media: the waits for the last repairs and for the BYEs
        // are not part of it.
        let duration_s = inner
            .clock
            .now()
            .saturating_since(self.started)
            .as_secs_f64();
        inner.stop_media_keep_repairing();
        let names: Vec<String> = lock(&inner.streams).keys().cloned().collect();
        for n in names {
            let _ = inner.remove(&n, Bye::AfterLast);
        }
        inner.farewells.say_all(&inner.clock);
        inner.stop.store(true, Ordering::Release);
        for c in &inner.cores {
            c.stop.store(true, Ordering::Release);
        }
        let reports = std::mem::take(&mut self.core_threads)
            .into_iter()
            .filter_map(|h| h.join().ok())
            .collect();
        if let Some(h) = self.rtcp_thread.take() {
            let _ = h.join();
        }
        // A stream the RTCP thread reaped as the server stopped says BYE still.
        inner.farewells.say_all(&inner.clock);
        if let Some(p) = lock(&inner.producers).take() {
            p.shutdown();
        }
        (reports, duration_s)
    }
}

impl Drop for StreamServer {
    /// A server let go without [`StreamServer::shutdown`] (an error path) still stops its
    /// streams and threads: a pacing core left running would keep a CPU.
    fn drop(&mut self) {
        if !self.core_threads.is_empty() || self.rtcp_thread.is_some() {
            let _ = self.stop_everything();
        }
    }
}

impl Inner {
    /// Stops stream `name` (its BYE as `bye` says): its final status, and the sender reports
    /// its receivers may still echo, oldest first, read once it has stopped sending them
    /// (for the stream that continues it after a pause: `SessionOutlet::sent_reports`).
    pub(super) fn remove(&self, name: &str, bye: Bye) -> Result<super::Stopped, ControlError> {
        let running = lock(&self.streams).remove(name);
        let Some(mut r) = running else {
            // Ended by itself, waiting to say BYE: said now if asked; a pause says none; a
            // stopping server's (after its last packet) leaves it waiting, as it would have.
            if bye != Bye::AfterLast {
                for mut ended in self.farewells.take(name) {
                    if bye == Bye::Now {
                        rtcp::bye(&mut ended, &self.clock);
                    }
                }
            }
            return Err(ControlError::NotFound(format!(
                "no stream named '{name}' is running; GET /streams lists them"
            )));
        };
        self.stop_stream(&mut r, bye == Bye::Now);
        let status = status::stream_status(&r, "removed", &self.clock);
        let reports = lock(&r.rt.session).reports().sent_reports().collect();
        self.remember(status.clone());
        if bye == Bye::AfterLast {
            self.farewells.add(self.clock.now(), r);
        }
        Ok(super::Stopped {
            status,
            sent_reports: reports,
        })
    }

    /// Stops every stream's media, and waits (at most [`REPAIRS_AFTER_STOP`]) while each
    /// that repairs still answers the NACKs that can be of use: its sending thread lets go at
    /// its last packet's play-out time
    /// ([`metronome_session::sender::SenderSession::repairs_useful_until`]), as when its
    /// source ends by itself; one that does not repair lets go at once.
    pub(super) fn stop_media_keep_repairing(&self) {
        let streams: Vec<Arc<StreamRt>> =
            lock(&self.streams).values().map(|r| r.rt.clone()).collect();
        for rt in &streams {
            rt.media_stop.store(true, Ordering::Release);
        }
        let until = self.clock.now() + REPAIRS_AFTER_STOP;
        while streams
            .iter()
            .any(|rt| !rt.finished.load(Ordering::Acquire))
            && self.clock.now() < until
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Streams of a name that had ended and waited to say BYE, as one of that name starts
    /// (`going_on`: its SSRC): one with the same SSRC goes on (no BYE), the others leave now.
    pub(super) fn settle(&self, ended: Vec<Running>, going_on: Option<Ssrc>) {
        for mut r in ended {
            if Some(r.ssrc) != going_on {
                rtcp::bye(&mut r, &self.clock);
            }
        }
    }

    /// Stops a stream's threads, sends its RTCP BYE (if `bye`) and frees its admission.
    pub(super) fn stop_stream(&self, r: &mut Running, bye: bool) {
        r.rt.stop.store(true, Ordering::Release);
        if let Some(core) = self.cores.get(r.core) {
            let _ = core.commands.push(Command::Remove(r.rt.id));
        }
        if let Some(h) = r.naive.take() {
            if let Ok(cpu_s) = h.join() {
                self.naive_cpu_ns
                    .fetch_add((cpu_s * 1e9) as u64, Ordering::Relaxed);
            }
        }
        // The pacing thread lets go within a turn of its loop (a millisecond at most).
        for _ in 0..200 {
            if r.rt.finished.load(Ordering::Acquire) || self.cores.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if bye {
            rtcp::bye(r, &self.clock);
        }
        self.release(r.rt.id);
        if self.cfg.rt == CoreRt::Deadline && !self.cores.is_empty() {
            let _ = self.grow_deadline_budget(r.core);
        }
    }

    pub(super) fn remember(&self, status: StreamStatus) {
        let mut ended = lock(&self.ended);
        if ended.len() == ENDED_KEPT {
            ended.pop_front();
        }
        ended.push_back(status);
    }
}
