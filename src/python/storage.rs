//! Python bindings of explicit I/O: `read_ranges`.

use std::path::PathBuf;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::storage::coalesce::Request;
use crate::storage::read;

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
    if max_read == 0 {
        return Err(PyValueError::new_err("max_read must be positive"));
    }
    let requests: Vec<Request> = ranges.into_iter().map(|(offset, length)| Request { offset, length }).collect();
    let buffers = py
        .detach(|| read::read_ranges(&path, &requests, max_gap, max_read))
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => pyo3::exceptions::PyFileNotFoundError::new_err(error.to_string()),
            std::io::ErrorKind::PermissionDenied => pyo3::exceptions::PyPermissionError::new_err(error.to_string()),
            _ => PyOSError::new_err(error.to_string()),
        })?;
    Ok(buffers.iter().map(|buffer| PyBytes::new(py, buffer)).collect())
}
