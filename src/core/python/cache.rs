//! Python binding of the node cache's entries (`storage::cache_entries`): `CacheEntries`, used by
//! `stoker.storage.SampleCache` through its Python `CacheEntries`.
//!
//! The calls keep the GIL: a loop turn's reads or stores take a fraction of a millisecond, and
//! letting go of the GIL there cost the event loop's thread a busy Python thread's switch
//! interval (5 ms) to take it back. Stores of a megabyte or more (blocks, stored from a worker
//! thread) let go of it: their copy into the map is long enough to hold up the other threads.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;

use crate::panic_guard::guard;
use crate::storage::cache_entries::{self, CacheError, Settings};

/// Stores at least this large (all entries of the call together) let go of the GIL.
const DETACH_BYTES: usize = 1 << 20;

/// The entries of a node cache folder, shared by every process that opens it. One per process
/// and folder (LMDB's rule): `close` before a forked child opens the folder again.
#[pyclass(module = "stoker._native", frozen)]
pub struct CacheEntries {
    folder: PathBuf,
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
        PyOSError::new_err(format!("sample cache {}: {error}", self.folder.display()))
    }

    fn handle(&self) -> PyResult<Arc<cache_entries::CacheEntries>> {
        let inner = self.inner.read().map_err(|_| PyOSError::new_err("sample cache: a thread panicked holding it"))?;
        inner.clone().ok_or_else(|| PyOSError::new_err(format!("sample cache {}: closed in this process", self.folder.display())))
    }
}

#[pymethods]
impl CacheEntries {
    /// Open (creating) the environment in `folder`, which must exist.
    #[new]
    #[pyo3(signature = (folder, map_bytes, max_readers, sync))]
    fn new(folder: PathBuf, map_bytes: u64, max_readers: u32, sync: bool) -> PyResult<Self> {
        guard("CacheEntries()", None, || {
            let settings = Settings { map_bytes, max_readers, sync };
            let opened = cache_entries::CacheEntries::open(&folder, settings)
                .map_err(|error| PyOSError::new_err(format!("sample cache {}: cannot open it: {error}", folder.display())))?;
            Ok(CacheEntries { folder, inner: RwLock::new(Some(Arc::new(opened))) })
        })
    }

    /// Each of `keys`' bytes (None where missing), read in one transaction.
    fn get_many<'py>(&self, py: Python<'py>, keys: Vec<PyBackedBytes>) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        guard("CacheEntries.get_many", Some(&self.folder.display()), || {
            let handle = self.handle()?;
            let mut found = Vec::with_capacity(keys.len());
            handle.get_many(&keys, |value| found.push(value.map(|bytes| PyBytes::new(py, bytes)))).map_err(|error| self.error(error))?;
            Ok(found)
        })
    }

    /// Keep each `(key, data)` in one write transaction (oldest entries evicted to stay within
    /// `max_bytes`; one larger than that not kept). Returns how many were kept. `detach`: let go
    /// of the GIL for the transaction whatever its size (the cache's writer thread, which no
    /// event loop waits on).
    #[pyo3(signature = (items, max_bytes, detach=false))]
    fn put_many(&self, py: Python<'_>, items: Vec<(PyBackedBytes, Bound<'_, PyAny>)>, max_bytes: u64, detach: bool) -> PyResult<usize> {
        guard("CacheEntries.put_many", Some(&self.folder.display()), || {
            let handle = self.handle()?;
            let values = items.into_iter().map(|(key, data)| Ok((key, value(py, &data)?))).collect::<PyResult<Vec<_>>>()?;
            let total: usize = values.iter().map(|(_, data)| data.len()).sum();
            // The values are `bytes` objects, immutable and kept alive by `values`: read without the
            // GIL safely.
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
        guard("CacheEntries.size", Some(&self.folder.display()), || self.handle()?.size().map_err(|error| self.error(error)))
    }

    fn __len__(&self) -> PyResult<usize> {
        guard("CacheEntries.__len__", Some(&self.folder.display()), || {
            let entries = self.handle()?.len().map_err(|error| self.error(error))?;
            Ok(usize::try_from(entries).unwrap_or(usize::MAX))
        })
    }

    /// Let go of this process's handle (the entries stay); later calls raise OSError.
    fn close(&self) -> PyResult<()> {
        guard("CacheEntries.close", Some(&self.folder.display()), || {
            let mut inner = self.inner.write().map_err(|_| PyOSError::new_err("sample cache: a thread panicked holding it"))?;
            inner.take();
            Ok(())
        })
    }
}
