//! Advisory locks on single bytes of a file (POSIX record locks, `fcntl(F_SETLK)`): the node
//! cache's claims, one byte per entry name.
//!
//! Python's `fcntl.lockf` makes the same call but lets go of the GIL around it, and taking the
//! GIL back on the event loop's thread waits out any busy Python thread's switch interval (5 ms):
//! measured, a cold epoch through the node cache spent milliseconds per sample there. A
//! non-blocking lock is one system call of about a microsecond, so these run holding the GIL.
//!
//! The locks belong to the process (the kernel drops them when it dies, and closing any handle
//! on the file drops them all): callers keep one handle per file and process.

use std::io;
use std::os::fd::RawFd;

/// One byte at `offset`, as an `flock` record for `fcntl` (`kind`: `F_WRLCK` or `F_UNLCK`).
fn record(offset: u64, kind: libc::c_short) -> io::Result<libc::flock> {
    let start = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "lock offset past the file's largest offset"))?;
    // SAFETY: `flock` is a plain C struct of integers; all-zero is a valid value of each field,
    // and the fields that matter are set below.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = start;
    lock.l_len = 1;
    Ok(lock)
}

fn set(handle: RawFd, lock: &libc::flock) -> io::Result<()> {
    // SAFETY: `F_SETLK` reads one `flock` through the pointer, which points to a live,
    // initialized value for the whole call; an invalid `handle` is an `EBADF` error, not
    // undefined behaviour.
    let result = unsafe { libc::fcntl(handle, libc::F_SETLK, lock as *const libc::flock) };
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Whether this process now holds an exclusive lock on the byte at `offset` of `handle`'s file
/// (false: another process holds it). Never waits.
pub fn try_lock_byte(handle: RawFd, offset: u64) -> io::Result<bool> {
    match set(handle, &record(offset, libc::F_WRLCK as libc::c_short)?) {
        Ok(()) => Ok(true),
        Err(error) if matches!(error.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) => Ok(false),
        Err(error) => Err(error),
    }
}

/// Let go of this process's lock on the byte at `offset` (nothing if it holds none).
pub fn unlock_byte(handle: RawFd, offset: u64) -> io::Result<()> {
    set(handle, &record(offset, libc::F_UNLCK as libc::c_short)?)
}

/// `try_lock_byte` for each `(handle, offset)` of `bytes`, in order; on an error other than a
/// holder, the locks this call took are let go of and the error returned. Each byte names its
/// file: a cache spreads its claims over several, as the kernel walks all of one file's locks
/// at every lock and unlock.
pub fn try_lock_bytes(bytes: &[(RawFd, u64)]) -> io::Result<Vec<bool>> {
    let mut taken = Vec::with_capacity(bytes.len());
    for &(handle, offset) in bytes {
        match try_lock_byte(handle, offset) {
            Ok(held) => taken.push(held),
            Err(error) => {
                for (&(handle, offset), _) in bytes.iter().zip(&taken).filter(|(_, held)| **held) {
                    let _ = unlock_byte(handle, offset); // the error to report is the first one
                }
                return Err(error);
            }
        }
    }
    Ok(taken)
}

/// `unlock_byte` for each `(handle, offset)` of `bytes`; every one is tried, the first error
/// returned.
pub fn unlock_bytes(bytes: &[(RawFd, u64)]) -> io::Result<()> {
    let mut first = Ok(());
    for &(handle, offset) in bytes {
        if let Err(error) = unlock_byte(handle, offset) {
            if first.is_ok() {
                first = Err(error);
            }
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::{try_lock_bytes, unlock_bytes};
    use std::os::fd::AsRawFd;

    #[test]
    fn a_byte_locked_by_this_process_can_be_locked_again_and_let_go() {
        let path = std::env::temp_dir().join(format!("stoker-byte-locks-{}", std::process::id()));
        let file = std::fs::File::options().read(true).write(true).create(true).truncate(false).open(&path).unwrap();
        let handle = file.as_raw_fd();
        // POSIX record locks are per process: this process taking its own byte again succeeds.
        assert_eq!(try_lock_bytes(&[(handle, 7), (handle, 1 << 40)]).unwrap(), vec![true, true]);
        assert_eq!(try_lock_bytes(&[(handle, 7)]).unwrap(), vec![true]);
        unlock_bytes(&[(handle, 7), (handle, 1 << 40), (handle, 9)]).unwrap();
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_bad_handle_is_an_error_not_a_holder() {
        assert!(try_lock_bytes(&[(-1, 1)]).is_err());
        assert!(unlock_bytes(&[(-1, 1)]).is_err());
    }
}
