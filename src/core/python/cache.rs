//! Python binding of the node cache's entries (`storage::cache_entries`): `CacheEntries`, used by
//! `stoker.storage.SampleCache` through its Python `CacheEntries`.
//!
//! The calls keep the GIL: a loop turn's reads or stores take a fraction of a millisecond, and
//! letting go of the GIL there cost the event loop's thread a busy Python thread's switch
//! interval (5 ms) to take it back. Stores of a megabyte or more (blocks, stored from a worker
//! thread) let go of it: their copy into the file is long enough to hold up the other threads.

use std::sync::{Arc, RwLock};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;

use crate::panic_guard::guard;
use crate::storage::cache_entries::{self, CacheError, Settings};

/// Stores at least this large (all entries of the call together) let go of the GIL.
const DETACH_BYTES: usize = 1 << 20;

/// The entries of a node cache folder, shared by every process that opens it; opened through
/// the folder's descriptor, never a path (`stoker._bounded.private_folder` checked the folder).
#[pyclass(module = "stoker._native", frozen)]
pub struct CacheEntries {
    folder: String,
    inner: RwLock<Option<Arc<cache_entries::CacheEntries>>>,
}

/// The bytes of a value to store: a `bytes` object as it is, any other buffer (a memoryview)
/// copied into one.
fn value(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<PyBackedBytes> {
    if let Ok(bytes) = data.extract::<PyBackedBytes>() {
        return Ok(bytes);
    }
    py.get_type::<PyBytes>().call1((data,))?.extract::<PyBackedBytes>().map_err(PyErr::from)
}

impl CacheEntries {
    fn error(&self, error: CacheError) -> PyErr {
        PyOSError::new_err(format!("sample cache {}: {error}", self.folder))
    }

    fn handle(&self) -> PyResult<Arc<cache_entries::CacheEntries>> {
        let inner = self.inner.read().map_err(|_| PyOSError::new_err("sample cache: a thread panicked holding it"))?;
        inner.clone().ok_or_else(|| PyOSError::new_err(format!("sample cache {}: closed in this process", self.folder)))
    }
}

#[pymethods]
impl CacheEntries {
    /// Open (making, or emptying when written in another boot or damaged) the entries in the
    /// folder open as `folder_descriptor` (duplicated; the caller keeps its own). `folder`: its
    /// name in messages. `boot`: this boot's id (None: not known, and `sync` should be set).
    #[new]
    #[pyo3(signature = (folder_descriptor, folder, sync, boot=None))]
    fn new(folder_descriptor: i32, folder: String, sync: bool, boot: Option<String>) -> PyResult<Self> {
        guard("CacheEntries()", Some(&folder.clone()), || {
            let opened = cache_entries::CacheEntries::open(folder_descriptor, Settings { sync, boot })
                .map_err(|error| PyOSError::new_err(format!("sample cache {folder}: cannot open it: {error}")))?;
            Ok(CacheEntries { folder, inner: RwLock::new(Some(Arc::new(opened))) })
        })
    }

    /// Each of `keys`' bytes (None where missing, or where its record fails its checks).
    fn get_many<'py>(&self, py: Python<'py>, keys: Vec<PyBackedBytes>) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        guard("CacheEntries.get_many", Some(&self.folder), || {
            let handle = self.handle()?;
            let located = handle.locate_many(&keys).map_err(|error| self.error(error))?;
            let mut found = Vec::with_capacity(keys.len());
            for (key, located) in keys.iter().zip(located) {
                let Some(located) = located else {
                    found.push(None);
                    continue;
                };
                // The record is read straight into the bytes object returned (its size checked
                // against the segment file's own size when located), then checked whole.
                let mut whole = false;
                let bytes = PyBytes::new_with(py, located.length, |buffer| {
                    whole = handle.read_located(key, &located, buffer);
                    Ok(())
                })?;
                found.push(whole.then_some(bytes));
            }
            Ok(found)
        })
    }

    /// Keep each `(key, data)` in one store (oldest entries removed to stay within `max_bytes`;
    /// one larger than that not kept). Returns how many were kept. `detach`: let go of the GIL
    /// for the store whatever its size (the cache's writer thread, which no event loop waits on).
    #[pyo3(signature = (items, max_bytes, detach=false))]
    fn put_many(&self, py: Python<'_>, items: Vec<(PyBackedBytes, Bound<'_, PyAny>)>, max_bytes: u64, detach: bool) -> PyResult<usize> {
        guard("CacheEntries.put_many", Some(&self.folder), || {
            let handle = self.handle()?;
            let values = items.into_iter().map(|(key, data)| Ok((key, value(py, &data)?))).collect::<PyResult<Vec<_>>>()?;
            let total: usize = values.iter().map(|(_, data)| data.len()).sum();
            // The values are `bytes` objects, immutable and kept alive by `values`: read without
            // the GIL safely.
            let kept = if detach || total >= DETACH_BYTES {
                py.detach(|| handle.put_many(&values, max_bytes))
            } else {
                handle.put_many(&values, max_bytes)
            };
            kept.map_err(|error| self.error(error))
        })
    }

    /// Bytes charged to the entries held now, for all processes.
    fn size(&self) -> PyResult<u64> {
        guard("CacheEntries.size", Some(&self.folder), || self.handle()?.size().map_err(|error| self.error(error)))
    }

    fn __len__(&self) -> PyResult<usize> {
        guard("CacheEntries.__len__", Some(&self.folder), || {
            let entries = self.handle()?.len().map_err(|error| self.error(error))?;
            Ok(usize::try_from(entries).unwrap_or(usize::MAX))
        })
    }

    /// What to tell the user since the last call, each once: `(level, text)` pairs, level
    /// `"info"` or `"warning"` (the store emptied and why, entries that failed their checks).
    fn notices(&self) -> PyResult<Vec<(&'static str, String)>> {
        guard("CacheEntries.notices", Some(&self.folder), || Ok(self.handle()?.notices()))
    }

    /// Let go of this process's handle (the entries stay); later calls raise OSError.
    fn close(&self) -> PyResult<()> {
        guard("CacheEntries.close", Some(&self.folder), || {
            let mut inner = self.inner.write().map_err(|_| PyOSError::new_err("sample cache: a thread panicked holding it"))?;
            inner.take();
            Ok(())
        })
    }
}
