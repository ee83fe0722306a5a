//! Random bytes from the kernel (getrandom(2)): RTSP session ids, the control API's token.

use std::io;

/// `N` bytes from the kernel's random number generator; `what` names their use in the error.
pub fn os_random<const N: usize>(what: &str) -> io::Result<[u8; N]> {
    let mut key = [0u8; N];
    let mut filled = 0;
    while filled < key.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `key`, which lives
        // across the call.
        let n =
            unsafe { libc::getrandom(key[filled..].as_mut_ptr().cast(), key.len() - filled, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io::Error::new(
                e.kind(),
                format!("cannot read random bytes for {what}: {e}"),
            ));
        }
        filled += n as usize;
    }
    Ok(key)
}
