//! A named pipe (FIFO) as `-i` input. Opening one for reading blocks until a writer opens the
//! other end, and nothing (SIGTERM, `--duration`) can end that wait. So before the source opens
//! it, [`wait_for_writer`] waits in a loop that can stop: the pipe is opened without blocking
//! and polled until the writer's first bytes are there.

use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long one poll waits, and so how soon a stop is seen.
const POLL: Duration = Duration::from_millis(50);
/// When the user is told the run waits for a writer.
const SAY_AFTER: Duration = Duration::from_secs(1);

/// If `path` is a named pipe, waits until its writer has sent something; returns at once for
/// anything else (the source's own open says what is wrong with it). Fails, with what to do,
/// if `stop` is set or `limit` passes first, or if a writer came and went without a byte.
pub(crate) fn wait_for_writer(
    path: &Path,
    stop: &AtomicBool,
    limit: Option<Duration>,
) -> Result<(), String> {
    let is_fifo = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
    if !is_fifo {
        return Ok(());
    }
    let pipe = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot open the named pipe {}: {e}", path.display()))?;
    let mut waited = Duration::ZERO;
    let mut said = false;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(format!(
                "stopped while waiting for a writer on the named pipe {}: nothing was sent",
                path.display()
            ));
        }
        if limit.is_some_and(|l| waited >= l) {
            return Err(format!(
                "no writer opened the named pipe {} within --duration: nothing was sent; start \
                 the program that writes to it",
                path.display()
            ));
        }
        match poll_in(&pipe, POLL) {
            Ready::Data => return Ok(()),
            Ready::WriterLeft => {
                return Err(format!(
                    "the writer of the named pipe {} closed it without sending anything",
                    path.display()
                ))
            }
            Ready::Nothing => {}
        }
        waited += POLL;
        if !said && waited >= SAY_AFTER {
            said = true;
            eprintln!(
                "metronome: waiting for a writer on the named pipe {}",
                path.display()
            );
        }
    }
}

enum Ready {
    Data,
    WriterLeft,
    Nothing,
}

/// One poll(2) of `pipe` for input, up to `wait`.
fn poll_in(pipe: &std::fs::File, wait: Duration) -> Ready {
    let mut fd = libc::pollfd {
        fd: pipe.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, which lives across the call.
    let n = unsafe { libc::poll(&mut fd, 1, wait.as_millis() as libc::c_int) };
    if n <= 0 {
        return Ready::Nothing;
    }
    if fd.revents & libc::POLLIN != 0 {
        Ready::Data
    } else if fd.revents & libc::POLLHUP != 0 {
        Ready::WriterLeft
    } else {
        Ready::Nothing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn fifo(name: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("metronome-fifo-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        p
    }

    #[test]
    fn a_stop_or_the_duration_ends_the_wait_for_a_writer() {
        let p = fifo("stop");
        let stop = AtomicBool::new(true);
        let e = wait_for_writer(&p, &stop, None).unwrap_err();
        assert!(e.contains("stopped while waiting"), "{e}");
        let go = AtomicBool::new(false);
        let e = wait_for_writer(&p, &go, Some(Duration::from_millis(200))).unwrap_err();
        assert!(e.contains("within --duration"), "{e}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_writers_first_bytes_end_the_wait() {
        let p = fifo("data");
        let q = p.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            let mut w = std::fs::OpenOptions::new().write(true).open(&q).unwrap();
            w.write_all(&[0x47; 188]).unwrap();
            std::thread::sleep(Duration::from_millis(500));
        });
        let go = AtomicBool::new(false);
        wait_for_writer(&p, &go, Some(Duration::from_secs(10))).unwrap();
        writer.join().unwrap();
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn anything_but_a_pipe_passes_at_once() {
        let go = AtomicBool::new(false);
        assert!(wait_for_writer(Path::new("/nonexistent/x.ts"), &go, None).is_ok());
        assert!(wait_for_writer(Path::new("/etc/hostname"), &go, None).is_ok());
    }
}
