//! Python bindings of the packer: `TokenPacker`.

use std::collections::VecDeque;
use std::sync::Mutex;

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::PyDict;

use crate::packing::packer::{Config, Counters, LongDocuments, Packer, Strategy};
use crate::packing::row::{write_rows, BatchArrays, Segment};
use crate::panic_guard::guard;

/// Packs documents into rows; see `stoker.ops.packing.SequencePacker` for the Python API.
#[pyclass(frozen, module = "stoker._native")]
pub struct TokenPacker {
    inner: Mutex<Packer>,
}

fn segments_to_python(segments: &[Segment]) -> Vec<(u64, u32, u32)> {
    segments.iter().map(|segment| (segment.document, segment.start, segment.length)).collect()
}

fn segments_from_python(pieces: Vec<(u64, u32, u32)>) -> Vec<Segment> {
    pieces.into_iter().map(|(document, start, length)| Segment { document, start, length }).collect()
}

/// A zero-filled `rows` x `context` array, or Python's MemoryError naming the size: made by
/// `numpy.zeros`, because `PyArray2::zeros` panics when the memory cannot be had (a context of
/// 10**12 tokens was a `PanicException`, which `except Exception` does not catch).
fn zeros<'py, T: numpy::Element>(py: Python<'py>, rows: usize, context: usize) -> PyResult<Bound<'py, PyArray2<T>>> {
    check_batch_size(rows, context)?;
    let array = py.import("numpy")?.getattr("zeros")?.call1(((rows, context), numpy::dtype::<T>(py)))?;
    Ok(array.cast_into::<PyArray2<T>>()?)
}

/// MemoryError when a batch's four arrays (17 bytes a position) cannot be addressed at all.
fn check_batch_size(rows: usize, context: usize) -> PyResult<()> {
    let bytes = rows.checked_mul(context).and_then(|positions| positions.checked_mul(17));
    if bytes.is_none_or(|bytes| bytes > isize::MAX as usize) {
        return Err(PyMemoryError::new_err(format!("a batch of {rows} rows of {context} tokens is larger than memory can be")));
    }
    Ok(())
}

impl TokenPacker {
    /// The packer, for a thread detached from the interpreter (inside `py.detach`).
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Packer>> {
        self.inner.lock().map_err(|_| PyRuntimeError::new_err("the packer panicked earlier and is unusable"))
    }

    /// The packer, for a thread attached to the interpreter: it waits for the lock detached, so
    /// that a thread holding the lock never waits on one blocked here (for the GIL on a GIL
    /// build, for a stop-the-world pause such as the garbage collector's on a free-threaded
    /// one). No Python object is made while the lock is held, for the same reason.
    fn lock_attached(&self, py: Python<'_>) -> PyResult<std::sync::MutexGuard<'_, Packer>> {
        self.inner.lock_py_attached(py).map_err(|_| PyRuntimeError::new_err("the packer panicked earlier and is unusable"))
    }
}

#[pymethods]
impl TokenPacker {
    #[new]
    #[pyo3(signature = (context, strategy="best_fit", window=1024, long_documents="split", split_across_rows=false))]
    fn new(context: usize, strategy: &str, window: usize, long_documents: &str, split_across_rows: bool) -> PyResult<Self> {
        guard("TokenPacker()", None, || {
            if context == 0 {
                return Err(PyValueError::new_err("context must be positive"));
            }
            if context > i32::MAX as usize {
                // Positions in a row are int32 (as attention kernels take them).
                return Err(PyValueError::new_err(format!("context must be at most {} tokens, got {context}", i32::MAX)));
            }
            let strategy = match strategy {
                "greedy" => Strategy::Greedy,
                "best_fit" if window > 0 => Strategy::BestFit { window },
                "best_fit" => return Err(PyValueError::new_err("window must be positive")),
                other => return Err(PyValueError::new_err(format!("strategy must be \"greedy\" or \"best_fit\", got {other:?}"))),
            };
            let long_documents = match long_documents {
                "split" => LongDocuments::Split,
                "truncate" => LongDocuments::Truncate,
                "drop" => LongDocuments::Drop,
                other => {
                    return Err(PyValueError::new_err(format!("long_documents must be \"split\", \"truncate\" or \"drop\", got {other:?}")))
                }
            };
            let config = Config { context, strategy, long_documents, split_across_rows };
            Ok(TokenPacker { inner: Mutex::new(Packer::new(config)) })
        })
    }

    /// Add documents: `tokens` holds them back to back, `lengths` their sizes; they get ids
    /// `first_document`, `first_document + 1`, ...
    fn push_many(
        &self,
        py: Python<'_>,
        tokens: PyReadonlyArray1<'_, u32>,
        lengths: PyReadonlyArray1<'_, u64>,
        first_document: u64,
    ) -> PyResult<()> {
        guard("TokenPacker.push_many", None, || {
            let tokens = tokens.as_slice()?;
            let lengths = lengths.as_slice()?;
            // Added with a check: a sum that wrapped around past 2^64 could equal the tokens' count
            // while one length alone is past the end (a panic slicing it).
            let total = lengths.iter().try_fold(0u64, |total, &length| total.checked_add(length));
            if total != Some(tokens.len() as u64) {
                let total = total.map_or_else(|| "more than 2^64".to_string(), |total| total.to_string());
                return Err(PyValueError::new_err(format!("lengths add up to {total}, tokens holds {}", tokens.len())));
            }
            // The lock is taken with the GIL released: a thread holding the GIL while waiting for the
            // lock must never wait on a thread that needs the GIL back to release it.
            py.detach(|| -> PyResult<()> {
                let mut packer = self.lock()?;
                let mut at = 0usize;
                for (offset, &length) in lengths.iter().enumerate() {
                    let end = at + length as usize;
                    packer.push(first_document + offset as u64, &tokens[at..end]);
                    at = end;
                }
                Ok(())
            })
        })
    }

    /// No more documents: close every row.
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        guard("TokenPacker.finish", None, || {
            self.lock_attached(py)?.finish();
            Ok(())
        })
    }

    /// Rows finished and not yet taken.
    #[getter]
    fn ready_rows(&self, py: Python<'_>) -> PyResult<usize> {
        guard("TokenPacker.ready_rows", None, || Ok(self.lock_attached(py)?.ready_rows()))
    }

    /// Take up to `rows` finished rows as a batch dict, or None when there is none.
    fn take_batch<'py>(&self, py: Python<'py>, rows: usize, pad_id: i64) -> PyResult<Option<Bound<'py, PyDict>>> {
        guard("TokenPacker.take_batch", None, || {
            let (taken, context) = {
                let mut packer = self.lock_attached(py)?;
                let context = packer.config().context;
                // Checked before the rows are taken, so a batch too large to make loses no row.
                check_batch_size(rows.min(packer.ready_rows()), context)?;
                (packer.take_rows(rows), context)
            };
            if taken.is_empty() {
                return Ok(None);
            }
            let count = taken.len();
            let input_ids = zeros::<i64>(py, count, context)?;
            let position_ids = zeros::<i32>(py, count, context)?;
            let segment_ids = zeros::<i32>(py, count, context)?;
            let loss_mask = zeros::<u8>(py, count, context)?;
            let cu_seqlens = {
                let mut ids = input_ids.readwrite();
                let mut positions = position_ids.readwrite();
                let mut segments = segment_ids.readwrite();
                let mut mask = loss_mask.readwrite();
                let out = BatchArrays {
                    input_ids: ids.as_slice_mut()?,
                    position_ids: positions.as_slice_mut()?,
                    segment_ids: segments.as_slice_mut()?,
                    loss_mask: mask.as_slice_mut()?,
                };
                py.detach(|| write_rows(&taken, context, pad_id, out))
            };
            let mut pieces: Vec<i64> = Vec::new();
            for (row, content) in taken.iter().enumerate() {
                for segment in &content.segments {
                    pieces.extend([row as i64, segment.document as i64, segment.start as i64, segment.length as i64]);
                }
            }
            let segments = PyArray1::from_vec(py, pieces).reshape([count_segments(&taken), 4])?;
            let batch = PyDict::new(py);
            batch.set_item("input_ids", input_ids)?;
            batch.set_item("position_ids", position_ids)?;
            batch.set_item("segment_ids", segment_ids)?;
            batch.set_item("loss_mask", loss_mask)?;
            batch.set_item("cu_seqlens", PyArray1::from_vec(py, cu_seqlens))?;
            batch.set_item("segments", segments)?;
            batch.set_item("real_tokens", taken.iter().map(|row| row.fill()).sum::<usize>())?;
            Ok(Some(batch))
        })
    }

    /// The packer's state as plain data: rows and pieces as (document, start, length) triples.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        guard("TokenPacker.state", None, || {
            // Copied out under the lock, made into Python objects after (see `lock_attached`).
            let (ready, open, pending, counters) = {
                let packer = self.lock_attached(py)?;
                let (ready, open, pending) = packer.state();
                (ready, open, pending, packer.counters)
            };
            let state = PyDict::new(py);
            state.set_item("ready", ready.iter().map(|row| segments_to_python(row)).collect::<Vec<_>>())?;
            state.set_item("open", open.iter().map(|row| segments_to_python(row)).collect::<Vec<_>>())?;
            state.set_item("pending", segments_to_python(&pending))?;
            state.set_item("counters", counters_dict(py, &counters)?)?;
            Ok(state)
        })
    }

    /// Rebuild a state from `state()`; `fetch(document, start, length)` returns those tokens.
    fn restore(&self, state: &Bound<'_, PyDict>, fetch: &Bound<'_, PyAny>) -> PyResult<()> {
        guard("TokenPacker.restore", None, || {
            let get = |name: &str| -> PyResult<Bound<'_, PyAny>> {
                state.get_item(name)?.ok_or_else(|| PyValueError::new_err(format!("packer state has no {name:?}")))
            };
            let ready: Vec<Vec<(u64, u32, u32)>> = get("ready")?.extract()?;
            let open: Vec<Vec<(u64, u32, u32)>> = get("open")?.extract()?;
            let pending: Vec<(u64, u32, u32)> = get("pending")?.extract()?;
            let counters_in = get("counters")?;
            let number = |name: &str| -> PyResult<u64> { counters_in.get_item(name)?.extract() };
            let counters = Counters {
                documents: number("documents")?,
                empty_documents: number("empty_documents")?,
                tokens_in: number("tokens_in")?,
                tokens_dropped: number("tokens_dropped")?,
                rows: number("rows")?,
                tokens_packed: number("tokens_packed")?,
            };
            let ready: Vec<Vec<Segment>> = ready.into_iter().map(segments_from_python).collect();
            let open: Vec<Vec<Segment>> = open.into_iter().map(segments_from_python).collect();
            let pending = segments_from_python(pending);
            // Every piece's tokens first, calling Python without the packer's lock held (a `fetch`
            // that reads storage may take long, or call back into this packer), in the order
            // `restore` asks for them: the ready rows, the open rows, then the pending pieces.
            let mut fetched: VecDeque<Vec<u32>> = VecDeque::new();
            for segment in ready.iter().chain(open.iter()).flatten().chain(pending.iter()) {
                let (document, start, length) = (segment.document, segment.start, segment.length);
                let tokens: Vec<u32> = fetch.call1((document, start, length))?.extract()?;
                if tokens.len() != length as usize {
                    return Err(PyValueError::new_err(format!(
                        "document {document}: fetch gave {} tokens for a piece of {length}",
                        tokens.len()
                    )));
                }
                fetched.push_back(tokens);
            }
            self.lock_attached(state.py())?
                .restore(&ready, &open, &pending, counters, |document, _, _| {
                    fetched.pop_front().ok_or_else(|| format!("document {document}: no fetched tokens left for this piece"))
                })
                .map_err(PyValueError::new_err)
        })
    }

    /// Counters: documents, empty_documents, tokens_in, tokens_dropped, rows, tokens_packed.
    #[getter]
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        guard("TokenPacker.counters", None, || {
            let counters = self.lock_attached(py)?.counters;
            counters_dict(py, &counters)
        })
    }
}

fn count_segments(rows: &[crate::packing::row::Row]) -> usize {
    rows.iter().map(|row| row.segments.len()).sum()
}

fn counters_dict<'py>(py: Python<'py>, counters: &Counters) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("documents", counters.documents)?;
    dict.set_item("empty_documents", counters.empty_documents)?;
    dict.set_item("tokens_in", counters.tokens_in)?;
    dict.set_item("tokens_dropped", counters.tokens_dropped)?;
    dict.set_item("rows", counters.rows)?;
    dict.set_item("tokens_packed", counters.tokens_packed)?;
    Ok(dict)
}
