//! The run's clocks: the only place in Metronome that reads the system time.
//!
//! A [`Clock`] is created once per run. It fixes the run's epoch (CLOCK_MONOTONIC at creation is
//! `Timestamp::ZERO`) and samples the offset between CLOCK_REALTIME and CLOCK_MONOTONIC, so that
//! kernel receive timestamps (SO_TIMESTAMPNS, which are CLOCK_REALTIME) can be placed on the run's
//! monotonic time line.
//!
//! Every read is one `clock_gettime` call, served by the vDSO (tens of nanoseconds, no syscall).
//! `Clock` is `Copy` and `Send + Sync`: hand a copy to every thread of the run.

use metronome_time::{NtpTime, Timestamp};

/// Reads `clk` in nanoseconds. CLOCK_MONOTONIC and CLOCK_REALTIME cannot fail on Linux with a valid
/// pointer (EINVAL/EFAULT are impossible here), so the result is used without a check.
fn read_ns(clk: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock ids are constants the kernel knows.
    unsafe { libc::clock_gettime(clk, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Raw CLOCK_MONOTONIC in nanoseconds (the time base of [`crate::wait::Waiter`]).
pub fn mono_ns() -> u64 {
    read_ns(libc::CLOCK_MONOTONIC)
}

/// Raw CLOCK_REALTIME in nanoseconds since the Unix epoch.
pub fn realtime_ns() -> u64 {
    read_ns(libc::CLOCK_REALTIME)
}

/// CPU time of the calling thread, in seconds.
pub fn thread_cpu_s() -> f64 {
    thread_cpu_ns() as f64 / 1e9
}

/// CPU time of the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    read_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process (all threads), in seconds.
pub fn process_cpu_s() -> f64 {
    read_ns(libc::CLOCK_PROCESS_CPUTIME_ID) as f64 / 1e9
}

/// The run's clock: monotonic time since the run's epoch, and wall-clock time.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// CLOCK_MONOTONIC at creation: the run's `Timestamp::ZERO`.
    epoch_mono_ns: u64,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, sampled at creation.
    realtime_minus_mono_ns: i128,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// Starts the run's clock: now is `Timestamp::ZERO`.
    ///
    /// The REALTIME−MONOTONIC offset is taken from the tightest of a few (mono, real, mono)
    /// samples, so it is exact to within the cost of one clock read (well under 1 µs).
    pub fn new() -> Self {
        let mut best_gap = u64::MAX;
        let mut offset = 0i128;
        let mut epoch = 0u64;
        for _ in 0..5 {
            let m0 = mono_ns();
            let r = realtime_ns();
            let m1 = mono_ns();
            let gap = m1.saturating_sub(m0);
            if gap < best_gap {
                best_gap = gap;
                let mid = m0 + gap / 2;
                offset = r as i128 - mid as i128;
                epoch = m1;
            }
        }
        Clock {
            epoch_mono_ns: epoch,
            realtime_minus_mono_ns: offset,
        }
    }

    /// Monotonic time since the run's epoch.
    pub fn now(&self) -> Timestamp {
        self.timestamp_from_mono_ns(mono_ns())
    }

    /// Wall-clock time as NTP time (for RTCP sender reports, RFC 3550 §6.4.1).
    pub fn wall(&self) -> NtpTime {
        NtpTime::from_unix_nanos(realtime_ns())
    }

    /// Wall-clock time in nanoseconds since the Unix epoch.
    pub fn realtime_ns(&self) -> u64 {
        realtime_ns()
    }

    /// Raw CLOCK_MONOTONIC in nanoseconds (not relative to the epoch): the waiter's time base.
    pub fn mono_ns(&self) -> u64 {
        mono_ns()
    }

    /// CLOCK_MONOTONIC of the run's epoch.
    pub fn epoch_mono_ns(&self) -> u64 {
        self.epoch_mono_ns
    }

    /// CLOCK_REALTIME − CLOCK_MONOTONIC as sampled at creation, in nanoseconds.
    pub fn realtime_offset_ns(&self) -> i128 {
        self.realtime_minus_mono_ns
    }

    /// The wall-clock time (CLOCK_REALTIME ns) of run time `t`: the inverse of
    /// [`Clock::timestamp_from_realtime_ns`].
    pub fn realtime_ns_from_timestamp(&self, t: Timestamp) -> u64 {
        let ns = self.mono_ns_from_timestamp(t) as i128 + self.realtime_minus_mono_ns;
        ns.clamp(0, u64::MAX as i128) as u64
    }

    /// A raw CLOCK_MONOTONIC reading as a run timestamp (zero if before the epoch).
    pub fn timestamp_from_mono_ns(&self, mono_ns: u64) -> Timestamp {
        Timestamp::from_nanos(mono_ns.saturating_sub(self.epoch_mono_ns))
    }

    /// A run timestamp as raw CLOCK_MONOTONIC, e.g. to turn a release time into a waiter deadline.
    pub fn mono_ns_from_timestamp(&self, t: Timestamp) -> u64 {
        self.epoch_mono_ns.saturating_add(t.as_nanos())
    }

    /// A CLOCK_REALTIME reading (such as a kernel SO_TIMESTAMPNS receive timestamp) as a run
    /// timestamp (zero if before the epoch).
    ///
    /// Caveat: the REALTIME−MONOTONIC offset is the one sampled at creation. NTP slewing does not
    /// move it (Linux slews CLOCK_MONOTONIC with CLOCK_REALTIME; only CLOCK_MONOTONIC_RAW is
    /// left alone), but if the wall clock is stepped during the run (settimeofday, an NTP step,
    /// a virtual machine's clock set by its host), converted times are off by the step. Where
    /// that matters, compare kernel timestamps with [`Clock::realtime_ns`] readings rather than
    /// with [`Clock::now`], or create a new `Clock` per run.
    pub fn timestamp_from_realtime_ns(&self, realtime_ns: u64) -> Timestamp {
        let mono = realtime_ns as i128 - self.realtime_minus_mono_ns;
        let since_epoch = mono - self.epoch_mono_ns as i128;
        Timestamp::from_nanos(since_epoch.clamp(0, u64::MAX as i128) as u64)
    }

    /// The run time and wall-clock time of a datagram's arrival: the kernel's receive timestamp
    /// when the socket gave one (SO_TIMESTAMPNS), else the clocks read now.
    pub fn arrival(&self, kernel_rx_realtime_ns: Option<u64>) -> (Timestamp, NtpTime) {
        match kernel_rx_realtime_ns {
            Some(ns) => (
                self.timestamp_from_realtime_ns(ns),
                NtpTime::from_unix_nanos(ns),
            ),
            None => (self.now(), self.wall()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_monotonic_and_starts_near_zero() {
        let c = Clock::new();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        assert!(a.as_nanos() < 1_000_000_000, "epoch is creation: {a}");
    }

    #[test]
    fn realtime_converts_to_now() {
        // The conversion is right if some pair of back-to-back reads agrees closely; taking the
        // tightest of several keeps a preemption between two reads from failing the test.
        let c = Clock::new();
        let diff = (0..20)
            .map(|_| {
                let t_real = c.timestamp_from_realtime_ns(c.realtime_ns());
                c.now().signed_nanos_since(t_real).abs()
            })
            .min()
            .unwrap();
        assert!(
            diff < 1_000_000,
            "REALTIME and MONOTONIC disagree by {diff} ns"
        );
    }

    #[test]
    fn mono_round_trip_and_saturation() {
        let c = Clock::new();
        let t = Timestamp::from_millis(1500);
        assert_eq!(c.timestamp_from_mono_ns(c.mono_ns_from_timestamp(t)), t);
        assert_eq!(c.timestamp_from_mono_ns(0), Timestamp::ZERO);
        assert_eq!(c.timestamp_from_realtime_ns(0), Timestamp::ZERO);
        let wall = c.wall().to_unix_nanos();
        assert!(wall.abs_diff(c.realtime_ns()) < 1_000_000_000);
    }
}
