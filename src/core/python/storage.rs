//! Python bindings of explicit I/O and listing: `read_ranges` (coalesced positional reads),
//! `crc32`, `list_tree` (a parallel folder walk), `key_hashes` (sample keys' 128-bit hashes).

use std::ffi::OsString;
use std::path::PathBuf;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::storage::coalesce::Request;
use numpy::{PyArray1, PyReadonlyArray1};

use crate::panic_guard::guard;
use crate::storage::{byte_locks, checksum, key_hash, listing, read};

/// Buffers at least this large are checksummed without the GIL; below it, releasing and taking
/// the GIL back costs more than the work.
const DETACH_BYTES: usize = 64 * 1024;

/// zlib's CRC-32 of `data` (the value `zlib.crc32` gives), with the CPU's carry-less multiply.
#[pyfunction]
pub fn crc32(py: Python<'_>, data: &[u8]) -> PyResult<u32> {
    guard("crc32", None, || if data.len() >= DETACH_BYTES { Ok(py.detach(|| checksum::crc32(data))) } else { Ok(checksum::crc32(data)) })
}

fn to_python_error(error: std::io::Error) -> PyErr {
    match error.kind() {
        std::io::ErrorKind::NotFound => pyo3::exceptions::PyFileNotFoundError::new_err(error.to_string()),
        std::io::ErrorKind::PermissionDenied => pyo3::exceptions::PyPermissionError::new_err(error.to_string()),
        _ => PyOSError::new_err(error.to_string()),
    }
}

/// Take an exclusive lock on the byte at each of `offsets`, each in the open file of the same
/// place in `handles`, never waiting: whether each is now this process's (false: another
/// process holds it). Holds the GIL (a call of microseconds; letting go of the GIL and waiting
/// for it back costs more). On an error other than a holder, the locks this call took are let
/// go of.
#[cfg(unix)]
#[pyfunction]
pub fn lock_bytes(handles: Vec<i32>, offsets: Vec<u64>) -> PyResult<Vec<bool>> {
    guard("lock_bytes", None, || byte_locks::try_lock_bytes(&byte_pairs(handles, offsets)?).map_err(to_python_error))
}

/// Let go of this process's locks on the byte at each of `offsets`, each in the open file of
/// the same place in `handles` (each tried; the first error raised). Holds the GIL, as
/// `lock_bytes` does.
#[cfg(unix)]
#[pyfunction]
pub fn unlock_bytes(handles: Vec<i32>, offsets: Vec<u64>) -> PyResult<()> {
    guard("unlock_bytes", None, || byte_locks::unlock_bytes(&byte_pairs(handles, offsets)?).map_err(to_python_error))
}

#[cfg(unix)]
fn byte_pairs(handles: Vec<i32>, offsets: Vec<u64>) -> PyResult<Vec<(i32, u64)>> {
    if handles.len() != offsets.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{} handles for {} offsets: one handle per offset",
            handles.len(),
            offsets.len()
        )));
    }
    Ok(handles.into_iter().zip(offsets).collect())
}

/// Walk each folder of `folders` (in parallel, GIL released) for files whose lower-cased names
/// end in one of `extensions`. Returns, per folder, (sorted file paths relative to `base`,
/// [(folder, mtime_ns) of every folder visited], [(path, why) of every entry skipped]: why is 0
/// for a folder already walked, else the OS error number).
/// One folder's listing as Python receives it: (files, [(folder, mtime in ns)], [(path, why)]).
type FolderListing = (Vec<OsString>, Vec<(OsString, i64)>, Vec<(OsString, i32)>);

#[pyfunction]
#[pyo3(signature = (folders, base, extensions, threads=8))]
pub fn list_tree(
    py: Python<'_>,
    folders: Vec<PathBuf>,
    base: PathBuf,
    extensions: Vec<String>,
    threads: usize,
) -> PyResult<Vec<FolderListing>> {
    guard("list_tree", Some(&base.display()), || {
        let listings = py.detach(|| listing::walk_all(&folders, &base, &extensions, threads)).map_err(to_python_error)?;
        Ok(listings.into_iter().map(|listing| (listing.files, listing.folders, listing.skipped)).collect())
    })
}

/// Read `(offset, length)` ranges of the file at `path`, coalescing nearby ones into reads of at
/// most `max_read` bytes across gaps of at most `max_gap`. Returns bytes in request order. The GIL
/// is released during the reads.
#[pyfunction]
#[pyo3(signature = (path, ranges, max_gap=65536, max_read=8388608))]
pub fn read_ranges<'py>(
    py: Python<'py>,
    path: PathBuf,
    ranges: Vec<(u64, u64)>,
    max_gap: u64,
    max_read: u64,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    guard("read_ranges", Some(&path.display()), || {
        if max_read == 0 {
            return Err(PyValueError::new_err("max_read must be positive"));
        }
        let requests: Vec<Request> = ranges.into_iter().map(|(offset, length)| Request { offset, length }).collect();
        let buffers = py.detach(|| read::read_ranges(&path, &requests, max_gap, max_read)).map_err(to_python_error)?;
        Ok(buffers.iter().map(|buffer| PyBytes::new(py, buffer)).collect())
    })
}

/// Each key's two hash halves, as Python receives them.
type KeyHashHalves<'py> = (Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<u64>>);

/// The 128-bit hashes (two uint64 arrays, a pair a key) of the keys laid out as an Arrow large
/// string array lays them out: key i is `data[offsets[i]:offsets[i + 1]]`. In parallel, without
/// the GIL. Raises ValueError naming the first offset outside `data` or below the one before it.
#[pyfunction]
pub fn key_hashes<'py>(
    py: Python<'py>,
    offsets: PyReadonlyArray1<'py, i64>,
    data: PyReadonlyArray1<'py, u8>,
) -> PyResult<KeyHashHalves<'py>> {
    guard("key_hashes", None, || {
        let offsets = offsets.as_slice()?;
        let data = data.as_slice()?;
        let (first, second) = py.detach(|| key_hash::hash_keys(offsets, data)).map_err(|error| PyValueError::new_err(error.to_string()))?;
        Ok((PyArray1::from_vec(py, first), PyArray1::from_vec(py, second)))
    })
}
