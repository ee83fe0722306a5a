//! The multi-stream server: admission control at every stream start, one pacing thread per
//! real-time core (EDF or DM) or one plain thread per stream (the naive baseline), a pool of
//! producers, and RTCP for every stream.
//!
//! Streams come and go while it runs ([`StreamServer::add`], [`StreamServer::remove`]); the HTTP
//! control API and the `serve` command both drive it through those calls.

use super::naive::spawn_naive;
use super::outlet::{SessionOutlet, StartInfo};
use super::producer::{ProducerPool, Production};
use super::stream::StreamRt;
use super::stream::TsLane;
use crate::streams::control::{ControlError, StreamControl};
use encode_cost::EncodeCosts;
pub(crate) use farewell::BYE_AFTER_LAST;
use farewell::{Bye, Farewells};
use metronome_config::serve::SchedKind;
use metronome_config::stream::format_bitrate;
use metronome_config::stream::StreamSpec;
use metronome_rt::clock::Clock;
use metronome_rt::host::HostWatch;
use metronome_rt::pacing::PacingThreadReport;
use metronome_rt::pacing::{calibrate, Calibration};
use metronome_rt::pacing::{run_core, Command, CoreShared};
use metronome_rt::sync::lock;
use metronome_rt::thread;
use metronome_sched::OverloadWatch;
use metronome_sched::{Admission, Budget, CpuBudget, MemoryBudget, Platform, Policy, TaskParams};
use metronome_session::sender::{Input, RateRefusal};
use metronome_time::Distribution;
use metronome_time::Micros;
use metronome_wire::Ssrc;
use open::{open_stream, Given, GivenSource, Opened};
use status::{ServerStatus, StreamStatus};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

mod config;
mod control;
pub mod encode_cost;
pub(in crate::streams) mod farewell;
pub(crate) mod memory;
pub(crate) mod metrics;
pub(crate) mod open;
mod outcome;
mod repair;
pub(crate) mod rtcp;
pub mod status;
mod stop;
mod uncompressed;

use config::core_config;
pub(crate) use config::deadline_policy;
pub use config::{CoreRt, ServerConfig, DEFAULT_MAX_STREAM_BPS};
use control::Control;
pub use outcome::{PacerView, ServerOutcome};
pub use uncompressed::RawAdmission;

/// Most destinations of one stream; the admission test's blocking term covers a packet sent to
/// this many.
pub const MAX_DESTINATIONS: usize = 8;
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("could not measure the send cost: {0}. Give it with --send-cost, for example 5us")]
    Calibration(std::io::Error),
    #[error("could not start the {0} thread: {1}")]
    Thread(&'static str, std::io::Error),
    #[error("{0}")]
    Config(String),
}

/// A running stream as the control side holds it.
pub(super) struct Running {
    pub rt: Arc<StreamRt>,
    pub spec: StreamSpec,
    pub core: usize,
    pub source: String,
    pub ssrc: Ssrc,
    pub rtcp: Vec<super::outlet::RtcpOut>,
    /// The naive baseline's own thread; it returns the CPU time it used, s.
    pub naive: Option<JoinHandle<f64>>,
    /// Deadline misses already counted by the overload watch.
    pub misses_seen: u64,
}

pub(super) struct Inner {
    pub cfg: ServerConfig,
    pub clock: Arc<Clock>,
    pub calibration: Calibration,
    pub admission: Mutex<Admission>,
    /// What the admitted streams hold in memory, against the server's budget.
    pub memory: Mutex<MemoryBudget>,
    /// The CPU the live encoders take, against their budget, and what each kind costs.
    pub encoders: Mutex<CpuBudget>,
    pub encode_costs: Mutex<EncodeCosts>,
    /// The producers' CPU time at the last overload window, and their CPU over it.
    pub producer_cpu: Mutex<ProducerCpu>,
    pub streams: Mutex<BTreeMap<String, Running>>,
    pub ended: Mutex<VecDeque<StreamStatus>>,
    pub cores: Vec<Arc<CoreShared>>,
    pub naive_lateness: Arc<Mutex<Distribution>>,
    /// CPU time the naive baseline's finished threads used, ns.
    pub naive_cpu_ns: AtomicU64,
    pub producers: Mutex<Option<ProducerPool>>,
    pub next_id: AtomicU64,
    pub refused: AtomicU64,
    pub stop: AtomicBool,
    /// Whether the admitted set still fits the host as it is now (see `streams::overload`).
    pub overload: Mutex<OverloadWatch>,
    /// What the server has to tell its user (overload, shedding), oldest first; bounded.
    pub warnings: Mutex<VecDeque<String>>,
    /// More Prometheus text for `GET /metrics`, from services that run on this server.
    pub extra_metrics: Mutex<Vec<ExtraMetrics>>,
    /// Streams that ended by themselves or with the server, waiting to say BYE.
    pub farewells: Farewells,
}

/// A service's own figures in Prometheus's text format.
pub type ExtraMetrics = Arc<dyn Fn() -> String + Send + Sync>;

/// The producers' CPU as the overload watch measures it, window by window.
#[derive(Debug, Default)]
pub(super) struct ProducerCpu {
    /// Their CPU time at the last window's end, ns, and when that was.
    pub seen_ns: u64,
    pub at: metronome_time::Timestamp,
    /// Their CPU over the last window, CPUs.
    pub last: f64,
}

/// A share of the memory and encoders' budgets held for something streams share
/// ([`StreamServer::hold`]).
pub struct Hold {
    id: u64,
    inner: std::sync::Weak<Inner>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            lock(&inner.memory).release(self.id);
            lock(&inner.encoders).release(self.id);
        }
    }
}

pub struct StreamServer {
    inner: Arc<Inner>,
    core_threads: Vec<JoinHandle<PacingThreadReport>>,
    rtcp_thread: Option<JoinHandle<()>>,
    started: metronome_time::Timestamp,
    host: HostWatch,
}

/// A stream that stopped ([`StreamServer::pause`]). Not serialized: the control API answers
/// with its `status` alone.
pub struct Stopped {
    /// Its final status.
    pub status: StreamStatus,
    /// The sender reports its receivers may still echo, oldest first (the middle 32 bits of
    /// each one's NTP time): for the stream that continues it after a pause
    /// ([`SessionOutlet::sent_reports`]).
    pub sent_reports: Vec<u32>,
}

impl StreamServer {
    /// Measures the send cost, starts the pacing threads, the producers and the RTCP thread.
    pub fn start(cfg: ServerConfig) -> Result<StreamServer, ServerError> {
        let (calibration, admission) = admission_for(&cfg)?;
        let cores_n = cfg.rt_cores.max(1);
        let clock = Arc::new(Clock::new());
        let mut cores = Vec::new();
        let mut core_threads = Vec::new();
        if cfg.sched != SchedKind::Naive {
            for i in 0..cores_n {
                let shared = Arc::new(CoreShared::new(cfg.streams_per_core));
                let core_cfg = core_config(&cfg, i, admission.policy());
                let (s, c) = (shared.clone(), clock.clone());
                let h = std::thread::Builder::new()
                    .name(format!("pacer-core{i}"))
                    .spawn(move || run_core(core_cfg, &s, &c))
                    .map_err(|e| ServerError::Thread("pacer", e))?;
                cores.push(shared);
                core_threads.push(h);
            }
        }
        // Locking memory can take a while in a large process: streams start only once every
        // pacer is ready, or their first packets would go late.
        for _ in 0..1000 {
            if cores.iter().all(|c| c.ready.load(Ordering::Acquire)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let housekeeping = cfg.housekeeping_cpus();
        let producers = ProducerPool::start(cfg.producers, housekeeping.clone(), clock.clone())
            .map_err(|e| ServerError::Thread("producer", e))?;
        let started = clock.now();
        let cfg_overload = cfg.overload;
        let encode_budget = cfg.encode_budget_cpus();
        let encode_cost = cfg.encode_cost;
        let inner = Arc::new(Inner {
            encoders: Mutex::new(CpuBudget::new(encode_budget)),
            encode_costs: Mutex::new(EncodeCosts::new(encode_cost)),
            producer_cpu: Mutex::new(ProducerCpu {
                at: clock.now(),
                ..ProducerCpu::default()
            }),
            admission: Mutex::new(admission),
            memory: Mutex::new(MemoryBudget::new(
                cfg.memory_budget_bytes
                    .unwrap_or_else(memory::default_budget_bytes),
            )),
            cfg,
            clock,
            calibration,
            streams: Mutex::new(BTreeMap::new()),
            ended: Mutex::new(VecDeque::new()),
            cores,
            naive_lateness: Arc::new(Mutex::new(Distribution::new())),
            naive_cpu_ns: AtomicU64::new(0),
            producers: Mutex::new(Some(producers)),
            next_id: AtomicU64::new(1),
            refused: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            overload: Mutex::new(OverloadWatch::new(cfg_overload)),
            warnings: Mutex::new(VecDeque::new()),
            extra_metrics: Mutex::new(Vec::new()),
            farewells: Farewells::default(),
        });
        let rtcp_thread = {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name("rtcp".into())
                .spawn(move || {
                    if let Some(cpus) = &housekeeping {
                        let _ = thread::set_affinity(0, cpus);
                    }
                    rtcp::run(&inner)
                })
                .map_err(|e| ServerError::Thread("RTCP", e))?
        };
        Ok(StreamServer {
            inner,
            core_threads,
            rtcp_thread: Some(rtcp_thread),
            started,
            host: HostWatch::start(),
        })
    }

    /// The clock every time of the server's streams is on (their epochs, due times, and the
    /// cores' comparisons): a stream added from outside must use it too.
    pub fn clock(&self) -> Arc<Clock> {
        self.inner.clock.clone()
    }

    pub fn calibration(&self) -> Calibration {
        self.inner.calibration
    }

    /// Adds a service's figures to `GET /metrics` (the RTSP service's connections, sessions).
    pub fn add_metrics(&self, f: ExtraMetrics) {
        lock(&self.inner.extra_metrics).push(f);
    }

    /// Reserves `bytes` of the memory budget and `encode_cpu` CPUs of the encoders' for
    /// something streams share (a live source many sessions read), under `name`; given back
    /// when the hold is dropped.
    pub fn hold(&self, name: &str, bytes: u64, encode_cpu: f64) -> Result<Hold, ControlError> {
        let inner = &self.inner;
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let refused = |why: String| {
            inner.refused.fetch_add(1, Ordering::Relaxed);
            ControlError::Refused(why)
        };
        lock(&inner.memory)
            .reserve(id, name, bytes)
            .map_err(|r| refused(r.to_string()))?;
        let encoders = lock(&inner.encoders).reserve(id, name, encode_cpu);
        if let Err(r) = encoders {
            lock(&inner.memory).release(id);
            return Err(refused(r.to_string()));
        }
        Ok(Hold {
            id,
            inner: Arc::downgrade(inner),
        })
    }

    /// The share of a CPU the source `spec` declares takes when opened by the server: its
    /// encoder's, measured the first time one like it is asked for (`encode_cost`).
    pub fn encode_cost(&self, spec: &StreamSpec) -> Result<f64, ControlError> {
        lock(&self.inner.encode_costs).of(spec)
    }

    /// What the server has had to say since the last call (overload, shedding, recovery),
    /// and what its streams' sources had to (a file that ends mid-packet).
    pub fn take_warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = lock(&self.inner.warnings).drain(..).collect();
        for (name, r) in lock(&self.inner.streams).iter() {
            for w in lock(&r.rt.warnings).drain(..) {
                out.push(format!("stream '{name}': {w}"));
            }
        }
        out
    }

    /// Admits and starts a stream, or says why not.
    pub fn add(&self, spec: StreamSpec) -> Result<StreamStatus, ControlError> {
        self.inner.add(spec, Given::default()).map(|(s, _)| s)
    }

    /// Admits and starts a stream from a source the caller opened (`spec.source` is not
    /// looked at): `serve URL`, `demo` and `bench pacing` open theirs from the command line,
    /// the lab its flows' (MPEG-TS, or a source that makes its own RTP packets).
    pub fn add_source(
        &self,
        spec: StreamSpec,
        source: impl Into<GivenSource>,
    ) -> Result<(StreamStatus, StartInfo), ControlError> {
        self.inner.add(
            spec,
            Given {
                source: Some(source.into()),
                ..Given::default()
            },
        )
    }

    /// The worst lateness of a running stream's packets since the last call, for a live
    /// status line.
    pub fn take_max_late(&self, name: &str) -> Option<Duration> {
        let streams = lock(&self.inner.streams);
        let c = &streams.get(name)?.rt.counters;
        Some(Duration::from_nanos(
            c.max_late_ns.swap(0, Ordering::Relaxed),
        ))
    }

    /// Turns a running stream's rate knob: from its source's next switching point (the test
    /// source's next GOP) it sends at `ts_bps` bit/s of MPEG-TS. The rate must be one the
    /// source can switch to, and at most what admission reserved for the stream (its
    /// `max_bitrate`, or the rate it started at).
    pub fn set_rate(&self, name: &str, ts_bps: u64) -> Result<StreamStatus, ControlError> {
        self.inner.set_rate(name, ts_bps)
    }

    /// Whether a stream is running (not ended, removed or refused).
    pub fn is_running(&self, name: &str) -> bool {
        lock(&self.inner.streams).contains_key(name)
    }

    /// Admits and starts a stream, and says where its first packet is. With an `outlet` (an
    /// RTSP session's transport) packets go there, not to `spec.destination` (which may be
    /// empty).
    pub fn add_with(
        &self,
        spec: StreamSpec,
        outlet: Option<SessionOutlet>,
        source: Option<GivenSource>,
    ) -> Result<(StreamStatus, StartInfo), ControlError> {
        self.inner.add(spec, Given { outlet, source })
    }

    /// How far a running stream has got on its own timeline (what has been sent), for RTSP
    /// PAUSE to resume from. The schedule never shifts, so it is the time since the epoch.
    pub fn position(&self, name: &str) -> Option<Duration> {
        let streams = lock(&self.inner.streams);
        let r = streams.get(name)?;
        Some(self.inner.clock.now().saturating_since(r.rt.epoch))
    }

    /// The status of one running stream.
    pub fn stream(&self, name: &str) -> Option<StreamStatus> {
        let streams = lock(&self.inner.streams);
        streams
            .get(name)
            .map(|r| status::stream_status(r, "running", &self.inner.clock))
    }

    /// Stops a stream and returns its final status.
    pub fn remove(&self, name: &str) -> Result<StreamStatus, ControlError> {
        self.inner.remove(name, Bye::Now).map(|s| s.status)
    }

    /// Stops a stream without saying RTCP BYE: its source is not leaving (RTSP PAUSE; RFC 3550
    /// §6.6 keeps BYE for a source that leaves the session), and PLAY will start it again.
    pub fn pause(&self, name: &str) -> Result<Stopped, ControlError> {
        self.inner.remove(name, Bye::Never)
    }

    pub fn streams(&self) -> Vec<StreamStatus> {
        self.inner.statuses(true)
    }

    pub fn status(&self) -> ServerStatus {
        self.inner.server_status()
    }

    /// Running streams.
    pub fn running(&self) -> usize {
        lock(&self.inner.streams).len()
    }

    /// A handle for the HTTP control API.
    pub fn control(&self) -> Arc<dyn StreamControl> {
        Arc::new(Control(self.inner.clone()))
    }

    /// Stops every stream (with an RTCP BYE) and the threads, and reports.
    pub fn shutdown(mut self) -> ServerOutcome {
        let inner = self.inner.clone();
        let (reports, duration_s) = self.stop_everything();
        let pacers: Vec<PacerView> = reports
            .iter()
            .map(|r| PacerView::new(r, duration_s))
            .collect();
        let core_cpu_percent = if inner.cfg.sched == SchedKind::Naive {
            let naive_s = inner.naive_cpu_ns.load(Ordering::Relaxed) as f64 / 1e9;
            vec![naive_s * 100.0 / duration_s.max(1e-9)]
        } else {
            pacers.iter().map(|p| p.cpu_percent).collect()
        };
        let streams = inner.statuses(true);
        let stalls = streams.iter().map(|s| s.stalls).sum();
        ServerOutcome {
            server: inner.server_status(),
            streams,
            core_cpu_percent,
            pacers,
            duration_us: Micros::from_secs_f64(duration_s),
            host: self.host.finish(stalls),
        }
    }
}

/// The send cost (measured unless given) and the admission control `cfg` asks for.
fn admission_for(cfg: &ServerConfig) -> Result<(Calibration, Admission), ServerError> {
    if !(0.01..=1.0).contains(&cfg.core_budget) {
        return Err(ServerError::Config(format!(
            "core budget {} is outside 1%..100%",
            cfg.core_budget
        )));
    }
    let calibration = match cfg.send_cost {
        Some(c) => Calibration::fixed(c),
        None => calibrate(1328 + 16).map_err(ServerError::Calibration)?,
    };
    let platform = Platform {
        cores: cfg.rt_cores.max(1),
        budget: Budget::from_fraction(cfg.core_budget),
        link_capacity_bps: cfg.link_capacity_bps,
        // One packet to every destination of a stream: the longest stretch the pacer does
        // not look at a newly released job.
        blocking: calibration.per_packet_us.to_duration() * MAX_DESTINATIONS as u32,
    };
    let policy = match cfg.sched {
        SchedKind::Dm => Policy::Dm,
        SchedKind::Edf | SchedKind::Naive => Policy::Edf,
    };
    Ok((calibration, Admission::new(policy, platform)))
}

impl Inner {
    fn add(
        &self,
        spec: StreamSpec,
        given: Given,
    ) -> Result<(StreamStatus, StartInfo), ControlError> {
        if self.stop.load(Ordering::Acquire) {
            return Err(ControlError::Internal("the server is shutting down".into()));
        }
        let valid = if given.outlet.is_some() {
            spec.validate_settings()
        } else {
            spec.validate()
        };
        valid.map_err(|e| ControlError::Invalid(e.to_string()))?;
        if spec.destination.len() > MAX_DESTINATIONS {
            return Err(ControlError::Invalid(format!(
                "stream '{}' has {} destinations; at most {MAX_DESTINATIONS} are allowed",
                spec.name,
                spec.destination.len()
            )));
        }
        // An encoder the stream would start (a source the caller brings is its own business,
        // a shared one is held apart: `StreamServer::hold`). Measured, the first time, before
        // the stream table is locked: the RTCP thread and the status read it meanwhile.
        let encode = match given.source {
            None => lock(&self.encode_costs).of(&spec)?,
            Some(_) => 0.0,
        };
        let mut streams = lock(&self.streams);
        if streams.contains_key(&spec.name) {
            return Err(ControlError::Exists(format!(
                "a stream named '{}' is already running: pick another name or DELETE it first",
                spec.name
            )));
        }
        let ended = self.farewells.take(&spec.name);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let admit = |task, bytes| self.admit(id, &spec.name, task, (bytes, encode));
        let opened = open_stream(
            &spec,
            id,
            &self.cfg,
            &self.calibration,
            &self.clock,
            given,
            admit,
        )
        .inspect_err(|_| self.release(id));
        let running = opened.and_then(|o| {
            let (core, start) = (o.core, o.start);
            self.launch(spec, o, core).map(|r| (r, start))
        });
        self.settle(ended, running.as_ref().ok().map(|(r, _)| r.ssrc));
        let (running, start) = running?;
        let status = status::stream_status(&running, "running", &self.clock);
        streams.insert(running.spec.name.clone(), running);
        Ok((status, start))
    }

    /// Admission control: the schedulability tests, the link, the memory budget (`bytes`, what
    /// the stream will hold), the encoders' CPU budget (`encode`, what its encoder takes) and
    /// the kernel's own SCHED_DEADLINE admission when the cores run under it. Returns the core.
    fn admit(
        &self,
        id: u64,
        name: &str,
        task: TaskParams,
        (bytes, encode): (u64, f64),
    ) -> Result<usize, ControlError> {
        if let Some(why) = lock(&self.overload).refusing_reason() {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(ControlError::Refused(format!(
                "'{name}' is refused while the running streams do not fit ({why}); it is \
                 admitted again once they do, or run with --overload warn"
            )));
        }
        if task.bitrate_bps > self.cfg.max_stream_bps {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(ControlError::Refused(format!(
                "'{name}' would send {} to its destinations; one stream may send at most {} \
                 (--max-stream-rate)",
                format_bitrate(task.bitrate_bps),
                format_bitrate(self.cfg.max_stream_bps)
            )));
        }
        let refused = |why: String| {
            self.release(id);
            self.refused.fetch_add(1, Ordering::Relaxed);
            ControlError::Refused(why)
        };
        // Each ledger's lock is let go before a refusal gives back what the others hold.
        let memory = lock(&self.memory).reserve(id, name, bytes);
        memory.map_err(|r| refused(r.to_string()))?;
        let encoders = lock(&self.encoders).reserve(id, name, encode);
        encoders.map_err(|r| refused(r.to_string()))?;
        let placement = lock(&self.admission).try_admit(id, name, task);
        let placement = placement.map_err(|r| refused(r.to_string()))?;
        if self.cfg.rt == CoreRt::Deadline && self.cfg.sched != SchedKind::Naive {
            if let Err(why) = self.grow_deadline_budget(placement.core) {
                self.release(id);
                self.refused.fetch_add(1, Ordering::Relaxed);
                return Err(ControlError::Refused(format!(
                    "admitting '{name}' would need core {} to reserve more SCHED_DEADLINE time, \
                     and the kernel refused: {why}. Stop a stream or run with --rt auto",
                    placement.core
                )));
            }
        }
        Ok(placement.core)
    }

    /// Gives back what stream `id` was admitted with: its place on a core and the link, its
    /// memory, its encoder's CPU.
    pub(super) fn release(&self, id: u64) {
        lock(&self.admission).release(id);
        lock(&self.memory).release(id);
        lock(&self.encoders).release(id);
    }

    /// Hands an admitted stream to its producer and its sending thread.
    fn launch(&self, spec: StreamSpec, o: Opened, core: usize) -> Result<Running, ControlError> {
        let Opened {
            rt,
            source,
            rtcp,
            description,
            start,
            ..
        } = o;
        if let Some(p) = lock(&self.producers).as_ref() {
            p.add(Production::new(rt.clone(), source));
        }
        let naive = if self.cfg.sched == SchedKind::Naive {
            let h = spawn_naive(rt.clone(), self.clock.clone(), self.naive_lateness.clone())
                .map_err(|e| {
                    self.release(rt.id);
                    rt.stop.store(true, Ordering::Release);
                    ControlError::Internal(format!("could not start the stream's thread: {e}"))
                })?;
            Some(h)
        } else {
            if self.cores[core]
                .commands
                .push(Command::Add(TsLane::boxed(rt.clone())))
                .is_err()
            {
                self.release(rt.id);
                rt.stop.store(true, Ordering::Release);
                return Err(ControlError::Internal(format!(
                    "core {core}'s command queue is full; try again"
                )));
            }
            None
        };
        Ok(Running {
            rt,
            spec,
            core,
            source: description,
            ssrc: start.ssrc,
            rtcp,
            naive,
            misses_seen: 0,
        })
    }

    fn set_rate(&self, name: &str, ts_bps: u64) -> Result<StreamStatus, ControlError> {
        let streams = lock(&self.streams);
        let Some(r) = streams.get(name) else {
            return Err(ControlError::NotFound(format!(
                "no stream named '{name}' is running; GET /streams lists them"
            )));
        };
        let knob = &r.rt.rate;
        match knob.limits.check(ts_bps) {
            Ok(()) => {}
            Err(RateRefusal::Fixed) => {
                return Err(ControlError::Invalid(format!(
                    "stream '{name}' ({}) cannot change its rate: a file plays at its own",
                    r.source
                )))
            }
            Err(RateRefusal::AboveCeiling { ceiling }) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return Err(ControlError::Refused(format!(
                    "stream '{name}' was admitted for at most {}; {} needs admission again: \
                     start it with max_bitrate = \"{}\" to let its rate go that high",
                    format_bitrate(ceiling),
                    format_bitrate(ts_bps),
                    format_bitrate(ts_bps)
                )));
            }
            Err(RateRefusal::OutsideRange { range }) => {
                return Err(ControlError::Invalid(format!(
                    "stream '{name}' can run at {} to {}; {} is outside",
                    format_bitrate(*range.start()),
                    format_bitrate(*range.end()),
                    format_bitrate(ts_bps)
                )))
            }
        }
        let now = self.clock.now();
        let wire = {
            let mut session = lock(&r.rt.session);
            let before = rtcp::Glance::of(&session);
            let _ = session.handle_input(now, Input::SetRate(knob.limits.wire(ts_bps)));
            before.tell_if_sooner(self, r, &session);
            session.target_rate()
        };
        knob.ask(wire);
        Ok(status::stream_status(r, "running", &self.clock))
    }

    /// Re-reserves SCHED_DEADLINE time for `core`'s pacing thread at its new utilisation.
    fn grow_deadline_budget(&self, core: usize) -> Result<(), String> {
        let u = lock(&self.admission).core_utilisation(core);
        let tid = self.cores[core].tid.load(Ordering::Acquire);
        if tid == 0 {
            return Err("the pacing thread has not started yet".into());
        }
        thread::set_deadline_of(tid, deadline_policy(u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server let go without `shutdown` stops its pacing cores and its RTCP thread: nothing
    /// of it is left running, so nothing holds its state.
    #[test]
    fn a_server_dropped_without_shutdown_stops_its_threads() {
        let server = StreamServer::start(ServerConfig {
            send_cost: Some(Duration::from_micros(5)),
            rt: CoreRt::Off,
            ..ServerConfig::default()
        })
        .unwrap();
        let inner = Arc::downgrade(&server.inner);
        let core = Arc::downgrade(&server.inner.cores[0]);
        drop(server);
        assert!(
            inner.upgrade().is_none(),
            "the RTCP thread still holds the server"
        );
        assert!(core.upgrade().is_none(), "a pacing core is still running");
    }
}
