//! What Metronome's tests share. Used as a dev-dependency only: an allocation counter,
//! [`TempDir`], [`udp_sink`], and the machine's one real-time slot ([`realtime_slot`]).
//!
//! [`CountingAlloc`] counts the allocations of the current thread, so that a test can show a hot
//! path allocates nothing (tests of other threads running at the same time do not disturb the
//! count). A test binary installs it with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: metronome_testkit::CountingAlloc = metronome_testkit::CountingAlloc;
//! ```
//!
//! and reads [`allocations`] before and after the code under test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting each thread's allocations and reallocations.
pub struct CountingAlloc;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; it only counts.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: `ptr` came from `System` through this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations (and reallocations) made by this thread so far, when [`CountingAlloc`] is the
/// global allocator.
pub fn allocations() -> u64 {
    ALLOCS.with(|c| c.get())
}

/// A fresh directory under the system's temp dir for one test, `metronome-TAG-PID-N` (N counts
/// the directories this process made, so two tests never share one), removed with everything
/// in it when dropped, also when the test fails. Every test's scratch files live in one of
/// these: a suite that leaves files behind fills the disk of the machine that runs it often.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("metronome-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        TempDir(dir)
    }

    /// The same, readable and writable by every user: for peers that drop privileges (VLC
    /// runs as `nobody`).
    pub fn open_to_all(tag: &str) -> TempDir {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new(tag);
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o777))
            .unwrap_or_else(|e| panic!("cannot open {} to all: {e}", dir.0.display()));
        dir
    }

    /// The directory.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

/// A `TempDir` is used as the path it is: `dir.join("out.ts")`, `Command::new(..).arg(&dir)`.
impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for TempDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Receive buffer of [`udp_sink`]: 8 MiB, room for thousands of datagrams.
const SINK_BUFFER: libc::c_int = 8 << 20;

/// A UDP socket on a free loopback port that a test receives on, with a receive buffer large
/// enough (beyond `rmem_max` as root, through SO_RCVBUFFORCE) that a receiving thread the host
/// starves for a while loses nothing: what the code under test delivered is what the test
/// counts. (Seen: a receiver held up 0.2 s under a CPU hog lost 135 datagrams from a 208 KiB
/// default buffer.)
pub fn udp_sink() -> std::net::UdpSocket {
    use std::os::fd::AsRawFd;
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("a free loopback port");
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: setsockopt on an open socket with a pointer to an int and its size.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&SINK_BUFFER as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            break;
        }
    }
    sock
}

/// Runs Debian's `chromium` headless (no GPU, no sandbox, its own profile in `profile`) with
/// `args` on `target` (a URL, or a file path for `file://`), killed after 60 s; its stdout
/// (`--dump-dom`'s DOM). Panics with how to install it if it is missing.
pub fn chromium(profile: &std::path::Path, args: &[&str], target: &str) -> String {
    use std::process::{Command, Stdio};
    let mut child = Command::new("chromium")
        .args(["--headless", "--disable-gpu", "--no-sandbox", "--no-first-run"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(target)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run chromium ({e}): install it with `apt-get install chromium` (scripts/test.sh does)")
        });
    let out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || std::io::read_to_string(out).unwrap_or_default());
    for _ in 0..600 {
        if child.try_wait().ok().flatten().is_some() {
            return reader.join().unwrap_or_default();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("chromium did not finish within 60 s");
}

/// The machine's one real-time slot, held: see [`realtime_slot`]. Released when dropped.
pub struct RealtimeSlot {
    _here: std::sync::MutexGuard<'static, ()>,
    /// The directory whose `flock` is the slot between processes (closing it unlocks).
    _machine: std::fs::File,
}

/// Waits for, then holds, the machine's one real-time slot: tests whose programs each run live
/// media (servers whose pacers share the last CPU, encoders, relays, players in real time) take
/// turns, since two at once on a 2-core machine (one of them busy, as CI's is) measure the
/// machine, not the programs. The slot is one for the test binary (a mutex) and one for every
/// test binary of the workspace (`flock` on `dir`, which exists: pass
/// `env!("CARGO_TARGET_TMPDIR")`), since the suite (`scripts/run-tests.sh`) runs some binaries
/// side by side. Nothing is created, so nothing is left behind.
pub fn realtime_slot(dir: &str) -> RealtimeSlot {
    use std::os::fd::AsRawFd;
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let here = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let machine = std::fs::File::open(dir)
        .unwrap_or_else(|e| panic!("{dir}, the real-time slot's directory: {e}"));
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(machine.as_raw_fd(), libc::LOCK_EX) } == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        assert!(
            e.kind() == std::io::ErrorKind::Interrupted,
            "flock {dir}: {e}"
        );
    }
    RealtimeSlot {
        _here: here,
        _machine: machine,
    }
}
