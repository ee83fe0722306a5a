//! How the stream server runs its pacing threads: the configuration, and what each core's
//! thread is set up with.

use metronome_config::serve::SchedKind;
use metronome_rt::pacing::CoreConfig;
use metronome_rt::pacing::PacingThreadConfig;
use metronome_rt::pacing::WaitPolicy;
use metronome_rt::thread::{self, RtPolicy};
use metronome_rt::wait::WaiterConfig;
use metronome_sched::{OverloadPolicy, PacingConfig, Policy, WaitSelectorConfig};
use std::time::Duration;

pub use metronome_config::serve::CoreRt;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub sched: SchedKind,
    pub rt_cores: usize,
    /// Share of each real-time core the pacer may use.
    pub core_budget: f64,
    pub link_capacity_bps: Option<u64>,
    pub rt: CoreRt,
    pub wait: WaitPolicy,
    /// Pin core `i`'s pacing thread to `cpus[i]`. By default (with `isolate`) the pacers take
    /// the last CPUs.
    pub cpus: Option<Vec<usize>>,
    /// Keep the producers and the RTCP thread off the pacers' CPUs, so that nothing but the
    /// kernel shares a real-time core with its pacer. Needs more CPUs than `rt_cores`, and is
    /// not done under SCHED_DEADLINE (which refuses pinned threads).
    pub isolate: bool,
    pub lock_memory: bool,
    pub producers: usize,
    pub preroll: Duration,
    pub default_ring: usize,
    /// Per-packet send cost to budget; measured at start-up when `None`.
    pub send_cost: Option<Duration>,
    /// Most streams per core (the pacing thread's table size).
    pub streams_per_core: usize,
    pub rtcp_min_interval: Duration,
    /// What every stream does after a stall: catch up at a bounded rate or drop what is late
    /// (the link's capacity, if declared, caps catching up).
    pub pacing: PacingConfig,
    /// What to do when the admitted set no longer fits the host (measured send cost over its
    /// budget, missed deadlines): warn, refuse new streams, or shed the newest.
    pub overload: OverloadPolicy,
    pub seed: u64,
    /// The most the admitted streams may hold in memory (rings and sources), bytes; by default
    /// a quarter of the machine's (`memory::default_budget_bytes`).
    pub memory_budget_bytes: Option<u64>,
    /// The most one stream may send, bit/s on the wire to all its destinations together
    /// (what admission reserves for it): a bound on what one request can make the server send,
    /// with or without a declared link.
    pub max_stream_bps: u64,
    /// The CPU the live encoders may take together, CPUs; by default
    /// `DEFAULT_ENCODE_SHARE` of the CPUs the producers run on.
    pub encode_budget: Option<f64>,
    /// What one encoder costs, CPUs, instead of measuring it (`encode_cost`).
    pub encode_cost: Option<f64>,
    /// Each stream keeps when each of its packets left (Unix ns, at most
    /// [`super::super::stream::SEND_TIMES_KEPT`]), for a caller that times the packets' way
    /// itself where they carry no send-time stamp (the lab's emulator): off by default.
    pub keep_send_times: bool,
    /// Every core's pacing thread set up as this says, instead of from `rt`, `wait` and `cpus`:
    /// a server for one stream tunes its core to that stream (a lone raw stream's model,
    /// `uncompressed::RawSender::run_alone`). `None` by default.
    pub pacer_thread: Option<PacingThreadConfig>,
}

/// The share of the producers' CPUs the encoders may take by default: the rest is for the
/// producers' other work, the RTCP thread and the RTSP and API event loops that share them.
pub(super) const DEFAULT_ENCODE_SHARE: f64 = 0.8;

/// The default bound on one stream's rate: above any MPEG-TS a user sends (UHD broadcast is
/// under 100 Mbit/s), far below what one request could otherwise ask.
pub const DEFAULT_MAX_STREAM_BPS: u64 = 200_000_000;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            sched: SchedKind::Edf,
            rt_cores: 1,
            core_budget: 0.95,
            link_capacity_bps: None,
            rt: CoreRt::Auto,
            wait: WaitPolicy::Auto,
            cpus: None,
            isolate: true,
            lock_memory: true,
            producers: 2,
            preroll: Duration::from_millis(300),
            default_ring: 1024,
            send_cost: None,
            streams_per_core: 4096,
            rtcp_min_interval: Duration::from_secs(1),
            pacing: PacingConfig::default(),
            overload: OverloadPolicy::Warn,
            seed: 1,
            memory_budget_bytes: None,
            max_stream_bps: DEFAULT_MAX_STREAM_BPS,
            encode_budget: None,
            encode_cost: None,
            keep_send_times: false,
            pacer_thread: None,
        }
    }
}

impl ServerConfig {
    /// The CPU each core's pacing thread is pinned to, if any.
    pub fn pacer_cpus(&self) -> Option<Vec<usize>> {
        if self.rt == CoreRt::Deadline {
            return None;
        }
        if let Some(c) = &self.cpus {
            return Some(c.clone());
        }
        let n = thread::online_cpus();
        let cores = self.rt_cores.max(1);
        (self.isolate && n > cores).then(|| (0..cores).map(|i| n - 1 - i).collect())
    }

    /// The CPU the encoders may take: the given budget, else `DEFAULT_ENCODE_SHARE` of the
    /// CPUs the producer threads can use (no more CPUs than there are threads).
    pub fn encode_budget_cpus(&self) -> f64 {
        self.encode_budget.unwrap_or_else(|| {
            let cpus = self
                .housekeeping_cpus()
                .map_or_else(thread::online_cpus, |c| c.len());
            cpus.min(self.producers.max(1)) as f64 * DEFAULT_ENCODE_SHARE
        })
    }

    /// The CPUs left for producers and RTCP when the pacers are isolated.
    pub fn housekeeping_cpus(&self) -> Option<Vec<usize>> {
        let pacers = self.pacer_cpus()?;
        if !self.isolate {
            return None;
        }
        let rest: Vec<usize> = (0..thread::online_cpus())
            .filter(|c| !pacers.contains(c))
            .collect();
        (!rest.is_empty()).then_some(rest)
    }
}

pub(super) fn core_config(cfg: &ServerConfig, i: usize, policy: Policy) -> CoreConfig {
    let rt_policy = match cfg.rt {
        // A thread that never sleeps would run into RT throttling under SCHED_FIFO (stopped
        // ~50 ms each second); as an ordinary thread it keeps its core.
        CoreRt::Auto if cfg.wait == WaitPolicy::BusyPoll => RtPolicy::Other,
        CoreRt::Auto => RtPolicy::Auto,
        CoreRt::Fifo => RtPolicy::Fifo {
            priority: RtPolicy::DEFAULT_FIFO_PRIORITY,
        },
        CoreRt::Off => RtPolicy::Other,
        // Starts small; grows as streams are admitted (see `Inner::grow_deadline_budget`).
        CoreRt::Deadline => deadline_policy(0.0),
    };
    // Under SCHED_DEADLINE the budget, not the load, decides: no switching to busy-polling.
    let wait = match (cfg.wait, cfg.rt) {
        (WaitPolicy::Auto, CoreRt::Deadline) => WaitPolicy::SleepSpin,
        (w, _) => w,
    };
    let derived = PacingThreadConfig {
        rt_policy,
        wait,
        waiter: WaiterConfig {
            quantile: 1.0,
            ..WaiterConfig::default()
        },
        wait_selector: WaitSelectorConfig::default(),
        // SCHED_DEADLINE refuses threads pinned to a subset of CPUs.
        cpu: cfg.pacer_cpus().and_then(|c| c.get(i).copied()),
        lock_memory: cfg.lock_memory,
    };
    CoreConfig {
        policy,
        thread: cfg.pacer_thread.unwrap_or(derived),
        capacity: cfg.streams_per_core,
    }
}

/// The SCHED_DEADLINE reservation of a core whose admitted streams use `utilisation` of it: a
/// 1 ms period, twice the admitted share (the pacer also spins before each release), at least
/// 100 µs, at most 95%.
pub(crate) fn deadline_policy(utilisation: f64) -> RtPolicy {
    let period = Duration::from_millis(1);
    let share = (utilisation * 2.0).clamp(0.1, 0.95);
    RtPolicy::Deadline {
        runtime: period.mul_f64(share),
        deadline: period,
        period,
    }
}
