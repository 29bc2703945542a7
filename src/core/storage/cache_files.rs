//! The node cache's files, opened, made and removed relative to its folder's descriptor, never
//! through a link: `openat` with `O_NOFOLLOW`, `unlinkat`, `renameat`. The Python side opened and
//! checked the folder once (`stoker._bounded.private_folder`) and hands over its descriptor; a
//! link planted in the folder is an error here, never followed, and a name is removed only when
//! the store names it (its own files, and the LMDB files an earlier stoker made).
//!
//! Reads and writes are positional (`pread`, `pwritev`) into buffers whose sizes the caller
//! checked against the file's own size: nothing is mapped, so no byte of a file can make a read
//! touch memory outside a buffer.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Slices one `preadv`/`pwritev` call takes at most (Linux's `IOV_MAX`).
const MOST_SLICES: usize = 1024;

/// A folder worked on through its descriptor (owned: a duplicate of the one handed over).
#[derive(Debug)]
pub struct Folder {
    descriptor: OwnedFd,
}

fn checked(result: libc::c_int) -> io::Result<libc::c_int> {
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

fn c_name(name: &str) -> io::Result<CString> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{name:?}: one name in the folder, not a path")));
    }
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a name with a NUL byte"))
}

impl Folder {
    /// A folder of its own for `descriptor` (duplicated, close-on-exec), which must be a folder's.
    pub fn from_descriptor(descriptor: RawFd) -> io::Result<Folder> {
        // SAFETY: F_DUPFD_CLOEXEC takes an integer argument and returns a new descriptor or -1;
        // an invalid `descriptor` is EBADF, not undefined behaviour.
        let duplicate = checked(unsafe { libc::fcntl(descriptor, libc::F_DUPFD_CLOEXEC, 0) })?;
        // SAFETY: `duplicate` was just returned by fcntl and is owned by nothing else.
        let descriptor = unsafe { OwnedFd::from_raw_fd(duplicate) };
        let folder = Folder { descriptor };
        let status = fstat(folder.descriptor.as_raw_fd())?;
        if status.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a folder's descriptor"));
        }
        Ok(folder)
    }

    /// The regular file `name`, opened for reading (and writing with `write`; made, mode 0600,
    /// with `create`). A link at `name` is an error (ELOOP), never followed; a FIFO or device
    /// is an error too, and never blocks the open.
    pub fn open(&self, name: &str, write: bool, create: bool) -> io::Result<File> {
        let mut flags = libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
        flags |= if write { libc::O_RDWR } else { libc::O_RDONLY };
        if create {
            flags |= libc::O_CREAT;
        }
        self.open_with(name, flags)
    }

    /// A new, empty file `name` (mode 0600, read and write): whatever was at `name` before is
    /// removed first (the name itself: a link's target is never touched).
    pub fn create_new(&self, name: &str) -> io::Result<File> {
        self.remove(name)?;
        self.open_with(name, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
    }

    fn open_with(&self, name: &str, flags: libc::c_int) -> io::Result<File> {
        let name = c_name(name)?;
        // SAFETY: `name` is a NUL-terminated string alive for the call; openat returns a new
        // descriptor or -1.
        let raw = checked(unsafe { libc::openat(self.descriptor.as_raw_fd(), name.as_ptr(), flags, 0o600 as libc::c_uint) })?;
        // SAFETY: `raw` was just returned by openat and is owned by nothing else.
        let file = unsafe { File::from_raw_fd(raw) };
        let status = fstat(raw)?;
        if status.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{}: not a regular file", name.to_string_lossy())));
        }
        // SAFETY: F_GETFL and F_SETFL with an integer argument, on a descriptor this function
        // owns: reads and writes block again (the open did not, whatever was at the name).
        let status_flags = checked(unsafe { libc::fcntl(raw, libc::F_GETFL) })?;
        // SAFETY: as above.
        checked(unsafe { libc::fcntl(raw, libc::F_SETFL, status_flags & !libc::O_NONBLOCK) })?;
        Ok(file)
    }

    /// Remove the file or link `name` (never a folder, never what a link points to). Returns
    /// whether something was removed.
    pub fn remove(&self, name: &str) -> io::Result<bool> {
        let name = c_name(name)?;
        // SAFETY: `name` is a NUL-terminated string alive for the call.
        match checked(unsafe { libc::unlinkat(self.descriptor.as_raw_fd(), name.as_ptr(), 0) }) {
            Ok(_) => Ok(true),
            Err(error) if matches!(error.raw_os_error(), Some(libc::ENOENT) | Some(libc::EISDIR)) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Rename `from` to `to` in this folder (replacing what `to` named: the name, not a target).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        let folder = self.descriptor.as_raw_fd();
        // SAFETY: both names are NUL-terminated strings alive for the call.
        checked(unsafe { libc::renameat(folder, from.as_ptr(), folder, to.as_ptr()) }).map(|_| ())
    }

    /// The names in this folder.
    pub fn names(&self) -> io::Result<Vec<String>> {
        // SAFETY: as in `from_descriptor`; fdopendir takes ownership of the duplicate.
        let duplicate = checked(unsafe { libc::fcntl(self.descriptor.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) })?;
        // SAFETY: `duplicate` is an open folder descriptor owned by nothing else; on failure it
        // is closed here, on success closedir closes it.
        let stream = unsafe { libc::fdopendir(duplicate) };
        if stream.is_null() {
            let error = io::Error::last_os_error();
            // SAFETY: the duplicate is still ours when fdopendir failed.
            unsafe { libc::close(duplicate) };
            return Err(error);
        }
        // SAFETY: a fresh stream on a duplicate shares its offset with the original: start over.
        unsafe { libc::rewinddir(stream) };
        let mut names = Vec::new();
        loop {
            // SAFETY: `stream` is a valid open stream until closedir below; readdir returns a
            // pointer to an entry valid until the next readdir call, copied out at once.
            let entry = unsafe { libc::readdir(stream) };
            if entry.is_null() {
                break;
            }
            // SAFETY: `d_name` of a returned entry is a NUL-terminated string.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
            if let Ok(name) = name.to_str() {
                if name != "." && name != ".." {
                    names.push(name.to_owned());
                }
            }
        }
        // SAFETY: `stream` is open and closed once.
        unsafe { libc::closedir(stream) };
        Ok(names)
    }
}

/// `descriptor`'s status.
pub fn fstat(descriptor: RawFd) -> io::Result<libc::stat> {
    // SAFETY: `stat` is a plain C struct of integers, all-zero valid; fstat fills it or fails.
    let mut status: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer is to a live `stat` for the whole call.
    checked(unsafe { libc::fstat(descriptor, &mut status) })?;
    Ok(status)
}

/// `file`'s size in bytes.
pub fn size_of(file: &File) -> io::Result<u64> {
    Ok(u64::try_from(fstat(file.as_raw_fd())?.st_size).unwrap_or(0))
}

fn offset_of(offset: u64) -> io::Result<libc::off_t> {
    libc::off_t::try_from(offset).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "an offset past the largest a file has"))
}

/// Fill `parts` from `file` at `offset`, in order, until they are full or the file ends.
/// Returns the bytes read.
pub fn read_at(file: &File, parts: &mut [&mut [u8]], offset: u64) -> io::Result<usize> {
    let mut slices: Vec<IoSliceMut<'_>> = parts.iter_mut().map(|part| IoSliceMut::new(part)).collect();
    let mut slices = &mut slices[..];
    let mut done = 0usize;
    while !slices.is_empty() {
        let count = slices.len().min(MOST_SLICES) as libc::c_int;
        // SAFETY: IoSliceMut is ABI-compatible with `iovec` on Unix (std guarantees it); each
        // points to a live, writable buffer of its length for the whole call.
        let read =
            unsafe { libc::preadv(file.as_raw_fd(), slices.as_ptr() as *const libc::iovec, count, offset_of(offset + done as u64)?) };
        if read == -1 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        if read == 0 {
            break;
        }
        done += read as usize;
        IoSliceMut::advance_slices(&mut slices, read as usize);
    }
    Ok(done)
}

/// Write all of `parts` to `file` at `offset`, in order.
pub fn write_at(file: &File, parts: &[&[u8]], offset: u64) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|part| IoSlice::new(part)).collect();
    let mut slices = &mut slices[..];
    let mut done = 0u64;
    while !slices.is_empty() {
        let count = slices.len().min(MOST_SLICES) as libc::c_int;
        // SAFETY: IoSlice is ABI-compatible with `iovec` on Unix; each points to a live buffer of
        // its length for the whole call.
        let written = unsafe { libc::pwritev(file.as_raw_fd(), slices.as_ptr() as *const libc::iovec, count, offset_of(offset + done)?) };
        if written == -1 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        if written == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "the file took no more bytes"));
        }
        done += written as u64;
        IoSlice::advance_slices(&mut slices, written as usize);
    }
    Ok(())
}

/// An exclusive `flock` on a file, let go of when dropped (or when the process dies: the kernel
/// drops it). One per open file: threads of a process sharing one file must also share a mutex.
pub struct Locked<'a> {
    file: &'a File,
}

impl<'a> Locked<'a> {
    /// Wait for the lock on `file`.
    pub fn exclusive(file: &'a File) -> io::Result<Locked<'a>> {
        loop {
            // SAFETY: flock takes a descriptor and an integer operation.
            match checked(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }) {
                Ok(_) => return Ok(Locked { file }),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            }
        }
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // SAFETY: as in `exclusive`; an error leaves the lock to the file's close.
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }
}
