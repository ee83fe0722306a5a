//! Real-time scheduling for the calling thread, memory locking, timer slack and CPU pinning.
//!
//! Every call says what it got: [`make_current_thread_realtime`] never fails, it falls back and
//! returns an [`RtGrant`] whose `description` tells the user what happened and what to do. The
//! others return a [`ThreadError`] whose message names the cause and the remedy.
//!
//! # Which policy for a pacing thread
//!
//! [`RtPolicy::Auto`] tries SCHED_FIFO, then falls back to SCHED_OTHER. It does not try
//! SCHED_DEADLINE, because only the caller knows an honest budget: a pacer that sleeps and then
//! spins before every packet consumes CPU for the spin, and a SCHED_DEADLINE runtime smaller than
//! (packets per period × (spin margin + send time)) makes the kernel throttle the thread in the
//! middle of a period — a stall at every period rather than once a second. SCHED_DEADLINE also
//! refuses a thread pinned to a subset of CPUs (EPERM), and its admission test may refuse a large
//! budget (EBUSY). Request it with [`RtPolicy::Deadline`] when the budget is known.
//!
//! With SCHED_FIFO, mind RT throttling: with the default `sched_rt_runtime_us` of 950000 per
//! 1000000, a FIFO thread that spins more than 95 % of a second is stopped for the rest of it
//! (~50 ms). The pacer must leave the CPU between packets (sleep-then-spin with a margin well below
//! the packet gap), or the administrator must write -1 to /proc/sys/kernel/sched_rt_runtime_us.
//! [`rt_throttling`] reports the setting and the grant's description includes it.

use std::fmt;
use std::io;
use std::time::Duration;

/// `SCHED_RESET_ON_FORK`, or-ed into the policy: children of an RT thread start as SCHED_OTHER.
const SCHED_RESET_ON_FORK: libc::c_int = 0x4000_0000;

/// What to ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtPolicy {
    /// SCHED_FIFO at [`RtPolicy::DEFAULT_FIFO_PRIORITY`], else SCHED_OTHER.
    Auto,
    /// SCHED_DEADLINE: `runtime` of CPU every `period`, to be received before `deadline` (relative
    /// to the period start). Requires runtime ≤ deadline ≤ period and runtime ≥ 1.024 µs.
    Deadline {
        /// CPU time the thread may use in each period (the kernel's `sched_runtime`).
        runtime: Duration,
        /// How soon after each period's start the runtime must have been received
        /// (`sched_deadline`).
        deadline: Duration,
        /// Length of one reservation period (`sched_period`).
        period: Duration,
    },
    /// SCHED_FIFO at this priority (1..=99); falls back to SCHED_OTHER if refused.
    Fifo {
        /// Real-time priority, 1 (lowest) to 99 (highest); values outside are clamped.
        priority: u8,
    },
    /// Leave the thread under SCHED_OTHER (resets an RT policy set earlier).
    Other,
}

impl RtPolicy {
    /// High enough to preempt ordinary RT daemons and threaded IRQs (50), below the kernel's
    /// watchdog and migration threads (99).
    pub const DEFAULT_FIFO_PRIORITY: u8 = 80;
}

/// The scheduling policy a thread actually runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granted {
    /// SCHED_DEADLINE with the reservation asked for (the kernel grants it whole or not at all).
    Deadline {
        /// CPU time reserved in each period.
        runtime: Duration,
        /// Time from each period's start by which the runtime is received.
        deadline: Duration,
        /// Length of one reservation period.
        period: Duration,
    },
    /// SCHED_FIFO.
    Fifo {
        /// The priority in effect, 1..=99 (the one asked for, clamped to that range).
        priority: u8,
    },
    /// SCHED_OTHER, the ordinary time-sharing policy: what was asked for, or the fallback
    /// after a refusal (the grant's description says which).
    Other,
}

/// The outcome of [`make_current_thread_realtime`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtGrant {
    /// The policy the thread runs under now.
    pub granted: Granted,
    /// For people: what was granted, what was refused and why, and the RT throttling setting.
    pub description: String,
}

impl fmt::Display for RtGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description)
    }
}

impl RtGrant {
    /// The grant as machine output gives it.
    pub fn view(&self) -> GrantView {
        let us = |d: Duration| Some(metronome_time::Micros::from(d));
        let (policy, priority, runtime_us, deadline_us, period_us) = match self.granted {
            Granted::Deadline {
                runtime,
                deadline,
                period,
            } => (
                Policy::Deadline,
                None,
                us(runtime),
                us(deadline),
                us(period),
            ),
            Granted::Fifo { priority } => (Policy::Fifo, Some(priority), None, None, None),
            Granted::Other => (Policy::Other, None, None, None, None),
        };
        GrantView {
            policy,
            priority,
            runtime_us,
            deadline_us,
            period_us,
            note: self.description.clone(),
        }
    }
}

/// A scheduling policy a thread runs under, as JSON spells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// SCHED_DEADLINE.
    Deadline,
    /// SCHED_FIFO.
    Fifo,
    /// SCHED_OTHER: asked for, or what a refusal fell back to.
    #[default]
    Other,
}

/// What a thread was granted, for machine output: the policy and its parameters, and in
/// words what was asked, refused and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct GrantView {
    /// The policy it runs under.
    pub policy: Policy,
    /// SCHED_FIFO's priority, 1..=99; absent under the other policies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// SCHED_DEADLINE's runtime in each period; absent under the other policies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_us: Option<metronome_time::Micros>,
    /// SCHED_DEADLINE's deadline from each period's start; absent under the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_us: Option<metronome_time::Micros>,
    /// SCHED_DEADLINE's period; absent under the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_us: Option<metronome_time::Micros>,
    /// For people: what was granted, what was refused and why, the RT throttling setting.
    pub note: String,
}

impl fmt::Display for GrantView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.note)
    }
}

impl GrantView {
    /// This grant, its note prefixed with `context` (`shared pacing core 0: …`).
    pub fn within(&self, context: &str) -> GrantView {
        GrantView {
            note: format!("{context}: {}", self.note),
            ..self.clone()
        }
    }
}

/// Whether a thread's memory is locked in RAM, as JSON spells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryState {
    /// Locked (`mlockall`).
    Locked,
    /// Asked for and refused (`reason` says why).
    NotLocked,
    /// Not asked for.
    #[default]
    NotRequested,
    /// A stream on a shared pacing core: as its core's.
    AsCore,
}

/// Whether a thread's memory is locked, and why not if refused.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct MemoryLock {
    /// Locked, refused, not asked for, or as its core's.
    pub state: MemoryState,
    /// Why locking was refused (with `not-locked`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl MemoryLock {
    /// A state with no reason.
    pub fn of(state: MemoryState) -> MemoryLock {
        MemoryLock {
            state,
            reason: None,
        }
    }
}

impl fmt::Display for MemoryLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.state {
            MemoryState::Locked => f.write_str("locked"),
            MemoryState::NotLocked => {
                write!(f, "not locked: {}", self.reason.as_deref().unwrap_or(""))
            }
            MemoryState::NotRequested => f.write_str("not requested"),
            MemoryState::AsCore => f.write_str("as its core's"),
        }
    }
}

/// Switches the calling thread to `policy`, falling back to SCHED_OTHER when refused.
///
/// RT policies are set with reset-on-fork, so threads and processes spawned from an RT thread start
/// as SCHED_OTHER (SCHED_DEADLINE threads could not fork otherwise).
pub fn make_current_thread_realtime(policy: RtPolicy) -> RtGrant {
    let throttle = rt_throttling();
    let (granted, mut description) = match policy {
        RtPolicy::Other => match set_other() {
            Ok(()) => (Granted::Other, "SCHED_OTHER (as requested)".to_string()),
            Err(e) => (
                Granted::Other,
                format!("SCHED_OTHER: could not reset the policy: {e}"),
            ),
        },
        RtPolicy::Auto => try_fifo(RtPolicy::DEFAULT_FIFO_PRIORITY),
        RtPolicy::Fifo { priority } => try_fifo(priority),
        RtPolicy::Deadline {
            runtime,
            deadline,
            period,
        } => match set_deadline(runtime, deadline, period) {
            Ok(()) => (
                Granted::Deadline {
                    runtime,
                    deadline,
                    period,
                },
                format!(
                    "SCHED_DEADLINE runtime {runtime:?} deadline {deadline:?} period {period:?}"
                ),
            ),
            Err(why) => (
                Granted::Other,
                format!("SCHED_OTHER: SCHED_DEADLINE refused ({why})"),
            ),
        },
    };
    if matches!(granted, Granted::Fifo { .. }) {
        description.push_str("; ");
        description.push_str(&throttle.to_string());
    }
    RtGrant {
        granted,
        description,
    }
}

/// Makes the calling thread an ordinary (SCHED_OTHER) thread at nice −20: for a thread that spins
/// the whole way. It cannot be real-time (RT throttling would stop it ~50 ms each second), and at
/// nice 0 the fair scheduler would preempt it for other threads on its core for milliseconds; at
/// −20 its weight is ~87 times theirs. Returns whether the kernel agreed (it needs root or
/// CAP_SYS_NICE; without, the thread stays at its nice value). Allocates nothing.
pub fn spin_at_top_nice() -> bool {
    let mut attr = sched_attr(libc::SCHED_OTHER as u32, 0, 0, 0);
    attr.sched_nice = -20;
    sched_setattr(&attr).is_ok()
}

/// Switches the calling thread's policy without describing it or reading /proc: for a pacing
/// thread that changes mode mid-stream. Returns whether the kernel agreed. Allocates nothing when
/// it does.
pub fn switch_policy(policy: RtPolicy) -> bool {
    match policy {
        RtPolicy::Other => set_other().is_ok(),
        RtPolicy::Auto => set_fifo(RtPolicy::DEFAULT_FIFO_PRIORITY).is_ok(),
        RtPolicy::Fifo { priority } => set_fifo(priority.clamp(1, 99)).is_ok(),
        RtPolicy::Deadline {
            runtime,
            deadline,
            period,
        } => set_deadline(runtime, deadline, period).is_ok(),
    }
}

fn try_fifo(priority: u8) -> (Granted, String) {
    let prio = priority.clamp(1, 99);
    match set_fifo(prio) {
        Ok(()) => (
            Granted::Fifo { priority: prio },
            format!("SCHED_FIFO priority {prio}"),
        ),
        Err(e) => (
            Granted::Other,
            format!(
                "SCHED_OTHER: SCHED_FIFO refused ({})",
                explain_sched_error(&e)
            ),
        ),
    }
}

fn set_fifo(priority: u8) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority as libc::c_int,
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | SCHED_RESET_ON_FORK, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn set_other() -> io::Result<()> {
    let attr = sched_attr(libc::SCHED_OTHER as u32, 0, 0, 0);
    sched_setattr(&attr)
}

/// Changes the SCHED_DEADLINE reservation of another thread (by kernel thread id), so that the
/// kernel's admission control judges the new budget. Only `RtPolicy::Deadline` is accepted.
pub fn set_deadline_of(tid: libc::pid_t, policy: RtPolicy) -> Result<(), String> {
    let RtPolicy::Deadline {
        runtime,
        deadline,
        period,
    } = policy
    else {
        return Err("not a SCHED_DEADLINE policy".into());
    };
    set_deadline_for(tid, runtime, deadline, period)
}

fn set_deadline(runtime: Duration, deadline: Duration, period: Duration) -> Result<(), String> {
    set_deadline_for(0, runtime, deadline, period)
}

fn set_deadline_for(
    tid: libc::pid_t,
    runtime: Duration,
    deadline: Duration,
    period: Duration,
) -> Result<(), String> {
    if runtime < Duration::from_nanos(1024) || runtime > deadline || deadline > period {
        return Err(format!(
            "invalid parameters runtime {runtime:?} deadline {deadline:?} period {period:?}: \
             need 1.024 µs ≤ runtime ≤ deadline ≤ period"
        ));
    }
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let mut attr = sched_attr(
        libc::SCHED_DEADLINE as u32,
        ns(runtime),
        ns(deadline),
        ns(period),
    );
    attr.sched_flags = libc::SCHED_FLAG_RESET_ON_FORK as u64;
    sched_setattr_of(tid, &attr).map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) => format!(
            "EBUSY: admission control refused {:.1} % of a CPU; lower the runtime or raise the period",
            ns(runtime) as f64 * 100.0 / ns(period) as f64
        ),
        Some(libc::EPERM) => "EPERM: needs root or CAP_SYS_NICE, and a thread not pinned to a \
                              subset of CPUs (SCHED_DEADLINE refuses restricted affinity)"
            .to_string(),
        _ => explain_sched_error(&e),
    })
}

fn sched_attr(policy: u32, runtime: u64, deadline: u64, period: u64) -> libc::sched_attr {
    libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: policy,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: runtime,
        sched_deadline: deadline,
        sched_period: period,
    }
}

/// `sched_setattr(2)` on the calling thread.
fn sched_setattr(attr: &libc::sched_attr) -> io::Result<()> {
    sched_setattr_of(0, attr)
}

/// `sched_setattr(2)` on thread `tid` (0: the caller): glibc has no wrapper, so the raw syscall.
fn sched_setattr_of(tid: libc::pid_t, attr: &libc::sched_attr) -> io::Result<()> {
    // SAFETY: `attr` is a valid sched_attr whose `size` field is its own size; flags 0; the
    // kernel checks `tid`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid,
            attr as *const libc::sched_attr,
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn explain_sched_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) => "EPERM: run as root or grant CAP_SYS_NICE \
                              (setcap cap_sys_nice+ep, or an RLIMIT_RTPRIO limit in limits.conf)"
            .to_string(),
        Some(libc::EINVAL) => "EINVAL: parameters out of range for this kernel".to_string(),
        Some(libc::ENOSYS) => "ENOSYS: the kernel lacks this policy".to_string(),
        _ => e.to_string(),
    }
}

/// The kernel's real-time throttling setting (/proc/sys/kernel/sched_rt_{runtime,period}_us).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtThrottling {
    /// `None` when unreadable; `Some(-1)` when throttling is off.
    pub runtime_us: Option<i64>,
    /// `sched_rt_period_us`: the window, in µs, within which real-time threads may run at most
    /// `runtime_us` (1 000 000 by default); `None` when unreadable.
    pub period_us: Option<i64>,
}

impl RtThrottling {
    /// Longest stall a thread that spins all the time may see once per period, if throttled.
    pub fn stall_per_period(&self) -> Option<Duration> {
        match (self.runtime_us, self.period_us) {
            (Some(r), Some(p)) if r >= 0 && p > r => Some(Duration::from_micros((p - r) as u64)),
            _ => None,
        }
    }
}

impl fmt::Display for RtThrottling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.runtime_us, self.period_us) {
            (Some(-1), _) => f.write_str("RT throttling off (sched_rt_runtime_us = -1)"),
            (Some(r), Some(p)) => match self.stall_per_period() {
                Some(stall) => write!(
                    f,
                    "RT throttling on ({r}/{p} µs): a thread spinning without a break is stopped \
                     {:.0} ms each {:.0} ms; leave the CPU between packets, or write -1 to \
                     /proc/sys/kernel/sched_rt_runtime_us",
                    stall.as_secs_f64() * 1e3,
                    p as f64 / 1e3
                ),
                None => write!(f, "RT throttling {r}/{p} µs (no stall)"),
            },
            _ => f.write_str("RT throttling setting unknown (/proc/sys/kernel unreadable)"),
        }
    }
}

/// Reads the RT throttling setting.
pub fn rt_throttling() -> RtThrottling {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
    };
    RtThrottling {
        runtime_us: read("/proc/sys/kernel/sched_rt_runtime_us"),
        period_us: read("/proc/sys/kernel/sched_rt_period_us"),
    }
}

/// Why a thread or process setting could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ThreadError {
    /// `mlockall` failed (usually EPERM or ENOMEM: no CAP_IPC_LOCK and too low an
    /// RLIMIT_MEMLOCK); the process runs on with its memory unlocked, open to page faults.
    #[error("cannot lock memory (mlockall): {0}; run as root, grant CAP_IPC_LOCK, or raise RLIMIT_MEMLOCK (ulimit -l unlimited)")]
    LockMemory(io::Error),
    /// `prctl(PR_SET_TIMERSLACK)` refused; the thread keeps its previous slack.
    #[error("cannot set timer slack to {ns} ns (prctl PR_SET_TIMERSLACK): {source}")]
    TimerSlack {
        /// The slack asked for, in ns.
        ns: u64,
        /// The kernel's error.
        source: io::Error,
    },
    /// The CPU affinity could not be set: a CPU number past the online CPUs, or the kernel
    /// refused (offline CPU, cpuset, or a SCHED_DEADLINE thread); the affinity is unchanged.
    #[error("cannot pin to CPU {cpu}: {reason}")]
    Pin {
        /// The CPU at fault: the first out-of-range one, or the first one asked for when the
        /// kernel refused the whole set.
        cpu: usize,
        /// The kernel's error or the range of valid CPUs, with the remedy.
        reason: String,
    },
}

/// Whether a pacing thread locked memory: rings made after that lock their own slots.
static MEMORY_LOCKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Locks the process's current pages in RAM (`mlockall(MCL_CURRENT | MCL_ONFAULT)`): the
/// pacing thread's stack, the code, the rings and sessions made so far, so the pacing thread
/// never waits for a page fault on them. A page of the current mappings that has never been
/// touched is locked when it first is (`MCL_ONFAULT`, Linux 4.4): the libraries the process
/// maps and never uses (FFmpeg's and theirs map hundreds of MB) are not read in and pinned.
/// Memory mapped later is not pinned (`MCL_FUTURE` would pin every control-plane thread's
/// stack and buffer too: megabytes per RTSP connection); a ring made later locks its own
/// slots ([`lock_region`], see `PacketRing::new`).
pub fn lock_memory() -> Result<(), ThreadError> {
    // SAFETY: mlockall takes flags only.
    let mut r = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_ONFAULT) };
    if r != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // A kernel before 4.4: every current page, read in now.
        // SAFETY: as above.
        r = unsafe { libc::mlockall(libc::MCL_CURRENT) };
    }
    if r == 0 {
        MEMORY_LOCKED.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    } else {
        Err(ThreadError::LockMemory(io::Error::last_os_error()))
    }
}

/// Whether [`lock_memory`] succeeded in this process.
pub fn memory_locked() -> bool {
    MEMORY_LOCKED.load(std::sync::atomic::Ordering::Acquire)
}

/// Locks the pages of `bytes` in RAM (best effort: a failure leaves them unlocked).
pub fn lock_region(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return true;
    }
    // SAFETY: mlock reads no memory; it takes any address range the process maps, and the
    // slice is mapped for its whole length.
    unsafe { libc::mlock(bytes.as_ptr().cast(), bytes.len()) == 0 }
}

/// Sets the calling thread's timer slack (default 50 µs, which delays every ordinary sleep).
/// 1 ns is the smallest: 0 would mean "reset to the default".
pub fn set_timer_slack_ns(ns: u64) -> Result<(), ThreadError> {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long; the rest are ignored.
    let r = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(ThreadError::TimerSlack {
            ns,
            source: io::Error::last_os_error(),
        })
    }
}

/// The calling thread's timer slack in nanoseconds.
pub fn timer_slack_ns() -> u64 {
    // SAFETY: PR_GET_TIMERSLACK takes no arguments and returns the slack.
    unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) as u64 }
}

/// Pins the calling thread to one CPU. Do this before asking for SCHED_FIFO; SCHED_DEADLINE
/// refuses pinned threads.
pub fn pin_to_cpu(cpu: usize) -> Result<(), ThreadError> {
    set_affinity(0, &[cpu])
}

/// Restricts thread or process `pid` (0: the calling thread) to `cpus`.
pub fn set_affinity(pid: libc::pid_t, cpus: &[usize]) -> Result<(), ThreadError> {
    let online = online_cpus();
    let first = cpus.first().copied().unwrap_or(0);
    if let Some(&cpu) = cpus
        .iter()
        .find(|&&c| c >= libc::CPU_SETSIZE as usize || c >= online)
        .or(cpus.is_empty().then_some(&0))
    {
        return Err(ThreadError::Pin {
            cpu,
            reason: format!("this machine has CPUs 0..={}", online.saturating_sub(1)),
        });
    }
    // SAFETY: cpu_set_t is plain data; every CPU_SET index is in range (checked above); the
    // kernel checks `pid`.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    let reason = match e.raw_os_error() {
        Some(libc::EBUSY) | Some(libc::EPERM) => format!(
            "{e}; a SCHED_DEADLINE thread cannot be pinned (pin first, then use SCHED_FIFO)"
        ),
        Some(libc::EINVAL) => format!("{e}; the CPU is offline or outside this cpuset"),
        _ => e.to_string(),
    };
    Err(ThreadError::Pin { cpu: first, reason })
}

/// Number of online CPUs (at least 1).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf takes a constant name.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as usize
}

/// The calling thread's current policy as reported by the kernel (e.g. `libc::SCHED_FIFO`),
/// without the reset-on-fork bit.
pub fn current_policy() -> libc::c_int {
    // SAFETY: pid 0 is the calling thread.
    unsafe { libc::sched_getscheduler(0) & !SCHED_RESET_ON_FORK }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` in a fresh thread that exits afterwards, so no RT policy leaks into the test runner.
    fn in_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().expect("test thread panicked")
    }

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn fifo_is_granted_or_explained() {
        let (g, pol) = in_thread(|| {
            let g = make_current_thread_realtime(RtPolicy::Fifo { priority: 10 });
            (g, current_policy())
        });
        match g.granted {
            Granted::Fifo { priority } => {
                assert_eq!(priority, 10);
                assert_eq!(pol, libc::SCHED_FIFO);
                assert!(g.description.starts_with("SCHED_FIFO priority 10"), "{g}");
            }
            Granted::Other => {
                assert!(!is_root(), "root was refused: {g}");
                assert!(g.description.contains("refused"), "{g}");
            }
            Granted::Deadline { .. } => panic!("asked for FIFO, got {g}"),
        }
    }

    #[test]
    fn deadline_is_granted_or_explained_and_reset() {
        let (g, pol, after) = in_thread(|| {
            let g = make_current_thread_realtime(RtPolicy::Deadline {
                runtime: Duration::from_micros(100),
                deadline: Duration::from_millis(1),
                period: Duration::from_millis(1),
            });
            let pol = current_policy();
            let back = make_current_thread_realtime(RtPolicy::Other);
            (g, pol, (back.granted, current_policy()))
        });
        if is_root() {
            assert!(matches!(g.granted, Granted::Deadline { .. }), "{g}");
            assert_eq!(pol, libc::SCHED_DEADLINE);
        } else {
            assert!(g.description.contains("refused"), "{g}");
        }
        assert_eq!(after, (Granted::Other, libc::SCHED_OTHER));
    }

    #[test]
    fn deadline_rejects_bad_parameters_without_a_syscall() {
        let g = make_current_thread_realtime(RtPolicy::Deadline {
            runtime: Duration::from_millis(2),
            deadline: Duration::from_millis(1),
            period: Duration::from_millis(1),
        });
        assert_eq!(g.granted, Granted::Other);
        assert!(g.description.contains("invalid parameters"), "{g}");
    }

    #[test]
    fn timer_slack_and_pinning() {
        let (slack, pinned, bad) = in_thread(|| {
            set_timer_slack_ns(1).unwrap();
            (timer_slack_ns(), pin_to_cpu(0).is_ok(), pin_to_cpu(100_000))
        });
        assert_eq!(slack, 1);
        assert!(pinned);
        let msg = bad.unwrap_err().to_string();
        assert!(msg.contains("CPUs 0..="), "{msg}");
    }

    #[test]
    fn memory_locks_or_explains() {
        match lock_memory() {
            // SAFETY: munlockall takes no arguments; undoes the lock for the rest of the tests.
            Ok(()) => assert_eq!(unsafe { libc::munlockall() }, 0),
            Err(e) => {
                assert!(!is_root(), "root could not lock memory: {e}");
                assert!(e.to_string().contains("CAP_IPC_LOCK"));
            }
        }
    }

    #[test]
    fn throttling_is_described() {
        let t = RtThrottling {
            runtime_us: Some(950_000),
            period_us: Some(1_000_000),
        };
        assert_eq!(t.stall_per_period(), Some(Duration::from_millis(50)));
        assert!(t.to_string().contains("stopped 50 ms each 1000 ms"), "{t}");
        let off = RtThrottling {
            runtime_us: Some(-1),
            period_us: Some(1_000_000),
        };
        assert!(off.to_string().contains("off"));
        let _ = rt_throttling().to_string();
    }
}
